//! The NBD client against our own server (in-memory devices) and against
//! qemu-nbd.

mod common;

use common::*;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use svs_nbd::protocol::*;
use svs_nbd::NbdClient;

const MIB: usize = 1024 * 1024;

async fn client(server: &TestServer, name: &str) -> io::Result<NbdClient> {
    let addr = server.addr;
    let name = name.to_owned();
    tokio::task::spawn_blocking(move || NbdClient::connect(addr, &name))
        .await
        .unwrap()
}

/// Runs blocking client calls off the async workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_reports_size_and_flags_and_commands_reach_the_device() {
    let exports = TestExports::new();
    let dev = MemDevice::new(4 * MIB, 0x11);
    exports.add("vol", dev.clone());
    let server = TestServer::start(exports).await;
    let c = Arc::new(client(&server, "vol").await.unwrap());
    assert_eq!(c.size(), 4 * MIB as u64);
    assert_eq!(
        c.info().flags,
        transmission_flags(ExportTraits {
            read_only: false,
            structured: false,
            shared_flush: true,
        })
    );
    assert_eq!(c.info().max_payload, 32 * MIB as u32);
    assert!(!c.read_only());

    let c2 = Arc::clone(&c);
    blocking(move || {
        c2.write(4096, &[0xab; 8192], false).unwrap();
        c2.write(65536, &[0xcd; 512], true).unwrap();
        c2.write_zeroes(1 << 20, 4096, false).unwrap();
        c2.trim(2 << 20, 4096).unwrap();
        c2.flush().unwrap();
        let mut buf = vec![0u8; 3 * 4096];
        c2.read(0, &mut buf).unwrap();
        assert!(buf[..4096].iter().all(|&b| b == 0x11));
        assert!(buf[4096..].iter().all(|&b| b == 0xab));
        let mut z = vec![0xffu8; 4096];
        c2.read(1 << 20, &mut z).unwrap();
        assert_eq!(z, vec![0u8; 4096]);
    })
    .await;
    assert_eq!(dev.bytes(4096, 8192), vec![0xab; 8192]);
    assert_eq!(dev.bytes(65536, 512), vec![0xcd; 512]);
    assert_eq!(dev.bytes(2 << 20, 4096), vec![0xdd; 4096]);
    assert_eq!(dev.writes.load(Ordering::SeqCst), 2);
    assert_eq!(dev.fua_writes.load(Ordering::SeqCst), 1);
    assert_eq!(dev.zeroes.load(Ordering::SeqCst), 1);
    assert_eq!(dev.trims.load(Ordering::SeqCst), 1);
    assert_eq!(dev.flushes.load(Ordering::SeqCst), 1);
    blocking(move || Arc::into_inner(c).unwrap().disconnect().unwrap()).await;
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_requests_from_many_threads_are_in_flight_at_once() {
    let exports = TestExports::new();
    // Every device call sleeps 200 ms: 16 of them one after another would
    // take 3.2 s.
    let dev = MemDevice::slow(MIB, 0, Duration::from_millis(200));
    exports.add("vol", dev.clone());
    let server = TestServer::start(exports).await;
    let c = Arc::new(client(&server, "vol").await.unwrap());
    let started = Instant::now();
    let threads: Vec<_> = (0..16u8)
        .map(|i| {
            let c = Arc::clone(&c);
            std::thread::spawn(move || {
                let at = u64::from(i) * 4096;
                c.write(at, &[i + 1; 4096], false).unwrap();
                let mut back = vec![0u8; 4096];
                c.read(at, &mut back).unwrap();
                assert_eq!(back, vec![i + 1; 4096]);
            })
        })
        .collect();
    blocking(move || threads.into_iter().for_each(|t| t.join().unwrap())).await;
    let took = started.elapsed();
    assert!(took < Duration::from_millis(2000), "took {took:?}");
    for i in 0..16u8 {
        assert_eq!(dev.bytes(usize::from(i) * 4096, 4096), vec![i + 1; 4096]);
    }
    drop(c);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_errors_come_back_as_eio_and_enospc() {
    let exports = TestExports::new();
    let dev = MemDevice::new(MIB, 0);
    exports.add("vol", dev.clone());
    let server = TestServer::start(exports).await;
    let c = Arc::new(client(&server, "vol").await.unwrap());

    *dev.fail_with.lock().unwrap() = Some(io::ErrorKind::StorageFull);
    let c2 = Arc::clone(&c);
    let err = blocking(move || c2.write(0, &[1; 512], false).unwrap_err()).await;
    assert_eq!(err.raw_os_error(), Some(28));

    *dev.fail_with.lock().unwrap() = Some(io::ErrorKind::Other);
    let c2 = Arc::clone(&c);
    let err = blocking(move || c2.read(0, &mut [0; 512]).unwrap_err()).await;
    assert_eq!(err.raw_os_error(), Some(5));

    // The connection is still usable after errors.
    *dev.fail_with.lock().unwrap() = None;
    let c2 = Arc::clone(&c);
    blocking(move || c2.write(0, &[7; 512], false).unwrap()).await;
    assert_eq!(dev.bytes(0, 512), vec![7; 512]);
    drop(c);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_export_refuses_writes_with_eperm_and_still_reads() {
    let exports = TestExports::new();
    let dev = MemDevice::read_only(MIB, 0x42);
    exports.add("ro", dev.clone());
    let server = TestServer::start(exports).await;
    let c = Arc::new(client(&server, "ro").await.unwrap());
    assert!(c.read_only());
    let c2 = Arc::clone(&c);
    blocking(move || {
        for err in [
            c2.write(0, &[1; 512], false).unwrap_err(),
            c2.trim(0, 512).unwrap_err(),
            c2.write_zeroes(0, 512, false).unwrap_err(),
        ] {
            assert_eq!(err.raw_os_error(), Some(1), "{err}");
        }
        let mut buf = [0u8; 512];
        c2.read(0, &mut buf).unwrap();
        assert_eq!(buf, [0x42; 512]);
    })
    .await;
    assert_eq!(dev.writes.load(Ordering::SeqCst), 0);
    drop(c);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_export_is_not_found() {
    let exports = TestExports::new();
    let server = TestServer::start(exports).await;
    let err = client(&server, "nope").await.err().unwrap();
    assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_fail_instead_of_hanging_when_the_export_closes() {
    let exports = TestExports::new();
    let dev = MemDevice::new(MIB, 0);
    let closed = exports.add("vol", dev.clone());
    let server = TestServer::start(exports).await;
    let c = Arc::new(client(&server, "vol").await.unwrap());
    closed.cancel();
    let c2 = Arc::clone(&c);
    let err = tokio::time::timeout(
        T,
        blocking(move || {
            // The close may race the first request; soon every one fails.
            loop {
                if let Err(e) = c2.read(0, &mut [0; 512]) {
                    return e;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }),
    )
    .await
    .unwrap();
    assert_eq!(err.kind(), io::ErrorKind::BrokenPipe, "{err}");
    drop(c);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_and_writes_larger_than_the_maximum_payload_are_split() {
    let exports = TestExports::new();
    let dev = MemDevice::new(8 * MIB, 0);
    exports.add("vol", dev.clone());
    let config = svs_nbd::NbdConfig {
        max_payload: 4096,
        ..Default::default()
    };
    let server = TestServer::start_with(exports, config).await;
    let c = Arc::new(client(&server, "vol").await.unwrap());
    assert_eq!(c.info().max_payload, 4096);
    let data: Vec<u8> = (0..MIB).map(|i| (i % 251) as u8).collect();
    let c2 = Arc::clone(&c);
    let d2 = data.clone();
    let back = blocking(move || {
        c2.write(12345, &d2, false).unwrap();
        let mut back = vec![0u8; MIB];
        c2.read(12345, &mut back).unwrap();
        back
    })
    .await;
    assert!(back == data);
    assert_eq!(dev.writes.load(Ordering::SeqCst), 256);
    drop(c);
    server.stop().await.unwrap();
}

#[test]
fn qemu_nbd_serves_a_file_the_client_reads_and_writes() {
    require_qemu();
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("disk.raw");
    std::fs::write(&image, vec![0x5a; 2 * MIB]).unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let qemu = Kill(
        std::process::Command::new("qemu-nbd")
            .args(["-f", "raw", "-x", "disk", "-b", "127.0.0.1", "-p"])
            .arg(port.to_string())
            .arg(&image)
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + T;
    let c = loop {
        match NbdClient::connect(("127.0.0.1", port), "disk") {
            Ok(c) => break c,
            Err(e) if Instant::now() > deadline => panic!("qemu-nbd: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    assert_eq!(c.size(), 2 * MIB as u64);
    c.write(MIB as u64, &[0xc3; 65536], true).unwrap();
    c.write_zeroes(0, 4096, false).unwrap();
    c.flush().unwrap();
    let mut buf = vec![0u8; 8192];
    c.read(0, &mut buf).unwrap();
    assert_eq!(&buf[..4096], &[0u8; 4096][..]);
    assert_eq!(&buf[4096..], &[0x5a; 4096][..]);
    c.disconnect().unwrap();
    drop(qemu);
    let on_disk = std::fs::read(&image).unwrap();
    assert_eq!(&on_disk[MIB..MIB + 65536], &[0xc3; 65536][..]);
    assert_eq!(&on_disk[MIB + 65536..MIB + 65540], &[0x5a; 4][..]);
}

#[test]
fn a_server_that_never_greets_times_the_handshake_out() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let started = Instant::now();
    let err = NbdClient::connect_timeout(&addr, "vol", Duration::from_millis(300))
        .err()
        .unwrap();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    drop(listener);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_timed_handshake_slow_requests_still_complete() {
    let exports = TestExports::new();
    let dev = MemDevice::slow(MIB, 0x21, Duration::from_millis(600));
    exports.add("vol", dev.clone());
    let server = TestServer::start(exports).await;
    let addr = server.addr;
    let buf = blocking(move || {
        let c = NbdClient::connect_timeout(&addr, "vol", Duration::from_millis(300)).unwrap();
        let mut buf = [0u8; 16];
        c.read(0, &mut buf).unwrap();
        buf
    })
    .await;
    assert_eq!(buf, [0x21; 16]);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negotiate_hands_back_the_stream_in_transmission_with_the_export_info() {
    let exports = TestExports::new();
    let dev = MemDevice::new(MIB, 0x3c);
    exports.add("vol", dev.clone());
    let server = TestServer::start(exports).await;
    let addr = server.addr;
    let (info, reply) = blocking(move || {
        use std::io::{Read, Write};
        let (mut s, info) = NbdClient::negotiate(&addr, "vol", Duration::from_secs(5)).unwrap();
        // The stream speaks transmission: a raw read request is answered.
        s.write_all(&request(CMD_READ, 0, 9, 0, 16)).unwrap();
        let mut reply = vec![0u8; SIMPLE_REPLY_LEN + 16];
        s.read_exact(&mut reply).unwrap();
        (info, reply)
    })
    .await;
    assert_eq!(info.size, MIB as u64);
    assert_eq!(
        info.flags,
        transmission_flags(ExportTraits {
            read_only: false,
            structured: false,
            shared_flush: true,
        })
    );
    assert_eq!(&reply[4..8], &[0, 0, 0, 0]);
    assert_eq!(u64::from_be_bytes(reply[8..16].try_into().unwrap()), 9);
    assert_eq!(&reply[SIMPLE_REPLY_LEN..], &[0x3c; 16][..]);
    server.stop().await.unwrap();
}
