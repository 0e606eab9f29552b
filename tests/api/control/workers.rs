//! `GET /workers`: the job runner and the reconcilers, as people see them.

use crate::harness::workers::*;
use crate::harness::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const JOB_RUNNER: &str = "jobs";
/// Each reconciler and its period: cheap checks run more often.
const RECONCILERS: [(&str, u64); 7] = [
    ("reconcile-media-health", 5),
    ("reconcile-exports", 60),
    ("reconcile-orphaned-copies", 60),
    ("reconcile-snapshot-space", 10),
    ("reconcile-refresh-tokens", 60),
    // A fifth of storage_node_timeout (10 s).
    ("reconcile-storage-nodes", 2),
    // With the default `fronts = "nodes"`: as often as the nodes'.
    ("reconcile-fronts", 2),
];

async fn workers(app: &TestApp) -> Vec<Value> {
    let (status, body) = app.get("/workers").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body.as_array().cloned().expect("a JSON array")
}

/// The job runner once `done` holds of it, polled for up to `timeout`;
/// else fails with `never`.
async fn runner_once(
    app: &TestApp,
    timeout: Duration,
    never: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + timeout;
    loop {
        let list = workers(app).await;
        let runner = worker(&list, JOB_RUNNER).clone();
        if done(&runner) {
            return runner;
        }
        assert!(Instant::now() < deadline, "{never}: {runner}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The job runner once it has no job running (it counts a job out just
/// after the job's end is recorded).
async fn idle_runner(app: &TestApp) -> Value {
    runner_once(app, Duration::from_secs(10), "the runner stays busy", |r| {
        r["jobs_running"] == 0
    })
    .await
}

fn worker<'a>(workers: &'a [Value], name: &str) -> &'a Value {
    workers
        .iter()
        .find(|w| w["name"] == name)
        .unwrap_or_else(|| panic!("no worker {name}: {workers:?}"))
}

#[tokio::test]
async fn workers_need_a_signed_in_caller() {
    let app = TestApp::start().await;
    let (status, body) = app.request(None, Method::GET, "/workers", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body["message"].is_string(), "{body}");
}

/// The counts are service-wide (every tenant's jobs): a user who is not an
/// administrator, of another tenant or of the administrator's own, gets 403.
#[tokio::test]
async fn workers_are_for_administrators_only() {
    let app = TestApp::start().await;
    let eve = app.user_in_tenant("acme", "eve@acme.example").await;
    let bob = app.user_in_tenant("default", "bob@example.com").await;
    for token in [&eve, &bob] {
        let (status, body) = app
            .request(Some(token), Method::GET, "/workers", None)
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert_eq!(
            body,
            json!({"message": "this operation requires an administrator"})
        );
    }
    // Another administrator, of another tenant, sees them.
    app.add_user_as("ops", "root@ops.example", "ops-password", true);
    let ops = app.sign_in("root@ops.example", "ops-password").await;
    let ops = ops["IdToken"].as_str().expect("IdToken");
    let (status, body) = app.request(Some(ops), Method::GET, "/workers", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.as_array().is_some_and(|w| !w.is_empty()), "{body}");
}

#[tokio::test]
async fn workers_list_the_job_runner_and_each_reconciler_with_their_state() {
    let app = TestApp::start().await;
    let list = workers(&app).await;
    let names: Vec<&str> = list.iter().filter_map(|w| w["name"].as_str()).collect();
    let expected: Vec<&str> = [JOB_RUNNER, "leader"]
        .into_iter()
        .chain(RECONCILERS.iter().map(|(name, _)| *name))
        .collect();
    assert_eq!(names, expected);
    for w in &list {
        for field in [
            "jobs_running",
            "jobs_queued",
            "jobs_retrying",
            "errors",
            "consecutive_errors",
        ] {
            assert!(w[field].is_u64(), "{field} of {w}");
        }
        assert!(
            ["Busy", "Throttled", "Idle", "Done"].contains(&w["state"].as_str().unwrap_or("")),
            "{w}"
        );
        assert!(w.get("last_error").is_some(), "{w}");
    }
    let runner = worker(&list, JOB_RUNNER);
    assert_eq!(runner["state"], "Idle", "{runner}");
    assert_eq!(runner["max_concurrent_jobs"], 16);
    assert_eq!(runner["errors"], 0);
    assert!(runner["last_error"].is_null());
    for (name, period) in RECONCILERS {
        let r = worker(&list, name);
        assert_eq!(r["period_secs"], period, "{r}");
        // Their first pass ran at start, before jobs resumed.
        assert!(r["last_success_time"].is_string(), "{r}");
        assert_eq!(r["errors"], 0, "{r}");
    }
}

#[tokio::test]
async fn a_running_job_shows_up_on_the_job_runner_and_a_failed_one_counts_as_an_error() {
    let app = TestApp::start_with(movement_topology("4 MiB")).await;
    let job_id = start_slow_movement(&app).await;

    let runner = runner_once(&app, Duration::from_secs(30), "the job never showed", |r| {
        r["jobs_running"] == 1
    })
    .await;
    assert_eq!(runner["state"], "Busy", "{runner}");
    assert_eq!(runner["jobs_queued"], 0, "{runner}");

    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    let runner = idle_runner(&app).await;
    assert_eq!(runner["state"], "Idle", "{runner}");
    assert_eq!(runner["errors"], 0, "{runner}");

    // m1 has no room for 21 GiB: the job fails, and counts, without details.
    let failed = app.start_resize("data", 21, false).await;
    assert_eq!(app.wait_job(&failed).await["state"], "Error");
    let runner = idle_runner(&app).await;
    assert_eq!(
        (&runner["errors"], &runner["consecutive_errors"]),
        (&json!(1), &json!(1)),
        "{runner}"
    );
    assert_eq!(
        runner["last_error"],
        "a volume_modify_extend job ended in Error"
    );
    assert!(runner["last_error_time"].is_string(), "{runner}");
}

#[tokio::test]
async fn with_one_slot_a_job_waits_for_the_running_one_and_the_runner_shows_it_throttled() {
    let mut app = TestApp::start_with(movement_topology("4 MiB")).await;
    app.restart_with_setting("max_concurrent_jobs = 1");
    let movement = start_slow_movement(&app).await;
    let (status, body) = app
        .post(
            "/volumes",
            json!({"name": "small", "type": "block", "size": 1, "policy": "none"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let create = body["JobID"].as_str().unwrap_or_default().to_string();

    let runner = runner_once(&app, Duration::from_secs(10), "the job never queued", |r| {
        r["jobs_queued"] == 1
    })
    .await;
    assert_eq!(runner["max_concurrent_jobs"], 1, "{runner}");
    assert_eq!(runner["jobs_running"], 1, "{runner}");
    assert_eq!(runner["state"], "Throttled", "{runner}");
    let (_, job) = app.get(&format!("/jobs/{create}")).await;
    assert_eq!(job["state"], "Pending", "{job}");

    let moved = app.wait_job(&movement).await;
    assert_eq!(moved["state"], "Done", "{moved}");
    let created = app.wait_job(&create).await;
    assert_eq!(created["state"], "Done", "{created}");
    let runner = idle_runner(&app).await;
    assert_eq!(runner["jobs_queued"], 0, "{runner}");
}
