//! The job runner: a worker that executes persisted jobs, at most
//! `max_concurrent_jobs` at once, retries a job that hit a transient error
//! after a back-off, pauses every job at a safe point when the service
//! stops, and shows what it does on the worker board.

use super::activity::VolumeActivity;
use super::kinds::{handler, JobHandler};
use super::retry::{with_retries, RetryPolicy};
use super::{JobContext, JobError};
use crate::changes::DesiredStateChanges;
use crate::clock::Clock;
use crate::exports::ExportRegistry;
use crate::workers::{WorkerBoard, WorkerHandle, WorkerState, WorkerStatus};
use std::sync::{Arc, Mutex};
use svs_dataplane::DataPlane;
use svs_store::{Job, JobEnd, Store, StoreError};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn, Instrument};

/// Name of the job runner on the worker board.
pub const JOB_RUNNER: &str = "jobs";

/// How the runner runs jobs.
#[derive(Debug, Clone, Copy)]
pub struct RunnerSettings {
    /// Jobs executing at once; more wait for a free slot.
    pub max_concurrent_jobs: usize,
    pub retry: RetryPolicy,
    /// Bytes per second for slice copies; None = unthrottled.
    pub rate_limit: Option<u64>,
    /// Bytes a slice copy copies between two checkpoints (at least).
    pub checkpoint_bytes: u64,
    /// How long a job waits for a node's agent to act (grow a filesystem,
    /// unmount before a detach).
    pub agent_wait: std::time::Duration,
    /// Setting `fronts`.
    pub fronts: crate::config::FrontsMode,
}

/// What the runner needs from the rest of the service.
pub struct RunnerParts {
    pub store: Arc<dyn Store>,
    pub media: Arc<dyn DataPlane>,
    pub exports: Arc<ExportRegistry>,
    pub clock: Arc<dyn Clock>,
    pub board: Arc<WorkerBoard>,
    pub activity: Arc<VolumeActivity>,
    /// The service's one stop signal.
    pub shutdown: CancellationToken,
}

pub struct JobRunner {
    ctx: Arc<JobContext>,
    retry: RetryPolicy,
    /// One permit per job that may execute now.
    slots: Arc<Semaphore>,
    activity: Arc<VolumeActivity>,
    board: Arc<WorkerBoard>,
    status: WorkerHandle,
    tasks: Mutex<JoinSet<()>>,
}

impl JobRunner {
    pub fn new(parts: RunnerParts, settings: RunnerSettings) -> Arc<JobRunner> {
        let max = settings.max_concurrent_jobs.max(1);
        let status = parts.board.register(WorkerStatus {
            max_concurrent_jobs: Some(max),
            ..WorkerStatus::new(JOB_RUNNER)
        });
        Arc::new(JobRunner {
            ctx: Arc::new(JobContext {
                store: parts.store,
                media: parts.media,
                exports: parts.exports,
                clock: parts.clock,
                rate_limit: settings.rate_limit,
                movement: svs_dataplane::MovementBudgets::new(settings.rate_limit),
                checkpoint_bytes: settings.checkpoint_bytes,
                agent_wait: settings.agent_wait,
                changes: Arc::new(DesiredStateChanges::default()),
                fronts_mode: settings.fronts,
                fronts: Arc::new(crate::fronts::FrontReports::default()),
                allocation: tokio::sync::Mutex::new(()),
                activity: Arc::clone(&parts.activity),
                shutdown: parts.shutdown,
            }),
            retry: settings.retry,
            slots: Arc::new(Semaphore::new(max)),
            activity: parts.activity,
            board: parts.board,
            status,
            tasks: Mutex::new(JoinSet::new()),
        })
    }

    /// Every background worker's status (this runner's and the reconcilers').
    pub fn workers(&self) -> Vec<WorkerStatus> {
        self.board.statuses()
    }

    /// Starts every Pending or Running job left by an earlier run.
    pub async fn resume_unfinished(self: &Arc<Self>) -> Result<usize, StoreError> {
        let jobs = self.ctx.store.unfinished_jobs().await?;
        for job in &jobs {
            info!(job = job.id, kind = %job.kind, state = job.state.as_str(), "resuming job");
            self.submit(job.id);
        }
        Ok(jobs.len())
    }

    /// Raised whenever what node agents should do may have changed: when a
    /// job is submitted (its request already changed the store) and when
    /// one ends.
    pub fn changes(&self) -> Arc<DesiredStateChanges> {
        Arc::clone(&self.ctx.changes)
    }

    /// What storage nodes report of the fronts they run.
    pub fn fronts(&self) -> Arc<crate::fronts::FrontReports> {
        Arc::clone(&self.ctx.fronts)
    }

    /// The service's stop signal (long polls end with it).
    pub fn stopping(&self) -> CancellationToken {
        self.ctx.shutdown.clone()
    }

    /// Runs a job (already persisted) in the background, once a slot is free.
    pub fn submit(self: &Arc<Self>, job_id: i64) {
        // The request that made the job may have changed attachments
        // (created, marked Detaching).
        self.ctx.changes.notify();
        if self.ctx.shutdown.is_cancelled() {
            // Stays Pending in the store: it runs at the next start.
            return;
        }
        let runner = Arc::clone(self);
        let span = tracing::info_span!("job", job = job_id);
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        while tasks.try_join_next().is_some() {}
        tasks.spawn(async move { runner.run(job_id).await }.instrument(span));
    }

    /// Waits until every job has paused at a safe point or ended, once the
    /// shutdown token is cancelled. Paused jobs stay in the store and resume
    /// at the next start.
    pub async fn wait_until_stopped(&self) {
        let mut tasks = {
            let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
            std::mem::take(&mut *tasks)
        };
        while tasks.join_next().await.is_some() {}
        self.status.update(|s| s.state = WorkerState::Done);
    }

    async fn run(self: Arc<Self>, job_id: i64) {
        let _slot = match Arc::clone(&self.slots).try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                let _queued = Counted::new(&self, Counter::Queued);
                tokio::select! {
                    slot = Arc::clone(&self.slots).acquire_owned() => match slot {
                        Ok(slot) => slot,
                        Err(_) => return,
                    },
                    // Still Pending in the store: it runs at the next start.
                    () = self.ctx.shutdown.cancelled() => return,
                }
            }
        };
        let _running = Counted::new(&self, Counter::Running);
        self.execute(job_id).await;
    }

    /// Changes the runner's counters; its state follows them.
    fn count(&self, change: impl FnOnce(&mut WorkerStatus)) {
        self.status.update(|s| {
            change(s);
            s.state = runner_state(s);
        });
    }

    async fn execute(&self, job_id: i64) {
        let ctx = self.ctx.as_ref();
        let job = match ctx.store.job_by_id(job_id).await {
            Ok(Some(job)) if !job.state.is_finished() => job,
            Ok(_) => return,
            Err(e) => {
                error!(error = %e, "cannot load job");
                return;
            }
        };
        // Reconcilers leave the volume alone while the job runs.
        let _busy = self.activity.job_started(&job.object).await;
        if let Err(e) = ctx.store.set_job_running(job.id, ctx.clock.now_ms()).await {
            error!(error = %e, "cannot mark job running");
            return;
        }
        info!(kind = %job.kind, object = %job.object, "job running");
        let handler = match handler(&job) {
            Ok(handler) => handler,
            Err(e) => {
                self.finish(&job, None, Err(e)).await;
                return;
            }
        };
        // Counts the job as retrying while it waits out a back-off.
        let backing_off: Mutex<Option<Counted>> = Mutex::new(None);
        let result = with_retries(
            self.retry,
            &ctx.shutdown,
            |e, retry, delay| {
                warn!(error = %e, retry, delay_secs = delay.as_secs_f64(), "transient error; job will be tried again");
                // No job id: the board is shown to every tenant.
                let summary = format!(
                    "a {} job: transient error; retry {retry} of {} in {:.1}s",
                    job.kind,
                    self.retry.retries,
                    delay.as_secs_f64()
                );
                self.count(|s| s.record_error(summary, ctx.clock.now_ms()));
                *lock(&backing_off) = Some(Counted::new(self, Counter::Retrying));
            },
            || {
                lock(&backing_off).take();
                handler.run(ctx, &job)
            },
        )
        .await;
        drop(backing_off);
        self.finish(&job, Some(handler.as_ref()), result).await;
        // Whatever the job changed (attachments, the volume's size or
        // filesystem) is in the store now.
        ctx.changes.notify();
    }

    /// Records how a try of the job ended, unless the service is stopping;
    /// a job that ends in Error has its handler (if its arguments made one)
    /// undo what it left.
    async fn finish(
        &self,
        job: &Job,
        handler: Option<&dyn JobHandler>,
        result: Result<(), JobError>,
    ) {
        let ctx = self.ctx.as_ref();
        let end = match result {
            Ok(()) => {
                self.count(|s| s.record_success(ctx.clock.now_ms()));
                return;
            }
            Err(JobError::Stopping) => {
                info!("job interrupted by shutdown; it resumes at next start");
                return;
            }
            Err(JobError::Failed(message) | JobError::Transient(message)) => message,
            Err(JobError::DataPlane(e)) => format!("I/O error: {e}"),
            Err(e) => {
                // Store failures are logged; clients see only that it failed.
                error!(error = %e, "job failed");
                "internal error: see the service log".to_string()
            }
        };
        if let Some(handler) = handler {
            handler.undo(ctx, job).await;
        }
        warn!(detail = %end, "job ended in Error");
        let summary = format!("a {} job ended in Error", job.kind);
        self.count(|s| s.record_error(summary, ctx.clock.now_ms()));
        if let Err(e) = ctx
            .store
            .finish_job(job.id, &JobEnd::error(end, ctx.clock.now_ms()))
            .await
        {
            error!(error = %e, "cannot record job failure");
        }
        // A failed job may have changed placements, bookings or snapshots
        // before it failed (a Done job refreshed on its way out).
        if super::changes_space(job.kind()) {
            ctx.refresh_snapshot_space().await;
        }
    }
}

/// The runner's job counters.
#[derive(Clone, Copy)]
enum Counter {
    Queued,
    Running,
    Retrying,
}

/// Counts a job in one of the runner's counters for as long as it lives,
/// however the job's task ends.
struct Counted<'a> {
    runner: &'a JobRunner,
    counter: Counter,
}

impl<'a> Counted<'a> {
    fn new(runner: &'a JobRunner, counter: Counter) -> Counted<'a> {
        runner.count(|s| *counter_of(s, counter) += 1);
        Counted { runner, counter }
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        let counter = self.counter;
        self.runner.count(|s| *counter_of(s, counter) -= 1);
    }
}

fn counter_of(s: &mut WorkerStatus, counter: Counter) -> &mut usize {
    match counter {
        Counter::Queued => &mut s.jobs_queued,
        Counter::Running => &mut s.jobs_running,
        Counter::Retrying => &mut s.jobs_retrying,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Idle with nothing to do; Throttled when jobs wait for a slot or every
/// running job waits out a back-off; Busy otherwise.
fn runner_state(s: &WorkerStatus) -> WorkerState {
    if s.jobs_running == 0 && s.jobs_queued == 0 {
        WorkerState::Idle
    } else if s.jobs_queued > 0 || s.jobs_retrying >= s.jobs_running {
        WorkerState::Throttled
    } else {
        WorkerState::Busy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(running: usize, queued: usize, retrying: usize) -> WorkerStatus {
        WorkerStatus {
            jobs_running: running,
            jobs_queued: queued,
            jobs_retrying: retrying,
            ..WorkerStatus::new(JOB_RUNNER)
        }
    }

    #[test]
    fn the_runner_state_follows_its_jobs() {
        assert_eq!(runner_state(&status(0, 0, 0)), WorkerState::Idle);
        assert_eq!(runner_state(&status(2, 0, 0)), WorkerState::Busy);
        assert_eq!(runner_state(&status(2, 0, 1)), WorkerState::Busy);
        assert_eq!(runner_state(&status(2, 0, 2)), WorkerState::Throttled);
        assert_eq!(runner_state(&status(16, 3, 0)), WorkerState::Throttled);
    }
}
