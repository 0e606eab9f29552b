//! A job's work on a volume whose front runs on a storage node (setting
//! `fronts = "nodes"`): its snapshots, rollbacks and live slice moves and
//! rebuilds run on that front, steered from here by calls over the slice
//! protocol (`FrontCall`, JSON in `svs_front::calls_wire`), so the
//! front stays where it is (same epoch, the attached hosts see nothing)
//! and the job's bytes go between storage nodes, never through `svs
//! serve`.
//!
//! [`NodeFrontIo`] is the volume's I/O as the jobs know it (`VolumeIo`),
//! with the calls behind it; its plain reads and writes are refused (no
//! job steered there makes any). A live copy's phases are the front's
//! ([`NodeFrontMove`]); this side records its checkpoints and progress,
//! and paces it with grants (`CopyGrants`: `movement_rate` and the nodes'
//! shared budgets stay here).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use svs_dataplane::{
    CopyGrants, CopyOptions, DataPlane, DataPlaneError, SliceCopyKind, SliceMove, VolumeIo,
};
use svs_front::calls_wire::{CopyProgress, FrontAnswer, FrontCall, FrontOp, JobClaim};
use svs_front::wire::FrontNode;

/// A volume's I/O whose front runs on storage node `node` at `epoch`.
pub(crate) struct NodeFrontIo {
    media: Arc<dyn DataPlane>,
    node: String,
    volume_id: String,
    epoch: u64,
    /// The job's claim, carried in every call.
    claim: Option<JobClaim>,
    size: AtomicU64,
    /// Every storage node with its slice address, credential and media: a
    /// copy to a medium gives the front its node.
    nodes: Vec<FrontNode>,
}

/// Names every call of this process uniquely (a call still running is
/// asked again by its name).
fn next_call_id() -> String {
    static PREFIX: OnceLock<String> = OnceLock::new();
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let prefix = PREFIX.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        format!("serve-{}-{nanos:x}", std::process::id())
    });
    format!("{prefix}-{}", COUNT.fetch_add(1, Ordering::Relaxed))
}

fn unsupported(node: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("the volume's front runs on storage node '{node}': its I/O is there"),
    )
}

impl NodeFrontIo {
    pub(crate) fn new(
        media: Arc<dyn DataPlane>,
        node: &str,
        volume_id: &str,
        (epoch, size): (u64, u64),
        nodes: Vec<FrontNode>,
        claim: Option<JobClaim>,
    ) -> NodeFrontIo {
        NodeFrontIo {
            media,
            node: node.to_string(),
            volume_id: volume_id.to_string(),
            epoch,
            claim,
            size: AtomicU64::new(size),
            nodes,
        }
    }

    /// Makes call `id` (`op`), and asks again while it runs: `running`
    /// says what the next ask carries (a fill's grant), or why to stop.
    fn call_as(
        &self,
        id: String,
        op: FrontOp,
        running: &mut dyn FnMut(&FrontAnswer) -> io::Result<Option<u64>>,
    ) -> io::Result<FrontAnswer> {
        let mut call = FrontCall {
            call: id,
            epoch: self.epoch,
            claim: self.claim,
            op,
        };
        loop {
            let request = serde_json::to_vec(&call).map_err(io::Error::other)?;
            let reply = self
                .media
                .front_call(&self.node, &self.volume_id, &request)?;
            let answer: FrontAnswer = serde_json::from_slice(&reply).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("an answer of the front is not one: {e}"),
                )
            })?;
            if !answer.running {
                return Ok(answer);
            }
            call.op = FrontOp::Poll {
                grant: running(&answer)?,
            };
        }
    }

    fn call(&self, op: FrontOp) -> io::Result<FrontAnswer> {
        self.call_as(next_call_id(), op, &mut |_| Ok(None))
    }

    /// A failed call, said as the front said it (without the slice
    /// protocol's wrapping).
    fn failed(&self, source: io::Error) -> DataPlaneError {
        let source = match svs_sliceproto::remote_error(&source) {
            Some(remote) => io::Error::new(source.kind(), remote.message.clone()),
            None => source,
        };
        DataPlaneError::Front {
            node: self.node.clone(),
            source,
        }
    }

    /// A snapshot operation on the front; its failure as the front said
    /// it, naming the front's node.
    fn change(&self, op: FrontOp) -> io::Result<()> {
        self.call(op).map(drop).map_err(|e| {
            let kind = e.kind();
            io::Error::new(kind, self.failed(e).to_string())
        })
    }

    /// The node of `medium`, when a storage node holds it.
    pub(super) fn node(&self) -> &str {
        &self.node
    }

    /// Begins a clone's copy on the front: snapshot `snapshot` (`size`
    /// bytes) of this volume into volume `target`, whose front runs on the
    /// same node at `target_epoch`. Its phases are a fill and a finish.
    pub(super) fn begin_clone(
        self: Arc<Self>,
        snapshot: u64,
        size: u64,
        (target, target_epoch): (&str, u64),
    ) -> Result<Box<dyn SliceMove>, DataPlaneError> {
        let id = next_call_id();
        let op = FrontOp::BeginClone {
            snapshot,
            size,
            target: target.to_string(),
            targetepoch: target_epoch,
        };
        self.call_as(id.clone(), op, &mut |_| Ok(None))
            .map_err(|e| self.failed(e))?;
        Ok(Box::new(NodeFrontMove {
            io: self,
            copy: id,
            starts_at: 0,
            in_place: false,
        }))
    }

    fn node_of(&self, medium: &str) -> Option<FrontNode> {
        self.nodes
            .iter()
            .find(|n| n.media.iter().any(|m| m == medium))
            .map(|n| FrontNode {
                media: vec![medium.to_string()],
                ..n.clone()
            })
    }
}

impl VolumeIo for NodeFrontIo {
    fn volume_id(&self) -> &str {
        &self.volume_id
    }

    fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    fn set_size(&self, size: u64) {
        self.size.store(size, Ordering::Release);
    }

    fn read(&self, _offset: u64, _buf: &mut [u8]) -> io::Result<()> {
        Err(unsupported(&self.node))
    }

    fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> io::Result<()> {
        Err(unsupported(&self.node))
    }

    fn discard(&self, _offset: u64, _len: u64, _fua: bool) -> io::Result<()> {
        Err(unsupported(&self.node))
    }

    fn flush(&self) -> io::Result<()> {
        Err(unsupported(&self.node))
    }

    fn begin_slice_copy(
        self: Arc<Self>,
        kind: SliceCopyKind,
        copy: u32,
        column: u32,
        to_medium: &str,
        resume_from: u64,
    ) -> Result<Box<dyn SliceMove>, DataPlaneError> {
        let id = next_call_id();
        let op = FrontOp::BeginCopy {
            rebuild: kind == SliceCopyKind::Rebuild,
            copy,
            column,
            medium: to_medium.to_string(),
            resumefrom: resume_from,
            node: self.node_of(to_medium),
        };
        let answer = self
            .call_as(id.clone(), op, &mut |_| Ok(None))
            .map_err(|e| self.failed(e))?;
        let began = answer.began.ok_or_else(|| {
            self.failed(io::Error::new(
                io::ErrorKind::InvalidData,
                "the front began the copy without saying where it starts",
            ))
        })?;
        Ok(Box::new(NodeFrontMove {
            io: self,
            copy: id,
            starts_at: began.startsat,
            in_place: began.inplace,
        }))
    }

    fn snapshot(&self, id: u64) -> io::Result<()> {
        self.change(FrontOp::Snapshot { id })
    }

    fn delete_snapshot(&self, id: u64) -> io::Result<()> {
        self.change(FrontOp::DeleteSnapshot { id })
    }

    fn rollback(&self, id: u64) -> io::Result<()> {
        self.change(FrontOp::Rollback { id })
    }

    fn is_near(&self) -> bool {
        false
    }

    fn reads_near(&self) -> bool {
        false
    }
}

/// A live copy run by the front on its node (see [`NodeFrontIo`]).
struct NodeFrontMove {
    io: Arc<NodeFrontIo>,
    /// Its begin call's id: the front's name for it.
    copy: String,
    starts_at: u64,
    in_place: bool,
}

impl NodeFrontMove {
    fn phase(&self, op: FrontOp) -> Result<(), DataPlaneError> {
        self.io.call(op).map(drop).map_err(|e| self.io.failed(e))
    }
}

impl SliceMove for NodeFrontMove {
    fn starts_at(&self) -> u64 {
        self.starts_at
    }

    fn in_place(&self) -> bool {
        self.in_place
    }

    fn fill(
        &mut self,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(), DataPlaneError> {
        let grants = CopyGrants::new(options);
        let first = match &grants {
            Some(g) => Some(g.next(0)?),
            None => None,
        };
        let id = next_call_id();
        let mut recorded = 0;
        let mut cancel_sent = false;
        let mut granted = first;
        let mut take = |p: &CopyProgress| {
            options.stats.set_counts(&p.counts());
            progress(p.done, p.total);
            if p.checkpoint > recorded {
                if let Some(record) = &options.resume.record {
                    match record(p.checkpoint) {
                        Ok(()) => recorded = p.checkpoint,
                        Err(e) => tracing::warn!(offset = p.checkpoint, error = %e,
                            "cannot record a copy checkpoint; the copy goes on"),
                    }
                }
            }
        };
        let op = FrontOp::Fill {
            copy: self.copy.clone(),
            checkpointbytes: options.resume.every_bytes,
            grant: first,
        };
        let filled = self.io.call_as(id.clone(), op, &mut |answer| {
            // Stopped (the job's lease lost, the service stopping): the
            // node is told at once, before anything else is recorded.
            if !options.cancel.is_cancelled() {
                if let Some(p) = &answer.progress {
                    take(p);
                }
            }
            if options.cancel.is_cancelled() {
                if !cancel_sent {
                    cancel_sent = true;
                    self.io
                        .call_as(id.clone(), FrontOp::Cancel, &mut |_| Ok(None))?;
                }
                // Asked again (with no more bytes) until the fill ends.
                return Ok(granted);
            }
            let copied = answer.progress.as_ref().map_or(0, |p| p.copied);
            if let Some(g) = &grants {
                // Cancelled while pacing: the fill on the node is
                // cancelled below.
                let next = g
                    .next(copied)
                    .map_err(|_| io::Error::from(io::ErrorKind::Interrupted))?;
                granted = Some(next);
            }
            Ok(granted)
        });
        if options.cancel.is_cancelled() {
            if matches!(&filled, Err(e) if e.kind() == io::ErrorKind::Interrupted) && !cancel_sent {
                // Stopped while pacing: the fill on the node is stopped
                // too (its partial target stays, checkpointed).
                let _ = self.io.call_as(id, FrontOp::Cancel, &mut |_| Ok(None));
            }
            return Err(DataPlaneError::Cancelled);
        }
        let answer = filled.map_err(|e| self.io.failed(e))?;
        if let Some(p) = &answer.progress {
            options.stats.set_counts(&p.counts());
            progress(p.done, p.total);
        }
        Ok(())
    }

    fn switch(&mut self) -> Result<(), DataPlaneError> {
        self.phase(FrontOp::Switch {
            copy: self.copy.clone(),
        })
    }

    fn finish(self: Box<Self>) -> Result<(), DataPlaneError> {
        self.phase(FrontOp::Finish {
            copy: self.copy.clone(),
        })
    }

    fn abort(self: Box<Self>) -> Result<(), DataPlaneError> {
        self.phase(FrontOp::Abort {
            copy: self.copy.clone(),
        })
    }
}

/// How long a job waits for the front's node to say the front is open
/// (a node polls again at once when `svs serve` starts).
const OPEN_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The volume's front on its storage node, for a job to steer there. A
/// volume without attachment whose copies are all on storage nodes gets a
/// front on one for the job (`fronts = "nodes"`; the fronts reconciler
/// closes it once no job works on the volume). None when svs serve runs
/// the front (or should), when its node can no longer run it (the front
/// must move anyway), or when the node does not say it has it open at its
/// epoch: the caller then brings the front into svs serve, as before.
pub(super) async fn steered(
    ctx: &super::JobContext,
    volume: &svs_store::Volume,
) -> Result<Option<Arc<dyn VolumeIo>>, super::JobError> {
    Ok(steered_front(ctx, volume)
        .await?
        .map(|io| io as Arc<dyn VolumeIo>))
}

/// As [`steered`], the front itself.
pub(super) async fn steered_front(
    ctx: &super::JobContext,
    volume: &svs_store::Volume,
) -> Result<Option<Arc<NodeFrontIo>>, super::JobError> {
    let mut front = ctx.store.volume_front(&volume.id).await?;
    let node = match front.node {
        Some(node) => {
            let keeps = ctx.front_mover().node_for(&volume.id, Some(&node)).await?;
            if keeps.as_deref() != Some(node.as_str()) {
                return Ok(None);
            }
            node
        }
        None => {
            let Some((node, epoch)) = place_for_job(ctx, volume, None).await? else {
                return Ok(None);
            };
            front.epoch = epoch;
            node
        }
    };
    if !opened(ctx, volume, &node, front.epoch).await {
        return Ok(None);
    }
    let usage = ctx.store.media_usage().await?;
    let nodes = ctx
        .store
        .storage_nodes()
        .await?
        .into_iter()
        .map(|n| FrontNode {
            media: usage
                .iter()
                .filter(|u| u.record.medium.node == n.name)
                .map(|u| u.record.medium.id.clone())
                .collect(),
            sliceaddress: n.slice_address,
            slicecredential: n.slice_credential.unwrap_or_default(),
            node: n.name,
        })
        .collect();
    tracing::info!(volume = %volume.name, node, epoch = front.epoch,
        "the job runs on the volume's front on its storage node");
    Ok(Some(Arc::new(NodeFrontIo::new(
        Arc::clone(&ctx.media),
        &node,
        &volume.id,
        (front.epoch, volume.size * svs_domain::GIB),
        nodes,
        ctx.claim,
    ))))
}

/// Whether `node` says the volume's front is open at `epoch` (waited for,
/// up to [`OPEN_WAIT`]).
async fn opened(
    ctx: &super::JobContext,
    volume: &svs_store::Volume,
    node: &str,
    epoch: u64,
) -> bool {
    // Any report at the epoch will do: a new epoch has none yet.
    let open = ctx
        .fronts
        .wait_open(node, &volume.id, epoch, 0, OPEN_WAIT)
        .await;
    if open != crate::fronts::FrontOutcome::Open {
        tracing::warn!(volume = %volume.name, node, ?open,
            "the volume's front is not open on its storage node: the job runs in svs serve");
        return false;
    }
    true
}

/// The epoch of a front for `volume` (without attachment, every copy on
/// storage nodes, not open in svs serve) on storage node `node`, opened
/// there for a job that works on it beside another volume's front on that
/// node (a clone's copy). None when `node` cannot run it.
pub(super) async fn front_beside(
    ctx: &super::JobContext,
    volume: &svs_store::Volume,
    node: &str,
) -> Result<Option<u64>, super::JobError> {
    let Some((node, epoch)) = place_for_job(ctx, volume, Some(node)).await? else {
        return Ok(None);
    };
    Ok(opened(ctx, volume, &node, epoch).await.then_some(epoch))
}

/// Puts the front of a volume without attachment on a storage node for a
/// job, on `on` when given, else on the node [`FrontMover::node_for`]
/// picks; kept when it runs there already: the node and its epoch. None
/// (the job runs in svs serve) when fronts stay in svs serve, svs serve
/// has the volume open, the volume is attached, or no node (or not `on`)
/// can take it.
///
/// [`FrontMover::node_for`]: super::FrontMover::node_for
async fn place_for_job(
    ctx: &super::JobContext,
    volume: &svs_store::Volume,
    on: Option<&str>,
) -> Result<Option<(String, u64)>, super::JobError> {
    let mover = ctx.front_mover();
    if ctx.fronts_mode != crate::config::FrontsMode::Nodes
        || ctx.exports.volume_io(&volume.id).is_some()
        || !mover.attachments(&volume.id).await?.is_empty()
    {
        return Ok(None);
    }
    let Some(node) = mover.node_for(&volume.id, on).await? else {
        return Ok(None);
    };
    if on.is_some_and(|on| on != node) {
        return Ok(None);
    }
    let front = ctx.store.volume_front(&volume.id).await?;
    if front.node.as_deref() == Some(node.as_str()) {
        return Ok(Some((node, front.epoch)));
    }
    let Some(epoch) = mover.to_node(volume, &node).await? else {
        return Ok(None);
    };
    tracing::info!(volume = %volume.name, node, epoch,
        "the volume's front opens on a storage node for the job");
    Ok(Some((node, epoch)))
}
