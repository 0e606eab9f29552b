//! `DELETE /jobs/{job}`: a live data movement cancelled at several points
//! under a qemu-io writer ends with every acknowledged write kept, every
//! slice on its original medium, the volume at its old size, no copy left
//! on the targets and no space booked.

use crate::harness::attach::{attach, expected, qemu_io, read_back_commands, spread_writes, uri};
use crate::harness::cancel::*;
use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::Duration;

/// Cancels the job over the API.
async fn cancel(app: &TestApp, job_id: &str) {
    let (status, body) = app.delete(&format!("/jobs/{job_id}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["Message"],
        format!("Job {job_id} is being cancelled: follow it with GET /jobs/{job_id}")
    );
    assert_eq!(body["ObjectID"], job_id);
}

/// Everything a cancelled movement must leave: the job ended cancelled,
/// the volume Ready at 15 GiB on m1 and m2, free space as before, nothing
/// of the volume on m3 or m4, and every acknowledged write on both copies.
async fn assert_undone(
    app: &TestApp,
    id: &str,
    uri: &str,
    job_id: &str,
    free_before: &[u64],
    written: &[(u64, u64)],
) -> Value {
    let job = app.wait_job(job_id).await;
    assert_eq!(
        (&job["state"], &job["status"], &job["cancelrequested"]),
        (&json!("Error"), &json!("Cancelled"), &json!(true)),
        "{job}"
    );
    let last = job["details"]
        .as_array()
        .and_then(|d| d.last())
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    assert!(
        last.starts_with(
            "Cancelled: volume 'data' stays at 15 GiB, every slice on its original medium"
        ),
        "{job}"
    );
    let (_, volume) = app.get("/volumes/data").await;
    assert_eq!(
        (&volume["size"], &volume["state"]),
        (&json!(15), &json!("Ready")),
        "{volume}"
    );
    assert_eq!(placement(app).await, ("m1".into(), "m2".into()));
    assert_eq!(free_space(app).await, free_before, "no space stays booked");
    for m in ["m3", "m4"] {
        let dir = app.medium_dir(m).join(id);
        let left: Vec<_> = std::fs::read_dir(&dir)
            .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "copies left on {m}: {left:?}");
    }
    let expected = expected(written);
    qemu_io(uri, &read_back_commands(&expected)).expect("every acknowledged write reads back");
    for (copy, medium) in [(0, "m1"), (1, "m2")] {
        let path = app.slice_path(medium, id, copy, 0);
        for (off, p) in &expected {
            assert_eq!(
                read_at(&path, *off, 4096),
                vec![*p as u8; 4096],
                "copy {copy} on {medium} at {off}"
            );
        }
    }
    // The nine operations are open again: a resize, here to the same 21 GiB.
    let again = app.start_resize("data", 21, true).await;
    let (_, job) = app.get(&format!("/jobs/{again}")).await;
    assert_ne!(job["state"], "Error", "{job}");
    job
}

/// Runs a writer over the whole cancel, and checks the result.
async fn cancel_at(rate: &str, point: &str, reached: impl Fn(&Value) -> bool) -> Value {
    let (app, id, uri) = two_moves(rate).await;
    let free_before = free_space(&app).await;
    let (commands, written) = spread_writes(50, 100);
    let writer = std::thread::spawn({
        let uri = uri.clone();
        move || qemu_io(&uri, &commands)
    });
    let job_id = app.start_resize("data", 21, true).await;
    wait_until(&app, &job_id, point, reached).await;
    cancel(&app, &job_id).await;
    let job = app.wait_job(&job_id).await;
    writer
        .join()
        .expect("writer thread")
        .expect("every write acknowledged");
    assert_undone(&app, &id, &uri, &job_id, &free_before, &written).await;
    job
}

#[tokio::test]
async fn a_movement_cancelled_before_its_first_copy_leaves_the_volume_as_it_was() {
    let job = cancel_at("2 MiB", "started", |_| true).await;
    let details = job["details"].to_string();
    assert!(!details.contains("moved back"), "{details}");
}

#[tokio::test]
async fn a_movement_cancelled_mid_copy_removes_its_partial_copy() {
    let job = cancel_at("2 MiB", "copying", copying).await;
    let details = job["details"].to_string();
    assert!(
        details.contains("2 unfinished move(s) stopped and their copies removed"),
        "{details}"
    );
}

#[tokio::test]
async fn a_movement_cancelled_while_catching_up_with_writes_keeps_every_write() {
    cancel_at("2 MiB", "catching up", |job| {
        job["status"]
            .as_str()
            .is_some_and(|s| s.contains("catching up"))
    })
    .await;
}

#[tokio::test]
async fn a_movement_cancelled_after_a_slice_switched_moves_it_back() {
    let job = cancel_at("4 MiB", "one slice switched", |job| {
        copying(job) && job["details"].to_string().contains("Moved slice")
    })
    .await;
    let details = job["details"].to_string();
    assert!(
        details.contains(
            "1 unfinished move(s) stopped and their copies removed, 1 moved slice(s) moved back"
        ),
        "{details}"
    );
    assert!(details.contains("Moved slice c"), "{details}");
    assert!(details.contains(" back from m"), "{details}");
}

#[tokio::test]
async fn delete_of_an_ended_job_removes_its_record_and_a_cancel_is_refused_where_it_cannot_apply() {
    let app = TestApp::start_with(movement_topology("0")).await;
    app.create_policy("none", 0, 0, 0).await;
    let (_, job) = app.create_volume("v", 2, "none").await;
    let job_id = job["id"].to_string();
    let (status, body) = app.delete(&format!("/jobs/{job_id}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["Message"], format!("Job {job_id} deleted"));
    let (status, _) = app.get(&format!("/jobs/{job_id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = app.delete(&format!("/jobs/{job_id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["message"], format!("job '{job_id}' not found"));
    let (status, body) = app.delete("/jobs/abc").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    // The volume is untouched by its job's record going.
    let (status, volume) = app.get("/volumes/v").await;
    assert_eq!(
        (status, &volume["state"]),
        (StatusCode::OK, &json!("Ready"))
    );
}

#[tokio::test]
async fn a_cancel_interrupted_by_a_restart_goes_on_from_where_it_was() {
    let (mut app, id, uri) = two_moves("4 MiB").await;
    let free_before = free_space(&app).await;
    let job_id = app.start_resize("data", 21, true).await;
    wait_until(&app, &job_id, "one slice switched", |job| {
        copying(job) && job["details"].to_string().contains("Moved slice")
    })
    .await;
    // Written while the first slice lives on its target.
    let (commands, written) = spread_writes(10, 20);
    qemu_io(&uri, &commands).expect("every write acknowledged");
    cancel(&app, &job_id).await;
    wait_until(&app, &job_id, "moving the slice back", |job| {
        job["status"]
            .as_str()
            .is_some_and(|s| s.contains(" back from m") && s.contains(" of "))
    })
    .await;
    // Still blocked meanwhile, and the refusal says why.
    assert_snapshot_blocked(&app, &job_id, "it is being cancelled").await;
    // SIGKILL mid move back (a few checkpoints in: one every MiB, at 4
    // MiB/s): the undo is recorded, the restart resumes it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    app.pin_ports();
    app.restart().await;
    let job = app.wait_job(&job_id).await;
    let details = job["details"].to_string();
    assert!(
        details.contains("Resuming the copy of slice c"),
        "the move back resumed from its checkpoint: {details}"
    );
    assert_undone(&app, &id, &uri, &job_id, &free_before, &written).await;
}

#[tokio::test]
async fn a_cancelled_recovery_removes_its_unfinished_rebuild_and_the_copy_stays_lost() {
    // 24 MiB to rebuild at 2 MiB/s: about 12 s of copying.
    let app = TestApp::start_with(crate::harness::attach::topology("2 MiB")).await;
    app.create_policy("mirror", 1, 1, 0).await;
    let (id, _) = app.create_volume("v", 4, "mirror").await;
    let a = attach(&app, "v", "host-1", false).await;
    qemu_io(&uri(&a), &["write -P 0x2a 0 24M".into(), "flush".into()]).expect("prefill");
    let slices = app.slices("v").await;
    let lost = slices
        .iter()
        .find(|s| s["copy"] == 0)
        .and_then(|s| s["media"].as_str())
        .unwrap_or_default()
        .to_string();
    let (status, body) = app
        .patch(&format!("/media/{lost}"), json!({"state": "Failed"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = app.post("/volumes/v/recover", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job_id = body["JobID"].as_str().unwrap_or_default().to_string();
    wait_until(&app, &job_id, "rebuilding", copying).await;
    let target = app
        .slices("v")
        .await
        .iter()
        .find(|s| s["copy"] == 0)
        .and_then(|s| s["media"].as_str())
        .unwrap_or_default()
        .to_string();
    let (_, job) = app.get(&format!("/jobs/{job_id}")).await;
    let rebuilding_on = job["status"].to_string();
    cancel(&app, &job_id).await;
    let job = app.wait_job(&job_id).await;
    assert_eq!(
        (&job["state"], &job["status"]),
        (&json!("Error"), &json!("Cancelled")),
        "{job}"
    );
    assert_eq!(
        job["details"].as_array().and_then(|d| d.last()),
        Some(&json!(
            "Cancelled: volume 'v' keeps the 0 copy(ies) already rebuilt; 1 stay lost \
             (recover the volume again to rebuild them)"
        )),
        "{job}"
    );
    // The copy is still lost where it was; no partial rebuild anywhere.
    let health: Vec<Value> = app
        .slices("v")
        .await
        .iter()
        .map(|s| s["health"].clone())
        .collect();
    assert!(
        health.contains(&json!("Lost")),
        "{health:?} ({rebuilding_on})"
    );
    assert_eq!(target, lost, "the lost copy's placement is unchanged");
    for m in ["m1", "m2", "m3"] {
        if m == lost {
            continue;
        }
        let files: Vec<_> = std::fs::read_dir(app.medium_dir(m).join(&id))
            .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(files.len() <= 1, "only the healthy copy on {m}: {files:?}");
    }
    // The volume still serves, and a new recovery rebuilds the copy.
    qemu_io(&uri(&a), &["read -P 0x2a 0 24M".into()]).expect("the healthy copy serves");
    let (status, body) = app.post("/volumes/v/recover", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job = app.wait_job_of(&body).await;
    assert_eq!(job["state"], "Done", "{job}");
}

#[tokio::test]
async fn a_cancelled_creation_leaves_no_volume() {
    let app = TestApp::start_with(movement_topology("0")).await;
    app.create_policy("none", 0, 0, 0).await;
    let (status, body) = app
        .post(
            "/volumes",
            json!({"name": "gone", "type": "block", "size": 2, "policy": "none"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job_id = body["JobID"].as_str().unwrap_or_default().to_string();
    let (status, answer) = app.delete(&format!("/jobs/{job_id}")).await;
    let job = app.wait_job(&job_id).await;
    if status == StatusCode::OK {
        // Cancelled in time: no volume.
        assert_eq!(job["status"], "Cancelled", "{job}");
        assert_eq!(
            job["details"].as_array().and_then(|d| d.last()),
            Some(&json!("Cancelled: volume 'gone' was not created")),
            "{job}"
        );
        let (status, _) = app.get("/volumes/gone").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    } else {
        // The creation was quicker: it ended (or committed) first.
        assert_eq!(status, StatusCode::CONFLICT, "{answer}");
        assert_eq!(job["state"], "Done", "{job}");
    }
    for m in ["m1", "m2", "m3"] {
        let dir = app.medium_dir(m);
        let volumes: Vec<_> = std::fs::read_dir(&dir)
            .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
            .unwrap_or_default();
        if status == StatusCode::OK {
            assert!(
                volumes.iter().all(|v| std::fs::read_dir(dir.join(v))
                    .map(|mut d| d.next().is_none())
                    .unwrap_or(true)),
                "{m}: {volumes:?}"
            );
        }
    }
}
