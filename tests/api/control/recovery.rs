//! Media failure and volume recovery over real NBD clients (`qemu-io`)
//! against the real `svs serve`.

use crate::harness::attach::{attach, qemu_io, topology, uri};
use crate::harness::TestApp;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Where copy `copy` of the volume's first column is.
async fn medium_of(app: &TestApp, volume: &str, copy: u64) -> String {
    app.slices(volume)
        .await
        .iter()
        .find(|s| s["copy"] == copy && s["column"] == 0)
        .and_then(|s| s["media"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Each slice's `health`, in copy order (one column).
async fn health(app: &TestApp, volume: &str) -> Vec<String> {
    let mut slices = app.slices(volume).await;
    slices.sort_by_key(|s| s["copy"].as_u64());
    slices
        .iter()
        .map(|s| s["health"].as_str().unwrap_or_default().to_string())
        .collect()
}

async fn fail(app: &TestApp, medium: &str) {
    let (status, body) = app
        .patch(&format!("/media/{medium}"), json!({"state": "Failed"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], "Failed");
    assert_eq!(body["freesize"], 0);
}

async fn state(app: &TestApp, volume: &str) -> Value {
    let (status, v) = app.get(&format!("/volumes/{volume}")).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    v["state"].clone()
}

async fn recover(app: &TestApp, volume: &str) -> Value {
    let (status, body) = app
        .post(&format!("/volumes/{volume}/recover"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["Message"], "Volume recovery started");
    app.wait_job_of(&body).await
}

fn pattern_writes() -> Vec<String> {
    vec![
        "write -P 0x3c 0 2M".into(),
        "write -P 0x4d 3000M 1M".into(),
        "flush".into(),
    ]
}

fn pattern_reads() -> Vec<String> {
    vec!["read -P 0x3c 0 2M".into(), "read -P 0x4d 3000M 1M".into()]
}

#[tokio::test]
async fn a_mirrored_volume_survives_each_of_its_media_failing_in_turn() {
    let app = TestApp::start_with(topology("0")).await;
    app.create_policy("mirror", 1, 1, 0).await;
    app.create_volume("v", 4, "mirror").await;
    let a = attach(&app, "v", "host-1", false).await;
    qemu_io(&uri(&a), &pattern_writes()).expect("pattern written");

    let first = medium_of(&app, "v", 0).await;
    fail(&app, &first).await;
    assert_eq!(state(&app, "v").await, "Degraded");
    assert_eq!(health(&app, "v").await, ["Lost", "Healthy"]);
    qemu_io(&uri(&a), &pattern_reads()).expect("read from the remaining copy");
    qemu_io(&uri(&a), &["write -P 0x5e 1G 1M".into(), "flush".into()])
        .expect("writes go on to the healthy copy");

    let job = recover(&app, "v").await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(job["type"], "volume_recovery");
    assert_eq!(state(&app, "v").await, "Ready");
    let rebuilt = medium_of(&app, "v", 0).await;
    assert_ne!(rebuilt, first, "copy 0 lives on a healthy medium now");
    assert_eq!(health(&app, "v").await, ["Healthy", "Healthy"]);
    let (_, volume) = app.get("/volumes/v").await;
    assert_eq!(
        volume["volumerecoveryjob"],
        Value::Null,
        "none runs: {volume}"
    );

    let second = medium_of(&app, "v", 1).await;
    fail(&app, &second).await;
    assert_eq!(state(&app, "v").await, "Degraded");
    let mut reads = pattern_reads();
    reads.push("read -P 0x5e 1G 1M".into());
    qemu_io(&uri(&a), &reads).expect("everything reads from the rebuilt copy");

    // Nothing can take the lost copy now: every healthy medium holds the
    // other one (or has failed).
    let job = recover(&app, "v").await;
    assert_eq!(job["state"], "Error", "{job}");
    assert_eq!(
        job["details"].as_array().and_then(|d| d.last()).cloned(),
        Some(json!(format!(
            "Could not recover volume 'v': no medium can take copy 1 of column 0 (4 GiB): every \
             healthy medium is full, already holds a slice of the volume, or would break the \
             policy's resiliency"
        )))
    );
    assert_eq!(state(&app, "v").await, "Degraded");
}

#[tokio::test]
async fn a_volume_that_lost_its_only_copy_answers_eio_never_zeros() {
    let app = TestApp::start_with(topology("0")).await;
    app.create_policy("none", 0, 0, 0).await;
    app.create_volume("single", 1, "none").await;
    let a = attach(&app, "single", "host-1", false).await;
    qemu_io(&uri(&a), &["write -P 0x61 0 64k".into(), "flush".into()]).expect("write");
    let medium = medium_of(&app, "single", 0).await;

    // Non-admins may not fail a medium; bad states are refused.
    let token = app.user_in_tenant("other", "user@example.com").await;
    let (status, _) = app
        .request(
            Some(&token),
            reqwest::Method::PATCH,
            &format!("/media/{medium}"),
            Some(json!({"state": "Failed"})),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, body) = app
        .patch(&format!("/media/{medium}"), json!({"state": "Online"}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["message"],
        "state must be \"Failed\", \"Draining\" or \"Ready\" (a failed medium does not come back)"
    );
    assert_eq!(state(&app, "single").await, "Ready");

    fail(&app, &medium).await;
    assert_eq!(state(&app, "single").await, "Failed");
    let err = qemu_io(&uri(&a), &["read 0 64k".into()]).unwrap_err();
    assert!(err.contains("Input/output error"), "EIO, not zeros: {err}");
    let job = recover(&app, "single").await;
    assert_eq!(job["state"], "Error", "{job}");
    assert_eq!(
        job["details"].as_array().and_then(|d| d.last()).cloned(),
        Some(json!(
            "Could not recover volume 'single': column 0 has no healthy copy left: its data is \
             lost and cannot be rebuilt"
        ))
    );
    // A resize is refused until it is recovered.
    let (status, body) = app
        .patch(
            "/volumes/single",
            json!({"size": 2, "allowdatamovement": false}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
}

#[tokio::test]
async fn a_medium_whose_directory_disappears_is_failed_by_the_service() {
    let app = TestApp::start_with(topology("0")).await;
    app.create_policy("mirror", 1, 1, 0).await;
    app.create_volume("v", 4, "mirror").await;
    let a = attach(&app, "v", "host-1", false).await;
    qemu_io(&uri(&a), &pattern_writes()).expect("pattern written");
    let first = medium_of(&app, "v", 0).await;
    std::fs::remove_dir_all(app.medium_dir(&first)).expect("medium directory removed");
    // Writes meet the missing medium; the health check records it.
    qemu_io(&uri(&a), &["write -P 0x3c 8M 1M".into(), "flush".into()])
        .expect("writes go on to the other copy");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, m) = app.get(&format!("/media/{first}")).await;
        if m["state"] == "Failed" {
            break;
        }
        assert!(Instant::now() < deadline, "medium never failed: {m}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(state(&app, "v").await, "Degraded");
    qemu_io(&uri(&a), &pattern_reads()).expect("read from the remaining copy");
}

#[tokio::test]
async fn a_recovery_resumes_after_sigkill_and_keeps_writes_made_meanwhile() {
    // 24 MiB to rebuild at 4 MiB/s: about 6 s of copying.
    let mut app = TestApp::start_with(topology("4 MiB")).await;
    app.create_policy("mirror", 1, 1, 0).await;
    app.create_volume("v", 4, "mirror").await;
    let a = attach(&app, "v", "host-1", false).await;
    qemu_io(&uri(&a), &["write -P 0x2a 0 24M".into(), "flush".into()]).expect("prefill");
    fail(&app, &medium_of(&app, "v", 0).await).await;
    let (status, body) = app.post("/volumes/v/recover", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job_id = body["JobID"].as_str().unwrap_or_default().to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, job) = app.get(&format!("/jobs/{job_id}")).await;
        if job["progress"].as_u64().unwrap_or(0) > 0 {
            let (_, v) = app.get("/volumes/v").await;
            assert_eq!(v["volumerecoveryjob"], job_id.as_str(), "{v}");
            break;
        }
        assert!(
            job["state"] == "Running" || job["state"] == "Pending",
            "{job}"
        );
        assert!(Instant::now() < deadline, "no progress: {job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    qemu_io(&uri(&a), &["write -P 0x2b 20M 1M".into(), "flush".into()])
        .expect("a write during the rebuild");
    app.kill();
    app.launch().expect("restarts after SIGKILL");
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(state(&app, "v").await, "Ready");
    let (_, a) = app.get("/volumes/v/snapshots/top/attachments/host-1").await;
    // The other copy fails now: only the rebuilt one serves.
    fail(&app, &medium_of(&app, "v", 1).await).await;
    qemu_io(
        &uri(&a),
        &[
            "read -P 0x2a 0 20M".into(),
            "read -P 0x2b 20M 1M".into(),
            "read -P 0x2a 21M 3M".into(),
        ],
    )
    .expect("the rebuilt copy holds everything acknowledged");
}
