//! The resize rules (BRIEF "The resize rules", seed "Resize a volume"), each
//! against the real service, with bytes checked on disk.

use crate::harness::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const NO_IN_PLACE: &str = "GetModificationPlan: Could not find an in-place modification plan";
const NO_RESILIENCY: &str =
    "GetModificationPlan: Data movement is not supported for volumes with no resiliency";
const MOVEMENT_FOUND: &str = "GetMovementModificationPlan: Found movement plan. Data Movement is enabled. The operation is now being attempted";
const NO_TARGET: &str =
    "GetModificationPlan: Failed to get modificationPlan for resizing volumeGroup";

/// Offsets that straddle 1 MiB chunk boundaries, plus the slice's last bytes.
fn pattern_offsets(slice_bytes: u64) -> Vec<u64> {
    vec![
        0,
        128 * 1024,
        (1 << 20) - 100,
        5 << 20,
        (9 << 20) + 1,
        slice_bytes - 64 * 1024,
    ]
}

const PATTERN_LEN: usize = 64 * 1024;

fn write_patterns(path: &Path, slice_bytes: u64, seed: u64) {
    for (i, off) in pattern_offsets(slice_bytes).into_iter().enumerate() {
        write_at(path, off, &pattern(seed + i as u64, PATTERN_LEN));
    }
}

fn assert_patterns(path: &Path, slice_bytes: u64, seed: u64) {
    for (i, off) in pattern_offsets(slice_bytes).into_iter().enumerate() {
        assert!(
            read_at(path, off, PATTERN_LEN) == pattern(seed + i as u64, PATTERN_LEN),
            "bytes at offset {off} of {} differ",
            path.display()
        );
    }
}

/// Writes `mib` MiB of non-zero data at the start of a slice (to make a
/// throttled copy take a while).
fn fill_mib(path: &Path, mib: u64, seed: u64) {
    for i in 0..mib {
        write_at(path, i << 20, &pattern(seed + i, 1 << 20));
    }
}

fn assert_filled(path: &Path, mib: u64, seed: u64) {
    for i in 0..mib {
        assert!(
            read_at(path, i << 20, 1 << 20) == pattern(seed + i, 1 << 20),
            "MiB {i} of {} differs",
            path.display()
        );
    }
}

/// Every `.partial` file left under the test's media.
fn partial_files(app: &TestApp) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.to_string_lossy().ends_with(".partial") {
                    out.push(p);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&app.dir.path().join("media"), &mut out);
    out
}

fn slice_on(slices: &[Value], copy: u64) -> &Value {
    slices
        .iter()
        .find(|s| s["copy"] == copy)
        .unwrap_or_else(|| panic!("no slice of copy {copy}: {slices:?}"))
}

fn medium_of(slices: &[Value], copy: u64) -> String {
    slice_on(slices, copy)["media"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn resize(app: &TestApp, volume: &str, size: u64, movement: bool) -> Value {
    let (status, body) = app
        .patch(
            &format!("/volumes/{volume}"),
            json!({"size": size, "allowdatamovement": movement}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "resize: {body}");
    assert_eq!(body["Message"], "Volume resize started");
    assert!(
        body["JobID"]
            .as_str()
            .is_some_and(|j| j.parse::<i64>().is_ok()),
        "{body}"
    );
    app.wait_job_of(&body).await
}

/// The seed's example: a volume spread over 2 media (no resiliency).
/// a1 = 10 GiB, b1 = 12 GiB; a 16 GiB volume needs 2 columns of 8 GiB,
/// leaving 2 GiB free on a1 and 4 GiB on b1.
async fn spread_volume() -> (TestApp, String) {
    let app = TestApp::start_with(spread_topology()).await;
    app.create_policy("none", 0, 0, 0).await;
    let (id, job) = app.create_volume("spread", 16, "none").await;
    assert_eq!(job["state"], "Done", "{job}");
    let slices = app.slices("spread").await;
    assert_eq!(slices.len(), 2, "{slices:?}");
    assert_eq!(app.free("a1").await, 2);
    assert_eq!(app.free("b1").await, 4);
    (app, id)
}

#[tokio::test]
async fn in_place_resize_grows_every_slice_and_keeps_its_bytes() {
    let (app, id) = spread_volume().await;
    let before = app.slices("spread").await;
    for s in &before {
        let path = app.slice_file(&id, s);
        write_patterns(&path, 8 * GIB, s["column"].as_u64().unwrap_or(0) * 100);
    }
    let job = resize(&app, "spread", 20, false).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(job["progress"], 100);
    assert_eq!(job["type"], "volume_modify_extend");
    let (_, volume) = app.get("/volumes/spread").await;
    assert_eq!(volume["size"], 20);
    assert_eq!(volume["maxsize"], 200);
    assert_eq!(volume["state"], "Ready");
    let after = app.slices("spread").await;
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(b["media"], a["media"], "an in-place resize moves nothing");
        assert_eq!(a["size"], 10);
        let col = a["column"].as_u64().unwrap_or(0);
        let path = app.slice_path(a["media"].as_str().unwrap_or_default(), &id, 0, col);
        assert_eq!(
            std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
            10 * GIB
        );
        assert_patterns(&path, 8 * GIB, col * 100);
    }
    assert_eq!(app.free("a1").await, 0);
    assert_eq!(app.free("b1").await, 2);
}

#[tokio::test]
async fn resize_fails_in_place_when_one_of_two_media_lacks_room() {
    let (app, id) = spread_volume().await;
    // 22 GiB → 11 GiB columns: a1 needs 3 more GiB but has 2.
    let job = resize(&app, "spread", 22, false).await;
    assert_eq!(job["state"], "Error", "{job}");
    assert_eq!(
        details(&job).last().map(String::as_str),
        Some(NO_IN_PLACE),
        "{job}"
    );
    let (_, volume) = app.get("/volumes/spread").await;
    assert_eq!(volume["size"], 16);
    assert_eq!(volume["state"], "Ready");
    for s in app.slices("spread").await {
        assert_eq!(s["size"], 8);
        let path = app.slice_file(&id, &s);
        assert_eq!(
            std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
            8 * GIB
        );
    }
    // Nothing stays reserved.
    assert_eq!(app.free("a1").await, 2);
    assert_eq!(app.free("b1").await, 4);
}

#[tokio::test]
async fn data_movement_is_refused_for_a_volume_with_no_resiliency() {
    let (app, _) = spread_volume().await;
    let job = resize(&app, "spread", 22, true).await;
    assert_eq!(job["state"], "Error", "{job}");
    assert_eq!(
        details(&job).last().map(String::as_str),
        Some(NO_RESILIENCY)
    );
    // Refused even when an in-place plan would have fitted.
    let job = resize(&app, "spread", 18, true).await;
    assert_eq!(job["state"], "Error", "{job}");
    assert_eq!(
        details(&job).last().map(String::as_str),
        Some(NO_RESILIENCY)
    );
    let (_, volume) = app.get("/volumes/spread").await;
    assert_eq!(volume["size"], 16);
}

#[tokio::test]
async fn size_bounds_are_checked_before_any_job_starts() {
    let (app, _) = spread_volume().await;
    let cases = [
        (
            json!({"size": 16}),
            "size must be greater than the current size of 16 GiB",
        ),
        (
            json!({"size": 3}),
            "size must be greater than the current size of 16 GiB",
        ),
        (
            json!({"size": 161}),
            "size must be at most 10 times the current size (160 GiB)",
        ),
        (json!({"size": 20.5}), "size must be a whole number of GiB"),
        (json!({"size": "20"}), "size must be a number"),
        (json!({"allowdatamovement": true}), "size is required"),
        (
            json!({"size": 20, "allowdatamovement": "yes"}),
            "allowdatamovement must be true or false",
        ),
    ];
    for (body, message) in cases {
        let (status, err) = app.patch("/volumes/spread", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {err}");
        assert_eq!(err["message"], message, "{body}");
    }
    let (_, jobs) = app.get("/jobs?type=volume_modify_extend").await;
    assert_eq!(
        jobs.as_array().map(Vec::len),
        Some(0),
        "no resize job was created"
    );
    let (_, volume) = app.get("/volumes/spread").await;
    assert_eq!(volume["size"], 16);
    // The upper bound itself is allowed.
    let (status, _) = app.patch("/volumes/spread", json!({"size": 160})).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_whole_volume_object_from_a_generated_client_is_accepted() {
    let (app, _) = spread_volume().await;
    let (_, mut volume) = app.get("/volumes/spread").await;
    // Read-only fields (state, progress, maxsize, volumeid, node...) are sent back as read.
    volume["size"] = json!(20);
    let (status, body) = app.patch("/volumes/spread", volume.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job = app.wait_job_of(&body).await;
    assert_eq!(job["state"], "Done", "{job}");

    // Changing a writable field other than size/allowdatamovement is refused.
    let (_, mut volume) = app.get("/volumes/spread").await;
    volume["size"] = json!(21);
    volume["policy"] = json!("gold");
    let (status, err) = app.patch("/volumes/spread", volume).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        err["message"],
        "policy cannot be changed: only size and allowdatamovement can be modified"
    );
    let (status, err) = app
        .patch("/volumes/spread", json!({"size": 21, "name": "other"}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    let (_, volume) = app.get("/volumes/spread").await;
    assert_eq!(volume["size"], 20);
}

/// m1 (20 GiB) and m2 (16 GiB) hold the two copies of a 15 GiB mirrored
/// volume; m3 (30 GiB) is first filled with a 20 GiB volume so it has no
/// room for a moved slice until that filler is deleted.
async fn mirrored_volume(rate: &str) -> (TestApp, String) {
    mirrored_volume_on(movement_topology(rate)).await
}

/// [`mirrored_volume`] whose copies record a checkpoint every MiB (and
/// second), so an interrupted copy has one to resume from.
async fn mirrored_volume_with_checkpoints(rate: &str) -> (TestApp, String) {
    let mut config = movement_topology(rate);
    config
        .settings
        .push("movement_checkpoint = \"1 MiB\"".into());
    mirrored_volume_on(config).await
}

async fn mirrored_volume_on(config: TestConfig) -> (TestApp, String) {
    let app = TestApp::start_with(config).await;
    let id = app.mirror_beside_filler().await;
    assert_eq!(medium_of(&app.slices("filler").await, 0), "m3");
    let slices = app.slices("data").await;
    assert_eq!(medium_of(&slices, 0), "m1");
    assert_eq!(medium_of(&slices, 1), "m2");
    (app, id)
}

#[tokio::test]
async fn data_movement_moves_only_the_slices_on_media_lacking_room() {
    let (app, id) = mirrored_volume("0").await;
    let copy0 = app.slice_path("m1", &id, 0, 0);
    let copy1 = app.slice_path("m2", &id, 1, 0);
    write_patterns(&copy0, 15 * GIB, 1);
    write_patterns(&copy1, 15 * GIB, 1);
    let copy0_inode =
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&copy0).expect("copy 0"));

    // 18 GiB: m1 has room for the growth (5 free ≥ 3), m2 does not (1 free).
    let job = resize(&app, "data", 18, false).await;
    assert_eq!(job["state"], "Error");
    assert_eq!(details(&job).last().map(String::as_str), Some(NO_IN_PLACE));

    // With data movement but no medium with 18 GiB free (m3 has 10).
    let job = resize(&app, "data", 18, true).await;
    assert_eq!(job["state"], "Error", "{job}");
    assert_eq!(details(&job).last().map(String::as_str), Some(NO_TARGET));
    assert_eq!(app.get("/volumes/data").await.1["size"], 15);
    assert_eq!(
        (
            app.free("m1").await,
            app.free("m2").await,
            app.free("m3").await
        ),
        (5, 1, 10)
    );

    // Free m3, and the movement plan exists.
    app.delete_volume("filler").await;
    let job = resize(&app, "data", 18, true).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert!(details(&job).iter().any(|d| d == MOVEMENT_FOUND), "{job}");

    let slices = app.slices("data").await;
    assert_eq!(
        medium_of(&slices, 0),
        "m1",
        "the slice on a medium with room stays"
    );
    assert_eq!(
        medium_of(&slices, 1),
        "m3",
        "the slice on the full medium moves"
    );
    assert!(slices.iter().all(|s| s["size"] == 18), "{slices:?}");
    let moved = app.slice_path("m3", &id, 1, 0);
    assert_patterns(&moved, 15 * GIB, 1);
    assert_patterns(&copy0, 15 * GIB, 1);
    assert_eq!(
        std::fs::metadata(&moved).map(|m| m.len()).unwrap_or(0),
        18 * GIB
    );
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&copy0).expect("copy 0")),
        copy0_inode,
        "the staying slice's file was not rewritten"
    );
    assert!(!copy1.exists(), "the source of the move is removed");
    assert!(partial_files(&app).is_empty(), "{:?}", partial_files(&app));
    assert_eq!(
        (
            app.free("m1").await,
            app.free("m2").await,
            app.free("m3").await
        ),
        (2, 16, 12)
    );
    let (_, volume) = app.get("/volumes/data").await;
    assert_eq!(volume["size"], 18);
    assert_eq!(volume["state"], "Ready");
}

/// Polls until the job is Running with some progress, returning it.
async fn wait_for_progress(app: &TestApp, job_id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, job) = app.get(&format!("/jobs/{job_id}")).await;
        let progress = job["progress"].as_u64().unwrap_or(0);
        if job["state"] == "Running" && progress > 0 && progress < 90 {
            return job;
        }
        assert!(
            job["state"] != "Done" && job["state"] != "Error",
            "job ended too soon: {job}"
        );
        assert!(Instant::now() < deadline, "no progress: {job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn start_slow_movement(app: &TestApp, id: &str) -> String {
    app.delete_volume("filler").await;
    fill_mib(&app.slice_path("m1", id, 0, 0), 24, 7);
    fill_mib(&app.slice_path("m2", id, 1, 0), 24, 7);
    app.start_resize("data", 18, true).await
}

#[tokio::test]
async fn a_running_data_movement_blocks_another_resize_and_shows_progress() {
    // 24 MiB at 4 MiB/s: about 6 s of copying.
    let (app, id) = mirrored_volume("4 MiB").await;
    let job_id = start_slow_movement(&app, &id).await;
    let job = wait_for_progress(&app, &job_id).await;
    assert!(
        job["status"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Moving slice c1-k0 from m2 to m3"),
        "{job}"
    );

    let (_, volume) = app.get("/volumes/data").await;
    assert_eq!(volume["state"], "Resizing");
    assert!(volume["progress"].as_u64().unwrap_or(100) < 100, "{volume}");
    // The target's space is booked while the copy runs.
    assert_eq!(app.free("m3").await, 30 - 18);

    for movement in [true, false] {
        let (status, err) = app
            .patch(
                "/volumes/data",
                json!({"size": 20, "allowdatamovement": movement}),
            )
            .await;
        assert_eq!(status, StatusCode::CONFLICT, "{err}");
        assert_blocked(
            &err["message"],
            &format!(
                "another data movement is not allowed on volume 'data' while data movement job {job_id} is in progress"
            ),
        );
    }
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_filled(&app.slice_path("m3", &id, 1, 0), 24, 7);
}

#[tokio::test]
async fn a_data_movement_survives_sigkill_and_resumes_without_losing_a_byte() {
    let (mut app, id) = mirrored_volume("4 MiB").await;
    let job_id = start_slow_movement(&app, &id).await;
    wait_for_progress(&app, &job_id).await;

    app.kill();
    app.launch().expect("restarts after SIGKILL");
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert!(details(&job).iter().any(|d| d == MOVEMENT_FOUND), "{job}");

    let slices = app.slices("data").await;
    assert_eq!(
        slices.len(),
        2,
        "each slice placed exactly once: {slices:?}"
    );
    assert_eq!(medium_of(&slices, 0), "m1");
    assert_eq!(medium_of(&slices, 1), "m3");
    assert_filled(&app.slice_path("m3", &id, 1, 0), 24, 7);
    assert_filled(&app.slice_path("m1", &id, 0, 0), 24, 7);
    assert!(
        !app.slice_path("m2", &id, 1, 0).exists(),
        "no slice left on two media"
    );
    assert!(partial_files(&app).is_empty(), "{:?}", partial_files(&app));
    assert_eq!(
        (
            app.free("m1").await,
            app.free("m2").await,
            app.free("m3").await
        ),
        (2, 16, 12)
    );
    assert_eq!(app.get("/volumes/data").await.1["size"], 18);
}

#[tokio::test]
async fn a_clean_stop_pauses_a_movement_that_resumes_at_the_next_start() {
    let (mut app, id) = mirrored_volume("4 MiB").await;
    let job_id = start_slow_movement(&app, &id).await;
    wait_for_progress(&app, &job_id).await;
    app.stop();
    assert!(
        partial_files(&app).is_empty(),
        "a paused copy without a checkpoint leaves no partial file"
    );
    app.launch().expect("restarts");
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(resumes(&job), Vec::<u64>::new(), "{job}");
    assert_filled(&app.slice_path("m3", &id, 1, 0), 24, 7);
}

const MIB: u64 = 1 << 20;

const MOVED: &str = "slice c1-k0 from m2 to m3";

/// Where each run of the copy resumed, from the job's details.
fn resumes(job: &Value) -> Vec<u64> {
    let prefix = format!("Resuming the copy of {MOVED} from its checkpoint at byte ");
    details(job)
        .iter()
        .filter_map(|d| d.strip_prefix(&prefix))
        .filter_map(|rest| rest.split(' ').next()?.parse().ok())
        .collect()
}

/// (bytes copied, where it resumed) of the run that finished the copy.
fn last_run(job: &Value) -> (u64, u64) {
    let prefix = format!("Copied {MOVED}: ");
    let detail = details(job)
        .into_iter()
        .find_map(|d| d.strip_prefix(&prefix).map(String::from))
        .unwrap_or_else(|| panic!("no copy detail: {job}"));
    let copied = detail
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{detail}"));
    let resumed = detail
        .split_once("resumed from the checkpoint at byte ")
        .and_then(|(_, r)| r.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .unwrap_or(0);
    (copied, resumed)
}

/// Polls until the job is Running at `percent` or more.
async fn wait_for_percent(app: &TestApp, job_id: &str, percent: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, job) = app.get(&format!("/jobs/{job_id}")).await;
        if job["state"] == "Running" && job["progress"].as_u64().unwrap_or(0) >= percent {
            return job;
        }
        assert!(
            job["state"] == "Running" || job["state"] == "Pending",
            "job ended: {job}"
        );
        assert!(Instant::now() < deadline, "no progress: {job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_clean_stop_keeps_a_checkpointed_copy_which_resumes_where_it_stopped() {
    let (mut app, id) = mirrored_volume_with_checkpoints("4 MiB").await;
    let job_id = start_slow_movement(&app, &id).await;
    // Past 1 s and 1 MiB of copying: a checkpoint is recorded.
    wait_for_percent(&app, &job_id, 30).await;
    app.stop();
    assert_eq!(partial_files(&app).len(), 1, "kept for the resume");
    app.launch().expect("restarts");
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    let resumed = resumes(&job);
    assert_eq!(resumed.len(), 1, "{job}");
    assert!(resumed[0] >= MIB && resumed[0] < 24 * MIB, "{job}");
    assert_eq!(
        last_run(&job),
        (24 * MIB - resumed[0], resumed[0]),
        "only what was left is copied: {job}"
    );
    assert_filled(&app.slice_path("m3", &id, 1, 0), 24, 7);
    assert!(partial_files(&app).is_empty(), "{:?}", partial_files(&app));
}

#[tokio::test]
async fn a_movement_killed_at_several_points_resumes_each_time_from_its_last_checkpoint() {
    // 32 MiB at 4 MiB/s: about 8 s of copying, checkpointed every second.
    let (mut app, id) = mirrored_volume_with_checkpoints("4 MiB").await;
    app.delete_volume("filler").await;
    fill_mib(&app.slice_path("m1", &id, 0, 0), 32, 7);
    fill_mib(&app.slice_path("m2", &id, 1, 0), 32, 7);
    let job_id = app.start_resize("data", 18, true).await;

    for (kill, percent) in [20, 50, 75].into_iter().enumerate() {
        wait_for_percent(&app, &job_id, percent).await;
        app.kill();
        app.launch().expect("restarts after SIGKILL");
        // Each restart resumes from a checkpoint further on.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (_, job) = app.get(&format!("/jobs/{job_id}")).await;
            if resumes(&job).len() > kill {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no resume after kill {kill}: {job}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    let resumed = resumes(&job);
    assert_eq!(resumed.len(), 3, "{job}");
    assert!(resumed[0] >= MIB, "{job}");
    assert!(
        resumed.windows(2).all(|w| w[0] < w[1]),
        "each resume starts further on: {resumed:?}"
    );
    assert!(resumed[2] < 32 * MIB, "killed before the end: {resumed:?}");
    // The last run copied only what was left after its checkpoint.
    let last = resumed[2];
    assert_eq!(last_run(&job), (32 * MIB - last, last), "{job}");

    // Every byte is there, once, and nothing is left behind.
    let slices = app.slices("data").await;
    assert_eq!(slices.len(), 2, "{slices:?}");
    assert_eq!(medium_of(&slices, 1), "m3");
    assert_filled(&app.slice_path("m3", &id, 1, 0), 32, 7);
    assert_filled(&app.slice_path("m1", &id, 0, 0), 32, 7);
    assert!(!app.slice_path("m2", &id, 1, 0).exists());
    assert!(partial_files(&app).is_empty(), "{:?}", partial_files(&app));
    assert_eq!(app.get("/volumes/data").await.1["size"], 18);
}

#[tokio::test]
async fn a_failed_copy_leaves_the_volume_as_it_was_and_frees_the_reservation() {
    let (app, id) = mirrored_volume("0").await;
    let (_, body) = app.delete("/volumes/filler").await;
    app.wait_job_of(&body).await;
    write_patterns(&app.slice_path("m2", &id, 1, 0), 15 * GIB, 3);
    // Make the target unusable: its directory becomes a regular file.
    let m3 = app.medium_dir("m3");
    std::fs::remove_dir_all(&m3).expect("m3 removed");
    std::fs::write(&m3, b"not a directory").expect("m3 replaced");

    let job = resize(&app, "data", 18, true).await;
    assert_eq!(job["state"], "Error", "{job}");
    let last = details(&job).last().cloned().unwrap_or_default();
    assert!(
        last.starts_with("Moving slice c1-k0 from m2 to m3 failed"),
        "{last}"
    );
    assert_eq!(app.get("/volumes/data").await.1["size"], 15);
    let slices = app.slices("data").await;
    assert_eq!(medium_of(&slices, 1), "m2");
    assert!(slices.iter().all(|s| s["size"] == 15));
    assert_patterns(&app.slice_path("m2", &id, 1, 0), 15 * GIB, 3);
    assert_eq!(
        (
            app.free("m1").await,
            app.free("m2").await,
            app.free("m3").await
        ),
        (5, 1, 30)
    );

    // With the medium back, the same resize succeeds.
    std::fs::remove_file(&m3).expect("file removed");
    std::fs::create_dir(&m3).expect("m3 back");
    let job = resize(&app, "data", 18, true).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_patterns(&app.slice_path("m3", &id, 1, 0), 15 * GIB, 3);
}

#[tokio::test]
async fn two_movements_never_book_the_same_free_space() {
    // m1 holds copy 0 of both volumes; m2 / m3 their copy 1 with 2 GiB to spare.
    let mut app = TestApp::start_with(TestConfig {
        media: vec![
            medium("m1", "n1", "z1", 100),
            medium("m2", "n2", "z2", 12),
            medium("m3", "n3", "z3", 12),
        ],
        movement_rate: "2 MiB".into(),
        ..TestConfig::default()
    })
    .await;
    app.create_policy("mirror", 1, 1, 0).await;
    let (a, _) = app.create_volume("a", 10, "mirror").await;
    let (_, _) = app.create_volume("b", 10, "mirror").await;
    assert_eq!(medium_of(&app.slices("a").await, 1), "m2");
    assert_eq!(medium_of(&app.slices("b").await, 1), "m3");

    // An admin adds a 15 GiB disk: room for one 14 GiB slice, not two.
    app.config.media.push(medium("m4", "n4", "z4", 15));
    std::fs::write(
        app.config_path(),
        std::fs::read_to_string(app.config_path()).unwrap_or_default()
            + &format!(
                "\n[[media]]\nid = \"m4\"\nnode = \"n4\"\nzone = \"z4\"\ndirectory = \"{}\"\nsize_gib = 15\n",
                app.dir.path().join("media").join("m4").display()
            ),
    )
    .expect("config updated");
    app.restart().await;

    fill_mib(&app.slice_path("m2", &a, 1, 0), 8, 1);
    let first = app.start_resize("a", 14, true).await;
    wait_for_progress(&app, &first).await;
    let second = resize(&app, "b", 14, true).await;
    assert_eq!(second["state"], "Error", "{second}");
    assert_eq!(details(&second).last().map(String::as_str), Some(NO_TARGET));
    let first = app.wait_job(&first).await;
    assert_eq!(first["state"], "Done", "{first}");
    assert_eq!(medium_of(&app.slices("a").await, 1), "m4");
    assert_eq!(app.free("m4").await, 1);
    let (status, _) = app
        .request(Some(&app.token), Method::GET, "/volumes/b", None)
        .await;
    assert_eq!(status, StatusCode::OK);
}

/// `movement_rate` is per node: two moves into one node share it. Only a
/// lower bound on the time is asserted (a slow machine makes it longer,
/// never shorter): each move alone would take half of it.
#[tokio::test]
async fn two_moves_into_one_node_share_its_movement_rate() {
    let app = TestApp::start_with(TestConfig {
        media: vec![
            medium("m1", "n1", "z1", 100),
            medium("m2", "n2", "z2", 12),
            medium("m3", "n3", "z3", 12),
        ],
        movement_rate: "4 MiB".into(),
        ..TestConfig::default()
    })
    .await;
    app.create_policy("mirror", 1, 1, 0).await;
    let (a, _) = app.create_volume("a", 10, "mirror").await;
    let (b, _) = app.create_volume("b", 10, "mirror").await;
    let (on_a, on_b) = (
        medium_of(&app.slices("a").await, 1),
        medium_of(&app.slices("b").await, 1),
    );
    assert_eq!((on_a.as_str(), on_b.as_str()), ("m2", "m3"));
    // A new disk on node n4 with room for both copies 1.
    let m4 = app.dir.path().join("api-media").join("m4");
    let body = json!({
        "mediaid": "m4", "node": "n4", "zone": "z4",
        "media": m4.display().to_string(), "size": 40,
    });
    let (status, body) = app.post("/media", body).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    fill_mib(&app.slice_path(&on_a, &a, 1, 0), 8, 1);
    fill_mib(&app.slice_path(&on_b, &b, 1, 0), 8, 9);

    let started = std::time::Instant::now();
    let first = app.start_resize("a", 14, true).await;
    let second = app.start_resize("b", 14, true).await;
    for job in [&first, &second] {
        let done = app.wait_job(job).await;
        assert_eq!(done["state"], "Done", "{done}");
    }
    let took = started.elapsed();
    assert_eq!(medium_of(&app.slices("a").await, 1), "m4");
    assert_eq!(medium_of(&app.slices("b").await, 1), "m4");
    // 16 MiB through n4 at 4 MiB/s: 4 s, less a 100 ms burst; one move's
    // own rate alone would let both finish in 2 s.
    assert!(
        took >= Duration::from_millis(3800),
        "both moves took {took:?}: n4's movement rate was not shared"
    );
}

#[tokio::test]
async fn concurrent_resizes_never_shrink_a_volume() {
    let app = TestApp::start().await;
    app.create_policy("p", 0, 0, 0).await;
    let (id, _) = app.create_volume("v", 10, "p").await;
    let mut requests = Vec::new();
    for size in (11..=19).chain(11..=19).chain(11..=19) {
        let (client, url, token) = (
            app.client.clone(),
            format!("{}/volumes/v", app.base),
            app.token.clone(),
        );
        requests.push(tokio::spawn(async move {
            client
                .patch(url)
                .header("authorization", token)
                .json(&json!({"size": size}))
                .send()
                .await
                .map(|r| r.status())
        }));
    }
    for r in requests {
        let status = r.await.expect("task").expect("request");
        assert!(
            [
                StatusCode::OK,
                StatusCode::BAD_REQUEST,
                StatusCode::CONFLICT
            ]
            .contains(&status),
            "{status}"
        );
    }
    // Let the accepted jobs finish. Pending is asked first: a job only goes
    // Pending → Running → Done, so one that was Pending at the first question
    // is still seen by the second.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, pending) = app.get(&format!("/jobs?object={id}&state=Pending")).await;
        let (_, running) = app.get(&format!("/jobs?object={id}&state=Running")).await;
        if running.as_array().is_some_and(Vec::is_empty)
            && pending.as_array().is_some_and(Vec::is_empty)
        {
            break;
        }
        assert!(Instant::now() < deadline, "resizes did not end");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, done) = app.get("/jobs?type=volume_modify_extend&state=Done").await;
    let mut largest = 10;
    for job in done.as_array().cloned().unwrap_or_default() {
        let (from, to) = (
            job["args"]["fromsize"].as_u64(),
            job["args"]["size"].as_u64(),
        );
        let (Some(from), Some(to)) = (from, to) else {
            panic!("{job}")
        };
        assert!(to > from, "a resize shrank the volume: {job}");
        largest = largest.max(to);
    }
    let (_, volume) = app.get("/volumes/v").await;
    assert_eq!(
        volume["size"], largest,
        "the volume has the largest accepted size"
    );
    for s in app.slices("v").await {
        assert_eq!(s["size"], largest);
        let path = app.slice_path(s["media"].as_str().unwrap_or_default(), &id, 0, 0);
        assert_eq!(
            std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
            largest * GIB
        );
    }
}

#[tokio::test]
async fn a_volume_whose_delete_failed_is_not_resized_and_can_be_deleted_again() {
    let app = TestApp::start_with(TestConfig {
        media: vec![medium("a1", "n1", "z1", 10), medium("b1", "n2", "z2", 10)],
        ..TestConfig::default()
    })
    .await;
    app.create_policy("none", 0, 0, 0).await;
    let (id, _) = app.create_volume("v", 16, "none").await;
    let slices = app.slices("v").await;
    // Make removing the second slice fail: its file becomes a directory.
    let second = app.slice_path(slices[1]["media"].as_str().unwrap_or_default(), &id, 0, 1);
    std::fs::remove_file(&second).expect("slice removed");
    std::fs::create_dir_all(second.join("blocker")).expect("directory in its place");

    let job = app.delete_volume("v").await;
    assert_eq!(job["state"], "Error", "{job}");
    let (_, volume) = app.get("/volumes/v").await;
    assert_eq!(volume["state"], "Deleting");

    let (status, err) = app.patch("/volumes/v", json!({"size": 20})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{err}");
    assert_eq!(
        err["message"],
        "volume 'v' is Deleting and cannot be resized"
    );

    std::fs::remove_dir_all(&second).expect("blocker removed");
    let job = app.delete_volume("v").await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(app.get("/volumes/v").await.0, StatusCode::NOT_FOUND);
    assert_eq!((app.free("a1").await, app.free("b1").await), (10, 10));
}
