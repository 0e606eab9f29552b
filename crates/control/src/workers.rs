//! Status of the background workers (the job runner, the reconcilers'
//! leadership, each reconciler), as people see it at `GET /workers`: what
//! each is doing, and how its work has been failing.
//!
//! Error texts here are summaries safe for any signed-in caller (a job id,
//! a kind of failure); the causes are in the service log.

use std::sync::{Arc, Mutex, MutexGuard};

/// What a worker is doing (garage's worker states).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerState {
    /// Working.
    Busy,
    /// Has work but is held back: waiting for a free slot or out a retry
    /// back-off.
    Throttled,
    /// Nothing to do until new work or its next period.
    Idle,
    /// Stopped (the service is stopping).
    Done,
}

svs_domain::svs_names!(WorkerState {
    Busy = "Busy",
    Throttled = "Throttled",
    Idle = "Idle",
    Done = "Done",
});

/// One worker's status.
#[derive(Debug, Clone)]
pub struct WorkerStatus {
    pub name: String,
    pub state: WorkerState,
    /// Jobs executing now (job runner only).
    pub jobs_running: usize,
    /// Jobs waiting for a free slot (job runner only).
    pub jobs_queued: usize,
    /// Running jobs waiting out a back-off before they are tried again.
    pub jobs_retrying: usize,
    /// The job runner's bound on concurrent jobs.
    pub max_concurrent_jobs: Option<usize>,
    /// A reconciler's period in seconds.
    pub period_secs: Option<u64>,
    /// Failures since start (a job try that failed, a reconcile pass that failed).
    pub errors: u64,
    /// Failures since the last success.
    pub consecutive_errors: u64,
    pub last_error: Option<String>,
    /// When the last error happened, in milliseconds since the epoch.
    pub last_error_ms: Option<i64>,
    /// When a reconciler last completed a pass, in milliseconds since the epoch.
    pub last_success_ms: Option<i64>,
    /// What the state alone does not say, in words: whether this instance
    /// leads the reconcilers (worker `leader`), or that a reconciler
    /// skips its passes because another instance leads.
    pub note: Option<String>,
    /// The job runner: the jobs this instance holds a claim on (running or
    /// waiting for a slot), by id; with several instances, where a job
    /// runs.
    pub jobs_held: Option<Vec<i64>>,
}

impl WorkerStatus {
    pub fn new(name: &str) -> WorkerStatus {
        WorkerStatus {
            name: name.to_string(),
            state: WorkerState::Idle,
            jobs_running: 0,
            jobs_queued: 0,
            jobs_retrying: 0,
            max_concurrent_jobs: None,
            period_secs: None,
            errors: 0,
            consecutive_errors: 0,
            last_error: None,
            last_error_ms: None,
            last_success_ms: None,
            note: None,
            jobs_held: None,
        }
    }

    pub fn record_error(&mut self, summary: String, now_ms: i64) {
        self.errors += 1;
        self.consecutive_errors += 1;
        self.last_error = Some(summary);
        self.last_error_ms = Some(now_ms);
    }

    pub fn record_success(&mut self, now_ms: i64) {
        self.consecutive_errors = 0;
        self.last_success_ms = Some(now_ms);
    }
}

/// Every worker's status, in the order they registered.
#[derive(Default)]
pub struct WorkerBoard {
    workers: Mutex<Vec<WorkerHandle>>,
}

impl WorkerBoard {
    pub fn register(&self, status: WorkerStatus) -> WorkerHandle {
        let handle = WorkerHandle(Arc::new(Mutex::new(status)));
        self.workers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(handle.clone());
        handle
    }

    pub fn statuses(&self) -> Vec<WorkerStatus> {
        self.workers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|w| w.lock().clone())
            .collect()
    }
}

/// A worker's own entry on the board.
#[derive(Clone)]
pub struct WorkerHandle(Arc<Mutex<WorkerStatus>>);

impl WorkerHandle {
    fn lock(&self) -> MutexGuard<'_, WorkerStatus> {
        // A poisoned lock only means a panic elsewhere; counters stay usable.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn update<T>(&self, change: impl FnOnce(&mut WorkerStatus) -> T) -> T {
        change(&mut self.lock())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_count_up_and_a_success_resets_the_consecutive_ones() {
        let board = WorkerBoard::default();
        let worker = board.register(WorkerStatus::new("w"));
        worker.update(|s| s.record_error("first".into(), 1));
        worker.update(|s| s.record_error("second".into(), 2));
        worker.update(|s| s.record_success(3));
        let status = &board.statuses()[0];
        assert_eq!((status.errors, status.consecutive_errors), (2, 0));
        assert_eq!(status.last_error.as_deref(), Some("second"));
        assert_eq!(
            (status.last_error_ms, status.last_success_ms),
            (Some(2), Some(3))
        );
    }
}
