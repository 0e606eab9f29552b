//! Snapshot space stays true: every first write after a snapshot grows
//! what it holds, so each pass measures every medium's snapshot files (a
//! stat each), records the snapshots' `used` and the media's snapshot bytes
//! that changed, and sets the data plane's snapshot budgets from the
//! store's figures (see `crate::snapshot_space`).

use super::{ReconcileError, Reconciler};
use crate::snapshot_space::refresh_snapshot_space;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use svs_dataplane::DataPlane;
use svs_store::Store;

pub struct SnapshotSpace {
    pub store: Arc<dyn Store>,
    pub media: Arc<dyn DataPlane>,
    pub period: Duration,
}

#[async_trait]
impl Reconciler for SnapshotSpace {
    fn name(&self) -> &'static str {
        "reconcile-snapshot-space"
    }

    fn period(&self) -> Duration {
        self.period
    }

    /// Counts the figures it corrected; media it could not measure (each
    /// logged) make the pass incomplete.
    async fn reconcile(&self) -> Result<usize, ReconcileError> {
        let refresh = refresh_snapshot_space(self.store.as_ref(), &self.media).await?;
        if refresh.unmeasured.is_empty() {
            Ok(refresh.changed)
        } else {
            Err(ReconcileError::Incomplete(refresh.unmeasured.len()))
        }
    }
}
