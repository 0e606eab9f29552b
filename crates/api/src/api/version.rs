//! `GET /version`.

use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

#[utoipa::path(
    get, path = "/version", tag = "Version", operation_id = "versionGet",
    summary = "Version of the service",
    description = "Public in svs (the reference asks for a token).",
    responses((status = 200, description = "Version", body = Version)),
)]
pub async fn version() -> Json<Version> {
    Json(this_version())
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = VersionResponse)]
#[allow(non_snake_case)]
pub struct Version {
    pub version: &'static str,
    /// `svs`.
    pub componentName: &'static str,
}

pub fn this_version() -> Version {
    Version {
        version: env!("CARGO_PKG_VERSION"),
        componentName: "svs",
    }
}
