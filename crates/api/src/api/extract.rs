//! Extractors: the caller (and their role), and request bodies and queries
//! parsed into the services' commands. Malformed requests become our JSON
//! errors.

use super::parse::Body;
use super::requests::{FromBody, FromQuery};
use super::{ApiError, AppState};
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::collections::BTreeMap;
use svs_control::service::agents::NodeAgent;
use svs_control::service::commands::Refresh;
use svs_control::service::storage_nodes::StorageNode;
use svs_control::service::{Administrator, Caller};

/// A JSON object body. Not JSON, not an object → 400; too large → 413.
struct JsonObject(Body);

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
        Ok(state.authenticate(header).await?)
    }
}

/// The IP address of the TCP peer (`ConnectInfo`, set by `crate::http`),
/// which the sign-in throttle counts failures by. Headers such as
/// `X-Forwarded-For` are not trusted: any client can send them.
pub struct ClientAddress(pub Option<std::net::IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for ClientAddress {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(ClientAddress(
            parts
                .extensions
                .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
                .map(|c| c.0.ip()),
        ))
    }
}

/// The refresh token of the Volumez refresh call, from its `refreshtoken`
/// header (missing → 401).
pub struct RefreshTokenHeader(pub Refresh);

impl<S: Send + Sync> FromRequestParts<S> for RefreshTokenHeader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .headers
            .get("refreshtoken")
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| {
                RefreshTokenHeader(Refresh {
                    refresh_token: t.to_string(),
                })
            })
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "Not signed in: send the RefreshToken from /signin in the refreshtoken header",
                )
            })
    }
}

/// Only an administrator gets past this one: others get 403 before their
/// request body is even read.
impl FromRequestParts<AppState> for Administrator {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let caller = Caller::from_request_parts(parts, state).await?;
        Ok(caller.require_admin()?)
    }
}

/// A node's host agent, by its node credential: only the agent routes
/// take one. A user's IdToken here is 403, an unknown or revoked
/// credential 401.
impl FromRequestParts<AppState> for NodeAgent {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        Ok(state.authenticate_agent(header).await?)
    }
}

/// A storage node, by its node's storage credential: only the storage
/// routes take one. An agent credential or a user's IdToken here is 403,
/// an unknown or revoked credential 401.
impl FromRequestParts<AppState> for StorageNode {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        Ok(state.authenticate_storage_node(header).await?)
    }
}

/// A body that may be left out: empty or `null` is `{}`; otherwise a JSON
/// object parsed into a command.
pub struct OptionalParsed<T>(pub T);

impl<T: FromBody> FromRequest<AppState> for OptionalParsed<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|rejection| match rejection.status() {
                StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "request body is larger than {} bytes",
                        super::MAX_BODY_BYTES
                    ),
                ),
                status => ApiError::new(status, rejection.body_text()),
            })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalParsed(T::from_body(&Body::new())?));
        }
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(map)) => Ok(OptionalParsed(T::from_body(&map)?)),
            // JSON's way of saying "no body".
            Ok(Value::Null) => Ok(OptionalParsed(T::from_body(&Body::new())?)),
            Ok(_) => Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "request body must be a JSON object",
            )),
            Err(e) => Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("invalid JSON body: {e}"),
            )),
        }
    }
}

/// A JSON object body parsed into a command.
pub struct Parsed<T>(pub T);

impl<T: FromBody> FromRequest<AppState> for Parsed<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let JsonObject(body) = JsonObject::from_request(req, state).await?;
        Ok(Parsed(T::from_body(&body)?))
    }
}

/// The query string parsed into a command.
pub struct ParsedQuery<T>(pub T);

impl<T: FromQuery> FromRequestParts<AppState> for ParsedQuery<T> {
    /// A query that is not `key=value` pairs is axum's plain-text rejection,
    /// which `json_errors` turns into JSON like any other.
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let Query(query) = Query::<BTreeMap<String, String>>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        T::from_query(&query)
            .map(ParsedQuery)
            .map_err(IntoResponse::into_response)
    }
}
