//! A signal that the desired state of node agents (attachments, their
//! volumes' sizes and filesystems) may have changed. Services and jobs
//! raise it after such a change; the agents' long polls wait on it, so an
//! agent hears of a change at once instead of at its next poll.
//!
//! It says nothing about what changed: a woken poll reads the store again
//! and answers only if its node's state differs.

use tokio::sync::watch;

#[derive(Debug)]
pub struct DesiredStateChanges {
    generation: watch::Sender<u64>,
}

impl Default for DesiredStateChanges {
    fn default() -> Self {
        DesiredStateChanges {
            generation: watch::channel(0).0,
        }
    }
}

impl DesiredStateChanges {
    /// Wakes every waiting subscriber.
    pub fn notify(&self) {
        self.generation.send_modify(|g| *g = g.wrapping_add(1));
    }

    /// A receiver that sees changes notified from now on (`changed()`).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }
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
