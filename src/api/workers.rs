//! `GET /workers`: the background workers (the job runner, each reconciler)
//! and what they are doing, for any signed-in caller. Counts and summaries
//! only: no tenant's objects appear here.

use super::AppState;
use crate::service::{format_ms, Caller};
use crate::workers::WorkerStatus;
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

pub fn routes() -> Router<AppState> {
    Router::new().route("/workers", get(list_workers))
}

async fn list_workers(State(app): State<AppState>, _: Caller) -> Json<Value> {
    Json(app.jobs.workers().iter().map(worker_json).collect())
}

fn worker_json(w: &WorkerStatus) -> Value {
    json!({
        "name": w.name,
        "state": w.state.as_str(),
        "jobs_running": w.jobs_running,
        "jobs_queued": w.jobs_queued,
        "jobs_retrying": w.jobs_retrying,
        "max_concurrent_jobs": w.max_concurrent_jobs,
        "period_secs": w.period_secs,
        "errors": w.errors,
        "consecutive_errors": w.consecutive_errors,
        "last_error": w.last_error,
        "last_error_time": w.last_error_ms.map(format_ms),
        "last_success_time": w.last_success_ms.map(format_ms),
    })
}
