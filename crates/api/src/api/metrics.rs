//! `GET /metrics` (Prometheus) and a volume's recent I/O (the console's
//! chart): docs/metrics.md.

use super::views::{AdminOnly, ErrorBody, SignedIn};
use super::{ApiResult, AppState};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap};
use axum::response::IntoResponse;
use axum::Json;
use serde::Serialize;
use svs_common::metrics::{IoSample, CONTENT_TYPE};
use svs_control::service::{format_ms, Caller};
use utoipa::ToSchema;

#[utoipa::path(
    get, path = "/metrics", tag = "Metrics", operation_id = "Metrics",
    summary = "Metrics in the Prometheus text format",
    description = "svs extension: every metric docs/metrics.md lists, in the Prometheus text format (0.0.4). Takes an administrator's IdToken, or the scrape token the `metrics_token` setting sets (`Authorization: Bearer <token>`); `metrics_listen` serves the same without a token on a separate address.",
    security(("storage.io-authorizer" = [])),
    responses(AdminOnly,
        (status = 200, description = "The metrics", content_type = "text/plain", body = String),
        (status = 503, description = "The database does not answer", body = ErrorBody),
    ),
)]
pub async fn metrics(
    State(app): State<AppState>,
    headers: HeaderMap,
) -> Result<impl IntoResponse, super::ApiError> {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let text = app.metrics_text(authorization).await?;
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], text))
}

/// A volume's I/O per second over one sampling period.
#[derive(Debug, Serialize, ToSchema)]
pub struct IoSampleView {
    /// The end of the period (RFC 3339).
    pub time: String,
    pub readiops: f64,
    pub writeiops: f64,
    /// Bytes per second.
    pub readthroughput: f64,
    pub writethroughput: f64,
    /// svs extension: the mean time a read took to answer over the period,
    /// in microseconds; null when there was no read.
    pub readlatencyus: Option<f64>,
    /// The same for writes.
    pub writelatencyus: Option<f64>,
}

impl IoSampleView {
    fn of(s: &IoSample) -> IoSampleView {
        IoSampleView {
            time: format_ms(s.time_ms),
            readiops: s.read_iops,
            writeiops: s.write_iops,
            readthroughput: s.read_bytes_per_sec,
            writethroughput: s.write_bytes_per_sec,
            readlatencyus: s.read_latency_us,
            writelatencyus: s.write_latency_us,
        }
    }
}

#[utoipa::path(
    get, path = "/volumes/{volume}/iostats", tag = "Volumes", operation_id = "VolumeIoStats",
    summary = "A volume's I/O over the last minutes",
    description = "svs extension: the volume's NBD reads and writes per second, bytes per second and mean latency (µs), one sample every 5 s for the last 10 minutes, oldest first, as this instance served them (none when it did not serve the volume). The console's chart reads it.",
    params(("volume" = String, Path, description = "The volume's name or id")),
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "Samples", body = Vec<IoSampleView>),
        (status = 404, description = "No such volume", body = ErrorBody),
    ),
)]
pub async fn volume_iostats(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult<Vec<IoSampleView>> {
    let samples = app.volume_iostats(&caller, &name).await?;
    Ok(Json(samples.iter().map(IoSampleView::of).collect()))
}

/// What `metrics_listen` serves: `GET /metrics` without a token, nothing
/// else (declared like the API's routes, in a document of its own).
pub fn metrics_router(state: AppState) -> axum::Router {
    let (router, _) = utoipa_axum::router::OpenApiRouter::new()
        .routes(utoipa_axum::routes!(unauthenticated_metrics))
        .split_for_parts();
    router.fallback(super::not_found).with_state(state)
}

#[utoipa::path(
    get, path = "/metrics", tag = "Metrics", operation_id = "MetricsListen",
    summary = "Metrics on metrics_listen",
    description = "The same as `GET /metrics`, without a token, on the separate address `metrics_listen` sets; nothing else is served there.",
    responses(
        (status = 200, description = "The metrics", content_type = "text/plain", body = String),
        (status = 503, description = "The database does not answer", body = ErrorBody),
    ),
)]
async fn unauthenticated_metrics(
    State(app): State<AppState>,
) -> Result<impl IntoResponse, super::ApiError> {
    let text = app.render_metrics().await?;
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], text))
}
