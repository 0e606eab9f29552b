//! Jobs: persisted operations (create, delete, resize, attach, ...) that the
//! runner executes, and resumes at start when a stop or a crash interrupted
//! them.
//!
//! Every step records its intent in the store before touching media and is
//! idempotent, so after a crash a job simply runs again from its recorded
//! steps: a slice copy resumes from its step's last checkpoint, a switched
//! slice only has its source removed. The same property makes retrying a job
//! after a transient error safe. A job ends `Done` or `Error`, never stays
//! `Running` once the service is up.
//!
//! `mod.rs` wires: the shared `JobContext` and `JobError`; one module per
//! job kind; `kinds` names each kind's handler (its run and its undo);
//! `runner` executes them.

mod activity;
mod agents;
mod attach;
mod create;
mod delete;
mod filesystem;
mod front;
mod growth;
mod kinds;
mod node_front;
mod preview;
mod recovery;
mod relocate;
mod resize;
mod retry;
mod runner;
mod slice_move;
mod snapshot;
mod steering;
#[cfg(test)]
mod tests;
mod undo;

pub(crate) use crate::planning::slice_label;
pub use crate::planning::{CreatePreview, ResizePreview};
pub use crate::planning::{PlannedRelocation, RelocationScope};
pub use activity::{VolumeActivity, VolumeQuiet};
pub use front::FrontMover;
pub use retry::RetryPolicy;
pub use runner::{JobRunner, LeaseSettings, RunnerParts, RunnerSettings, JOB_RUNNER};

use crate::front_layout::{layout_for_open, ExportRegistry};
use crate::node_media::{NodeMediaSync, REACH_WAIT};
use crate::snapshot_space::refresh_snapshot_space;
use std::sync::Arc;
use svs_common::clock::Clock;
use svs_dataplane::{DataPlane, DataPlaneError, SliceKey, VolumeIo};
use svs_domain::{JobKind, Slice};
use svs_store::{Job, JobEnd, Store, StoreError, Volume};
use thiserror::Error;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Why a job step failed.
#[derive(Debug, Error)]
pub(crate) enum JobError {
    /// Ends the job in Error with this message as its last detail.
    #[error("{0}")]
    Failed(String),
    /// Like `Failed`, but the cause may pass (an interrupted or timed-out
    /// I/O): the job is tried again before it ends with this message.
    #[error("{0}")]
    Transient(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    DataPlane(#[from] DataPlaneError),
    /// The service is stopping: leave the job as it is for the next start.
    #[error("service is stopping")]
    Stopping,
    /// A cancel was asked for before the job committed: it stops here and
    /// the runner undoes it.
    #[error("the job was cancelled")]
    Cancelled,
}

impl JobError {
    /// Whether running the job again may succeed.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            JobError::Transient(_) => true,
            JobError::Store(e) => store_error_is_transient(e),
            JobError::DataPlane(e) => e.is_transient(),
            JobError::Failed(_) | JobError::Stopping | JobError::Cancelled => false,
        }
    }

    /// The error as the job's final message `context: cause`, keeping
    /// whether it is transient. Store errors and stopping pass unchanged:
    /// their text is not for clients, or there is no message at all.
    pub(crate) fn context(self, context: impl std::fmt::Display) -> JobError {
        match self {
            JobError::Stopping | JobError::Cancelled | JobError::Store(_) => self,
            e if e.is_transient() => JobError::Transient(format!("{context}: {e}")),
            e => JobError::Failed(format!("{context}: {e}")),
        }
    }
}

/// Which store errors may pass on their own: a busy or unreachable
/// database, or a booking refused because another writer took the space
/// after this job read it (the retry plans again from fresh figures).
fn store_error_is_transient(e: &StoreError) -> bool {
    e.is_transient() || matches!(e, StoreError::InsufficientSpace { .. })
}

/// What every job works with. Cloned per job (everything shared is behind
/// an `Arc`), with the job's own stop signal.
#[derive(Clone)]
pub(crate) struct JobContext {
    pub store: Arc<dyn Store>,
    pub media: Arc<dyn DataPlane>,
    /// Attached volumes: their shared I/O (live moves go through it).
    pub exports: Arc<ExportRegistry>,
    pub clock: Arc<dyn Clock>,
    /// Bytes per second for copies (`movement_rate`); None = unthrottled.
    pub rate_limit: Option<u64>,
    /// `rate_limit` per node: shared by every slice copy to or from it.
    pub movement: Arc<svs_dataplane::MovementBudgets>,
    /// Bytes a slice copy copies between two checkpoints (at least).
    pub checkpoint_bytes: u64,
    /// How long a job waits for a node's agent to act.
    pub agent_wait: std::time::Duration,
    /// Serves storage nodes' media the data plane does not reach yet.
    pub node_media: Arc<NodeMediaSync>,
    /// Raised when what node agents should do may have changed.
    pub changes: Arc<crate::changes::DesiredStateChanges>,
    /// Setting `fronts`: where attached volumes' fronts run.
    pub fronts_mode: crate::config::FrontsMode,
    /// What storage nodes report open (an attach waits on it).
    pub fronts: Arc<crate::fronts::FrontReports>,
    /// Held while reading free space, planning and booking the plan, so two
    /// jobs never book the same free space.
    pub allocation: Arc<tokio::sync::Mutex<()>>,
    /// Which volumes jobs work on (a job working on a second volume, a
    /// clone's source, marks it too).
    pub activity: Arc<VolumeActivity>,
    /// The job's stop signal: the service's shutdown, or this instance
    /// losing the job's lease. Jobs pause at their next safe point.
    pub shutdown: CancellationToken,
    /// The claim the job runs under (None outside a job): carried in the
    /// calls to a storage node's front, which refuses an older claim's.
    pub claim: Option<svs_front::calls_wire::JobClaim>,
    /// How the job's run is steered (None outside a job): a copy checks the
    /// movement window with it.
    pub steering: Option<Arc<steering::Steering>>,
}

impl JobContext {
    /// `e` stops the run rather than failing the job: the service
    /// stopping, or the job's lease lost — a fenced write shows that
    /// another instance holds the job now (a front refusing this claim's
    /// calls can show it before the lease's renewal does). What the run
    /// began is left for the job's holder, never undone from here.
    fn stopped_by(&self, e: &JobError) -> bool {
        matches!(
            e,
            JobError::Stopping | JobError::Store(StoreError::Fenced { .. })
        ) || self.shutdown.is_cancelled()
    }

    fn check_stopping(&self) -> Result<(), JobError> {
        if self.shutdown.is_cancelled() {
            Err(JobError::Stopping)
        } else {
            Ok(())
        }
    }

    async fn volume(&self, job: &Job) -> Result<Volume, JobError> {
        self.store
            .volume_by_id(&job.object)
            .await?
            .ok_or_else(|| JobError::Failed(format!("volume {} no longer exists", job.object)))
    }

    /// Runs blocking data-plane work off the async workers. A medium the
    /// data plane does not know yet is reached (a storage node's medium
    /// listed a moment ago, see [`NodeMediaSync::reach`]) and the work
    /// tried once more.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl Fn(&dyn DataPlane) -> Result<T, DataPlaneError> + Send + Sync + 'static,
    ) -> Result<T, JobError> {
        let f = Arc::new(f);
        let run = || {
            let (media, f) = (Arc::clone(&self.media), Arc::clone(&f));
            tokio::task::spawn_blocking(move || f(media.as_ref()))
        };
        let mut result = run().await;
        if let Ok(Err(DataPlaneError::UnknownMedium(medium))) = &result {
            if self
                .node_media
                .reach(std::slice::from_ref(medium), REACH_WAIT)
                .await
            {
                result = run().await;
            }
        }
        match result {
            Ok(r) => r.map_err(|e| match e {
                DataPlaneError::Cancelled => JobError::Stopping,
                other => JobError::DataPlane(other),
            }),
            Err(e) => Err(JobError::Failed(format!("data plane task failed: {e}"))),
        }
    }

    /// Waits (bounded) until the data plane reaches `media` (see
    /// [`NodeMediaSync::reach`]); a medium still unreached fails the step
    /// that uses it with the data plane's own error.
    pub(super) async fn reach(&self, media: &[String]) {
        self.node_media.reach(media, REACH_WAIT).await;
    }

    /// Records what snapshots hold (each snapshot's `used`, each medium's
    /// free space) and sets the media's snapshot budgets. Best effort: a
    /// failed measurement leaves the last figures (the snapshot-space
    /// reconciler tries again).
    async fn refresh_snapshot_space(&self) {
        match refresh_snapshot_space(self.store.as_ref(), &self.media).await {
            Ok(r) if r.unmeasured.is_empty() => {}
            Ok(r) => warn!(media = ?r.unmeasured, "snapshot space not measured on some media"),
            Err(e) => warn!(error = %e, "cannot record snapshot space"),
        }
    }

    /// The volume's shared I/O: its exports' if attached, else opened for
    /// as long as the caller holds it.
    pub(super) async fn volume_io(&self, volume: &Volume) -> Result<Arc<dyn VolumeIo>, JobError> {
        // A front on a storage node comes here for the job (snapshots,
        // moves and rebuilds are steered by the front that runs the
        // volume); the fronts reconciler puts it back on a node afterwards.
        // Opened here without that, the new epoch would fence the node's
        // front under its attached hosts.
        if self.exports.volume_io(&volume.id).is_none() {
            self.front_mover().to_serve(volume).await?;
        }
        // The store's lost copies stay lost in this opening (see
        // `VolumeOpening`).
        let opening =
            layout_for_open(self.store.as_ref(), &self.exports, &self.node_media, volume).await?;
        let exports = Arc::clone(&self.exports);
        tokio::task::spawn_blocking(move || exports.open_io(&opening))
            .await
            .map_err(|e| JobError::Failed(format!("data plane task failed: {e}")))?
            .map_err(JobError::DataPlane)
    }

    /// The volume's I/O for a job that works through the volume's front
    /// (snapshots, rollbacks, live moves and rebuilds): the front on its
    /// storage node, steered from here, when one runs it (the front stays
    /// there and the job's bytes never pass through svs serve); else as
    /// [`JobContext::volume_io`].
    pub(super) async fn front_io(&self, volume: &Volume) -> Result<Arc<dyn VolumeIo>, JobError> {
        if self.exports.volume_io(&volume.id).is_none() {
            if let Some(io) = node_front::steered(self, volume).await? {
                return Ok(io);
            }
        }
        self.volume_io(volume).await
    }

    /// Moves volumes' fronts (see [`FrontMover`]).
    pub(crate) fn front_mover(&self) -> FrontMover {
        FrontMover {
            store: Arc::clone(&self.store),
            exports: Arc::clone(&self.exports),
            node_media: Arc::clone(&self.node_media),
            changes: Arc::clone(&self.changes),
            reports: Arc::clone(&self.fronts),
        }
    }

    /// Runs blocking work on a volume's I/O off the async workers.
    pub(super) async fn on_io<T: Send + 'static>(
        &self,
        io: &Arc<dyn VolumeIo>,
        f: impl FnOnce(&dyn VolumeIo) -> std::io::Result<T> + Send + 'static,
    ) -> Result<std::io::Result<T>, JobError> {
        let io = Arc::clone(io);
        tokio::task::spawn_blocking(move || f(io.as_ref()))
            .await
            .map_err(|e| JobError::Failed(format!("data plane task failed: {e}")))
    }

    /// The job's point of no return: from here it finishes, and a cancel is
    /// refused. `Cancelled` when a cancel was asked for first.
    async fn commit(&self, job: &Job) -> Result<(), JobError> {
        if self.store.commit_job(job.id).await? {
            Ok(())
        } else {
            Err(JobError::Cancelled)
        }
    }

    async fn progress(&self, job: &Job, progress: u8, status: &str) -> Result<(), JobError> {
        self.store
            .set_job_progress(job.id, progress, status)
            .await?;
        Ok(())
    }

    /// Ends the job Done. Figures of space it changed are current by then
    /// (a client waiting for Done sees them).
    async fn done(&self, job: &Job, detail: String) -> Result<(), JobError> {
        if job.kind().is_some_and(|k| k.cancellable()) {
            self.commit(job).await?;
        }
        if changes_space(job.kind()) {
            self.refresh_snapshot_space().await;
        }
        info!(detail = %detail, "job done");
        self.store
            .finish_job(job.id, &JobEnd::done(detail, self.clock.now_ms()))
            .await?;
        Ok(())
    }
}

/// Whether a job of this kind may change what is placed or booked on media
/// or what snapshots hold (attachments change neither).
fn changes_space(kind: Option<JobKind>) -> bool {
    !matches!(
        kind,
        Some(
            JobKind::AttachmentCreate
                | JobKind::AttachmentDelete
                | JobKind::AttachmentModify
                | JobKind::VolumeGrowFilesystem
        )
    )
}

/// Progress after `done` of `total` items, below 100 until the job ends.
fn step_progress(done: usize, total: usize) -> u8 {
    u8::try_from(done * 100 / total.max(1))
        .unwrap_or(100)
        .min(99)
}

/// A slice named with its volume, as a job moving slices of many volumes
/// names it: `c1-k0 of volume 'db'`.
pub(crate) fn slice_of_volume(copy: u32, column: u32, volume: &str) -> String {
    format!(
        "{} of volume '{volume}'",
        svs_domain::slice_label(copy, column)
    )
}

/// The data plane's name for a slice of a volume.
pub fn slice_key(volume_id: &str, slice: &Slice) -> SliceKey {
    SliceKey {
        volume_id: volume_id.to_string(),
        copy: slice.copy,
        column: slice.column,
    }
}
