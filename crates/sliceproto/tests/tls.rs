//! The whole connection over TLS: round trips, large payloads, many
//! threads; a plain client is not let in.

mod common;

use std::net::TcpListener;
use std::sync::Arc;

use common::{slice, CREDENTIAL, TIMEOUT};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use svs_sliceproto::testing::{MemBackend, MemEpochs, OneCredential};
use svs_sliceproto::{ClientTls, ServerConfig, SliceClient, SliceServer};

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server configuration with a certificate for 127.0.0.1 signed by a
/// fresh CA; the CA's certificate.
fn server_and_ca() -> (Arc<rustls::ServerConfig>, CertificateDer<'static>) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    (Arc::new(config), ca.der().clone())
}

fn client_tls(ca: &CertificateDer<'static>) -> ClientTls {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    ClientTls::new(Arc::new(config), "127.0.0.1").unwrap()
}

#[test]
fn requests_travel_over_tls_and_a_plain_client_is_not_let_in() {
    let (config, ca) = server_and_ca();
    let server = SliceServer::start(
        TcpListener::bind("127.0.0.1:0").unwrap(),
        ServerConfig {
            tls: Some(config),
            ..ServerConfig::default()
        },
        Arc::new(MemBackend::new()),
        Arc::new(OneCredential(CREDENTIAL.into())),
        Arc::new(MemEpochs::default()),
    )
    .unwrap();
    let addr = server.local_addr();
    let tls = client_tls(&ca);
    let c = Arc::new(
        SliceClient::connect_tls(addr, CREDENTIAL, "front-1", TIMEOUT, Some(&tls)).unwrap(),
    );
    let s = slice();
    c.create_slice(&s, 64 << 20).unwrap();
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let c = Arc::clone(&c);
            std::thread::spawn(move || {
                let data: Vec<u8> = (0..(3 << 20) + 7)
                    .map(|i| (i as u64 * 7 + t) as u8)
                    .collect();
                let offset = t * (6 << 20) + 4096;
                for _ in 0..3 {
                    c.write(&slice(), 1, offset, &data).unwrap();
                    let mut back = vec![0u8; data.len()];
                    c.read(&slice(), offset, &mut back).unwrap();
                    assert!(back == data);
                    for i in 0..32u64 {
                        c.write(&slice(), 1, offset + i * 4096, &data[..4096])
                            .unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(!c.is_broken());

    // A wrong credential is refused inside TLS as well.
    let e = SliceClient::connect_tls(addr, "wrong", "front-2", TIMEOUT, Some(&tls))
        .err()
        .expect("refused");
    assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);

    // A plain client gets no hello.
    assert!(SliceClient::connect(addr, CREDENTIAL, "plain", TIMEOUT).is_err());
    drop(c);
    server.shutdown();
}
