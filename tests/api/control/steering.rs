//! `PATCH /jobs/{job}` and the movement window: a live data movement (two
//! slices, a qemu-io client writing) paused, the service restarted while
//! paused, resumed from its checkpoint; its copy rate raised mid-copy; and
//! held by `movement_window` outside its ranges, going on by itself when
//! one opens.

use crate::harness::attach::{expected, qemu_io, read_back_commands, spread_writes};
use crate::harness::cancel::{
    assert_snapshot_blocked, copying, placement, two_moves_with, wait_until,
};
use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

async fn steer(app: &TestApp, job_id: &str, body: Value) -> Value {
    let (status, job) = app.patch(&format!("/jobs/{job_id}"), body).await;
    assert_eq!(status, StatusCode::OK, "{job}");
    job
}

fn details(job: &Value) -> Vec<String> {
    job["details"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d.as_str().map(str::to_string))
        .collect()
}

fn status_of(job: &Value) -> &str {
    job["status"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_paused_movement_survives_a_restart_and_resumes_from_its_checkpoint() {
    let (mut app, _id, uri) = two_moves_with("2 MiB", &[]).await;
    let job_id = app.start_resize("data", 21, true).await;
    wait_until(&app, &job_id, "a few MiB copied", |job| {
        copying(job) && job["progress"].as_u64().unwrap_or(0) >= 10
    })
    .await;
    let job = steer(&app, &job_id, json!({"paused": true})).await;
    assert_eq!(
        (&job["paused"], &job["state"]),
        (&json!(true), &json!("Running"))
    );
    wait_until(&app, &job_id, "paused", |job| {
        status_of(job).starts_with("Paused:")
    })
    .await;
    let (_, job) = app.get(&format!("/jobs/{job_id}")).await;
    assert_eq!(
        status_of(&job),
        format!(
            "Paused: copies stopped at their last checkpoint; resume with PATCH /jobs/{job_id} \
             {{\"paused\": false}}"
        )
    );
    // The nine operations stay blocked, and say why.
    assert_snapshot_blocked(&app, &job_id, "it is paused").await;
    // Writes go on while paused.
    let (commands, written) = spread_writes(20, 10);
    qemu_io(&uri, &commands).expect("writes acknowledged while paused");

    app.pin_ports();
    app.restart().await;
    // Still paused after the restart: the copy begins again at its
    // checkpoint and waits there, making no progress.
    wait_until(&app, &job_id, "paused again at the checkpoint", |job| {
        status_of(job).starts_with("Paused:")
            && details(job)
                .iter()
                .any(|d| d.starts_with("Resuming the copy of slice c"))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, before) = app.get(&format!("/jobs/{job_id}")).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (_, after) = app.get(&format!("/jobs/{job_id}")).await;
    assert_eq!(
        (
            &before["progress"],
            status_of(&after).starts_with("Paused:")
        ),
        (&after["progress"], true),
        "{after}"
    );

    steer(&app, &job_id, json!({"paused": false})).await;
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    let details = details(&job);
    for said in [
        "Paused on request",
        "Resumed: copies go on from their last checkpoint",
    ] {
        assert!(details.iter().any(|d| d == said), "{said}: {details:?}");
    }
    assert!(
        details
            .iter()
            .any(|d| d.starts_with("Resuming the copy of slice c")),
        "the copy went on from its checkpoint: {details:?}"
    );
    let (_, volume) = app.get("/volumes/data").await;
    assert_eq!(volume["size"], 21, "{volume}");
    assert_eq!(placement(&app).await, ("m3".into(), "m4".into()));
    qemu_io(&uri, &read_back_commands(&expected(&written)))
        .expect("every write made while paused reads back");
}

#[tokio::test]
async fn a_running_movement_takes_a_new_copy_rate_at_once() {
    // At 1 MiB/s the two copies of 24 MiB would take 48 s.
    let (app, _id, _uri) = two_moves_with("1 MiB", &[]).await;
    let job_id = app.start_resize("data", 21, true).await;
    wait_until(&app, &job_id, "copying", copying).await;
    // Nothing asked: the job as it is.
    let job = steer(&app, &job_id, json!({})).await;
    assert_eq!(
        (&job["paused"], &job["state"]),
        (&json!(false), &json!("Running"))
    );
    for (body, message) in [
        (
            json!({"movementrate": "fast"}),
            "movementrate must be a rate like \"64 MiB\" (per second), a number of bytes per \
             second, \"0\" (unthrottled) or null (the service's movement_rate)",
        ),
        (json!({"paused": "yes"}), "paused must be true or false"),
    ] {
        let (status, err) = app.patch(&format!("/jobs/{job_id}"), body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
        assert_eq!(err["message"], message);
    }
    let job = steer(&app, &job_id, json!({"movementrate": "64 MiB"})).await;
    assert_eq!(job["movementrate"], 64u64 << 20, "{job}");
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert!(
        details(&job)
            .iter()
            .any(|d| d == "Copy rate set to 64.0 MiB/s"),
        "{job}"
    );
    // A job that ended, or of another kind, is not steered.
    let (status, err) = app
        .patch(&format!("/jobs/{job_id}"), json!({"paused": true}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{err}");
    assert_eq!(
        err["message"],
        format!("job {job_id} has ended (Done): there is nothing to pause, resume or throttle")
    );
}

/// `HH:MM:SS` of a time of day `secs` from now (UTC).
fn clock_in(secs: i64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default();
    let t = (now + secs).rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60)
}

#[tokio::test]
async fn the_movement_window_holds_copies_outside_its_ranges_and_lets_them_go_on() {
    // Open for the next 8 s, closed for 8 s, then open again.
    let window = format!(
        "{}-{}, {}-{}",
        clock_in(-60),
        clock_in(8),
        clock_in(16),
        clock_in(3600)
    );
    let (app, _id, uri) =
        two_moves_with("4 MiB", &[format!("movement_window = \"{window}\"")]).await;
    let job_id = app.start_resize("data", 21, true).await;
    wait_until(&app, &job_id, "held by the window", |job| {
        status_of(job).starts_with("Paused: outside the movement window")
    })
    .await;
    let (_, job) = app.get(&format!("/jobs/{job_id}")).await;
    assert_eq!(
        status_of(&job),
        format!("Paused: outside the movement window ({window} UTC); copies go on when it opens")
    );
    assert_eq!(job["paused"], false, "not paused on request: {job}");
    let (commands, written) = spread_writes(10, 20);
    qemu_io(&uri, &commands).expect("writes acknowledged while held");
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    let details = details(&job);
    assert!(
        details
            .iter()
            .any(|d| d == &format!("Paused: outside the movement window ({window} UTC)")),
        "{details:?}"
    );
    assert!(
        details
            .iter()
            .any(|d| d == "Resumed: copies go on from their last checkpoint"),
        "{details:?}"
    );
    assert_eq!(placement(&app).await, ("m3".into(), "m4".into()));
    qemu_io(&uri, &read_back_commands(&expected(&written))).expect("every write reads back");
}
