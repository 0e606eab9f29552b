//! Resize with data movement between storage nodes (issue 21), with the
//! real `svs serve` and real `svs storage-node` processes on 127.0.0.2,
//! 127.0.0.3 and 127.0.0.4, and qemu-io / qemu-img over NBD. A mirrored
//! volume's copy on a full node must move to a third node; the copy is
//! throttled (`movement_rate`) so that a SIGKILL lands mid-copy: of the
//! target node, of the source node, of `svs serve`. Every acknowledged
//! write is checked against a reference image (`qemu-img compare` over
//! NBD), and the copies' files against each other.

use crate::attach::{qemu_img, qemu_io};
use crate::harness::{details, TestApp, TestConfig};
use crate::storage_nodes::{
    assert_jobs_on_node_fronts, eventually, node, node_with_credential, snapshot_files,
    storage_nodes_config, wait_served, StorageNodeProcess, JOB_ON_NODE_FRONT,
};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tempfile::TempDir;

const MIB: u64 = 1 << 20;

/// The known data written before the move: what the throttled copy
/// carries (24 MiB at 4 MiB/s: about 6 s).
const PREFILL_MIB: u64 = 24;

/// The volume's size before and after the resize, in GiB.
const SIZE: u64 = 2;
const GROWN: u64 = 3;

pub(crate) const MOVED: &str = "slice c1-k0 from sn2-d0 to sn3-d0";

/// The resize's messages (BRIEF, "The resize rules").
pub(crate) const MOVEMENT_FOUND: &str = "GetMovementModificationPlan: Found movement plan. Data Movement is enabled. The operation is now being attempted";

/// A sparse file holding what the volume must hold: every acknowledged
/// write is applied to it too.
struct Reference {
    _dir: TempDir,
    path: PathBuf,
}

impl Reference {
    fn new(size: u64) -> Reference {
        let dir = tempfile::tempdir().expect("reference dir");
        let path = dir.path().join("reference.img");
        let file = std::fs::File::create(&path).expect("reference image");
        file.set_len(size).expect("reference size");
        Reference { _dir: dir, path }
    }

    /// `len` bytes of `pattern` at `offset`, as `write -P` writes them.
    fn write(&self, offset: u64, len: u64, pattern: u8) {
        crate::harness::write_at(&self.path, offset, &vec![pattern; len as usize]);
    }

    /// `qemu-img compare` of the reference with `image` (an NBD URI or a
    /// copy's file): Ok when their contents are identical.
    fn compare(&self, image: &str) -> Result<String, String> {
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
    sn1: StorageNodeProcess,
    sn2: StorageNodeProcess,
    sn3: StorageNodeProcess,
    id: String,
    uri: String,
    reference: Reference,
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
    async fn start(front: Front) -> Moving {
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
        let a = crate::attach::attach(&app, "data", "host-0", false).await;
        let uri = crate::attach::uri(&a);
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
    fn assert_data(&self) {
        let out = self.reference.compare(&self.uri);
        assert!(
            out.as_deref()
                .is_ok_and(|o| o.contains("Images are identical")),
            "the volume differs from what was acknowledged: {out:?}"
        );
    }

    /// The file of copy `copy` (column 0) on `medium`, on its node's disk.
    fn file_of(&self, medium: &str, copy: u64) -> PathBuf {
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
    async fn assert_copies(&self) {
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

    async fn volume(&self) -> Value {
        let (status, volume) = self.app.get("/volumes/data").await;
        assert_eq!(status, StatusCode::OK, "{volume}");
        volume
    }

    /// The resize is done: the moved copy on sn3-d0, both at the new size, the
    /// volume Ready at [`GROWN`] GiB, its data and both copies exact.
    async fn assert_resized(&self) {
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
        assert_eq!(crate::attach::uri(&a), self.uri);
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
fn on(slices: &[Value]) -> Vec<String> {
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

async fn wait_online(app: &TestApp, name: &str, process: &StorageNodeProcess) {
    let back = eventually(Duration::from_secs(30), || async {
        node(app, name).await["state"] == "Online"
    })
    .await;
    assert!(back, "{}\n{}", node(app, name).await, process.log());
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

/// SIGKILL the target node mid-copy while a client writes: the writer sees
/// no error; the copy fails (its retry too: the node is down) and the job
/// ends in Error saying why, the volume keeps its size, its place and every
/// acknowledged byte, and nothing stays booked on the target; once the
/// node is back the same resize moves the copy and both copies are exact.
#[tokio::test]
async fn a_move_whose_target_node_is_killed_mid_copy_is_done_once_the_node_is_back() {
    target_node_killed_mid_copy(Front::Serve).await;
}

/// The same with the volume's front on a storage node: the copy runs
/// there (node to node), and fails there as it would in `svs serve`.
#[tokio::test]
async fn a_move_on_the_front_s_node_whose_target_node_is_killed_is_done_once_it_is_back() {
    target_node_killed_mid_copy(Front::Node).await;
}

async fn target_node_killed_mid_copy(front: Front) {
    let mut moving = Moving::start(front).await;
    let app = &moving.app;
    let writer = moving.writer(0, 40, 100);
    let job_id = moving.start_resize().await;
    let job = wait_mid_copy(app, &job_id, 20..70).await;
    assert!(
        job["status"]
            .as_str()
            .is_some_and(|s| s.starts_with(&format!("Moving {MOVED}"))),
        "{job}"
    );
    moving.sn3.kill();
    let job = app.wait_job(&job_id).await;
    let (result, written) = writer.join().expect("writer thread");
    result.expect("every write acknowledged while the target node died");
    moving.acknowledged(&written);
    assert_eq!(job["state"], "Error", "{job}");
    let last = details(&job).last().cloned().unwrap_or_default();
    let failed = format!("Moving {MOVED} failed: ");
    let on_front = match front {
        Front::Serve => "",
        Front::Node => "the volume's front on storage node 'sn-1': ",
    };
    assert!(
        last.starts_with(&format!(
            "{failed}{on_front}medium 'sn3-d0' on storage node 'sn-3': "
        )),
        "{job}"
    );
    // The job's per-slice outcome says which slice failed, and why.
    let slices = &job["slices"];
    assert_eq!(
        (
            &slices[0]["slice"],
            &slices[0]["from"],
            &slices[0]["to"],
            &slices[0]["outcome"],
            &slices[0]["cause"]
        ),
        (
            &json!("c1-k0"),
            &json!("sn2-d0"),
            &json!("sn3-d0"),
            &json!("failed"),
            &json!("node unreachable")
        ),
        "{job}"
    );
    assert!(slices[0]["failures"].as_u64().unwrap_or(0) >= 1, "{job}");
    let volume = moving.volume().await;
    assert_eq!(
        (&volume["size"], &volume["state"]),
        (&json!(SIZE), &json!("Ready")),
        "{volume}"
    );
    assert_eq!(on(&app.slices("data").await), ["sn1-d0", "sn2-d0"]);
    moving.assert_data();
    moving.assert_copies().await;

    // The node comes back: nothing was booked on sn3-d0, and the resize, asked
    // again, moves the copy there while the client writes.
    moving.sn3.start();
    wait_online(&moving.app, "sn-3", &moving.sn3).await;
    wait_served(&moving.app, &["sn3-d0"]).await;
    assert_eq!(moving.app.free("sn3-d0").await, 8);
    let writer = moving.writer(100, 20, 100);
    let job_id = moving.start_resize().await;
    let job = moving.app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert!(details(&job).iter().any(|d| d == MOVEMENT_FOUND), "{job}");
    assert_eq!(
        job["slices"][0]["outcome"], "moved",
        "the retry converged: {job}"
    );
    let (result, written) = writer.join().expect("writer thread");
    result.expect("every write acknowledged during the second move");
    moving.acknowledged(&written);
    moving.assert_moved().await;
    if front == Front::Node {
        moving.assert_front_stayed().await;
    }
}

/// SIGKILL the source node mid-copy while a client writes: I/O goes on with
/// the other copy (the writer sees no error); the move cannot read its
/// source any more, so the job rebuilds the lost copy on the move's target
/// from the healthy copy instead, and the resize is done: the volume is
/// Ready at its new size with its copies on sn1-d0 and sn3-d0, no
/// acknowledged byte is lost, and both copies are exact.
#[tokio::test]
async fn a_move_whose_source_node_is_killed_mid_copy_is_done_by_rebuilding_the_copy() {
    source_node_killed_mid_copy(Front::Serve).await;
}

/// The same with the volume's front on a storage node (sn-1, which holds
/// the copy that is not moved): the move and the rebuild that takes it
/// over run there, from sn-1's copy to sn-3.
#[tokio::test]
async fn a_move_on_the_front_s_node_whose_source_node_is_killed_is_done_by_a_rebuild() {
    source_node_killed_mid_copy(Front::Node).await;
}

async fn source_node_killed_mid_copy(front: Front) {
    let mut moving = Moving::start(front).await;
    let writer = moving.writer(0, 40, 100);
    let job_id = moving.start_resize().await;
    wait_mid_copy(&moving.app, &job_id, 20..70).await;
    moving.sn2.kill();
    let job = moving.app.wait_job(&job_id).await;
    let (result, written) = writer.join().expect("writer thread");
    result.expect("every write acknowledged while the source node died");
    moving.acknowledged(&written);
    assert_eq!(job["state"], "Done", "{job}\n{}", moving.app.log());
    let details = details(&job);
    assert!(
        details
            .iter()
            .any(|d| d.starts_with("The copy being moved was lost (")
                && d.ends_with("); rebuilding it on sn3-d0 from a healthy copy")),
        "{job}"
    );
    assert!(
        details.iter().any(|d| d
            == "Rebuilt slice c1-k0 on sn3-d0 (lost on sn2-d0) from a healthy copy: \
                verified chunk by chunk"),
        "{job}"
    );
    moving.assert_resized().await;
    if front == Front::Node {
        moving.assert_front_stayed().await;
    }
}

/// SIGKILL `svs serve` mid-copy, twice (about a third and two thirds into
/// the copy), each time after a client wrote during the move; restarted on
/// the same data directory (and addresses), it finds the storage nodes
/// again and the job resumes; it ends Done, every acknowledged write,
/// before, between and after the kills, reads back, and both copies are
/// exact.
#[tokio::test]
async fn a_move_whose_service_is_killed_mid_copy_resumes_and_is_done() {
    let mut moving = Moving::start(Front::Serve).await;
    moving.app.pin_ports();
    let job_id = moving.start_resize().await;
    for (kill, percent) in [(0, 20..50), (1, 50..90)] {
        wait_mid_copy(&moving.app, &job_id, percent).await;
        // Writes during the move, every one acknowledged before the kill.
        let (result, written) = moving
            .writer(kill * 100, 8, 50)
            .join()
            .expect("writer thread");
        result.expect("writes during the move");
        moving.acknowledged(&written);
        let (_, job) = moving.app.get(&format!("/jobs/{job_id}")).await;
        assert_eq!(
            job["state"], "Running",
            "still copying at kill {kill}: {job}"
        );
        moving.app.kill();
        moving
            .app
            .launch()
            .expect("svs serve restarts after SIGKILL");
    }
    // Whether the copy resumes from a checkpoint > 0 on a node's medium is
    // asserted in stale_copies.rs; here: Done, and not a byte lost.
    let job = moving.app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}\n{}", moving.app.log());
    assert!(details(&job).iter().any(|d| d == MOVEMENT_FOUND), "{job}");
    assert!(
        details(&job)
            .iter()
            .any(|d| d.starts_with(&format!("Moved {MOVED} while in use"))),
        "{job}"
    );
    let (result, written) = moving.writer(200, 8, 0).join().expect("writer thread");
    result.expect("writes after the restarts");
    moving.acknowledged(&written);
    moving.assert_moved().await;
}

/// SIGKILL the target node mid-copy and start it again at once, before
/// the job gives up: the job's retry finds it back and the job ends Done,
/// with every acknowledged write on both copies.
#[tokio::test]
async fn a_move_whose_target_node_restarts_at_once_is_done_by_the_jobs_retry() {
    let mut moving = Moving::start(Front::Serve).await;
    let writer = moving.writer(0, 30, 100);
    let job_id = moving.start_resize().await;
    wait_mid_copy(&moving.app, &job_id, 20..70).await;
    moving.sn3.kill();
    // The copy fails on the dead node, and the job waits to try again.
    let retrying = eventually(Duration::from_secs(30), || async {
        moving
            .app
            .log()
            .contains("transient error; job will be tried again")
    })
    .await;
    let (_, job) = moving.app.get(&format!("/jobs/{job_id}")).await;
    assert!(retrying, "{job}\n{}", moving.app.log());
    moving.sn3.start();
    let job = moving.app.wait_job(&job_id).await;
    let (result, written) = writer.join().expect("writer thread");
    result.expect("every write acknowledged while the target node died");
    moving.acknowledged(&written);
    assert_eq!(job["state"], "Done", "{job}\n{}", moving.app.log());
    assert!(
        details(&job)
            .iter()
            .any(|d| d.starts_with(&format!("Moved {MOVED} while in use"))),
        "{job}"
    );
    moving.assert_moved().await;
}

/// The volume's front on a storage node (sn-1): the resize's copy runs
/// there while a client writes through it, and `svs serve` is SIGKILLed
/// twice mid-copy. The writes go on meanwhile (the control plane is not
/// on the data path); the copy on the node waits for the control plane's
/// grants, and the restarted job begins it again from its checkpoint
/// (the node drops the copy the killed process left). Done, every
/// acknowledged write reads back, both copies are exact, and the front
/// never moved.
#[tokio::test]
async fn a_move_on_the_front_s_node_goes_on_while_svs_serve_is_killed_and_restarted() {
    let mut moving = Moving::start(Front::Node).await;
    moving.app.pin_ports();
    let writer = moving.writer(0, 80, 100);
    let job_id = moving.start_resize().await;
    for percent in [20..50, 50..90] {
        wait_mid_copy(&moving.app, &job_id, percent).await;
        moving.app.kill();
        moving
            .app
            .launch()
            .expect("svs serve restarts after SIGKILL");
    }
    let job = moving.app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}\n{}", moving.app.log());
    assert!(
        details(&job)
            .iter()
            .any(|d| d.starts_with(&format!("Moved {MOVED} while in use"))),
        "{job}"
    );
    assert!(
        details(&job)
            .iter()
            .any(|d| d.starts_with(&format!("Resuming the copy of {MOVED} from its checkpoint"))),
        "{job}"
    );
    let (result, written) = writer.join().expect("writer thread");
    result.expect("every write acknowledged while svs serve was down");
    moving.acknowledged(&written);
    moving.assert_moved().await;
    moving.assert_front_stayed().await;
}

/// A volume without attachment, its copies on storage nodes: the resize's
/// move runs on a front the job opens on a storage node (the copy goes from
/// node to node, never through `svs serve`), which closes once the job is
/// over. Attached again, the volume holds every byte written before, and
/// both copies are exact.
#[tokio::test]
async fn an_unattached_volume_s_move_runs_on_a_front_opened_on_a_node_for_the_job() {
    let mut moving = Moving::start(Front::Node).await;
    let job = moving
        .app
        .delete_and_wait("/volumes/data/snapshots/top/attachments/host-0")
        .await;
    assert_eq!(job["state"], "Done", "{job}");
    let job_id = moving.start_resize().await;
    let job = moving.app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}\n{}", moving.app.log());
    assert!(
        details(&job)
            .iter()
            .any(|d| d == &format!("Moved {MOVED}: copy verified chunk by chunk")),
        "{job}"
    );
    let closed = eventually(Duration::from_secs(30), || async {
        moving
            .app
            .log()
            .contains("the volume's front on a storage node closes: no job works on it")
    })
    .await;
    let log = moving.app.log();
    assert!(closed, "{log}");
    assert_jobs_on_node_fronts(
        &log,
        &[
            "the volume's front opens on a storage node for the job",
            JOB_ON_NODE_FRONT,
        ],
    );
    let a = crate::attach::attach(&moving.app, "data", "host-0", false).await;
    moving.uri = crate::attach::uri(&a);
    moving.assert_moved().await;
}

/// A copy with a snapshot moves to another node with it (the live move on
/// the front's node; before, a slice with snapshots could not move to or
/// from a node): the moved copy's snapshot files equal the other copy's,
/// the volume and both copies hold what was acknowledged, and a rollback
/// afterwards brings both copies back to the snapshot, the moved one from
/// its own copied snapshot.
#[tokio::test]
async fn a_copy_with_a_snapshot_moves_to_another_node_with_it() {
    let moving = Moving::start(Front::Node).await;
    crate::snapshots::snapshot(&moving.app, "data", "s1").await;
    qemu_io(&moving.uri, &["write -P 0x77 0 1M".into(), "flush".into()])
        .expect("written after the snapshot");
    moving.reference.write(0, MIB, 0x77);

    let job_id = moving.start_resize().await;
    let job = moving.app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}\n{}", moving.app.log());
    moving.assert_resized().await;
    moving.assert_front_stayed().await;
    let files = |medium: &str, copy: u64| {
        let node = if medium == "sn1-d0" {
            &moving.sn1
        } else {
            &moving.sn3
        };
        snapshot_files(&node.medium_dir(medium).join(&moving.id), copy)
    };
    let moved = files("sn3-d0", 1);
    assert_eq!(
        moved.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(),
        ["delta", "map"]
    );
    assert_eq!(moved, files("sn1-d0", 0));

    let job = moving
        .app
        .delete_and_wait("/volumes/data/snapshots/top/attachments/host-0")
        .await;
    assert_eq!(job["state"], "Done", "{job}");
    crate::snapshots::rollback_done(&moving.app, "data", "s1").await;
    moving.reference.write(0, MIB, 0x5a);
    // The rollback zeroes the space the resize added: the reference
    // holds zeros there already.
    moving.assert_copies().await;
}
