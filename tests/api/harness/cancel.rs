//! Helpers of the `cancel` tests, shared with other test files.

use crate::harness::attach::{attach, qemu_io, uri};
use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Four media on four nodes; "data" (15 GiB, mirrored) sits on m1 and m2,
/// attached to host-1 with 24 MiB written. Growing it to 21 GiB moves both
/// copies (to m3 and m4), at `rate` per second.
pub(crate) async fn two_moves(rate: &str) -> (TestApp, String, String) {
    two_moves_with(rate, &[]).await
}

/// As [`two_moves`], with more settings.
pub(crate) async fn two_moves_with(rate: &str, settings: &[String]) -> (TestApp, String, String) {
    let mut config = crate::harness::drain::moving_config(
        vec![
            medium("m1", "n1", "z1", 20),
            medium("m2", "n2", "z2", 16),
            medium("m3", "n3", "z3", 30),
            medium("m4", "n4", "z4", 30),
        ],
        rate,
    );
    config.settings.extend(settings.iter().cloned());
    let app = TestApp::start_with(config).await;
    app.create_policy("none", 0, 0, 0).await;
    app.create_policy("mirror", 1, 1, 0).await;
    // The fillers take m3 and m4, so that "data" goes on m1 and m2.
    app.create_volume("filler-1", 20, "none").await;
    app.create_volume("filler-2", 20, "none").await;
    let (id, job) = app.create_volume("data", 15, "mirror").await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(placement(&app).await, ("m1".into(), "m2".into()));
    for filler in ["filler-1", "filler-2"] {
        app.delete_volume(filler).await;
    }
    let a = attach(&app, "data", "host-1", false).await;
    qemu_io(&uri(&a), &["write -P 0x5a 0 24M".into(), "flush".into()]).expect("prefill");
    (app, id, uri(&a))
}

/// Where copies 0 and 1 of "data" are.
pub(crate) async fn placement(app: &TestApp) -> (String, String) {
    let slices = app.slices("data").await;
    let on = |copy: u64| {
        slices
            .iter()
            .find(|s| s["copy"] == copy)
            .and_then(|s| s["media"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    (on(0), on(1))
}

pub(crate) async fn free_space(app: &TestApp) -> Vec<u64> {
    let mut free = Vec::new();
    for m in ["m1", "m2", "m3", "m4"] {
        free.push(app.free(m).await);
    }
    free
}

/// Waits until `done(job)` holds for the running job; fails if it ends.
pub(crate) async fn wait_until(
    app: &TestApp,
    job_id: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, job) = app.get(&format!("/jobs/{job_id}")).await;
        if done(&job) {
            return;
        }
        assert!(
            job["state"] != "Done" && job["state"] != "Error",
            "the movement ended before {what}: {job}"
        );
        assert!(Instant::now() < deadline, "never {what}: {job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) fn copying(job: &Value) -> bool {
    job["state"] == "Running" && job["progress"].as_u64().unwrap_or(0) > 0
}

/// A snapshot of "data" is refused while job `job_id` moves its data, the
/// refusal ending with `why`.
pub(crate) async fn assert_snapshot_blocked(app: &TestApp, job_id: &str, why: &str) {
    let (status, body) = app
        .post(
            "/volumes/data/snapshots",
            json!({"name": "s1", "consistency": "crash"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body["message"],
        format!(
            "snapshot create is not allowed on volume 'data' while data movement job {job_id} \
             is in progress; {why}"
        )
    );
}
