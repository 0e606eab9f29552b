//! Extractors that turn malformed requests into our JSON errors.

use super::{ApiError, AppState};
use crate::service::fields::Body;
use crate::service::Caller;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use serde_json::Value;

/// A JSON object body. Not JSON, not an object → 400; too large → 413.
pub struct JsonObject(pub Body);

impl FromRequest<AppState> for JsonObject {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        match axum::Json::<Value>::from_request(req, state).await {
            Ok(axum::Json(Value::Object(map))) => Ok(JsonObject(map)),
            Ok(_) => Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "request body must be a JSON object",
            )),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "request body is larger than {} bytes",
                super::MAX_BODY_BYTES
            ),
        ),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::new(
            StatusCode::BAD_REQUEST,
            "request body must be JSON with content-type: application/json",
        ),
        _ => ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("invalid JSON body: {}", rejection.body_text()),
        ),
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        Ok(state.authenticate(header)?)
    }
}
