//! Snapshots, rollback and clones through the API and real NBD clients
//! (`qemu-io`), against the real `svs serve`.

use crate::harness::attach::{attach, qemu_io, qemu_io_ro, topology, uri};
use crate::harness::snapshots::*;
use crate::harness::TestApp;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// Offsets crossing copy-on-write chunks, stripes and columns.
const OFFSETS: [&str; 4] = ["0", "1020k", "5M", "3000M"];

fn writes(pattern: u8) -> Vec<String> {
    let mut commands: Vec<String> = OFFSETS
        .iter()
        .map(|at| format!("write -P {pattern} {at} 8k"))
        .collect();
    commands.push("flush".into());
    commands
}

fn reads(pattern: u8) -> Vec<String> {
    OFFSETS
        .iter()
        .map(|at| format!("read -P {pattern} {at} 8k"))
        .collect()
}

/// Attaches snapshot `name` of `volume` to `node`; returns the attachment.
async fn attach_snapshot(app: &TestApp, volume: &str, name: &str, node: &str) -> Value {
    let (status, body) = app
        .post(
            &format!("/volumes/{volume}/snapshots/{name}/attachments"),
            json!({"node": node}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "attach snapshot: {body}");
    let job = app.wait_job_of(&body).await;
    assert_eq!(job["state"], "Done", "{job}");
    let (status, a) = app
        .get(&format!(
            "/volumes/{volume}/snapshots/{name}/attachments/{node}"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{a}");
    a
}

async fn job_of(app: &TestApp, (status, body): (StatusCode, Value)) -> Value {
    assert_eq!(status, StatusCode::OK, "{body}");
    app.wait_job_of(&body).await
}

async fn detach(app: &TestApp, path: &str) {
    let job = job_of(app, app.delete(path).await).await;
    assert_eq!(job["state"], "Done", "{job}");
}

/// A 4 GiB mirrored volume "v" attached read-write to host-1.
async fn attached_v() -> (TestApp, Value) {
    let app = TestApp::start_with(topology("0")).await;
    app.create_policy("mirror", 1, 1, 0).await;
    app.create_volume("v", 4, "mirror").await;
    let a = attach(&app, "v", "host-1", false).await;
    (app, a)
}

#[tokio::test]
async fn snapshots_are_exact_images_of_their_instant_over_nbd_while_the_volume_changes() {
    let (app, live) = attached_v().await;
    qemu_io(&uri(&live), &writes(0x11)).expect("first writes");
    let s1 = snapshot(&app, "v", "s1").await;
    assert_eq!(s1["name"], "s1");
    assert_eq!(s1["volumename"], "v");
    assert_eq!(s1["volumesize"], 4);
    assert_eq!(s1["consistency"], "crash");
    assert_eq!(s1["state"], "Ready");
    assert_eq!(s1["numberofattachments"], 0);
    // Nothing changed since: only its (empty) chunk maps take a block each.
    assert!(s1["used"].as_u64().unwrap_or(u64::MAX) < 65536, "{s1}");
    qemu_io(&uri(&live), &writes(0x22)).expect("second writes");
    snapshot(&app, "v", "s2").await;
    qemu_io(&uri(&live), &writes(0x33)).expect("third writes");
    let (_, s1) = app.get("/volumes/v/snapshots/s1").await;
    // Two copies of the 64 KiB chunks around four offsets (one crosses two).
    assert!(
        s1["used"].as_u64().unwrap_or(0) >= 2 * 4 * 65536,
        "s1 holds what changed after it: {s1}"
    );

    let a1 = attach_snapshot(&app, "v", "s1", "host-1").await;
    assert_eq!(a1["snapshotname"], "s1");
    assert_eq!(a1["snapshotid"], s1["snapshotid"]);
    assert_eq!(a1["readonly"], true, "snapshots attach read-only: {a1}");
    let a2 = attach_snapshot(&app, "v", "s2", "host-1").await;
    qemu_io_ro(&uri(&a1), &reads(0x11)).expect("s1 reads its instant");
    qemu_io_ro(&uri(&a2), &reads(0x22)).expect("s2 reads its instant");
    qemu_io(&uri(&live), &reads(0x33)).expect("the live volume reads the last writes");
    let err = qemu_io(&uri(&a1), &["write -P 1 0 4k".into()]).unwrap_err();
    assert!(
        err.contains("Permission denied"),
        "a snapshot is read-only: {err}"
    );

    // Lists: the volume's, the tenant's, and a snapshot's attachments.
    let (_, list) = app.get("/volumes/v/snapshots").await;
    let names: Vec<&str> = list
        .as_array()
        .map(|l| l.iter().filter_map(|s| s["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["s1", "s2"]);
    let (_, all) = app.get("/snapshots").await;
    assert_eq!(all.as_array().map(Vec::len), Some(2), "{all}");
    let (_, on_s1) = app.get("/volumes/v/snapshots/s1/attachments").await;
    assert_eq!(on_s1.as_array().map(Vec::len), Some(1), "{on_s1}");
    let (_, every) = app.get("/volumes/v/attachments").await;
    assert_eq!(every.as_array().map(Vec::len), Some(3), "{every}");
    let (_, s1) = app.get("/volumes/v/snapshots/s1").await;
    assert_eq!(s1["numberofattachments"], 1);

    // Another snapshot after the third writes, then more writes: s2 is now
    // in the middle.
    snapshot(&app, "v", "s3").await;
    qemu_io(&uri(&live), &writes(0x44)).expect("fourth writes");
    let a3 = attach_snapshot(&app, "v", "s3", "host-1").await;

    // An attached snapshot is deleted only with force; the others stay exact.
    let (status, body) = app.delete("/volumes/v/snapshots/s2").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body["message"],
        "snapshot 's2' is attached to node(s) host-1; detach it first or delete with force=true"
    );
    let job = job_of(&app, app.delete("/volumes/v/snapshots/s2?force=true").await).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(job["type"], "snapshot_delete");
    let (status, _) = app.get("/volumes/v/snapshots/s2").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        qemu_io_ro(&uri(&a2), &reads(0x22)).is_err(),
        "s2's export is gone"
    );
    qemu_io_ro(&uri(&a1), &reads(0x11)).expect("the older snapshot stays exact");
    qemu_io_ro(&uri(&a3), &reads(0x33)).expect("the newer snapshot stays exact");
    qemu_io(&uri(&live), &reads(0x44)).expect("the live volume stays exact");
}

#[tokio::test]
async fn a_rollback_needs_the_volume_detached_and_keeps_newer_snapshots() {
    let (app, live) = attached_v().await;
    qemu_io(&uri(&live), &writes(0x11)).expect("first writes");
    snapshot(&app, "v", "s1").await;
    qemu_io(&uri(&live), &writes(0x22)).expect("second writes");
    snapshot(&app, "v", "s2").await;
    qemu_io(&uri(&live), &writes(0x33)).expect("third writes");

    let (status, body) = app
        .patch("/volumes/v/snapshots/s1/rollback", json!({}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body["message"],
        "volume 'v' is attached read-write to node(s) host-1; detach it or make the \
         attachment read-only before a rollback"
    );
    detach(&app, "/volumes/v/snapshots/top/attachments/host-1").await;
    let job = job_of(
        &app,
        app.patch("/volumes/v/snapshots/s1/rollback", json!({}))
            .await,
    )
    .await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(job["type"], "snapshot_rollback");
    assert_eq!(
        job["details"].as_array().and_then(|d| d.last()).cloned(),
        Some(json!("Volume 'v' rolled back to snapshot 's1'"))
    );
    let live = attach(&app, "v", "host-1", false).await;
    qemu_io(&uri(&live), &reads(0x11)).expect("the volume holds s1's content");
    let a2 = attach_snapshot(&app, "v", "s2", "host-1").await;
    qemu_io_ro(&uri(&a2), &reads(0x22)).expect("the newer snapshot stays exact");
}

#[tokio::test]
async fn snapshot_requests_are_checked_and_change_nothing_when_refused() {
    let app = TestApp::start_with(topology("0")).await;
    app.create_policy("none", 0, 0, 0).await;
    app.create_volume("v", 1, "none").await;
    let post = |body: Value| app.post("/volumes/v/snapshots", body);
    let cases = [
        (
            json!({"name": "top", "consistency": "crash"}),
            StatusCode::BAD_REQUEST,
            "snapshot name 'top' is reserved for the live volume",
        ),
        (
            json!({"name": "a b", "consistency": "crash"}),
            StatusCode::BAD_REQUEST,
            "snapshot name must be 1 to 63 characters of letters, digits, '.', '_' or '-'",
        ),
        (
            json!({"name": "s", "consistency": "fuzzy"}),
            StatusCode::BAD_REQUEST,
            "consistency must be \"crash\" or \"application\"",
        ),
        (
            json!({"name": "s"}),
            StatusCode::BAD_REQUEST,
            "consistency is required",
        ),
    ];
    for (body, status, message) in cases {
        let (got, answer) = post(body.clone()).await;
        assert_eq!(
            (got, answer["message"].as_str()),
            (status, Some(message)),
            "{body}"
        );
    }
    let (status, _) = app
        .post(
            "/volumes/nope/snapshots",
            json!({"name": "s", "consistency": "crash"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, all) = app.get("/snapshots").await;
    assert_eq!(all, json!([]), "refused requests made nothing");

    snapshot(&app, "v", "s").await;
    let (status, body) = post(json!({"name": "s", "consistency": "application"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body["message"],
        "a snapshot named 's' already exists on the volume"
    );
    let (status, body) = app.get("/volumes/v/snapshots/other").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["message"], "snapshot 'other' of volume 'v' not found");

    // Rename, keep stored fields; `top` stays reserved.
    let (status, body) = app
        .patch(
            "/volumes/v/snapshots/s",
            json!({"name": "daily", "consistencygroupname": "cg"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["Message"], "Snapshot 'daily' updated");
    let (_, s) = app.get("/volumes/v/snapshots/daily").await;
    assert_eq!(s["consistencygroupname"], "cg");
    let (status, _) = app
        .patch("/volumes/v/snapshots/daily", json!({"name": "top"}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // A volume with snapshots goes only with force, and takes them along.
    let (status, body) = app.delete("/volumes/v").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body["message"],
        "volume 'v' has 1 snapshot(s); delete them first or delete with force=true"
    );
    let job = job_of(&app, app.delete("/volumes/v?force=true").await).await;
    assert_eq!(job["state"], "Done", "{job}");
    let (_, all) = app.get("/snapshots").await;
    assert_eq!(all, json!([]));
    let leftovers: Vec<_> = walk(&app.dir.path().join("media"));
    assert!(leftovers.is_empty(), "files left behind: {leftovers:?}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[tokio::test]
async fn a_clone_holds_the_snapshot_content_in_a_larger_independent_volume() {
    let (app, live) = attached_v().await;
    qemu_io(&uri(&live), &writes(0x11)).expect("first writes");
    snapshot(&app, "v", "s1").await;
    qemu_io(&uri(&live), &writes(0x22)).expect("writes after the snapshot");

    let clone = |size: u64| {
        app.post(
            "/volumes",
            json!({"name": "c", "size": size, "policy": "mirror",
                   "contentvolume": "v", "contentsnapshot": "s1"}),
        )
    };
    let (status, body) = clone(3).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        body["message"],
        "size must be at least the snapshot's size of 4 GiB"
    );
    let job = job_of(&app, clone(6).await).await;
    assert_eq!(job["state"], "Done", "{job}");
    let (_, c) = app.get("/volumes/c").await;
    assert_eq!(
        (
            c["size"].clone(),
            c["contentvolume"].clone(),
            c["contentsnapshot"].clone()
        ),
        (json!(6), json!("v"), json!("s1"))
    );
    let a = attach(&app, "c", "host-1", false).await;
    let mut commands = reads(0x11);
    commands.push("read -P 0 4095M 1M".into());
    commands.push("read -P 0 5G 1M".into());
    qemu_io(&uri(&a), &commands).expect("the clone holds s1's content, zeros beyond");
    qemu_io(&uri(&a), &writes(0x44)).expect("the clone is writable");
    let s1 = attach_snapshot(&app, "v", "s1", "host-1").await;
    qemu_io_ro(&uri(&s1), &reads(0x11)).expect("the snapshot did not change");
    qemu_io(&uri(&live), &reads(0x22)).expect("the source volume did not change");
}

#[tokio::test]
async fn snapshots_keep_their_size_across_a_resize_and_a_rollback_zeroes_the_growth() {
    let (app, live) = attached_v().await;
    qemu_io(&uri(&live), &writes(0x11)).expect("first writes");
    snapshot(&app, "v", "small").await;
    let job = app.wait_job(&app.start_resize("v", 6, false).await).await;
    assert_eq!(job["state"], "Done", "{job}");
    let (_, live) = app.get("/volumes/v/snapshots/top/attachments/host-1").await;
    let mut grown = writes(0x22);
    grown.push("write -P 0x23 5G 1M".into());
    grown.push("flush".into());
    qemu_io(&uri(&live), &grown).expect("writes over the old and the new space");
    let (_, s) = app.get("/volumes/v/snapshots/small").await;
    assert_eq!(s["volumesize"], 4, "a snapshot keeps its own size: {s}");
    let a = attach_snapshot(&app, "v", "small", "host-1").await;
    qemu_io_ro(&uri(&a), &reads(0x11)).expect("the snapshot is unchanged by the resize");

    detach(&app, "/volumes/v/snapshots/top/attachments/host-1").await;
    let job = job_of(
        &app,
        app.patch("/volumes/v/snapshots/small/rollback", json!({}))
            .await,
    )
    .await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(
        job["details"].as_array().and_then(|d| d.last()).cloned(),
        Some(json!(
            "Volume 'v' rolled back to snapshot 'small'; the 2 GiB added since the snapshot now \
             read as zeros"
        ))
    );
    let (_, v) = app.get("/volumes/v").await;
    assert_eq!(v["size"], 6, "the volume keeps its current size");
    let live = attach(&app, "v", "host-1", false).await;
    let mut expected = reads(0x11);
    expected.push("read -P 0 5G 1M".into());
    qemu_io(&uri(&live), &expected).expect("old content back, growth zeroed");
}

#[tokio::test]
async fn a_snapshot_a_clone_is_copying_from_cannot_be_deleted() {
    // 64 MiB of data at 8 MiB/s: the clone copies for about 8 s.
    let app = TestApp::start_with(topology("8 MiB")).await;
    app.create_policy("none", 0, 0, 0).await;
    app.create_volume("v", 1, "none").await;
    let live = attach(&app, "v", "host-1", false).await;
    qemu_io(&uri(&live), &["write -P 0x66 0 64M".into(), "flush".into()]).expect("data");
    snapshot(&app, "v", "s").await;
    let (status, body) = app
        .post(
            "/volumes",
            json!({"name": "c", "size": 1, "policy": "none",
                   "contentvolume": "v", "contentsnapshot": "s"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let clone_job = body["JobID"].as_str().unwrap_or_default().to_string();
    let message = format!(
        "snapshot 's' is being copied into a new volume by job {clone_job}; delete it when the \
         copy ends"
    );
    let (status, body) = app.delete("/volumes/v/snapshots/s").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["message"], message);
    let (status, body) = app.delete("/volumes/v?force=true").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (_, job) = app.get(&format!("/jobs/{clone_job}")).await;
    assert_eq!(
        job["state"], "Running",
        "the refusals came while the clone copied: {job}"
    );

    let job = app.wait_job(&clone_job).await;
    assert_eq!(job["state"], "Done", "{job}");
    let job = job_of(&app, app.delete("/volumes/v/snapshots/s").await).await;
    assert_eq!(job["state"], "Done", "{job}");
    let c = attach(&app, "c", "host-1", false).await;
    qemu_io(&uri(&c), &["read -P 0x66 0 64M".into()]).expect("the clone outlives its source");
}

/// One medium of `size_gib`, client host-1, and a reconcile period of 1 s
/// (snapshot space is measured that often).
fn one_medium(size_gib: u64) -> crate::harness::TestConfig {
    crate::harness::TestConfig {
        media: vec![crate::harness::medium("m1", "n1", "z1", size_gib)],
        nodes: vec![("host-1", "127.0.0.1")],
        settings: vec!["reconcile_period = \"1s\"".into()],
        ..Default::default()
    }
}

/// A 1 GiB single-copy volume "v" on m1, attached read-write to host-1.
async fn single_on_m1(size_gib: u64) -> (TestApp, Value) {
    let app = TestApp::start_with(one_medium(size_gib)).await;
    app.create_policy("single", 0, 0, 0).await;
    app.create_volume("v", 1, "single").await;
    let a = attach(&app, "v", "host-1", false).await;
    (app, a)
}

#[tokio::test]
async fn a_write_that_needs_snapshot_space_the_medium_lacks_gets_enospc_and_changes_nothing() {
    let (app, live) = single_on_m1(1).await;
    assert_eq!(app.free("m1").await, 0);
    qemu_io(&uri(&live), &["write -P 17 0 1M".into(), "flush".into()]).expect("first data");
    snapshot(&app, "v", "s1").await;

    // Overwriting data the snapshot must keep needs space m1 does not have.
    let err = qemu_io(&uri(&live), &["write -P 34 0 64k".into()]).unwrap_err();
    assert!(err.contains("No space left on device"), "{err}");
    let err = qemu_io(&uri(&live), &["write -P 34 512k 4k".into()]).unwrap_err();
    assert!(err.contains("No space left on device"), "{err}");
    // Where the snapshot holds nothing (never written) a write costs it nothing.
    qemu_io(
        &uri(&live),
        &["write -P 51 512M 64k".into(), "flush".into()],
    )
    .expect("a write over a hole needs no snapshot data");
    // The volume and the snapshot read exact.
    qemu_io(
        &uri(&live),
        &["read -P 17 0 1M".into(), "read -P 51 512M 64k".into()],
    )
    .expect("the volume is as before the refused writes");
    let s1 = attach_snapshot(&app, "v", "s1", "host-1").await;
    qemu_io_ro(
        &uri(&s1),
        &["read -P 17 0 1M".into(), "read -P 0 512M 64k".into()],
    )
    .expect("the snapshot reads its instant");

    // Deleting the snapshot frees its space: the same write goes through.
    let job = job_of(&app, app.delete("/volumes/v/snapshots/s1?force=true").await).await;
    assert_eq!(job["state"], "Done", "{job}");
    qemu_io(
        &uri(&live),
        &[
            "write -P 34 0 64k".into(),
            "flush".into(),
            "read -P 34 0 64k".into(),
            "read -P 17 64k 960k".into(),
        ],
    )
    .expect("the same write after the deletion");
}

#[tokio::test]
async fn media_freesize_counts_snapshot_data_as_it_grows_and_frees_it_on_deletion() {
    let (app, live) = single_on_m1(4).await;
    assert_eq!(app.free("m1").await, 3);
    qemu_io(&uri(&live), &["write -P 17 0 4M".into(), "flush".into()]).expect("data");
    let s1 = snapshot(&app, "v", "s1").await;
    let first = s1["used"].as_u64().expect("used");
    assert!(first > 0 && first < 65536, "empty maps only: {s1}");
    // Any snapshot byte takes a whole GiB of the medium's free space.
    assert_eq!(app.free("m1").await, 2);

    // 4 MiB overwritten after the snapshot: it now holds them, as the
    // snapshot-space reconciler measures without any job running.
    qemu_io(&uri(&live), &["write -P 34 0 4M".into(), "flush".into()]).expect("overwrite");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let used = loop {
        let (_, s1) = app.get("/volumes/v/snapshots/s1").await;
        let used = s1["used"].as_u64().expect("used");
        if used >= 4 << 20 || std::time::Instant::now() > deadline {
            break used;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert!(
        (4 << 20..(4 << 20) + 65536).contains(&used),
        "the snapshot holds the 4 MiB it kept (and its map): {used}"
    );
    let (_, m1) = app.get("/media/m1").await;
    assert_eq!(m1["freesize"], 2, "{m1}");

    let job = job_of(&app, app.delete("/volumes/v/snapshots/s1").await).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(
        app.free("m1").await,
        3,
        "the snapshot's space is free again"
    );
}

/// The first byte qemu-io's hex dump shows for `read -v OFFSET 16`.
fn first_byte(uri: &str, offset: u64) -> u8 {
    let out = qemu_io_ro(uri, &[format!("read -v {offset} 16")]).expect("dump");
    // "00100000:  07 07 07 ...": the first hex pair after the address.
    out.lines()
        .find_map(|l| l.split_once(":  ").map(|(_, rest)| rest.to_string()))
        .and_then(|rest| rest.split_whitespace().next().map(str::to_string))
        .and_then(|hex| u8::from_str_radix(&hex, 16).ok())
        .unwrap_or_else(|| panic!("no dump in {out}"))
}

#[tokio::test]
async fn a_snapshot_never_tears_a_write_in_flight() {
    let (app, live) = attached_v().await;
    // Each write covers three copy-on-write chunks across a stripe boundary.
    let offset = (1u64 << 20) - 65536;
    let commands: Vec<String> = (1..=200)
        .map(|i| format!("write -P {i} {offset} 192k"))
        .collect();
    let writer = std::thread::spawn({
        let uri = uri(&live);
        move || qemu_io(&uri, &commands)
    });
    let mut names = Vec::new();
    for n in 0..5 {
        tokio::time::sleep(std::time::Duration::from_millis(40)).await;
        let name = format!("t{n}");
        snapshot(&app, "v", &name).await;
        names.push(name);
    }
    writer
        .join()
        .expect("writer")
        .expect("every write acknowledged");
    let mut seen = Vec::new();
    for name in &names {
        let a = attach_snapshot(&app, "v", name, "host-1").await;
        let at = uri(&a);
        let p = first_byte(&at, offset);
        seen.push(p);
        // Whole before or whole after: the 192 KiB hold one pattern.
        qemu_io_ro(&at, &[format!("read -P {p} {offset} 192k")])
            .unwrap_or_else(|e| panic!("snapshot {name} tore a write (pattern {p}): {e}"));
    }
    assert!(
        seen.iter().any(|p| (1..200).contains(p)),
        "a snapshot was taken while the writes went on: {seen:?}"
    );
}

#[tokio::test]
async fn a_movement_carries_snapshot_space_to_the_new_medium_by_the_time_its_job_is_done() {
    // m1 too small for the grown copy, m2 with room. The figures are read
    // the moment the job is Done, before the snapshot-space reconciler's
    // next pass: only the job itself can have brought them up to date.
    let app = TestApp::start_with(crate::harness::TestConfig {
        media: vec![
            crate::harness::medium("m1", "n1", "z1", 2),
            crate::harness::medium("m2", "n2", "z1", 8),
        ],
        nodes: vec![("host-1", "127.0.0.1")],
        settings: vec!["reconcile_period = \"1h\"".into()],
        ..Default::default()
    })
    .await;
    app.create_policy("mirror", 1, 0, 0).await;
    app.create_volume("v", 1, "mirror").await;
    let live = attach(&app, "v", "host-1", false).await;
    qemu_io(&uri(&live), &["write -P 17 0 4M".into(), "flush".into()]).expect("data");
    snapshot(&app, "v", "s1").await;
    // The snapshot keeps these 4 MiB on each copy's medium: a GiB of each.
    qemu_io(&uri(&live), &["write -P 34 0 4M".into(), "flush".into()]).expect("overwrite");
    detach(&app, "/volumes/v/snapshots/top/attachments/host-1").await;
    // m3 joins: the copy on m1 must move there to grow to 3 GiB.
    let dir = app.dir.path().join("api-media").join("m3");
    let (status, body) = app
        .post(
            "/media",
            json!({"mediaid": "m3", "node": "n3", "zone": "z1",
                   "media": dir.display().to_string(), "size": 8}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let job = job_of(
        &app,
        app.patch("/volumes/v", json!({"size": 3, "allowdatamovement": true}))
            .await,
    )
    .await;
    assert_eq!(job["state"], "Done", "{job}");
    // m1 holds nothing now, not even snapshot data; m3 holds the moved copy
    // (3 GiB) and its snapshot data (a GiB).
    assert_eq!(
        app.free("m1").await,
        2,
        "the snapshot left m1 with its copy"
    );
    assert_eq!(app.free("m3").await, 4, "the snapshot came to m3");
    assert_eq!(app.free("m2").await, 4);
    let (_, s1) = app.get("/volumes/v/snapshots/s1").await;
    assert!(s1["used"].as_u64().expect("used") >= 4 << 20, "{s1}");
}

/// Files named `*.journal` under the media of `app`.
fn journals(app: &TestApp) -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "journal") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    if let Some(media) = app.medium_dir("any").parent() {
        walk(media, &mut out);
    }
    out
}

/// Writes after a snapshot are answered before their saves are durable
/// (held in a journal, not yet in the slice files). svs killed then, the
/// restart replays them: every answered write reads back, and the snapshot
/// still reads its instant.
#[tokio::test]
async fn writes_held_after_a_snapshot_survive_a_kill_of_svs() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    let (mut app, live) = attached_v().await;
    qemu_io(&uri(&live), &writes(0x11)).expect("first writes");
    snapshot(&app, "v", "s1").await;

    // An interactive qemu-io (line-buffered, to see each answer as it
    // comes; writeback: no flush after each write): each write is
    // answered, nothing is flushed.
    let mut client = Command::new("stdbuf")
        .args([
            "-oL",
            "qemu-io",
            "-t",
            "writeback",
            "-f",
            "raw",
            &uri(&live),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("qemu-io");
    let mut stdin = client.stdin.take().expect("stdin");
    let stdout = BufReader::new(client.stdout.take().expect("stdout"));
    let (lines, answers) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    // One command at a time: qemu-io reads its next command once the last
    // one is done.
    for at in OFFSETS {
        writeln!(stdin, "write -P 0x55 {at} 8k").expect("command");
        stdin.flush().expect("command sent");
        loop {
            let line = answers
                .recv_timeout(std::time::Duration::from_secs(30))
                .expect("qemu-io answers");
            if line.contains("wrote 8192/8192") {
                break;
            }
        }
    }
    // Held: in journals, one per slice written to.
    assert!(
        !journals(&app).is_empty(),
        "no held writes: {:?}",
        journals(&app)
    );
    app.kill();
    let _ = client.kill();
    let _ = client.wait();

    app.restart().await;
    let (status, again) = app.get("/volumes/v/snapshots/top/attachments/host-1").await;
    assert_eq!(status, StatusCode::OK, "{again}");
    qemu_io(&uri(&again), &reads(0x55)).expect("every answered write is there");
    let a1 = attach_snapshot(&app, "v", "s1", "host-1").await;
    qemu_io_ro(&uri(&a1), &reads(0x11)).expect("the snapshot reads its instant");
    assert_eq!(journals(&app), Vec::<std::path::PathBuf>::new());
}
