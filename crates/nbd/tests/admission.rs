//! Admission: peers no export admits are closed at accept, one peer cannot
//! take every slot, and an idle handshake is closed after the handshake
//! timeout. Loopback aliases (127.0.0.2, ...) play other hosts.

mod common;

use common::*;
use std::time::{Duration, Instant};
use svs_nbd::protocol::FLAG_C_FIXED_NEWSTYLE;
use svs_nbd::NbdConfig;
use tokio::net::TcpStream;

const MIB: usize = 1024 * 1024;

/// `n` connections from `local` that say nothing, kept open.
async fn idle_connections(local: &str, addr: std::net::SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut all = Vec::with_capacity(n);
    for _ in 0..n {
        all.push(connect_from(local, addr).await);
    }
    all
}

/// How many of `streams` the server has closed (EOF or reset) within a
/// short wait; the others are still open.
async fn count_closed(streams: &mut [TcpStream]) -> usize {
    let mut closed = 0;
    for s in streams.iter_mut() {
        let mut b = [0u8; 32];
        let read = tokio::time::timeout(Duration::from_millis(20), async {
            use tokio::io::AsyncReadExt;
            // Skip the greeting of an admitted connection; EOF is a close.
            loop {
                match s.read(&mut b).await {
                    Ok(0) | Err(_) => return true,
                    Ok(_) => continue,
                }
            }
        })
        .await;
        if read == Ok(true) {
            closed += 1;
        }
    }
    closed
}

#[tokio::test]
async fn a_peer_no_export_admits_is_closed_at_once_and_never_greeted() {
    let exports = TestExports::new();
    exports.add("vol", MemDevice::new(MIB, 0));
    exports.admit_only(&["127.0.0.1"]);
    let server = TestServer::start(exports).await;
    let started = Instant::now();
    let mut stranger = connect_from("127.0.0.3", server.addr).await;
    assert!(is_closed(&mut stranger).await, "closed without a greeting");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_normal_client_works(server.addr, "vol").await;
    server.stop().await.unwrap();
}

#[tokio::test]
async fn one_peer_gets_at_most_its_share_of_the_connections() {
    let exports = TestExports::new();
    exports.add("vol", MemDevice::new(MIB, 0));
    let config = NbdConfig {
        max_connections: 8,
        max_connections_per_peer: 3,
        ..NbdConfig::default()
    };
    let server = TestServer::start_with(exports, config).await;
    let mut idle = idle_connections("127.0.0.2", server.addr, 5).await;
    assert_eq!(count_closed(&mut idle).await, 2, "two over the peer's cap");
    // Another peer is unaffected.
    assert_normal_client_works(server.addr, "vol").await;
    // When one of the peer's connections ends, the peer gets its slot back.
    drop(idle);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut again = idle_connections("127.0.0.2", server.addr, 3).await;
    assert_eq!(count_closed(&mut again).await, 0);
    server.stop().await.unwrap();
}

#[tokio::test]
async fn an_idle_handshake_is_closed_after_the_handshake_timeout() {
    let exports = TestExports::new();
    exports.add("vol", MemDevice::new(MIB, 0));
    let config = NbdConfig {
        handshake_timeout: Duration::from_millis(500),
        ..NbdConfig::default()
    };
    let server = TestServer::start_with(exports, config).await;
    let started = Instant::now();
    let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE).await;
    assert!(is_closed(&mut s).await);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(3),
        "closed after {waited:?}"
    );
    server.stop().await.unwrap();
}

#[test]
fn the_default_handshake_timeout_is_short_and_peers_are_capped_below_the_total() {
    let config = NbdConfig::default();
    assert_eq!(config.handshake_timeout, Duration::from_secs(10));
    assert!(config.max_connections_per_peer < config.max_connections);
}

/// The attack: 300 idle connections from one peer (admitted, and
/// another that is not), then a real client from another address reads and
/// writes normally, at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hundred_idle_connections_from_a_peer_do_not_lock_out_qemu_io() {
    require_qemu();
    let exports = TestExports::new();
    exports.add("vol", MemDevice::new(16 * MIB, 0x11));
    exports.admit_only(&["127.0.0.1", "127.0.0.2"]);
    let server = TestServer::start(exports).await;
    let mut admitted = idle_connections("127.0.0.2", server.addr, 300).await;
    let mut strangers = idle_connections("127.0.0.3", server.addr, 300).await;
    for s in strangers.iter_mut() {
        assert!(is_closed(s).await, "a stranger's connection is closed");
    }
    let per_peer = NbdConfig::default().max_connections_per_peer;
    assert_eq!(count_closed(&mut admitted).await, 300 - per_peer);

    let started = Instant::now();
    let r = qemu_io(
        &server.url("vol"),
        &[],
        &["write -P 0xab 0 64k", "read -P 0xab 0 64k", "flush"],
    )
    .await;
    assert!(r.ok, "{}", r.out);
    assert!(!r.out.contains("Pattern verification failed"), "{}", r.out);
    assert!(started.elapsed() < Duration::from_secs(5));
    drop(admitted);
    server.stop().await.unwrap();
}
