//! A signal that the desired state of node agents (attachments, their
//! volumes' sizes and filesystems) may have changed. Services and jobs
//! raise it after such a change; the agents' long polls wait on it, so an
//! agent hears of a change at once instead of at its next poll.
//!
//! It says nothing about what changed: a woken poll reads the store again
//! and answers only if its node's state differs.
//!
//! With several instances on one database, a change made on one must wake
//! the polls waiting on the others: once shared through the store
//! ([`DesiredStateChanges::share_through`]), every signal is also announced
//! to the other instances (PostgreSQL `NOTIFY`), and their announcements
//! wake the polls here. Announcements are hints that can be lost; the long
//! polls still read the store on their own timer.

use std::sync::{Arc, OnceLock};
use std::time::Duration;
use svs_store::{Announcements, Heard, Store, StoreResult};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::debug;

/// The announcement topic of desired-state changes.
pub const DESIRED_STATE_TOPIC: &str = "svs_desired_state";

pub struct DesiredStateChanges {
    generation: watch::Sender<u64>,
    /// Where changes are announced to other instances, once shared.
    shared: OnceLock<Arc<dyn Store>>,
}

impl std::fmt::Debug for DesiredStateChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DesiredStateChanges")
            .field("generation", &*self.generation.borrow())
            .field("shared", &self.shared.get().is_some())
            .finish()
    }
}

impl Default for DesiredStateChanges {
    fn default() -> Self {
        DesiredStateChanges {
            generation: watch::channel(0).0,
            shared: OnceLock::new(),
        }
    }
}

impl DesiredStateChanges {
    /// Wakes every waiting subscriber, here and (once shared) on the other
    /// instances.
    pub fn notify(&self) {
        self.wake_here();
        if let (Some(store), Ok(runtime)) =
            (self.shared.get(), tokio::runtime::Handle::try_current())
        {
            let store = Arc::clone(store);
            runtime.spawn(async move {
                if let Err(e) = store.announce(DESIRED_STATE_TOPIC).await {
                    debug!(error = %e, "cannot announce a change to other instances");
                }
            });
        }
    }

    /// Wakes this instance's subscribers only.
    fn wake_here(&self) {
        self.generation.send_modify(|g| *g = g.wrapping_add(1));
    }

    /// Announces every change to the other instances on `store`'s database
    /// and wakes the subscribers here at each of theirs, until `stop`.
    /// Nothing to share on a store no other instance can use.
    pub async fn share_through(
        self: &Arc<Self>,
        store: Arc<dyn Store>,
        stop: CancellationToken,
    ) -> StoreResult<()> {
        let Some(heard) = store.announcements(&[DESIRED_STATE_TOPIC]).await? else {
            return Ok(());
        };
        let _ = self.shared.set(store);
        let changes = Arc::clone(self);
        // Whatever was announced or missed: every poll reads the store again.
        follow(heard, stop, "changes", move || {
            changes.wake_here();
            std::future::ready(Ok(()))
        });
        Ok(())
    }

    /// A receiver that sees changes notified from now on (`changed()`).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }
}

/// Runs `on_heard` at every announcement `heard` brings, and after a lost
/// connection (announcements may have been missed), until `stop`. A failure
/// (to hear, or of `on_heard`) is logged with `what` and waits a second.
pub fn follow<F, Fut>(
    mut heard: Announcements,
    stop: CancellationToken,
    what: &'static str,
    mut on_heard: F,
) where
    F: FnMut() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = StoreResult<()>> + Send,
{
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                () = stop.cancelled() => return,
                next = heard.next() => next,
            };
            let done = match next {
                Ok(Heard::Topic(_) | Heard::Missed) => on_heard().await,
                Err(e) => Err(e),
            };
            if let Err(e) = done {
                debug!(error = %e, what, "cannot follow other instances now");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_subscriber_is_woken_by_a_later_change_only() {
        let changes = DesiredStateChanges::default();
        changes.notify();
        let mut rx = changes.subscribe();
        let waited = tokio::time::timeout(Duration::from_millis(50), rx.changed()).await;
        assert!(waited.is_err(), "no change since subscribing");
        changes.notify();
        tokio::time::timeout(Duration::from_secs(1), rx.changed())
            .await
            .expect("woken")
            .expect("sender alive");
    }
}
