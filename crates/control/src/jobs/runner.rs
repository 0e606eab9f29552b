//! The job runner: a worker that executes persisted jobs, at most
//! `max_concurrent_jobs` at once, retries a job that hit a transient error
//! after a back-off, pauses every job at a safe point when the service
//! stops, and shows what it does on the worker board.
//!
//! Jobs are claimed, not owned by the instance that accepted them: the
//! runner runs a job only under a lease it claimed in the store (owner =
//! this instance, an epoch, an expiry) and renews every lease it holds
//! every third of the lease's length. A job submitted here is claimed at
//! once; a poller claims jobs nobody holds (never claimed, released at a
//! shutdown, or whose owner died and whose lease ran out) while slots are
//! free. Every store write a job makes is fenced on its lease
//! (`svs_store::fence`); a job whose lease was taken over, or could not be
//! renewed before it ran out, is stopped at its next safe point and left
//! to its new owner, which resumes it from its recorded steps.

use super::activity::VolumeActivity;
use super::kinds::{handler, JobHandler};
use super::retry::{with_retries, RetryPolicy};
use super::steering::{Change, Steering};
use super::{JobContext, JobError};
use crate::changes::DesiredStateChanges;
use crate::front_layout::ExportRegistry;
use crate::workers::{WorkerBoard, WorkerHandle, WorkerState, WorkerStatus};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use svs_common::clock::Clock;
use svs_common::metrics::{JobOutcome, METRICS};
use svs_dataplane::DataPlane;
use svs_store::{Job, JobControl, JobEnd, JobLease, LeaseTerms, Store, StoreError};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn, Instrument};

/// Name of the job runner on the worker board.
pub const JOB_RUNNER: &str = "jobs";

/// How the runner runs jobs.
#[derive(Debug, Clone)]
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
    pub leases: LeaseSettings,
    /// Setting `movement_window`: when copies may run (None: always).
    pub movement_window: Option<svs_domain::MovementWindow>,
}

/// How jobs are claimed (settings `job_lease`, `job_claim_interval`).
#[derive(Debug, Clone, Copy)]
pub struct LeaseSettings {
    /// How long a claim lasts unless renewed; renewed every third of it. A
    /// dead instance's jobs resume elsewhere this long after its last renewal.
    pub ttl: Duration,
    /// How often the runner looks for jobs nobody holds.
    pub claim_interval: Duration,
}

impl Default for LeaseSettings {
    fn default() -> Self {
        LeaseSettings {
            ttl: Duration::from_secs(10),
            claim_interval: Duration::from_secs(1),
        }
    }
}

impl LeaseSettings {
    /// How long before a lease runs out the runner stops trusting it when
    /// it could not renew it (its jobs stop before another instance may
    /// claim them).
    fn margin(&self) -> Duration {
        self.ttl / 5
    }
}

/// What the runner needs from the rest of the service.
pub struct RunnerParts {
    pub store: Arc<dyn Store>,
    pub media: Arc<dyn DataPlane>,
    pub exports: Arc<ExportRegistry>,
    /// Serves storage nodes' media the data plane does not reach yet.
    pub node_media: Arc<crate::node_media::NodeMediaSync>,
    pub clock: Arc<dyn Clock>,
    pub board: Arc<WorkerBoard>,
    pub activity: Arc<VolumeActivity>,
    /// The service's one stop signal.
    pub shutdown: CancellationToken,
    /// This instance's id: the owner of the leases it claims.
    pub instance_id: String,
}

/// A job this instance holds a lease on (queued or running).
struct HeldJob {
    lease: JobLease,
    /// Cancelled when the lease is lost (or the service stops): the job
    /// stops at its next safe point.
    stop: CancellationToken,
    /// Its cancel, pause, rate and window: each run's own token under
    /// `stop`, stopped alone by them.
    steering: Arc<Steering>,
}

pub struct JobRunner {
    ctx: Arc<JobContext>,
    instance_id: String,
    leases: LeaseSettings,
    max_concurrent_jobs: usize,
    /// Setting `movement_window`.
    window: Option<svs_domain::MovementWindow>,
    held: Mutex<HashMap<i64, HeldJob>>,
    /// Raised when a slot frees: the poller claims at once.
    wake: Notify,
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
            jobs_held: Some(Vec::new()),
            ..WorkerStatus::new(JOB_RUNNER)
        });
        Arc::new(JobRunner {
            ctx: Arc::new(JobContext {
                store: parts.store,
                media: parts.media,
                exports: parts.exports,
                node_media: parts.node_media,
                clock: parts.clock,
                rate_limit: settings.rate_limit,
                movement: Arc::new(svs_dataplane::MovementBudgets::new(settings.rate_limit)),
                checkpoint_bytes: settings.checkpoint_bytes,
                agent_wait: settings.agent_wait,
                changes: Arc::new(DesiredStateChanges::default()),
                fronts_mode: settings.fronts,
                fronts: Arc::new(crate::fronts::FrontReports::default()),
                allocation: Arc::new(tokio::sync::Mutex::new(())),
                activity: Arc::clone(&parts.activity),
                shutdown: parts.shutdown,
                claim: None,
                steering: None,
            }),
            instance_id: parts.instance_id,
            leases: settings.leases,
            max_concurrent_jobs: max,
            window: settings.movement_window.clone(),
            held: Mutex::new(HashMap::new()),
            wake: Notify::new(),
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

    /// Starts the jobs left unfinished by an earlier run, then keeps
    /// claiming jobs nobody holds and renewing this instance's leases until
    /// the service stops. `sole_owner`: no other process can use this
    /// database (SQLite, under its data directory lock), so every lease in
    /// it is an earlier run's and ends now instead of running out.
    pub async fn resume_unfinished(
        self: &Arc<Self>,
        sole_owner: bool,
    ) -> Result<usize, StoreError> {
        if sole_owner {
            self.ctx.store.end_all_job_leases().await?;
        }
        let limit = if sole_owner {
            usize::MAX
        } else {
            self.free_slots()
        };
        let claimed = self.claim_and_run(limit).await?;
        let runner = Arc::clone(self);
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        tasks.spawn(async move { runner.keep_claiming().await });
        Ok(claimed)
    }

    /// Claims up to `limit` jobs nobody holds and runs them; how many.
    async fn claim_and_run(self: &Arc<Self>, limit: usize) -> Result<usize, StoreError> {
        let claimed = self.ctx.store.claim_jobs(&self.terms(), limit).await?;
        let count = claimed.len();
        for lease in claimed {
            info!(job = lease.job_id, claim = lease.epoch, "claimed job");
            self.spawn_held(lease);
        }
        Ok(count)
    }

    /// Claims jobs nobody holds while slots are free, and renews the leases
    /// held, until the service stops.
    async fn keep_claiming(self: Arc<Self>) {
        let renew_every = self.leases.ttl / 3;
        let mut last_renewal = Instant::now();
        let mut last_renewed = Instant::now();
        loop {
            tokio::select! {
                () = self.ctx.shutdown.cancelled() => return,
                () = tokio::time::sleep(self.leases.claim_interval.min(renew_every)) => {}
                () = self.wake.notified() => {}
            }
            if last_renewal.elapsed() >= renew_every {
                last_renewal = Instant::now();
                if self.renew_leases().await {
                    last_renewed = Instant::now();
                } else if last_renewed.elapsed() >= self.leases.ttl - self.leases.margin() {
                    // Another instance may claim them soon: stop first.
                    self.stop_all_held("its lease could not be renewed in time");
                }
            }
            self.watch_steering().await;
            let free = self.free_slots();
            if free == 0 {
                continue;
            }
            if let Err(e) = self.claim_and_run(free).await {
                debug!(error = %e, "cannot claim jobs now");
            }
        }
    }

    /// Renews every lease held; stops the jobs whose lease was taken over.
    /// False when the store could not be reached.
    async fn renew_leases(&self) -> bool {
        let leases: Vec<JobLease> = lock(&self.held).values().map(|h| h.lease.clone()).collect();
        if leases.is_empty() {
            return true;
        }
        // A renewal that cannot be answered within a third of the lease is
        // a failed one (a pool waiting for a connection must not hold the
        // loop past the lease).
        let renewed = tokio::time::timeout(
            self.leases.ttl / 3,
            self.ctx.store.renew_job_leases(&leases, &self.terms()),
        )
        .await
        .unwrap_or_else(|_| {
            Err(StoreError::backend(
                true,
                "the renewal took longer than a third of the lease",
            ))
        });
        match renewed {
            Ok(lost) => {
                let held = lock(&self.held);
                for id in lost {
                    if let Some(job) = held.get(&id) {
                        warn!(job = id, "job lease taken over; the job stops here");
                        job.stop.cancel();
                    }
                }
                true
            }
            Err(e) => {
                warn!(error = %e, "cannot renew job leases");
                false
            }
        }
    }

    /// Whether this instance still holds the job's lease, renewed now (so
    /// it holds for a whole lease from here); false when the store cannot
    /// say in time.
    async fn still_holds(&self, job_id: i64) -> bool {
        let Some(lease) = lock(&self.held).get(&job_id).map(|h| h.lease.clone()) else {
            return false;
        };
        let renewed = tokio::time::timeout(
            self.leases.ttl / 3,
            self.ctx.store.renew_job_leases(&[lease], &self.terms()),
        )
        .await;
        match renewed {
            Ok(Ok(lost)) => lost.is_empty(),
            Ok(Err(e)) => {
                warn!(job = job_id, error = %e, "cannot confirm the job's lease");
                false
            }
            Err(_) => {
                warn!(job = job_id, "cannot confirm the job's lease in time");
                false
            }
        }
    }

    /// Applies to every job held here what steers it now (its cancel,
    /// pause and rate, asked for on any instance, and the movement window):
    /// a job whose run must stop stops at its next safe point.
    async fn watch_steering(&self) {
        let held: HashMap<i64, Arc<Steering>> = lock(&self.held)
            .iter()
            .map(|(id, h)| (*id, Arc::clone(&h.steering)))
            .collect();
        if held.is_empty() {
            return;
        }
        let ids: Vec<i64> = held.keys().copied().collect();
        match self.ctx.store.job_controls(&ids).await {
            Ok(controls) => {
                let now_ms = self.ctx.clock.now_ms();
                for control in controls {
                    if let Some(steering) = held.get(&control.id) {
                        let change = steering.apply(&control, now_ms);
                        if change.cancel {
                            info!(
                                job = control.id,
                                "cancel asked for: the job stops and is undone"
                            );
                        }
                        report_change(self.ctx.store.as_ref(), control.id, &change).await;
                    }
                }
            }
            Err(e) => debug!(error = %e, "cannot read how jobs are steered now"),
        }
    }

    /// Stops the run of a job held here whose cancel is recorded; false
    /// when this instance does not hold it (its holder sees the cancel in
    /// the store, and a job nobody holds is undone when it is claimed).
    pub fn cancel(&self, job_id: i64) -> bool {
        let held = lock(&self.held);
        let Some(job) = held.get(&job_id) else {
            return false;
        };
        if !job.steering.is_cancelled() {
            info!(
                job = job_id,
                "cancel asked for: the job stops and is undone"
            );
            job.steering.cancel();
        }
        true
    }

    /// A job's pause or rate changed in the store: the jobs held here are
    /// steered again now rather than at the next poll.
    pub fn steer_now(&self) {
        self.wake.notify_one();
    }

    fn stop_all_held(&self, why: &str) {
        for (id, job) in lock(&self.held).iter() {
            if !job.stop.is_cancelled() {
                warn!(job = id, why, "job stops here");
                job.stop.cancel();
            }
        }
    }

    /// Changes the jobs held, and shows them on the board.
    fn change_held(&self, change: impl FnOnce(&mut HashMap<i64, HeldJob>)) {
        let mut held = lock(&self.held);
        change(&mut held);
        let mut ids: Vec<i64> = held.keys().copied().collect();
        ids.sort_unstable();
        self.status.update(|s| s.jobs_held = Some(ids));
    }

    /// Slots not taken by a job this instance holds.
    fn free_slots(&self) -> usize {
        self.max_concurrent_jobs
            .saturating_sub(lock(&self.held).len())
    }

    /// This instance's lease terms as of now (the system clock: leases are
    /// compared across instances, not against the service's own clock).
    fn terms(&self) -> LeaseTerms<'_> {
        LeaseTerms {
            owner: &self.instance_id,
            now_ms: svs_common::clock::SystemClock.now_ms(),
            ttl_ms: i64::try_from(self.leases.ttl.as_millis()).unwrap_or(i64::MAX),
        }
    }

    /// Registers a claimed job as held and runs it in the background.
    fn spawn_held(self: &Arc<Self>, lease: JobLease) {
        let stop = self.ctx.shutdown.child_token();
        let steering = Arc::new(Steering::new(&stop, self.window.clone()));
        self.change_held(|held| {
            held.insert(
                lease.job_id,
                HeldJob {
                    lease: lease.clone(),
                    stop: stop.clone(),
                    steering: Arc::clone(&steering),
                },
            );
        });
        let runner = Arc::clone(self);
        // Every log line of the job names it, its kind and its volume (or
        // the medium or scope a drain or rebalance works on): `execute`
        // fills them in once it has read the job.
        let span = tracing::info_span!(
            "job",
            job = lease.job_id,
            kind = tracing::field::Empty,
            volume = tracing::field::Empty,
            object = tracing::field::Empty,
        );
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        while tasks.try_join_next().is_some() {}
        tasks.spawn(async move { runner.run(lease, stop, steering).await }.instrument(span));
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

    /// Claims a job (already persisted) and runs it in the background, once
    /// a slot is free. A job another instance claimed first is left to it.
    pub fn submit(self: &Arc<Self>, job_id: i64) {
        // The request that made the job may have changed attachments
        // (created, marked Detaching).
        self.ctx.changes.notify();
        if self.ctx.shutdown.is_cancelled() {
            // Stays Pending in the store: it runs at the next start.
            return;
        }
        let runner = Arc::clone(self);
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        while tasks.try_join_next().is_some() {}
        tasks.spawn(async move {
            match runner.ctx.store.claim_job(job_id, &runner.terms()).await {
                Ok(Some(lease)) if runner.ctx.shutdown.is_cancelled() => {
                    // Stopping: leave it to the next start or another instance.
                    if let Err(e) = runner.ctx.store.release_job_lease(&lease).await {
                        debug!(job = job_id, error = %e, "cannot release job lease");
                    }
                }
                Ok(Some(lease)) => runner.spawn_held(lease),
                Ok(None) => debug!(job = job_id, "job claimed by another instance"),
                // Unclaimed in the store: the poller claims it later.
                Err(e) => warn!(job = job_id, error = %e, "cannot claim job now"),
            }
        });
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

    async fn run(
        self: Arc<Self>,
        lease: JobLease,
        stop: CancellationToken,
        steering: Arc<Steering>,
    ) {
        self.run_held(&lease, stop, steering).await;
        self.change_held(|held| {
            held.remove(&lease.job_id);
        });
        if self.ctx.shutdown.is_cancelled() {
            // Paused by the shutdown: any instance may go on with it at once
            // (a no-op when the lease was taken over meanwhile: another
            // epoch).
            if let Err(e) = self.ctx.store.release_job_lease(&lease).await {
                debug!(job = lease.job_id, error = %e, "cannot release job lease");
            }
        }
        self.wake.notify_one();
    }

    async fn run_held(&self, lease: &JobLease, stop: CancellationToken, steering: Arc<Steering>) {
        let _slot = match Arc::clone(&self.slots).try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                let _queued = Counted::new(self, Counter::Queued);
                tokio::select! {
                    slot = Arc::clone(&self.slots).acquire_owned() => match slot {
                        Ok(slot) => slot,
                        Err(_) => return,
                    },
                    // Still unfinished in the store: it runs later, here
                    // or on another instance.
                    () = stop.cancelled() => return,
                }
            }
        };
        let _running = Counted::new(self, Counter::Running);
        let ctx = JobContext {
            shutdown: stop,
            claim: Some(svs_front::calls_wire::JobClaim {
                job: lease.job_id,
                epoch: u64::try_from(lease.epoch).unwrap_or_default(),
            }),
            ..JobContext::clone(&self.ctx)
        };
        svs_store::fence::fenced(lease.clone(), async {
            if let Some(previous) = &lease.taken_over_from {
                // Shown in the job: where it went on after an instance died.
                let detail = format!(
                    "Taken over by instance {} from instance {previous}, whose lease ran out \
                     (claim {})",
                    lease.owner, lease.epoch
                );
                warn!(previous = %previous, "{detail}");
                if let Err(e) = ctx.store.add_job_detail(lease.job_id, &detail).await {
                    debug!(error = %e, "cannot record the take-over");
                }
            }
            self.execute(&ctx, &steering, lease.job_id).await;
        })
        .await;
    }

    /// What every job works with (a dry run plans with it too).
    pub(super) fn context(&self) -> &JobContext {
        &self.ctx
    }

    /// Stops every task of this runner at once, as if the process were
    /// killed: no lease is released or renewed, and no job writes again.
    #[cfg(test)]
    pub(crate) fn kill(&self) {
        lock(&self.tasks).abort_all();
    }

    /// Changes the runner's counters; its state follows them.
    fn count(&self, change: impl FnOnce(&mut WorkerStatus)) {
        self.status.update(|s| {
            change(s);
            s.state = runner_state(s);
        });
    }

    /// Runs the job: `base` works under the lease's stop signal, the job's
    /// run under its steering's token (a cancel stops it), its copies
    /// paced through its steering's gate (pause, rate, window). A cancelled
    /// job is undone.
    async fn execute(&self, base: &JobContext, steering: &Arc<Steering>, job_id: i64) {
        let stop = base.shutdown.clone();
        let job = match base.store.job_by_id(job_id).await {
            Ok(Some(job)) if !job.state.is_finished() => job,
            Ok(_) => return,
            Err(e) => {
                error!(error = %e, "cannot load job");
                return;
            }
        };
        let span = tracing::Span::current();
        span.record("kind", job.kind.as_str());
        if job.kind().is_some_and(|k| k.moves_many_volumes()) {
            span.record("object", job.object.as_str());
        } else {
            span.record("volume", job.object.as_str());
        }
        // Reconcilers leave the volume alone while the job runs.
        let _busy = self.activity.job_started(&job.object).await;
        if let Err(e) = base
            .store
            .set_job_running(job.id, base.clock.now_ms())
            .await
        {
            error!(error = %e, "cannot mark job running");
            return;
        }
        info!(kind = %job.kind, object = %job.object, "job running");
        let _running = METRICS.job_started(&job.kind);
        // Its duration counts from its first start (before a restart or a
        // take-over too).
        let job = Job {
            starttime_ms: job.starttime_ms.or(Some(base.clock.now_ms())),
            ..job
        };
        let handler = match handler(&job) {
            Ok(handler) => handler,
            Err(e) => {
                self.finish(base, &job, None, Err(e)).await;
                return;
            }
        };
        let control = JobControl {
            id: job.id,
            cancel_requested: job.cancel_requested,
            paused: job.paused,
            movement_rate: job.movement_rate,
        };
        // Pause, rate and window hold a job's copies: a data movement's or a
        // recovery's.
        steering.set_copies(job.copies_data());
        let change = steering.apply(&control, base.clock.now_ms());
        report_change(base.store.as_ref(), job.id, &change).await;
        // Undone, not run, once a cancel was asked for (before it started,
        // or before a restart or a take-over).
        if steering.is_cancelled() {
            self.undo_cancelled(base, &job, &handler).await;
            base.changes.notify();
            return;
        }
        let ctx = JobContext {
            shutdown: steering.work(),
            steering: Some(Arc::clone(steering)),
            ..base.clone()
        };
        let result = self.run_with_retries(&ctx, &job, &handler).await;
        if result.is_err()
            && !stop.is_cancelled()
            && self.cancel_asked(steering, &ctx, &job, &result).await
        {
            self.undo_cancelled(base, &job, &handler).await;
        } else {
            self.finish(&ctx, &job, Some(&handler), result).await;
        }
        // Whatever the job changed (attachments, the volume's size or
        // filesystem) is in the store now.
        base.changes.notify();
    }

    /// The job's tries, a transient error tried again after a back-off.
    async fn run_with_retries(
        &self,
        ctx: &JobContext,
        job: &Job,
        handler: &JobHandler,
    ) -> Result<(), JobError> {
        // Counts the job as retrying while it waits out a back-off.
        let backing_off: Mutex<Option<Counted>> = Mutex::new(None);
        let result = with_retries(
            self.retry,
            &ctx.shutdown.clone(),
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
                handler.run(ctx, job)
            },
        )
        .await;
        drop(backing_off);
        result
    }

    /// Whether a job that did not end well stopped for a cancel: its work
    /// was stopped alone, it met the cancel at its commit, or (a failure
    /// crossing a cancel not yet seen here) the store has one.
    async fn cancel_asked(
        &self,
        steering: &Steering,
        ctx: &JobContext,
        job: &Job,
        result: &Result<(), JobError>,
    ) -> bool {
        if matches!(result, Err(JobError::Cancelled)) || steering.is_cancelled() {
            return true;
        }
        matches!(ctx.store.job_by_id(job.id).await, Ok(Some(j)) if j.cancel_requested)
    }

    /// Undoes a cancelled job (under the lease's stop signal: a lost lease
    /// leaves the undo for the next holder, which sees the cancel recorded)
    /// and ends it cancelled; a cancel that cannot be carried out ends it in
    /// Error saying so.
    async fn undo_cancelled(&self, ctx: &JobContext, job: &Job, handler: &JobHandler) {
        info!("job cancelled: undoing it");
        if let Err(e) = ctx
            .store
            .set_job_progress(job.id, job.progress, "Cancelling")
            .await
        {
            debug!(error = %e, "cannot record the cancel's status");
        }
        let result = with_retries(
            self.retry,
            &ctx.shutdown.clone(),
            |e, retry, delay| {
                warn!(error = %e, retry, delay_secs = delay.as_secs_f64(), "transient error; the cancel will be tried again");
            },
            || handler.cancel(ctx, job),
        )
        .await;
        let end = match result {
            Ok(detail) => {
                info!(detail = %detail, "job cancelled");
                JobEnd::cancelled(detail, ctx.clock.now_ms())
            }
            Err(e) if ctx.shutdown.is_cancelled() => {
                info!(error = %e, "cancel stopped; the job's next holder goes on with it");
                return;
            }
            Err(JobError::Stopping | JobError::Store(StoreError::Fenced { .. })) => return,
            Err(JobError::Failed(m) | JobError::Transient(m)) => {
                JobEnd::error(format!("Cancel failed: {m}"), ctx.clock.now_ms())
            }
            Err(e) => {
                error!(error = %e, "cancel failed");
                JobEnd::error(
                    "Cancel failed: internal error: see the service log".to_string(),
                    ctx.clock.now_ms(),
                )
            }
        };
        if end.status == svs_store::JOB_CANCELLED {
            job_ended(job, JobOutcome::Cancelled, ctx.clock.now_ms());
        } else {
            job_ended(job, JobOutcome::Error, ctx.clock.now_ms());
            let summary = format!("a {} job's cancel failed", job.kind);
            self.count(|s| s.record_error(summary, ctx.clock.now_ms()));
        }
        if let Err(e) = ctx.store.finish_job(job.id, &end).await {
            error!(error = %e, "cannot record the job's cancel");
        }
    }

    /// Records how a try of the job ended, unless the service is stopping;
    /// a job that ends in Error has its handler (if its arguments made one)
    /// undo what it left.
    async fn finish(
        &self,
        ctx: &JobContext,
        job: &Job,
        handler: Option<&JobHandler>,
        result: Result<(), JobError>,
    ) {
        let end = match result {
            Ok(()) => {
                self.count(|s| s.record_success(ctx.clock.now_ms()));
                job_ended(job, JobOutcome::Done, ctx.clock.now_ms());
                return;
            }
            Err(JobError::Stopping) if self.ctx.shutdown.is_cancelled() => {
                info!("job paused by the shutdown; it resumes at the next start or on another instance");
                return;
            }
            Err(JobError::Stopping | JobError::Store(StoreError::Fenced { .. })) => {
                info!("job's lease lost; the instance that claimed it goes on with it");
                return;
            }
            // Stopped meanwhile (the lease lost, or the service stopping):
            // whatever failed, the job is left as it is, its undo not run,
            // for whoever holds it next to go on with.
            Err(e) if ctx.shutdown.is_cancelled() => {
                info!(error = %e, "job stopped with an error; left for its next run");
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
        // An instance that lost the job (its calls refused by a front that
        // heard of a newer claim, before its own renewal noticed) must not
        // undo: the copies it would remove are the new holder's to finish.
        if !self.still_holds(job.id).await {
            info!(detail = %end, "job failed after its lease was lost; the instance that claimed it goes on with it");
            return;
        }
        if let Some(handler) = handler {
            handler.undo(ctx, job).await;
        }
        warn!(detail = %end, "job ended in Error");
        job_ended(job, JobOutcome::Error, ctx.clock.now_ms());
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

/// Counts the job's end (its metrics), `now_ms`.
fn job_ended(job: &Job, outcome: JobOutcome, now_ms: i64) {
    let seconds = job
        .starttime_ms
        .map(|start| now_ms.saturating_sub(start) as f64 / 1000.0);
    METRICS.job_finished(&job.kind, outcome, seconds);
}

/// Says in the job what a change of its steering did: held (its status
/// and a detail), resumed, or a new rate (a detail). Best effort.
async fn report_change(store: &dyn Store, job_id: i64, change: &Change) {
    let mut details = Vec::new();
    if let Some((from, to)) = &change.hold {
        match to {
            Some(hold) => {
                info!(job = job_id, hold = ?hold, "job's copies held");
                if let Ok(Some(job)) = store.job_by_id(job_id).await {
                    let _status = store
                        .set_job_progress(job_id, job.progress, &hold.status(job_id))
                        .await;
                }
                details.push(hold.detail());
            }
            None if from.is_some() => {
                info!(job = job_id, "job's copies resumed");
                details.push("Resumed: copies go on from their last checkpoint".to_string());
            }
            None => {}
        }
    }
    if let Some(rate) = change.rate {
        details.push(match rate {
            None => "Copy rate back to the service's movement_rate".to_string(),
            Some(0) => "Copies unthrottled".to_string(),
            Some(r) => format!("Copy rate set to {}/s", svs_domain::units::human_bytes(r)),
        });
    }
    for detail in details {
        if let Err(e) = store.add_job_detail(job_id, &detail).await {
            debug!(error = %e, "cannot record how the job is steered");
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
