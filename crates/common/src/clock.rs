//! Wall-clock time, injected so time-based behaviour (token expiry, refresh
//! lifetimes, job timestamps) can be tested on a clock the test moves.

use std::sync::atomic::{AtomicI64, Ordering};

/// Milliseconds since the Unix epoch, from whatever clock the service runs on.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> i64;

    /// Whole seconds since the Unix epoch (token claims).
    fn now_secs(&self) -> u64 {
        u64::try_from(self.now_ms() / 1000).unwrap_or(0)
    }
}

/// The system's real-time clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to (tests).
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ms: AtomicI64,
}

impl ManualClock {
    pub fn new(now_ms: i64) -> ManualClock {
        ManualClock {
            now_ms: AtomicI64::new(now_ms),
        }
    }

    pub fn advance(&self, by: std::time::Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.now_ms.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_manual_clock_moves_only_when_advanced() {
        let clock = ManualClock::new(1_000);
        assert_eq!(clock.now_ms(), 1_000);
        clock.advance(Duration::from_secs(2));
        assert_eq!(clock.now_ms(), 3_000);
        assert_eq!(clock.now_secs(), 3);
    }

    #[test]
    fn the_system_clock_is_after_2020() {
        assert!(SystemClock.now_ms() > 1_577_836_800_000);
    }
}
