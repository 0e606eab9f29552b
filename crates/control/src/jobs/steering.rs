//! How a job this instance holds is steered while it runs: a cancel, a
//! pause, its own copy rate (`PATCH /jobs/{job}`, recorded in the store and
//! polled by the holder, on whichever instance), and the movement window.
//!
//! A cancel stops the job's run (its token, a child of the lease's) at its
//! next safe point, and the runner undoes it. A pause, the window and the
//! rate act on the job's copies through their [`CopyGate`], read at every
//! step of their pacing: a paused copy waits where it is while its live
//! move keeps mirroring the volume's writes, so it goes on from there when
//! resumed, and a service restarted meanwhile resumes it from its last
//! checkpoint as after any stop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use svs_dataplane::CopyGate;
use svs_domain::MovementWindow;
use svs_store::JobControl;
use tokio_util::sync::CancellationToken;

/// Why a job's copies wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Hold {
    /// Paused on request.
    Paused,
    /// Outside the movement window.
    Window(String),
}

impl Hold {
    /// The job's status while its copies wait.
    pub(super) fn status(&self, job_id: i64) -> String {
        match self {
            Hold::Paused => format!(
                "Paused: copies stopped at their last checkpoint; resume with PATCH \
                 /jobs/{job_id} {{\"paused\": false}}"
            ),
            Hold::Window(window) => format!(
                "Paused: outside the movement window ({window}); copies go on when it opens"
            ),
        }
    }

    /// The job's detail when its copies start waiting.
    pub(super) fn detail(&self) -> String {
        match self {
            Hold::Paused => "Paused on request".to_string(),
            Hold::Window(window) => format!("Paused: outside the movement window ({window})"),
        }
    }
}

/// What a look at the job's steering changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Change {
    /// A cancel is new: the run stops and the job is undone.
    pub cancel: bool,
    /// The hold changed: from, to.
    pub hold: Option<(Option<Hold>, Option<Hold>)>,
    /// The job's own rate changed (to this; None: the service's).
    pub rate: Option<Option<u64>>,
}

/// The steering of one held job.
pub(crate) struct Steering {
    window: Option<MovementWindow>,
    /// Whether the job copies slices (a data movement, a recovery): only
    /// such a job is paused, given a rate or held by the window.
    copies: AtomicBool,
    gate: Arc<CopyGate>,
    state: Mutex<SteerState>,
}

struct SteerState {
    /// The job's run token (a child of the lease's).
    work: CancellationToken,
    cancelled: bool,
    paused: bool,
    rate: Option<u64>,
    hold: Option<Hold>,
}

impl Steering {
    pub(super) fn new(stop: &CancellationToken, window: Option<MovementWindow>) -> Steering {
        Steering {
            window,
            copies: AtomicBool::new(false),
            gate: Arc::new(CopyGate::default()),
            state: Mutex::new(SteerState {
                work: stop.child_token(),
                cancelled: false,
                paused: false,
                rate: None,
                hold: None,
            }),
        }
    }

    /// The job copies slices: pause, rate and window apply to it.
    pub(super) fn set_copies(&self, copies: bool) {
        self.copies.store(copies, Ordering::SeqCst);
    }

    fn state(&self) -> std::sync::MutexGuard<'_, SteerState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The token the job runs under: a cancel stops it.
    pub(super) fn work(&self) -> CancellationToken {
        self.state().work.clone()
    }

    /// The gate every copy of the job is paced through.
    pub(crate) fn gate(&self) -> Arc<CopyGate> {
        Arc::clone(&self.gate)
    }

    pub(super) fn is_cancelled(&self) -> bool {
        self.state().cancelled
    }

    /// A cancel is recorded: the run stops, and the job is undone. True
    /// when it is new.
    pub(super) fn cancel(&self) -> bool {
        let mut s = self.state();
        let new = !s.cancelled;
        s.cancelled = true;
        s.work.cancel();
        // The undo's own copies are never held.
        self.gate.set_paused(false);
        self.gate.set_rate(None);
        new
    }

    /// Applies what the store says steers the job, and the window at
    /// `now_ms`; what changed.
    pub(super) fn apply(&self, control: &JobControl, now_ms: i64) -> Change {
        if control.cancel_requested {
            return Change {
                cancel: self.cancel(),
                ..Change::default()
            };
        }
        let mut s = self.state();
        if s.cancelled || !self.copies.load(Ordering::SeqCst) {
            return Change::default();
        }
        let mut change = Change::default();
        if s.rate != control.movement_rate {
            s.rate = control.movement_rate;
            change.rate = Some(s.rate);
            self.gate.set_rate(s.rate);
        }
        s.paused = control.paused;
        let hold = if s.paused {
            Some(Hold::Paused)
        } else {
            self.window
                .as_ref()
                .filter(|w| !w.is_open(now_ms))
                .map(|w| Hold::Window(w.to_string()))
        };
        if hold != s.hold {
            change.hold = Some((s.hold.clone(), hold.clone()));
            self.gate.set_paused(hold.is_some());
            s.hold = hold;
        }
        change
    }

    /// Why the job's copies wait now (None: they do not).
    pub(super) fn hold(&self) -> Option<Hold> {
        self.state().hold.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control(cancel: bool, paused: bool, rate: Option<u64>) -> JobControl {
        JobControl {
            id: 1,
            cancel_requested: cancel,
            paused,
            movement_rate: rate,
        }
    }

    #[test]
    fn a_pause_closes_the_gate_until_resumed_and_says_so_once() {
        let steering = Steering::new(&CancellationToken::new(), None);
        steering.set_copies(true);
        let change = steering.apply(&control(false, true, None), 0);
        assert_eq!(change.hold, Some((None, Some(Hold::Paused))));
        assert!(steering.gate().is_paused());
        assert!(
            !steering.work().is_cancelled(),
            "a pause does not stop the run"
        );
        assert_eq!(
            steering.apply(&control(false, true, None), 0),
            Change::default()
        );
        let change = steering.apply(&control(false, false, None), 0);
        assert_eq!(change.hold, Some((Some(Hold::Paused), None)));
        assert!(!steering.gate().is_paused());
    }

    #[test]
    fn a_new_rate_reaches_the_gate() {
        let steering = Steering::new(&CancellationToken::new(), None);
        steering.set_copies(true);
        assert_eq!(
            steering.apply(&control(false, false, None), 0),
            Change::default()
        );
        let change = steering.apply(&control(false, false, Some(64 << 20)), 0);
        assert_eq!(change.rate, Some(Some(64 << 20)));
    }

    #[test]
    fn the_window_holds_the_copies_only_while_closed() {
        let window = MovementWindow::parse("00:00:00-00:00:10").expect("window");
        let steering = Steering::new(&CancellationToken::new(), Some(window));
        steering.set_copies(true);
        assert_eq!(
            steering.apply(&control(false, false, None), 5_000),
            Change::default()
        );
        let change = steering.apply(&control(false, false, None), 20_000);
        assert!(matches!(change.hold, Some((None, Some(Hold::Window(_))))));
        assert!(steering.gate().is_paused());
        // Open again the next day.
        let change = steering.apply(&control(false, false, None), 86_400_000 + 1_000);
        assert!(matches!(change.hold, Some((Some(Hold::Window(_)), None))));
        assert!(!steering.gate().is_paused());
    }

    #[test]
    fn a_job_that_copies_nothing_is_never_held() {
        let window = MovementWindow::parse("00:00:00-00:00:10").expect("window");
        let steering = Steering::new(&CancellationToken::new(), Some(window));
        assert_eq!(
            steering.apply(&control(false, true, Some(1)), 20_000),
            Change::default()
        );
        assert!(!steering.gate().is_paused());
        assert!(
            steering.apply(&control(true, false, None), 0).cancel,
            "a cancel still applies"
        );
    }

    #[test]
    fn a_cancel_stops_the_run_opens_the_gate_and_is_new_once() {
        let steering = Steering::new(&CancellationToken::new(), None);
        steering.set_copies(true);
        steering.apply(&control(false, true, Some(1)), 0);
        let work = steering.work();
        assert!(steering.apply(&control(true, true, Some(1)), 0).cancel);
        assert!(work.is_cancelled() && steering.is_cancelled());
        assert!(!steering.gate().is_paused(), "the undo is never held");
        assert!(
            !steering.apply(&control(true, false, None), 0).cancel,
            "seen once"
        );
    }
}
