//! Where attached volumes' fronts run (setting `fronts = "nodes"`): a front
//! whose storage node can no longer run it (Offline, or without a front
//! address) moves to another node holding a copy, or into svs serve when none
//! can; a front that a job brought into svs serve goes back to a storage
//! node once no job works on the volume; a front a job opened on a node for
//! a volume without attachment closes once no job works on it. Each move
//! takes a new front epoch
//! (the front it leaves is fenced, alive or not) and the hosts' devices
//! follow the attachment's new address.

use super::{ReconcileError, Reconciler};
use crate::jobs::{FrontMover, VolumeActivity};
use async_trait::async_trait;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use svs_store::StoreError;
use tracing::{info, warn};

pub struct FrontPlacement {
    pub mover: FrontMover,
    pub activity: Arc<VolumeActivity>,
    pub period: Duration,
}

/// The state of an attachment whose export is open.
const ATTACHED: &str = "Attached";

impl FrontPlacement {
    /// Puts one attached volume's front where it should run; true when it
    /// moved.
    async fn place(&self, volume_id: &str) -> Result<bool, StoreError> {
        // A job working on the volume has its front in svs serve (or an
        // attach job is placing it): left alone until it ends.
        let Some(_quiet) = self.activity.try_quiet(volume_id) else {
            return Ok(false);
        };
        let store = &self.mover.store;
        let Some(volume) = store.volume_by_id(volume_id).await? else {
            return Ok(false);
        };
        let current = store.volume_front(volume_id).await?.node;
        let wanted = self.mover.node_for(volume_id, current.as_deref()).await?;
        match (current, wanted) {
            (Some(from), Some(to)) if from == to => Ok(false),
            (Some(from), Some(to)) => {
                warn!(volume = %volume.name, from, to,
                      "the volume's front moves: its storage node can no longer run it");
                Ok(self.mover.to_node(&volume, &to).await?.is_some())
            }
            (Some(from), None) => {
                warn!(volume = %volume.name, from,
                      "no storage node can run the volume's front any more: it runs in svs serve");
                self.mover.to_serve(&volume).await?;
                Ok(true)
            }
            (None, Some(to)) => {
                info!(volume = %volume.name, to, "the volume's front goes back to a storage node");
                Ok(self.mover.to_node(&volume, &to).await?.is_some())
            }
            (None, None) => Ok(false),
        }
    }

    /// Closes the front a job opened on a storage node for a volume
    /// without attachment, once no job works on the volume (an attachment
    /// made meanwhile keeps it); true when it did.
    async fn close_job_front(&self, volume_id: &str) -> Result<bool, StoreError> {
        let Some(_quiet) = self.activity.try_quiet(volume_id) else {
            return Ok(false);
        };
        let closed = self.mover.store.clear_unattached_front(volume_id).await?;
        if closed {
            self.mover.changes.notify();
            info!(
                volume = volume_id,
                "the volume's front on a storage node closes: no job works on it"
            );
        }
        Ok(closed)
    }
}

#[async_trait]
impl Reconciler for FrontPlacement {
    fn name(&self) -> &'static str {
        "reconcile-fronts"
    }

    fn period(&self) -> Duration {
        self.period
    }

    async fn reconcile(&self) -> Result<usize, ReconcileError> {
        let attached: BTreeSet<String> = self
            .mover
            .store
            .all_attachments()
            .await?
            .into_iter()
            .filter(|a| a.state == ATTACHED)
            .map(|a| a.volume_id)
            .collect();
        let mut moved = 0;
        for volume_id in attached {
            match self.place(&volume_id).await {
                Ok(true) => moved += 1,
                Ok(false) | Err(StoreError::NotFound) => {}
                Err(e) => return Err(e.into()),
            }
        }
        for volume_id in self.mover.store.unattached_fronts().await? {
            if self.close_job_front(&volume_id).await? {
                moved += 1;
            }
        }
        Ok(moved)
    }
}
