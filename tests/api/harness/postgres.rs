//! Helpers of the `postgres` tests, shared with other test files.

use crate::harness::*;
use svs_store::test_postgres::TestDatabase;

pub(crate) fn on(db: &TestDatabase) -> TestConfig {
    TestConfig {
        settings: vec![format!("store = \"{}\"", db.url)],
        ..TestConfig::default()
    }
}

/// An instance that keeps no volume bytes: every copy on storage nodes,
/// fronts on them.
pub(crate) fn clustered_on(db: &TestDatabase) -> TestConfig {
    TestConfig {
        settings: vec![
            format!("store = \"{}\"", db.url),
            "storage_nodes_only = true".into(),
            "fronts = \"nodes\"".into(),
        ],
        ..TestConfig::default()
    }
}
