//! Roles: infrastructure routes are for administrators only.

use crate::harness::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

const ADMIN_REQUIRED: &str = "this operation requires an administrator";

fn with_node() -> TestConfig {
    TestConfig {
        nodes: vec![("client-1", "127.0.0.1")],
        ..TestConfig::default()
    }
}

async fn patch_node(app: &TestApp, token: &str, node: &str, body: Value) -> (StatusCode, Value) {
    app.request(
        Some(token),
        Method::PATCH,
        &format!("/nodes/{node}"),
        Some(body),
    )
    .await
}

async fn address(app: &TestApp, node: &str) -> Value {
    let (status, node) = app.get(&format!("/nodes/{node}")).await;
    assert_eq!(status, StatusCode::OK, "{node}");
    node["address"].clone()
}

#[tokio::test]
async fn a_user_who_is_not_an_administrator_cannot_change_a_node_address() {
    let app = TestApp::start_with(with_node()).await;
    let eve = app.user_in_tenant("acme", "eve@acme.example").await;
    // Nor can a plain user of the administrator's own tenant.
    let bob = app.user_in_tenant("default", "bob@example.com").await;
    for token in [&eve, &bob] {
        for (node, body) in [
            ("client-1", json!({"address": "10.9.9.9"})),
            ("client-1", json!({"address": ""})),
            // Refused before the body or the node is looked at.
            ("client-1", json!({"address": "not-an-ip"})),
            ("client-1", json!({})),
            ("nope", json!({"address": "10.9.9.9"})),
        ] {
            let (status, answer) = patch_node(&app, token, node, body.clone()).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{node} {body}: {answer}");
            assert_eq!(answer, json!({ "message": ADMIN_REQUIRED }), "{body}");
        }
        // Reading nodes stays open to every signed-in user.
        let (status, node) = app
            .request(Some(token), Method::GET, "/nodes/client-1", None)
            .await;
        assert_eq!(status, StatusCode::OK, "{node}");
    }
    assert_eq!(address(&app, "client-1").await, "127.0.0.1");
}

#[tokio::test]
async fn administrators_of_any_tenant_can_change_a_node_address() {
    let app = TestApp::start_with(with_node()).await;
    // The first user (from SVS_ADMIN_*) is an administrator.
    let (status, answer) =
        patch_node(&app, &app.token, "client-1", json!({"address": "10.0.0.5"})).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(
        answer,
        json!({"Message": "Node updated", "ObjectID": "client-1"})
    );
    assert_eq!(address(&app, "client-1").await, "10.0.0.5");

    // So is a user added with `svs user add --admin`, in another tenant.
    app.add_user_as("ops", "root@ops.example", "ops-password", true);
    let tokens = app.sign_in("root@ops.example", "ops-password").await;
    let ops = tokens["IdToken"].as_str().expect("IdToken").to_string();
    let (_, claims) = jwt_parts(&ops);
    assert_eq!(claims["admin"], true, "{claims}");
    let (status, answer) = patch_node(&app, &ops, "client-1", json!({"address": ""})).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(address(&app, "client-1").await, "");
    // An administrator still gets the usual answers to bad requests.
    let (status, answer) =
        patch_node(&app, &ops, "client-1", json!({"address": "not-an-ip"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let (status, answer) = patch_node(&app, &ops, "nope", json!({"address": "10.0.0.1"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
}

#[tokio::test]
async fn the_id_token_says_whether_the_user_is_an_administrator() {
    let app = TestApp::start().await;
    let eve = app.user_in_tenant("acme", "eve@acme.example").await;
    let (_, admin) = jwt_parts(&app.token);
    let (_, eve) = jwt_parts(&eve);
    assert_eq!(admin["admin"], true, "{admin}");
    assert_eq!(eve["admin"], false, "{eve}");
}
