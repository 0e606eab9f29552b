//! The Volumez-compatible HTTP API. Handlers parse, authorize, call one
//! service function and map its result; errors map to statuses in `error.rs`.

mod error;
mod extract;
mod handlers;

pub use error::ApiError;

use crate::service::Services;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use std::sync::Arc;

/// Largest accepted request body.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

pub type AppState = Arc<Services>;

pub fn router(state: AppState) -> Router {
    use handlers::*;
    Router::new()
        .route("/signin", post(sign_in))
        .route("/signout", post(sign_out))
        .route("/refresh", post(refresh))
        .route("/version", get(version))
        .route("/.well-known/jwks.json", get(jwks))
        .route("/media", get(list_media))
        .route("/media/{media}", get(get_medium))
        .route("/nodes", get(list_nodes))
        .route("/nodes/{node}", get(get_node))
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
        .route("/jobs", get(list_jobs))
        .route("/jobs/{job}", get(get_job))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}
