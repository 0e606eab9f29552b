//! The web console: static assets built into the binary and served under
//! `/ui/`. They need no authentication; the console itself signs in through
//! the public JSON API like any other client.

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use tower_http::set_header::SetResponseHeaderLayer;

/// (file name, content type, content) of every asset.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../../../../ui/index.html"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../../../../ui/style.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../../ui/app.js"),
    ),
    (
        "api.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../../ui/api.js"),
    ),
    (
        "dom.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../../ui/dom.js"),
    ),
    (
        "io.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../../ui/io.js"),
    ),
    (
        "jobs.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../../ui/jobs.js"),
    ),
    (
        "nodes.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../../ui/nodes.js"),
    ),
    (
        "overview.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../../ui/overview.js"),
    ),
    (
        "text.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../../ui/text.js"),
    ),
    (
        "volumes.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../../ui/volumes.js"),
    ),
    (
        "favicon.svg",
        "image/svg+xml",
        include_str!("../../../../ui/favicon.svg"),
    ),
];

/// The console loads only its own files and talks only to its own origin:
/// no inline script or style, no plugins, and no page may frame it
/// (clickjacking).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
    style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; \
    base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The console's routes (all GET): static files, not part of the JSON API,
/// so not in the API document. `api::route_table` lists them from here.
/// `/` leads to the console; `/favicon.ico` is where browsers and other
/// tools look for a site's icon (the console's pages link the same SVG).
pub const PATHS: [&str; 5] = ["/", "/favicon.ico", "/ui", "/ui/", "/ui/{file}"];

/// The routes of the console, merged into the API router. Each path is one
/// of `PATHS` (`tests/api/control/contract.rs` checks that nothing else is routed).
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let [root, favicon, redirect, index, file] = PATHS;
    Router::new()
        // Temporary: the root may serve something else one day.
        .route(root, get(|| async { Redirect::temporary("/ui/") }))
        .route(favicon, get(|| async { asset("favicon.svg") }))
        .route(redirect, get(|| async { Redirect::permanent("/ui/") }))
        .route(index, get(|| async { asset("index.html") }))
        .route(
            file,
            get(|Path(file): Path<String>| async move { asset(&file) }),
        )
        .layer(SetResponseHeaderLayer::overriding(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
}

fn asset(name: &str) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, body)) => (
            [
                (header::CONTENT_TYPE, *content_type),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            *body,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such console file").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_is_served_with_its_type_and_no_cache() {
        for (name, content_type, _) in ASSETS {
            let r = asset(name);
            assert_eq!(r.status(), StatusCode::OK);
            assert_eq!(r.headers()[header::CONTENT_TYPE], *content_type);
            assert_eq!(r.headers()[header::CACHE_CONTROL], "no-cache");
        }
        assert_eq!(asset("nope.js").status(), StatusCode::NOT_FOUND);
    }
}
