//! NBD over TLS (`NBD_OPT_STARTTLS`): what is answered before TLS when the
//! server requires it, and the crate's own client over TLS (large writes and
//! reads, many requests in flight from several threads, reconnection).

mod common;

use common::*;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::io;
use std::sync::Arc;
use std::time::Duration;
use svs_nbd::protocol::*;
use svs_nbd::{
    AddressSource, ClientTls, NbdClient, NbdConfig, ReconnectOptions, ReconnectingClient, ServerTls,
};

const MIB: usize = 1024 * 1024;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A CA and a server configuration with a certificate for 127.0.0.1 it
/// signed; the CA's certificate.
fn server_and_ca() -> (Arc<rustls::ServerConfig>, CertificateDer<'static>) {
    let (mut servers, ca) = servers_and_ca(&["127.0.0.1"]);
    (servers.remove(0), ca)
}

/// A CA and, per name, a server configuration with a certificate for that
/// name it signed; the CA's certificate.
fn servers_and_ca(names: &[&str]) -> (Vec<Arc<rustls::ServerConfig>>, CertificateDer<'static>) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let servers = names
        .iter()
        .map(|name| {
            let key = KeyPair::generate().unwrap();
            let cert = CertificateParams::new(vec![name.to_string()])
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
            Arc::new(config)
        })
        .collect();
    (servers, ca.der().clone())
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

/// A server with export "vol" (1 MiB of 0x11 unless `size`), TLS optional
/// or required.
async fn tls_server(
    required: bool,
    size: usize,
) -> (TestServer, Arc<MemDevice>, CertificateDer<'static>) {
    let (config, ca) = server_and_ca();
    let exports = TestExports::new();
    let dev = MemDevice::new(size, 0x11);
    exports.add("vol", dev.clone());
    let server = TestServer::start_with(
        exports,
        NbdConfig {
            tls: Some(ServerTls { config, required }),
            ..NbdConfig::default()
        },
    )
    .await;
    (server, dev, ca)
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

#[tokio::test]
async fn with_tls_required_nothing_but_starttls_and_abort_is_answered_in_plain_text() {
    let (server, _dev, _ca) = tls_server(true, MIB).await;
    let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    for (option, data) in [
        (OPT_LIST, Vec::new()),
        (OPT_INFO, go_data("vol", &[])),
        (OPT_GO, go_data("vol", &[])),
        (OPT_STRUCTURED_REPLY, Vec::new()),
        (99, Vec::new()),
    ] {
        send_option(&mut s, option, &data).await;
        let r = read_option_reply(&mut s).await;
        assert_eq!(r.option, option);
        assert_eq!(r.reply_type, REP_ERR_TLS_REQD, "option {option}");
        assert_eq!(
            String::from_utf8_lossy(&r.data),
            "this server requires TLS: negotiate NBD_OPT_STARTTLS first"
        );
    }
    // STARTTLS takes no data.
    send_option(&mut s, OPT_STARTTLS, b"x").await;
    let r = read_option_reply(&mut s).await;
    assert_eq!(r.reply_type, REP_ERR_INVALID);
    // ABORT is acknowledged.
    send_option(&mut s, OPT_ABORT, &[]).await;
    let r = read_option_reply(&mut s).await;
    assert_eq!((r.option, r.reply_type), (OPT_ABORT, REP_ACK));
    assert!(is_closed(&mut s).await);

    // EXPORT_NAME cannot be answered an error: the connection closes.
    let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    send_option(&mut s, OPT_EXPORT_NAME, b"vol").await;
    assert!(is_closed(&mut s).await);

    // The crate's plain client says why it cannot open the export.
    let addr = server.addr;
    let err = blocking(move || NbdClient::connect(addr, "vol"))
        .await
        .err()
        .expect("refused");
    assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
    assert_eq!(
        err.to_string(),
        "the NBD server requires TLS (NBD_REP_ERR_TLS_REQD)"
    );
}

#[tokio::test]
async fn without_tls_configured_starttls_is_unsupported() {
    let exports = TestExports::new();
    exports.add("vol", MemDevice::new(MIB, 0));
    let server = TestServer::start(exports).await;
    let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    send_option(&mut s, OPT_STARTTLS, &[]).await;
    let r = read_option_reply(&mut s).await;
    assert_eq!(r.reply_type, REP_ERR_UNSUP);
    // The crate's TLS client reports it.
    let (_, ca) = server_and_ca();
    let tls = client_tls(&ca);
    let addr = server.addr;
    let err = blocking(move || NbdClient::connect_timeout_tls(&addr, "vol", T, Some(&tls)))
        .await
        .err()
        .expect("no TLS");
    assert_eq!(err.kind(), io::ErrorKind::Unsupported);
    assert!(
        err.to_string()
            .ends_with("TLS is not enabled on this server"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_over_tls_writes_and_reads_back_large_and_concurrent_requests() {
    let (server, dev, ca) = tls_server(true, 64 * MIB).await;
    let tls = client_tls(&ca);
    let addr = server.addr;
    let client = blocking(move || NbdClient::connect_timeout_tls(&addr, "vol", T, Some(&tls)))
        .await
        .expect("TLS connection");
    assert_eq!(client.size(), 64 * MIB as u64);
    let client = Arc::new(client);

    // 8 threads, each 4 MiB written then read back (many TLS records, and
    // replies interleaved with requests).
    let mut threads = Vec::new();
    for t in 0..8u8 {
        let c = Arc::clone(&client);
        threads.push(std::thread::spawn(move || {
            let offset = u64::from(t) * 8 * MIB as u64;
            let data: Vec<u8> = (0..4 * MIB).map(|i| (i as u8) ^ t).collect();
            c.write(offset, &data, false).unwrap();
            let mut back = vec![0u8; data.len()];
            c.read(offset, &mut back).unwrap();
            assert!(back == data, "thread {t} read back other bytes");
        }));
    }
    blocking(move || {
        for t in threads {
            t.join().unwrap();
        }
    })
    .await;
    let c = Arc::clone(&client);
    blocking(move || c.flush()).await.unwrap();
    assert_eq!(
        dev.bytes(8 * MIB + 1, 2),
        vec![0, 3],
        "thread 1: byte i is i ^ 1"
    );
    let c = Arc::try_unwrap(client).ok().expect("only owner");
    blocking(move || c.disconnect()).await.unwrap();
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_ca_fails_on_the_certificate() {
    let (server, _dev, _ca) = tls_server(false, MIB).await;
    let (_, other_ca) = server_and_ca();
    let tls = client_tls(&other_ca);
    let addr = server.addr;
    let err = blocking(move || NbdClient::connect_timeout_tls(&addr, "vol", T, Some(&tls)))
        .await
        .err()
        .expect("refused");
    assert!(
        err.to_string()
            .contains("NBD TLS handshake: invalid peer certificate"),
        "{err}"
    );
    // With TLS optional, a plain client is served as before.
    assert_normal_client_works(server.addr, "vol").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconnecting_client_reconnects_over_tls_after_a_restart() {
    let (config, ca) = server_and_ca();
    let exports = TestExports::new();
    let dev = MemDevice::new(MIB, 0);
    exports.add("vol", dev.clone());
    let nbd_config = NbdConfig {
        tls: Some(ServerTls {
            config,
            required: true,
        }),
        ..NbdConfig::default()
    };
    let server = TestServer::start_with(exports.clone(), nbd_config.clone()).await;
    let addr = server.addr;
    let opts = ReconnectOptions {
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(200),
        give_up_after: Duration::from_secs(20),
        tls: Some(client_tls(&ca)),
        ..ReconnectOptions::default()
    };
    let client = Arc::new(
        blocking(move || ReconnectingClient::connect(addr.to_string(), "vol".into(), opts))
            .await
            .expect("connected"),
    );
    let c = Arc::clone(&client);
    blocking(move || c.write(0, &[7u8; 4096], true))
        .await
        .unwrap();
    server.stop().await.unwrap();
    let _server = TestServer::start_at(addr, exports, nbd_config).await;
    let c = Arc::clone(&client);
    let back = blocking(move || {
        let mut buf = vec![0u8; 4096];
        c.read(0, &mut buf).map(|()| buf)
    })
    .await
    .unwrap();
    assert_eq!(back, vec![7u8; 4096]);
    assert_eq!(client.connections(), 2);
}

/// The front moved to a node whose certificate names its own address: the
/// client checks the new address's host, not the name it started with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconnecting_client_follows_a_server_to_another_address_over_tls() {
    let (mut configs, ca) = servers_and_ca(&["127.0.0.1", "127.0.0.2"]);
    let tls = |config| NbdConfig {
        tls: Some(ServerTls {
            config,
            required: true,
        }),
        ..NbdConfig::default()
    };
    let config_b = configs.remove(1);
    let config_a = configs.remove(0);
    let exports_a = TestExports::new();
    exports_a.add("vol", MemDevice::new(MIB, 0));
    let a = TestServer::start_with(exports_a, tls(config_a)).await;
    let exports_b = TestExports::new();
    let dev_b = MemDevice::new(MIB, 0x5b);
    exports_b.add("vol", dev_b.clone());
    let free = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    let addr_b = free.local_addr().unwrap();
    drop(free);
    let b = TestServer::start_at(addr_b, exports_b, tls(config_b)).await;

    let target = Arc::new(std::sync::Mutex::new(a.addr.to_string()));
    let t = Arc::clone(&target);
    let source: AddressSource = Arc::new(move || t.lock().unwrap().clone());
    let opts = ReconnectOptions {
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(200),
        give_up_after: Duration::from_secs(10),
        tls: Some(client_tls(&ca)),
        ..ReconnectOptions::default()
    };
    let client = Arc::new(
        blocking(move || ReconnectingClient::connect_following(source, "vol".into(), opts))
            .await
            .expect("connected to A"),
    );
    a.stop().await.unwrap();
    *target.lock().unwrap() = addr_b.to_string();
    let c = Arc::clone(&client);
    let back = blocking(move || {
        let mut buf = vec![0u8; 4096];
        c.read(0, &mut buf).map(|()| buf)
    })
    .await
    .expect("read on B, its certificate checked for 127.0.0.2");
    assert_eq!(back, vec![0x5b; 4096]);
    assert_eq!(client.address(), addr_b.to_string());
    drop(client);
    b.stop().await.unwrap();
}
