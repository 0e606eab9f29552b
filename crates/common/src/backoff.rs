//! The pause before trying again after a failure, shared by the processes
//! that call the control plane in a loop (storage nodes, host agents).

use std::time::Duration;

/// Doubling back-off with a cap, and a little jitter so that many clients
/// do not come back at the same instant after a service restart.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    next: Duration,
    cap: Duration,
    /// Up to this much is added to each pause, at random.
    jitter: Duration,
}

impl Backoff {
    /// Pauses of `first`, then twice as long each time up to `cap`, each
    /// with up to `jitter` more.
    pub fn new(first: Duration, cap: Duration, jitter: Duration) -> Backoff {
        Backoff {
            first,
            next: first,
            cap,
            jitter,
        }
    }

    /// Back to the first pause (after a success).
    pub fn reset(&mut self) {
        self.next = self.first;
    }

    /// The next pause, doubling up to the cap.
    pub fn step(&mut self) -> Duration {
        self.step_up_to(self.cap)
    }

    /// The next pause, doubling up to `cap` (below the usual cap: a
    /// storage node that knows its heartbeat period never waits longer).
    pub fn step_up_to(&mut self, cap: Duration) -> Duration {
        let cap = cap.min(self.cap);
        let jitter_ms = u64::try_from(self.jitter.as_millis()).unwrap_or(u64::MAX);
        let jitter = match jitter_ms {
            0 => Duration::ZERO,
            ms => Duration::from_millis(rand::random::<u64>() % ms),
        };
        let now = self.next.min(cap) + jitter;
        self.next = (self.next * 2).min(cap);
        now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn pauses_double_up_to_the_cap_with_jitter_and_start_over_after_a_reset() {
        let cap = Duration::from_secs(30);
        let mut b = Backoff::new(500 * MS, cap, 250 * MS);
        let first = b.step();
        assert!(first >= 500 * MS && first < 750 * MS, "{first:?}");
        let second = b.step();
        assert!(second >= 1000 * MS && second < 1250 * MS, "{second:?}");
        for _ in 0..10 {
            b.step();
        }
        let capped = b.step();
        assert!(capped >= cap && capped < cap + 250 * MS, "{capped:?}");
        b.reset();
        assert!(b.step() < 750 * MS);
    }

    #[test]
    fn a_lower_cap_holds_every_pause_under_it() {
        let mut b = Backoff::new(250 * MS, Duration::from_secs(30), 100 * MS);
        let heartbeat = Duration::from_secs(2);
        for _ in 0..10 {
            assert!(b.step_up_to(heartbeat) < heartbeat + 100 * MS);
        }
    }

    #[test]
    fn without_jitter_the_pauses_are_exact() {
        let mut b = Backoff::new(100 * MS, 400 * MS, Duration::ZERO);
        let pauses: Vec<Duration> = (0..4).map(|_| b.step()).collect();
        assert_eq!(pauses, vec![100 * MS, 200 * MS, 400 * MS, 400 * MS]);
    }
}
