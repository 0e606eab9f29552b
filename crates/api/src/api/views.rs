//! Every response body, rendered from records into typed views with the
//! reference API's field names. The views derive `ToSchema`, so the
//! document at `/openapi.json` describes exactly what is sent.

use serde::Serialize;
use svs_control::service::volumes::Started;
pub use svs_wire::views::{Done, JobStarted};
use utoipa::ToSchema;

/// Every error: a status code and this body.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ErrorResponse)]
pub struct ErrorBody {
    /// What went wrong, for people (the seed's messages are exact).
    pub message: String,
}

pub fn started(message: &str, s: &Started) -> JobStarted {
    JobStarted {
        Message: message.to_string(),
        JobID: s.job_id.to_string(),
        ObjectID: s.object_id.clone(),
    }
}

/// What a call with nothing to report answers (`POST /signout`): `{}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Empty {}

pub fn done(message: &str, object_id: &str) -> Done {
    Done {
        Message: message.to_string(),
        ObjectID: object_id.to_string(),
    }
}

/// A stored reference field that the reference requires to be non-empty
/// when present: omitted when not set.
pub(super) fn non_empty(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_string())
}

/// A list rendered with one of the functions above.
pub fn list<T, V>(items: &[T], render: impl Fn(&T) -> V) -> Vec<V> {
    items.iter().map(render).collect()
}

/// The answer of every route that needs a signed-in caller, for the
/// routes' `responses(...)`.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // Describes answers ApiError builds.
pub enum SignedIn {
    #[response(status = 401, description = "Not signed in")]
    NotSignedIn(ErrorBody),
}

/// The answers of an administrator's route.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // Describes answers ApiError builds.
pub enum AdminOnly {
    #[response(status = 401, description = "Not signed in")]
    NotSignedIn(ErrorBody),
    #[response(status = 403, description = "Not an administrator")]
    NotAnAdministrator(ErrorBody),
}

/// The answers of every route that reads a body.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // Describes answers ApiError builds.
pub enum BodyLimits {
    #[response(status = 408, description = "Body not received in time")]
    TooSlow(ErrorBody),
    #[response(status = 413, description = "Body over 1 MiB")]
    TooLarge(ErrorBody),
}
