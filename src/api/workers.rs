//! `GET /workers`: the background workers (the job runner, each reconciler)
//! and what they are doing, for any signed-in caller. Counts and summaries
//! only: no tenant's objects appear here.

use super::views::{self, ErrorBody, WorkerView};
use super::AppState;
use crate::service::Caller;
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
    description = "svs extension: the job runner `jobs` and each reconciler, with state, jobs running and queued, errors.",
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Workers", body = Vec<WorkerView>),
        (status = 401, description = "Not signed in", body = ErrorBody),
    ),
)]
async fn list_workers(State(app): State<AppState>, _: Caller) -> Json<Vec<WorkerView>> {
    Json(app.jobs.workers().iter().map(views::worker).collect())
}
