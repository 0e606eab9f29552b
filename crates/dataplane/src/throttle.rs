//! Pacing of copies to a byte rate, with cancellation: each copy's own rate,
//! and rates shared by every copy to or from one node ([`RateBudget`],
//! handed out by [`MovementBudgets`]), so that `movement_rate` bounds what a
//! node moves however many copies run at once.
//!
//! The pacer reads time from a [`PaceClock`] so its arithmetic can be tested
//! on a clock that only moves when it "sleeps".

use crate::CancellationToken;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest sleep between checks of the cancel token.
const CANCEL_POLL: Duration = Duration::from_millis(100);

/// The grant step of an unthrottled copy under a [`CopyGate`].
const UNTHROTTLED_GRANT: u64 = 16 << 20;

#[derive(Debug)]
pub(crate) struct Cancelled;

/// How long a budget left idle counts as spent already: a copy that takes
/// this long over its own reads and writes between two bookings still gets
/// the whole rate, and a budget idle for longer allows at most this much
/// of a burst.
const BUDGET_SLACK: Duration = Duration::from_millis(100);

/// A byte rate shared by every copy that draws from it (all copies to or
/// from one node). Each copy books the bytes it just moved and waits until
/// the budget's timeline reaches them: whatever the number of copies, the
/// sum of their bytes over time stays within the rate (plus one
/// `BUDGET_SLACK` of burst).
#[derive(Debug)]
pub struct RateBudget {
    rate: u64,
    /// When the bytes booked so far are all within the rate.
    booked_until: Mutex<Option<Instant>>,
}

impl RateBudget {
    /// `rate` in bytes per second (at least 1).
    pub fn new(rate: u64) -> RateBudget {
        RateBudget {
            rate: rate.max(1),
            booked_until: Mutex::new(None),
        }
    }

    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Books `bytes` moved at `now`: the instant the caller waits for.
    fn book(&self, bytes: u64, now: Instant) -> Instant {
        let cost = Duration::from_secs_f64(bytes as f64 / self.rate as f64);
        // A poisoned lock only means another copy panicked mid-booking: the
        // instant it guards is still a valid one.
        let mut until = self.booked_until.lock().unwrap_or_else(|e| e.into_inner());
        let idle_floor = now.checked_sub(BUDGET_SLACK).unwrap_or(now);
        let start = until.map_or(idle_floor, |u| u.max(idle_floor));
        let due = start + cost;
        *until = Some(due);
        due
    }
}

/// A live control of one job's copies, read at every step of their pacing:
/// paused (each copy waits where it is; a live move's mirroring of writes
/// goes on, so the copy resumes from there as if never stopped) and the
/// job's own rate, which replaces the copy's rate and the shared budgets.
#[derive(Debug, Default)]
pub struct CopyGate {
    paused: AtomicBool,
    /// 0: no rate of its own; u64::MAX: unthrottled; else bytes per second.
    rate: AtomicU64,
}

impl CopyGate {
    pub fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
    }

    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    /// The job's own rate: None = the copy's options apply; Some(0) =
    /// unthrottled; Some(n) = n bytes per second.
    pub fn set_rate(&self, rate: Option<u64>) {
        let stored = match rate {
            None => 0,
            Some(0) => u64::MAX,
            Some(n) => n.min(u64::MAX - 1),
        };
        self.rate.store(stored, Ordering::SeqCst);
    }

    /// None: no rate of its own; Some(None): unthrottled; Some(Some(n)).
    fn rate(&self) -> Option<Option<u64>> {
        match self.rate.load(Ordering::SeqCst) {
            0 => None,
            u64::MAX => Some(None),
            n => Some(Some(n)),
        }
    }
}

/// The movement budgets of the nodes: one [`RateBudget`] per node at the
/// service's `movement_rate`, made on first use and shared by every copy
/// that reads from or writes to the node.
#[derive(Debug, Default)]
pub struct MovementBudgets {
    rate: Option<u64>,
    nodes: Mutex<HashMap<String, Arc<RateBudget>>>,
}

impl MovementBudgets {
    /// `rate` in bytes per second per node; `None` or `Some(0)` =
    /// unthrottled (no budgets at all).
    pub fn new(rate: Option<u64>) -> MovementBudgets {
        MovementBudgets {
            rate: rate.filter(|&r| r > 0),
            nodes: Mutex::new(HashMap::new()),
        }
    }

    /// The budgets of `nodes` (each once), for a copy between them.
    pub fn for_nodes(&self, nodes: &[&str]) -> Vec<Arc<RateBudget>> {
        let Some(rate) = self.rate else {
            return Vec::new();
        };
        let mut map = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        let mut budgets: Vec<Arc<RateBudget>> = Vec::new();
        for node in nodes {
            let budget = map
                .entry((*node).to_string())
                .or_insert_with(|| Arc::new(RateBudget::new(rate)));
            if !budgets.iter().any(|b| Arc::ptr_eq(b, budget)) {
                budgets.push(Arc::clone(budget));
            }
        }
        budgets
    }
}

/// Paces a copy that another process runs (a storage node's front copies
/// a slice for this one's job): the copy may reach only the bytes granted
/// to it, and each grant waits until the copy's own rate and the shared
/// budgets allow it, so the budgets hold however many copies run and
/// wherever.
pub struct CopyGrants<'a> {
    pacer: Pacer<'a>,
    /// Bytes granted per step (a quarter of a second at the lowest rate).
    step: u64,
}

impl<'a> CopyGrants<'a> {
    /// None when `options` leave the copy unthrottled: nothing to grant.
    pub fn new(options: &'a crate::CopyOptions) -> Option<CopyGrants<'a>> {
        let pacer = Pacer::new(options.rate_limit, &options.budgets, &options.cancel)
            .gated(options.gate.as_deref());
        // A gated copy is granted step by step even unthrottled: a pause
        // must reach it.
        let rate = pacer
            .rate()
            .or_else(|| options.gate.as_ref().map(|_| UNTHROTTLED_GRANT * 4))?;
        Some(CopyGrants {
            pacer,
            step: (rate / 4).max(64 * 1024),
        })
    }

    /// The next grant for a copy that copied `copied` bytes so far: a step
    /// more, once it is within the rates (sleeps until then); `Cancelled`
    /// when the copy's cancel token fires meanwhile.
    pub fn next(&self, copied: u64) -> Result<u64, crate::DataPlaneError> {
        let grant = copied + self.step;
        self.pacer
            .pace(grant)
            .map_err(|Cancelled| crate::DataPlaneError::Cancelled)?;
        Ok(grant)
    }
}

/// Where a pacer gets the time and how it waits.
pub(crate) trait PaceClock {
    /// Time since the pacer started.
    fn elapsed(&self) -> Duration;
    /// The time on the timeline shared budgets use.
    fn now(&self) -> Instant;
    fn sleep(&self, duration: Duration);
}

/// Real time: a monotonic start instant and a thread sleep.
pub(crate) struct RealTime(Instant);

impl PaceClock for RealTime {
    fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// Keeps cumulative bytes / elapsed time at or below a rate, and the bytes
/// booked on shared budgets within theirs.
pub(crate) struct Pacer<'a, C: PaceClock = RealTime> {
    rate: Option<u64>,
    budgets: &'a [Arc<RateBudget>],
    /// Bytes booked on the budgets so far.
    booked: Cell<u64>,
    clock: C,
    cancel: &'a CancellationToken,
    gate: Option<&'a CopyGate>,
    /// Under the gate's own rate: where its timeline started (elapsed time,
    /// bytes done then, and the rate), restarted at each change of rate and
    /// after each pause, so that neither makes a burst.
    gated_from: Cell<Option<(Duration, u64, Option<u64>)>>,
}

impl<'a> Pacer<'a, RealTime> {
    /// `rate` in bytes per second; `None` or `Some(0)` = unthrottled by
    /// its own rate; `budgets`: shared rates it also keeps within.
    pub(crate) fn new(
        rate: Option<u64>,
        budgets: &'a [Arc<RateBudget>],
        cancel: &'a CancellationToken,
    ) -> Self {
        Pacer::with_clock(rate, budgets, cancel, RealTime(Instant::now()))
    }
}

impl<'a, C: PaceClock> Pacer<'a, C> {
    pub(crate) fn with_clock(
        rate: Option<u64>,
        budgets: &'a [Arc<RateBudget>],
        cancel: &'a CancellationToken,
        clock: C,
    ) -> Self {
        Pacer {
            rate: rate.filter(|&r| r > 0),
            budgets,
            booked: Cell::new(0),
            clock,
            cancel,
            gate: None,
            gated_from: Cell::new(None),
        }
    }

    /// Paced under `gate` too (see [`CopyGate`]).
    pub(crate) fn gated(mut self, gate: Option<&'a CopyGate>) -> Self {
        self.gate = gate;
        self
    }

    /// The lowest rate it keeps within, in bytes per second, if throttled.
    pub(crate) fn rate(&self) -> Option<u64> {
        if let Some(own) = self.gate.and_then(CopyGate::rate) {
            return own;
        }
        self.budgets.iter().map(|b| b.rate()).chain(self.rate).min()
    }

    pub(crate) fn check(&self) -> Result<(), Cancelled> {
        if self.cancel.is_cancelled() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }

    /// Called after `done` bytes in total have been handled: sleeps until
    /// that is within the rate and the budgets, checking the cancel token
    /// as it goes.
    pub(crate) fn pace(&self, done: u64) -> Result<(), Cancelled> {
        self.check()?;
        if let Some(gate) = self.gate {
            if gate.is_paused() {
                while gate.is_paused() {
                    self.clock.sleep(CANCEL_POLL);
                    self.check()?;
                }
                // A new timeline after the pause: no burst to catch up.
                self.gated_from.set(None);
            }
            if let Some(own) = gate.rate() {
                return self.pace_own(done, own);
            }
            self.gated_from.set(None);
        }
        self.pace_budgets(done)?;
        let Some(rate) = self.rate else {
            return Ok(());
        };
        let due = Duration::from_secs_f64(done as f64 / rate as f64);
        loop {
            let elapsed = self.clock.elapsed();
            if elapsed >= due {
                return Ok(());
            }
            self.clock.sleep((due - elapsed).min(CANCEL_POLL));
            self.check()?;
        }
    }

    /// Keeps to the gate's own rate (None: unthrottled) from where that
    /// rate took over.
    fn pace_own(&self, done: u64, rate: Option<u64>) -> Result<(), Cancelled> {
        let elapsed = self.clock.elapsed();
        let (start, base, _) = match self.gated_from.get() {
            Some(from) if from.2 == rate => from,
            _ => {
                let from = (elapsed, done, rate);
                self.gated_from.set(Some(from));
                from
            }
        };
        let Some(rate) = rate else {
            return Ok(());
        };
        let due = start + Duration::from_secs_f64(done.saturating_sub(base) as f64 / rate as f64);
        loop {
            let elapsed = self.clock.elapsed();
            if elapsed >= due {
                return Ok(());
            }
            self.clock.sleep((due - elapsed).min(CANCEL_POLL));
            self.check()?;
        }
    }

    /// Books the bytes done since the last call on every budget and waits
    /// for the latest of them.
    fn pace_budgets(&self, done: u64) -> Result<(), Cancelled> {
        let new = done.saturating_sub(self.booked.get());
        if self.budgets.is_empty() || new == 0 {
            return Ok(());
        }
        self.booked.set(done);
        let now = self.clock.now();
        let Some(due) = self.budgets.iter().map(|b| b.book(new, now)).max() else {
            return Ok(());
        };
        loop {
            let now = self.clock.now();
            if now >= due {
                return Ok(());
            }
            self.clock.sleep((due - now).min(CANCEL_POLL));
            self.check()?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A clock that moves only by the pacer's sleeps; it records each sleep
    /// and can run an action at a given point of (fake) time.
    struct FakeClock {
        now: Cell<Duration>,
        sleeps: RefCell<Vec<Duration>>,
        at: Option<(Duration, Box<dyn Fn()>)>,
        /// Where its time starts on the shared budgets' timeline.
        origin: Instant,
    }

    impl Default for FakeClock {
        fn default() -> FakeClock {
            FakeClock {
                now: Cell::default(),
                sleeps: RefCell::default(),
                at: None,
                origin: Instant::now(),
            }
        }
    }

    impl PaceClock for &FakeClock {
        fn elapsed(&self) -> Duration {
            self.now.get()
        }

        fn now(&self) -> Instant {
            self.origin + self.now.get()
        }

        fn sleep(&self, duration: Duration) {
            self.sleeps.borrow_mut().push(duration);
            self.now.set(self.now.get() + duration);
            if let Some((when, action)) = &self.at {
                if self.now.get() >= *when {
                    action();
                }
            }
        }
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_paused_gate_holds_the_copy_until_resumed_then_paces_without_a_burst() {
        let gate = Arc::new(CopyGate::default());
        gate.set_rate(Some(MIB));
        gate.set_paused(true);
        let resume = Arc::clone(&gate);
        let clock = FakeClock {
            at: Some((
                Duration::from_secs(5),
                Box::new(move || resume.set_paused(false)),
            )),
            ..FakeClock::default()
        };
        let cancel = CancellationToken::new();
        let pacer = Pacer::with_clock(None, &[], &cancel, &clock).gated(Some(&gate));
        pacer.pace(MIB).expect("not cancelled");
        // Held for the 5 s of the pause; the rate's timeline starts after it.
        assert_eq!(clock.now.get(), Duration::from_secs(5));
        pacer.pace(2 * MIB).expect("not cancelled");
        assert_eq!(
            clock.now.get(),
            Duration::from_secs(6),
            "1 MiB more at 1 MiB/s"
        );
        // A new rate takes over from where the copy is.
        gate.set_rate(Some(4 * MIB));
        pacer.pace(3 * MIB).expect("not cancelled");
        pacer.pace(7 * MIB).expect("not cancelled");
        assert_eq!(
            clock.now.get(),
            Duration::from_secs(7),
            "4 MiB more at 4 MiB/s"
        );
        gate.set_rate(Some(0));
        pacer.pace(1 << 40).expect("unthrottled");
        assert_eq!(clock.now.get(), Duration::from_secs(7));
        gate.set_paused(true);
        cancel.cancel();
        assert!(
            pacer.pace((1 << 40) + 1).is_err(),
            "a paused copy still stops when cancelled"
        );
    }

    #[test]
    fn an_unthrottled_pacer_never_sleeps() {
        let (cancel, clock) = (CancellationToken::new(), FakeClock::default());
        let pacer = Pacer::with_clock(None, &[], &cancel, &clock);
        pacer.pace(u64::MAX / 2).expect("not cancelled");
        assert!(clock.sleeps.borrow().is_empty());
        assert_eq!(
            Pacer::with_clock(Some(0), &[], &cancel, &clock).rate(),
            None
        );
    }

    #[test]
    fn a_pacer_waits_until_the_bytes_done_are_within_the_rate() {
        let (cancel, clock) = (CancellationToken::new(), FakeClock::default());
        let pacer = Pacer::with_clock(Some(8 * MIB), &[], &cancel, &clock);
        pacer.pace(4 * MIB).expect("not cancelled");
        assert_eq!(clock.now.get(), Duration::from_millis(500));
        // Never one long sleep: the cancel token is checked in between.
        assert!(clock.sleeps.borrow().iter().all(|s| *s <= CANCEL_POLL));
        // Already behind the rate: no sleep at all.
        clock.now.set(Duration::from_secs(10));
        let before = clock.sleeps.borrow().len();
        pacer.pace(8 * MIB).expect("not cancelled");
        assert_eq!(clock.sleeps.borrow().len(), before);
    }

    #[test]
    fn cancelling_during_a_pacing_sleep_stops_at_the_next_poll() {
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        let clock = FakeClock {
            at: Some((
                Duration::from_millis(250),
                Box::new(move || trigger.cancel()),
            )),
            ..FakeClock::default()
        };
        // 1 MiB at 64 KiB/s would take 16 s.
        let pacer = Pacer::with_clock(Some(64 << 10), &[], &cancel, &clock);
        assert!(pacer.pace(MIB).is_err());
        assert!(clock.now.get() <= Duration::from_millis(250) + CANCEL_POLL);
        assert!(pacer.check().is_err());
    }

    #[test]
    fn two_copies_sharing_a_nodes_budget_move_at_most_its_rate_together() {
        let budgets = MovementBudgets::new(Some(8 * MIB));
        let shared = budgets.for_nodes(&["sn-1", "sn-2"]);
        let other = budgets.for_nodes(&["sn-2", "sn-3", "sn-3"]);
        assert_eq!((shared.len(), other.len()), (2, 2), "each node once");
        assert!(Arc::ptr_eq(&shared[1], &other[0]), "one budget per node");

        // Two copies on one (fake) timeline, taking turns with 1 MiB each.
        let cancel = CancellationToken::new();
        let clock = FakeClock::default();
        let first = Pacer::with_clock(None, &shared, &cancel, &clock);
        let second = Pacer::with_clock(None, &other, &cancel, &clock);
        assert_eq!(first.rate(), Some(8 * MIB));
        for round in 1..=8 {
            first.pace(round * MIB).expect("not cancelled");
            second.pace(round * MIB).expect("not cancelled");
        }
        // 16 MiB through sn-2's budget at 8 MiB/s: 2 s, less the slack an
        // idle budget starts with.
        let took = clock.now.get();
        assert!(took >= Duration::from_secs(2) - BUDGET_SLACK, "{took:?}");
        assert!(took <= Duration::from_secs(2), "{took:?}");
    }

    #[test]
    fn a_copy_alone_gets_a_budgets_whole_rate_and_no_budget_is_no_limit() {
        let budgets = MovementBudgets::new(Some(4 * MIB));
        let mine = budgets.for_nodes(&["sn-1"]);
        let (cancel, clock) = (CancellationToken::new(), FakeClock::default());
        let pacer = Pacer::with_clock(None, &mine, &cancel, &clock);
        pacer.pace(2 * MIB).expect("not cancelled");
        let took = clock.now.get();
        assert!(
            took >= Duration::from_millis(400) && took <= Duration::from_millis(500),
            "{took:?}"
        );
        // The same bytes again are not booked twice.
        pacer.pace(2 * MIB).expect("not cancelled");
        assert_eq!(clock.now.get(), took);
        assert!(MovementBudgets::new(None).for_nodes(&["sn-1"]).is_empty());
        assert!(MovementBudgets::new(Some(0))
            .for_nodes(&["sn-1"])
            .is_empty());
    }

    #[test]
    fn grants_come_a_quarter_second_of_the_lowest_rate_at_a_time_and_stop_when_cancelled() {
        assert!(CopyGrants::new(&crate::CopyOptions::default()).is_none());
        let budget = Arc::new(RateBudget::new(64 << 20));
        let options = crate::CopyOptions {
            rate_limit: Some(1 << 30),
            budgets: vec![Arc::clone(&budget)],
            ..crate::CopyOptions::default()
        };
        let grants = CopyGrants::new(&options).expect("throttled");
        assert_eq!(grants.next(0).expect("granted"), 16 << 20);
        assert_eq!(grants.next(20 << 20).expect("granted"), 36 << 20);
        options.cancel.cancel();
        assert!(matches!(
            grants.next(36 << 20),
            Err(crate::DataPlaneError::Cancelled)
        ));
    }
}
