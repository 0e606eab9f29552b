//! The one table from error kinds to HTTP statuses. Bodies are always
//! `{"message": ...}`; internal causes are logged, never shown.

use crate::service::ServiceError;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> ApiError {
        let status = match &e {
            ServiceError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ServiceError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ServiceError::Forbidden(_) => StatusCode::FORBIDDEN,
            ServiceError::NotFound(_) => StatusCode::NOT_FOUND,
            ServiceError::Conflict(_) | ServiceError::Blocked(_) => StatusCode::CONFLICT,
            ServiceError::Internal(cause) => {
                tracing::error!(cause = %cause, "internal error");
                return ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error");
            }
        };
        ApiError::new(status, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = super::views::ErrorBody {
            message: self.message,
        };
        (self.status, Json(body)).into_response()
    }
}
