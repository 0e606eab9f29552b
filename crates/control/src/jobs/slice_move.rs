//! Moving one slice of a resize, or rebuilding one lost slice of a
//! recovery: copy, verify, switch the placement, remove the old file —
//! each recorded, so a restart continues from the last recorded state.
//!
//! One engine for both, and for attached and unattached volumes alike: the
//! copy goes through the volume's shared I/O (opened for the job when
//! nobody attached the volume; an attach meanwhile shares it), in the data
//! plane's phases (see [`svs_dataplane::SliceMove`]): begin, fill (writes
//! made meanwhile are kept), switch (I/O now on the target, the old place
//! still taking every write), then the store commits the new placement
//! here, and the move finishes — or aborts back to the old place when the
//! commit failed. Blocking phases run off the async workers; the store is
//! only called from this async code. The fill stops when the service's
//! shutdown token fires and reports progress that [`follow_copy`] writes to
//! the job.
//!
//! Checkpoints: the fill fsyncs its target now and then and publishes how
//! far it got ([`LatestCheckpoint`]); [`follow_copy`] records it in the
//! step (late is fine: a resume then starts earlier), and a copy
//! interrupted by a crash or a stop resumes there. When begin finds no
//! partial file to resume, the step's checkpoint is forgotten before the
//! fill writes anything. Writes made below the checkpoint are mirrored to
//! the target synchronously (in the same request, before it is
//! acknowledged, and fsynced by every flush and FUA write), so they are on
//! the target whenever they are durable on the source; writes made after a
//! restart and before the resumed copy mirrors again are found in the
//! volume's record of what was written since it was opened (in memory:
//! nothing writes while the service is down). No dirty set needs persisting.

use super::{slice_key, JobContext, JobError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use svs_common::metrics::{MovementMeter, METRICS};
use svs_dataplane::{
    CopyOptions, CopyResume, CopyStats, DataPlaneError, LatestCheckpoint, SliceCopyKind, SliceKey,
    SliceMove, VolumeIo,
};
use svs_domain::units::human_bytes;
use svs_store::{CopyCheckpoint, Job, ResizeStep, StepState, StoreError, Volume};
use tokio::task::JoinHandle;
use tracing::{info, warn};

/// How often a running copy's progress is written to the job.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(250);
/// How often a switch whose commit went unanswered asks the store again.
const SWITCH_OUTCOME_RETRY: Duration = Duration::from_millis(500);

/// Share of the job's progress (0..90) that the moves cover; growing the
/// slices takes the rest.
const MOVES_PROGRESS: usize = 90;

/// What a step's copy does: what differs between a resize's move and a
/// recovery's rebuild.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StepCopy {
    /// Moves a healthy slice to another medium.
    Move,
    /// Rebuilds a lost slice on its planned medium from a healthy copy of
    /// its column; the lost file is removed afterwards if its medium still
    /// lets us.
    Rebuild,
    /// A cancel's move of a switched slice back to where it was: a move.
    MoveBack,
}

impl StepCopy {
    fn kind(self) -> SliceCopyKind {
        match self {
            StepCopy::Move | StepCopy::MoveBack => SliceCopyKind::Move,
            StepCopy::Rebuild => SliceCopyKind::Rebuild,
        }
    }

    /// `volume`: named when the job moves slices of many volumes.
    fn label(
        self,
        slice: &svs_domain::Slice,
        step: &ResizeStep,
        target: &str,
        volume: Option<&str>,
    ) -> String {
        let from = &step.from_medium;
        let name = match volume {
            Some(v) => super::slice_of_volume(slice.copy, slice.column, v),
            None => svs_domain::slice_label(slice.copy, slice.column),
        };
        match self {
            StepCopy::Move => format!("slice {name} from {from} to {target}"),
            StepCopy::MoveBack => format!("slice {name} back from {from} to {target}"),
            StepCopy::Rebuild if *from == target => format!("slice {name} on {target} in place"),
            StepCopy::Rebuild => format!("slice {name} on {target} (lost on {from})"),
        }
    }

    /// A lost copy brought back on the medium it was lost on: its stale
    /// slice there is compared with a healthy copy and only what differs
    /// is rewritten (a storage node that came back, or a medium usable
    /// again).
    fn resyncs(self, step: &ResizeStep) -> bool {
        self == StepCopy::Rebuild && step.to_medium.as_deref() == Some(step.from_medium.as_str())
    }

    /// "Moving …" or "Rebuilding …": the status while it runs, and the
    /// start of the message when it fails.
    fn doing(self, label: &str) -> String {
        match self {
            StepCopy::Move | StepCopy::MoveBack => format!("Moving {label}"),
            StepCopy::Rebuild => format!("Rebuilding {label}"),
        }
    }

    /// The job detail once the copy is committed; `attached`: the volume
    /// had an export meanwhile.
    fn done(self, label: &str, attached: bool) -> String {
        match self {
            StepCopy::Move | StepCopy::MoveBack if attached => {
                format!("Moved {label} while in use: copy verified chunk by chunk")
            }
            StepCopy::Move | StepCopy::MoveBack => {
                format!("Moved {label}: copy verified chunk by chunk")
            }
            StepCopy::Rebuild => {
                format!("Rebuilt {label} from a healthy copy: verified chunk by chunk")
            }
        }
    }
}

/// Runs one step's copy (see the module docs), then removes the old file
/// and marks the step done. A rebuild's old file is lost: its medium may
/// refuse the removal.
pub(super) async fn copy_step(
    ctx: &JobContext,
    job: &Job,
    volume: &Volume,
    step: &ResizeStep,
    (index, count): (usize, usize),
    what: StepCopy,
) -> Result<(), JobError> {
    let target = step.to_medium.clone().unwrap_or_default();
    let (row, key) = step_slice(ctx, volume, step).await?;
    let many = job.kind().is_some_and(|k| k.moves_many_volumes());
    let label = what.label(
        &row.slice,
        step,
        &target,
        many.then_some(volume.name.as_str()),
    );
    if step.state == StepState::Planned {
        let band = ProgressBand::new(index, count);
        let status = format!("{} ({} of {count})", what.doing(&label), index + 1);
        ctx.progress(job, band.at(0, 0), &status).await?;
        let started = Instant::now();
        // A storage node's medium listed a moment ago may not be reached yet.
        ctx.reach(std::slice::from_ref(&target)).await;
        let io = ctx.front_io(volume).await?;
        let copy = StepCopyRun {
            ctx,
            job,
            volume,
            step,
            what,
            label: &label,
            status: &status,
            band,
            attached_at_start: is_attached(ctx, volume).await?,
        };
        let details = |stats: &CopyStats, attached: bool| {
            let copied = if stats.compared() > 0 {
                resynced_detail(&row, &target, stats)
            } else {
                copied_detail(&label, stats)
            };
            [copied, what.done(&label, attached)]
        };
        let stats = copy.run(&io, &key, &target, &details).await?;
        drop(io);
        info!(slice = %label, secs = started.elapsed().as_secs_f64(), copied = stats.copied(),
            compared = stats.compared(), rewritten = stats.rewritten(),
            resumed_at = stats.resumed_at(), "slice copied, verified and switched");
    }
    if step.state != StepState::Done && what.resyncs(step) {
        // The rebuilt slice is the one on `from_medium`: nothing to remove.
        ctx.store.finish_step(step.id).await?;
    } else if step.state != StepState::Done {
        let (from, k) = (step.from_medium.clone(), key.clone());
        let removed = ctx.blocking(move |dp| dp.delete_slice(&from, &k)).await;
        match removed {
            Err(e) if what == StepCopy::Rebuild => {
                warn!(error = %e, "cannot remove a lost slice's file");
            }
            r => r?,
        }
        ctx.store.finish_step(step.id).await?;
    }
    Ok(())
}

/// Whether the volume is attached now (exported here, or by its front on
/// a storage node).
async fn is_attached(ctx: &JobContext, volume: &Volume) -> Result<bool, JobError> {
    if ctx.exports.is_attached(&volume.id) {
        return Ok(true);
    }
    let on_node = ctx.store.volume_front(&volume.id).await?.node.is_some();
    Ok(on_node
        && ctx
            .front_mover()
            .attachments(&volume.id)
            .await?
            .iter()
            .any(|a| a.state == "Attached"))
}

/// The slice a step works on, and its data-plane name.
async fn step_slice(
    ctx: &JobContext,
    volume: &Volume,
    step: &ResizeStep,
) -> Result<(svs_store::SliceRow, SliceKey), JobError> {
    let row = ctx
        .store
        .volume_slices(&volume.id)
        .await?
        .into_iter()
        .find(|r| r.slice.id == step.slice_id)
        .ok_or_else(|| JobError::Failed(format!("slice {} disappeared", step.slice_id)))?;
    let key = slice_key(&volume.id, &row.slice);
    Ok((row, key))
}

/// A copy's options, paced by `movement_rate` per node (the budgets of
/// `nodes`, shared with every other copy to or from them), with its own
/// stop token: the service's shutdown stops it, and so does dropping the
/// returned guard (the job's future), so no copy thread outlives the step
/// that started it (a retry must never race an earlier copy).
fn copy_options(ctx: &JobContext, nodes: &[&str]) -> (CopyOptions, tokio_util::sync::DropGuard) {
    let cancel = ctx.shutdown.child_token();
    let guard = cancel.clone().drop_guard();
    let budgets = ctx.movement.for_nodes(nodes);
    (
        CopyOptions {
            // Nodes unknown: at least this copy keeps to the rate.
            rate_limit: if budgets.is_empty() {
                ctx.rate_limit
            } else {
                None
            },
            budgets,
            cancel,
            // Paused, the job's own rate, the movement window.
            gate: ctx.steering.as_ref().map(|s| s.gate()),
            ..CopyOptions::default()
        },
        guard,
    )
}

/// The nodes whose movement budgets a step's copy draws from: a move's
/// source and target; a rebuild's target (its source is whichever healthy
/// copy the data plane reads from).
async fn step_nodes(
    ctx: &JobContext,
    step: &ResizeStep,
    what: StepCopy,
) -> Result<Vec<String>, JobError> {
    let media = ctx.store.media_usage().await?;
    let node_of = |id: &str| {
        media
            .iter()
            .find(|m| m.record.medium.id == id)
            .map(|m| m.record.medium.node.clone())
    };
    let mut nodes: Vec<String> = step
        .to_medium
        .as_deref()
        .and_then(node_of)
        .into_iter()
        .collect();
    if what != StepCopy::Rebuild {
        nodes.extend(node_of(&step.from_medium));
    }
    Ok(nodes)
}

/// Runs `f` off the async workers.
async fn off_workers<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, JobError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| JobError::Failed(format!("data plane task failed: {e}")))
}

/// One step's copy through the data plane's phases.
struct StepCopyRun<'a> {
    ctx: &'a JobContext,
    job: &'a Job,
    volume: &'a Volume,
    step: &'a ResizeStep,
    what: StepCopy,
    label: &'a str,
    status: &'a str,
    band: ProgressBand,
    /// The volume had an export when the step began.
    attached_at_start: bool,
}

impl StepCopyRun<'_> {
    /// Begin, fill, switch, commit in the store (with the job details
    /// `details` makes of the copy's figures and whether the volume was
    /// attached meanwhile), finish; on failure the data plane goes back to
    /// the place the store still names.
    async fn run(
        &self,
        io: &Arc<dyn VolumeIo>,
        key: &SliceKey,
        target: &str,
        details: &(dyn Fn(&CopyStats, bool) -> [String; 2] + Sync),
    ) -> Result<CopyStats, JobError> {
        let from = self.resume_point().await?;
        let mut copying = {
            let (io, kind, to) = (Arc::clone(io), self.what.kind(), target.to_string());
            let (copy, column) = (key.copy, key.column);
            match off_workers(move || io.begin_slice_copy(kind, copy, column, &to, from)).await? {
                Ok(copying) => copying,
                Err(e) => return Err(self.failed(e).await),
            }
        };
        let nodes = step_nodes(self.ctx, self.step, self.what).await?;
        let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
        let (mut options, _stop_copy_on_drop) = copy_options(self.ctx, &nodes);
        let stats = options.stats.clone();
        if !copying.in_place() {
            if copying.starts_at() == 0 && from > 0 {
                // Nothing to resume: the checkpoint goes before the fill
                // writes anything, so none points into the new file.
                self.ctx
                    .store
                    .record_copy_checkpoint(self.step.id, None)
                    .await?;
            }
            let latest = LatestCheckpoint::default();
            options.resume =
                CopyResume::publishing_to(copying.starts_at(), self.ctx.checkpoint_bytes, &latest);
            let sampler = CopySampler::default();
            let fill = {
                let sampler = sampler.clone();
                tokio::task::spawn_blocking(move || {
                    let filled =
                        copying.fill(&options, &mut |done, total| sampler.report(done, total));
                    (copying, filled)
                })
            };
            let follow = CopyFollow {
                status: self.status,
                band: self.band,
                sampler: &sampler,
                stats: &stats,
                checkpoints: (self.step.id, &latest),
            };
            let (back, filled) = follow_copy(self.ctx, self.job, &follow, fill).await?;
            copying = back;
            if let Err(e) = filled {
                abort(copying).await;
                return Err(self.failed(e).await);
            }
            let (back, switched) = off_workers(move || {
                let switched = copying.switch();
                (copying, switched)
            })
            .await?;
            copying = back;
            if let Err(e) = switched {
                abort(copying).await;
                return Err(self.failed(e).await);
            }
        }
        // Every write since the switch is on both places: the store may
        // name either. Dropped here (the service stopping), the data plane
        // keeps both until the step runs again.
        // Said of an attached volume only: a job's own I/O is not use.
        let attached = if self.attached_at_start {
            Ok(true)
        } else {
            is_attached(self.ctx, self.volume).await
        };
        let attached = match attached {
            Ok(attached) => attached,
            Err(e) => {
                abort(copying).await;
                return Err(e);
            }
        };
        let details = details(&stats, attached);
        if let Err(e) = self.ctx.store.switch_slice(self.step, &details).await {
            // A commit whose answer was lost may have been made: undoing the
            // copy then would leave the store naming files just removed.
            match self.switch_outcome().await {
                Some(true) => {}
                Some(false) => {
                    abort(copying).await;
                    return Err(e.into());
                }
                // Both places keep every write until the step runs again
                // and finds out (a move in place, or the switch made).
                None => return Err(JobError::Stopping),
            }
        }
        if let Err(e) = off_workers(move || copying.finish()).await? {
            return Err(self.failed(e).await);
        }
        Ok(stats)
    }

    /// Whether the step's switch was committed, asked of the store until it
    /// answers; None if the job stops first.
    async fn switch_outcome(&self) -> Option<bool> {
        loop {
            match self.ctx.store.resize_steps(self.step.job_id).await {
                Ok(steps) => {
                    let step = steps.iter().find(|s| s.id == self.step.id);
                    return Some(step.is_some_and(|s| s.state != StepState::Planned));
                }
                Err(e) => warn!(error = %e, "cannot tell whether a slice's switch was committed"),
            }
            tokio::select! {
                _ = self.ctx.shutdown.cancelled() => return None,
                _ = tokio::time::sleep(SWITCH_OUTCOME_RETRY) => {}
            }
        }
    }

    /// The job's error for a failed copy, its cause recorded in the step
    /// (the job's per-slice outcomes show it). A copy that failed
    /// verification is made again from the start once; twice, the slice is
    /// reported and never switched.
    async fn failed(&self, e: DataPlaneError) -> JobError {
        match e {
            // Stopped meanwhile (its lease lost: the node's front refuses
            // the calls of an older claim): whatever failed, the step is
            // left for whoever holds the job next.
            DataPlaneError::Cancelled => JobError::Stopping,
            _ if self.ctx.shutdown.is_cancelled() => JobError::Stopping,
            e => {
                let cause = failure_cause(&e);
                let failures = match self
                    .ctx
                    .store
                    .record_step_failure(self.step.id, cause)
                    .await
                {
                    Ok(n) => n,
                    // The job's lease was taken over: the step and its
                    // copies are the new holder's.
                    Err(StoreError::Fenced { .. }) => return JobError::Stopping,
                    Err(err) => {
                        warn!(error = %err, "cannot record a copy's failure");
                        0
                    }
                };
                let doing = self.what.doing(self.label);
                if matches!(e, DataPlaneError::VerifyFailed { .. }) {
                    if failures < 2 {
                        // Its checkpoint is not trusted either.
                        if let Err(err) = self
                            .ctx
                            .store
                            .record_copy_checkpoint(self.step.id, None)
                            .await
                        {
                            warn!(error = %err, "cannot forget a failed copy's checkpoint");
                        }
                        return JobError::Transient(format!(
                            "{doing} failed: {e}; the copy is made again from the start"
                        ));
                    }
                    return JobError::Failed(format!(
                        "{doing} failed verification twice: {e}; the slice stays where it was"
                    ));
                }
                JobError::DataPlane(e).context(format!("{doing} failed"))
            }
        }
    }

    /// Where the copy may resume: the step's checkpoint. One an older
    /// version took copying file to file (not `live`) is forgotten: that
    /// copy did not keep its target up to date with writes.
    async fn resume_point(&self) -> Result<u64, JobError> {
        let from = match self.step.checkpoint {
            Some(c) if c.live => c.offset,
            Some(_) => {
                self.ctx
                    .store
                    .record_copy_checkpoint(self.step.id, None)
                    .await?;
                0
            }
            None => 0,
        };
        if from > 0 {
            let detail = format!(
                "Resuming the copy of {} from its checkpoint at byte {from} ({})",
                self.label,
                human_bytes(from)
            );
            self.ctx.store.add_job_detail(self.job.id, &detail).await?;
        }
        Ok(from)
    }
}

/// Why a copy failed, in a word a job's per-slice outcome shows: the target
/// full, a node unreachable, the source unreadable, a verification
/// mismatch, or another I/O error.
pub(super) fn failure_cause(e: &DataPlaneError) -> &'static str {
    use std::io::ErrorKind;
    match e {
        DataPlaneError::VerifyFailed { .. } => "verification mismatch",
        _ => match e.source_kind() {
            Some(ErrorKind::StorageFull | ErrorKind::QuotaExceeded) => "target full",
            Some(kind) if svs_dataplane::is_passing(kind) => "node unreachable",
            Some(ErrorKind::ReadOnlyFilesystem | ErrorKind::PermissionDenied) => {
                "target not writable"
            }
            Some(_) if matches!(e, DataPlaneError::Io { op, .. } if op.contains("read")) => {
                "source read error"
            }
            _ => "I/O error",
        },
    }
}

/// Takes a copy back to the place the store names; a failure is logged
/// (the job fails with the error that led here).
async fn abort(copying: Box<dyn SliceMove>) {
    match off_workers(move || copying.abort()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => warn!(error = %e, "cannot undo a slice copy"),
        Err(e) => warn!(error = %e, "cannot undo a slice copy"),
    }
}

/// What a resync in place did, for the job's details: the bytes of the
/// stale copy compared and how many of them differed, e.g. `Resynced
/// slice c1-k0 on m2 in place (stale since generation 3): 4.0 MiB of 1.0
/// GiB rewritten (4194304 of 1073741824 bytes compared)`.
fn resynced_detail(row: &svs_store::SliceRow, medium: &str, stats: &CopyStats) -> String {
    let (copy, column) = (row.slice.copy, row.slice.column);
    let since = match row.stale_generation {
        Some(generation) => format!(" (stale since generation {generation})"),
        None => String::new(),
    };
    let mut detail = format!(
        "Resynced slice c{copy}-k{column} on {medium} in place{since}: {} of {} rewritten \
         ({} of {} bytes compared)",
        human_bytes(stats.rewritten()),
        human_bytes(stats.compared()),
        stats.rewritten(),
        stats.compared(),
    );
    if stats.resumed_at() > 0 {
        detail.push_str(&format!(
            ", resumed from the checkpoint at byte {}",
            stats.resumed_at()
        ));
    }
    detail
}

/// What a finished copy did, for the job's details: the bytes this run
/// copied, where it resumed, what it caught up with.
fn copied_detail(label: &str, stats: &CopyStats) -> String {
    let mut detail = format!(
        "Copied {label}: {} bytes ({}) by this run",
        stats.copied(),
        human_bytes(stats.copied())
    );
    if stats.resumed_at() > 0 {
        detail.push_str(&format!(
            ", resumed from the checkpoint at byte {}",
            stats.resumed_at()
        ));
    }
    if stats.catch_up() > 0 {
        detail.push_str(&format!(
            ", {} of them catching up with writes made during the move",
            human_bytes(stats.catch_up())
        ));
    }
    detail
}

/// What [`follow_copy`] shows and records of a running fill.
struct CopyFollow<'a> {
    status: &'a str,
    band: ProgressBand,
    sampler: &'a CopySampler,
    stats: &'a CopyStats,
    /// The step whose checkpoint is recorded, and where the fill publishes it.
    checkpoints: (i64, &'a LatestCheckpoint),
}

/// Waits for the copy to end, writing its progress to the job as it goes:
/// the percentage, and in the status the bytes copied, the rate and the
/// time left; and recording in the step each new checkpoint the fill made
/// durable (the last one too, once the fill ended). Both are best effort:
/// a failed write is logged and the wait goes on, because returning early
/// would leave the copy thread running behind the job's back.
async fn follow_copy<T>(
    ctx: &JobContext,
    job: &Job,
    follow: &CopyFollow<'_>,
    copy: JoinHandle<T>,
) -> Result<T, JobError> {
    tokio::pin!(copy);
    let started = Instant::now();
    let mut last: Option<(u8, Instant)> = None;
    let mut recorded = 0;
    let mut tick = tokio::time::interval(PROGRESS_INTERVAL);
    let mut meter = MovementMeter::default();
    let held = || ctx.steering.as_ref().and_then(|s| s.hold()).is_some();
    loop {
        tokio::select! {
            finished = &mut copy => {
                record_checkpoint(ctx, follow.checkpoints, &mut recorded).await;
                meter.update(follow.stats.copied(), true);
                return finished.map_err(|e| JobError::Failed(format!("copy task failed: {e}")));
            }
            _ = tick.tick() => {
                record_checkpoint(ctx, follow.checkpoints, &mut recorded).await;
                meter.update(follow.stats.copied(), held());
                let (done, total) = follow.sampler.get();
                let progress = follow.band.at(done, total);
                // A new percentage at once; the byte counts at most once a
                // second in between, which keeps writes few on long moves.
                let due = match last {
                    None => true,
                    Some((shown, at)) => shown != progress || at.elapsed() >= STATUS_INTERVAL,
                };
                if due {
                    last = Some((progress, Instant::now()));
                    let stats = follow.stats;
                    let seen = CopySeen {
                        done,
                        total,
                        copied: stats.copied(),
                        resumed_at: stats.resumed_at(),
                        catch_up: stats.catch_up(),
                    };
                    let text = match ctx.steering.as_ref().and_then(|s| s.hold()) {
                        Some(hold) => hold.status(job.id),
                        None => copy_status(follow.status, &seen, started.elapsed()),
                    };
                    if let Err(e) = ctx.progress(job, progress, &text).await {
                        warn!(error = %e, "cannot record copy progress; the copy goes on");
                    }
                }
            }
        }
    }
}

/// Records the fill's latest checkpoint in the step if it moved on since
/// `recorded`. The store's own error text is logged, never put in a job's
/// message; a checkpoint not recorded only makes a resume start earlier.
async fn record_checkpoint(
    ctx: &JobContext,
    (step_id, latest): (i64, &LatestCheckpoint),
    recorded: &mut u64,
) {
    let offset = latest.get();
    if offset <= *recorded {
        return;
    }
    let checkpoint = CopyCheckpoint { offset, live: true };
    match ctx
        .store
        .record_copy_checkpoint(step_id, Some(checkpoint))
        .await
    {
        Ok(()) => {
            *recorded = offset;
            METRICS.copy_checkpoints.inc();
        }
        Err(e) => warn!(step = step_id, offset, error = %e, "cannot record a copy checkpoint"),
    }
}

/// How often at most the status's byte counts are rewritten while the
/// percentage stays.
const STATUS_INTERVAL: Duration = Duration::from_secs(1);

/// What a running copy reported, as its status shows it.
#[derive(Debug, Clone, Copy, Default)]
struct CopySeen {
    /// Bytes of the copy's total that are done (a resumed copy counts what
    /// earlier runs did).
    done: u64,
    /// What there is to copy as known now: it grows as writes made during
    /// the move add to it.
    total: u64,
    /// Bytes this run copied (its rate).
    copied: u64,
    /// Where this run resumed the slice file (0: from the start).
    resumed_at: u64,
    /// Bytes of the total that writes made during the move added.
    catch_up: u64,
}

/// A copy's status for people: `base` (what is moving, `n of m`), then the
/// bytes copied of the total, the rate of this run and the time left at
/// that rate, where a resumed copy resumed, and what it is catching up
/// with, e.g. `Moving slice c1-k0 from m2 to m3 (1 of 2): 12.0 MiB of
/// 32.0 MiB, 8.0 MiB/s, about 3 s left`. Only `base` until bytes move.
fn copy_status(base: &str, seen: &CopySeen, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64();
    if seen.copied == 0 || seen.total == 0 || secs <= 0.0 {
        if seen.resumed_at > 0 {
            return format!(
                "{base}: resuming at {} of {}",
                human_bytes(seen.done),
                human_bytes(seen.total)
            );
        }
        return base.to_string();
    }
    // Lossy above 2^53 bytes, far beyond what one decimal shows.
    let rate = seen.copied as f64 / secs;
    let left = seen.total.saturating_sub(seen.done) as f64 / rate;
    let mut text = format!(
        "{base}: {} of {}, {}/s, about {} left",
        human_bytes(seen.done),
        human_bytes(seen.total),
        human_bytes(rate as u64),
        human_duration(left),
    );
    if seen.resumed_at > 0 {
        text.push_str(&format!(
            ", resumed from a checkpoint at {}",
            human_bytes(seen.resumed_at)
        ));
    }
    if seen.catch_up > 0 {
        text.push_str(&format!(
            "; catching up with {} written during the move",
            human_bytes(seen.catch_up)
        ));
    }
    text
}

/// Seconds for people, rounded up: "3 s", "2 min 5 s", "1 h 4 min".
fn human_duration(secs: f64) -> String {
    svs_domain::human_duration(secs.max(0.0).ceil() as u64)
}

/// The latest `(done, total)` bytes a copy thread reported.
#[derive(Clone, Default)]
struct CopySampler(Arc<Mutex<(u64, u64)>>);

impl CopySampler {
    fn report(&self, done: u64, total: u64) {
        if let Ok(mut p) = self.0.lock() {
            *p = (done, total);
        }
    }

    fn get(&self) -> (u64, u64) {
        self.0.lock().map(|p| *p).unwrap_or((0, 0))
    }
}

/// The job progress range of one move: move `index` of `count` covers an
/// equal share of 0..90.
#[derive(Clone, Copy)]
struct ProgressBand {
    base: u64,
    span: u64,
}

impl ProgressBand {
    fn new(index: usize, count: usize) -> ProgressBand {
        let count = count.max(1);
        ProgressBand {
            base: (index * MOVES_PROGRESS / count) as u64,
            span: (MOVES_PROGRESS / count) as u64,
        }
    }

    /// Job progress when `done` of `total` bytes are copied.
    fn at(&self, done: u64, total: u64) -> u8 {
        let within = (done * self.span).checked_div(total).unwrap_or(0);
        u8::try_from(self.base + within).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_move_covers_an_equal_share_of_the_first_ninety_percent() {
        let first = ProgressBand::new(0, 2);
        let second = ProgressBand::new(1, 2);
        assert_eq!(first.at(0, 0), 0);
        assert_eq!(first.at(50, 100), 22);
        assert_eq!(second.at(0, 100), 45);
        assert_eq!(second.at(100, 100), 90);
        assert_eq!(ProgressBand::new(0, 1).at(1, 1), 90);
    }

    fn seen(done: u64, total: u64) -> CopySeen {
        CopySeen {
            done,
            total,
            copied: done,
            ..CopySeen::default()
        }
    }

    #[test]
    fn a_copys_status_shows_bytes_rate_and_time_left_once_bytes_move() {
        let base = "Moving slice c1-k0 from m2 to m3 (1 of 2)";
        let second = Duration::from_secs(1);
        assert_eq!(copy_status(base, &seen(0, 100), second), base);
        assert_eq!(copy_status(base, &seen(5, 0), second), base);
        let mib = 1024 * 1024;
        assert_eq!(
            copy_status(base, &seen(12 * mib, 32 * mib), Duration::from_millis(1500)),
            format!("{base}: 12.0 MiB of 32.0 MiB, 8.0 MiB/s, about 3 s left")
        );
        assert_eq!(
            copy_status(base, &seen(mib, 1024 * mib), second),
            format!("{base}: 1.0 MiB of 1.0 GiB, 1.0 MiB/s, about 17 min 3 s left")
        );
    }

    #[test]
    fn a_resumed_copys_rate_counts_only_what_this_run_copied() {
        let base = "Moving slice c1-k0 from m2 to m3 (1 of 1)";
        let mib = 1024 * 1024;
        let resumed = CopySeen {
            done: 20 * mib,
            total: 32 * mib,
            copied: 4 * mib,
            resumed_at: 16 * mib,
            catch_up: 0,
        };
        assert_eq!(
            copy_status(
                base,
                &CopySeen {
                    copied: 0,
                    ..resumed
                },
                Duration::from_secs(1)
            ),
            format!("{base}: resuming at 20.0 MiB of 32.0 MiB")
        );
        assert_eq!(
            copy_status(base, &resumed, Duration::from_secs(1)),
            format!(
                "{base}: 20.0 MiB of 32.0 MiB, 4.0 MiB/s, about 3 s left, \
                 resumed from a checkpoint at 16.0 MiB"
            )
        );
    }

    #[test]
    fn catching_up_with_writes_grows_the_total_and_says_so() {
        let base = "Moving slice c1-k0 from m2 to m3 (1 of 1)";
        let mib = 1024 * 1024;
        // 32 MiB estimated at the start, 8 MiB written during the move.
        let catching_up = CopySeen {
            done: 36 * mib,
            total: 40 * mib,
            copied: 36 * mib,
            resumed_at: 0,
            catch_up: 8 * mib,
        };
        assert_eq!(
            copy_status(base, &catching_up, Duration::from_secs(9)),
            format!(
                "{base}: 36.0 MiB of 40.0 MiB, 4.0 MiB/s, about 1 s left; \
                 catching up with 8.0 MiB written during the move"
            )
        );
        let band = ProgressBand::new(0, 1);
        assert_eq!(
            band.at(36 * mib, 40 * mib),
            81,
            "not stuck at the end of the band"
        );
    }

    #[test]
    fn durations_and_sizes_read_naturally() {
        assert_eq!(human_duration(0.2), "1 s");
        assert_eq!(human_duration(125.0), "2 min 5 s");
        assert_eq!(human_duration(3840.0), "1 h 4 min");
    }
}
