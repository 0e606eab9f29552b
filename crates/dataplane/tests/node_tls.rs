//! A storage node started with TLS (`start_slice_server`): the whole
//! connection is TLS, the bytes land in the slice file, and a plain client
//! is not let in.

use std::fs;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use svs_dataplane::{start_slice_server, SharedSecret};
use svs_sliceproto::{ClientTls, SliceClient, SliceName};

const SECRET: &str = "node-secret";
const TIMEOUT: Duration = Duration::from_secs(10);

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server configuration with a certificate for 127.0.0.1 signed by a
/// fresh CA, and the client configuration trusting that CA.
fn tls_pair() -> (Arc<rustls::ServerConfig>, ClientTls) {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().expect("key");
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .expect("params")
        .signed_by(&key, &issuer)
        .expect("certificate");
    let server = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .expect("server config");
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(ca.der().to_vec()))
        .expect("root");
    let client = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let client = ClientTls::new(Arc::new(client), "127.0.0.1").expect("client TLS");
    (Arc::new(server), client)
}

#[test]
fn a_node_started_with_tls_serves_its_slices_over_tls_only() {
    let root = tempfile::tempdir().expect("temp dir");
    let (server_tls, client_tls) = tls_pair();
    let server = start_slice_server(
        vec![("m1".into(), root.path().join("m1"))],
        &root.path().join("state"),
        SocketAddr::from(([127, 0, 0, 1], 0)),
        Arc::new(SharedSecret::new(SECRET)),
        Some(server_tls),
    )
    .expect("start");
    let addr = server.local_addr();
    let c = SliceClient::connect_tls(addr, SECRET, "front-1", TIMEOUT, Some(&client_tls))
        .expect("TLS client");
    let s = SliceName::new("m1", "vol-1", 0, 0);
    c.create_slice(&s, 1 << 20).expect("create");
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8 | 1).collect();
    c.write(&s, 1, 4096, &data).expect("write");
    let mut back = vec![0u8; data.len()];
    c.read(&s, 4096, &mut back).expect("read");
    assert!(back == data, "the bytes read differ from those written");
    let file = fs::read(root.path().join("m1/vol-1/c0-k0.slice")).expect("slice file");
    assert!(
        file[4096..4096 + data.len()] == data[..],
        "the slice file holds other bytes"
    );
    // A plain hello is not TLS: the server drops the connection.
    let Err(e) = SliceClient::connect(addr, SECRET, "front-2", Duration::from_secs(2)) else {
        panic!("a plain client was let in");
    };
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionAborted, "{e}");
    server.shutdown();
}
