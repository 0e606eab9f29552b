//! `GET /workers`: the background workers (the job runner, each reconciler)
//! and what they are doing, for administrators only: the counts are
//! service-wide (every tenant's jobs), which tells one tenant how busy the
//! others keep the service.

use super::views::{self, ErrorBody, WorkerView};
use super::AppState;
use crate::service::Administrator;
use axum::extract::State;
use axum::Json;
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
    responses(
        (status = 200, description = "Workers", body = Vec<WorkerView>),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
    ),
)]
async fn list_workers(State(app): State<AppState>, _: Administrator) -> Json<Vec<WorkerView>> {
    Json(app.jobs.workers().iter().map(views::worker).collect())
}
