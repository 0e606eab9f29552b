//! Media the data plane saw fail (an I/O error on a slice, or the medium's
//! directory gone) are recorded as Failed, and all I/O to them stops: their
//! volumes turn degraded (or failed) and wait for a `volume_recovery` job.

use super::{ReconcileError, Reconciler};
use crate::exports::{fail_medium, ExportRegistry};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use svs_dataplane::DataPlane;
use svs_store::Store;

pub struct MediaHealth {
    pub store: Arc<dyn Store>,
    pub media: Arc<dyn DataPlane>,
    pub exports: Arc<ExportRegistry>,
    pub period: Duration,
}

#[async_trait]
impl Reconciler for MediaHealth {
    fn name(&self) -> &'static str {
        "reconcile-media-health"
    }

    fn period(&self) -> Duration {
        self.period
    }

    async fn reconcile(&self) -> Result<usize, ReconcileError> {
        let seen = self.media.failed_media();
        if seen.is_empty() {
            return Ok(0);
        }
        let usage = self.store.media_usage().await?;
        let mut failed = 0;
        for medium in seen {
            let known_healthy = usage
                .iter()
                .any(|u| u.record.medium.id == medium && !u.failed);
            if known_healthy && fail_medium(self.store.as_ref(), &self.exports, &medium).await? {
                failed += 1;
            }
        }
        Ok(failed)
    }
}
