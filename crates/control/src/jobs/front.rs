//! The front of an attached volume on a storage node (setting `fronts =
//! "nodes"`): the attach job records which node runs it and at which
//! epoch, the node learns it from its fronts poll, opens the volume and
//! reports; the job waits for that report. A volume that is not wholly on
//! storage nodes, that svs serve has open already, or that no node can take
//! keeps its front in svs serve (today's path).

use super::{JobContext, JobError};
use crate::changes::DesiredStateChanges;
use crate::config::FrontsMode;
use crate::front_layout::{export_attachment, ExportRegistry};
use crate::fronts::{
    choose_front_node, FrontCandidate, FrontOutcome, FrontReports, FRONT_OPEN_WAIT,
};
use std::sync::Arc;
use std::time::Duration;
use svs_domain::ManagedBy;
use svs_store::{StorageNodeState, Store, StoreError, StoreResult, Volume};
use tracing::{info, warn};

/// How long bringing a front into svs serve waits for its node to close
/// it (requests in flight there finish rather than being fenced); a dead
/// node never answers, and the new epoch fences it anyway.
const CLOSE_WAIT: Duration = Duration::from_secs(10);

/// Moves a volume's front between storage nodes and svs serve: the attach
/// job, the jobs that need the volume's I/O in svs serve, and the fronts
/// reconciler (a node gone Offline; a front back on a node after a job).
/// Every move takes a new front epoch, so the storage nodes refuse the
/// writes of the front it leaves, alive or not; the attachments' URIs name
/// the new place and the hosts' devices follow them.
#[derive(Clone)]
pub struct FrontMover {
    pub store: Arc<dyn Store>,
    pub exports: Arc<ExportRegistry>,
    pub node_media: Arc<crate::node_media::NodeMediaSync>,
    pub changes: Arc<DesiredStateChanges>,
    pub reports: Arc<FrontReports>,
}

impl FrontMover {
    /// The storage node to run the volume's front: `current` while it is
    /// still usable, else the usable node running the fewest (see
    /// [`choose_front_node`]). None when not every copy of the volume is on
    /// storage-node media, or no node can take it.
    pub async fn node_for(
        &self,
        volume_id: &str,
        current: Option<&str>,
    ) -> StoreResult<Option<String>> {
        let slices = self.store.volume_slices(volume_id).await?;
        let usage = self.store.media_usage().await?;
        let node_managed = |medium: &str| {
            usage
                .iter()
                .any(|u| u.record.medium.id == medium && u.managed_by == ManagedBy::Node)
        };
        if slices.is_empty() || !slices.iter().all(|s| node_managed(&s.slice.medium)) {
            return Ok(None);
        }
        let counts = self.store.front_counts().await?;
        let candidates: Vec<FrontCandidate> = self
            .store
            .storage_nodes()
            .await?
            .into_iter()
            .map(|n| FrontCandidate {
                online: n.state == StorageNodeState::Online,
                has_front_address: n.front_address.is_some(),
                holds_healthy_copy: slices.iter().any(|s| s.node == n.name && !s.lost),
                fronts: counts.get(&n.name).copied().unwrap_or(0),
                node: n.name,
            })
            .collect();
        Ok(choose_front_node(current, &candidates).map(str::to_string))
    }

    /// Moves the front to storage node `node` at a new epoch (returned),
    /// from svs serve (whose exports of the volume close first) or from
    /// another node. None, and nothing changed, while a job still holds the
    /// volume's I/O here (the caller tries again later).
    pub async fn to_node(&self, volume: &Volume, node: &str) -> StoreResult<Option<u64>> {
        let attachments = self.attachments(&volume.id).await?;
        if self.exports.volume_io(&volume.id).is_some() {
            for a in &attachments {
                self.exports.detach(&a.export_name);
            }
            if self.exports.volume_io(&volume.id).is_some() {
                // A job holds it: its writes must not be fenced. The
                // exports reconciler exports the attachments here again.
                return Ok(None);
            }
        }
        // The epoch first: a node polling in between never opens the volume
        // at an epoch another front holds.
        let epoch = self.store.next_front_epoch(&volume.id).await?;
        self.store.set_front_node(&volume.id, Some(node)).await?;
        self.changes.notify();
        info!(volume = %volume.name, node, epoch, "the volume's front goes to a storage node");
        Ok(Some(epoch))
    }

    /// Brings the volume's front into svs serve: its node is told to close
    /// it (waited for, briefly), then every attachment is exported here at
    /// a new epoch. Nothing to do when svs serve runs it already.
    pub async fn to_serve(&self, volume: &Volume) -> StoreResult<()> {
        let Some(node) = self.store.volume_front(&volume.id).await?.node else {
            return Ok(());
        };
        let after = self.reports.last_seq();
        self.store.set_front_node(&volume.id, None).await?;
        self.changes.notify();
        if !self
            .reports
            .wait_closed(&node, &volume.id, after, CLOSE_WAIT)
            .await
        {
            warn!(volume = %volume.name, node, "the storage node did not say it closed the volume's front: \
                  the new epoch fences it");
        }
        for a in self.attachments(&volume.id).await? {
            if a.state != "Attached" {
                continue;
            }
            match export_attachment(
                self.store.as_ref(),
                &self.exports,
                &self.node_media,
                volume,
                &a,
            )
            .await
            {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    warn!(volume = %volume.name, node = %a.node, error = %e, "cannot export the attached volume here yet")
                }
                Err(StoreError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        info!(volume = %volume.name, from = node, "the volume's front is in svs serve");
        Ok(())
    }

    /// The volume's attachments (any state).
    pub(crate) async fn attachments(
        &self,
        volume_id: &str,
    ) -> StoreResult<Vec<svs_store::Attachment>> {
        Ok(self
            .store
            .all_attachments()
            .await?
            .into_iter()
            .filter(|a| a.volume_id == volume_id)
            .collect())
    }
}

/// The storage node running a volume's front, and the epoch it opens at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PlacedFront {
    pub node: String,
    pub epoch: u64,
}

/// Where the volume's front runs for a new attachment: on a storage node
/// (recorded in the store, with a new epoch when the node changes), or
/// None: in svs serve.
pub(super) async fn place_front(
    ctx: &JobContext,
    volume: &Volume,
) -> Result<Option<PlacedFront>, JobError> {
    if ctx.fronts_mode != FrontsMode::Nodes {
        return Ok(None);
    }
    let current = ctx.store.volume_front(&volume.id).await?;
    if current.node.is_none() && ctx.exports.volume_io(&volume.id).is_some() {
        // Another front would fence this one's writes off its copies.
        info!(volume = %volume.name, "the volume's front is open in svs serve already: it stays there");
        return Ok(None);
    }
    let Some(chosen) = ctx
        .front_mover()
        .node_for(&volume.id, current.node.as_deref())
        .await?
    else {
        info!(
            volume = %volume.name,
            "no storage node can run the volume's front (not every copy is on storage nodes, \
             or none is Online with a front address and a healthy copy): it runs in svs serve"
        );
        return Ok(None);
    };
    let chosen = chosen.as_str();
    if current.node.as_deref() == Some(chosen) {
        return Ok(Some(PlacedFront {
            node: chosen.to_string(),
            epoch: current.epoch,
        }));
    }
    match ctx.front_mover().to_node(volume, chosen).await? {
        Some(epoch) => Ok(Some(PlacedFront {
            node: chosen.to_string(),
            epoch,
        })),
        // A job opened it here meanwhile: it stays here.
        None => Ok(None),
    }
}

/// Waits until the front's node reports the volume open at its epoch; Err
/// is why it did not open.
pub(super) async fn wait_front_open(
    ctx: &JobContext,
    volume: &Volume,
    front: &PlacedFront,
) -> Result<(), String> {
    let after = ctx.fronts.last_seq();
    // The node's long poll answers now, with the volume's front.
    ctx.changes.notify();
    match ctx
        .fronts
        .wait_open(&front.node, &volume.id, front.epoch, after, FRONT_OPEN_WAIT)
        .await
    {
        FrontOutcome::Open => Ok(()),
        FrontOutcome::Failed(why) => Err(why),
        FrontOutcome::TimedOut => Err(format!(
            "it did not report the volume open within {} seconds",
            FRONT_OPEN_WAIT.as_secs()
        )),
    }
}
