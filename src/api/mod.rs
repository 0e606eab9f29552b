//! The Volumez-compatible HTTP API. Handlers parse (`requests`), authorize
//! (`extract`), call one service function and render its result (`views`);
//! errors map to statuses in `error.rs`.

mod error;
mod extract;
mod handlers;
mod parse;
mod requests;
mod ui;
mod views;
mod workers;

use axum::response::IntoResponse;
pub use error::ApiError;

use crate::service::Services;
use axum::body::Body;
use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderValue, Response};
use axum::routing::{get, post};
use axum::Router;
use std::sync::Arc;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::set_header::SetResponseHeaderLayer;

/// Largest accepted request body.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

pub type AppState = Arc<Services>;

pub fn router(state: AppState) -> Router {
    use handlers::*;
    Router::new()
        .route("/signin", post(sign_in))
        .route("/signout", post(sign_out))
        .route("/refresh", post(refresh))
        .route(
            "/tenant/apiaccess/credentials/refresh",
            get(volumez_refresh),
        )
        .route("/version", get(version))
        .route("/.well-known/jwks.json", get(jwks))
        .route("/media", get(list_media))
        .route("/media/{media}", get(get_medium))
        .route("/nodes", get(list_nodes))
        .route("/nodes/{node}", get(get_node).patch(update_node))
        .route("/policies", get(list_policies).post(create_policy))
        .route(
            "/policies/{policy}",
            get(get_policy).patch(update_policy).delete(delete_policy),
        )
        .route("/volumes", get(list_volumes).post(create_volume))
        .route(
            "/volumes/{volume}",
            get(get_volume).patch(resize_volume).delete(delete_volume),
        )
        .route("/volumes/{volume}/slices", get(volume_slices))
        .route("/volumes/{volume}/attachments", get(volume_attachments))
        .route(
            "/volumes/{volume}/snapshots/{snapshot}/attachments",
            get(snapshot_attachments).post(create_attachment),
        )
        .route(
            "/volumes/{volume}/snapshots/{snapshot}/attachments/{node}",
            get(get_attachment)
                .patch(modify_attachment)
                .delete(delete_attachment),
        )
        .route("/attachments", get(list_attachments))
        .route("/jobs", get(list_jobs))
        .route("/jobs/{job}", get(get_job))
        .merge(workers::routes())
        .merge(ui::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::map_response(json_errors))
        .layer(CatchPanicLayer::custom(|_| {
            tracing::error!("request handler panicked");
            ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "internal error",
            )
            .into_response()
        }))
        // On every response: no content-type sniffing; and no caching unless
        // the route chose otherwise (the console's assets): API answers carry
        // tokens and tenant data that must not stay in a browser or proxy.
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .with_state(state)
}

/// Errors produced outside our handlers (axum's rejections of a path or
/// query, for instance) come as plain text; clients always get JSON.
async fn json_errors(response: Response<Body>) -> Response<Body> {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let message = match String::from_utf8_lossy(&text).trim() {
        "" => status.canonical_reason().unwrap_or("error").to_string(),
        t => t.to_string(),
    };
    let json = serde_json::json!({ "message": message }).to_string();
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(json))
}
