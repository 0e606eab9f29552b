//! The volume's barrier: every write-like request passes it, a snapshot,
//! a rollback or a move's switch pauses it (waits for the requests
//! passing, holds new ones back). A pass may be held by a request that
//! another thread finishes (a pipelined write answered by the thread that
//! reads its last reply), so the pass is an owned value that can be sent,
//! which a `std::sync::RwLock` guard cannot.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

#[derive(Default)]
pub(super) struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    passing: usize,
    /// Pauses waiting for the requests passing: new passes wait behind
    /// them, so a busy volume cannot starve a snapshot.
    pausing: usize,
    paused: bool,
}

/// A request's pass; dropping it lets a pause waiting for it go on.
pub(super) struct Passing(Arc<Gate>);

/// Held while the gate is paused.
pub(super) struct Paused<'a>(&'a Gate);

impl Gate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        // Every update is a counter or a flag: poisoning is ignored.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, state: MutexGuard<'a, GateState>) -> MutexGuard<'a, GateState> {
        self.changed.wait(state).unwrap_or_else(|e| e.into_inner())
    }

    /// Passes, once no pause holds the gate or waits for it.
    pub(super) fn pass(self: &Arc<Self>) -> Passing {
        let mut state = self.lock();
        while state.paused || state.pausing > 0 {
            state = self.wait(state);
        }
        state.passing += 1;
        Passing(Arc::clone(self))
    }

    /// Passes if that needs no wait (`None`: a pause holds the gate or
    /// waits for it).
    pub(super) fn try_pass(self: &Arc<Self>) -> Option<Passing> {
        let mut state = self.lock();
        if state.paused || state.pausing > 0 {
            return None;
        }
        state.passing += 1;
        Some(Passing(Arc::clone(self)))
    }

    /// Pauses once every request passing has finished (and any pause
    /// before this one ended).
    pub(super) fn pause(&self) -> Paused<'_> {
        let mut state = self.lock();
        state.pausing += 1;
        while state.paused || state.passing > 0 {
            state = self.wait(state);
        }
        state.pausing -= 1;
        state.paused = true;
        Paused(self)
    }
}

impl Drop for Passing {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.passing -= 1;
        if state.passing == 0 && state.pausing > 0 {
            self.0.changed.notify_all();
        }
    }
}

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        self.0.lock().paused = false;
        self.0.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn a_pause_waits_for_a_pass_held_on_another_thread_and_holds_new_ones_back() {
        let gate = Arc::new(Gate::default());
        let pass = gate.pass();
        let paused = Arc::new(AtomicBool::new(false));
        let pauser = {
            let (gate, paused) = (Arc::clone(&gate), Arc::clone(&paused));
            std::thread::spawn(move || {
                let _paused = gate.pause();
                paused.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(50));
                paused.store(false, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !paused.load(Ordering::SeqCst),
            "paused while a request passed"
        );
        // Waiting for the pause: no new pass without waiting.
        assert!(gate.try_pass().is_none());
        // The pass ends on another thread, as a pipelined write's does.
        std::thread::spawn(move || drop(pass)).join().unwrap();
        let after = gate.pass();
        assert!(!paused.load(Ordering::SeqCst), "passed while paused");
        pauser.join().unwrap();
        drop(after);
        assert!(gate.try_pass().is_some());
    }
}
