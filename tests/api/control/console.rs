//! What the service answers around the JSON API: `/` leads to the console,
//! the favicon, and every JSON answer ending with a newline.

use crate::harness::*;
use reqwest::{Method, StatusCode};

/// A client that shows redirects instead of following them.
fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

#[tokio::test]
async fn the_root_leads_to_the_console_and_the_favicon_is_served() {
    let app = TestApp::start().await;
    let client = no_redirects();
    let root = client
        .get(format!("{}/", app.base))
        .send()
        .await
        .expect("sent");
    assert_eq!(root.status(), StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(root.headers()["location"], "/ui/");

    let index = app.client.get(format!("{}/ui/", app.base)).send().await;
    let index = index.expect("sent").text().await.expect("body");
    assert!(
        index.contains(r#"<link rel="icon" href="favicon.svg" type="image/svg+xml">"#),
        "{index}"
    );
    for path in ["/favicon.ico", "/ui/favicon.svg"] {
        let icon = client
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .expect("sent");
        assert_eq!(icon.status(), StatusCode::OK, "{path}");
        assert_eq!(icon.headers()["content-type"], "image/svg+xml", "{path}");
        assert_eq!(icon.headers()["cache-control"], "no-cache", "{path}");
        assert!(icon.headers().contains_key("content-security-policy"));
        let body = icon.text().await.expect("body");
        assert!(
            body.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
            "{path}: {body}"
        );
    }
}

/// A request and the status it gets: (token, method, path, JSON body, status).
type Case<'a> = (
    Option<&'a str>,
    Method,
    &'a str,
    Option<&'a str>,
    StatusCode,
);

/// Answers of every kind: a success, errors of our handlers, axum's
/// rejections turned into JSON, the fallbacks, and the API document.
#[tokio::test]
async fn every_json_answer_ends_with_a_newline_and_says_its_length() {
    let app = TestApp::start().await;
    app.create_policy("p", 0, 0, 0).await;
    let auth = Some(app.token.as_str());
    let cases: [Case; 10] = [
        (None, Method::GET, "/version", None, StatusCode::OK),
        (auth, Method::GET, "/policies", None, StatusCode::OK),
        (auth, Method::GET, "/jobs?count=1", None, StatusCode::OK),
        (None, Method::GET, "/openapi.json", None, StatusCode::OK),
        (
            None,
            Method::GET,
            "/policies",
            None,
            StatusCode::UNAUTHORIZED,
        ),
        (
            auth,
            Method::GET,
            "/volumes/nope",
            None,
            StatusCode::NOT_FOUND,
        ),
        (
            auth,
            Method::GET,
            "/jobs?count=x",
            None,
            StatusCode::BAD_REQUEST,
        ),
        (
            auth,
            Method::POST,
            "/volumes",
            Some("{"),
            StatusCode::BAD_REQUEST,
        ),
        (
            None,
            Method::GET,
            "/no/such/route",
            None,
            StatusCode::NOT_FOUND,
        ),
        (
            None,
            Method::DELETE,
            "/version",
            None,
            StatusCode::METHOD_NOT_ALLOWED,
        ),
    ];
    for (token, method, path, body, status) in cases {
        let mut request = app
            .client
            .request(method.clone(), format!("{}{path}", app.base));
        if let Some(t) = token {
            request = request.header("authorization", t);
        }
        if let Some(b) = body {
            request = request
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let response = request.send().await.expect("sent");
        assert_eq!(response.status(), status, "{method} {path}");
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap_or_default()
                .starts_with("application/json"),
            "{method} {path}"
        );
        let length = response.headers()["content-length"]
            .to_str()
            .ok()
            .and_then(|l| l.parse::<usize>().ok());
        let text = response.text().await.expect("body");
        assert_eq!(
            length,
            Some(text.len()),
            "{method} {path}: the length says it"
        );
        assert!(
            text.ends_with('\n') && !text.ends_with("\n\n"),
            "{method} {path}: {text:?}"
        );
        serde_json::from_str::<serde_json::Value>(&text)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}: {text}"));
    }

    // HEAD says the length of the GET's answer.
    let get = app.client.get(format!("{}/version", app.base)).send().await;
    let get_len = get.expect("sent").text().await.expect("body").len();
    let head = app
        .client
        .head(format!("{}/version", app.base))
        .send()
        .await
        .expect("sent");
    assert_eq!(head.status(), StatusCode::OK);
    assert_eq!(
        head.headers()["content-length"].to_str().ok(),
        Some(get_len.to_string().as_str())
    );
}
