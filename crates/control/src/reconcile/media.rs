//! Media the data plane saw fail (an I/O error on a slice, or the medium's
//! directory gone) are recorded as Failed, and all I/O to them stops: their
//! volumes turn degraded (or failed) and wait for a `volume_recovery` job.
//! Copies it saw lost alone (a file missing from a medium that still reads)
//! are recorded lost, their media left in service.
//!
//! A backstop: the data plane's I/O failures are recorded as they happen
//! and a recovery probes its volume first (see `crate::media_health`);
//! this poll finds the rest (a directory gone that no I/O touched, a record
//! that failed).

use super::{ReconcileError, Reconciler};
use crate::front_layout::ExportRegistry;
use crate::media_health::{fail_all, lose_copies};
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
        let failed = fail_all(self.store.as_ref(), &self.exports, seen).await?;
        let lost = lose_copies(self.store.as_ref(), self.media.failed_copies()).await?;
        Ok(failed + lost)
    }
}
