//! TLS of the slice protocol, between the control plane's data plane
//! (`svs serve`, the front of every volume for now) and the storage nodes'
//! slice servers: the control plane's half (issuing the nodes' slice
//! certificates and trusting them) and what both halves share.
//!
//! The slice protocol uses TLS exactly when the service does:
//!
//! - `tls = "auto"` ([`SliceTlsMode::Issued`]): svs's private CA vouches for
//!   every node's slice server. A node makes its own key pair (kept, 0600,
//!   in its state directory: the private key never leaves the node) and
//!   sends its public key with a registration when it needs a certificate;
//!   the answer carries a certificate signed by the CA for the node's slice
//!   address (the one name it is valid for, whatever the node asks), valid
//!   [`SLICE_CERT_DAYS`] days. The node asks again when its certificate has
//!   less than [`RENEW_BEFORE_DAYS`] days left, when its slice address
//!   changed, and when the CA is another (the answer names the CA by its
//!   fingerprint).
//! - `tls_cert`/`tls_key` ([`SliceTlsMode::Own`]): svs has no CA key to
//!   sign with, so each node serves the certificate its operator configured
//!   (`slice_tls_cert`/`slice_tls_key` in the node's configuration), and
//!   `svs serve` verifies it against `slice_tls_ca` (else the built-in
//!   roots).
//! - TLS off ([`SliceTlsMode::Off`], the embedded/loopback default): plain
//!   TCP, as the API is plain HTTP.
//!
//! Either way the control plane connects with the node's slice address IP
//! as the TLS server name; a certificate not from a trusted CA, or not for
//! that address, is refused before the hello (and so before the slice
//! credential is sent).

use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PublicKeyData, SerialNumber, SignatureAlgorithm,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, SubjectPublicKeyInfoDer};
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use svs_sliceproto::ClientTls;

/// How long a slice certificate svs issues is valid.
pub const SLICE_CERT_DAYS: i64 = 90;
/// A node asks for a new certificate when its own has less than this left.
pub const RENEW_BEFORE_DAYS: i64 = 30;
/// Longest public key a registration may carry (PEM).
pub const MAX_PUBLIC_KEY_PEM: usize = 4096;

/// How fronts reach storage nodes' slice servers (the registration
/// answer's `slicetls`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SliceTlsMode {
    /// Plain TCP: the service has no TLS.
    Off,
    /// TLS with a certificate svs's CA issues to the node.
    Issued,
    /// TLS with the node's own certificate (`slice_tls_cert`).
    Own,
}

svs_domain::svs_names!(SliceTlsMode {
    Off = "off",
    Issued = "issued",
    Own = "own",
});

/// A slice certificate issued to a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedCertificate {
    /// PEM, the node's certificate alone (the CA is what fronts trust).
    pub pem: String,
    /// End of its validity.
    pub not_after: time::OffsetDateTime,
}

/// The control plane's slice TLS: how it connects to nodes, and (with its
/// own CA) how it issues their certificates.
pub struct SliceTls {
    mode: SliceTlsMode,
    /// `Issued` only.
    ca: Option<SliceCa>,
    /// What the data plane trusts; `None` with TLS off.
    client: Option<Arc<rustls::ClientConfig>>,
    /// The same roots as PEM, for fronts on storage nodes (empty with TLS
    /// off, and when the built-in roots are trusted).
    roots_pem: Vec<String>,
}

struct SliceCa {
    /// PEM; parsed at each issue (rare: one per node per renewal).
    key_pem: String,
    fingerprint: String,
}

/// One certificate as PEM ("CERTIFICATE", 64 characters a line).
fn certificate_pem(der: &[u8]) -> String {
    use base64::Engine;
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in body.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

impl std::fmt::Debug for SliceTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SliceTls")
            .field("mode", &self.mode)
            .field("ca", &self.ca_fingerprint())
            .finish()
    }
}

impl SliceTls {
    /// Plain TCP.
    pub fn off() -> SliceTls {
        SliceTls {
            mode: SliceTlsMode::Off,
            ca: None,
            client: None,
            roots_pem: Vec::new(),
        }
    }

    /// Issues with the CA of `tls_dir` (`ca.pem`, `ca-key.pem`) and trusts
    /// it, and `extra`.
    pub fn with_ca(
        tls_dir: &Path,
        extra: Vec<CertificateDer<'static>>,
    ) -> Result<SliceTls, String> {
        let ca_chain = crate::tls::load_chain(&tls_dir.join(crate::tls::CA_CERT_FILE), "CA")?;
        let key_path = tls_dir.join(crate::tls::CA_KEY_FILE);
        let key_pem = std::fs::read_to_string(&key_path)
            .map_err(|e| format!("CA key {}: cannot read it: {e}", key_path.display()))?;
        KeyPair::from_pem(&key_pem)
            .map_err(|e| format!("CA key {}: unusable: {e}", key_path.display()))?;
        let fingerprint = crate::tls::fingerprint(&ca_chain[0]);
        let mut roots = ca_chain;
        roots.extend(extra);
        let roots_pem = roots.iter().map(|c| certificate_pem(c)).collect();
        Ok(SliceTls {
            mode: SliceTlsMode::Issued,
            ca: Some(SliceCa {
                key_pem,
                fingerprint,
            }),
            client: Some(client_config(roots, false)?),
            roots_pem,
        })
    }

    /// Nodes bring their own certificates, from `roots` (the built-in roots
    /// when empty).
    pub fn trusting(roots: Vec<CertificateDer<'static>>) -> Result<SliceTls, String> {
        let built_in = roots.is_empty();
        let roots_pem = roots.iter().map(|c| certificate_pem(c)).collect();
        Ok(SliceTls {
            mode: SliceTlsMode::Own,
            ca: None,
            client: Some(client_config(roots, built_in)?),
            roots_pem,
        })
    }

    pub fn mode(&self) -> SliceTlsMode {
        self.mode
    }

    /// The certificates slice servers are checked against, as PEM: what a
    /// front on a storage node trusts. Empty with TLS off.
    pub fn roots_pem(&self) -> &[String] {
        &self.roots_pem
    }

    /// The CA that issues slice certificates (`Issued`), by fingerprint.
    pub fn ca_fingerprint(&self) -> Option<&str> {
        self.ca.as_ref().map(|ca| ca.fingerprint.as_str())
    }

    /// How the data plane connects to the slice server at `address`:
    /// `None` with TLS off, else verifying a certificate for that IP.
    pub fn client_tls(&self, address: IpAddr) -> Result<Option<ClientTls>, String> {
        let Some(config) = &self.client else {
            return Ok(None);
        };
        ClientTls::new(Arc::clone(config), &address.to_string())
            .map(Some)
            .map_err(|e| e.to_string())
    }

    /// A certificate for node `node`'s slice server at `address`, for the
    /// public key `public_key_pem` (PEM "PUBLIC KEY", ECDSA P-256). The
    /// names are svs's choice (the node's registered slice address), never
    /// the node's. `Err` is the caller's mistake (a message for it).
    pub fn issue(
        &self,
        node: &str,
        address: IpAddr,
        public_key_pem: &str,
    ) -> Result<IssuedCertificate, String> {
        let Some(ca) = &self.ca else {
            return Err(format!(
                "this service does not issue slice certificates (slice TLS: {})",
                self.mode.as_str()
            ));
        };
        let public_key = NodePublicKey::from_pem(public_key_pem)?;
        let ca_key = KeyPair::from_pem(&ca.key_pem).map_err(|e| format!("CA key: {e}"))?;
        let issuer = Issuer::new(crate::tls::ca_params(&ca_key)?, ca_key);
        let mut params = CertificateParams::new(vec![address.to_string()])
            .map_err(|e| format!("slice certificate for {address}: {e}"))?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "svs");
        // Fronts check the address (the subject alternative name), not this.
        dn.push(DnType::CommonName, format!("svs storage node {node}"));
        params.distinguished_name = dn;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        // Each certificate its own serial, also the renewals of one key.
        let mut serial = rand::random::<[u8; 16]>();
        serial[0] &= 0x7f;
        params.serial_number = Some(SerialNumber::from_slice(&serial));
        let now = time::OffsetDateTime::now_utc();
        // A day back: a node whose clock is a little behind still serves it.
        params.not_before = now - time::Duration::days(1);
        params.not_after = now + time::Duration::days(SLICE_CERT_DAYS);
        let cert = params
            .signed_by(&public_key, &issuer)
            .map_err(|e| format!("cannot make the slice certificate: {e}"))?;
        Ok(IssuedCertificate {
            pem: cert.pem(),
            not_after: params.not_after,
        })
    }
}

/// The DER header of an ECDSA P-256 SubjectPublicKeyInfo (RFC 5480): the
/// algorithm (id-ecPublicKey, prime256v1) and the bit string's header; the
/// uncompressed point (65 bytes) follows.
const P256_SPKI_HEADER: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// A node's public key, as rcgen signs for it.
struct NodePublicKey {
    point: Vec<u8>,
}

impl NodePublicKey {
    fn from_pem(pem: &str) -> Result<NodePublicKey, String> {
        let spki = SubjectPublicKeyInfoDer::from_pem_slice(pem.as_bytes()).map_err(|_| {
            "slicepublickey must be a PEM public key (\"-----BEGIN PUBLIC KEY-----\")".to_string()
        })?;
        let der: &[u8] = spki.as_ref();
        match der.strip_prefix(&P256_SPKI_HEADER[..]) {
            Some(point) if point.len() == 65 && point[0] == 0x04 => Ok(NodePublicKey {
                point: point.to_vec(),
            }),
            _ => Err("slicepublickey must be an ECDSA P-256 public key".into()),
        }
    }
}

impl PublicKeyData for NodePublicKey {
    fn der_bytes(&self) -> &[u8] {
        &self.point
    }

    fn algorithm(&self) -> &'static SignatureAlgorithm {
        &rcgen::PKCS_ECDSA_P256_SHA256
    }
}

fn client_config(
    roots: Vec<CertificateDer<'static>>,
    built_in: bool,
) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut store = rustls::RootCertStore::empty();
    if built_in {
        store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    for cert in roots {
        store
            .add(cert)
            .map_err(|e| format!("slice TLS: unusable CA certificate: {e}"))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(crate::tls::crypto_provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(store)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests;
