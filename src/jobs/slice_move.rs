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
//!
//! Checkpoints: the copy fsyncs its target now and then and records how far
//! it got in the step ([`step_copy_options`]); a copy interrupted by a crash
//! or a stop resumes there. Writes made to an attached volume below the
//! checkpoint are mirrored to the target synchronously (in the same request,
//! before it is acknowledged, and fsynced by every flush and FUA write), so
//! they are on the target whenever they are durable on the source; writes
//! made after a restart and before the resumed copy mirrors again are found
//! in the volume's record of what was written since it was opened (in
//! memory: nothing writes while the service is down). No dirty set needs
//! persisting.

use super::{slice_key, JobContext, JobError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use svs_dataplane::{
    CopyOptions, CopyResume, CopyStats, DataPlane, DataPlaneError, Digest, SliceKey, VolumeIo,
};
use svs_domain::units::human_bytes;
use svs_store::{CopyCheckpoint, Job, ResizeStep, StepState, Store, Volume};
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
        let io = ctx.exports.volume_io(&volume.id);
        let (options, _stop_copy_on_drop) =
            step_copy_options(ctx, job, step, &label, io.is_some()).await?;
        let stats = options.stats.clone();
        let started = Instant::now();
        let copy = match io {
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
        let copied = match follow_copy(ctx, job, &status, band, &sampler, &stats, copy).await? {
            Ok(copied) => copied,
            Err(DataPlaneError::Cancelled) => return Err(JobError::Stopping),
            Err(e) => return Err(JobError::DataPlane(e).context(format!("Moving {label} failed"))),
        };
        info!(slice = %label, secs = started.elapsed().as_secs_f64(), copied = stats.copied(),
            resumed_at = stats.resumed_at(), "slice copied and verified");
        ctx.store
            .add_job_detail(job.id, &copied_detail(&label, &stats))
            .await?;
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
        let (options, _stop_copy_on_drop) = step_copy_options(ctx, job, step, &label, true).await?;
        let stats = options.stats.clone();
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
        match follow_copy(ctx, job, &status, band, &sampler, &stats, copy).await? {
            Ok(_) => {}
            Err(DataPlaneError::Cancelled) => return Err(JobError::Stopping),
            Err(e) => {
                return Err(JobError::DataPlane(e).context(format!("Rebuilding {label} failed")))
            }
        }
        ctx.store
            .add_job_detail(job.id, &copied_detail(&label, &stats))
            .await?;
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
            ..CopyOptions::default()
        },
        guard,
    )
}

/// [`copy_options`] for a step's copy, resuming from the step's checkpoint
/// when the same copy path (`live` or file to file) took it, and recording
/// new ones in the step. A checkpoint of the other path is forgotten: only
/// the live path keeps its target up to date with writes.
async fn step_copy_options(
    ctx: &JobContext,
    job: &Job,
    step: &ResizeStep,
    label: &str,
    live: bool,
) -> Result<(CopyOptions, tokio_util::sync::DropGuard), JobError> {
    let from = match step.checkpoint {
        Some(c) if c.live == live => c.offset,
        Some(_) => {
            ctx.store.record_copy_checkpoint(step.id, None).await?;
            0
        }
        None => 0,
    };
    if from > 0 {
        let detail = format!(
            "Resuming the copy of {label} from its checkpoint at byte {from} ({})",
            human_bytes(from)
        );
        ctx.store.add_job_detail(job.id, &detail).await?;
    }
    let (mut options, guard) = copy_options(ctx);
    let (store, step_id) = (Arc::clone(&ctx.store), step.id);
    let runtime = tokio::runtime::Handle::current();
    // Called on the copy's blocking thread. The store's own error text is
    // logged, never put in a job's message.
    let record = move |offset: u64| {
        let checkpoint = (offset > 0).then_some(CopyCheckpoint { offset, live });
        runtime
            .block_on(store.record_copy_checkpoint(step_id, checkpoint))
            .map_err(|e| {
                warn!(step = step_id, offset, error = %e, "cannot record a copy checkpoint");
                "the store did not record it".to_string()
            })
    };
    options.resume = CopyResume::new(from, ctx.checkpoint_bytes, Arc::new(record));
    Ok((options, guard))
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

/// Waits for the copy to end, writing its progress to the job as it goes:
/// the percentage, and in the status the bytes copied, the rate and the
/// time left. Progress is best effort: a failed write is logged and the wait
/// goes on, because returning early would leave the copy thread running
/// behind the job's back.
async fn follow_copy(
    ctx: &JobContext,
    job: &Job,
    status: &str,
    band: ProgressBand,
    sampler: &CopySampler,
    stats: &CopyStats,
    copy: CopyTask,
) -> Result<Result<Copied, DataPlaneError>, JobError> {
    tokio::pin!(copy);
    let started = Instant::now();
    let mut last: Option<(u8, Instant)> = None;
    let mut tick = tokio::time::interval(PROGRESS_INTERVAL);
    loop {
        tokio::select! {
            finished = &mut copy => {
                return finished.map_err(|e| JobError::Failed(format!("copy task failed: {e}")));
            }
            _ = tick.tick() => {
                let (done, total) = sampler.get();
                let progress = band.at(done, total);
                // A new percentage at once; the byte counts at most once a
                // second in between, which keeps writes few on long moves.
                let due = match last {
                    None => true,
                    Some((shown, at)) => shown != progress || at.elapsed() >= STATUS_INTERVAL,
                };
                if due {
                    last = Some((progress, Instant::now()));
                    let seen = CopySeen {
                        done,
                        total,
                        copied: stats.copied(),
                        resumed_at: stats.resumed_at(),
                        catch_up: stats.catch_up(),
                    };
                    let text = copy_status(status, &seen, started.elapsed());
                    if let Err(e) = ctx.progress(job, progress, &text).await {
                        warn!(error = %e, "cannot record copy progress; the copy goes on");
                    }
                }
            }
        }
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
    let secs = secs.max(0.0).ceil() as u64;
    match secs {
        0..=59 => format!("{secs} s"),
        60..=3599 => format!("{} min {} s", secs / 60, secs % 60),
        _ => format!("{} h {} min", secs / 3600, secs % 3600 / 60),
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
