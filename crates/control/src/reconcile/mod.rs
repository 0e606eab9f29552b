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
//!
//! Several `svs serve` instances may share one store. A reconciler whose
//! repair is of state they all share runs on one of them at a time, the
//! leader ([`Scope::Leader`], [`Leadership`]): the others skip its passes
//! (`Idle`, with a note on the worker board) and one of them takes over
//! within a lease when the leader stops. A reconciler that works on this
//! process's own state runs on every instance ([`Scope::EveryInstance`]).
//! `app.rs` gives each its scope:
//!
//! - leader only: orphaned copies (it deletes files, judging from the
//!   store's unfinished jobs, which every instance's jobs are in), the
//!   refresh-token purge (rows only), storage node liveness (one judge of
//!   the heartbeats every instance records; its data-plane half, open
//!   volumes dropping the failed media, happens on the leader, and the
//!   others' volumes meet the silent node's I/O failures themselves) and
//!   front placement (each move takes a new front epoch: two movers would
//!   fence each other's fronts back and forth);
//! - every instance: the exports (it opens, in this process's NBD export
//!   registry, the exports of attachments served by `svs serve`: no other
//!   process can open them here, so a leader-only pass would leave a
//!   follower's exports closed after its restart), media health (it records
//!   what this process's own data plane saw fail, which no other instance
//!   sees; the records are idempotent, and every instance already makes
//!   them at once as its I/O fails, this poll being their backstop) and
//!   snapshot space (it sets this process's data-plane snapshot budgets,
//!   which only this process can; the figures it records are measured, not
//!   counted up, so two instances recording them only repeat each other).
//!
//! A pass checks the leadership when it starts; a pass running when the
//! lease lapses is not cut short, which is sound as every pass is
//! idempotent and leaves alone what a job works on.

mod exports;
mod fronts;
mod leader;
mod media;
mod orphaned_copies;
mod refresh_tokens;
mod snapshot_space;
mod storage_nodes;
#[cfg(test)]
mod tests;

pub use exports::ExportsReconciler;
pub use fronts::FrontPlacement;
pub use leader::{Leadership, LeadershipSettings, LeaseTiming, LEADER_WORKER, LEASE_NAME};
pub use media::MediaHealth;
pub use orphaned_copies::OrphanedCopies;
pub use refresh_tokens::ExpiredRefreshTokens;
pub use snapshot_space::SnapshotSpace;
pub use storage_nodes::StorageNodeLiveness;

use crate::workers::{WorkerBoard, WorkerHandle, WorkerState, WorkerStatus};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use svs_common::clock::Clock;
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

/// Where a reconciler runs when several instances share one store (see the
/// module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// On the leader only: a repair of state every instance shares.
    Leader,
    /// On every instance: a repair of this process's own state.
    EveryInstance,
}

/// One reconciler, where it runs, and its entry on the worker board.
struct Poller {
    reconciler: Arc<dyn Reconciler>,
    scope: Scope,
    status: WorkerHandle,
}

/// Whether a poller runs its passes here: always for its own state, on the
/// leader only for shared state (and always without a leadership: a process
/// alone, as in tests).
#[derive(Clone)]
struct Gate(Option<Arc<Leadership>>);

impl Gate {
    fn opens(&self, scope: Scope) -> bool {
        match (scope, &self.0) {
            (Scope::EveryInstance, _) | (Scope::Leader, None) => true,
            (Scope::Leader, Some(leadership)) => leadership.is_leader(),
        }
    }
}

/// The note on a reconciler that skips its pass here.
const FOLLOWER_NOTE: &str = "skipped: another instance leads the reconcilers";

/// The reconcilers of the service and their entries on the worker board.
pub struct Reconcilers {
    pollers: Vec<Poller>,
    clock: Arc<dyn Clock>,
    gate: Gate,
}

impl Reconcilers {
    /// Every reconciler runs here until [`Reconcilers::led_by`] gives them
    /// a leadership.
    pub fn new(
        board: &WorkerBoard,
        clock: Arc<dyn Clock>,
        reconcilers: Vec<(Scope, Arc<dyn Reconciler>)>,
    ) -> Reconcilers {
        let pollers = reconcilers
            .into_iter()
            .map(|(scope, reconciler)| {
                let status = board.register(WorkerStatus {
                    period_secs: Some(reconciler.period().as_secs()),
                    ..WorkerStatus::new(reconciler.name())
                });
                Poller {
                    reconciler,
                    scope,
                    status,
                }
            })
            .collect();
        Reconcilers {
            pollers,
            clock,
            gate: Gate(None),
        }
    }

    /// Runs the [`Scope::Leader`] reconcilers only while `leadership`
    /// leads; [`Reconcilers::run_once`] takes the lease first,
    /// [`Reconcilers::spawn`] keeps renewing it and gives it up at the end.
    pub fn led_by(self, leadership: Arc<Leadership>) -> Reconcilers {
        Reconcilers {
            gate: Gate(Some(leadership)),
            ..self
        }
    }

    /// One pass of each, in order (at start, before jobs resume), once the
    /// lease was asked for.
    pub async fn run_once(&self) {
        if let Some(leadership) = &self.gate.0 {
            leadership.renew().await;
        }
        for p in &self.pollers {
            if self.gate.opens(p.scope) {
                pass(p.reconciler.as_ref(), &p.status, self.clock.as_ref()).await;
            } else {
                skip(&p.status);
            }
        }
    }

    /// Polls each reconciler on its own timer until `shutdown` fires, and
    /// keeps the leadership's lease; the handle ends when every poller has
    /// finished its pass in progress and the lease is given up.
    pub fn spawn(self, shutdown: CancellationToken) -> JoinHandle<()> {
        let leadership = self.gate.0.clone();
        let keeping = leadership
            .clone()
            .map(|l| tokio::spawn(l.keep(shutdown.clone())));
        let mut pollers = tokio::task::JoinSet::new();
        for poller in self.pollers {
            let (clock, gate, shutdown) =
                (Arc::clone(&self.clock), self.gate.clone(), shutdown.clone());
            let span = tracing::info_span!("reconcile", name = poller.reconciler.name());
            pollers
                .spawn(async move { poll(poller, gate, clock, shutdown).await }.instrument(span));
        }
        tokio::spawn(async move {
            while pollers.join_next().await.is_some() {}
            if let Some(keeping) = keeping {
                let _ = keeping.await;
            }
            // No pass of ours runs any more: another instance may start one.
            if let Some(leadership) = leadership {
                leadership.release().await;
            }
        })
    }
}

async fn poll(poller: Poller, gate: Gate, clock: Arc<dyn Clock>, shutdown: CancellationToken) {
    let Poller {
        reconciler,
        scope,
        status,
    } = poller;
    let period = reconciler.period().max(Duration::from_millis(10));
    let mut timer = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    // A pass that overran its period is not followed by a burst of others.
    timer.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = timer.tick() => {
                if gate.opens(scope) {
                    pass(reconciler.as_ref(), &status, clock.as_ref()).await;
                } else {
                    skip(&status);
                }
            }
            () = shutdown.cancelled() => break,
        }
    }
    status.update(|s| s.state = WorkerState::Done);
}

/// A follower's turn of a leader-only reconciler.
fn skip(status: &WorkerHandle) {
    status.update(|s| {
        s.state = WorkerState::Idle;
        s.note = Some(FOLLOWER_NOTE.to_string());
    });
}

async fn pass(reconciler: &dyn Reconciler, status: &WorkerHandle, clock: &dyn Clock) {
    status.update(|s| {
        s.state = WorkerState::Busy;
        s.note = None;
    });
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
