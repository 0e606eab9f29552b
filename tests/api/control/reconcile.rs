//! Reconcilers against the real service: what a stopped or crashed service
//! left behind is repaired at the next start, and a pass never touches what
//! a running job works on.

use crate::harness::workers::start_slow_movement;
use crate::harness::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn partial(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

fn plant(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().expect("a parent directory")).expect("dir made");
    std::fs::write(path, bytes).expect("file planted");
}

/// Two media on two nodes and a 5 GiB volume "v" with no resiliency;
/// returns the app, the volume id, its medium and the other medium.
async fn one_volume() -> (TestApp, String, &'static str, &'static str) {
    let app = TestApp::start_with(TestConfig {
        media: vec![medium("m1", "n1", "z1", 20), medium("m2", "n2", "z2", 20)],
        ..TestConfig::default()
    })
    .await;
    app.create_policy("none", 0, 0, 0).await;
    let (id, job) = app.create_volume("v", 5, "none").await;
    assert_eq!(job["state"], "Done", "{job}");
    let slices = app.slices("v").await;
    assert_eq!(slices.len(), 1, "{slices:?}");
    let (placed, other) = if slices[0]["media"] == "m1" {
        ("m1", "m2")
    } else {
        ("m2", "m1")
    };
    write_at(&app.slice_path(placed, &id, 0, 0), 4096, &pattern(1, 8192));
    (app, id, placed, other)
}

#[tokio::test]
async fn partial_copies_left_on_media_are_removed_at_start() {
    let (mut app, id, placed, other) = one_volume().await;
    app.stop();
    let on_placed = partial(&app.slice_path(placed, &id, 0, 0));
    let on_other = partial(&app.slice_path(other, &id, 0, 0));
    let of_unknown = partial(&app.slice_path(other, "not-a-volume", 0, 0));
    for p in [&on_placed, &on_other, &of_unknown] {
        plant(p, b"an interrupted copy");
    }
    app.launch().expect("restarts");
    for p in [&on_placed, &on_other, &of_unknown] {
        assert!(!p.exists(), "{} is left", p.display());
    }
    let slice = app.slice_path(placed, &id, 0, 0);
    assert!(
        read_at(&slice, 4096, 8192) == pattern(1, 8192),
        "the slice is intact"
    );
}

#[tokio::test]
async fn a_copy_on_a_medium_that_is_not_the_slice_placement_is_removed_at_start() {
    let (mut app, id, placed, other) = one_volume().await;
    app.stop();
    let slice = app.slice_path(placed, &id, 0, 0);
    let stale = app.slice_path(other, &id, 0, 0);
    std::fs::create_dir_all(stale.parent().expect("volume dir")).expect("dir made");
    std::fs::copy(&slice, &stale).expect("stale copy planted");
    // A complete file of a volume the store does not know: not ours to judge.
    let foreign = app.slice_path(other, "not-a-volume", 0, 0);
    plant(&foreign, b"someone else's data");

    app.launch().expect("restarts");
    assert!(!stale.exists(), "the stale copy is left");
    assert!(
        read_at(&slice, 4096, 8192) == pattern(1, 8192),
        "the slice is intact"
    );
    assert_eq!(app.slices("v").await[0]["media"], placed);
    assert!(foreign.exists(), "a file of an unknown volume was removed");
}

#[tokio::test]
async fn a_reconcile_pass_never_touches_the_copy_of_a_running_movement() {
    let mut app = TestApp::start_with(movement_topology("4 MiB")).await;
    // Passes every second while the copy (about 4 s) runs.
    app.restart_with_setting("reconcile_period = \"1s\"");

    let job_id = start_slow_movement(&app).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let id = loop {
        let (_, job) = app.get(&format!("/jobs/{job_id}")).await;
        let (_, volume) = app.get("/volumes/data").await;
        let id = volume["volumeid"].as_str().unwrap_or_default().to_string();
        if partial(&app.slice_path("m3", &id, 1, 0)).exists() {
            break id;
        }
        assert!(job["state"] != "Done" && job["state"] != "Error", "{job}");
        assert!(Instant::now() < deadline, "no copy under way: {job}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // At least two passes while the copy runs.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    let moved = app.slice_path("m3", &id, 1, 0);
    for i in 0..16u64 {
        assert!(
            read_at(&moved, i << 20, 1 << 20) == pattern(i, 1 << 20),
            "MiB {i} of the moved slice differs"
        );
    }
    assert!(!partial(&moved).exists());
    let (_, workers) = app.get("/workers").await;
    let orphans = workers
        .as_array()
        .and_then(|w| w.iter().find(|w| w["name"] == "reconcile-orphaned-copies"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(orphans["period_secs"], 1, "{orphans}");
    assert_eq!(orphans["errors"], 0, "{orphans}");
}
