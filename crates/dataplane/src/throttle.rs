//! Pacing of copies to a byte rate, with cancellation.
//!
//! The pacer reads time from a [`PaceClock`] so its arithmetic can be tested
//! on a clock that only moves when it "sleeps".

use crate::CancellationToken;
use std::time::{Duration, Instant};

/// Longest sleep between checks of the cancel token.
const CANCEL_POLL: Duration = Duration::from_millis(100);

#[derive(Debug)]
pub(crate) struct Cancelled;

/// Where a pacer gets the time and how it waits.
pub(crate) trait PaceClock {
    /// Time since the pacer started.
    fn elapsed(&self) -> Duration;
    fn sleep(&self, duration: Duration);
}

/// Real time: a monotonic start instant and a thread sleep.
pub(crate) struct RealTime(Instant);

impl PaceClock for RealTime {
    fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }

    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// Keeps cumulative bytes / elapsed time at or below a rate.
pub(crate) struct Pacer<'a, C: PaceClock = RealTime> {
    rate: Option<u64>,
    clock: C,
    cancel: &'a CancellationToken,
}

impl<'a> Pacer<'a, RealTime> {
    /// `rate` in bytes per second; `None` or `Some(0)` = unthrottled.
    pub(crate) fn new(rate: Option<u64>, cancel: &'a CancellationToken) -> Self {
        Pacer::with_clock(rate, cancel, RealTime(Instant::now()))
    }
}

impl<'a, C: PaceClock> Pacer<'a, C> {
    pub(crate) fn with_clock(rate: Option<u64>, cancel: &'a CancellationToken, clock: C) -> Self {
        Pacer {
            rate: rate.filter(|&r| r > 0),
            clock,
            cancel,
        }
    }

    /// The rate in bytes per second, if throttled.
    pub(crate) fn rate(&self) -> Option<u64> {
        self.rate
    }

    pub(crate) fn check(&self) -> Result<(), Cancelled> {
        if self.cancel.is_cancelled() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }

    /// Called after `done` bytes in total have been handled: sleeps until
    /// that is within the rate, checking the cancel token as it goes.
    pub(crate) fn pace(&self, done: u64) -> Result<(), Cancelled> {
        self.check()?;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    /// A clock that moves only by the pacer's sleeps; it records each sleep
    /// and can run an action at a given point of (fake) time.
    #[derive(Default)]
    struct FakeClock {
        now: Cell<Duration>,
        sleeps: RefCell<Vec<Duration>>,
        at: Option<(Duration, Box<dyn Fn()>)>,
    }

    impl PaceClock for &FakeClock {
        fn elapsed(&self) -> Duration {
            self.now.get()
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
    fn an_unthrottled_pacer_never_sleeps() {
        let (cancel, clock) = (CancellationToken::new(), FakeClock::default());
        let pacer = Pacer::with_clock(None, &cancel, &clock);
        pacer.pace(u64::MAX / 2).expect("not cancelled");
        assert!(clock.sleeps.borrow().is_empty());
        assert_eq!(Pacer::with_clock(Some(0), &cancel, &clock).rate(), None);
    }

    #[test]
    fn a_pacer_waits_until_the_bytes_done_are_within_the_rate() {
        let (cancel, clock) = (CancellationToken::new(), FakeClock::default());
        let pacer = Pacer::with_clock(Some(8 * MIB), &cancel, &clock);
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
        let pacer = Pacer::with_clock(Some(64 << 10), &cancel, &clock);
        assert!(pacer.pace(MIB).is_err());
        assert!(clock.now.get() <= Duration::from_millis(250) + CANCEL_POLL);
        assert!(pacer.check().is_err());
    }
}
