//! Pacing of copies to a byte rate, with cancellation.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Longest sleep between checks of the cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(100);

#[derive(Debug)]
pub(crate) struct Cancelled;

/// Keeps cumulative bytes / elapsed time at or below a rate.
pub(crate) struct Pacer<'a> {
    rate: Option<u64>,
    start: Instant,
    cancel: &'a AtomicBool,
}

impl<'a> Pacer<'a> {
    /// `rate` in bytes per second; `None` or `Some(0)` = unthrottled.
    pub(crate) fn new(rate: Option<u64>, cancel: &'a AtomicBool) -> Self {
        Pacer {
            rate: rate.filter(|&r| r > 0),
            start: Instant::now(),
            cancel,
        }
    }

    /// The rate in bytes per second, if throttled.
    pub(crate) fn rate(&self) -> Option<u64> {
        self.rate
    }

    pub(crate) fn check(&self) -> Result<(), Cancelled> {
        if self.cancel.load(Ordering::Relaxed) {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }

    /// Called after `done` bytes in total have been handled: sleeps until
    /// that is within the rate, checking the cancel flag as it goes.
    pub(crate) fn pace(&self, done: u64) -> Result<(), Cancelled> {
        self.check()?;
        let Some(rate) = self.rate else {
            return Ok(());
        };
        let due = Duration::from_secs_f64(done as f64 / rate as f64);
        loop {
            let elapsed = self.start.elapsed();
            if elapsed >= due {
                return Ok(());
            }
            std::thread::sleep((due - elapsed).min(CANCEL_POLL));
            self.check()?;
        }
    }
}
