//! `GET /healthz` and `GET /readyz`, for load balancers and orchestrators.

use super::error::ApiError;
use super::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `alive` or `ready`.
    pub status: &'static str,
}

#[utoipa::path(
    get, path = "/healthz", tag = "Version", operation_id = "healthz",
    summary = "Whether the process answers",
    description = "svs extension: 200 as long as the process serves HTTP; touches nothing else (a liveness probe).",
    responses((status = 200, description = "Alive", body = Health)),
)]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "alive" })
}

#[utoipa::path(
    get, path = "/readyz", tag = "Version", operation_id = "readyz",
    summary = "Whether the service can serve requests",
    description = "svs extension: 200 when the database answers (its schema was brought up to date at start, before the service listened); 503 with a message while it does not (a readiness probe: a load balancer sends requests elsewhere meanwhile).",
    responses(
        (status = 200, description = "Ready", body = Health),
        (status = 503, description = "The database does not answer", body = super::views::ErrorBody),
    ),
)]
pub async fn readyz(State(app): State<AppState>) -> Result<Json<Health>, ApiError> {
    match app.store.ping().await {
        Ok(()) => Ok(Json(Health { status: "ready" })),
        Err(e) => {
            tracing::warn!(error = %e, "readiness check: the database does not answer");
            Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "not ready: the database does not answer",
            ))
        }
    }
}
