//! Issuing and verification against a real slice server (the storage
//! node's, `svs_dataplane::start_slice_server`) and the real client.

use super::*;
use std::net::SocketAddr;
use std::time::Duration;
use svs_dataplane::{start_slice_server, SharedSecret};
use svs_sliceproto::{SliceClient, SliceName};

const SECRET: &str = "slice-secret";

/// A CA made as `tls = "auto"` makes it, and the slice TLS issuing with it.
fn service_ca(dir: &Path) -> SliceTls {
    let tls_dir = dir.join("tls");
    crate::tls::auto_certificates(&tls_dir, &["localhost".into()]).expect("CA");
    SliceTls::with_ca(&tls_dir, Vec::new()).expect("slice tls")
}

/// A slice server on 127.0.0.1 serving `cert_pem` (for `key`).
fn node_server(dir: &Path, cert_pem: Option<&str>, key: &KeyPair) -> svs_sliceproto::SliceServer {
    let tls = cert_pem.map(|pem| {
        let chain = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .expect("certificate");
        let key = rustls_pki_types::PrivateKeyDer::Pkcs8(
            rustls_pki_types::PrivatePkcs8KeyDer::from(key.serialize_der()),
        );
        Arc::new(
            rustls::ServerConfig::builder_with_provider(crate::tls::crypto_provider())
                .with_safe_default_protocol_versions()
                .expect("versions")
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .expect("server config"),
        )
    });
    let medium = dir.join("d1");
    std::fs::create_dir_all(&medium).expect("medium");
    start_slice_server(
        vec![("d1".into(), medium)],
        &dir.join("state"),
        "127.0.0.1:0".parse().expect("address"),
        Arc::new(SharedSecret::new(SECRET)),
        tls,
    )
    .expect("slice server")
}

fn connect(addr: SocketAddr, tls: Option<&ClientTls>) -> std::io::Result<SliceClient> {
    SliceClient::connect_tls(addr, SECRET, "test", Duration::from_secs(10), tls)
}

/// Why the connection was refused.
fn refused(addr: SocketAddr, tls: Option<&ClientTls>) -> String {
    match connect(addr, tls) {
        Ok(_) => panic!("connected to {addr}, but it must be refused"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_node_certificate_from_the_ca_for_its_address_is_trusted_and_works() {
    let dir = tempfile::tempdir().expect("dir");
    let service = service_ca(dir.path());
    assert_eq!(service.mode(), SliceTlsMode::Issued);
    let node_key = KeyPair::generate().expect("key");
    let ip: IpAddr = "127.0.0.1".parse().expect("ip");
    let issued = service
        .issue("sn-1", ip, &node_key.public_key_pem())
        .expect("issued");
    let days = (issued.not_after - time::OffsetDateTime::now_utc()).whole_days();
    assert!(
        (SLICE_CERT_DAYS - 1..=SLICE_CERT_DAYS).contains(&days),
        "{days}"
    );
    let server = node_server(dir.path(), Some(&issued.pem), &node_key);
    let addr = server.local_addr();
    let tls = service.client_tls(ip).expect("client tls").expect("tls on");
    let client = connect(addr, Some(&tls)).expect("TLS connection");
    let slice = SliceName::new("d1", "vol-1", 0, 0);
    client.create_slice(&slice, 1 << 20).expect("created");
    assert_eq!(client.size(&slice).expect("size"), 1 << 20);

    // A plain-text client is refused by the TLS server.
    let err = refused(addr, None);
    assert!(
        err.contains("closed the connection during the hello"),
        "{err}"
    );
    server.shutdown();
}

#[test]
fn another_cas_certificate_or_another_name_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let service = service_ca(&dir.path().join("service"));
    let stranger = service_ca(&dir.path().join("stranger"));
    let node_key = KeyPair::generate().expect("key");
    let ip: IpAddr = "127.0.0.1".parse().expect("ip");

    // Issued by another CA.
    let foreign = stranger
        .issue("sn-1", ip, &node_key.public_key_pem())
        .expect("issued");
    let server = node_server(&dir.path().join("n1"), Some(&foreign.pem), &node_key);
    let tls = service.client_tls(ip).expect("client tls").expect("tls on");
    let err = refused(server.local_addr(), Some(&tls));
    assert!(err.contains("UnknownIssuer"), "{err}");
    server.shutdown();

    // From the right CA, for another address than the one connected to.
    let other: IpAddr = "127.0.0.9".parse().expect("ip");
    let misnamed = service
        .issue("sn-1", other, &node_key.public_key_pem())
        .expect("issued");
    let server = node_server(&dir.path().join("n2"), Some(&misnamed.pem), &node_key);
    let err = refused(server.local_addr(), Some(&tls));
    assert!(
        err.contains("certificate not valid for name \"127.0.0.1\""),
        "{err}"
    );
    server.shutdown();
}

#[test]
fn only_p256_public_keys_are_signed_and_only_with_svss_own_ca() {
    let dir = tempfile::tempdir().expect("dir");
    let service = service_ca(dir.path());
    let ip: IpAddr = "127.0.0.1".parse().expect("ip");
    let err = service.issue("sn-1", ip, "hello").expect_err("not PEM");
    assert!(err.contains("must be a PEM public key"), "{err}");
    let ed = KeyPair::generate_for(&rcgen::PKCS_ED25519).expect("ed25519");
    let err = service
        .issue("sn-1", ip, &ed.public_key_pem())
        .expect_err("not P-256");
    assert_eq!(err, "slicepublickey must be an ECDSA P-256 public key");

    let own = SliceTls::trusting(Vec::new()).expect("own");
    assert_eq!(own.mode(), SliceTlsMode::Own);
    let key = KeyPair::generate().expect("key");
    let err = own
        .issue("sn-1", ip, &key.public_key_pem())
        .expect_err("no CA");
    assert_eq!(
        err,
        "this service does not issue slice certificates (slice TLS: own)"
    );
    assert!(SliceTls::off().client_tls(ip).expect("off").is_none());
}
