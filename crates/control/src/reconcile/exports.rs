//! Attached volumes are exported: every attachment the store records as
//! `Attached` has its NBD export open (after a restart, or when opening it
//! failed once).

use super::{ReconcileError, Reconciler};
use crate::front_layout::{export_attachment, ExportRegistry};
use crate::jobs::VolumeActivity;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use svs_store::{Attachment, Store};
use tracing::error;

pub struct ExportsReconciler {
    pub store: Arc<dyn Store>,
    pub exports: Arc<ExportRegistry>,
    pub node_media: Arc<crate::node_media::NodeMediaSync>,
    pub activity: Arc<VolumeActivity>,
    pub period: Duration,
}

/// The state of an attachment whose export is open.
const ATTACHED: &str = "Attached";

/// What became of one attachment that lacked its export.
enum Outcome {
    Opened,
    /// A job works on the volume, or the attachment changed meanwhile.
    LeftAlone,
    Failed,
}

impl ExportsReconciler {
    fn needs_export(&self, a: &Attachment) -> bool {
        // A front on a storage node exports it there, not here.
        a.state == ATTACHED && a.front_node.is_none() && !self.exports.is_exported(&a.export_name)
    }

    /// Opens one attachment's export.
    async fn export(&self, a: &Attachment) -> Result<Outcome, ReconcileError> {
        // Attach, detach and delete jobs decide a volume's exports while they
        // run; the attachment is read again once none can.
        let Some(_quiet) = self.activity.try_quiet(&a.volume_id) else {
            return Ok(Outcome::LeftAlone);
        };
        let Some(a) = self
            .store
            .get_attachment(&a.volume_id, &a.snapshot, &a.node)
            .await?
        else {
            return Ok(Outcome::LeftAlone);
        };
        let Some(volume) = self.store.volume_by_id(&a.volume_id).await? else {
            return Ok(Outcome::LeftAlone);
        };
        if !self.needs_export(&a) {
            return Ok(Outcome::LeftAlone);
        }
        match export_attachment(
            self.store.as_ref(),
            &self.exports,
            &self.node_media,
            &volume,
            &a,
        )
        .await
        {
            Ok(Ok(())) => Ok(Outcome::Opened),
            Ok(Err(e)) => {
                error!(volume = %a.volume_id, node = %a.node, error = %e, "cannot export attached volume");
                Ok(Outcome::Failed)
            }
            // Its snapshot's deletion removes it.
            Err(svs_store::StoreError::NotFound) => Ok(Outcome::LeftAlone),
            Err(e) => Err(e.into()),
        }
    }
}

#[async_trait]
impl Reconciler for ExportsReconciler {
    fn name(&self) -> &'static str {
        "reconcile-exports"
    }

    fn period(&self) -> Duration {
        self.period
    }

    async fn reconcile(&self) -> Result<usize, ReconcileError> {
        let (mut opened, mut failed) = (0, 0);
        for a in self.store.all_attachments().await? {
            if !self.needs_export(&a) {
                continue;
            }
            match self.export(&a).await? {
                Outcome::Opened => opened += 1,
                Outcome::LeftAlone => {}
                Outcome::Failed => failed += 1,
            }
        }
        if failed > 0 {
            return Err(ReconcileError::Incomplete(failed));
        }
        Ok(opened)
    }
}
