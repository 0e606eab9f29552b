//! The runner against a real SQLite store and local media, with media that
//! fail or hold on command: retries, the bound on concurrent jobs, and what
//! people see of it.

use super::*;
use crate::testing::Fixture;
use crate::workers::{WorkerBoard, WorkerState, WorkerStatus};
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};
use svs_common::clock::ManualClock;
use svs_dataplane::{CopyOptions, Digest, LocalMedia, StoredSlice, VolumeIo, VolumeLayout};
use svs_domain::JobState;

/// Local media whose `create_slice` fails with `error` the first `failures`
/// times, and waits while `held` is set.
struct TestMedia {
    local: LocalMedia,
    failures: AtomicUsize,
    error: io::ErrorKind,
    creates: AtomicUsize,
    held: Mutex<bool>,
    released: Condvar,
    /// Opening a volume for I/O fails while set.
    refuse_opens: std::sync::atomic::AtomicBool,
}

impl TestMedia {
    fn new(local: LocalMedia, failures: usize, error: io::ErrorKind) -> Arc<TestMedia> {
        Arc::new(TestMedia {
            local,
            failures: AtomicUsize::new(failures),
            error,
            creates: AtomicUsize::new(0),
            held: Mutex::new(false),
            released: Condvar::new(),
            refuse_opens: std::sync::atomic::AtomicBool::new(false),
        })
    }

    fn hold(&self, held: bool) {
        *self.held.lock().expect("lock") = held;
        self.released.notify_all();
    }
}

impl DataPlane for TestMedia {
    fn check_medium(&self, medium: &str) -> Result<(), DataPlaneError> {
        self.local.check_medium(medium)
    }

    fn serves_medium(&self, medium: &str) -> bool {
        self.local.serves_medium(medium)
    }

    fn add_medium(
        &self,
        medium: &str,
        directory: &std::path::Path,
    ) -> Result<bool, DataPlaneError> {
        self.local.add_medium(medium, directory)
    }

    fn forget_medium(&self, medium: &str) {
        self.local.forget_medium(medium)
    }

    fn remove_medium(&self, medium: &str) -> Result<(), DataPlaneError> {
        self.local.remove_medium(medium)
    }

    fn create_slice(
        &self,
        medium: &str,
        slice: &SliceKey,
        size: u64,
    ) -> Result<(), DataPlaneError> {
        self.creates.fetch_add(1, Ordering::SeqCst);
        let mut held = self.held.lock().expect("lock");
        while *held {
            held = self.released.wait(held).expect("lock");
        }
        let failing = self
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            return Err(DataPlaneError::Io {
                medium: medium.to_string(),
                slice: format!("{}/c{}-k{}", slice.volume_id, slice.copy, slice.column),
                op: "create",
                source: io::Error::from(self.error),
            });
        }
        self.local.create_slice(medium, slice, size)
    }

    fn grow_slice(&self, medium: &str, slice: &SliceKey, size: u64) -> Result<(), DataPlaneError> {
        self.local.grow_slice(medium, slice, size)
    }

    fn delete_slice(&self, medium: &str, slice: &SliceKey) -> Result<(), DataPlaneError> {
        self.local.delete_slice(medium, slice)
    }

    fn copy_slice(
        &self,
        from_medium: &str,
        to_medium: &str,
        slice: &SliceKey,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Digest, DataPlaneError> {
        self.local
            .copy_slice(from_medium, to_medium, slice, options, progress)
    }

    fn delete_partial_copy(&self, medium: &str, slice: &SliceKey) -> Result<(), DataPlaneError> {
        self.local.delete_partial_copy(medium, slice)
    }

    fn stored_slices(&self, medium: &str) -> Result<Vec<StoredSlice>, DataPlaneError> {
        self.local.stored_slices(medium)
    }

    fn slice_data_bytes(&self, medium: &str, slice: &SliceKey) -> Result<u64, DataPlaneError> {
        self.local.slice_data_bytes(medium, slice)
    }

    fn open_volume(&self, layout: &VolumeLayout) -> Result<Arc<dyn VolumeIo>, DataPlaneError> {
        if self.refuse_opens.load(Ordering::SeqCst) {
            return Err(DataPlaneError::Io {
                medium: "m1".into(),
                slice: layout.volume_id.clone(),
                op: "open",
                source: io::Error::from(io::ErrorKind::PermissionDenied),
            });
        }
        self.local.open_volume(layout)
    }

    fn medium_snapshot_usage(
        &self,
        medium: &str,
    ) -> Result<std::collections::BTreeMap<(String, u64), u64>, DataPlaneError> {
        self.local.medium_snapshot_usage(medium)
    }

    fn medium_written_bytes(&self, medium: &str) -> Result<u64, DataPlaneError> {
        self.local.medium_written_bytes(medium)
    }
}

struct Harness {
    fixture: Fixture,
    media: Arc<TestMedia>,
    board: Arc<WorkerBoard>,
    runner: Arc<JobRunner>,
    shutdown: CancellationToken,
}

impl Harness {
    async fn new(failures: usize, error: io::ErrorKind, max_concurrent_jobs: usize) -> Harness {
        Harness::with_leases(
            failures,
            error,
            max_concurrent_jobs,
            LeaseSettings::default(),
        )
        .await
    }

    async fn with_leases(
        failures: usize,
        error: io::ErrorKind,
        max_concurrent_jobs: usize,
        leases: LeaseSettings,
    ) -> Harness {
        let fixture = Fixture::new().await;
        let media = TestMedia::new(fixture.local.clone(), failures, error);
        let parts = crate::testing::runner_parts(
            Arc::clone(&fixture.store),
            media.clone(),
            Arc::new(ManualClock::new(1_000_000)),
        );
        let (board, shutdown) = (Arc::clone(&parts.board), parts.shutdown.clone());
        let retry = RetryPolicy {
            retries: 2,
            max_delay: Duration::from_millis(5),
        };
        let runner = JobRunner::new(
            parts,
            RunnerSettings {
                leases,
                ..crate::testing::runner_settings(max_concurrent_jobs, retry)
            },
        );
        Harness {
            fixture,
            media,
            board,
            runner,
            shutdown,
        }
    }

    /// A second instance on the same database and media, claiming with
    /// `leases`; its poller runs.
    async fn another_instance(&self, leases: LeaseSettings) -> Arc<JobRunner> {
        let parts = crate::testing::runner_parts(
            Arc::clone(&self.fixture.store),
            self.media.clone(),
            Arc::new(ManualClock::new(1_000_000)),
        );
        let runner = JobRunner::new(
            parts,
            RunnerSettings {
                leases,
                ..crate::testing::runner_settings(4, RetryPolicy::default())
            },
        );
        runner.resume_unfinished(false).await.expect("claims");
        runner
    }

    fn runner_status(&self) -> WorkerStatus {
        self.board.statuses().remove(0)
    }

    async fn wait_for(&self, what: &str, done: impl Fn(&WorkerStatus) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done(&self.runner_status()) {
            assert!(
                Instant::now() < deadline,
                "{what}: {:?}",
                self.runner_status()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits until `n` slice creations have begun (held ones included).
    async fn creating(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.media.creates.load(Ordering::SeqCst) < n {
            assert!(Instant::now() < deadline, "no slice creation began");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn job(&self, job_id: i64) -> Job {
        self.fixture
            .store
            .job_by_id(job_id)
            .await
            .expect("store")
            .expect("job")
    }

    async fn finished(&self, job_id: i64) -> Job {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let job = self.job(job_id).await;
            if job.state.is_finished() {
                return job;
            }
            assert!(Instant::now() < deadline, "job did not end: {job:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Creates volume `v` (1 GiB) and runs its job to the end.
    async fn create_and_finish(&self) -> Job {
        let job = self.fixture.create_volume("vol-1", "v", 1).await;
        self.runner.submit(job);
        self.finished(job).await
    }

    /// A runner of one slot, its first job held in its slice creation and
    /// its second queued; returns the two job ids.
    async fn one_held_one_queued() -> (Harness, i64, i64) {
        let h = Harness::new(0, io::ErrorKind::Other, 1).await;
        h.media.hold(true);
        let first = h.fixture.create_volume("vol-1", "v1", 1).await;
        let second = h.fixture.create_volume("vol-2", "v2", 1).await;
        h.runner.submit(first);
        h.creating(1).await;
        h.runner.submit(second);
        h.wait_for("the second job waits", |s| s.jobs_queued == 1)
            .await;
        (h, first, second)
    }
}

#[tokio::test]
async fn a_job_that_hits_a_transient_error_is_tried_again_and_ends_done() {
    let h = Harness::new(2, io::ErrorKind::Interrupted, 4).await;
    let job = h.create_and_finish().await;
    assert_eq!(job.state, JobState::Done, "{job:?}");
    assert_eq!(h.media.creates.load(Ordering::SeqCst), 3);
    assert!(
        h.fixture.slice_file("m1", "vol-1").exists()
            || h.fixture.slice_file("m2", "vol-1").exists()
    );
    h.wait_for("the job is counted out", |s| s.jobs_running == 0)
        .await;
    let status = h.runner_status();
    assert_eq!((status.errors, status.consecutive_errors), (2, 0));
    assert_eq!(
        status.last_error.as_deref(),
        Some(
            "a volume_create job: transient error; retry 2 of 2 in 0.0s"
                .to_string()
                .as_str()
        )
    );
    assert_eq!(status.state, WorkerState::Idle);
}

#[tokio::test]
async fn a_lasting_transient_error_ends_the_job_in_error_after_the_last_retry() {
    let h = Harness::new(100, io::ErrorKind::TimedOut, 4).await;
    let job = h.create_and_finish().await;
    assert_eq!(job.state, JobState::Error, "{job:?}");
    assert_eq!(
        h.media.creates.load(Ordering::SeqCst),
        3,
        "one try and two retries"
    );
    let reason = job.details.last().cloned().unwrap_or_default();
    assert!(
        reason.starts_with("Could not create volume 'v': "),
        "{reason}"
    );
    // A volume whose creation failed is not kept.
    assert!(h
        .fixture
        .store
        .volume_by_id("vol-1")
        .await
        .expect("store")
        .is_none());
    h.wait_for("the job is counted out", |s| s.jobs_running == 0)
        .await;
    let status = h.runner_status();
    assert_eq!((status.errors, status.consecutive_errors), (3, 3));
    assert_eq!(
        status.last_error,
        Some("a volume_create job ended in Error".to_string())
    );
}

#[tokio::test]
async fn a_permanent_error_ends_the_job_at_once() {
    let h = Harness::new(1, io::ErrorKind::PermissionDenied, 4).await;
    let job = h.create_and_finish().await;
    assert_eq!(job.state, JobState::Error, "{job:?}");
    assert_eq!(h.media.creates.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_failed_snapshot_creation_leaves_no_snapshot_behind() {
    let h = Harness::new(0, io::ErrorKind::Other, 4).await;
    assert_eq!(h.create_and_finish().await.state, JobState::Done);
    h.media.refuse_opens.store(true, Ordering::SeqCst);
    let spec = svs_domain::JobSpec::SnapshotCreate(svs_domain::SnapshotArgs {
        name: "daily".into(),
        snapshot_id: "s-1".into(),
    });
    let job = h
        .fixture
        .store
        .create_snapshot(
            &svs_store::NewSnapshot {
                id: "s-1".into(),
                volume_id: "vol-1".into(),
                tenant_id: h.fixture.user.tenant_id,
                name: "daily".into(),
                consistency: svs_domain::Consistency::Crash,
                volume_size: 1,
                attributes: Default::default(),
                now_ms: 1,
            },
            &h.fixture.new_job(spec, "vol-1"),
        )
        .await
        .expect("snapshot recorded");
    h.runner.submit(job);
    let job = h.finished(job).await;
    assert_eq!(job.state, JobState::Error, "{job:?}");
    let left = h.fixture.store.snapshot_by_id("s-1").await.expect("read");
    assert!(left.is_none(), "the failed snapshot is discarded: {left:?}");
    // The volume is free again and a new snapshot can take the name.
    let volume = h.fixture.store.volume_by_id("vol-1").await.expect("read");
    assert_eq!(volume.and_then(|v| v.job), None);
}

#[tokio::test]
async fn jobs_beyond_the_bound_wait_for_a_free_slot() {
    let (h, first, second) = Harness::one_held_one_queued().await;
    let status = h.runner_status();
    assert_eq!(
        (status.jobs_running, status.state),
        (1, WorkerState::Throttled)
    );
    assert_eq!(
        h.media.creates.load(Ordering::SeqCst),
        1,
        "one create at a time"
    );
    let pending = h.job(second).await;
    assert_eq!(pending.state, JobState::Pending);

    h.media.hold(false);
    assert_eq!(h.finished(first).await.state, JobState::Done);
    assert_eq!(h.finished(second).await.state, JobState::Done);
    h.wait_for("the runner is idle", |s| s.state == WorkerState::Idle)
        .await;
}

#[tokio::test]
async fn a_stop_leaves_queued_jobs_pending_for_the_next_start() {
    let (h, _first, second) = Harness::one_held_one_queued().await;

    h.shutdown.cancel();
    h.wait_for("the queued job leaves", |s| s.jobs_queued == 0)
        .await;
    h.media.hold(false);
    h.runner.wait_until_stopped().await;
    let pending = h.job(second).await;
    assert_eq!(pending.state, JobState::Pending, "{pending:?}");
    assert_eq!(h.runner_status().state, WorkerState::Done);
    // Nothing new starts once stopping.
    h.runner.submit(second);
    h.runner.wait_until_stopped().await;
    assert_eq!(h.media.creates.load(Ordering::SeqCst), 1);
}

/// Short leases, so that tests see them run out.
fn short_leases() -> LeaseSettings {
    LeaseSettings {
        ttl: Duration::from_millis(600),
        claim_interval: Duration::from_millis(20),
    }
}

#[tokio::test]
async fn a_dead_instances_job_is_finished_by_another_once_its_lease_runs_out() {
    let h = Harness::with_leases(0, io::ErrorKind::Other, 4, short_leases()).await;
    h.media.hold(true);
    let job = h.fixture.create_volume("vol-1", "v", 1).await;
    h.runner.submit(job);
    h.creating(1).await;
    // The first instance dies in the middle of the job (as by SIGKILL: no
    // release, no renewal, no more writes).
    h.runner.kill();
    let other = h.another_instance(short_leases()).await;
    // Its lease still runs: nobody else runs the job yet.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(h.media.creates.load(Ordering::SeqCst), 1);
    h.media.hold(false);
    let ended = h.finished(job).await;
    assert_eq!(ended.state, JobState::Done, "{ended:?}");
    // The second instance ran the job's step again (it is idempotent),
    // and the job says it took the job over.
    assert_eq!(h.media.creates.load(Ordering::SeqCst), 2);
    assert!(
        ended
            .details
            .iter()
            .any(|d| d.starts_with("Taken over by instance ") && d.ends_with("(claim 2)")),
        "{ended:?}"
    );
    let volume = h.fixture.store.volume_by_id("vol-1").await.expect("read");
    assert_eq!(
        volume.map(|v| (v.state, v.job)),
        Some((svs_domain::VolumeState::Ready, None))
    );
    other.stopping().cancel();
    other.wait_until_stopped().await;
}

#[tokio::test]
async fn a_job_whose_lease_was_taken_over_stops_without_writing_again() {
    let h = Harness::with_leases(0, io::ErrorKind::Other, 4, short_leases()).await;
    h.runner.resume_unfinished(false).await.expect("claims");
    h.media.hold(true);
    let job = h.fixture.create_volume("vol-1", "v", 1).await;
    h.runner.submit(job);
    h.creating(1).await;
    // Another claim takes the job over (as one would after this instance
    // was paused past its lease).
    let now_ms = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("ms");
    let thief = h
        .fixture
        .store
        .claim_job(
            job,
            &svs_store::LeaseTerms {
                owner: "another instance",
                now_ms: now_ms + 3_600_000,
                ttl_ms: 3_600_000,
            },
        )
        .await
        .expect("claim")
        .expect("taken over");
    assert_eq!(thief.epoch, 2);
    h.media.hold(false);
    h.wait_for("the job stops here", |s| s.jobs_running == 0)
        .await;
    // Neither Done nor Error was written: the job is the new owner's.
    let stored = h.job(job).await;
    assert!(!stored.state.is_finished(), "{stored:?}");
    assert_eq!(h.runner_status().errors, 0, "{:?}", h.runner_status());
    h.shutdown.cancel();
    h.runner.wait_until_stopped().await;
}
