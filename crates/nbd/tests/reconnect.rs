//! `ReconnectingClient` against our own server stopped and restarted on the
//! same port, or moved to another address, and `NbdClient`'s request
//! timeout.

mod common;

use common::*;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use svs_nbd::{
    AddressSource, Exports, NbdClient, NbdConfig, OpenedExport, ReconnectOptions,
    ReconnectingClient,
};

const MIB: usize = 1024 * 1024;

/// Short waits, so a test sees several attempts in a second.
fn quick() -> ReconnectOptions {
    ReconnectOptions {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(5),
        give_up_after: Duration::from_secs(20),
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(200),
        tls: None,
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

async fn reconnecting(addr: SocketAddr, opts: ReconnectOptions) -> Arc<ReconnectingClient> {
    Arc::new(
        blocking(move || ReconnectingClient::connect(addr.to_string(), "vol".into(), opts))
            .await
            .unwrap(),
    )
}

/// Counts the exports opened: one per handshake of our client (`NBD_OPT_GO`).
struct Counting {
    inner: Arc<TestExports>,
    opens: AtomicU64,
}

impl Exports for Counting {
    fn open(&self, name: &str, peer: SocketAddr) -> Option<OpenedExport> {
        self.opens.fetch_add(1, Ordering::SeqCst);
        self.inner.open(name, peer)
    }
    fn list(&self, peer: SocketAddr) -> Vec<String> {
        self.inner.list(peer)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_made_while_the_server_is_down_complete_once_it_is_back() {
    let exports = TestExports::new();
    let dev = MemDevice::new(4 * MIB, 0);
    exports.add("vol", dev.clone());
    let server = TestServer::start(exports.clone()).await;
    let addr = server.addr;
    let c = reconnecting(addr, quick()).await;
    let c2 = Arc::clone(&c);
    blocking(move || c2.write(0, &[0x11; 4096], false).unwrap()).await;

    server.stop().await.unwrap();
    let c2 = Arc::clone(&c);
    let pending = tokio::task::spawn_blocking(move || {
        c2.write(8192, &[0x77; 4096], false)?;
        c2.flush()?;
        let mut back = vec![0u8; 3 * 4096];
        c2.read(0, &mut back)?;
        io::Result::Ok(back)
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        !pending.is_finished(),
        "a request finished with the server down"
    );

    let server = TestServer::start_at(addr, exports, NbdConfig::default()).await;
    let back = tokio::time::timeout(T, pending)
        .await
        .expect("requests complete once the server is back")
        .unwrap()
        .unwrap();
    assert_eq!(&back[..4096], &[0x11; 4096][..]);
    assert_eq!(&back[4096..8192], &[0; 4096][..]);
    assert_eq!(&back[8192..], &[0x77; 4096][..]);
    assert_eq!(dev.bytes(8192, 4096), vec![0x77; 4096]);
    assert_eq!(dev.flushes.load(Ordering::SeqCst), 1);
    assert_eq!(c.connections(), 2);
    drop(c);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_fails_once_the_server_stays_away_past_give_up_after() {
    let exports = TestExports::new();
    let dev = MemDevice::new(MIB, 0x5a);
    exports.add("vol", dev.clone());
    let server = TestServer::start(exports.clone()).await;
    let addr = server.addr;
    let opts = ReconnectOptions {
        give_up_after: Duration::from_millis(800),
        ..quick()
    };
    let c = reconnecting(addr, opts).await;
    server.stop().await.unwrap();

    let c2 = Arc::clone(&c);
    let (err, took) = blocking(move || {
        let started = Instant::now();
        let err = c2.read(0, &mut [0u8; 512]).unwrap_err();
        (err, started.elapsed())
    })
    .await;
    assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
    // No OS error code: the FUSE layer answers EIO.
    assert_eq!(err.raw_os_error(), None, "{err}");
    assert!(err.to_string().contains("unreachable"), "{err}");
    assert!(took >= Duration::from_millis(800), "gave up after {took:?}");
    assert!(took < Duration::from_secs(5), "gave up after {took:?}");

    // Giving up fails that request, not the client: once the server is
    // back, the next request reconnects.
    let server = TestServer::start_at(addr, exports, NbdConfig::default()).await;
    let c2 = Arc::clone(&c);
    let buf = blocking(move || {
        let mut buf = [0u8; 512];
        c2.read(0, &mut buf).map(|()| buf)
    })
    .await
    .unwrap();
    assert_eq!(buf, [0x5a; 512]);
    drop(c);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_size_learns_that_the_export_grew() {
    let exports = TestExports::new();
    let dev = MemDevice::new(MIB, 0);
    exports.add("vol", dev.clone());
    let server = TestServer::start(exports.clone()).await;
    let c = reconnecting(server.addr, quick()).await;
    assert_eq!(c.size(), MIB as u64);

    dev.data.lock().unwrap().resize(3 * MIB, 0);
    // Known only after a refresh.
    assert_eq!(c.size(), MIB as u64);
    let c2 = Arc::clone(&c);
    let size = blocking(move || c2.refresh_size()).await.unwrap();
    assert_eq!(size, 3 * MIB as u64);
    assert_eq!(c.size(), 3 * MIB as u64);
    assert_eq!(c.connections(), 2);

    let c2 = Arc::clone(&c);
    let (beyond_read, beyond_write) = blocking(move || {
        c2.write(2 * MIB as u64, &[0x42; 4096], false).unwrap();
        // Past the end: the server's answer, returned at once, no reconnect.
        let r = c2.read(3 * MIB as u64, &mut [0u8; 512]).unwrap_err();
        let w = c2
            .write(3 * MIB as u64 - 512, &[1u8; 1024], false)
            .unwrap_err();
        (r, w)
    })
    .await;
    assert_eq!(dev.bytes(2 * MIB, 4096), vec![0x42; 4096]);
    assert_eq!(beyond_read.raw_os_error(), Some(22), "{beyond_read}");
    assert_eq!(beyond_write.raw_os_error(), Some(28), "{beyond_write}");
    assert_eq!(c.connections(), 2);
    drop(c);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_threads_failing_together_make_one_new_connection() {
    let inner = TestExports::new();
    let dev = MemDevice::new(4 * MIB, 0);
    inner.add("vol", dev.clone());
    let exports = Arc::new(Counting {
        inner,
        opens: AtomicU64::new(0),
    });
    let server = TestServer::start_at(free_addr(), exports.clone(), NbdConfig::default()).await;
    let addr = server.addr;
    let c = reconnecting(addr, quick()).await;
    assert_eq!(exports.opens.load(Ordering::SeqCst), 1);
    server.stop().await.unwrap();

    let threads: Vec<_> = (0..16u8)
        .map(|i| {
            let c = Arc::clone(&c);
            std::thread::spawn(move || {
                let at = u64::from(i) * 65536;
                c.write(at, &[i + 1; 4096], false)?;
                let mut back = vec![0u8; 4096];
                c.read(at, &mut back)?;
                io::Result::Ok(back)
            })
        })
        .collect();
    // Every thread fails on the lost connection and waits; several
    // attempts are refused meanwhile.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let server = TestServer::start_at(addr, exports.clone(), NbdConfig::default()).await;
    let results = tokio::time::timeout(
        T,
        blocking(move || {
            threads
                .into_iter()
                .map(|t| t.join().unwrap())
                .collect::<Vec<_>>()
        }),
    )
    .await
    .unwrap();
    for (i, r) in results.into_iter().enumerate() {
        assert_eq!(r.unwrap(), vec![i as u8 + 1; 4096]);
        assert_eq!(dev.bytes(i * 65536, 4096), vec![i as u8 + 1; 4096]);
    }
    assert_eq!(exports.opens.load(Ordering::SeqCst), 2);
    assert_eq!(c.connections(), 2);
    drop(c);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_ends_the_retries_at_once() {
    let exports = TestExports::new();
    exports.add("vol", MemDevice::new(MIB, 0));
    let server = TestServer::start(exports).await;
    let c = reconnecting(server.addr, quick()).await;
    server.stop().await.unwrap();
    let c2 = Arc::clone(&c);
    let pending = tokio::task::spawn_blocking(move || c2.read(0, &mut [0u8; 512]));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!pending.is_finished());
    c.close();
    let err = tokio::time::timeout(Duration::from_secs(2), pending)
        .await
        .expect("close wakes the waiting request")
        .unwrap()
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotConnected, "{err}");
    let c2 = Arc::clone(&c);
    let err = blocking(move || c2.flush().unwrap_err()).await;
    assert_eq!(err.kind(), io::ErrorKind::NotConnected, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_slower_than_the_request_timeout_counts_as_dead() {
    let exports = TestExports::new();
    exports.add("vol", MemDevice::slow(MIB, 0, Duration::from_millis(1500)));
    let server = TestServer::start(exports).await;
    let addr = server.addr;

    // The plain client: the request fails, and the connection with it.
    let (err, took, broken, next) = blocking(move || {
        let c = NbdClient::connect(addr, "vol")
            .unwrap()
            .with_request_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let started = Instant::now();
        let err = c.read(0, &mut [0u8; 512]).unwrap_err();
        let took = started.elapsed();
        let next = c.read(0, &mut [0u8; 512]).unwrap_err();
        (err, took, c.is_broken(), next)
    })
    .await;
    assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
    assert!(took < Duration::from_secs(1), "timed out after {took:?}");
    assert!(broken);
    assert_eq!(next.kind(), io::ErrorKind::BrokenPipe, "{next}");

    // The reconnecting client tries new connections, then gives up.
    let opts = ReconnectOptions {
        request_timeout: Duration::from_millis(200),
        give_up_after: Duration::from_millis(700),
        ..quick()
    };
    let c = reconnecting(addr, opts).await;
    let c2 = Arc::clone(&c);
    let err = blocking(move || c2.read(0, &mut [0u8; 512]).unwrap_err()).await;
    assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
    assert!(c.connections() >= 2, "{} connections", c.connections());
    drop(c);
    server.stop().await.unwrap();
}

/// A server "vol" over a device of 4 MiB of zeroes, on its own port.
async fn vol_server() -> (TestServer, Arc<MemDevice>) {
    let exports = TestExports::new();
    let dev = MemDevice::new(4 * MIB, 0);
    exports.add("vol", dev.clone());
    (TestServer::start(exports).await, dev)
}

/// A client following `target`, an address the test changes.
async fn following(target: &Arc<Mutex<String>>) -> Arc<ReconnectingClient> {
    let t = Arc::clone(target);
    let source: AddressSource = Arc::new(move || t.lock().unwrap().clone());
    Arc::new(
        blocking(move || ReconnectingClient::connect_following(source, "vol".into(), quick()))
            .await
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_follow_the_server_to_its_new_address() {
    let (a, dev_a) = vol_server().await;
    let (b, dev_b) = vol_server().await;
    let target = Arc::new(Mutex::new(a.addr.to_string()));
    let c = following(&target).await;
    let c2 = Arc::clone(&c);
    blocking(move || c2.write(0, &[0x11; 4096], false).unwrap()).await;
    assert_eq!(dev_a.bytes(0, 4096), vec![0x11; 4096]);

    // A stops: the requests wait, retrying A.
    a.stop().await.unwrap();
    let c2 = Arc::clone(&c);
    let pending = tokio::task::spawn_blocking(move || {
        c2.write(8192, &[0x77; 4096], false)?;
        c2.flush()?;
        let mut back = vec![0u8; 4096];
        c2.read(8192, &mut back)?;
        io::Result::Ok(back)
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!pending.is_finished(), "a request finished with A down");

    // The address now says B: the next attempt goes there.
    *target.lock().unwrap() = b.addr.to_string();
    let back = tokio::time::timeout(T, pending)
        .await
        .expect("requests complete on B")
        .unwrap()
        .unwrap();
    assert_eq!(back, vec![0x77; 4096]);
    assert_eq!(dev_b.bytes(8192, 4096), vec![0x77; 4096]);
    assert_eq!(dev_b.flushes.load(Ordering::SeqCst), 1);
    assert_eq!(dev_a.bytes(8192, 4096), vec![0; 4096]);
    assert_eq!(c.address(), b.addr.to_string());
    assert_eq!(c.connections(), 2);

    // Later requests are B's too (its bytes, not A's).
    let c2 = Arc::clone(&c);
    let first = blocking(move || {
        let mut buf = vec![0u8; 4096];
        c2.read(0, &mut buf).map(|()| buf)
    })
    .await
    .unwrap();
    assert_eq!(first, vec![0; 4096]);
    assert_eq!(c.connections(), 2);
    drop(c);
    b.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_connection_asked_for_moves_to_the_new_address_and_abandons_the_old() {
    // A answers every call after 3 s: a request there is still waiting when
    // the client moves.
    let exports_a = TestExports::new();
    let dev_a = MemDevice::slow(4 * MIB, 0xaa, Duration::from_secs(3));
    exports_a.add("vol", dev_a.clone());
    let a = TestServer::start(exports_a).await;
    let exports_b = TestExports::new();
    let dev_b = MemDevice::new(4 * MIB, 0x5b);
    exports_b.add("vol", dev_b.clone());
    let b = TestServer::start(exports_b).await;
    let target = Arc::new(Mutex::new(a.addr.to_string()));
    let c = following(&target).await;

    let c2 = Arc::clone(&c);
    let started = Instant::now();
    let pending = tokio::task::spawn_blocking(move || {
        let mut buf = vec![0u8; 4096];
        c2.read(0, &mut buf).map(|()| buf)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A still serves: changing the address alone moves nothing.
    *target.lock().unwrap() = b.addr.to_string();
    assert_eq!(c.address(), a.addr.to_string());

    // A size refresh (the device process's SIGHUP) connects anew: to B;
    // the read waiting on A is re-sent there at once.
    let c2 = Arc::clone(&c);
    let size = blocking(move || c2.refresh_size()).await.unwrap();
    assert_eq!(size, 4 * MIB as u64);
    assert_eq!(c.address(), b.addr.to_string());
    let back = tokio::time::timeout(T, pending)
        .await
        .expect("the read completes")
        .unwrap()
        .unwrap();
    assert_eq!(back, vec![0x5b; 4096]);
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "the read waited for A: {:?}",
        started.elapsed()
    );
    let c2 = Arc::clone(&c);
    blocking(move || c2.write(4096, &[0x33; 4096], false).unwrap()).await;
    assert_eq!(dev_b.bytes(4096, 4096), vec![0x33; 4096]);
    assert_eq!(dev_a.writes.load(Ordering::SeqCst), 0);
    assert_eq!(c.connections(), 2);
    drop(c);
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

/// An address nothing listens on yet.
fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}
