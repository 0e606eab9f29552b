//! `GET /workers`: the background workers (the job runner, each reconciler)
//! and what they are doing, for administrators only: the counts are
//! service-wide (every tenant's jobs), which tells one tenant how busy the
//! others keep the service.

use super::views::AdminOnly;
use super::AppState;
use axum::extract::State;
use axum::Json;
use serde::Serialize;
use svs_control::service::format_ms;
use svs_control::service::Administrator;
use svs_control::workers::WorkerStatus;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_workers))
}

#[utoipa::path(
    get, path = "/workers", tag = "Workers", operation_id = "WorkersList",
    summary = "Background workers",
    description = "svs extension, administrators only: the job runner `jobs` and each reconciler, with state, jobs running and queued (of every tenant), errors.",
    security(("storage.io-authorizer" = [])),
    responses(AdminOnly,
        (status = 200, description = "Workers", body = Vec<WorkerView>),
    ),
)]
async fn list_workers(State(app): State<AppState>, _: Administrator) -> Json<Vec<WorkerView>> {
    Json(app.jobs.workers().iter().map(worker).collect())
}

/// A background worker (svs extension): the job runner `jobs` or a
/// reconciler.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Worker)]
pub struct WorkerView {
    pub name: String,
    /// `Busy`, `Throttled`, `Idle` or `Done`.
    pub state: &'static str,
    pub jobs_running: usize,
    pub jobs_queued: usize,
    pub jobs_retrying: usize,
    /// The job runner's bound; null for reconcilers.
    pub max_concurrent_jobs: Option<usize>,
    /// A reconciler's period; null for the job runner.
    pub period_secs: Option<u64>,
    pub errors: u64,
    pub consecutive_errors: u64,
    pub last_error: Option<String>,
    /// RFC 3339.
    pub last_error_time: Option<String>,
    /// RFC 3339.
    pub last_success_time: Option<String>,
    /// What the worker's state means here, when it says more than its
    /// state (the reconcilers' leadership: leader or follower, and who
    /// leads).
    pub note: Option<String>,
    /// The job runner: ids of the jobs this instance holds a claim on
    /// (running or queued); null for reconcilers.
    pub jobs_held: Option<Vec<i64>>,
}

pub fn worker(w: &WorkerStatus) -> WorkerView {
    WorkerView {
        name: w.name.clone(),
        state: w.state.as_str(),
        jobs_running: w.jobs_running,
        jobs_queued: w.jobs_queued,
        jobs_retrying: w.jobs_retrying,
        max_concurrent_jobs: w.max_concurrent_jobs,
        period_secs: w.period_secs,
        errors: w.errors,
        consecutive_errors: w.consecutive_errors,
        last_error: w.last_error.clone(),
        last_error_time: w.last_error_ms.map(format_ms),
        last_success_time: w.last_success_ms.map(format_ms),
        note: w.note.clone(),
        jobs_held: w.jobs_held.clone(),
    }
}
