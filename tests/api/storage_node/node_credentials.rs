//! One credential for a host that runs both a storage node and the host
//! agent (`agent+storage`): the real `svs storage-node` registers with it,
//! and the agent's routes take it too; each single-role credential still
//! gets 403 on the other's routes (tests/api/storage_node/storage_nodes.rs).

use crate::harness::cli::Home;
use crate::harness::storage_nodes::{eventually, StorageNodeProcess, TIMEOUT};
use crate::harness::{medium, TestApp, TestConfig};
use reqwest::{Method, StatusCode};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn one_credential_runs_a_hosts_storage_node_and_its_agent() {
    let app = TestApp::start_with(TestConfig {
        media: vec![medium("m1", "host-0", "z0", 10)],
        settings: vec![format!("storage_node_timeout = \"{}s\"", TIMEOUT.as_secs())],
        ..TestConfig::default()
    })
    .await;
    let home = Home::new(false);
    home.login(&app);
    let out = home.ok(&[
        "node",
        "add",
        "hc-1",
        "--address",
        "127.0.0.2",
        "--zone",
        "z1",
        "--role",
        "agent+storage",
    ]);
    assert!(
        out.contains("Agent and storage node credential (shown only this once"),
        "{out}"
    );
    assert!(
        out.contains("svs storage-node --config /etc/svs/storage-node.toml\n  svs agent --url "),
        "{out}"
    );
    assert!(
        out.contains("--node hc-1 --credential-file /etc/svs/storage-node.credential"),
        "{out}"
    );
    let credential = out
        .lines()
        .find(|l| l.starts_with("svsnode."))
        .unwrap_or_default()
        .to_string();

    // The storage node registers with it and its medium comes into service.
    let mut node = StorageNodeProcess::new(&app, "hc-1", "127.0.0.2", &[("h1", 4)], &credential);
    node.start();
    let registered = eventually(Duration::from_secs(20), || async {
        let (_, media) = app.get("/media").await;
        media
            .as_array()
            .is_some_and(|all| all.iter().any(|m| m["mediaid"] == "h1"))
    })
    .await;
    assert!(registered, "{}", node.log());

    // The agent's routes take the same credential.
    let (status, answer) = app
        .request(
            Some(&format!("Bearer {credential}")),
            Method::GET,
            "/nodes/hc-1/agent/attachments",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");

    // The node shows what its credential allows (the console issues a new
    // one of the same role).
    let (status, shown) = app.get("/nodes/hc-1").await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(
        (
            shown["role"].as_str(),
            shown["credentialrole"].as_str(),
            shown["agentcredential"].as_bool()
        ),
        (Some("storage"), Some("agent+storage"), Some(true)),
        "{shown}"
    );

    // Revoked, both processes are refused.
    let (status, _) = app.delete("/nodes/hc-1/credentials").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    for (method, path, body) in [
        (Method::GET, "/nodes/hc-1/agent/attachments", None),
        (
            Method::PUT,
            "/nodes/hc-1/storage",
            Some(json!({"sliceaddress": node.slice_address, "media": []})),
        ),
    ] {
        let (status, answer) = app
            .request(Some(&format!("Bearer {credential}")), method, path, body)
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}: {answer}");
        assert_eq!(answer["message"], "invalid or revoked node credential");
    }
    let (_, shown) = app.get("/nodes/hc-1").await;
    assert_eq!(shown["credentialrole"], json!(null), "{shown}");
}
