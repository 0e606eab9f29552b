//! Which instance runs the cluster-wide reconcilers: the holder of the
//! lease named [`LEASE_NAME`] in the store (`LeaseStore`).
//!
//! A lease row rather than a PostgreSQL session advisory lock: a session
//! lock lives as long as one connection, which PgBouncer's transaction
//! pooling does not keep, and says nothing about how long its holder may
//! still trust it once the database is out of reach. The row says until
//! when it holds (`expires_ms`, on the clock of the instance that took it),
//! so an instance cut off from the database knows when to stop, and the
//! others know when to take over.
//!
//! [`Leadership`] takes or renews the lease every third of its `ttl`
//! (setting `leader_lease`), with this instance's id as owner, and counts
//! itself leader only until `ttl − margin` (margin: a quarter of `ttl`)
//! after it *asked* for the last grant, on the monotonic clock: two
//! renewals in a row may fail and it still leads, and it stops leading a
//! margin before any other instance may take the lease over, which covers
//! the difference between instances' clocks. At shutdown it gives the lease
//! up, so another instance takes over at its next renewal rather than a
//! `ttl` later.
//!
//! One code path for both stores. On SQLite the data directory's lock
//! makes this process the only instance (`sole`): it acquires and renews
//! all the same, and counts as leader even before its first grant (a
//! crashed predecessor's lease, under another instance id, still runs for
//! up to a `ttl` after a restart; it cannot be anyone's but a dead
//! process's).

use crate::workers::{WorkerBoard, WorkerHandle, WorkerState, WorkerStatus};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use svs_common::clock::Clock;
use svs_store::{LeaseTerms, Store};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// The lease whose holder runs the cluster-wide reconcilers.
pub const LEASE_NAME: &str = "reconcilers";

/// The worker board's entry of the leadership.
pub const LEADER_WORKER: &str = "leader";

/// How long a lease lasts, when it is renewed and how long its holder
/// trusts it: pure arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTiming {
    /// How long a grant holds in the store (setting `leader_lease`).
    pub ttl: Duration,
}

impl LeaseTiming {
    /// How much earlier than the store's expiry the holder stops trusting
    /// its lease: a quarter of it.
    pub fn margin(&self) -> Duration {
        self.ttl / 4
    }

    /// How long after it asked for a grant the holder leads.
    pub fn trusted_for(&self) -> Duration {
        self.ttl.saturating_sub(self.margin())
    }

    /// Time between two renewals: a third of the lease, so two may fail in
    /// a row before the holder stops leading.
    pub fn renew_every(&self) -> Duration {
        (self.ttl / 3).max(Duration::from_millis(1))
    }

    /// The lease's length as the store counts it.
    pub fn ttl_ms(&self) -> i64 {
        i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX)
    }

    /// Whether a grant asked for at `asked` still makes its holder the
    /// leader at `now`.
    pub fn leads(&self, asked: Instant, now: Instant) -> bool {
        match asked.checked_add(self.trusted_for()) {
            Some(until) => now < until,
            // Beyond any clock: a lease that never runs out.
            None => true,
        }
    }
}

/// How an instance takes part in the leadership.
#[derive(Debug, Clone)]
pub struct LeadershipSettings {
    /// The owner of the lease: this instance's id
    /// (`crate::cluster::new_instance_id`).
    pub owner: String,
    pub timing: LeaseTiming,
    /// This process is the only instance its store can have (SQLite): it
    /// leads whatever the lease says.
    pub sole: bool,
}

/// The last grant this instance got.
#[derive(Debug, Clone, Copy)]
struct Grant {
    /// When the request that was granted was sent (monotonic).
    asked: Instant,
    epoch: i64,
}

#[derive(Debug, Default)]
struct State {
    grant: Option<Grant>,
    /// Whether it led at the last look (for logging changes only).
    announced: bool,
    released: bool,
}

/// This instance's part in the reconcilers' leadership (see the module doc).
pub struct Leadership {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    settings: LeadershipSettings,
    state: Mutex<State>,
    status: WorkerHandle,
}

impl Leadership {
    /// A leadership that does not lead yet (see [`Leadership::renew`]),
    /// with its entry `leader` on the board.
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        board: &WorkerBoard,
        settings: LeadershipSettings,
    ) -> Arc<Leadership> {
        let status = board.register(WorkerStatus {
            period_secs: Some(settings.timing.renew_every().as_secs()),
            note: Some(format!(
                "no lease asked for yet; this instance is {}",
                settings.owner
            )),
            ..WorkerStatus::new(LEADER_WORKER)
        });
        Arc::new(Leadership {
            store,
            clock,
            settings,
            state: Mutex::new(State::default()),
            status,
        })
    }

    /// The lease's owner: this instance's id.
    pub fn owner(&self) -> &str {
        &self.settings.owner
    }

    /// Whether this instance runs the cluster-wide reconcilers now.
    pub fn is_leader(&self) -> bool {
        let released = self.lock().released;
        !released && (self.settings.sole || self.epoch().is_some())
    }

    /// The epoch of the lease while this instance holds it.
    pub fn epoch(&self) -> Option<i64> {
        let state = self.lock();
        state
            .grant
            .filter(|g| self.settings.timing.leads(g.asked, Instant::now()))
            .map(|g| g.epoch)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Plain values: a panic elsewhere leaves them usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes or renews the lease once; whether this instance leads now.
    /// A store error keeps the last grant, which runs out on its own.
    pub async fn renew(&self) -> bool {
        let asked = Instant::now();
        let terms = LeaseTerms {
            owner: &self.settings.owner,
            now_ms: self.clock.now_ms(),
            ttl_ms: self.settings.timing.ttl_ms(),
        };
        let answer = self.store.acquire_lease(LEASE_NAME, &terms).await;
        let released = {
            let mut state = self.lock();
            match &answer {
                _ if state.released => {}
                // A slower, older request answered late changes nothing.
                Ok(Some(epoch)) if state.grant.is_none_or(|g| g.asked <= asked) => {
                    state.grant = Some(Grant {
                        asked,
                        epoch: *epoch,
                    });
                }
                Ok(Some(_)) => {}
                Ok(None) => state.grant = None,
                Err(_) => {}
            }
            state.released
        };
        if released {
            return self.is_leader();
        }
        let now_ms = self.clock.now_ms();
        match &answer {
            Ok(_) => self.status.update(|s| s.record_success(now_ms)),
            Err(e) => {
                warn!(error = %e, "the reconcilers' lease could not be taken or renewed");
                self.status
                    .update(|s| s.record_error("store error; see the service log".into(), now_ms));
            }
        }
        self.announce(answer.is_err());
        self.is_leader()
    }

    /// Logs a change of leadership and shows the state on the board.
    fn announce(&self, failed: bool) {
        let leads = self.is_leader();
        let epoch = self.epoch();
        let owner = self.owner();
        let changed = {
            let mut state = self.lock();
            std::mem::replace(&mut state.announced, leads) != leads
        };
        let note = match (leads, epoch) {
            (true, Some(epoch)) => format!("leader: this instance ({owner}), epoch {epoch}"),
            (true, None) => format!(
                "leader: the only instance of its store ({owner}); an earlier process's lease \
                 runs out first"
            ),
            (false, _) if failed => format!(
                "follower: the lease could not be renewed (store error); this instance is {owner}"
            ),
            (false, _) => {
                format!("follower: another instance holds the lease; this instance is {owner}")
            }
        };
        self.status.update(|s| {
            s.state = WorkerState::Idle;
            s.note = Some(note);
        });
        match (changed, leads) {
            (true, true) => info!(owner, epoch, "this instance leads the reconcilers"),
            (true, false) if failed => warn!(
                owner,
                "this instance no longer leads the reconcilers: its lease could not be renewed \
                 in time"
            ),
            (true, false) => info!(
                owner,
                "this instance follows: another instance leads the reconcilers"
            ),
            (false, _) => {}
        }
    }

    /// Renews the lease every third of its length until `shutdown` fires
    /// (the first renewal at once). A renewal in progress is abandoned at
    /// shutdown; [`Leadership::release`] comes after.
    pub async fn keep(self: Arc<Self>, shutdown: CancellationToken) {
        let every = self.settings.timing.renew_every();
        let mut timer = tokio::time::interval(every);
        timer.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = timer.tick() => {}
                () = shutdown.cancelled() => break,
            }
            tokio::select! {
                _ = self.renew() => {}
                () = shutdown.cancelled() => break,
            }
        }
    }

    /// Gives the lease up (at shutdown, once no pass runs here any more):
    /// another instance takes it at its next renewal. Not led from then on;
    /// a store that does not answer within the lease's length leaves the
    /// lease to run out.
    pub async fn release(&self) {
        let held = {
            let mut state = self.lock();
            state.released = true;
            state.grant.take().is_some()
        };
        if held {
            let released = tokio::time::timeout(
                self.settings.timing.ttl,
                self.store.release_lease(LEASE_NAME, self.owner()),
            )
            .await;
            match released {
                Ok(Ok(())) => info!(owner = self.owner(), "the reconcilers' lease is released"),
                Ok(Err(e)) => {
                    warn!(error = %e, "the reconcilers' lease was not released; it runs out")
                }
                Err(_) => warn!("the reconcilers' lease was not released in time; it runs out"),
            }
        }
        self.status.update(|s| {
            s.state = WorkerState::Done;
            s.note = Some(format!(
                "stopped: lease given up; this instance was {}",
                self.settings.owner
            ));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(ttl_ms: u64) -> LeaseTiming {
        LeaseTiming {
            ttl: Duration::from_millis(ttl_ms),
        }
    }

    #[test]
    fn a_grant_leads_until_its_lease_less_the_margin() {
        let t = timing(10_000);
        assert_eq!(t.margin(), Duration::from_millis(2_500));
        assert_eq!(t.trusted_for(), Duration::from_millis(7_500));
        let asked = Instant::now();
        let at = |ms| asked + Duration::from_millis(ms);
        assert!(t.leads(asked, at(0)));
        assert!(t.leads(asked, at(7_499)));
        assert!(!t.leads(asked, at(7_500)), "the margin before the expiry");
        assert!(!t.leads(asked, at(10_000)));
    }

    #[test]
    fn two_renewals_may_fail_before_the_leader_steps_down() {
        let t = timing(10_000);
        let every = t.renew_every();
        assert_eq!(every.as_millis(), 3_333);
        let asked = Instant::now();
        // Granted at 0; the renewals at 1/3 and 2/3 of the lease fail.
        assert!(t.leads(asked, asked + every * 2));
        assert!(!t.leads(asked, asked + every * 3));
        // Out before anyone may take over, by the margin.
        assert!(t.trusted_for() + t.margin() <= t.ttl);
    }

    #[test]
    fn a_tiny_or_huge_lease_neither_stops_the_timer_nor_overflows() {
        assert_eq!(timing(1).renew_every(), Duration::from_millis(1));
        let huge = LeaseTiming { ttl: Duration::MAX };
        assert_eq!(huge.ttl_ms(), i64::MAX);
        assert!(huge.leads(Instant::now(), Instant::now()));
    }
}
