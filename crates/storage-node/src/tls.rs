//! The storage node's half of slice TLS (see `svs_common::slice_tls`): its key
//! pair and the certificate its slice server presents, either issued by
//! the control plane's CA (`slicetls: issued`) or the operator's own
//! (`slice_tls_cert`/`slice_tls_key`, `slicetls: own`).
//!
//! The key is made once and kept in `state_dir` (0600); only its public
//! half is ever sent. The certificate is swapped under the running slice
//! server (a certificate resolver), so a renewal needs no restart and no
//! connection is cut.

use super::client::StorageNodeRegistered;
use super::config::StorageNodeConfig;
use super::StorageNodeError;
use rcgen::KeyPair;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use svs_common::slice_tls::{SliceTlsMode, RENEW_BEFORE_DAYS};
use time::OffsetDateTime;

/// In `state_dir`: the node's slice key (never leaves the node).
pub const KEY_FILE: &str = "slice-key.pem";
/// In `state_dir`: the certificate the control plane issued.
pub const CERT_FILE: &str = "slice-cert.pem";
/// In `state_dir`: what that certificate is (CA, address, end).
pub const CERT_INFO_FILE: &str = "slice-cert.json";

/// What is known of an issued certificate without parsing it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct CertInfo {
    /// SHA-256 fingerprint of the CA that issued it.
    ca: String,
    /// The slice address it was issued for.
    address: String,
    /// Unix seconds.
    not_after: i64,
}

/// The certificate the slice server presents, swapped in place.
#[derive(Debug, Default)]
pub struct SwappableCert(RwLock<Option<Arc<CertifiedKey>>>);

impl ResolvesServerCert for SwappableCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        // A poisoned lock still holds a whole Arc.
        match self.0.read() {
            Ok(held) => held.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

impl SwappableCert {
    fn set(&self, key: Arc<CertifiedKey>) {
        match self.0.write() {
            Ok(mut held) => *held = Some(key),
            Err(poisoned) => *poisoned.into_inner() = Some(key),
        }
    }
}

/// The node's slice TLS.
pub struct NodeTls {
    state_dir: PathBuf,
    /// `Some` with `slice_tls_cert`: the operator's certificate, served
    /// whatever the control plane issues.
    own: bool,
    /// The node's own key pair (not with `own`).
    key: Option<KeyPair>,
    /// The issued certificate held (not with `own`).
    issued: Option<CertInfo>,
    /// The CA the control plane issues with, from its last answer.
    known_ca: Option<String>,
    /// The control plane's slice TLS, from its last answer (`None` before
    /// the first): a key is sent only while it may issue.
    known_mode: Option<SliceTlsMode>,
    resolver: Arc<SwappableCert>,
}

impl NodeTls {
    /// Loads the operator's certificate (`slice_tls_cert`), or the node's
    /// key (made on first start) and the certificate it was issued last.
    pub fn load(config: &StorageNodeConfig) -> Result<NodeTls, StorageNodeError> {
        let resolver = Arc::new(SwappableCert::default());
        let state_dir = config.state_dir.clone();
        if let (Some(cert), Some(key)) = (&config.slice_tls_cert, &config.slice_tls_key) {
            let chain =
                svs_common::tls::load_chain(cert, "slice_tls_cert").map_err(config_error)?;
            let pem = std::fs::read(key).map_err(|e| {
                config_error(format!(
                    "slice_tls_key {}: cannot read it: {e}",
                    key.display()
                ))
            })?;
            let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
                config_error(format!(
                    "slice_tls_key {}: no private key in it: {e}",
                    config
                        .slice_tls_key
                        .as_deref()
                        .unwrap_or(Path::new(""))
                        .display()
                ))
            })?;
            resolver.set(certified(chain, key)?);
            return Ok(NodeTls {
                state_dir,
                own: true,
                key: None,
                issued: None,
                known_ca: None,
                known_mode: None,
                resolver,
            });
        }
        let key = load_or_make_key(&state_dir.join(KEY_FILE))?;
        let mut tls = NodeTls {
            state_dir,
            own: false,
            key: Some(key),
            issued: None,
            known_ca: None,
            known_mode: None,
            resolver,
        };
        // A damaged or missing certificate is simply asked for again.
        if let Some((info, chain)) = tls.stored_certificate() {
            if let Ok(c) = tls.certified_with_own_key(chain) {
                tls.resolver.set(c);
                tls.issued = Some(info);
            }
        }
        Ok(tls)
    }

    /// The public key (PEM) to send with this registration: when the node
    /// has no certificate of the control plane's CA for `address` with at
    /// least `RENEW_BEFORE_DAYS` left. Never with the operator's own, nor
    /// to a control plane that said it issues none.
    pub fn wanted_public_key(&self, address: SocketAddr, now: OffsetDateTime) -> Option<String> {
        let key = self.key.as_ref()?;
        if self.known_mode.is_some_and(|m| m != SliceTlsMode::Issued) {
            return None;
        }
        let renew_at = |info: &CertInfo| {
            info.not_after - time::Duration::days(RENEW_BEFORE_DAYS).whole_seconds()
        };
        let good = self.issued.as_ref().is_some_and(|info| {
            info.address == address.to_string()
                && now.unix_timestamp() < renew_at(info)
                && self.known_ca.as_ref().is_none_or(|ca| *ca == info.ca)
        });
        (!good).then(|| key.public_key_pem())
    }

    /// Takes a registration answer: the CA it names, and the certificate
    /// it issued (stored and served from now on). `Err` when the answer is
    /// unusable (a certificate not for this node's key).
    pub fn accept(
        &mut self,
        answer: &StorageNodeRegistered,
        address: SocketAddr,
    ) -> Result<(), StorageNodeError> {
        if !answer.sliceca.is_empty() {
            self.known_ca = Some(answer.sliceca.clone());
        }
        // An answer without it is from a control plane before slice TLS.
        self.known_mode = Some(SliceTlsMode::parse(&answer.slicetls).unwrap_or(SliceTlsMode::Off));
        if answer.slicecertificate.is_empty() || self.own {
            return Ok(());
        }
        let chain = CertificateDer::pem_slice_iter(answer.slicecertificate.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| StorageNodeError::Io(format!("the slice certificate answered: {e}")))?;
        let not_after = OffsetDateTime::parse(
            &answer.slicecertificateexpires,
            &time::format_description::well_known::Rfc3339,
        )
        .map_err(|e| {
            StorageNodeError::Io(format!(
                "the slice certificate's end '{}': {e}",
                answer.slicecertificateexpires
            ))
        })?;
        let certified = self.certified_with_own_key(chain)?;
        let info = CertInfo {
            ca: answer.sliceca.clone(),
            address: address.to_string(),
            not_after: not_after.unix_timestamp(),
        };
        let info_json =
            serde_json::to_vec(&info).map_err(|e| StorageNodeError::Io(e.to_string()))?;
        write_private(
            &self.state_dir.join(CERT_FILE),
            answer.slicecertificate.as_bytes(),
        )?;
        write_private(&self.state_dir.join(CERT_INFO_FILE), &info_json)?;
        self.resolver.set(certified);
        self.issued = Some(info);
        tracing::info!(expires = %answer.slicecertificateexpires, "slice certificate issued by the control plane's CA");
        Ok(())
    }

    /// Whether the slice server can serve `mode` now; why not, else.
    pub fn ready_for(&self, mode: SliceTlsMode) -> Result<(), String> {
        match mode {
            SliceTlsMode::Off if self.own => Err(
                "slice_tls_cert is set, but the service does not use TLS (its slice clients \
                 connect in plain text): remove slice_tls_cert/slice_tls_key, or give the \
                 service TLS"
                    .into(),
            ),
            SliceTlsMode::Off => Ok(()),
            SliceTlsMode::Own if !self.own => Err(
                "the service uses TLS with its own certificate (tls_cert), so it issues no slice \
                 certificates: set slice_tls_cert and slice_tls_key in this node's configuration"
                    .into(),
            ),
            SliceTlsMode::Own => Ok(()),
            SliceTlsMode::Issued if self.own => Ok(()),
            SliceTlsMode::Issued => match (&self.issued, &self.known_ca) {
                (Some(info), Some(ca)) if info.ca == *ca => Ok(()),
                _ => Err("waiting for a slice certificate from the control plane's CA".into()),
            },
        }
    }

    /// The slice server's TLS for `mode` (`None`: plain TCP).
    pub fn server_config(
        &self,
        mode: SliceTlsMode,
    ) -> Result<Option<Arc<rustls::ServerConfig>>, StorageNodeError> {
        if mode == SliceTlsMode::Off {
            return Ok(None);
        }
        let resolver: Arc<dyn ResolvesServerCert> = self.resolver.clone();
        let config =
            rustls::ServerConfig::builder_with_provider(svs_common::tls::crypto_provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| config_error(format!("TLS: {e}")))?
                .with_no_client_auth()
                .with_cert_resolver(resolver);
        Ok(Some(Arc::new(config)))
    }

    fn stored_certificate(&self) -> Option<(CertInfo, Vec<CertificateDer<'static>>)> {
        let info = std::fs::read(self.state_dir.join(CERT_INFO_FILE)).ok()?;
        let info: CertInfo = serde_json::from_slice(&info).ok()?;
        let pem = std::fs::read(self.state_dir.join(CERT_FILE)).ok()?;
        let chain = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .ok()?;
        Some((info, chain))
    }

    fn certified_with_own_key(
        &self,
        chain: Vec<CertificateDer<'static>>,
    ) -> Result<Arc<CertifiedKey>, StorageNodeError> {
        let key = self
            .key
            .as_ref()
            .ok_or_else(|| StorageNodeError::Io("no slice key".into()))?;
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        certified(chain, der)
    }
}

fn config_error(message: String) -> StorageNodeError {
    StorageNodeError::Config(message)
}

/// The chain with its key, checked to belong together.
fn certified(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<CertifiedKey>, StorageNodeError> {
    if chain.is_empty() {
        return Err(StorageNodeError::Io(
            "a slice certificate without a certificate".into(),
        ));
    }
    let provider = svs_common::tls::crypto_provider();
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| StorageNodeError::Io(format!("slice key: {e}")))?;
    let certified = CertifiedKey::new(chain, signing);
    certified.keys_match().map_err(|e| {
        StorageNodeError::Io(format!("the slice certificate is not for this key: {e}"))
    })?;
    Ok(Arc::new(certified))
}

/// The node's key pair: read, or made and written (0600) on first start.
fn load_or_make_key(path: &Path) -> Result<KeyPair, StorageNodeError> {
    match std::fs::read_to_string(path) {
        Ok(pem) => KeyPair::from_pem(&pem).map_err(|e| {
            StorageNodeError::Config(format!(
                "slice key {}: unusable ({e}); remove it to make a new one",
                path.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = KeyPair::generate()
                .map_err(|e| StorageNodeError::Io(format!("cannot make the slice key: {e}")))?;
            write_private(path, key.serialize_pem().as_bytes())?;
            tracing::info!(file = %path.display(), "made the slice key");
            Ok(key)
        }
        Err(e) => Err(StorageNodeError::Io(format!(
            "slice key {}: cannot read it: {e}",
            path.display()
        ))),
    }
}

/// An owner-only file (see [`svs_common::secret_files::write_private`]).
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), StorageNodeError> {
    svs_common::secret_files::write_private(path, bytes)
        .map_err(|e| StorageNodeError::Io(format!("cannot write {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use svs_common::slice_tls::SliceTls;

    fn answer(
        tls: &SliceTls,
        issued: Option<svs_common::slice_tls::IssuedCertificate>,
    ) -> StorageNodeRegistered {
        StorageNodeRegistered {
            slicecredential: "c".into(),
            heartbeatseconds: 3,
            slicetls: tls.mode().as_str().into(),
            sliceca: tls.ca_fingerprint().unwrap_or_default().into(),
            slicecertificateexpires: issued
                .as_ref()
                .and_then(|i| {
                    i.not_after
                        .format(&time::format_description::well_known::Rfc3339)
                        .ok()
                })
                .unwrap_or_default(),
            slicecertificate: issued.map(|i| i.pem).unwrap_or_default(),
        }
    }

    fn node_config(state: &Path) -> StorageNodeConfig {
        StorageNodeConfig {
            api: "https://127.0.0.1:1".into(),
            node: "sn-1".into(),
            credential_file: state.join("c"),
            slice_listen: "127.0.0.1:7450".parse().expect("address"),
            slice_advertise: None,
            front_listen: None,
            front_advertise: None,
            state_dir: state.to_path_buf(),
            slice_tls_cert: None,
            slice_tls_key: None,
            nbd_tcp_congestion: "cubic".into(),
            media: Vec::new(),
        }
    }

    #[test]
    fn a_node_keeps_its_key_asks_for_a_certificate_when_it_needs_one_and_stores_it_0600() {
        use std::os::unix::fs::PermissionsExt;
        let ca_dir = tempfile::tempdir().expect("dir");
        let tls_dir = ca_dir.path().join("tls");
        svs_common::tls::auto_certificates(&tls_dir, &["localhost".into()]).expect("CA");
        let service = SliceTls::with_ca(&tls_dir, Vec::new()).expect("slice tls");
        let state = tempfile::tempdir().expect("state");
        let config = node_config(state.path());
        let address: SocketAddr = "127.0.0.1:7450".parse().expect("address");
        let now = OffsetDateTime::now_utc();

        let mut node = NodeTls::load(&config).expect("node tls");
        let mode = std::fs::metadata(state.path().join(KEY_FILE))
            .expect("key file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            node.ready_for(SliceTlsMode::Issued),
            Err("waiting for a slice certificate from the control plane's CA".into())
        );
        let public = node.wanted_public_key(address, now).expect("asks");
        assert!(public.starts_with("-----BEGIN PUBLIC KEY-----"), "{public}");
        let issued = service
            .issue("sn-1", address.ip(), &public)
            .expect("issued");
        node.accept(&answer(&service, Some(issued)), address)
            .expect("accepted");
        assert_eq!(node.ready_for(SliceTlsMode::Issued), Ok(()));
        assert_eq!(node.wanted_public_key(address, now), None);
        // Another address, or the end near: asks again.
        let moved: SocketAddr = "127.0.0.2:7450".parse().expect("address");
        assert!(node.wanted_public_key(moved, now).is_some());
        let later = now + time::Duration::days(svs_common::slice_tls::SLICE_CERT_DAYS - 29);
        assert!(node.wanted_public_key(address, later).is_some());

        // A restart keeps the key and the certificate.
        let again = NodeTls::load(&config).expect("reloaded");
        assert_eq!(again.wanted_public_key(address, now), None);
        assert_eq!(
            again.key.as_ref().map(KeyPair::public_key_pem),
            Some(public)
        );
        for file in [KEY_FILE, CERT_FILE, CERT_INFO_FILE] {
            let mode = std::fs::metadata(state.path().join(file))
                .expect("file")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{file}");
        }

        // The control plane has a new CA: the old certificate is worthless.
        let mut again = again;
        std::fs::remove_dir_all(&tls_dir).expect("CA removed");
        svs_common::tls::auto_certificates(&tls_dir, &["localhost".into()]).expect("new CA");
        let renewed = SliceTls::with_ca(&tls_dir, Vec::new()).expect("slice tls");
        again
            .accept(&answer(&renewed, None), address)
            .expect("accepted");
        assert!(again.ready_for(SliceTlsMode::Issued).is_err());
        assert!(again.wanted_public_key(address, now).is_some());
    }

    #[test]
    fn a_certificate_for_another_key_is_refused() {
        let ca_dir = tempfile::tempdir().expect("dir");
        let tls_dir = ca_dir.path().join("tls");
        svs_common::tls::auto_certificates(&tls_dir, &["localhost".into()]).expect("CA");
        let service = SliceTls::with_ca(&tls_dir, Vec::new()).expect("slice tls");
        let state = tempfile::tempdir().expect("state");
        let mut node = NodeTls::load(&node_config(state.path())).expect("node tls");
        let other = KeyPair::generate().expect("key");
        let address: SocketAddr = "127.0.0.1:7450".parse().expect("address");
        let issued = service
            .issue("sn-1", address.ip(), &other.public_key_pem())
            .expect("issued");
        let err = node
            .accept(&answer(&service, Some(issued)), address)
            .expect_err("refused");
        assert!(err.to_string().contains("not for this key"), "{err}");
        assert!(node.ready_for(SliceTlsMode::Issued).is_err());
    }

    #[test]
    fn modes_the_node_cannot_serve_say_what_to_configure() {
        let state = tempfile::tempdir().expect("state");
        let mut node = NodeTls::load(&node_config(state.path())).expect("node tls");
        let address: SocketAddr = "127.0.0.1:7450".parse().expect("address");
        let now = OffsetDateTime::now_utc();
        // The first registration offers the key; a service without TLS
        // is not offered it again.
        assert!(node.wanted_public_key(address, now).is_some());
        node.accept(&answer(&SliceTls::off(), None), address)
            .expect("accepted");
        assert_eq!(node.wanted_public_key(address, now), None);
        assert_eq!(node.ready_for(SliceTlsMode::Off), Ok(()));
        let err = node.ready_for(SliceTlsMode::Own).expect_err("own");
        assert!(
            err.contains("set slice_tls_cert and slice_tls_key"),
            "{err}"
        );
    }
}
