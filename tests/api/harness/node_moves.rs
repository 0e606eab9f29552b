//! Helpers of the `node_moves` tests, shared with other test files.

use crate::harness::attach::{qemu_img, qemu_io};
use crate::harness::storage_nodes::{
    assert_jobs_on_node_fronts, node_with_credential, storage_nodes_config, wait_served,
    StorageNodeProcess, JOB_ON_NODE_FRONT,
};
use crate::harness::{TestApp, TestConfig};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tempfile::TempDir;

pub(crate) const MIB: u64 = 1 << 20;

/// The known data written before the move: what the throttled copy
/// carries (24 MiB at 4 MiB/s: about 6 s).
const PREFILL_MIB: u64 = 24;

/// The volume's size before and after the resize, in GiB.
pub(crate) const SIZE: u64 = 2;

const GROWN: u64 = 3;

pub(crate) const MOVED: &str = "slice c1-k0 from sn2-d0 to sn3-d0";

/// The job's detail once the lost copy being moved was rebuilt on the
/// move's target instead.
pub(crate) const REBUILT: &str =
    "Rebuilt slice c1-k0 on sn3-d0 (lost on sn2-d0) from a healthy copy: verified chunk by chunk";

/// The resize's messages (BRIEF, "The resize rules").
pub(crate) const MOVEMENT_FOUND: &str = "GetMovementModificationPlan: Found movement plan. Data Movement is enabled. The operation is now being attempted";

/// A sparse file holding what the volume must hold: every acknowledged
/// write is applied to it too.
pub(crate) struct Reference {
    pub(crate) _dir: TempDir,
    pub(crate) path: PathBuf,
}

impl Reference {
    pub(crate) fn new(size: u64) -> Reference {
        let dir = tempfile::tempdir().expect("reference dir");
        let path = dir.path().join("reference.img");
        let file = std::fs::File::create(&path).expect("reference image");
        file.set_len(size).expect("reference size");
        Reference { _dir: dir, path }
    }

    /// `len` bytes of `pattern` at `offset`, as `write -P` writes them.
    pub(crate) fn write(&self, offset: u64, len: u64, pattern: u8) {
        crate::harness::write_at(&self.path, offset, &vec![pattern; len as usize]);
    }

    /// `qemu-img compare` of the reference with `image` (an NBD URI or a
    /// copy's file): Ok when their contents are identical.
    pub(crate) fn compare(&self, image: &str) -> Result<String, String> {
        let reference = self.path.display().to_string();
        qemu_img(&["compare", "-f", "raw", "-F", "raw", &reference, image])
    }
}

/// Writes of 4 KiB with distinct patterns at spread offsets, before and
/// after the copy's cursor, inside and outside the prefill; each flushed.
/// `(commands, [(offset, pattern)])`.
fn spread_writes(first: u64, count: u64, pause_ms: u64) -> (Vec<String>, Vec<(u64, u8)>) {
    let mut commands = Vec::new();
    let mut written = Vec::new();
    for i in first..first + count {
        let offset = (i * 7_919 * 4096) % (40 * MIB);
        let pattern = 1 + (i % 250) as u8;
        commands.push(format!("write -P {pattern} {offset} 4k"));
        commands.push("flush".into());
        commands.push(format!("sleep {pause_ms}"));
        written.push((offset, pattern));
    }
    (commands, written)
}

/// What a writer thread answers: qemu-io's result (Ok when every write
/// was acknowledged) and the writes it sent, as (offset, pattern).
pub(crate) type WriterRun = (Result<String, String>, Vec<(u64, u8)>);

/// The three storage nodes: sn-1 holds copy 0 on sn1-d0 (8 GiB), sn-2
/// copy 1 on sn2-d0 (2 GiB: full with the volume, so its copy must move on
/// a resize), sn-3 the target sn3-d0 (8 GiB), registered after the volume
/// was placed.
pub(crate) struct Moving {
    pub(crate) app: TestApp,
    pub(crate) sn1: StorageNodeProcess,
    pub(crate) sn2: StorageNodeProcess,
    pub(crate) sn3: StorageNodeProcess,
    pub(crate) id: String,
    pub(crate) uri: String,
    pub(crate) reference: Reference,
}

/// Where the attached volume's front runs (setting `fronts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Front {
    /// In `svs serve`: the job's copy runs there.
    Serve,
    /// On a storage node holding a copy: the job's copy is steered there.
    Node,
}

impl Moving {
    /// The storage nodes' logs, for a failure's message.
    pub(crate) fn node_logs(&self) -> String {
        [
            ("sn-1", &self.sn1),
            ("sn-2", &self.sn2),
            ("sn-3", &self.sn3),
        ]
        .iter()
        .map(|(name, node)| format!("--- {name}:\n{}", node.log()))
        .collect::<Vec<_>>()
        .join("\n")
    }

    /// The service copies at 4 MiB/s with a checkpoint every MiB; "data"
    /// (2 GiB, mirrored over two nodes) is attached to host-0 and holds
    /// [`PREFILL_MIB`] MiB of known data; its front runs at `front`.
    pub(crate) async fn start(front: Front) -> Moving {
        let mut settings = vec!["movement_checkpoint = \"1 MiB\""];
        if front == Front::Node {
            settings.push("fronts = \"nodes\"");
        }
        Moving::start_with(front, storage_nodes_config(&settings)).await
    }

    /// The same on a service configured by `config` (its movement rate set
    /// here).
    pub(crate) async fn start_with(front: Front, config: TestConfig) -> Moving {
        let app = TestApp::start_with(TestConfig {
            movement_rate: "4 MiB".into(),
            ..config
        })
        .await;
        let mut sn1 = storage_node(&app, "sn-1", "127.0.0.2", "z1", ("sn1-d0", 8)).await;
        let mut sn2 = storage_node(&app, "sn-2", "127.0.0.3", "z2", ("sn2-d0", SIZE)).await;
        sn1.start();
        sn2.start();
        wait_served(&app, &["sn1-d0", "sn2-d0"]).await;
        app.create_policy("mirror", 1, 1, 0).await;
        let (id, job) = app.create_volume("data", SIZE, "mirror").await;
        assert_eq!(job["state"], "Done", "{job}");
        assert_eq!(on(&app.slices("data").await), ["sn1-d0", "sn2-d0"]);
        let mut sn3 = storage_node(&app, "sn-3", "127.0.0.4", "z3", ("sn3-d0", 8)).await;
        sn3.start();
        wait_served(&app, &["sn3-d0"]).await;
        assert_eq!(app.free("sn2-d0").await, 0, "b1 is full");

        let (status, body) = app
            .patch("/nodes/host-0", json!({"address": "127.0.0.1"}))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let a = crate::harness::attach::attach(&app, "data", "host-0", false).await;
        let uri = crate::harness::attach::uri(&a);
        let on_node = [&sn1, &sn2]
            .iter()
            .any(|n| uri.contains(&format!("://{}/", n.front_address)));
        assert_eq!(on_node, front == Front::Node, "{uri}");
        let reference = Reference::new(GROWN << 30);
        qemu_io(
            &uri,
            &[format!("write -P 0x5a 0 {PREFILL_MIB}M"), "flush".into()],
        )
        .expect("prefill");
        reference.write(0, PREFILL_MIB * MIB, 0x5a);
        Moving {
            app,
            sn1,
            sn2,
            sn3,
            id,
            uri,
            reference,
        }
    }

    /// Starts the resize to [`GROWN`] GiB with data movement; its job id.
    pub(crate) async fn start_resize(&self) -> String {
        self.app.start_resize("data", GROWN, true).await
    }

    /// Runs a qemu-io writer on its own thread: `count` spread writes,
    /// `pause_ms` apart, each flushed. Joined, it answers what it wrote.
    pub(crate) fn writer(
        &self,
        first: u64,
        count: u64,
        pause_ms: u64,
    ) -> std::thread::JoinHandle<WriterRun> {
        let (commands, written) = spread_writes(first, count, pause_ms);
        let uri = self.uri.clone();
        std::thread::spawn(move || (qemu_io(&uri, &commands), written))
    }

    /// Applies writes every one of which was acknowledged.
    pub(crate) fn acknowledged(&self, written: &[(u64, u8)]) {
        for (offset, pattern) in written {
            self.reference.write(*offset, 4096, *pattern);
        }
    }

    /// The volume, read through NBD, holds exactly the reference's bytes.
    pub(crate) fn assert_data(&self) {
        let out = self.reference.compare(&self.uri);
        assert!(
            out.as_deref()
                .is_ok_and(|o| o.contains("Images are identical")),
            "the volume differs from what was acknowledged: {out:?}"
        );
    }

    /// The file of copy `copy` (column 0) on `medium`, on its node's disk.
    pub(crate) fn file_of(&self, medium: &str, copy: u64) -> PathBuf {
        let node = match medium {
            "sn1-d0" => &self.sn1,
            "sn2-d0" => &self.sn2,
            "sn3-d0" => &self.sn3,
            other => panic!("no node holds {other}"),
        };
        node.medium_dir(medium)
            .join(&self.id)
            .join(format!("c{copy}-k0.slice"))
    }

    /// Both copies' files hold the reference's bytes (`qemu-img compare`,
    /// which skips the holes of sparse files).
    pub(crate) async fn assert_copies(&self) {
        let slices = self.app.slices("data").await;
        for (copy, medium) in on(&slices).iter().enumerate() {
            let file = self.file_of(medium, copy as u64);
            let out = self.reference.compare(&file.display().to_string());
            assert!(
                out.as_deref()
                    .is_ok_and(|o| o.contains("Images are identical")),
                "copy {copy} on {medium} ({}): {out:?}",
                file.display()
            );
        }
    }

    pub(crate) async fn volume(&self) -> Value {
        let (status, volume) = self.app.get("/volumes/data").await;
        assert_eq!(status, StatusCode::OK, "{volume}");
        volume
    }

    /// The resize is done: the moved copy on sn3-d0, both at the new size, the
    /// volume Ready at [`GROWN`] GiB, its data and both copies exact.
    pub(crate) async fn assert_resized(&self) {
        let volume = self.volume().await;
        assert_eq!(
            (&volume["size"], &volume["state"]),
            (&json!(GROWN), &json!("Ready")),
            "{volume}"
        );
        let slices = self.app.slices("data").await;
        assert_eq!(on(&slices), ["sn1-d0", "sn3-d0"], "{slices:?}");
        assert!(
            slices
                .iter()
                .all(|s| s["size"] == GROWN && s["health"] == "Healthy"),
            "{slices:?}"
        );
        self.assert_data();
        self.assert_copies().await;
    }

    /// With the front on a storage node: every job ran there, the front
    /// never came into `svs serve` and the attachment still names the
    /// same node's address.
    pub(crate) async fn assert_front_stayed(&self) {
        let (_, a) = self
            .app
            .get("/volumes/data/snapshots/top/attachments/host-0")
            .await;
        assert_eq!(crate::harness::attach::uri(&a), self.uri);
        assert_jobs_on_node_fronts(&self.app.log(), &[JOB_ON_NODE_FRONT]);
    }

    /// Resized by moving copy 1 to sn3-d0: its old file is gone from sn2-d0
    /// and no partial copy is left on sn3-d0.
    pub(crate) async fn assert_moved(&self) {
        self.assert_resized().await;
        assert!(!self.file_of("sn2-d0", 1).exists(), "the source is removed");
        assert_eq!(
            partial_files(&self.sn3.medium_dir("sn3-d0")),
            Vec::<PathBuf>::new()
        );
    }
}

impl Moving {
    /// The resize was cancelled: the volume Ready at its old size, its copies
    /// where they were, its data and both copies exact, and nothing of it
    /// left on sn3-d0 (no partial copy, no complete one).
    pub(crate) async fn assert_left_as_it_was(&self) {
        let volume = self.volume().await;
        assert_eq!(
            (&volume["size"], &volume["state"]),
            (&json!(SIZE), &json!("Ready")),
            "{volume}"
        );
        let slices = self.app.slices("data").await;
        assert_eq!(on(&slices), ["sn1-d0", "sn2-d0"], "{slices:?}");
        self.assert_data();
        self.assert_copies().await;
        let left: Vec<PathBuf> = std::fs::read_dir(self.sn3.medium_dir("sn3-d0").join(&self.id))
            .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        assert_eq!(left, Vec::<PathBuf>::new(), "copies left on sn3-d0");
        assert_eq!(self.app.free("sn3-d0").await, 8, "nothing stays booked");
    }
}

/// A storage node of the test with one medium `(name, GiB)`, not started.
async fn storage_node(
    app: &TestApp,
    name: &str,
    ip: &str,
    zone: &str,
    (medium, gib): (&str, u64),
) -> StorageNodeProcess {
    let credential = node_with_credential(app, name, ip, zone, "storage").await;
    StorageNodeProcess::new(app, name, ip, &[(medium, gib)], &credential)
}

/// The media of a volume's slices, copy 0 first.
pub(crate) fn on(slices: &[Value]) -> Vec<String> {
    let mut placed: Vec<(u64, String)> = slices
        .iter()
        .map(|s| {
            (
                s["copy"].as_u64().unwrap_or(u64::MAX),
                s["media"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    placed.sort();
    placed.into_iter().map(|(_, m)| m).collect()
}

/// Polls until the job is Running with its progress in `percent` (its
/// copy under way: some of it copied, not all), returning it.
pub(crate) async fn wait_mid_copy(
    app: &TestApp,
    job_id: &str,
    percent: std::ops::Range<u64>,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, job) = app.get(&format!("/jobs/{job_id}")).await;
        let progress = job["progress"].as_u64().unwrap_or(0);
        if job["state"] == "Running" && percent.contains(&progress) {
            return job;
        }
        assert!(
            job["state"] == "Running" || job["state"] == "Pending",
            "the job ended before the kill: {job}"
        );
        assert!(Instant::now() < deadline, "no progress: {job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every `.partial` file under a directory.
fn partial_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.to_string_lossy().ends_with(".partial") {
                found.push(path);
            }
        }
    }
    found
}
