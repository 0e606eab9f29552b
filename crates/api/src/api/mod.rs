//! The Volumez-compatible HTTP API, one module per resource (`volumes`,
//! `policies`, `attachments`, `snapshots`, `media`, `nodes`, `agents`,
//! `jobs`, `users`, `signin`, `workers`, `version`), each with its handlers,
//! the parsing of its bodies and queries, its views and its document
//! schemas. Handlers parse (`FromBody`/`FromQuery`, helpers in `requests`
//! and `parse`), authorize (`extract`), call one service function and
//! render its result; shared response bodies are in `views`, and errors map
//! to statuses in `error.rs`.

mod agents;
mod attachments;
mod body;
mod error;
mod extract;
mod health;
mod jobs;
mod media;
mod metrics;
mod nodes;
mod parse;
mod plans;
mod policies;
mod relocation;
mod requests;
mod signin;
mod snapshots;
mod storage_nodes;
mod ui;
mod users;
mod version;
mod views;
mod volumes;
mod workers;

use axum::response::IntoResponse;
pub use error::ApiError;
pub use metrics::metrics_router;

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Extension};
use axum::http::{header, HeaderValue, Method, Request, Response, StatusCode};
use axum::middleware::Next;
use axum::Json;
use axum::Router;
use std::sync::Arc;
use svs_control::service::Services;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::set_header::SetResponseHeaderLayer;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Largest accepted request body.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// What every handler is handed: the services (a type of this crate, so
/// that its extractors may be written for the services' types).
#[derive(Clone)]
pub struct AppState(pub Arc<Services>);

impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.0
    }
}

/// Name of the security scheme: the reference's, so clients generated for
/// the Volumez API configure their key the same way.
pub const SECURITY_SCHEME: &str = "storage.io-authorizer";

/// Name of the security scheme of the host agents' routes.
pub const NODE_CREDENTIAL_SCHEME: &str = "node-credential";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "svs API",
        description = "The API of svs, a self-hosted storage volume service. It follows the Volumez orchestrator API (field names, casing, shapes); operations say where svs deliberately differs. Protected operations take the IdToken from `POST /signin` in the `authorization` header, raw or as `Bearer <token>`. Every error is `{\"message\"}`.",
        license(name = "Apache-2.0"),
    ),
    modifiers(&IdTokenSecurity),
    tags(
        (name = "user", description = "Sign-in, tokens and keys"),
        (name = "Volumes"), (name = "Policies"), (name = "Attachments"), (name = "Jobs"),
        (name = "Media"), (name = "Nodes"), (name = "Agents", description = "svs extension: the routes of nodes' host agents, which take a node credential"),
        (name = "Storage nodes", description = "svs extension: the routes of storage nodes (`svs storage-node`), which take a node's storage credential"),
        (name = "Workers"), (name = "Metrics", description = "svs extension: the metrics Prometheus scrapes (docs/metrics.md)"), (name = "Users", description = "svs extension: user management (administrators) and each user's own password"), (name = "Version"),
    ),
)]
struct ApiDoc;

/// The security scheme: the IdToken in the `authorization` header.
struct IdTokenSecurity;

impl utoipa::Modify for IdTokenSecurity {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            SECURITY_SCHEME,
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "authorization",
                "The IdToken from POST /signin, raw or as `Bearer <token>`",
            ))),
        );
        components.add_security_scheme(
            NODE_CREDENTIAL_SCHEME,
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "authorization",
                "A node's agent credential from POST /nodes/{node}/credentials, as `Bearer svsnode.<id>.<secret>` (or raw)",
            ))),
        );
    }
}

/// Every route of the API, each declared with its document entry: the
/// router and `/openapi.json` come from these declarations, so they cannot
/// drift. A route added any other way than `.routes(routes!(...))` here is
/// caught by `tests/api/control/contract.rs`.
fn documented_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(signin::sign_in))
        .routes(routes!(signin::sign_out))
        .routes(routes!(signin::refresh))
        .routes(routes!(signin::volumez_refresh))
        .routes(routes!(version::version))
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(signin::jwks))
        .routes(routes!(openapi_json))
        .routes(routes!(metrics::metrics))
        .routes(routes!(media::list_media, media::create_medium))
        .routes(routes!(relocation::rebalance_media))
        .routes(routes!(
            media::get_medium,
            media::update_medium,
            media::delete_medium
        ))
        .routes(routes!(nodes::list_nodes, nodes::create_node))
        .routes(routes!(
            nodes::get_node,
            nodes::update_node,
            nodes::delete_node
        ))
        .routes(routes!(agents::issue_credential, agents::revoke_credential))
        .routes(routes!(agents::agent_attachments))
        .routes(routes!(agents::report_host_state))
        .routes(routes!(storage_nodes::register_storage_node))
        .routes(routes!(storage_nodes::storage_node_fronts))
        .routes(routes!(storage_nodes::storage_node_failures))
        .routes(routes!(storage_nodes::node_copies))
        .routes(routes!(policies::list_policies, policies::create_policy))
        .routes(routes!(
            policies::get_policy,
            policies::update_policy,
            policies::delete_policy
        ))
        .routes(routes!(volumes::list_volumes, volumes::create_volume))
        .routes(routes!(
            volumes::get_volume,
            volumes::resize_volume,
            volumes::delete_volume
        ))
        .routes(routes!(volumes::volume_slices))
        .routes(routes!(metrics::volume_iostats))
        .routes(routes!(volumes::recover_volume))
        .routes(routes!(volumes::grow_filesystem))
        .routes(routes!(attachments::volume_attachments))
        .routes(routes!(
            attachments::snapshot_attachments,
            attachments::create_attachment
        ))
        .routes(routes!(
            attachments::get_attachment,
            attachments::modify_attachment,
            attachments::delete_attachment
        ))
        .routes(routes!(attachments::list_attachments))
        .routes(routes!(
            snapshots::list_snapshots,
            snapshots::create_snapshot
        ))
        .routes(routes!(
            snapshots::get_snapshot,
            snapshots::modify_snapshot,
            snapshots::delete_snapshot
        ))
        .routes(routes!(snapshots::rollback_snapshot))
        .routes(routes!(snapshots::list_all_snapshots))
        .routes(routes!(jobs::list_jobs))
        .routes(routes!(jobs::get_job, jobs::delete_job, jobs::modify_job))
        .merge(workers::routes())
        .merge(users::routes())
}

/// The API document, as `GET /openapi.json` serves it.
pub fn openapi() -> utoipa::openapi::OpenApi {
    documented_routes().split_for_parts().1
}

/// One route the router answers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Route {
    pub method: Method,
    /// With `{name}` placeholders, as in the document.
    pub path: String,
    /// False only for the console's static files (`ui::PATHS`).
    pub documented: bool,
}

/// Every (method, path) the router answers: the documented routes, read
/// back from the document the router was built with, and the console's
/// static files.
pub fn route_table() -> Vec<Route> {
    let mut routes: Vec<Route> = Vec::new();
    for (path, item) in openapi().paths.paths {
        let operations = [
            (Method::GET, item.get.is_some()),
            (Method::POST, item.post.is_some()),
            (Method::PUT, item.put.is_some()),
            (Method::PATCH, item.patch.is_some()),
            (Method::DELETE, item.delete.is_some()),
            (Method::HEAD, item.head.is_some()),
            (Method::OPTIONS, item.options.is_some()),
            (Method::TRACE, item.trace.is_some()),
        ];
        for (method, present) in operations {
            if present {
                routes.push(Route {
                    method,
                    path: path.clone(),
                    documented: true,
                });
            }
        }
    }
    for path in ui::PATHS {
        routes.push(Route {
            method: Method::GET,
            path: path.to_string(),
            documented: false,
        });
    }
    routes.sort();
    routes
}

/// The API document, serialized once at start.
#[derive(Clone)]
struct ApiDocument(Arc<str>);

#[utoipa::path(
    get, path = "/openapi.json", tag = "Version", operation_id = "openapi",
    summary = "This document",
    description = "svs extension: the OpenAPI 3.1 document of the API, generated from the code.",
    responses((status = 200, description = "The document", content_type = "application/json", body = Object)),
)]
async fn openapi_json(Extension(doc): Extension<ApiDocument>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        doc.0.to_string(),
    )
}

pub fn router(state: AppState) -> Router {
    let (api, doc) = documented_routes().split_for_parts();
    let doc = match doc.to_json() {
        Ok(json) => ApiDocument(json.into()),
        // Serializing plain data cannot fail; keep serving if it ever did.
        Err(e) => {
            tracing::error!(error = %e, "cannot serialize the API document");
            ApiDocument(r#"{"message": "the API document is not available"}"#.into())
        }
    };
    // The console's static files are the only routes outside the document
    // (`ui::PATHS`); they are not part of the JSON API.
    api.merge(ui::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(Extension(doc))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(CatchPanicLayer::custom(|_| {
            tracing::error!("request handler panicked");
            ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "internal error",
            )
            .into_response()
        }))
        // Outside the panic catcher, so that its answer ends with a newline too.
        .layer(axum::middleware::from_fn(json_answers))
        // Every answer counted (by route template), errors included.
        .layer(axum::middleware::from_fn(svs_common::metrics::track_http))
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

/// Every answer of the JSON API, errors included, is JSON ending with a
/// newline (so `curl` output ends its line): errors produced outside our
/// handlers (axum's rejections of a path or query, for instance) come as
/// plain text and are turned into `{"message"}`, then the newline is added
/// here, the one place every response passes through.
///
/// Router layers run inside each route, before axum empties the body of a
/// HEAD answer, so a HEAD's Content-Length counts the newline too.
async fn json_answers(request: Request<Body>, next: Next) -> Response<Body> {
    let response = json_errors(next.run(request).await).await;
    if !is_json(&response) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // Our JSON bodies are whole in memory already: this only takes them.
    let mut bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => Vec::from(bytes),
        Err(e) => {
            tracing::error!(error = %e, "cannot read a JSON answer's body");
            return ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "internal error",
            )
            .into_response();
        }
    };
    if !bytes.is_empty() && bytes.last() != Some(&b'\n') {
        bytes.push(b'\n');
    }
    // The server sets the length of the new body.
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(bytes))
}

fn is_json(response: &Response<Body>) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"))
}

/// Errors produced outside our handlers (axum's rejections of a path or
/// query, for instance) come as plain text; clients always get JSON.
async fn json_errors(response: Response<Body>) -> Response<Body> {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) || is_json(&response) {
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

pub(crate) type ApiResult<T> = Result<Json<T>, ApiError>;

pub async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such route")
}

/// A method the route does not serve: 405. `OPTIONS` (served by no route)
/// asks which methods are: 204. Both get axum's `Allow` header, the
/// methods registered on the route (`HEAD` wherever `GET` is), so what it
/// advertises is what the router answers.
pub async fn method_not_allowed(method: Method) -> axum::response::Response {
    if method == Method::OPTIONS {
        return StatusCode::NO_CONTENT.into_response();
    }
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed on this route",
    )
    .into_response()
}
