//! Helpers of the `snapshots` tests, shared with other test files.

use crate::harness::TestApp;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// Rolls `volume` back to snapshot `name` (its job Done); the job.
pub(crate) async fn rollback_done(app: &TestApp, volume: &str, name: &str) -> Value {
    let (status, body) = app
        .patch(
            &format!("/volumes/{volume}/snapshots/{name}/rollback"),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job = app.wait_job_of(&body).await;
    assert_eq!(job["state"], "Done", "{job}\n{}", app.log());
    job
}

/// Takes snapshot `name` of `volume`; returns the snapshot as listed.
pub(crate) async fn snapshot(app: &TestApp, volume: &str, name: &str) -> Value {
    let (status, body) = app
        .post(
            &format!("/volumes/{volume}/snapshots"),
            json!({"name": name, "consistency": "crash"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "snapshot: {body}");
    assert_eq!(body["Message"], "Snapshot creation started");
    let job = app.wait_job_of(&body).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(job["type"], "snapshot_create");
    let (status, s) = app
        .get(&format!("/volumes/{volume}/snapshots/{name}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{s}");
    assert_eq!(s["snapshotid"], body["ObjectID"]);
    s
}
