//! HTTP requests counted by route template, never by the raw path: a
//! client sending 10,000 different paths adds one series, `unmatched`.

use super::METRICS;
use axum::body::Body;
use axum::extract::MatchedPath;
use axum::http::{Method, Request, Response};
use axum::middleware::Next;
use std::time::Instant;

/// The route label of a request no route matched.
pub const UNMATCHED: &str = "unmatched";

/// Counts the request and times its answer (a router layer: the matched
/// route's template is known there).
pub async fn track_http(request: Request<Body>, next: Next) -> Response<Body> {
    let started = Instant::now();
    let method = method_label(request.method());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| UNMATCHED.to_string(), |p| p.as_str().to_string());
    let response = next.run(request).await;
    let status = response.status();
    METRICS
        .http_requests
        .with_label_values(&[method, &route, status.as_str()])
        .inc();
    METRICS
        .http_duration
        .with_label_values(&[method, &route])
        .observe(started.elapsed().as_secs_f64());
    response
}

/// One of the methods HTTP defines; anything else is `other`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}
