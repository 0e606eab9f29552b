use crate::harness::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const BAD_CREDENTIALS: &str = "Incorrect email or password";
const BAD_TOKEN: &str = "The token is invalid or has expired";
const NOT_SIGNED_IN: &str =
    "Not signed in: send the IdToken from /signin in the authorization header";

fn message(body: &str) -> Value {
    json!({ "message": body })
}

fn short_lived() -> TestConfig {
    TestConfig {
        token_lifetime: "2s".into(),
        refresh_token_lifetime: "2s".into(),
        ..Default::default()
    }
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

async fn sign_out(app: &TestApp, access_token: &str) -> (StatusCode, Value) {
    app.request(
        None,
        Method::POST,
        "/signout",
        Some(json!({ "AccessToken": access_token })),
    )
    .await
}

async fn refresh(app: &TestApp, refresh_token: &str) -> (StatusCode, Value) {
    app.request(
        None,
        Method::POST,
        "/refresh",
        Some(json!({ "RefreshToken": refresh_token })),
    )
    .await
}

/// The status of GET /volumes with this authorization header value.
async fn volumes_with(app: &TestApp, header: &str) -> (StatusCode, Value) {
    app.request(Some(header), Method::GET, "/volumes", None)
        .await
}

#[tokio::test]
async fn signin_returns_bearer_tokens_and_the_id_token_opens_protected_routes() {
    let app = TestApp::start().await;
    let t = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let keys: Vec<&String> = t.as_object().expect("object").keys().collect();
    assert_eq!(keys.len(), 5, "{t}");
    assert_eq!(t["TokenType"], "Bearer");
    assert_eq!(t["ExpiresIn"], 3600);
    for k in ["AccessToken", "IdToken", "RefreshToken"] {
        assert!(t[k].as_str().is_some_and(|s| !s.is_empty()), "{k}");
    }
    let (status, body) = volumes_with(&app, s(&t["IdToken"])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!([]));
}

#[tokio::test]
async fn id_and_access_tokens_are_jwts_signed_by_the_key_in_the_jwks() {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    use ed25519_dalek::Verifier;

    let app = TestApp::start().await;
    let t = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let (status, jwks) = app
        .request(None, Method::GET, "/.well-known/jwks.json", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{jwks}");
    let keys = jwks["keys"].as_array().expect("keys");
    assert_eq!(keys.len(), 1, "{jwks}");
    let jwk = &keys[0];
    assert_eq!(jwk["kty"], "OKP");
    assert_eq!(jwk["crv"], "Ed25519");
    assert_eq!(jwk["alg"], "EdDSA");
    let x: [u8; 32] = URL_SAFE_NO_PAD
        .decode(s(&jwk["x"]))
        .expect("x is base64url")
        .try_into()
        .expect("x is 32 bytes");
    let public = ed25519_dalek::VerifyingKey::from_bytes(&x).expect("Ed25519 key");

    let mut subjects = Vec::new();
    for (field, token_use) in [("IdToken", "id"), ("AccessToken", "access")] {
        let token = s(&t[field]);
        let (header, claims) = jwt_parts(token);
        assert_eq!(header["alg"], "EdDSA", "{field}: {header}");
        assert_eq!(header["kid"], jwk["kid"], "{field}: {header}");
        let (signed, signature) = token.rsplit_once('.').expect("three parts");
        let signature = URL_SAFE_NO_PAD
            .decode(signature)
            .expect("signature is base64url");
        let signature =
            ed25519_dalek::Signature::from_slice(&signature).expect("64-byte signature");
        public
            .verify(signed.as_bytes(), &signature)
            .unwrap_or_else(|e| panic!("{field} signature does not verify: {e}"));

        assert_eq!(claims["iss"], "svs", "{claims}");
        assert_eq!(claims["aud"], "svs", "{claims}");
        assert_eq!(claims["token_use"], token_use, "{claims}");
        assert_eq!(claims["email"], ADMIN_EMAIL, "{claims}");
        assert_eq!(claims["tenant"], "default", "{claims}");
        let sub = s(&claims["sub"]);
        assert!(sub.parse::<i64>().is_ok(), "sub is the user id: {claims}");
        subjects.push(sub.to_string());
        let iat = claims["iat"].as_u64().expect("iat");
        let exp = claims["exp"].as_u64().expect("exp");
        assert_eq!(exp - iat, 3600, "{claims}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(
            iat <= now + 1 && iat + 60 >= now,
            "iat {iat} is now ({now})"
        );
    }
    assert_eq!(subjects[0], subjects[1]);
}

#[tokio::test]
async fn expires_in_follows_the_configured_token_lifetime() {
    let app = TestApp::start_with(TestConfig {
        token_lifetime: "15m".into(),
        ..Default::default()
    })
    .await;
    let t = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    assert_eq!(t["ExpiresIn"], 900);
    let (_, claims) = jwt_parts(s(&t["IdToken"]));
    assert_eq!(
        claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(),
        900
    );
    let (status, r) = refresh(&app, s(&t["RefreshToken"])).await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(r["ExpiresIn"], 900);
}

#[tokio::test]
async fn wrong_password_and_unknown_email_get_the_same_401() {
    let app = TestApp::start().await;
    let attempt = |email: &'static str, password: &'static str| {
        let app = &app;
        async move {
            let started = Instant::now();
            let (status, body) = app
                .request(
                    None,
                    Method::POST,
                    "/signin",
                    Some(json!({"email": email, "password": password})),
                )
                .await;
            (status, body, started.elapsed())
        }
    };
    let mut wrong = Vec::new();
    let mut unknown = Vec::new();
    // Five: the account's free failures (the sixth locks it for a second).
    for _ in 0..5 {
        let (status, body, took) = attempt(ADMIN_EMAIL, "not-the-password").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(body, message(BAD_CREDENTIALS));
        wrong.push(took);
        let (status, body, took) = attempt("nobody@example.com", "not-the-password").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(body, message(BAD_CREDENTIALS));
        unknown.push(took);
    }
    wrong.sort();
    unknown.sort();
    let (w, u) = (wrong[wrong.len() / 2], unknown[unknown.len() / 2]);
    assert!(
        u.as_secs_f64() >= 0.3 * w.as_secs_f64() && w.as_secs_f64() >= 0.3 * u.as_secs_f64(),
        "median wrong-password time {w:?} vs unknown-email time {u:?}"
    );
    // An empty-looking but present password is still just wrong.
    let (status, body, _) = attempt(ADMIN_EMAIL, " ").await;
    assert_eq!(
        (status, body),
        (StatusCode::UNAUTHORIZED, message(BAD_CREDENTIALS))
    );
}

#[tokio::test]
async fn signin_with_missing_or_malformed_fields_is_a_400() {
    let app = TestApp::start().await;
    let cases = [
        (json!({"password": ADMIN_PASSWORD}), "email is required"),
        (json!({"email": ADMIN_EMAIL}), "password is required"),
        (json!({}), "email is required"),
        (
            json!({"email": "", "password": ADMIN_PASSWORD}),
            "email is required",
        ),
        (
            json!({"email": ADMIN_EMAIL, "password": ""}),
            "password is required",
        ),
        (
            json!({"email": null, "password": ADMIN_PASSWORD}),
            "email is required",
        ),
        (
            json!({"email": 7, "password": ADMIN_PASSWORD}),
            "email must be a string",
        ),
        (
            json!({"email": ADMIN_EMAIL, "password": ["x"]}),
            "password must be a string",
        ),
        (
            json!([ADMIN_EMAIL, ADMIN_PASSWORD]),
            "request body must be a JSON object",
        ),
        (json!("text"), "request body must be a JSON object"),
    ];
    for (body, expected) in cases {
        let (status, answer) = app
            .request(None, Method::POST, "/signin", Some(body.clone()))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer, message(expected), "{body}");
    }

    let (status, ct, text) = app
        .send_raw(
            None,
            Method::POST,
            "/signin",
            Some("application/json"),
            b"{\"email\": ".to_vec(),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(ct.starts_with("application/json"), "{ct}");
    let answer: Value = serde_json::from_str(&text).expect("JSON error");
    assert!(
        s(&answer["message"]).starts_with("invalid JSON body: "),
        "{answer}"
    );

    let creds =
        serde_json::to_vec(&json!({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD})).unwrap();
    for content_type in [None, Some("text/plain")] {
        let (status, _, text) = app
            .send_raw(None, Method::POST, "/signin", content_type, creds.clone())
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{content_type:?}: {text}");
        let answer: Value = serde_json::from_str(&text).expect("JSON error");
        assert_eq!(
            answer,
            message("request body must be JSON with content-type: application/json")
        );
    }
}

#[tokio::test]
async fn signin_bodies_over_one_mib_are_a_413() {
    let app = TestApp::start().await;
    let big = json!({"email": ADMIN_EMAIL, "password": "x".repeat(1024 * 1024)});
    let (status, body) = app.request(None, Method::POST, "/signin", Some(big)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body, message("request body is larger than 1048576 bytes"));
}

#[tokio::test]
async fn signout_invalidates_every_refresh_token_of_the_user_and_only_theirs() {
    let app = TestApp::start().await;
    let first = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let second = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    app.add_user("other", "other@example.com", "other-password");
    let other = app.sign_in("other@example.com", "other-password").await;

    // Both of the admin's refresh tokens work before sign-out.
    for t in [&first, &second] {
        let (status, body) = refresh(&app, s(&t["RefreshToken"])).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }

    // The seed's request carries only content-type: no authorization header.
    let (status, body) = sign_out(&app, s(&second["AccessToken"])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({}));

    for t in [&first, &second] {
        let (status, body) = refresh(&app, s(&t["RefreshToken"])).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        assert_eq!(body, message(BAD_TOKEN));
    }
    // Another user's sessions are untouched.
    let (status, body) = refresh(&app, s(&other["RefreshToken"])).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // Signing in again gives a working refresh token.
    let again = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let (status, body) = refresh(&app, s(&again["RefreshToken"])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn id_and_access_tokens_keep_working_after_signout_until_they_expire() {
    let app = TestApp::start().await;
    let t = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let earlier = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let (status, body) = sign_out(&app, s(&t["AccessToken"])).await;
    assert_eq!((status, body), (StatusCode::OK, json!({})));

    // Both sessions' IdTokens still open protected routes.
    for session in [&t, &earlier] {
        let (status, body) = volumes_with(&app, s(&session["IdToken"])).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, body) = app
            .request(
                Some(s(&session["IdToken"])),
                Method::POST,
                "/policies",
                None,
            )
            .await;
        // Authorised: it gets as far as reading the (missing) body.
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    }
    // The AccessTokens are still accepted where AccessTokens are used.
    for session in [&t, &earlier] {
        let (status, body) = sign_out(&app, s(&session["AccessToken"])).await;
        assert_eq!((status, body), (StatusCode::OK, json!({})));
    }
}

#[tokio::test]
async fn signout_with_an_invalid_access_token_is_a_401() {
    let app = TestApp::start().await;
    let t = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let (_, claims) = jwt_parts(s(&t["AccessToken"]));
    let mut forged = s(&t["AccessToken"])
        .split('.')
        .map(String::from)
        .collect::<Vec<_>>();
    {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use base64::Engine;
        let mut claims = claims.clone();
        claims["sub"] = json!("999");
        forged[1] = URL_SAFE_NO_PAD.encode(claims.to_string());
    }
    let forged = forged.join(".");
    for token in [
        "garbage",
        "a.b.c",
        s(&t["IdToken"]),
        s(&t["RefreshToken"]),
        forged.as_str(),
        &format!("Bearer {}", s(&t["AccessToken"])),
    ] {
        let (status, body) = sign_out(&app, token).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token}: {body}");
        assert_eq!(body, message(BAD_TOKEN), "{token}");
    }
    // None of those revoked anything.
    let (status, body) = refresh(&app, s(&t["RefreshToken"])).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    for (body, expected) in [
        (json!({}), "AccessToken is required"),
        (json!({"AccessToken": ""}), "AccessToken is required"),
        (
            json!({"accesstoken": s(&t["AccessToken"])}),
            "AccessToken is required",
        ),
        (json!({"AccessToken": 1}), "AccessToken must be a string"),
        (json!(null), "request body must be a JSON object"),
    ] {
        let (status, answer) = app
            .request(None, Method::POST, "/signout", Some(body.clone()))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer, message(expected), "{body}");
    }
}

#[tokio::test]
async fn refresh_returns_new_working_tokens_and_a_new_refresh_token() {
    let app = TestApp::start().await;
    let t = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    // iat has one-second resolution: make the new tokens differ.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, r) = refresh(&app, s(&t["RefreshToken"])).await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let mut keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "AccessToken",
            "ExpiresIn",
            "IdToken",
            "RefreshToken",
            "TokenType"
        ]
    );
    assert_ne!(r["RefreshToken"], t["RefreshToken"]);
    assert_eq!(r["TokenType"], "Bearer");
    assert_eq!(r["ExpiresIn"], 3600);
    assert_ne!(r["IdToken"], t["IdToken"]);
    assert_ne!(r["AccessToken"], t["AccessToken"]);

    let (_, old) = jwt_parts(s(&t["IdToken"]));
    let (_, new) = jwt_parts(s(&r["IdToken"]));
    for claim in ["sub", "email", "tenant", "iss", "aud", "token_use"] {
        assert_eq!(old[claim], new[claim], "{claim}");
    }
    assert!(new["iat"].as_u64() > old["iat"].as_u64());
    let (_, access) = jwt_parts(s(&r["AccessToken"]));
    assert_eq!(access["token_use"], "access");

    let (status, body) = volumes_with(&app, s(&r["IdToken"])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The rotated refresh token works (once); the refreshed AccessToken
    // signs the user out, which revokes it.
    let (status, again) = refresh(&app, s(&r["RefreshToken"])).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    let (status, body) = sign_out(&app, s(&r["AccessToken"])).await;
    assert_eq!((status, body), (StatusCode::OK, json!({})));
    let (status, body) = refresh(&app, s(&again["RefreshToken"])).await;
    assert_eq!(
        (status, body),
        (StatusCode::UNAUTHORIZED, message(BAD_TOKEN))
    );
}

#[tokio::test]
async fn refresh_with_an_unknown_or_wrong_kind_of_token_is_a_401() {
    let app = TestApp::start().await;
    let t = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let mut tampered = s(&t["RefreshToken"]).to_string();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    for token in [
        "unknown-refresh-token",
        tampered.as_str(),
        s(&t["AccessToken"]),
        s(&t["IdToken"]),
        &format!("Bearer {}", s(&t["RefreshToken"])),
    ] {
        let (status, body) = refresh(&app, token).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token}: {body}");
        assert_eq!(body, message(BAD_TOKEN), "{token}");
    }
    for (body, expected) in [
        (json!({}), "RefreshToken is required"),
        (json!({"RefreshToken": ""}), "RefreshToken is required"),
        (
            json!({"RefreshToken": true}),
            "RefreshToken must be a string",
        ),
        (json!([]), "request body must be a JSON object"),
    ] {
        let (status, answer) = app
            .request(None, Method::POST, "/refresh", Some(body.clone()))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer, message(expected), "{body}");
    }
}

/// Every protected route with a method it answers to.
fn protected_routes() -> Vec<(Method, &'static str)> {
    vec![
        (Method::GET, "/media"),
        (Method::GET, "/media/node-a-m1"),
        (Method::GET, "/nodes"),
        (Method::GET, "/nodes/node-a"),
        (Method::PATCH, "/nodes/node-a"),
        (Method::GET, "/policies"),
        (Method::POST, "/policies"),
        (Method::GET, "/policies/gold"),
        (Method::PATCH, "/policies/gold"),
        (Method::DELETE, "/policies/gold"),
        (Method::GET, "/volumes"),
        (Method::POST, "/volumes"),
        (Method::GET, "/volumes/data"),
        (Method::PATCH, "/volumes/data"),
        (Method::DELETE, "/volumes/data"),
        (Method::GET, "/volumes/data/slices"),
        (Method::GET, "/jobs"),
        (Method::GET, "/jobs/1"),
    ]
}

#[tokio::test]
async fn every_protected_route_needs_the_id_token_and_refuses_the_other_tokens() {
    let app = TestApp::start().await;
    let t = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    app.create_policy("gold", 1, 1, 1).await;
    let refused: Vec<(String, &str)> = vec![
        (s(&t["AccessToken"]).to_string(), BAD_TOKEN),
        (format!("Bearer {}", s(&t["AccessToken"])), BAD_TOKEN),
        (s(&t["RefreshToken"]).to_string(), BAD_TOKEN),
        (format!("Bearer {}", s(&t["RefreshToken"])), BAD_TOKEN),
        ("garbage".to_string(), BAD_TOKEN),
        ("Bearer".to_string(), BAD_TOKEN),
        (format!("Basic {}", s(&t["IdToken"])), BAD_TOKEN),
        (String::new(), NOT_SIGNED_IN),
        ("   ".to_string(), NOT_SIGNED_IN),
    ];
    // A body that would be accepted, so only authorisation can refuse.
    let body = json!({"name": "x", "type": "block", "size": 10, "policy": "gold"});
    for (method, path) in protected_routes() {
        let (status, answer) = app
            .request(None, method.clone(), path, Some(body.clone()))
            .await;
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "{method} {path} without a token: {answer}"
        );
        assert_eq!(answer, message(NOT_SIGNED_IN), "{method} {path}");
        for (header, expected) in &refused {
            let (status, answer) = app
                .request(Some(header), method.clone(), path, Some(body.clone()))
                .await;
            assert_eq!(
                status,
                StatusCode::UNAUTHORIZED,
                "{method} {path} with {header:?}: {answer}"
            );
            assert_eq!(answer, message(expected), "{method} {path} with {header:?}");
        }
        // Not even a malformed body gets past a missing token.
        let (status, _, text) = app
            .send_raw(
                None,
                method.clone(),
                path,
                Some("application/json"),
                b"{oops".to_vec(),
            )
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}: {text}");
    }
    // Nothing was created or changed by the refused calls.
    let (status, volumes) = app.get("/volumes").await;
    assert_eq!((status, volumes), (StatusCode::OK, json!([])));
    let (status, policy) = app.get("/policies/gold").await;
    assert_eq!(status, StatusCode::OK, "{policy}");
    assert_eq!(policy["resiliencymedia"], 1);
}

#[tokio::test]
async fn the_id_token_is_accepted_raw_or_as_a_bearer_token() {
    let app = TestApp::start().await;
    let id = app.token.clone();
    for header in [
        id.clone(),
        format!("Bearer {id}"),
        format!("bearer {id}"),
        format!("BEARER  {id} "),
    ] {
        for path in ["/media", "/nodes", "/policies", "/volumes", "/jobs"] {
            let (status, body) = app.request(Some(&header), Method::GET, path, None).await;
            assert_eq!(status, StatusCode::OK, "{path} with {header:?}: {body}");
        }
    }
}

#[tokio::test]
async fn tampered_tokens_and_tokens_of_another_instance_are_refused() {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    let app = TestApp::start().await;
    let elsewhere = TestApp::start().await;

    let (status, body) = volumes_with(&app, &elsewhere.token).await;
    assert_eq!(
        (status, body),
        (StatusCode::UNAUTHORIZED, message(BAD_TOKEN))
    );

    let (header, claims) = jwt_parts(&app.token);
    let parts: Vec<&str> = app.token.split('.').collect();
    let encode = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
    let mut other_tenant = claims.clone();
    other_tenant["tenant_id"] = json!(claims["tenant_id"].as_i64().unwrap_or(1) + 1);
    other_tenant["tenant"] = json!("elsewhere");
    let mut longer = claims.clone();
    longer["exp"] = json!(claims["exp"].as_u64().unwrap() + 100_000);
    let mut none_alg = header.clone();
    none_alg["alg"] = json!("none");
    let forged = [
        format!("{}.{}.{}", parts[0], encode(&other_tenant), parts[2]),
        format!("{}.{}.{}", parts[0], encode(&longer), parts[2]),
        format!("{}.{}.", encode(&none_alg), parts[1]),
        format!("{}.{}", parts[0], parts[1]),
        format!(
            "{}.{}.{}",
            parts[0],
            parts[1],
            URL_SAFE_NO_PAD.encode([0u8; 64])
        ),
    ];
    for token in &forged {
        let (status, body) = volumes_with(&app, token).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token}: {body}");
        assert_eq!(body, message(BAD_TOKEN), "{token}");
    }
}

#[tokio::test]
async fn public_routes_need_no_token() {
    let app = TestApp::start().await;
    let (status, body) = app.request(None, Method::GET, "/version", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["componentName"], "svs");
    assert!(
        body["version"].as_str().is_some_and(|v| !v.is_empty()),
        "{body}"
    );
    let (status, body) = app
        .request(None, Method::GET, "/.well-known/jwks.json", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body["keys"][0]["kid"]
            .as_str()
            .is_some_and(|k| !k.is_empty()),
        "{body}"
    );
    // A bad token on a public route is ignored rather than refused.
    let (status, _) = app
        .request(Some("garbage"), Method::GET, "/version", None)
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn email_lookup_ignores_surrounding_spaces_and_case() {
    let app = TestApp::start().await;
    for email in [" admin@example.com ", "Admin@Example.COM"] {
        let (status, body) = app
            .request(
                None,
                Method::POST,
                "/signin",
                Some(json!({"email": email, "password": ADMIN_PASSWORD})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{email:?}: {body}");
    }
    // The password is compared exactly.
    let (status, body) = app
        .request(
            None,
            Method::POST,
            "/signin",
            Some(json!({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD.to_uppercase()})),
        )
        .await;
    assert_eq!(
        (status, body),
        (StatusCode::UNAUTHORIZED, message(BAD_CREDENTIALS))
    );
}

/// One wait for every expiry rule on the real binary (the same rules are
/// checked without waiting on a manual clock in `service::auth`):
/// - an expired AccessToken cannot sign out;
/// - an expired IdToken is refused on protected routes, raw or as Bearer;
/// - an expired refresh token is a 401;
/// - after sign-out the IdToken and AccessToken work only until they expire.
#[tokio::test]
async fn tokens_stop_working_when_they_expire_whether_signed_out_or_not() {
    let app = TestApp::start_with(short_lived()).await;
    // Eve's session is left alone; the admin's is signed out.
    app.add_user("acme", "eve@acme.example", "eve-password");
    let eve = app.sign_in("eve@acme.example", "eve-password").await;
    let t = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    assert_eq!(eve["ExpiresIn"], 2);
    assert_eq!(t["ExpiresIn"], 2);

    let (status, body) = volumes_with(&app, s(&eve["IdToken"])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = refresh(&app, s(&eve["RefreshToken"])).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let (status, body) = sign_out(&app, s(&t["AccessToken"])).await;
    assert_eq!((status, body), (StatusCode::OK, json!({})));
    let (status, body) = volumes_with(&app, s(&t["IdToken"])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = refresh(&app, s(&t["RefreshToken"])).await;
    assert_eq!(
        (status, body),
        (StatusCode::UNAUTHORIZED, message(BAD_TOKEN))
    );

    tokio::time::sleep(Duration::from_millis(3100)).await;

    // Not signed out: refresh token, IdToken (raw and Bearer), AccessToken.
    let (status, body) = refresh(&app, s(&eve["RefreshToken"])).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body, message(BAD_TOKEN));
    for header in [
        s(&eve["IdToken"]).to_string(),
        format!("Bearer {}", s(&eve["IdToken"])),
    ] {
        let (status, body) = volumes_with(&app, &header).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        assert_eq!(body, message(BAD_TOKEN));
    }
    let (status, body) = sign_out(&app, s(&eve["AccessToken"])).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body, message(BAD_TOKEN));

    // Signed out: the IdToken and AccessToken have expired too.
    let (status, body) = volumes_with(&app, s(&t["IdToken"])).await;
    assert_eq!(
        (status, body),
        (StatusCode::UNAUTHORIZED, message(BAD_TOKEN))
    );
    let (status, body) = sign_out(&app, s(&t["AccessToken"])).await;
    assert_eq!(
        (status, body),
        (StatusCode::UNAUTHORIZED, message(BAD_TOKEN))
    );
}
