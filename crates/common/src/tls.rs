//! TLS of the API, the console and the NBD server (`NBD_OPT_STARTTLS`), and
//! the trust of the clients (`svs --ca-cert`).
//!
//! With `tls = "auto"` svs is its own certificate authority: on first start
//! it makes a CA (key and self-signed certificate) and a server certificate
//! signed by it under `<data_dir>/tls/`, owner-only files, and reuses them
//! on later starts. Clients are given the CA certificate once (it is what
//! start-up prints the fingerprint of); the server certificate can then be
//! made again, by the same CA, whenever the names it must be valid for
//! change (another listen address, `tls_names`), without clients noticing.
//! With `tls_cert` and `tls_key` the operator's own files are used as they
//! are.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The directory of the `tls = "auto"` files, in the data directory.
pub const TLS_DIR: &str = "tls";
pub const CA_CERT_FILE: &str = "ca.pem";
pub const CA_KEY_FILE: &str = "ca-key.pem";
pub const SERVER_CERT_FILE: &str = "server.pem";
pub const SERVER_KEY_FILE: &str = "server-key.pem";
/// The names the server certificate was made for, one a line: when the
/// wanted names differ, a new server certificate is made by the same CA.
pub const SERVER_NAMES_FILE: &str = "server-names";
/// Every file of `tls = "auto"`, relative to the data directory (what
/// `svs backup` takes and `svs restore` puts back).
pub const AUTO_FILES: [&str; 5] = [
    "tls/ca.pem",
    "tls/ca-key.pem",
    "tls/server.pem",
    "tls/server-key.pem",
    "tls/server-names",
];

/// How long the certificates svs makes are valid (10 years: a private CA
/// is replaced by deleting `<data_dir>/tls`, not by expiry).
const VALIDITY_DAYS: i64 = 3650;

/// The TLS configurations of the servers, and what start-up tells.
pub struct ServerTls {
    /// HTTPS (ALPN `http/1.1`: the server speaks HTTP/1 only).
    pub http: Arc<ServerConfig>,
    /// NBD after `NBD_OPT_STARTTLS` (no ALPN).
    pub nbd: Arc<ServerConfig>,
    pub facts: TlsFacts,
}

/// What `svs serve` prints about TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFacts {
    /// The certificate clients are to trust: the CA's (`tls = "auto"`), or
    /// the configured `tls_cert`.
    pub certificate: PathBuf,
    /// The CA is svs's own (`tls = "auto"`).
    pub own_ca: bool,
    /// SHA-256 fingerprint of that (first) certificate, `AB:CD:...`.
    pub fingerprint: String,
}

/// The crypto of every TLS endpoint of svs: ring (no OpenSSL, and one
/// provider whatever features other crates turn on).
pub fn crypto_provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// SHA-256 of a DER certificate, as `AB:CD:...` (the form `openssl x509
/// -fingerprint -sha256` prints).
pub fn fingerprint(der: &[u8]) -> String {
    Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The path start-up prints: one a client can use from anywhere.
pub fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

pub fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    alpn: Vec<Vec<u8>>,
) -> Result<Arc<ServerConfig>, String> {
    let mut config = ServerConfig::builder_with_provider(crypto_provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        // Also checks that the key is the certificate's.
        .with_single_cert(chain, key)
        .map_err(|e| format!("TLS: the certificate and key cannot be used together: {e}"))?;
    config.alpn_protocols = alpn;
    Ok(Arc::new(config))
}

fn read_file(path: &Path, setting: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{setting} {}: cannot read it: {e}", path.display()))
}

/// The certificates of a PEM file, in order; at least one.
pub fn load_chain(path: &Path, setting: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read_file(path, setting)?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            format!(
                "{setting} {}: not a PEM certificate file: {e}",
                path.display()
            )
        })?;
    if chain.is_empty() {
        return Err(format!(
            "{setting} {}: no certificate in it (expected PEM \"-----BEGIN CERTIFICATE-----\")",
            path.display()
        ));
    }
    Ok(chain)
}

pub fn load_key(path: &Path, setting: &str) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read_file(path, setting)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        format!(
            "{setting} {}: no private key in it (expected PEM \"-----BEGIN PRIVATE KEY-----\", \
             RSA or EC): {e}",
            path.display()
        )
    })
}

pub fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

fn rcgen_error(what: &str) -> impl Fn(rcgen::Error) -> String + '_ {
    move |e| format!("TLS: cannot make the {what}: {e}")
}

/// The CA's name: derived from its key, so the issuer of every server
/// certificate can be rebuilt from the key alone, and two svs installations
/// never have CAs of the same name.
pub fn ca_params(ca_key: &KeyPair) -> Result<CertificateParams, String> {
    let id = Sha256::digest(ca_key.public_key_pem().as_bytes());
    let id: String = id[..6].iter().map(|b| format!("{b:02x}")).collect();
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(rcgen_error("CA"))?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "svs");
    dn.push(DnType::CommonName, format!("svs private CA {id}"));
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    set_validity(&mut params);
    Ok(params)
}

fn set_validity(params: &mut CertificateParams) {
    let now = time::OffsetDateTime::now_utc();
    // A day back: a client whose clock is a little behind still accepts it.
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(VALIDITY_DAYS);
}

/// Makes (first start) or loads the CA, and makes the server certificate
/// when it is missing or was made for other names.
pub fn auto_certificates(
    dir: &Path,
    names: &[String],
) -> Result<
    (
        Vec<CertificateDer<'static>>,
        PrivateKeyDer<'static>,
        TlsFacts,
    ),
    String,
> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("TLS: cannot create {}: {e}", dir.display()))?;
    let ca_cert_path = dir.join(CA_CERT_FILE);
    let ca_key_path = dir.join(CA_KEY_FILE);
    let ca_key = match (ca_cert_path.exists(), ca_key_path.exists()) {
        (true, true) => {
            let pem = String::from_utf8(read_file(&ca_key_path, "CA key")?)
                .map_err(|_| format!("CA key {}: not a PEM file", ca_key_path.display()))?;
            KeyPair::from_pem(&pem)
                .map_err(|e| format!("CA key {}: unusable: {e}", ca_key_path.display()))?
        }
        (false, false) => {
            let key = KeyPair::generate().map_err(rcgen_error("CA key"))?;
            let cert = ca_params(&key)?
                .self_signed(&key)
                .map_err(rcgen_error("CA certificate"))?;
            write_private(&ca_key_path, key.serialize_pem().as_bytes())?;
            write_private(&ca_cert_path, cert.pem().as_bytes())?;
            // A new CA: a server certificate of an old one is worthless.
            let _ = std::fs::remove_file(dir.join(SERVER_NAMES_FILE));
            tracing::info!(dir = %dir.display(), "made a private CA for TLS");
            key
        }
        _ => {
            return Err(format!(
                "TLS: {} and {} go together, but only one of them exists: put the other back \
                 (e.g. svs restore), or remove {} to make a new CA (clients must then trust the \
                 new one)",
                ca_cert_path.display(),
                ca_key_path.display(),
                dir.display()
            ))
        }
    };
    let ca_chain = load_chain(&ca_cert_path, "CA certificate")?;
    let facts = TlsFacts {
        certificate: absolute(&ca_cert_path),
        own_ca: true,
        fingerprint: fingerprint(&ca_chain[0]),
    };

    let cert_path = dir.join(SERVER_CERT_FILE);
    let key_path = dir.join(SERVER_KEY_FILE);
    let names_path = dir.join(SERVER_NAMES_FILE);
    let wanted = names.join("\n") + "\n";
    let current = std::fs::read_to_string(&names_path).unwrap_or_default();
    if current == wanted && cert_path.exists() && key_path.exists() {
        let chain = load_chain(&cert_path, "server certificate")?;
        let key = load_key(&key_path, "server key")?;
        return Ok((chain, key, facts));
    }
    let server_key = KeyPair::generate().map_err(rcgen_error("server key"))?;
    let mut params = CertificateParams::new(names.to_vec())
        .map_err(|e| format!("TLS: the names {names:?} cannot be in a certificate: {e}"))?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "svs");
    // Clients check the names above (subject alternative names), not this.
    dn.push(DnType::CommonName, "svs server");
    params.distinguished_name = dn;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    set_validity(&mut params);
    let issuer = Issuer::new(ca_params(&ca_key)?, ca_key);
    let cert = params
        .signed_by(&server_key, &issuer)
        .map_err(rcgen_error("server certificate"))?;
    write_private(&key_path, server_key.serialize_pem().as_bytes())?;
    write_private(&cert_path, cert.pem().as_bytes())?;
    write_private(&names_path, wanted.as_bytes())?;
    tracing::info!(names = %names.join(", "), "made a TLS server certificate");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
    Ok((vec![cert.der().clone()], key, facts))
}

/// An owner-only file (see [`crate::secret_files::write_private`]).
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    crate::secret_files::write_private(path, bytes)
        .map_err(|e| format!("TLS: cannot write {}: {e}", path.display()))
}

/// The CA certificates the clients of this process trust beside the
/// built-in roots (`svs --ca-cert`, `SVS_CA_CERT`), as PEM.
static EXTRA_ROOTS: OnceLock<Vec<u8>> = OnceLock::new();
/// Where they came from (handed on to the agent's device processes).
static EXTRA_ROOTS_FILE: OnceLock<PathBuf> = OnceLock::new();

/// Reads `--ca-cert` once at start: a missing or unusable file stops the
/// command with a clear message before any connection.
pub fn trust_ca_file(path: &Path) -> Result<(), String> {
    load_chain(path, "--ca-cert")?;
    let pem = read_file(path, "--ca-cert")?;
    let _ = EXTRA_ROOTS.set(pem);
    let _ = EXTRA_ROOTS_FILE.set(std::path::absolute(path).unwrap_or_else(|_| path.into()));
    Ok(())
}

/// The `--ca-cert` file this process trusts, if any.
pub fn ca_cert_file() -> Option<&'static Path> {
    EXTRA_ROOTS_FILE.get().map(PathBuf::as_path)
}

/// An HTTP client builder that also trusts `--ca-cert`.
pub fn trusting_ca_cert(builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
    let roots = EXTRA_ROOTS
        .get()
        .and_then(|pem| reqwest::Certificate::from_pem_bundle(pem).ok())
        .unwrap_or_default();
    roots
        .into_iter()
        .fold(builder, |b, cert| b.add_root_certificate(cert))
}

/// A rustls client configuration trusting the built-in roots and
/// `--ca-cert` (the NBD client's STARTTLS).
pub fn client_config() -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(pem) = EXTRA_ROOTS.get() {
        for cert in CertificateDer::pem_slice_iter(pem).flatten() {
            roots
                .add(cert)
                .map_err(|e| format!("--ca-cert: unusable certificate: {e}"))?;
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(crypto_provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_look_like_openssls() {
        let f = fingerprint(b"abc");
        assert_eq!(f.len(), 32 * 3 - 1);
        assert!(f.starts_with("BA:78:16:BF:"), "{f}");
    }

    #[test]
    fn auto_makes_a_ca_once_and_a_server_certificate_per_set_of_names() {
        let dir = tempfile::tempdir().unwrap();
        let tls = dir.path().join("tls");
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let (_, _, first) = auto_certificates(&tls, &names).unwrap();
        let server = std::fs::read(tls.join(SERVER_CERT_FILE)).unwrap();
        let (_, _, again) = auto_certificates(&tls, &names).unwrap();
        assert_eq!(first, again);
        assert_eq!(std::fs::read(tls.join(SERVER_CERT_FILE)).unwrap(), server);
        let more = vec!["svs.example".to_string()];
        let (_, _, other) = auto_certificates(&tls, &more).unwrap();
        assert_eq!(other.fingerprint, first.fingerprint, "same CA");
        assert_ne!(std::fs::read(tls.join(SERVER_CERT_FILE)).unwrap(), server);
        std::fs::remove_file(tls.join(CA_KEY_FILE)).unwrap();
        let err = auto_certificates(&tls, &names).unwrap_err();
        assert!(err.contains("go together"), "{err}");
    }
}
