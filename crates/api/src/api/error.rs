//! The one table from error kinds to HTTP statuses. Bodies are always
//! `{"message": ...}`; internal causes are logged, never shown.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use svs_control::service::ServiceError;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// Seconds for a `Retry-After` header (429, 503).
    pub retry_after_secs: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            retry_after_secs: None,
        }
    }

    fn retry_after(mut self, secs: u64) -> ApiError {
        self.retry_after_secs = Some(secs);
        self
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
            ServiceError::TooManyAttempts {
                message,
                retry_after_secs,
            } => {
                return ApiError::new(StatusCode::TOO_MANY_REQUESTS, message.clone())
                    .retry_after(*retry_after_secs)
            }
            ServiceError::Busy(message) => {
                return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message.clone())
                    .retry_after(1)
            }
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
        let mut response = (self.status, Json(body)).into_response();
        if let Some(secs) = self.retry_after_secs {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}
