//! The front of an attached volume on a storage node (setting `fronts =
//! "nodes"`): the attach job records which node runs it and at which
//! epoch, the node learns it from its fronts poll, opens the volume and
//! reports; the job waits for that report. A volume that is not wholly on
//! storage nodes, that svs serve has open already, or that no node can take
//! keeps its front in svs serve (today's path).

use super::{JobContext, JobError};
use crate::config::FrontsMode;
use crate::fronts::{choose_front_node, FrontCandidate, FrontOutcome, FRONT_OPEN_WAIT};
use svs_domain::ManagedBy;
use svs_store::{StorageNodeState, Volume};
use tracing::{info, warn};

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
    let slices = ctx.store.volume_slices(&volume.id).await?;
    let usage = ctx.store.media_usage().await?;
    let node_managed = |medium: &str| {
        usage
            .iter()
            .any(|u| u.record.medium.id == medium && u.managed_by == ManagedBy::Node)
    };
    if slices.is_empty() || !slices.iter().all(|s| node_managed(&s.slice.medium)) {
        info!(volume = %volume.name, "not every copy is on storage nodes: the front runs in svs serve");
        return Ok(None);
    }
    let counts = ctx.store.front_counts().await?;
    let candidates: Vec<FrontCandidate> = ctx
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
    let Some(chosen) = choose_front_node(current.node.as_deref(), &candidates) else {
        warn!(
            volume = %volume.name,
            "no storage node can run the volume's front (none is Online with a front address \
             and a healthy copy): it runs in svs serve"
        );
        return Ok(None);
    };
    if current.node.as_deref() == Some(chosen) {
        return Ok(Some(PlacedFront {
            node: chosen.to_string(),
            epoch: current.epoch,
        }));
    }
    // The epoch first: a node polling in between never opens the volume at
    // an epoch another front holds.
    let epoch = ctx.store.next_front_epoch(&volume.id).await?;
    ctx.store.set_front_node(&volume.id, Some(chosen)).await?;
    info!(volume = %volume.name, node = chosen, epoch, "the volume's front goes to a storage node");
    Ok(Some(PlacedFront {
        node: chosen.to_string(),
        epoch,
    }))
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
