//! The seed's guard, shown for all nine operations: while a data movement
//! runs on a volume, each is refused with 409 and a message naming the
//! running job; once the movement ends, the same call succeeds.

use crate::harness::attach::{attached_mirror, qemu_io, qemu_io_ro};
use crate::harness::{assert_blocked, TestApp};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// One of the nine calls: its name in the seed, method, path and body.
struct Call {
    operation: &'static str,
    method: Method,
    path: &'static str,
    body: Option<Value>,
}

fn call(operation: &'static str, method: Method, path: &'static str, body: Option<Value>) -> Call {
    Call {
        operation,
        method,
        path,
        body,
    }
}

/// The nine, in an order in which each succeeds after the movement: host-1
/// turns read-only before the rollback; host-2's read-only attachment of
/// the live volume (made before the movement) goes last.
fn nine() -> Vec<Call> {
    vec![
        call(
            "attachment create",
            Method::POST,
            "/volumes/data/snapshots/s1/attachments",
            Some(json!({"node": "host-2"})),
        ),
        call(
            "attachment modify",
            Method::PATCH,
            "/volumes/data/snapshots/top/attachments/host-1",
            Some(json!({"readonly": true})),
        ),
        call(
            "snapshot create",
            Method::POST,
            "/volumes/data/snapshots",
            Some(json!({"name": "s3", "consistency": "crash"})),
        ),
        call(
            "snapshot modify",
            Method::PATCH,
            "/volumes/data/snapshots/s1",
            Some(json!({"consistencygroupname": "nightly"})),
        ),
        call(
            "snapshot rollback",
            Method::PATCH,
            "/volumes/data/snapshots/s1/rollback",
            Some(json!({})),
        ),
        call(
            "snapshot delete",
            Method::DELETE,
            "/volumes/data/snapshots/s2",
            None,
        ),
        call(
            "volume recovery",
            Method::POST,
            "/volumes/data/recover",
            Some(json!({})),
        ),
        call(
            "attachment delete",
            Method::DELETE,
            "/volumes/data/snapshots/top/attachments/host-2",
            None,
        ),
        call(
            "another data movement",
            Method::PATCH,
            "/volumes/data",
            Some(json!({"size": 19, "allowdatamovement": true})),
        ),
    ]
}

async fn send(app: &TestApp, c: &Call) -> (StatusCode, Value) {
    app.request(Some(&app.token), c.method.clone(), c.path, c.body.clone())
        .await
}

/// Waits until the movement job is copying (progress between 1 and 89).
async fn copying(app: &TestApp, job_id: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, job) = app.get(&format!("/jobs/{job_id}")).await;
        let progress = job["progress"].as_u64().unwrap_or(0);
        if job["state"] == "Running" && progress > 0 && progress < 90 {
            return;
        }
        assert!(
            job["state"] != "Done" && job["state"] != "Error",
            "the movement ended too soon: {job}"
        );
        assert!(Instant::now() < deadline, "no progress: {job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn each_of_the_nine_operations_waits_for_a_running_data_movement() {
    // 24 MiB at 2 MiB/s: about 12 s of copying, for nine refusals.
    let (app, _id, uri) = attached_mirror("2 MiB").await;
    for name in ["s1", "s2"] {
        let job = app
            .post_and_wait(
                "/volumes/data/snapshots",
                json!({"name": name, "consistency": "crash"}),
            )
            .await;
        assert_eq!(job["state"], "Done", "{job}");
        qemu_io(&uri, &["write -P 0x77 0 1M".into(), "flush".into()]).expect("write after it");
    }
    let job = app
        .post_and_wait(
            "/volumes/data/snapshots/top/attachments",
            json!({"node": "host-2", "readonly": true}),
        )
        .await;
    assert_eq!(job["state"], "Done", "{job}");

    let movement = app.start_resize("data", 18, true).await;
    copying(&app, &movement).await;
    for c in nine() {
        let (status, body) = send(&app, &c).await;
        assert_eq!(status, StatusCode::CONFLICT, "{}: {body}", c.operation);
        assert_blocked(
            &body["message"],
            &format!(
                "{} is not allowed on volume 'data' while data movement job {movement} is in progress",
                c.operation
            ),
        );
        // The movement has made progress: the refusal says when it ends.
        assert!(
            body["message"]
                .as_str()
                .is_some_and(|m| m.contains("is in progress; about ")),
            "{}: {body}",
            c.operation
        );
    }
    let (_, still) = app.get(&format!("/jobs/{movement}")).await;
    assert_eq!(
        still["state"], "Running",
        "all nine were refused during the movement"
    );
    let job = app.wait_job(&movement).await;
    assert_eq!(job["state"], "Done", "{job}");

    for c in nine() {
        let (status, body) = send(&app, &c).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "{} after the movement: {body}",
            c.operation
        );
        if let Some(job_id) = body["JobID"].as_str() {
            let job = app.wait_job(job_id).await;
            assert_eq!(job["state"], "Done", "{}: {job}", c.operation);
        }
    }
    // The rollback returned the volume to s1 (before the 0x77 write); the
    // snapshot went along with the slice that moved.
    qemu_io_ro(&uri, &["read -P 0x5a 0 1M".into()]).expect("content of s1 after the rollback");
}
