//! Helpers of the `instances` tests, shared with other test files.

use crate::harness::storage_nodes::TIMEOUT;
use crate::harness::*;

/// An instance of the cluster on `db`: no media of its own, fronts on the
/// storage nodes, short leases so that a dead instance's work moves on in
/// seconds.
pub(crate) fn cluster_config(db: &str) -> TestConfig {
    TestConfig {
        settings: vec![
            format!("store = \"{db}\""),
            "storage_nodes_only = true".into(),
            "fronts = \"nodes\"".into(),
            "movement_checkpoint = \"1 MiB\"".into(),
            "job_lease = \"2s\"".into(),
            "job_claim_interval = \"200ms\"".into(),
            "leader_lease = \"2s\"".into(),
            format!("storage_node_timeout = \"{}s\"", TIMEOUT.as_secs()),
            "media_check_period = \"1h\"".into(),
        ],
        // The host that attaches volumes.
        nodes: vec![("host-0", "127.0.0.1")],
        ..TestConfig::default()
    }
}
