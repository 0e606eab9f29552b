//! `OPTIONS` on a route: 204 with an `Allow` header naming the methods the
//! route serves. The list is the one axum's router puts on its 405 answer
//! for the path (built from the handlers registered there, `HEAD` wherever
//! `GET` is), so it cannot drift from what the router really answers.
//! Unknown paths keep their 404.

use axum::body::Body;
use axum::http::{header, HeaderValue, Method, Request, Response, StatusCode};
use axum::middleware::Next;

pub async fn answer_options(request: Request<Body>, next: Next) -> Response<Body> {
    if request.method() != Method::OPTIONS {
        return next.run(request).await;
    }
    let response = next.run(request).await;
    if response.status() != StatusCode::METHOD_NOT_ALLOWED {
        return response;
    }
    let Some(allow) = response
        .headers()
        .get(header::ALLOW)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
    else {
        return response;
    };
    let Ok(allow) = HeaderValue::from_str(&format!("{allow},OPTIONS")) else {
        return response;
    };
    let mut answer = Response::new(Body::empty());
    *answer.status_mut() = StatusCode::NO_CONTENT;
    answer.headers_mut().insert(header::ALLOW, allow);
    answer
}
