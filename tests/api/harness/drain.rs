//! Helpers of the `drain` tests, shared with other test files.

use crate::harness::*;

/// `media` moving data at `rate`, checkpointing every MiB, with host-1
/// allowed to attach.
pub(crate) fn moving_config(media: Vec<TestMedium>, rate: &str) -> TestConfig {
    let mut config = TestConfig {
        media,
        movement_rate: rate.into(),
        nodes: vec![("host-1", "127.0.0.1")],
        ..TestConfig::default()
    };
    config
        .settings
        .push("movement_checkpoint = \"1 MiB\"".into());
    config
}
