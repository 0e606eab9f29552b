//! NBD protocol features against the real `svs serve`, with real clients:
//! block status and hole chunks seen by `qemu-img map` and `qemu-img
//! convert`, and several connections at once from `nbdcopy` (Debian's
//! libnbd-bin), with the bytes on the wire counted by a relay in between.

use crate::harness::attach::{attach, qemu_img, qemu_io, run_tool as run, uri};
use crate::harness::*;
use serde_json::Value;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

const MIB: u64 = 1024 * 1024;

/// A TCP relay to the NBD server that counts the connections it carried
/// and the bytes the server sent (what a client read off the wire).
struct Relay {
    addr: std::net::SocketAddr,
    connections: Arc<AtomicU64>,
    server_bytes: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Relay {
    /// Listens on 127.0.0.1 (the address of the node the volume is attached
    /// to, so the server admits what it relays) and forwards to `server`.
    fn start(server: &str) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("relay listens");
        let addr = listener.local_addr().expect("relay address");
        let server = server.to_string();
        let connections = Arc::new(AtomicU64::new(0));
        let server_bytes = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, bytes, stopped) = (
            Arc::clone(&connections),
            Arc::clone(&server_bytes),
            Arc::clone(&stop),
        );
        thread::spawn(move || {
            for client in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(upstream) = TcpStream::connect(&server) else {
                    continue;
                };
                count.fetch_add(1, Ordering::SeqCst);
                let _ = client.set_nodelay(true);
                let _ = upstream.set_nodelay(true);
                let (Ok(client2), Ok(upstream2)) = (client.try_clone(), upstream.try_clone())
                else {
                    continue;
                };
                let none = Arc::new(AtomicU64::new(0));
                thread::spawn(move || pump(client, upstream, none));
                let bytes = Arc::clone(&bytes);
                thread::spawn(move || pump(upstream2, client2, bytes));
            }
        });
        Relay {
            addr,
            connections,
            server_bytes,
            stop,
        }
    }

    /// `nbd://` URI of `export` through the relay.
    fn uri(&self, export: &str) -> String {
        format!("nbd://{}/{export}", self.addr)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        // Wakes the accept loop so it sees the flag and ends.
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

/// Copies `from` to `to` until either side closes, counting the bytes.
fn pump(mut from: TcpStream, mut to: TcpStream, counted: Arc<AtomicU64>) {
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                counted.fetch_add(n as u64, Ordering::SeqCst);
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}

/// Host and port of an attachment's `nbd://host:port/export` URI.
fn server_of(uri: &str) -> (String, String) {
    let rest = uri.trim_start_matches("nbd://");
    let (server, export) = rest.split_once('/').expect("nbd://host:port/export");
    (server.to_string(), export.to_string())
}

/// Two nodes with two 40 GiB media each, so a 64 GiB mirrored volume fits;
/// host-1 attaches from 127.0.0.1.
fn big_topology() -> TestConfig {
    TestConfig {
        media: vec![
            medium("a1", "n1", "z1", 40),
            medium("a2", "n1", "z1", 40),
            medium("b1", "n2", "z2", 40),
            medium("b2", "n2", "z2", 40),
        ],
        nodes: vec![("host-1", "127.0.0.1")],
        ..TestConfig::default()
    }
}

/// The data ranges `qemu-img map --output=json` lists, neighbours merged.
fn mapped_data(map: &str) -> Vec<(u64, u64)> {
    let entries: Value = serde_json::from_str(map).expect("qemu-img map JSON");
    let mut data: Vec<(u64, u64)> = Vec::new();
    for e in entries.as_array().expect("a list of extents") {
        if e["data"] != true {
            assert_eq!(e["zero"], true, "what is not data reads as zeroes: {e}");
            continue;
        }
        let start = e["start"].as_u64().expect("start");
        let len = e["length"].as_u64().expect("length");
        match data.last_mut() {
            Some(last) if last.0 + last.1 == start => last.1 += len,
            _ => data.push((start, len)),
        }
    }
    data
}

#[tokio::test]
async fn nbd_qemu_img_map_and_convert_of_a_64_gib_volume_see_only_its_written_extents() {
    let app = TestApp::start_with(big_topology()).await;
    app.create_policy("mirror", 1, 1, 0).await;
    let (_, job) = app.create_volume("big", 64, "mirror").await;
    assert_eq!(job["state"], "Done", "{job}");
    let a = attach(&app, "big", "host-1", false).await;
    let written: [(u64, u64, u8); 3] = [
        (0, MIB, 0x11),
        (20 * GIB + 3 * MIB, 512 * 1024, 0x22),
        (64 * GIB - MIB, MIB, 0x33),
    ];
    let commands: Vec<String> = written
        .iter()
        .map(|(at, len, p)| format!("write -P {p} {at} {len}"))
        .chain(["flush".to_string()])
        .collect();
    qemu_io(&uri(&a), &commands).expect("three writes");
    let total: u64 = written.iter().map(|w| w.1).sum();

    let map = qemu_img(&["map", "--output=json", "-f", "raw", &uri(&a)]).expect("map");
    assert_eq!(
        mapped_data(&map),
        written.iter().map(|w| (w.0, w.1)).collect::<Vec<_>>(),
        "{map}"
    );

    let (server, export) = server_of(&uri(&a));
    let relay = Relay::start(&server);
    let out = app.dir.path().join("big.img");
    let out_path = out.display().to_string();
    qemu_img(&[
        "convert",
        "-f",
        "raw",
        "-O",
        "raw",
        &relay.uri(&export),
        &out_path,
    ])
    .expect("convert");
    let wire = relay.server_bytes.load(Ordering::SeqCst);
    assert!(
        wire >= total && wire < total + MIB,
        "{wire} bytes from the server for {total} bytes written"
    );

    // A plain read of never-written bytes: hole chunks, not 32 MiB of zeroes.
    let before = relay.server_bytes.load(Ordering::SeqCst);
    qemu_io(
        &relay.uri(&export),
        &[format!("read -P 0 {} {}", 30 * GIB, 32 * MIB)],
    )
    .expect("read of a hole");
    let hole_read = relay.server_bytes.load(Ordering::SeqCst) - before;
    assert!(
        hole_read < 64 * 1024,
        "{hole_read} bytes for 32 MiB of holes"
    );

    // The copy: full size, the written bytes, holes elsewhere.
    let meta = std::fs::metadata(&out).expect("output");
    assert_eq!(meta.len(), 64 * GIB);
    let allocated = meta.blocks() * 512;
    assert!(
        allocated >= total && allocated <= total + MIB,
        "{allocated} bytes allocated for {total} written"
    );
    for (at, len, p) in written {
        assert!(
            read_at(&out, at, len as usize).iter().all(|&b| b == p),
            "pattern {p:#x} at {at}"
        );
    }
    for at in [MIB, 20 * GIB, 40 * GIB, 64 * GIB - 2 * MIB] {
        assert!(
            read_at(&out, at, 4096).iter().all(|&b| b == 0),
            "zero at {at}"
        );
    }
}

#[tokio::test]
async fn nbd_nbdcopy_spreads_a_copy_over_four_connections_and_nbdinfo_shows_multi_conn() {
    let app = TestApp::start_with(big_topology()).await;
    app.create_policy("mirror", 1, 1, 0).await;
    let (_, job) = app.create_volume("multi", 1, "mirror").await;
    assert_eq!(job["state"], "Done", "{job}");
    let a = attach(&app, "multi", "host-1", false).await;

    let info = run("nbdinfo", &["--json", &uri(&a)]).expect("nbdinfo");
    let info: Value = serde_json::from_str(&info).expect("nbdinfo JSON");
    assert_eq!(info["structured"], true, "{info}");
    let export = &info["exports"][0];
    for flag in [
        "can_multi_conn",
        "can_cache",
        "can_df",
        "can_fast_zero",
        "can_flush",
    ] {
        assert_eq!(export[flag], true, "{flag}: {info}");
    }
    assert_eq!(
        export["contexts"],
        serde_json::json!(["base:allocation"]),
        "{info}"
    );

    // A 1 GiB source: data in several places (each connection gets some),
    // holes elsewhere.
    let source = app.dir.path().join("source.img");
    std::fs::File::create(&source)
        .and_then(|f| f.set_len(GIB))
        .expect("source");
    for i in 0..16u64 {
        let at = i * 64 * MIB + (i % 3) * MIB;
        let data: Vec<u8> = (0..2 * MIB).map(|b| (b % 251) as u8 ^ i as u8).collect();
        write_at(&source, at, &data);
    }
    let (server, name) = server_of(&uri(&a));
    let relay = Relay::start(&server);
    let source_path = source.display().to_string();
    // As many threads as connections (it defaults to one per core), and a
    // flush at the end: one flush covers all four connections' writes.
    run(
        "nbdcopy",
        &[
            "--connections=4",
            "--threads=4",
            "--flush",
            &source_path,
            &relay.uri(&name),
        ],
    )
    .expect("nbdcopy to the volume");
    assert!(
        relay.connections.load(Ordering::SeqCst) >= 4,
        "nbdcopy used {} connections",
        relay.connections.load(Ordering::SeqCst)
    );

    let back = app.dir.path().join("back.img");
    let before = relay.connections.load(Ordering::SeqCst);
    run(
        "nbdcopy",
        &[
            "--connections=4",
            "--threads=4",
            &relay.uri(&name),
            &back.display().to_string(),
        ],
    )
    .expect("nbdcopy from the volume");
    assert!(relay.connections.load(Ordering::SeqCst) - before >= 4);
    let compare = qemu_img(&[
        "compare",
        "-f",
        "raw",
        "-F",
        "raw",
        &source_path,
        &back.display().to_string(),
    ]);
    assert!(compare.is_ok(), "{compare:?}");
    // And through a fresh connection the volume holds the same bytes.
    let compare = qemu_img(&["compare", "-f", "raw", "-F", "raw", &source_path, &uri(&a)]);
    assert!(compare.is_ok(), "{compare:?}");
}
