//! A real client: qemu's tools (Debian's qemu-utils) against the server.

mod common;

use common::*;
use std::io::Write;
use std::sync::atomic::Ordering;
use svs_nbd::NbdConfig;

const MIB: usize = 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qemu_io_writes_reads_writes_zeroes_discards_and_flushes_through_the_server() {
    require_qemu();
    let exports = TestExports::new();
    let dev = MemDevice::new(16 * MIB, 0x11);
    exports.add("vol", dev.clone());
    let server = TestServer::start(exports).await;

    let r = qemu_io(
        &server.url("vol"),
        &[],
        &[
            "write -P 0xab 0 64k",
            "read -P 0xab 0 64k",
            "write -z 64k 64k",
            "discard 128k 64k",
            "flush",
            "read -P 0 64k 64k",
            "read -P 0x11 192k 64k",
        ],
    )
    .await;
    assert!(r.ok, "{}", r.out);
    assert!(
        r.out.contains("wrote 65536/65536 bytes at offset 0"),
        "{}",
        r.out
    );
    assert!(
        r.out.contains("read 65536/65536 bytes at offset 0"),
        "{}",
        r.out
    );
    assert!(
        r.out.contains("wrote 65536/65536 bytes at offset 65536"),
        "{}",
        r.out
    );
    assert!(
        r.out.contains("discard 65536/65536 bytes at offset 131072"),
        "{}",
        r.out
    );
    assert!(!r.out.contains("Pattern verification failed"), "{}", r.out);

    assert!(dev.bytes(0, 65536).iter().all(|&b| b == 0xab));
    assert!(dev.bytes(65536, 65536).iter().all(|&b| b == 0));
    assert!(dev
        .bytes(192 * 1024, 16 * MIB - 192 * 1024)
        .iter()
        .all(|&b| b == 0x11));
    assert!(
        dev.trims.load(Ordering::SeqCst) >= 1,
        "the discard reached the device"
    );
    assert!(
        dev.flushes.load(Ordering::SeqCst) >= 1,
        "the flush reached the device"
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qemu_io_fua_writes_reach_the_device_with_fua() {
    require_qemu();
    let exports = TestExports::new();
    let dev = MemDevice::new(MIB, 0);
    exports.add("vol", dev.clone());
    let server = TestServer::start(exports).await;

    let r = qemu_io(&server.url("vol"), &[], &["write -f -P 0x5a 4k 4k"]).await;
    assert!(r.ok, "{}", r.out);
    assert!(dev.fua_writes.load(Ordering::SeqCst) >= 1, "{}", r.out);
    assert!(dev.bytes(4096, 4096).iter().all(|&b| b == 0x5a));
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qemu_img_info_shows_the_export_size() {
    require_qemu();
    let exports = TestExports::new();
    exports.add("disk", MemDevice::new(24 * MIB, 0));
    let server = TestServer::start(exports).await;

    let r = run("qemu-img", &["info", "-f", "raw", &server.url("disk")]).await;
    assert!(r.ok, "{}", r.out);
    assert!(
        r.out.contains("virtual size: 24 MiB (25165824 bytes)"),
        "{}",
        r.out
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_export_serves_reads_and_refuses_writes_from_qemu_io() {
    require_qemu();
    let exports = TestExports::new();
    let dev = MemDevice::read_only(MIB, 0x42);
    exports.add("ro", dev.clone());
    let server = TestServer::start(exports).await;

    let r = qemu_io(&server.url("ro"), &["-r"], &["read -P 0x42 0 64k"]).await;
    assert!(r.ok, "{}", r.out);
    assert!(
        r.out.contains("read 65536/65536 bytes at offset 0"),
        "{}",
        r.out
    );

    // Opened read-write: qemu sees NBD_FLAG_READ_ONLY and refuses the open.
    let r = qemu_io(&server.url("ro"), &[], &["write -P 0x99 0 4k"]).await;
    assert!(!r.ok, "{}", r.out);
    assert!(!r.out.contains("wrote 4096/4096"), "{}", r.out);
    assert!(r.out.contains("Permission denied"), "{}", r.out);

    assert!(
        dev.snapshot().iter().all(|&b| b == 0x42),
        "device unchanged"
    );
    assert_eq!(dev.writes.load(Ordering::SeqCst), 0);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qemu_io_cannot_open_an_unknown_or_forbidden_export() {
    require_qemu();
    let exports = TestExports::new();
    exports.add("vol", MemDevice::new(MIB, 0));
    exports.add("secret", MemDevice::new(MIB, 0));
    exports.forbid("secret");
    let server = TestServer::start(exports).await;

    for name in ["nope", "secret"] {
        let r = qemu_io(&server.url(name), &[], &["read 0 4k"]).await;
        assert!(!r.ok, "{}", r.out);
        assert!(!r.out.contains("read 4096/4096"), "{}", r.out);
        assert!(r.out.contains("export not available"), "{name}: {}", r.out);
    }
    // The server is still fine.
    let r = qemu_io(&server.url("vol"), &[], &["read -P 0 0 4k"]).await;
    assert!(r.ok, "{}", r.out);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qemu_nbd_list_shows_the_exports_the_peer_may_see() {
    require_qemu();
    let exports = TestExports::new();
    exports.add("alpha", MemDevice::new(MIB, 0));
    exports.add("beta", MemDevice::read_only(2 * MIB, 0));
    exports.add("hidden", MemDevice::new(MIB, 0));
    exports.forbid("hidden");
    let server = TestServer::start(exports).await;

    let port = server.addr.port().to_string();
    let r = run(
        "qemu-nbd",
        &["--list", "--bind", "127.0.0.1", "--port", &port],
    )
    .await;
    assert!(r.ok, "{}", r.out);
    assert!(r.out.contains("exports available: 2"), "{}", r.out);
    assert!(r.out.contains("export: 'alpha'"), "{}", r.out);
    assert!(r.out.contains("export: 'beta'"), "{}", r.out);
    // (qemu-nbd asks each export's details only of servers that support
    // structured replies; NBD_OPT_INFO is covered by the raw client tests.)
    assert!(!r.out.contains("hidden"), "{}", r.out);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qemu_img_compare_matches_a_reference_file_after_writes_at_many_offsets() {
    require_qemu();
    let dir = tempfile::tempdir().unwrap();
    let size: u64 = 8 * MIB as u64;
    let dev = FileDevice::create(&dir.path().join("export.img"), size).unwrap();
    let exports = TestExports::new();
    exports.add("vol", dev.clone());
    let server = TestServer::start(exports).await;

    // Writes of several sizes and alignments, some overlapping, one at the
    // very end, plus zeroes and discards over written data.
    let writes: &[(u64, u64, u8)] = &[
        (0, 4096, 0x01),
        (512, 1536, 0x02),
        (12345, 777, 0x03),
        (65536, 131072, 0x04),
        (1_000_000, 300_000, 0x05),
        (3 * MIB as u64 + 17, 4099, 0x06),
        (size - 4096, 4096, 0x07),
        (size - 1, 1, 0x08),
        (5 * MIB as u64, 2 * MIB as u64, 0x09),
    ];
    let mut commands: Vec<String> = writes
        .iter()
        .map(|(o, l, p)| format!("write -P {p:#04x} {o} {l}"))
        .collect();
    commands.push(format!("write -z {} {}", 5 * MIB + 4096, 65536));
    commands.push("flush".into());
    let refs: Vec<&str> = commands.iter().map(String::as_str).collect();
    let r = qemu_io(&server.url("vol"), &[], &refs).await;
    assert!(r.ok, "{}", r.out);
    assert!(!r.out.to_lowercase().contains("error"), "{}", r.out);

    // The same writes on a plain file.
    let reference = dir.path().join("reference.img");
    let mut f = std::fs::File::create(&reference).unwrap();
    f.set_len(size).unwrap();
    use std::os::unix::fs::FileExt;
    for (o, l, p) in writes {
        f.write_all_at(&vec![*p; *l as usize], *o).unwrap();
    }
    f.write_all_at(&vec![0u8; 65536], 5 * MIB as u64 + 4096)
        .unwrap();
    f.flush().unwrap();

    let url = server.url("vol");
    let ref_path = reference.to_str().unwrap();
    let r = run(
        "qemu-img",
        &["compare", "-f", "raw", "-F", "raw", &url, ref_path],
    )
    .await;
    assert!(r.ok, "{}", r.out);
    assert!(r.out.contains("Images are identical"), "{}", r.out);

    // And one differing byte is found.
    f.write_all_at(&[0xee], 2 * MIB as u64 + 3).unwrap();
    let r = run(
        "qemu-img",
        &["compare", "-f", "raw", "-F", "raw", &url, ref_path],
    )
    .await;
    assert!(!r.ok, "{}", r.out);
    assert!(
        r.out.contains("Content mismatch at offset 2097152"),
        "{}",
        r.out
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_concurrent_qemu_io_clients_each_write_and_read_back_their_region() {
    require_qemu();
    let exports = TestExports::new();
    let dev = MemDevice::new(16 * MIB, 0);
    exports.add("shared", dev.clone());
    let server = TestServer::start(exports).await;

    let clients = 6u64;
    let mut runs = Vec::new();
    for i in 0..clients {
        let url = server.url("shared");
        runs.push(tokio::spawn(async move {
            let offset = i * 2 * MIB as u64;
            let pattern = 0x30 + i;
            let cmds = [
                format!("write -P {pattern} {offset} 1M"),
                format!("write -P {pattern} {} 1M", offset + MIB as u64),
                format!("read -P {pattern} {offset} 2M"),
            ];
            let refs: Vec<&str> = cmds.iter().map(String::as_str).collect();
            qemu_io(&url, &[], &refs).await
        }));
    }
    for (i, h) in runs.into_iter().enumerate() {
        let r = h.await.unwrap();
        assert!(r.ok, "client {i}: {}", r.out);
        assert!(
            r.out.contains("read 2097152/2097152"),
            "client {i}: {}",
            r.out
        );
        assert!(
            !r.out.contains("Pattern verification failed"),
            "client {i}: {}",
            r.out
        );
    }
    for i in 0..clients as usize {
        assert!(
            dev.bytes(i * 2 * MIB, 2 * MIB)
                .iter()
                .all(|&b| b == 0x30 + i as u8),
            "region {i}"
        );
    }
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_served_inline_keep_every_byte_and_large_concurrent_ones_still_work() {
    require_qemu();
    let exports = TestExports::new();
    let dev = MemDevice::new(16 * MIB, 0x11);
    exports.add("vol", dev.clone());
    let config = NbdConfig {
        inline_max: 64 * 1024,
        ..NbdConfig::default()
    };
    let server = TestServer::start_with(exports, config).await;
    let r = qemu_io(
        &server.url("vol"),
        &[],
        &[
            // Inline: reads and writes up to 64 KiB.
            "write -P 0xab 0 4k",
            "aio_write -P 0xac 8k 4k",
            "aio_write -P 0xad 12k 64k",
            "aio_flush",
            "read -P 0xab 0 4k",
            "read -P 0xac 8k 4k",
            "read -P 0xad 12k 64k",
            // Larger ones are inline only while alone (queue depth 1, as
            // here); FUA writes and flushes never.
            "write -P 0xae 1M 1M",
            "write -f -P 0xaf 3M 4k",
            "read -P 0xae 1M 1M",
            "flush",
            // Larger ones side by side: on the blocking pool. Buffers of
            // every size are reused from request to request.
            "aio_write -P 0xb0 5M 1M",
            "aio_write -P 0xb1 6M 2M",
            "aio_flush",
            "aio_read -P 0xb0 5M 1M",
            "aio_read -P 0xb1 6M 2M",
            "aio_flush",
            "read -P 0xab 0 4k",
            "read -P 0xb1 7M 512k",
        ],
    )
    .await;
    assert!(r.ok, "{}", r.out);
    assert!(!r.out.contains("Pattern verification failed"), "{}", r.out);
    assert!(dev.bytes(0, 4096).iter().all(|&b| b == 0xab));
    assert!(dev.bytes(12 * 1024, 65536).iter().all(|&b| b == 0xad));
    assert!(dev.bytes(MIB, MIB).iter().all(|&b| b == 0xae));
    assert!(dev.bytes(3 * MIB, 4096).iter().all(|&b| b == 0xaf));
    assert!(dev.bytes(5 * MIB, MIB).iter().all(|&b| b == 0xb0));
    assert!(dev.bytes(6 * MIB, 2 * MIB).iter().all(|&b| b == 0xb1));
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qemu_img_map_lists_the_devices_holes_through_block_status() {
    require_qemu();
    let dir = tempfile::tempdir().unwrap();
    let dev = FileDevice::create(&dir.path().join("disk.img"), 64 * MIB as u64).unwrap();
    use std::os::unix::fs::FileExt;
    dev.file.write_all_at(&[1; MIB], 3 * MIB as u64).unwrap();
    dev.file
        .write_all_at(&[2; 64 * 1024], 40 * MIB as u64)
        .unwrap();
    let exports = TestExports::new();
    exports.add("disk", dev);
    let server = TestServer::start(exports).await;

    let r = run(
        "qemu-img",
        &["map", "--output=json", "-f", "raw", &server.url("disk")],
    )
    .await;
    assert!(r.ok, "{}", r.out);
    let data: Vec<(u64, u64)> = r
        .out
        .lines()
        .filter(|l| l.contains("\"data\": true"))
        .map(|l| {
            let field = |name: &str| -> u64 {
                let at = l.find(name).unwrap() + name.len();
                l[at..]
                    .trim_start_matches([':', ' '])
                    .split(|c: char| !c.is_ascii_digit())
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            };
            (field("\"start\""), field("\"length\""))
        })
        .collect();
    assert_eq!(
        data,
        vec![(3 * MIB as u64, MIB as u64), (40 * MIB as u64, 64 * 1024)],
        "{}",
        r.out
    );
    server.stop().await.unwrap();
}
