//! Test helpers: a growable sparse-file device served by an in-process NBD
//! server, and checks that nothing is left mounted or looped.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use svs_nbd::{CancellationToken, Exports, NbdConfig, NbdServer, OpenedExport};

pub const MIB: u64 = 1024 * 1024;

/// A device over a sparse file that can grow (svs_nbd's test device).
pub type SparseDevice = svs_nbd::testing::FileDevice;

/// A new sparse device of `size` bytes at `path`.
pub fn sparse_device(path: &Path, size: u64) -> Arc<SparseDevice> {
    SparseDevice::create(path, size).expect("device file")
}

#[derive(Default)]
pub struct Devices(Mutex<HashMap<String, Arc<SparseDevice>>>);

impl Exports for Devices {
    fn open(&self, name: &str, _peer: SocketAddr) -> Option<OpenedExport> {
        let device = self.0.lock().unwrap().get(name)?.clone();
        Some(OpenedExport {
            device,
            closed: CancellationToken::new(),
        })
    }
    fn list(&self, _peer: SocketAddr) -> Vec<String> {
        self.0.lock().unwrap().keys().cloned().collect()
    }
}

/// An NBD server on its own runtime; stopped on drop.
pub struct Server {
    pub addr: SocketAddr,
    shutdown: CancellationToken,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Server {
    pub fn start(exports: &[(&str, Arc<SparseDevice>)]) -> Server {
        let devices = Devices::default();
        for (name, d) in exports {
            devices
                .0
                .lock()
                .unwrap()
                .insert(name.to_string(), d.clone());
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let server = NbdServer::new(Arc::new(devices), NbdConfig::default());
        let token = shutdown.clone();
        runtime.spawn(async move { server.serve(listener, token).await });
        Server {
            addr,
            shutdown,
            runtime: Some(runtime),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(std::time::Duration::from_secs(5));
        }
    }
}

/// Deterministic content for file `i`.
pub fn content(i: usize, len: usize) -> Vec<u8> {
    let mut x = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Total size in bytes of the filesystem mounted at `dir` (what df shows).
pub fn fs_size(dir: &Path) -> u64 {
    let out = std::process::Command::new("df")
        .args(["-B1", "--output=size"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines().nth(1).unwrap().trim().parse().unwrap()
}

/// Asserts nothing under `dir` is mounted and no loop device is backed by
/// a file under it.
pub fn assert_nothing_left(dir: &Path) {
    let dir = dir.to_str().unwrap();
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    let left: Vec<&str> = mounts.lines().filter(|l| l.contains(dir)).collect();
    assert!(left.is_empty(), "still mounted: {left:?}");
    let out = std::process::Command::new("losetup")
        .arg("-a")
        .output()
        .unwrap();
    let loops = String::from_utf8(out.stdout).unwrap();
    let left: Vec<&str> = loops.lines().filter(|l| l.contains(dir)).collect();
    assert!(left.is_empty(), "still looped: {left:?}");
}

pub fn require_tools() {
    for tool in [
        "losetup",
        "mkfs.ext4",
        "resize2fs",
        "mkfs.xfs",
        "xfs_growfs",
    ] {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            found,
            "{tool} not found: install util-linux, e2fsprogs and xfsprogs"
        );
    }
    assert!(
        Path::new("/dev/fuse").exists(),
        "no /dev/fuse: the host needs FUSE"
    );
}
