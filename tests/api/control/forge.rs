//! Forged tokens, for tests that walk protected routes with them: `alg:
//! none`, HS256 keyed with the service's public key, tampered claims, an
//! expired token signed with the service's real key (read from its store,
//! `svs.db` in its data directory), and another tenant's genuine IdToken.
//! The test at the end proves each helper forges what it says on `GET
//! /volumes`.

use crate::harness::forge::*;
use crate::harness::*;
use reqwest::{Method, StatusCode};
use serde_json::json;

const BAD_TOKEN: &str = "The token is invalid or has expired";

#[tokio::test]
async fn forged_tokens_are_refused_and_the_forging_helpers_are_sound() {
    let app = TestApp::start().await;
    for (name, token) in forged_id_tokens(&app).await {
        let (status, body) = app
            .request(Some(&token), Method::GET, "/volumes", None)
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{name}: {body}");
        assert_eq!(body, json!({ "message": BAD_TOKEN }), "{name}");
    }
    // The controls: the real key with live claims is accepted (so the
    // expired one failed only for its expiry); a tampered token keeps the
    // genuine header and signature.
    let live = signed_with_real_key(&app, &app.token, |c| {
        c["exp"] = json!(now_secs() + 600);
    })
    .await;
    let (status, body) = app
        .request(Some(&live), Method::GET, "/volumes", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (genuine, forged) = (
        app.token.split('.').collect::<Vec<_>>(),
        tampered(&app.token, |c| c["admin"] = json!(false)),
    );
    let forged: Vec<&str> = forged.split('.').collect();
    assert_eq!((genuine[0], genuine[2]), (forged[0], forged[2]));

    // Another tenant's genuine token works, on its own tenant only: the
    // admin's volume is a 404 to it, exactly like a missing one.
    app.create_policy("p", 0, 0, 0).await;
    app.create_volume("v", 1, "p").await;
    let (status, body) = app.get("/volumes/v").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let other = other_tenant_id_token(&app).await;
    let (status, body) = app
        .request(Some(&other), Method::GET, "/volumes", None)
        .await;
    assert_eq!((status, body), (StatusCode::OK, json!([])));
    for path in ["/volumes/v", "/volumes/no-such-volume"] {
        let (status, body) = app.request(Some(&other), Method::GET, path, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
    }
}

#[tokio::test]
async fn tokens_issued_beyond_the_clock_skew_are_refused() {
    // The default skew (60 s): a token "from" 10 s ahead passes (another
    // host's clock), one from 10 min ahead does not.
    let app = TestApp::start().await;
    let near = issued_ahead_with_real_key(&app, &app.token, 10).await;
    let (status, body) = app
        .request(Some(&near), Method::GET, "/volumes", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let far = issued_ahead_with_real_key(&app, &app.token, 600).await;
    let (status, body) = app.request(Some(&far), Method::GET, "/volumes", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body, json!({ "message": BAD_TOKEN }));

    // A smaller setting refuses what the default let through.
    let strict = TestApp::start_with(TestConfig {
        settings: vec!["token_clock_skew = \"5s\"".into()],
        ..TestConfig::default()
    })
    .await;
    let near = issued_ahead_with_real_key(&strict, &strict.token, 30).await;
    let (status, body) = strict
        .request(Some(&near), Method::GET, "/volumes", None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body, json!({ "message": BAD_TOKEN }));
    let (status, body) = strict.get("/volumes").await;
    assert_eq!(status, StatusCode::OK, "its own tokens pass: {body}");
}
