//! Every protected operation of the API document, walked with every kind of
//! bad credential: no token, a malformed one, forged ones (`alg: none`,
//! HS256 keyed with the public key, tampered claims, expired), an
//! AccessToken, a RefreshToken. Each must answer 401. Another tenant's
//! genuine IdToken must find none of the admin's objects (404). The list of
//! operations comes from `/openapi.json`, so a new route is covered as soon
//! as it exists (the contract test keeps router and document equal).

use crate::harness::forge::{forged_id_tokens, other_tenant_id_token};
use crate::harness::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

/// Path parameters that name an object of a tenant: another tenant gets 404.
const TENANT_OBJECTS: [&str; 3] = ["{volume}", "{policy}", "{job}"];

/// (method, templated path) of every operation that declares security.
async fn protected_operations(app: &TestApp) -> Vec<(Method, String)> {
    let (status, doc) = app.request(None, Method::GET, "/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK, "{doc}");
    let mut operations = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let Ok(method) = method.to_uppercase().parse::<Method>() else {
                continue;
            };
            let secured = operation["security"]
                .as_array()
                .is_some_and(|s| !s.is_empty());
            if secured {
                operations.push((method, path.clone()));
            }
        }
    }
    operations.sort_by(|a, b| (a.1.as_str(), a.0.as_str()).cmp(&(b.1.as_str(), b.0.as_str())));
    operations
}

/// The admin's real objects, so that every path names something that
/// exists: a refusal then comes from the credential, not from a missing
/// object.
struct Objects {
    job: String,
    medium: String,
}

impl Objects {
    fn path(&self, template: &str) -> String {
        template
            .replace("{volume}", "v")
            .replace("{policy}", "p")
            .replace("{snapshot}", "s")
            .replace("{node}", "host-1")
            .replace("{job}", &self.job)
            .replace("{media}", &self.medium)
    }
}

/// A well-formed body for the operations that take one, so that nothing but
/// the credential (or the tenant) can be the reason for a refusal.
fn body_for(method: &Method, template: &str) -> Option<Value> {
    match (method.as_str(), template) {
        ("POST", "/volumes") => {
            Some(json!({"name": "w", "type": "block", "size": 1, "policy": "p"}))
        }
        ("PATCH", "/volumes/{volume}") => Some(json!({"size": 2})),
        ("POST", "/policies") => Some(json!({"name": "q"})),
        ("PATCH", "/policies/{policy}") => Some(json!({"name": "p"})),
        ("POST", "/volumes/{volume}/snapshots/{snapshot}/attachments") => {
            Some(json!({"node": "host-1"}))
        }
        ("PATCH", "/volumes/{volume}/snapshots/{snapshot}/attachments/{node}") => {
            Some(json!({"readonly": true}))
        }
        ("PATCH", "/nodes/{node}") => Some(json!({"address": "127.0.0.1"})),
        ("POST", "/volumes/{volume}/snapshots") => {
            Some(json!({"name": "s2", "consistency": "crash"}))
        }
        ("PATCH", "/volumes/{volume}/snapshots/{snapshot}") => Some(json!({"name": "s"})),
        ("PATCH", "/media/{media}") => Some(json!({"state": "Failed"})),
        ("PATCH", "/jobs/{job}") => Some(json!({"paused": true})),
        ("POST" | "PATCH" | "PUT", _) => Some(json!({})),
        _ => None,
    }
}

async fn call(
    app: &TestApp,
    objects: &Objects,
    authorization: Option<&str>,
    method: &Method,
    template: &str,
) -> (StatusCode, Value) {
    app.request(
        authorization,
        method.clone(),
        &objects.path(template),
        body_for(method, template),
    )
    .await
}

#[tokio::test]
async fn every_protected_route_refuses_every_bad_credential() {
    let app = TestApp::start_with(TestConfig {
        nodes: vec![("host-1", "127.0.0.1")],
        ..TestConfig::default()
    })
    .await;
    app.create_policy("p", 0, 0, 0).await;
    let (_, job) = app.create_volume("v", 1, "p").await;
    let (status, body) = app
        .post(
            "/volumes/v/snapshots",
            json!({"name": "s", "consistency": "crash"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    app.wait_job_of(&body).await;
    let (_, media) = app.get("/media").await;
    let objects = Objects {
        job: job["id"].as_i64().expect("job id").to_string(),
        medium: media[0]["mediaid"].as_str().expect("a medium").to_string(),
    };
    let (status, body) = app.get(&objects.path("/jobs/{job}")).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the job path names a real job: {body}"
    );

    let tokens = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let mut bad: Vec<(String, Option<String>)> = vec![
        ("no token".into(), None),
        ("empty".into(), Some(String::new())),
        ("malformed".into(), Some("not.a.token".into())),
        ("Bearer garbage".into(), Some("Bearer garbage".into())),
        (
            "AccessToken".into(),
            tokens["AccessToken"].as_str().map(str::to_string),
        ),
        (
            "RefreshToken".into(),
            tokens["RefreshToken"].as_str().map(str::to_string),
        ),
    ];
    for (name, token) in forged_id_tokens(&app).await {
        bad.push((name.into(), Some(token)));
    }
    // Sanity: the walk reaches the admin's objects with the genuine token.
    for template in [
        "/volumes/{volume}",
        "/volumes/{volume}/snapshots/{snapshot}",
        "/policies/{policy}",
        "/jobs/{job}",
    ] {
        let (status, body) = app.get(&objects.path(template)).await;
        assert_eq!(status, StatusCode::OK, "{template}: {body}");
    }

    let operations = protected_operations(&app).await;
    assert!(operations.len() >= 20, "{operations:?}");
    for (method, template) in &operations {
        for (name, token) in &bad {
            let (status, body) = call(&app, &objects, token.as_deref(), method, template).await;
            assert_eq!(
                status,
                StatusCode::UNAUTHORIZED,
                "{method} {template} with {name}: {body}"
            );
            assert!(body["message"].is_string(), "{method} {template}: {body}");
        }
    }

    // Another tenant's genuine IdToken: the admin's objects do not exist
    // for it, whatever the method.
    let other = other_tenant_id_token(&app).await;
    let mut checked = 0;
    for (method, template) in &operations {
        if !TENANT_OBJECTS.iter().any(|p| template.contains(p)) {
            continue;
        }
        let (status, body) = call(&app, &objects, Some(&other), method, template).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "{method} {template} as another tenant: {body}"
        );
        checked += 1;
    }
    assert!(checked >= 10, "{checked} tenant-object operations");

    // Nothing the walk sent changed the admin's objects.
    let (status, volume) = app.get("/volumes/v").await;
    assert_eq!(status, StatusCode::OK, "{volume}");
    assert_eq!(volume["size"], 1, "{volume}");
    let (status, volumes) = app.get("/volumes").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(volumes.as_array().map(Vec::len), Some(1), "{volumes}");
    let (_, snapshots) = app.get("/snapshots").await;
    assert_eq!(snapshots.as_array().map(Vec::len), Some(1), "{snapshots}");
    let (_, media) = app.get("/media").await;
    let failed = media
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["state"] != "Online")
        .count();
    assert_eq!(failed, 0, "no medium was failed by the walk: {media}");
}
