//! Reconcilers: periodic work that compares intent (the store) with reality
//! (exports, files on media) and repairs the difference, in the manner of
//! mayastor's control-plane reconcilers. Work that a failed or interrupted
//! operation left behind is cleaned up here later rather than on every
//! error path, and whatever a pass misses, the next one finds.
//!
//! Each reconciler is a poller on its own timer. A pass runs once at start
//! (before jobs resume), then every period until the shutdown token fires;
//! a failed pass is logged and counted on the worker board, and the next
//! one runs as planned.

mod exports;
mod fronts;
mod media;
mod orphaned_copies;
mod refresh_tokens;
mod snapshot_space;
mod storage_nodes;
#[cfg(test)]
mod tests;

pub use exports::ExportsReconciler;
pub use fronts::FrontPlacement;
pub use media::MediaHealth;
pub use orphaned_copies::OrphanedCopies;
pub use refresh_tokens::ExpiredRefreshTokens;
pub use snapshot_space::SnapshotSpace;
pub use storage_nodes::StorageNodeLiveness;

use crate::clock::Clock;
use crate::workers::{WorkerBoard, WorkerHandle, WorkerState, WorkerStatus};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use svs_dataplane::DataPlaneError;
use svs_store::StoreError;
use thiserror::Error;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn, Instrument};

#[derive(Debug, Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    DataPlane(#[from] DataPlaneError),
    /// Some repairs failed (each is logged); the others were made.
    #[error("{0} repair(s) failed")]
    Incomplete(usize),
}

impl ReconcileError {
    /// A failure the next pass may well not meet, and nothing an operator
    /// must act on now: I/O that a storage node could not answer yet, or
    /// some repairs failed (each logged where it failed).
    fn retried_quietly(&self) -> bool {
        match self {
            ReconcileError::DataPlane(e) => e.is_transient(),
            ReconcileError::Incomplete(_) => true,
            ReconcileError::Store(_) => false,
        }
    }

    /// What went wrong, without internal detail (shown on the worker board).
    fn summary(&self) -> String {
        match self {
            ReconcileError::Store(_) => "store error".to_string(),
            ReconcileError::DataPlane(_) => "I/O error".to_string(),
            ReconcileError::Incomplete(n) => format!("{n} repair(s) failed"),
        }
    }
}

/// One kind of repair.
#[async_trait]
pub trait Reconciler: Send + Sync + 'static {
    /// Its name on the worker board and in logs.
    fn name(&self) -> &'static str;

    /// Time between two passes.
    fn period(&self) -> Duration;

    /// One pass: finds what differs from the store's intent and repairs it.
    /// Returns how many repairs it made. Must be idempotent and must leave
    /// alone what a running job is working on.
    async fn reconcile(&self) -> Result<usize, ReconcileError>;
}

/// The reconcilers of the service and their entries on the worker board.
pub struct Reconcilers {
    reconcilers: Vec<(Arc<dyn Reconciler>, WorkerHandle)>,
    clock: Arc<dyn Clock>,
}

impl Reconcilers {
    pub fn new(
        board: &WorkerBoard,
        clock: Arc<dyn Clock>,
        reconcilers: Vec<Arc<dyn Reconciler>>,
    ) -> Reconcilers {
        let reconcilers = reconcilers
            .into_iter()
            .map(|r| {
                let status = board.register(WorkerStatus {
                    period_secs: Some(r.period().as_secs()),
                    ..WorkerStatus::new(r.name())
                });
                (r, status)
            })
            .collect();
        Reconcilers { reconcilers, clock }
    }

    /// One pass of each, in order (at start, before jobs resume).
    pub async fn run_once(&self) {
        for (reconciler, status) in &self.reconcilers {
            pass(reconciler.as_ref(), status, self.clock.as_ref()).await;
        }
    }

    /// Polls each reconciler on its own timer until `shutdown` fires; the
    /// handle ends when every poller has finished its pass in progress.
    pub fn spawn(self, shutdown: CancellationToken) -> JoinHandle<()> {
        let mut pollers = tokio::task::JoinSet::new();
        for (reconciler, status) in self.reconcilers {
            let (clock, shutdown) = (Arc::clone(&self.clock), shutdown.clone());
            let span = tracing::info_span!("reconcile", name = reconciler.name());
            pollers.spawn(
                async move { poll(reconciler, status, clock, shutdown).await }.instrument(span),
            );
        }
        tokio::spawn(async move { while pollers.join_next().await.is_some() {} })
    }
}

async fn poll(
    reconciler: Arc<dyn Reconciler>,
    status: WorkerHandle,
    clock: Arc<dyn Clock>,
    shutdown: CancellationToken,
) {
    let period = reconciler.period().max(Duration::from_millis(10));
    let mut timer = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    // A pass that overran its period is not followed by a burst of others.
    timer.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = timer.tick() => pass(reconciler.as_ref(), &status, clock.as_ref()).await,
            () = shutdown.cancelled() => break,
        }
    }
    status.update(|s| s.state = WorkerState::Done);
}

async fn pass(reconciler: &dyn Reconciler, status: &WorkerHandle, clock: &dyn Clock) {
    status.update(|s| s.state = WorkerState::Busy);
    let result = reconciler.reconcile().await;
    status.update(|s| {
        s.state = WorkerState::Idle;
        match &result {
            Ok(_) => s.record_success(clock.now_ms()),
            Err(e) => s.record_error(
                format!("{}; see the service log", e.summary()),
                clock.now_ms(),
            ),
        }
    });
    match result {
        Ok(0) => {}
        Ok(repairs) => info!(reconciler = reconciler.name(), repairs, "reconciled"),
        // Tried again next period: a storage node not reachable yet (killed,
        // not yet judged Offline), or repairs each already logged.
        Err(e) if e.retried_quietly() => {
            warn!(reconciler = reconciler.name(), error = %e, "reconcile pass incomplete; trying again next period")
        }
        Err(e) => error!(reconciler = reconciler.name(), error = %e, "reconcile pass failed"),
    }
}
