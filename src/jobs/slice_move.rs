//! Moving one slice of a resize: copy, verify, switch the placement, remove
//! the source — each recorded, so a restart continues from the last
//! recorded state.
//!
//! Two copy paths: a volume nobody has attached is copied file to file and
//! verified as a whole ([`copy_offline`]); an attached volume is in use, so
//! it moves through its shared I/O, which keeps writes made during the copy
//! and switches with the slice's I/O paused ([`copy_live`]). Either way the
//! copy runs on a blocking thread, stops when the service's shutdown token
//! fires, and reports progress that [`follow_copy`] writes to the job.

use super::{slice_key, JobContext, JobError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use svs_dataplane::{CopyOptions, DataPlane, DataPlaneError, Digest, SliceKey, VolumeIo};
use svs_store::{Job, ResizeStep, StepState, Store, Volume};
use tokio::task::JoinHandle;
use tracing::{info, warn};

/// How often a running copy's progress is written to the job.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(250);

/// Share of the job's progress (0..90) that the moves cover; growing the
/// slices takes the rest.
const MOVES_PROGRESS: usize = 90;

pub(super) async fn move_slice(
    ctx: &JobContext,
    job: &Job,
    volume: &Volume,
    step: &ResizeStep,
    index: usize,
    count: usize,
) -> Result<(), JobError> {
    let target = step.to_medium.clone().unwrap_or_default();
    let (row, key) = step_slice(ctx, volume, step).await?;
    let label = format!(
        "slice c{}-k{} from {} to {target}",
        row.slice.copy, row.slice.column, step.from_medium
    );

    if step.state == StepState::Planned {
        let band = ProgressBand::new(index, count);
        let status = format!("Moving {label} ({} of {count})", index + 1);
        ctx.progress(job, band.at(0, 0), &status).await?;

        let sampler = CopySampler::default();
        let (options, _stop_copy_on_drop) = copy_options(ctx);
        let started = Instant::now();
        let copy = match ctx.exports.volume_io(&volume.id) {
            Some(io) => copy_live(
                io,
                Arc::clone(&ctx.store),
                step.clone(),
                &key,
                &target,
                options,
                sampler.clone(),
            ),
            None => copy_offline(
                Arc::clone(&ctx.media),
                step.from_medium.clone(),
                &key,
                &target,
                options,
                sampler.clone(),
            ),
        };
        let copied = match follow_copy(ctx, job, &status, band, &sampler, copy).await? {
            Ok(copied) => copied,
            Err(DataPlaneError::Cancelled) => return Err(JobError::Stopping),
            Err(e) => return Err(JobError::DataPlane(e).context(format!("Moving {label} failed"))),
        };
        info!(slice = %label, secs = started.elapsed().as_secs_f64(), "slice copied and verified");
        let detail = match copied {
            // Verified as a whole; the placement switches now.
            Copied::Offline(digest) => {
                ctx.check_stopping()?;
                ctx.store.switch_slice(step).await?;
                format!("Moved {label}: copy verified (xxh3-128 {:032x})", digest.0)
            }
            // Verified chunk by chunk; already switched with I/O paused.
            Copied::Live => format!("Moved {label} while in use: copy verified chunk by chunk"),
        };
        ctx.store.add_job_detail(job.id, &detail).await?;
    }
    if step.state != StepState::Done {
        let (from, k) = (step.from_medium.clone(), key.clone());
        ctx.blocking(move |dp| dp.delete_slice(&from, &k)).await?;
        ctx.store.finish_step(step.id).await?;
    }
    Ok(())
}

/// Rebuilds one lost slice of a volume recovery on its planned medium,
/// through the volume's shared I/O: writes made meanwhile reach the new
/// copy, and the placement switches with the slice's I/O paused. The lost
/// file is removed afterwards if its medium still lets us.
pub(super) async fn rebuild_slice(
    ctx: &JobContext,
    job: &Job,
    volume: &Volume,
    io: &Arc<dyn VolumeIo>,
    step: &ResizeStep,
    index: usize,
    count: usize,
) -> Result<(), JobError> {
    let target = step.to_medium.clone().unwrap_or_default();
    let (row, key) = step_slice(ctx, volume, step).await?;
    let label = format!(
        "slice c{}-k{} on {target} (lost on {})",
        row.slice.copy, row.slice.column, step.from_medium
    );
    if step.state == StepState::Planned {
        let band = ProgressBand::new(index, count);
        let status = format!("Rebuilding {label} ({} of {count})", index + 1);
        ctx.progress(job, band.at(0, 0), &status).await?;
        let sampler = CopySampler::default();
        let (options, _stop_copy_on_drop) = copy_options(ctx);
        let copy = {
            let (io, store, step) = (Arc::clone(io), Arc::clone(&ctx.store), step.clone());
            let (copy, column, to) = (key.copy, key.column, target.clone());
            let sampler = sampler.clone();
            let runtime = tokio::runtime::Handle::current();
            tokio::task::spawn_blocking(move || {
                io.rebuild_slice(
                    copy,
                    column,
                    &to,
                    &options,
                    &mut |done, total| sampler.report(done, total),
                    &mut || {
                        runtime
                            .block_on(store.switch_slice(&step))
                            .map_err(|e| e.to_string())
                    },
                )
                .map(|()| Copied::Live)
            })
        };
        match follow_copy(ctx, job, &status, band, &sampler, copy).await? {
            Ok(_) => {}
            Err(DataPlaneError::Cancelled) => return Err(JobError::Stopping),
            Err(e) => {
                return Err(JobError::DataPlane(e).context(format!("Rebuilding {label} failed")))
            }
        }
        ctx.store
            .add_job_detail(
                job.id,
                &format!("Rebuilt {label} from a healthy copy: verified chunk by chunk"),
            )
            .await?;
    }
    if step.state != StepState::Done {
        let (from, k) = (step.from_medium.clone(), key.clone());
        // The failed medium may refuse: its file is lost either way.
        if let Err(e) = ctx.blocking(move |dp| dp.delete_slice(&from, &k)).await {
            warn!(error = %e, "cannot remove a lost slice's file");
        }
        ctx.store.finish_step(step.id).await?;
    }
    Ok(())
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

/// A copy's options, paced by `movement_rate`, with its own stop token: the
/// service's shutdown stops it, and so does dropping the returned guard
/// (the job's future), so no copy thread outlives the step that started it
/// (a retry must never race an earlier copy).
fn copy_options(ctx: &JobContext) -> (CopyOptions, tokio_util::sync::DropGuard) {
    let cancel = ctx.shutdown.child_token();
    let guard = cancel.clone().drop_guard();
    (
        CopyOptions {
            rate_limit: ctx.rate_limit,
            cancel,
        },
        guard,
    )
}

/// How a copy ended well.
enum Copied {
    /// File to file; the target is complete but the placement not switched.
    Offline(Digest),
    /// Through the volume's I/O; the placement is already switched.
    Live,
}

type CopyTask = JoinHandle<Result<Copied, DataPlaneError>>;

/// Copies an unattached slice file to the target medium.
fn copy_offline(
    media: Arc<dyn DataPlane>,
    from: String,
    key: &SliceKey,
    to: &str,
    options: CopyOptions,
    sampler: CopySampler,
) -> CopyTask {
    let (key, to) = (key.clone(), to.to_string());
    tokio::task::spawn_blocking(move || {
        media
            .copy_slice(&from, &to, &key, &options, &mut |done, total| {
                sampler.report(done, total)
            })
            .map(Copied::Offline)
    })
}

/// Moves a slice of an attached volume through its shared I/O; the
/// placement switches (in the store) while the slice's I/O is paused.
fn copy_live(
    io: Arc<dyn VolumeIo>,
    store: Arc<dyn Store>,
    step: ResizeStep,
    key: &SliceKey,
    to: &str,
    options: CopyOptions,
    sampler: CopySampler,
) -> CopyTask {
    let (copy, column, to) = (key.copy, key.column, to.to_string());
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        io.move_slice(
            copy,
            column,
            &to,
            &options,
            &mut |done, total| sampler.report(done, total),
            &mut || {
                runtime
                    .block_on(store.switch_slice(&step))
                    .map_err(|e| e.to_string())
            },
        )
        .map(|()| Copied::Live)
    })
}

/// Waits for the copy to end, writing its progress to the job as it goes.
/// Progress is best effort: a failed write is logged and the wait goes on,
/// because returning early would leave the copy thread running behind the
/// job's back.
async fn follow_copy(
    ctx: &JobContext,
    job: &Job,
    status: &str,
    band: ProgressBand,
    sampler: &CopySampler,
    copy: CopyTask,
) -> Result<Result<Copied, DataPlaneError>, JobError> {
    tokio::pin!(copy);
    let mut last = None;
    let mut tick = tokio::time::interval(PROGRESS_INTERVAL);
    loop {
        tokio::select! {
            finished = &mut copy => {
                return finished.map_err(|e| JobError::Failed(format!("copy task failed: {e}")));
            }
            _ = tick.tick() => {
                let (done, total) = sampler.get();
                let progress = band.at(done, total);
                if last != Some(progress) {
                    last = Some(progress);
                    if let Err(e) = ctx.progress(job, progress, status).await {
                        warn!(error = %e, "cannot record copy progress; the copy goes on");
                    }
                }
            }
        }
    }
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
}
