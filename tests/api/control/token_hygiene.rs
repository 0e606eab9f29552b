//! Token hygiene: refresh tokens rotate and a reused one ends its sign-in;
//! the Volumez refresh call; headers that keep tokens out of caches and
//! the console out of frames; and no secret in the service's log.

use crate::harness::*;
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::Duration;

const BAD_TOKEN: &str = "The token is invalid or has expired";
const VOLUMEZ_REFRESH: &str = "/tenant/apiaccess/credentials/refresh";

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

async fn send(req: reqwest::RequestBuilder) -> Answer {
    let resp = req.send().await.expect("request sent");
    let (status, headers) = (resp.status(), resp.headers().clone());
    let text = resp.text().await.expect("body read");
    Answer {
        status,
        headers,
        body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
    }
}

async fn post_refresh(app: &TestApp, token: &str) -> Answer {
    send(
        app.client
            .post(format!("{}/refresh", app.base))
            .json(&json!({ "RefreshToken": token })),
    )
    .await
}

async fn get_refresh(app: &TestApp, token: Option<&str>) -> Answer {
    let mut req = app.client.get(format!("{}{VOLUMEZ_REFRESH}", app.base));
    if let Some(t) = token {
        req = req.header("refreshtoken", t);
    }
    send(req).await
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

fn bad_token() -> Value {
    json!({ "message": BAD_TOKEN })
}

#[tokio::test]
async fn each_refresh_rotates_and_a_reused_refresh_token_ends_its_sign_in() {
    let app = TestApp::start().await;
    let first = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let other_sign_in = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let r1 = post_refresh(&app, s(&first["RefreshToken"])).await;
    assert_eq!(r1.status, StatusCode::OK, "{}", r1.body);
    let r2 = post_refresh(&app, s(&r1.body["RefreshToken"])).await;
    assert_eq!(r2.status, StatusCode::OK, "{}", r2.body);
    assert_ne!(r1.body["RefreshToken"], r2.body["RefreshToken"]);

    // The first token again: someone holds a copy. 401, and the whole
    // family (r2's token too) is revoked; the other sign-in lives on.
    let reused = post_refresh(&app, s(&first["RefreshToken"])).await;
    assert_eq!(
        (reused.status, reused.body),
        (StatusCode::UNAUTHORIZED, bad_token())
    );
    let r3 = post_refresh(&app, s(&r2.body["RefreshToken"])).await;
    assert_eq!(
        (r3.status, r3.body),
        (StatusCode::UNAUTHORIZED, bad_token())
    );
    let r3 = get_refresh(&app, Some(s(&r2.body["RefreshToken"]))).await;
    assert_eq!(
        (r3.status, r3.body),
        (StatusCode::UNAUTHORIZED, bad_token())
    );
    let ok = post_refresh(&app, s(&other_sign_in["RefreshToken"])).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);
    // IdTokens already issued stay valid until they expire.
    let (status, _) = app
        .request(Some(s(&r2.body["IdToken"])), Method::GET, "/volumes", None)
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn the_volumez_refresh_answers_its_own_shape_and_does_not_rotate() {
    let app = TestApp::start_with(TestConfig {
        token_lifetime: "10m".into(),
        ..TestConfig::default()
    })
    .await;
    let t = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let token = s(&t["RefreshToken"]);
    for _ in 0..2 {
        let r = get_refresh(&app, Some(token)).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let mut keys: Vec<&str> = r
            .body
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "AccessToken",
                "AccessTokenExpiration",
                "IdToken",
                "IdTokenExpiration",
                "TokenType"
            ]
        );
        assert_eq!(r.body["TokenType"], "Bearer");
        let (_, claims) = jwt_parts(s(&r.body["IdToken"]));
        let exp = claims["exp"].as_i64().expect("exp");
        let expiration = time::OffsetDateTime::parse(
            s(&r.body["IdTokenExpiration"]),
            &time::format_description::well_known::Rfc3339,
        )
        .expect("RFC 3339");
        assert_eq!(expiration.unix_timestamp(), exp);
        assert_eq!(r.body["AccessTokenExpiration"], r.body["IdTokenExpiration"]);
        let (_, access) = jwt_parts(s(&r.body["AccessToken"]));
        assert_eq!(access["token_use"], "access");
        let (status, _) = app
            .request(Some(s(&r.body["IdToken"])), Method::GET, "/volumes", None)
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    // The same token still rotates on POST /refresh.
    let r = post_refresh(&app, token).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);

    for (header, status) in [
        (None, StatusCode::UNAUTHORIZED),
        (Some(""), StatusCode::UNAUTHORIZED),
        (Some("not-a-token"), StatusCode::UNAUTHORIZED),
        (Some(s(&t["IdToken"])), StatusCode::UNAUTHORIZED),
    ] {
        let r = get_refresh(&app, header).await;
        assert_eq!(r.status, status, "{header:?}: {}", r.body);
        assert!(r.body["message"].is_string(), "{}", r.body);
    }
    let r = get_refresh(&app, None).await;
    assert_eq!(
        r.body["message"],
        "Not signed in: send the RefreshToken from /signin in the refreshtoken header"
    );
}

#[tokio::test]
async fn token_answers_are_not_cached_nothing_is_sniffed_and_the_console_cannot_be_framed() {
    let app = TestApp::start().await;
    let signin = send(
        app.client
            .post(format!("{}/signin", app.base))
            .json(&json!({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD})),
    )
    .await;
    assert_eq!(signin.status, StatusCode::OK);
    let token = s(&signin.body["RefreshToken"]).to_string();
    let get = get_refresh(&app, Some(&token)).await;
    let post = post_refresh(&app, &token).await;
    let failed = send(
        app.client
            .post(format!("{}/signin", app.base))
            .json(&json!({"email": ADMIN_EMAIL, "password": "wrong-password"})),
    )
    .await;
    let version = send(app.client.get(format!("{}/version", app.base))).await;
    let missing = send(app.client.get(format!("{}/no/such/route", app.base))).await;
    for (name, a) in [
        ("signin", &signin),
        ("GET refresh", &get),
        ("POST refresh", &post),
        ("failed signin", &failed),
        ("version", &version),
        ("404", &missing),
    ] {
        assert_eq!(a.headers["cache-control"], "no-store", "{name}");
        assert_eq!(a.headers["x-content-type-options"], "nosniff", "{name}");
    }
    for path in ["/ui/", "/ui/app.js", "/ui/api.js", "/ui/style.css"] {
        let a = send(app.client.get(format!("{}{path}", app.base))).await;
        assert_eq!(a.status, StatusCode::OK, "{path}");
        let csp = a.headers["content-security-policy"]
            .to_str()
            .expect("ascii");
        for directive in [
            "default-src 'self'",
            "script-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(directive), "{path}: {csp}");
        }
        assert!(!csp.contains("unsafe"), "{path}: {csp}");
        assert_eq!(a.headers["x-frame-options"], "DENY", "{path}");
        assert_eq!(a.headers["x-content-type-options"], "nosniff", "{path}");
        // The console's own files may be revalidated (not tokens).
        assert_eq!(a.headers["cache-control"], "no-cache", "{path}");
    }
    // No inline script or style that the policy would block.
    let index = send(app.client.get(format!("{}/ui/", app.base))).await;
    let html = s(&index.body);
    assert!(!html.contains("<style"), "inline style");
    assert!(!html.contains(" style="), "inline style attribute");
    for script in html.split("<script").skip(1) {
        assert!(
            script.trim_start().contains("src="),
            "inline script: {script}"
        );
    }
}

/// Substrings of `secret` long enough to identify it (every 12 characters).
fn fragments(secret: &str) -> Vec<&str> {
    const LEN: usize = 12;
    if secret.len() <= LEN {
        return vec![secret];
    }
    (0..=secret.len() - LEN)
        .map(|i| &secret[i..i + LEN])
        .collect()
}

#[tokio::test]
async fn the_debug_log_of_a_whole_session_holds_no_password_or_token() {
    let app = TestApp::start_with(TestConfig {
        log: Some("debug".into()),
        ..TestConfig::default()
    })
    .await;
    const WRONG: &str = "Wr0ng-but-close-passw0rd";
    let mut secrets: Vec<String> = vec![ADMIN_PASSWORD.into(), WRONG.into(), app.token.clone()];
    let t = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    for key in ["IdToken", "AccessToken", "RefreshToken"] {
        secrets.push(s(&t[key]).to_string());
    }
    let get = get_refresh(&app, Some(s(&t["RefreshToken"]))).await;
    assert_eq!(get.status, StatusCode::OK);
    let post = post_refresh(&app, s(&t["RefreshToken"])).await;
    assert_eq!(post.status, StatusCode::OK);
    for key in ["IdToken", "AccessToken", "RefreshToken"] {
        secrets.push(s(&post.body[key]).to_string());
    }
    for key in ["IdToken", "AccessToken"] {
        secrets.push(s(&get.body[key]).to_string());
    }
    let (status, _) = app
        .request(
            Some(s(&post.body["IdToken"])),
            Method::GET,
            "/volumes",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = app
        .request(
            None,
            Method::POST,
            "/signout",
            Some(json!({"AccessToken": s(&post.body["AccessToken"])})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    // Reuse of the retired token (logged as a warning), and a failed sign-in.
    let reused = post_refresh(&app, s(&t["RefreshToken"])).await;
    assert_eq!(reused.status, StatusCode::UNAUTHORIZED);
    let (status, _) = app
        .request(
            None,
            Method::POST,
            "/signin",
            Some(json!({"email": ADMIN_EMAIL, "password": WRONG})),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    tokio::time::sleep(Duration::from_millis(200)).await;

    let log = app.log();
    assert!(log.contains("DEBUG"), "the log is at debug level: {log}");
    assert!(
        log.contains("signed in") && log.contains("sign-in failed"),
        "{log}"
    );
    for secret in &secrets {
        // A JWT's header (algorithm and key id) is no secret; its claims
        // and signature are.
        let secret = match secret.split_once('.') {
            Some((_, rest)) => rest,
            None => secret.as_str(),
        };
        for fragment in fragments(secret) {
            assert!(
                !log.contains(fragment),
                "the log holds {fragment:?} of a secret"
            );
        }
    }
}
