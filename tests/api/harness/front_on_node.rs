//! Helpers of the `front_on_node` tests, shared with other test files.

use crate::harness::storage_nodes::{start_node, storage_nodes_config, wait_served, Node};
use crate::harness::TestApp;
use reqwest::StatusCode;
use serde_json::json;
use std::path::PathBuf;

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

/// `host:port` of an `nbd://host:port/export` URI.
pub(crate) fn address_of(uri: &str) -> String {
    uri.split("://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_default()
        .to_string()
}

/// The node whose NBD server of fronts the URI names.
pub(crate) fn front_node<'a>(nodes: &'a [Node], uri: &str) -> &'a Node {
    let address = address_of(uri);
    nodes
        .iter()
        .find(|n| n.process.front_address == address)
        .unwrap_or_else(|| panic!("{uri} names no storage node's front"))
}

/// The file of copy `copy` (one column) on its node's disk.
pub(crate) fn copy_file(nodes: &[Node], medium: &str, volume_id: &str, copy: u64) -> PathBuf {
    let node = nodes
        .iter()
        .find(|n| n.medium == medium)
        .expect("the node of a copy");
    node.process
        .medium_dir(medium)
        .join(volume_id)
        .join(format!("c{copy}-k0.slice"))
}

/// Bytes `[offset, offset + len)` of a file.
pub(crate) fn bytes_at(path: &PathBuf, offset: u64, len: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    buf
}
