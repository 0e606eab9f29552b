//! A lost disk is known at once (issue 28): a copy whose I/O fails is lost
//! in the store as the I/O meets it, and a recovery probes the volume's
//! files before it plans, so it never answers "nothing to rebuild" while a
//! copy is unreadable. The media-health reconciler is set to an hour here:
//! nothing in these tests may wait for it.

use crate::harness::attach::{attach, qemu_io, topology, uri};
use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Three media on nodes of their own, a mirror policy, two client hosts,
/// and no health-check poll that could do the tests' work.
async fn start() -> TestApp {
    let app = TestApp::start_with(TestConfig {
        settings: vec![
            "reconcile_period = \"1h\"".into(),
            "media_check_period = \"1h\"".into(),
        ],
        ..topology("0")
    })
    .await;
    app.create_policy("mirror", 1, 1, 0).await;
    app
}

/// Where a medium keeps its files: configured ones in the test's media
/// directory, those added by [`add_medium`] next to it.
fn dir_of(app: &TestApp, medium: &str) -> PathBuf {
    if medium.starts_with('r') {
        app.dir.path().join("api-media").join(medium)
    } else {
        app.medium_dir(medium)
    }
}

/// Adds a 40 GiB medium on a node and zone of its own through the API.
async fn add_medium(app: &TestApp, id: &str) {
    let body = json!({
        "mediaid": id, "node": format!("node-{id}"), "zone": format!("zone-{id}"),
        "media": dir_of(app, id).display().to_string(), "size": 40,
    });
    let (status, body) = app.post("/media", body).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

/// The volume's slices as (copy, medium, health), in copy order.
async fn copies(app: &TestApp, volume: &str) -> Vec<(u64, String, String)> {
    let mut list: Vec<(u64, String, String)> = app
        .slices(volume)
        .await
        .iter()
        .map(|s| {
            (
                s["copy"].as_u64().unwrap_or(99),
                s["media"].as_str().unwrap_or_default().to_string(),
                s["health"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    list.sort();
    list
}

async fn volume_state(app: &TestApp, volume: &str) -> Value {
    let (status, v) = app.get(&format!("/volumes/{volume}")).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    v["state"].clone()
}

async fn medium_state(app: &TestApp, medium: &str) -> Value {
    let (status, m) = app.get(&format!("/media/{medium}")).await;
    assert_eq!(status, StatusCode::OK, "{m}");
    m["state"].clone()
}

/// Starts a recovery and waits for its job.
async fn recover(app: &TestApp, volume: &str) -> Value {
    let (status, body) = app
        .post(&format!("/volumes/{volume}/recover"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    app.wait_job_of(&body).await
}

fn last_detail(job: &Value) -> Value {
    job["details"]
        .as_array()
        .and_then(|d| d.last())
        .cloned()
        .unwrap_or_default()
}

/// Polls until copy 0 of the volume is listed Lost, the volume Degraded and
/// the medium Failed; the data path records them at once, so a second is
/// plenty (the health-check poll is an hour away).
async fn assert_lost_at_once(app: &TestApp, volume: &str, medium: &str) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let c = copies(app, volume).await;
        let lost = c
            .first()
            .is_some_and(|(_, m, h)| m == medium && h == "Lost");
        if lost
            && volume_state(app, volume).await == "Degraded"
            && medium_state(app, medium).await == "Failed"
        {
            assert_eq!(c.get(1).map(|(_, _, h)| h.as_str()), Some("Healthy"));
            return;
        }
        assert!(
            Instant::now() < deadline,
            "copy 0 on {medium} not lost at once: {c:?}, volume {}, medium {}",
            volume_state(app, volume).await,
            medium_state(app, medium).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn read_range(path: &Path, offset: u64, len: usize) -> Vec<u8> {
    read_at(path, offset, len)
}

/// Ranges the loop writes: one at the start, one further in (1 GiB volumes
/// have one column, so a volume offset is the slice offset).
const RANGES: [(u64, usize); 2] = [(0, 1 << 20), (600 << 20, 1 << 20)];

/// qemu-io commands writing (then flushing) or reading `pattern` over
/// `RANGES`.
fn pattern_writes(pattern: impl std::fmt::Display) -> Vec<String> {
    let mut writes = pattern_ops("write", &pattern);
    writes.push("flush".into());
    writes
}

fn pattern_ops(verb: &str, pattern: &impl std::fmt::Display) -> Vec<String> {
    RANGES
        .iter()
        .map(|(off, len)| format!("{verb} -P {pattern} {off} {len}"))
        .collect()
}

#[tokio::test]
async fn a_pulled_disk_is_always_rebuilt_by_the_next_recovery_read_or_not() {
    let app = start().await;
    for round in 0..20u64 {
        let name = format!("lost-{round}");
        let (id, job) = app.create_volume(&name, 1, "mirror").await;
        assert_eq!(job["state"], "Done", "{job}");
        let a = attach(&app, &name, "host-1", false).await;
        let seed = 0x20 + round;
        let writes = pattern_writes(seed);
        qemu_io(&uri(&a), &writes).expect("pattern written");

        let before = copies(&app, &name).await;
        let pulled = before[0].1.clone();
        std::fs::remove_dir_all(dir_of(&app, &pulled)).expect("disk pulled");
        // Somewhere for the lost copy to go whichever medium was pulled.
        add_medium(&app, &format!("r{round}")).await;
        let reads = pattern_ops("read", &seed);
        if round % 2 == 1 {
            qemu_io(&uri(&a), &reads).expect("served by the other copy");
        }

        let job = recover(&app, &name).await;
        assert_eq!(job["state"], "Done", "round {round}: {job}");
        assert_eq!(
            last_detail(&job),
            json!(format!(
                "Volume '{name}' recovered: 1 slice(s) rebuilt; every copy is healthy again"
            )),
            "round {round}"
        );
        assert_eq!(medium_state(&app, &pulled).await, "Failed");
        let after = copies(&app, &name).await;
        assert_eq!(after.len(), 2, "round {round}: {after:?}");
        for (copy, medium, health) in &after {
            assert_ne!(
                medium, &pulled,
                "round {round}: copy {copy} still listed there"
            );
            assert_eq!(health, "Healthy", "round {round}: {after:?}");
        }
        assert_eq!(volume_state(&app, &name).await, "Ready");

        // Every copy holds the same bytes, and the volume reads them back.
        let files: Vec<PathBuf> = after
            .iter()
            .map(|(copy, medium, _)| {
                dir_of(&app, medium)
                    .join(&id)
                    .join(format!("c{copy}-k0.slice"))
            })
            .collect();
        for (off, len) in RANGES.iter().chain([(300 << 20, 1 << 20)].iter()) {
            let first = read_range(&files[0], *off, *len);
            assert_eq!(
                first,
                read_range(&files[1], *off, *len),
                "round {round} at {off}"
            );
            let written = RANGES.iter().any(|(o, _)| o == off);
            let want = if written { seed as u8 } else { 0 };
            assert!(first.iter().all(|b| *b == want), "round {round} at {off}");
        }
        qemu_io(&uri(&a), &reads).expect("the volume reads back what was written");
    }
}

#[tokio::test]
async fn a_read_error_on_a_copy_marks_it_lost_at_once() {
    let app = start().await;
    let (id, _) = app.create_volume("v", 1, "mirror").await;
    let a = attach(&app, "v", "host-1", false).await;
    qemu_io(&uri(&a), &["write -P 0x5a 0 1M".into(), "flush".into()]).expect("written");
    let medium = copies(&app, "v").await[0].1.clone();
    // The disk under copy 0 lost its data: reads of it come back short.
    let file = dir_of(&app, &medium).join(&id).join("c0-k0.slice");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .and_then(|f| f.set_len(0))
        .expect("copy 0 cut");
    qemu_io(&uri(&a), &["read -P 0x5a 0 1M".into()]).expect("served by copy 1");
    assert_lost_at_once(&app, "v", &medium).await;
}

#[tokio::test]
async fn a_read_after_a_disk_is_pulled_marks_its_copy_lost_at_once() {
    let app = start().await;
    app.create_volume("v", 1, "mirror").await;
    let a = attach(&app, "v", "host-1", false).await;
    qemu_io(&uri(&a), &["write -P 0x5b 0 1M".into(), "flush".into()]).expect("written");
    let medium = copies(&app, "v").await[0].1.clone();
    std::fs::remove_dir_all(dir_of(&app, &medium)).expect("disk pulled");
    // Reads check that a copy's file is still on its medium at most every
    // 100 ms (its open file would still answer).
    tokio::time::sleep(Duration::from_millis(150)).await;
    qemu_io(&uri(&a), &["read -P 0x5b 0 1M".into()]).expect("served by copy 1");
    assert_lost_at_once(&app, "v", &medium).await;
}

#[tokio::test]
async fn a_recovery_rebuilds_a_copy_whose_snapshot_file_is_gone() {
    let app = start().await;
    let (id, _) = app.create_volume("v", 1, "mirror").await;
    let a = attach(&app, "v", "host-1", false).await;
    qemu_io(&uri(&a), &["write -P 0x61 0 1M".into(), "flush".into()]).expect("written");
    let job = app
        .post_and_wait(
            "/volumes/v/snapshots",
            json!({"name": "s1", "consistency": "crash"}),
        )
        .await;
    assert_eq!(job["state"], "Done", "{job}");
    // Saved into the snapshot's delta on both copies.
    qemu_io(&uri(&a), &["write -P 0x62 0 1M".into(), "flush".into()]).expect("overwritten");
    let medium = copies(&app, "v").await[0].1.clone();
    let dir = dir_of(&app, &medium).join(&id);
    let deltas: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("volume directory")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("c0-k0.s") && n.ends_with(".delta"))
        })
        .collect();
    assert_eq!(deltas.len(), 1, "{deltas:?}");
    std::fs::remove_file(&deltas[0]).expect("snapshot file lost");

    // Its medium still serves: the copy is resynced there, in place.
    let job = recover(&app, "v").await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(
        last_detail(&job),
        json!("Volume 'v' recovered: 1 slice(s) resynced in place; every copy is healthy again")
    );
    let after = copies(&app, "v").await;
    assert!(
        after.iter().all(|(_, _, h)| h == "Healthy") && after[0].1 == medium,
        "{after:?}"
    );
    // The rebuilt copy has the snapshot's files again.
    let rebuilt = dir_of(&app, &after[0].1).join(&id);
    let name = deltas[0].file_name().unwrap_or_default();
    assert!(rebuilt.join(name).is_file(), "{}", rebuilt.display());
}

/// A copy of one volume on a medium that holds a copy of another: among
/// `volumes` (name, id), the first (volume, copy, medium, other volume)
/// found, with only copy 0 (the copy reads use) when `copy0`.
async fn shared_copy(
    app: &TestApp,
    volumes: &[(String, String)],
    copy0: bool,
) -> (String, String, u64, String, String) {
    let mut placed = Vec::new();
    for (name, id) in volumes {
        placed.push((name.clone(), id.clone(), copies(app, name).await));
    }
    for (name, id, own) in &placed {
        for (copy, medium, _) in own.iter().filter(|(c, _, _)| !copy0 || *c == 0) {
            let other = placed
                .iter()
                .find(|(n, _, c)| n != name && c.iter().any(|(_, m, _)| m == medium));
            if let Some((other, _, _)) = other {
                return (
                    name.clone(),
                    id.clone(),
                    *copy,
                    medium.clone(),
                    other.clone(),
                );
            }
        }
    }
    panic!("no medium holds copies of two volumes: {placed:?}");
}

/// Three mirrored 1 GiB volumes on three media: some medium always holds
/// copy 0 of one and a copy of another.
async fn three_volumes(app: &TestApp) -> Vec<(String, String)> {
    let mut volumes = Vec::new();
    for name in ["va", "vb", "vc"] {
        let (id, job) = app.create_volume(name, 1, "mirror").await;
        assert_eq!(job["state"], "Done", "{job}");
        volumes.push((name.to_string(), id));
    }
    volumes
}

/// Polls until copy `copy` of the volume is listed Lost on `medium` and
/// the volume Degraded; then the medium must still be Online and every
/// other volume Ready with every copy Healthy.
async fn assert_copy_lost_alone(
    app: &TestApp,
    volumes: &[(String, String)],
    volume: &str,
    copy: u64,
    medium: &str,
) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let c = copies(app, volume).await;
        let lost = c
            .iter()
            .any(|(n, m, h)| *n == copy && m == medium && h == "Lost");
        if lost && volume_state(app, volume).await == "Degraded" {
            let healthy = c.iter().filter(|(_, _, h)| h == "Healthy").count();
            assert_eq!(healthy, 1, "only that copy is lost: {c:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "copy {copy} on {medium} not lost at once: {c:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(medium_state(app, medium).await, "Online");
    assert_others_healthy(app, volumes, volume).await;
}

async fn assert_others_healthy(app: &TestApp, volumes: &[(String, String)], volume: &str) {
    for (other, _) in volumes.iter().filter(|(n, _)| n != volume) {
        assert_eq!(volume_state(app, other).await, "Ready", "{other}");
        let c = copies(app, other).await;
        assert!(c.iter().all(|(_, _, h)| h == "Healthy"), "{other}: {c:?}");
    }
}

/// Every copy of the one-column volume holds the same bytes at each range.
async fn assert_copies_identical(app: &TestApp, volume: &str, id: &str) {
    let files: Vec<PathBuf> = copies(app, volume)
        .await
        .iter()
        .map(|(copy, medium, _)| {
            dir_of(app, medium)
                .join(id)
                .join(format!("c{copy}-k0.slice"))
        })
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    for (off, len) in RANGES.iter().chain([(300 << 20, 1 << 20)].iter()) {
        assert_eq!(
            read_range(&files[0], *off, *len),
            read_range(&files[1], *off, *len),
            "{volume} at {off}"
        );
    }
}

#[tokio::test]
async fn a_slice_file_gone_from_a_medium_that_reads_loses_that_copy_alone() {
    let app = start().await;
    let volumes = three_volumes(&app).await;
    let (name, id, copy, medium, other) = shared_copy(&app, &volumes, true).await;
    let a = attach(&app, &name, "host-1", false).await;
    let writes = pattern_writes("0x71");
    qemu_io(&uri(&a), &writes).expect("written");
    let file = dir_of(&app, &medium)
        .join(&id)
        .join(format!("c{copy}-k0.slice"));
    std::fs::remove_file(&file).expect("slice file lost");
    // Reads check that a copy's file is still there at most every 100 ms.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let reads = pattern_ops("read", &"0x71");
    qemu_io(&uri(&a), &reads).expect("served by the other copy");
    assert_copy_lost_alone(&app, &volumes, &name, copy, &medium).await;
    // The other volume on that medium still reads there.
    let other_copies = copies(&app, &other).await;
    assert!(other_copies.iter().any(|(_, m, _)| *m == medium));

    // The medium still serves: the copy is made again there, in place.
    let job = recover(&app, &name).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(
        last_detail(&job),
        json!(format!(
            "Volume '{name}' recovered: 1 slice(s) resynced in place; every copy is healthy again"
        ))
    );
    let after = copies(&app, &name).await;
    assert!(
        after.iter().all(|(_, _, h)| h == "Healthy")
            && after.iter().any(|(c, m, _)| *c == copy && m == &medium),
        "{after:?}"
    );
    assert_eq!(volume_state(&app, &name).await, "Ready");
    assert_eq!(medium_state(&app, &medium).await, "Online");
    assert_others_healthy(&app, &volumes, &name).await;
    assert_copies_identical(&app, &name, &id).await;
    qemu_io(&uri(&a), &reads).expect("the volume reads back what was written");
}

#[tokio::test]
async fn a_snapshot_file_gone_from_a_medium_that_reads_loses_that_copy_alone() {
    let app = start().await;
    let volumes = three_volumes(&app).await;
    let (name, id, copy, medium, _) = shared_copy(&app, &volumes, false).await;
    let a = attach(&app, &name, "host-1", false).await;
    let writes = pattern_writes("0x73");
    qemu_io(&uri(&a), &writes).expect("written");
    let (status, body) = app
        .post(
            &format!("/volumes/{name}/snapshots"),
            json!({"name": "s1", "consistency": "crash"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job = app
        .wait_job(body["JobID"].as_str().unwrap_or_default())
        .await;
    assert_eq!(job["state"], "Done", "{job}");
    // Saved into the snapshot's delta on both copies.
    qemu_io(&uri(&a), &["write -P 0x74 0 1M".into(), "flush".into()]).expect("overwritten");
    let dir = dir_of(&app, &medium).join(&id);
    let prefix = format!("c{copy}-k0.s");
    let deltas: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("volume directory")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".delta"))
        })
        .collect();
    assert_eq!(deltas.len(), 1, "{deltas:?}");
    std::fs::remove_file(&deltas[0]).expect("snapshot file lost");

    // No I/O met it: the recovery's probe does, and loses that copy alone.
    // The medium still serves: the copy is resynced there, in place.
    let job = recover(&app, &name).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(
        last_detail(&job),
        json!(format!(
            "Volume '{name}' recovered: 1 slice(s) resynced in place; every copy is healthy again"
        ))
    );
    assert_eq!(medium_state(&app, &medium).await, "Online");
    assert_others_healthy(&app, &volumes, &name).await;
    let after = copies(&app, &name).await;
    assert!(
        after.iter().all(|(_, _, h)| h == "Healthy")
            && after.iter().any(|(c, m, _)| *c == copy && m == &medium),
        "{after:?}"
    );
    assert_eq!(volume_state(&app, &name).await, "Ready");
    assert_copies_identical(&app, &name, &id).await;
    // The rebuilt copy has the snapshot's files again, as the other has.
    let (rebuilt_copy, rebuilt_on, _) = after
        .iter()
        .find(|(c, _, _)| *c == copy)
        .cloned()
        .expect("rebuilt copy");
    let name_there = deltas[0].file_name().unwrap_or_default();
    let rebuilt = dir_of(&app, &rebuilt_on).join(&id).join(name_there);
    assert!(rebuilt.is_file(), "c{rebuilt_copy}: {}", rebuilt.display());
    qemu_io(
        &uri(&a),
        &["read -P 0x74 0 1M".into(), "read -P 0x73 600M 1M".into()],
    )
    .expect("the volume reads back what was written");
}
