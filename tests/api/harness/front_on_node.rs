//! Helpers of the `front_on_node` tests, shared with other test files.

use crate::harness::storage_nodes::{start_node, storage_nodes_config, wait_served, Node};
use crate::harness::TestApp;
use reqwest::StatusCode;
use serde_json::json;

/// `svs serve` with `fronts = "nodes"` (no medium large enough for a
/// volume: every copy goes to the storage nodes) and three storage nodes,
/// one medium each, in three zones; a policy with three copies on three
/// nodes; host-1 (127.0.0.1) to attach to.
pub(crate) async fn three_nodes(more: &[&str]) -> (TestApp, Vec<Node>) {
    let mut settings = vec!["fronts = \"nodes\"", "agent_wait_secs = 60"];
    settings.extend_from_slice(more);
    let app = TestApp::start_with(storage_nodes_config(&settings)).await;
    let nodes = vec![
        start_node(&app, "sn-1", "127.0.0.2", "z1", "a1").await,
        start_node(&app, "sn-2", "127.0.0.3", "z2", "b1").await,
        start_node(&app, "sn-3", "127.0.0.4", "z3", "c1").await,
    ];
    wait_served(&app, &["a1", "b1", "c1"]).await;
    app.create_policy("three", 2, 1, 0).await;
    let (status, body) = app
        .post(
            "/nodes",
            json!({"name": "host-1", "address": "127.0.0.1", "zone": "z0"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    (app, nodes)
}
