//! Whether the loss of a copy is recorded where the next opening of its
//! volume will see it. A write that skipped a lost copy is answered only
//! once that loss is recorded: were it answered before, a crash of the
//! front (or of the whole host) between the answer and the record would
//! let the next opening read the copy that missed the write, and an
//! acknowledged write would read back old. DRBD's `fencing
//! resource-and-stonith` freezes I/O on the same rule.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The record of one [`CopyFailure`](crate::CopyFailure): pending until the
/// service says it has it ([`LossRecord::recorded`]) or will not take it
/// from this front ([`LossRecord::refused`]). Clones share it.
#[derive(Debug, Clone, Default)]
pub struct LossRecord(Arc<RecordState>);

#[derive(Debug, Default)]
struct RecordState {
    outcome: Mutex<Outcome>,
    settled: Condvar,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    #[default]
    Pending,
    Recorded,
    Refused,
}

/// How often a waiting request looks whether its front was fenced meanwhile.
const FENCE_CHECK: Duration = Duration::from_millis(100);

/// After this long a waiting request says so in the log (once).
const WAIT_WARNING: Duration = Duration::from_secs(2);

/// How a wait for a record ended, when it did not end recorded.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NotRecorded {
    /// The service will not record it from this front (it runs elsewhere now).
    Refused,
    /// The front was fenced while waiting.
    Fenced,
}

impl LossRecord {
    /// A record already made (nobody records: nothing to wait for).
    pub fn already_recorded() -> LossRecord {
        let record = LossRecord::default();
        record.recorded();
        record
    }

    /// The service has the loss in its store.
    pub fn recorded(&self) {
        self.settle(Outcome::Recorded);
    }

    /// The service will not record the loss from this front (another front
    /// runs the volume now): requests waiting for it fail as fenced.
    pub fn refused(&self) {
        self.settle(Outcome::Refused);
    }

    fn settle(&self, outcome: Outcome) {
        let mut now = self.lock();
        if *now == Outcome::Pending {
            *now = outcome;
            self.0.settled.notify_all();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Outcome> {
        self.0
            .outcome
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether it is settled one way or the other.
    pub fn is_settled(&self) -> bool {
        *self.lock() != Outcome::Pending
    }

    /// Whether the service has it.
    pub fn is_recorded(&self) -> bool {
        *self.lock() == Outcome::Recorded
    }

    /// Blocks until the record is made; `Err` when it is refused, or when
    /// `fenced()` turns true meanwhile. `what` names the loss in the log.
    pub(crate) fn wait(&self, fenced: impl Fn() -> bool, what: &str) -> Result<(), NotRecorded> {
        let started = Instant::now();
        let mut warned = false;
        let mut outcome = self.lock();
        loop {
            match *outcome {
                Outcome::Recorded => return Ok(()),
                Outcome::Refused => return Err(NotRecorded::Refused),
                Outcome::Pending if fenced() => return Err(NotRecorded::Fenced),
                Outcome::Pending => {}
            }
            if !warned && started.elapsed() >= WAIT_WARNING {
                warned = true;
                tracing::warn!(
                    copy = what,
                    "a write that skipped a lost copy waits until the control plane has recorded \
                     the loss (it is answered then)"
                );
            }
            outcome = self
                .0
                .settled
                .wait_timeout(outcome, FENCE_CHECK)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// Why a front is fenced when a record of its is refused.
pub(crate) const REFUSED: &str =
    "the control plane did not record a copy's loss from this front (it runs elsewhere now)";

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn a_wait_ends_when_the_record_is_made_on_another_thread() {
        let record = LossRecord::default();
        let made = record.clone();
        let maker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            made.recorded();
        });
        assert_eq!(record.wait(|| false, "c0-k0"), Ok(()));
        assert!(record.is_recorded());
        maker.join().expect("maker");
    }

    #[test]
    fn a_refused_record_or_a_fenced_front_ends_the_wait_with_an_error() {
        let record = LossRecord::default();
        record.refused();
        record.recorded();
        assert_eq!(record.wait(|| false, "c0-k0"), Err(NotRecorded::Refused));
        assert!(!record.is_recorded(), "the first outcome stays");

        let pending = LossRecord::default();
        let fenced = Arc::new(AtomicBool::new(false));
        let fence = Arc::clone(&fenced);
        let fencer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            fence.store(true, Ordering::Release);
        });
        assert_eq!(
            pending.wait(|| fenced.load(Ordering::Acquire), "c0-k0"),
            Err(NotRecorded::Fenced)
        );
        assert!(!pending.is_settled());
        fencer.join().expect("fencer");
        assert_eq!(
            LossRecord::already_recorded().wait(|| true, "c0-k0"),
            Ok(())
        );
    }
}
