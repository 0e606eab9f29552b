//! The transmission phase, driven by a raw TCP client: every command, the
//! error values, pipelining, and hostile or broken clients; plus the
//! connection-level controls (closed exports, connection limit, shutdown).

mod common;

use std::collections::HashMap;
use std::io::ErrorKind;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use svs_nbd::protocol::*;
use svs_nbd::NbdConfig;
use tokio::io::AsyncWriteExt;

const MIB: usize = 1024 * 1024;
const SIZE: u64 = MIB as u64;

async fn setup() -> (TestServer, std::sync::Arc<MemDevice>) {
    let exports = TestExports::new();
    let dev = MemDevice::new(MIB, 0x11);
    exports.add("vol", dev.clone());
    exports.add("ro", MemDevice::read_only(MIB, 0x22));
    (TestServer::start(exports).await, dev)
}

#[tokio::test]
async fn write_read_flush_trim_and_write_zeroes_reach_the_device() {
    let (server, dev) = setup().await;
    let mut s = connect(server.addr, "vol").await;

    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 256) as u8).collect();
    assert_eq!(nbd_write(&mut s, 777, &data).await, 0);
    assert_eq!(dev.bytes(777, data.len()), data);
    assert_eq!(
        nbd_read(&mut s, 777, data.len() as u32).await.unwrap(),
        data
    );

    assert_eq!(roundtrip(&mut s, CMD_FLUSH, 0, 0, 0, &[]).await, 0);
    assert_eq!(dev.flushes.load(Ordering::SeqCst), 1);

    assert_eq!(roundtrip(&mut s, CMD_TRIM, 0, 65536, 4096, &[]).await, 0);
    assert_eq!(dev.trims.load(Ordering::SeqCst), 1);
    assert!(dev.bytes(65536, 4096).iter().all(|&b| b == 0xdd));

    assert_eq!(
        roundtrip(&mut s, CMD_WRITE_ZEROES, 0, 131072, 8192, &[]).await,
        0
    );
    assert_eq!(dev.zeroes.load(Ordering::SeqCst), 1);
    assert!(dev.bytes(131072, 8192).iter().all(|&b| b == 0));
    assert_eq!(
        nbd_read(&mut s, 131072, 8192).await.unwrap(),
        vec![0u8; 8192]
    );

    // The last byte of the device is reachable.
    assert_eq!(nbd_write(&mut s, SIZE - 1, &[0x5e]).await, 0);
    assert_eq!(nbd_read(&mut s, SIZE - 1, 1).await.unwrap(), [0x5e]);
    disconnect(s).await;
}

#[tokio::test]
async fn fua_is_passed_to_the_device_and_a_fua_trim_is_flushed() {
    let (server, dev) = setup().await;
    let mut s = connect(server.addr, "vol").await;
    assert_eq!(
        roundtrip(&mut s, CMD_WRITE, CMD_FLAG_FUA, 0, 4, b"abcd").await,
        0
    );
    assert_eq!(dev.fua_writes.load(Ordering::SeqCst), 1);
    assert_eq!(
        roundtrip(&mut s, CMD_WRITE_ZEROES, CMD_FLAG_FUA, 0, 4096, &[]).await,
        0
    );
    assert_eq!(dev.fua_writes.load(Ordering::SeqCst), 2);
    assert_eq!(
        roundtrip(&mut s, CMD_TRIM, CMD_FLAG_FUA, 0, 4096, &[]).await,
        0
    );
    assert_eq!(dev.flushes.load(Ordering::SeqCst), 1);
    // Without FUA, no FUA reaches the device.
    assert_eq!(nbd_write(&mut s, 0, b"efgh").await, 0);
    assert_eq!(dev.fua_writes.load(Ordering::SeqCst), 2);
    // FUA on a read or a flush is accepted (and ignored).
    assert_eq!(
        roundtrip(&mut s, CMD_READ, CMD_FLAG_FUA, 0, 0, &[]).await,
        0
    );
    assert_eq!(
        roundtrip(&mut s, CMD_FLUSH, CMD_FLAG_FUA, 0, 0, &[]).await,
        0
    );
    disconnect(s).await;
}

#[tokio::test]
async fn write_zeroes_with_no_hole_writes_zeroes_through_write() {
    let (server, dev) = setup().await;
    let mut s = connect(server.addr, "vol").await;
    let len = 600 * 1024; // more than one zero buffer
    assert_eq!(
        roundtrip(&mut s, CMD_WRITE_ZEROES, CMD_FLAG_NO_HOLE, 1000, len, &[]).await,
        0
    );
    assert!(dev.bytes(1000, len as usize).iter().all(|&b| b == 0));
    assert_eq!(dev.bytes(999, 1), [0x11]);
    assert_eq!(dev.bytes(1000 + len as usize, 1), [0x11]);
    assert_eq!(dev.zeroes.load(Ordering::SeqCst), 0, "no hole-making call");
    assert!(dev.writes.load(Ordering::SeqCst) >= 3);
    disconnect(s).await;
}

#[tokio::test]
async fn requests_beyond_the_end_answer_einval_for_read_and_trim_and_enospc_for_writes() {
    let (server, dev) = setup().await;
    let mut s = connect(server.addr, "vol").await;
    for (offset, len) in [
        (SIZE, 1u32),
        (SIZE - 512, 1024),
        (u64::MAX, 1),
        (u64::MAX - 100, 4096),
        (SIZE + 1, 0),
    ] {
        assert_eq!(
            nbd_read(&mut s, offset, len).await,
            Err(EINVAL),
            "read {offset}+{len}"
        );
        assert_eq!(
            roundtrip(&mut s, CMD_TRIM, 0, offset, len, &[]).await,
            EINVAL
        );
        let payload = vec![0xee; len as usize];
        assert_eq!(
            roundtrip(&mut s, CMD_WRITE, 0, offset, len, &payload).await,
            ENOSPC
        );
        assert_eq!(
            roundtrip(&mut s, CMD_WRITE_ZEROES, 0, offset, len, &[]).await,
            ENOSPC
        );
    }
    assert!(
        dev.snapshot().iter().all(|&b| b == 0x11),
        "device untouched"
    );
    // The connection is still in step.
    assert_eq!(nbd_read(&mut s, 0, 16).await.unwrap(), vec![0x11; 16]);
    disconnect(s).await;
}

#[tokio::test]
async fn a_read_longer_than_max_payload_answers_einval_and_the_connection_stays_usable() {
    let exports = TestExports::new();
    exports.add("vol", MemDevice::new(4 * MIB, 0x11));
    let config = NbdConfig {
        max_payload: 64 * 1024,
        ..NbdConfig::default()
    };
    let server = TestServer::start_with(exports, config).await;
    let mut s = connect(server.addr, "vol").await;
    assert_eq!(nbd_read(&mut s, 0, 64 * 1024 + 1).await, Err(EINVAL));
    assert_eq!(nbd_read(&mut s, 0, u32::MAX).await, Err(EINVAL));
    assert_eq!(
        nbd_read(&mut s, 0, 64 * 1024).await.unwrap().len(),
        64 * 1024
    );
    // Trim and write zeroes carry no payload: not bounded by max_payload.
    assert_eq!(
        roundtrip(&mut s, CMD_WRITE_ZEROES, 0, 0, 2 * MIB as u32, &[]).await,
        0
    );
    disconnect(s).await;
}

#[tokio::test]
async fn a_huge_read_with_the_default_max_payload_answers_einval() {
    let (server, _dev) = setup().await;
    let mut s = connect(server.addr, "vol").await;
    assert_eq!(nbd_read(&mut s, 0, u32::MAX).await, Err(EINVAL));
    assert_eq!(nbd_read(&mut s, 0, 32 * MIB as u32 + 1).await, Err(EINVAL));
    assert_normal_client_works(server.addr, "vol").await;
    disconnect(s).await;
}

#[tokio::test]
async fn a_write_longer_than_max_payload_closes_the_connection() {
    let exports = TestExports::new();
    let dev = MemDevice::new(4 * MIB, 0x11);
    exports.add("vol", dev.clone());
    let config = NbdConfig {
        max_payload: 64 * 1024,
        ..NbdConfig::default()
    };
    let server = TestServer::start_with(exports, config).await;
    let mut s = connect(server.addr, "vol").await;
    s.write_all(&request(CMD_WRITE, 0, 1, 0, 64 * 1024 + 1))
        .await
        .unwrap();
    // Part of the payload: the server does not wait for the rest.
    let _ = s.write_all(&[0xee; 4096]).await;
    assert!(is_closed(&mut s).await);
    assert!(dev.snapshot().iter().all(|&b| b == 0x11));
    assert_normal_client_works(server.addr, "vol").await;
}

#[tokio::test]
async fn writes_trims_and_write_zeroes_on_a_read_only_export_answer_eperm() {
    let exports = TestExports::new();
    let dev = MemDevice::read_only(MIB, 0x22);
    exports.add("ro", dev.clone());
    let server = TestServer::start(exports).await;
    let mut s = connect(server.addr, "ro").await;
    assert_eq!(nbd_write(&mut s, 0, &[1, 2, 3]).await, EPERM);
    assert_eq!(
        roundtrip(&mut s, CMD_WRITE, CMD_FLAG_FUA, SIZE, 3, &[1, 2, 3]).await,
        EPERM
    );
    assert_eq!(roundtrip(&mut s, CMD_TRIM, 0, 0, 4096, &[]).await, EPERM);
    assert_eq!(
        roundtrip(&mut s, CMD_WRITE_ZEROES, 0, 0, 4096, &[]).await,
        EPERM
    );
    assert_eq!(roundtrip(&mut s, CMD_FLUSH, 0, 0, 0, &[]).await, 0);
    assert_eq!(nbd_read(&mut s, 0, 8).await.unwrap(), vec![0x22; 8]);
    assert!(dev.snapshot().iter().all(|&b| b == 0x22));
    assert_eq!(
        dev.writes.load(Ordering::SeqCst) + dev.trims.load(Ordering::SeqCst),
        0
    );
    disconnect(s).await;
}

#[tokio::test]
async fn unknown_commands_and_flags_answer_einval() {
    let (server, dev) = setup().await;
    let mut s = connect(server.addr, "vol").await;
    // Block status without structured replies and a context is refused too.
    for command in [CMD_BLOCK_STATUS, 8, 42, u16::MAX] {
        assert_eq!(
            roundtrip(&mut s, command, 0, 0, 4096, &[]).await,
            EINVAL,
            "command {command}"
        );
    }
    assert_eq!(
        roundtrip(&mut s, CMD_READ, CMD_FLAG_DF, 0, 512, &[]).await,
        EINVAL
    );
    assert_eq!(
        roundtrip(&mut s, CMD_WRITE, CMD_FLAG_FAST_ZERO, 0, 0, &[]).await,
        EINVAL
    );
    assert_eq!(
        roundtrip(&mut s, CMD_TRIM, 1 << 12, 0, 512, &[]).await,
        EINVAL
    );
    // A refused write's payload is still consumed: the stream stays in step.
    assert_eq!(
        roundtrip(&mut s, CMD_WRITE, CMD_FLAG_NO_HOLE, 0, 5, b"hello").await,
        EINVAL
    );
    assert!(dev.snapshot().iter().all(|&b| b == 0x11));
    assert_eq!(nbd_read(&mut s, 0, 4).await.unwrap(), vec![0x11; 4]);
    disconnect(s).await;
}

#[tokio::test]
async fn zero_length_requests_succeed_without_disconnecting() {
    let (server, dev) = setup().await;
    let mut s = connect(server.addr, "vol").await;
    assert_eq!(nbd_read(&mut s, 0, 0).await.unwrap(), Vec::<u8>::new());
    assert_eq!(nbd_write(&mut s, 0, &[]).await, 0);
    assert_eq!(roundtrip(&mut s, CMD_TRIM, 0, 0, 0, &[]).await, 0);
    assert_eq!(
        roundtrip(&mut s, CMD_WRITE_ZEROES, 0, SIZE, 0, &[]).await,
        0
    );
    assert_eq!(dev.writes.load(Ordering::SeqCst), 0);
    disconnect(s).await;
}

#[tokio::test]
async fn a_bad_request_magic_closes_the_connection() {
    let (server, _dev) = setup().await;
    let mut s = connect(server.addr, "vol").await;
    let mut r = request(CMD_READ, 0, 1, 0, 512);
    r[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    s.write_all(&r).await.unwrap();
    assert!(is_closed(&mut s).await);
    assert_normal_client_works(server.addr, "vol").await;
}

#[tokio::test]
async fn a_connection_dropped_mid_write_payload_leaves_the_device_and_other_clients_unaffected() {
    let (server, dev) = setup().await;
    let mut other = connect(server.addr, "vol").await;
    let mut s = connect(server.addr, "vol").await;
    let mut b = request(CMD_WRITE, 0, 1, 0, 65536);
    b.extend_from_slice(&[0xee; 30000]);
    s.write_all(&b).await.unwrap();
    drop(s);
    // Dropped mid-header too.
    let mut s = connect(server.addr, "vol").await;
    s.write_all(&request(CMD_READ, 0, 2, 0, 512)[..11])
        .await
        .unwrap();
    drop(s);

    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        dev.snapshot().iter().all(|&b| b == 0x11),
        "no partial write"
    );
    assert_eq!(dev.writes.load(Ordering::SeqCst), 0);
    // The client already connected goes on, and new ones work.
    assert_eq!(nbd_write(&mut other, 4096, b"still here").await, 0);
    assert_eq!(nbd_read(&mut other, 4096, 10).await.unwrap(), b"still here");
    disconnect(other).await;
    assert_normal_client_works(server.addr, "vol").await;
}

#[tokio::test]
async fn pipelined_requests_are_all_answered_with_their_handles() {
    let exports = TestExports::new();
    let dev = MemDevice::slow(MIB, 0, Duration::from_millis(2));
    exports.add("vol", dev.clone());
    let server = TestServer::start(exports).await;
    let mut s = connect(server.addr, "vol").await;

    // 100 writes to distinct blocks, then 100 reads of them, all sent at once
    // (more than the server takes in flight), without waiting for replies.
    let n = 100u64;
    let reader = {
        let mut out = Vec::new();
        for i in 0..n {
            out.extend_from_slice(&request(CMD_WRITE, 0, i, i * 4096, 4096));
            out.extend_from_slice(&vec![i as u8; 4096]);
        }
        out
    };
    let (mut rd, mut wr) = s.into_split();
    let sender = tokio::spawn(async move {
        wr.write_all(&reader).await.unwrap();
        wr
    });
    let mut seen = HashMap::new();
    for _ in 0..n {
        let h = read_n_half(&mut rd, 16).await;
        assert_eq!(
            u32::from_be_bytes(h[0..4].try_into().unwrap()),
            SIMPLE_REPLY_MAGIC
        );
        assert_eq!(u32::from_be_bytes(h[4..8].try_into().unwrap()), 0);
        let handle = u64::from_be_bytes(h[8..16].try_into().unwrap());
        assert!(
            seen.insert(handle, ()).is_none(),
            "handle {handle} answered twice"
        );
    }
    assert_eq!(seen.len(), n as usize);
    let mut wr = sender.await.unwrap();

    let mut reads = Vec::new();
    for i in 0..n {
        reads.extend_from_slice(&request(CMD_READ, 0, 1000 + i, i * 4096, 4096));
    }
    wr.write_all(&reads).await.unwrap();
    let mut got = HashMap::new();
    for _ in 0..n {
        let h = read_n_half(&mut rd, 16).await;
        assert_eq!(u32::from_be_bytes(h[4..8].try_into().unwrap()), 0);
        let handle = u64::from_be_bytes(h[8..16].try_into().unwrap());
        let data = read_n_half(&mut rd, 4096).await;
        got.insert(handle, data);
    }
    for i in 0..n {
        assert_eq!(got[&(1000 + i)], vec![i as u8; 4096], "read {i}");
    }
    s = rd.reunite(wr).unwrap();
    disconnect(s).await;
}

async fn read_n_half(rd: &mut tokio::net::tcp::OwnedReadHalf, n: usize) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; n];
    tokio::time::timeout(T, rd.read_exact(&mut buf))
        .await
        .expect("reply in time")
        .unwrap();
    buf
}

#[tokio::test]
async fn requests_are_served_concurrently() {
    let exports = TestExports::new();
    let dev = MemDevice::slow(MIB, 0, Duration::from_millis(200));
    exports.add("vol", dev.clone());
    let server = TestServer::start(exports).await;
    let mut s = connect(server.addr, "vol").await;
    let mut b = Vec::new();
    for i in 0..8u64 {
        b.extend_from_slice(&request(CMD_READ, 0, i, i * 512, 512));
    }
    let started = std::time::Instant::now();
    s.write_all(&b).await.unwrap();
    for _ in 0..8 {
        assert_eq!(read_reply(&mut s).await.0, 0);
        read_n(&mut s, 512).await.unwrap();
    }
    // Eight 200 ms reads one after the other would take 1.6 s.
    assert!(
        started.elapsed() < Duration::from_millis(1200),
        "{:?}",
        started.elapsed()
    );
    disconnect(s).await;
}

#[tokio::test]
async fn disc_answers_the_requests_in_flight_before_closing() {
    let exports = TestExports::new();
    let dev = MemDevice::slow(MIB, 0, Duration::from_millis(100));
    exports.add("vol", dev.clone());
    let server = TestServer::start(exports).await;
    let mut s = connect(server.addr, "vol").await;
    let mut b = Vec::new();
    for i in 0..5u64 {
        b.extend_from_slice(&request(CMD_WRITE, 0, i, i * 512, 512));
        b.extend_from_slice(&[0x40 + i as u8; 512]);
    }
    b.extend_from_slice(&request(CMD_DISC, 0, 99, 0, 0));
    s.write_all(&b).await.unwrap();
    let mut handles: Vec<u64> = Vec::new();
    for _ in 0..5 {
        let (error, handle) = read_reply(&mut s).await;
        assert_eq!(error, 0);
        handles.push(handle);
    }
    handles.sort();
    assert_eq!(handles, [0, 1, 2, 3, 4]);
    assert!(is_closed(&mut s).await, "no reply to DISC, then close");
    for i in 0..5 {
        assert_eq!(dev.bytes(i * 512, 512), vec![0x40 + i as u8; 512]);
    }
}

#[tokio::test]
async fn device_errors_answer_eio_or_enospc() {
    let (server, dev) = setup().await;
    let mut s = connect(server.addr, "vol").await;
    *dev.fail_with.lock().unwrap() = Some(ErrorKind::StorageFull);
    assert_eq!(nbd_write(&mut s, 0, b"x").await, ENOSPC);
    assert_eq!(
        roundtrip(&mut s, CMD_WRITE_ZEROES, 0, 0, 512, &[]).await,
        ENOSPC
    );
    *dev.fail_with.lock().unwrap() = Some(ErrorKind::Other);
    assert_eq!(nbd_write(&mut s, 0, b"x").await, EIO);
    assert_eq!(nbd_read(&mut s, 0, 512).await, Err(EIO));
    assert_eq!(roundtrip(&mut s, CMD_FLUSH, 0, 0, 0, &[]).await, EIO);
    assert_eq!(roundtrip(&mut s, CMD_TRIM, 0, 0, 512, &[]).await, EIO);
    *dev.fail_with.lock().unwrap() = None;
    // A failed read sent no payload: the next reply is in step.
    assert_eq!(nbd_read(&mut s, 0, 4).await.unwrap(), vec![0x11; 4]);
    disconnect(s).await;
}

struct PanickingDevice;

impl svs_nbd::BlockDevice for PanickingDevice {
    fn size(&self) -> u64 {
        SIZE
    }
    fn read_only(&self) -> bool {
        false
    }
    fn read(&self, _: u64, _: &mut [u8]) -> std::io::Result<()> {
        panic!("device bug")
    }
    fn write(&self, _: u64, _: &[u8], _: bool) -> std::io::Result<()> {
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn trim(&self, _: u64, _: u64) -> std::io::Result<()> {
        Ok(())
    }
    fn write_zeroes(&self, _: u64, _: u64, _: bool) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_panicking_device_call_answers_eio() {
    let exports = TestExports::new();
    exports.add("bug", std::sync::Arc::new(PanickingDevice));
    let server = TestServer::start(exports).await;
    let mut s = connect(server.addr, "bug").await;
    assert_eq!(nbd_read(&mut s, 0, 512).await, Err(EIO));
    assert_eq!(nbd_write(&mut s, 0, b"ok").await, 0);
    disconnect(s).await;
}

#[tokio::test]
async fn cancelling_closed_disconnects_an_idle_client_and_refuses_nothing_else() {
    let exports = TestExports::new();
    let dev = MemDevice::new(MIB, 0);
    let closed = exports.add("vol", dev.clone());
    exports.add("other", MemDevice::new(MIB, 0));
    let server = TestServer::start(exports.clone()).await;
    let mut s = connect(server.addr, "vol").await;
    let mut other = connect(server.addr, "other").await;
    assert_eq!(nbd_write(&mut s, 0, b"a").await, 0);

    closed.cancel();
    let started = std::time::Instant::now();
    assert!(is_closed(&mut s).await);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // Another export's client is untouched.
    assert_eq!(nbd_read(&mut other, 0, 1).await.unwrap(), [0]);
    disconnect(other).await;
}

#[tokio::test]
async fn cancelling_closed_disconnects_a_client_with_requests_in_flight() {
    let exports = TestExports::new();
    let dev = MemDevice::slow(MIB, 0, Duration::from_millis(300));
    let closed = exports.add("vol", dev.clone());
    let server = TestServer::start(exports).await;
    let mut s = connect(server.addr, "vol").await;
    let mut b = Vec::new();
    for i in 0..40u64 {
        b.extend_from_slice(&request(CMD_WRITE, 0, i, i * 512, 512));
        b.extend_from_slice(&[0xaa; 512]);
    }
    s.write_all(&b).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    closed.cancel();
    // Closed promptly: at most the replies already due, then EOF.
    let started = std::time::Instant::now();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        use tokio::io::AsyncReadExt;
        match tokio::time::timeout(T, s.read(&mut buf))
            .await
            .expect("closed in time")
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // Requests that had not reached the device yet never will.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        dev.writes.load(Ordering::SeqCst) < 40,
        "{}",
        dev.writes.load(Ordering::SeqCst)
    );
}

#[tokio::test]
async fn connections_over_max_connections_are_closed_at_accept() {
    let exports = TestExports::new();
    exports.add("vol", MemDevice::new(MIB, 0));
    let config = NbdConfig {
        max_connections: 2,
        ..NbdConfig::default()
    };
    let server = TestServer::start_with(exports, config).await;
    let a = connect(server.addr, "vol").await;
    let mut b = greet(server.addr, FLAG_C_FIXED_NEWSTYLE).await; // still handshaking
    let mut c = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    assert!(
        is_closed(&mut c).await,
        "third connection closed without a greeting"
    );

    // A slot frees when a client leaves.
    disconnect(a).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_normal_client_works(server.addr, "vol").await;
    let r = info_or_go(&mut b, OPT_GO, "vol", &[]).await;
    assert_eq!(r.end, REP_ACK);
    disconnect(b).await;
}

#[tokio::test]
async fn shutdown_stops_the_server_and_closes_its_clients() {
    let (server, _dev) = setup().await;
    let mut idle = connect(server.addr, "vol").await;
    let mut handshaking = greet(server.addr, FLAG_C_FIXED_NEWSTYLE).await;
    let addr = server.addr;
    server.stop().await.unwrap();
    assert!(is_closed(&mut idle).await);
    assert!(is_closed(&mut handshaking).await);
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "listener gone"
    );
}

#[tokio::test]
async fn many_clients_at_once_each_see_their_own_writes() {
    let (server, dev) = setup().await;
    let mut tasks = Vec::new();
    for i in 0..16u64 {
        let addr = server.addr;
        tasks.push(tokio::spawn(async move {
            let mut s = connect(addr, "vol").await;
            let data = vec![i as u8 + 1; 8192];
            for round in 0..4u64 {
                let offset = i * 32768 + round * 8192;
                assert_eq!(nbd_write(&mut s, offset, &data).await, 0);
                assert_eq!(nbd_read(&mut s, offset, 8192).await.unwrap(), data);
            }
            disconnect(s).await;
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    for i in 0..16usize {
        assert!(dev
            .bytes(i * 32768, 32768)
            .iter()
            .all(|&b| b == i as u8 + 1));
    }
}
