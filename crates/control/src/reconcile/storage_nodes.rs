//! Liveness of storage nodes: a node whose last heartbeat is older than
//! `storage_node_timeout` goes Offline. In one store transaction every
//! copy on its media is marked lost (`slices.lost_ms`, as
//! `VolumeStore::mark_slice_lost` does for one copy) and its media are
//! Failed; then every open volume stops using them at once
//! (`ExportRegistry::fail_medium`, the data-plane half of
//! `exports::fail_medium`), so volumes with another copy go on Degraded.
//! Marking the copies lost, not only the media failed, is what keeps a
//! returning node's stale copies from ever being read: its media come back
//! into service at its next heartbeat, the copies they held do not.

use super::{ReconcileError, Reconciler};
use crate::front_layout::ExportRegistry;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use svs_common::clock::Clock;
use svs_store::{StorageNodeState, Store};

pub struct StorageNodeLiveness {
    store: Arc<dyn Store>,
    exports: Arc<ExportRegistry>,
    clock: Arc<dyn Clock>,
    timeout: Duration,
    /// Since when this reconciler has been watching without a gap (process
    /// start, the end of a time it could not read the store, or when this
    /// instance became the reconcilers' leader again): a node is not judged
    /// by a time its heartbeats could not be recorded or looked at (the
    /// control plane or its database down, a partition).
    watch: std::sync::Mutex<Watch>,
}

/// See [`StorageNodeLiveness::watch`].
#[derive(Debug, Clone, Copy)]
struct Watch {
    since_ms: i64,
    /// The last pass that read the store.
    last_pass_ms: Option<i64>,
}

impl Watch {
    /// The watch as of a pass at `now_ms`: it starts again after a gap
    /// longer than two periods since the last pass that read the store.
    fn at(self, now_ms: i64, period_ms: i64) -> Watch {
        let gap = self
            .last_pass_ms
            .is_none_or(|last| now_ms.saturating_sub(last) > period_ms.saturating_mul(2));
        Watch {
            since_ms: if gap { now_ms } else { self.since_ms },
            last_pass_ms: self.last_pass_ms,
        }
    }
}

impl StorageNodeLiveness {
    pub fn new(
        store: Arc<dyn Store>,
        exports: Arc<ExportRegistry>,
        clock: Arc<dyn Clock>,
        timeout: Duration,
    ) -> StorageNodeLiveness {
        let since_ms = clock.now_ms();
        StorageNodeLiveness {
            store,
            exports,
            clock,
            timeout,
            watch: std::sync::Mutex::new(Watch {
                since_ms,
                last_pass_ms: None,
            }),
        }
    }

    fn period_ms(&self) -> i64 {
        i64::try_from(self.period().as_millis()).unwrap_or(i64::MAX)
    }

    fn timeout_ms(&self) -> i64 {
        i64::try_from(self.timeout.as_millis()).unwrap_or(i64::MAX)
    }
}

#[async_trait]
impl Reconciler for StorageNodeLiveness {
    fn name(&self) -> &'static str {
        "reconcile-storage-nodes"
    }

    /// Five looks per timeout: a silent node is Offline within 1.2 × the
    /// timeout.
    fn period(&self) -> Duration {
        (self.timeout / 5).max(Duration::from_millis(200))
    }

    async fn reconcile(&self) -> Result<usize, ReconcileError> {
        let now = self.clock.now_ms();
        let watch = {
            let mut watch = self.watch.lock().unwrap_or_else(|p| p.into_inner());
            *watch = watch.at(now, self.period_ms());
            *watch
        };
        let nodes = self.store.storage_nodes().await?;
        self.watch
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .last_pass_ms = Some(now);
        if now.saturating_sub(watch.since_ms) < self.timeout_ms() {
            return Ok(0);
        }
        let heard_before = now.saturating_sub(self.timeout_ms());
        let mut changed = 0;
        for node in nodes {
            if node.state != StorageNodeState::Online || node.last_heartbeat_ms >= heard_before {
                continue;
            }
            let Some(media) = self
                .store
                .mark_storage_node_offline(&node.name, heard_before, now)
                .await?
            else {
                continue;
            };
            for medium in &media {
                self.exports.fail_medium(medium);
            }
            tracing::error!(
                node = node.name,
                media = ?media,
                silent_ms = now.saturating_sub(node.last_heartbeat_ms),
                "storage node is Offline: its media failed and every copy on them is lost; \
                 volumes with another copy keep serving"
            );
            changed += 1;
        }
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::Watch;

    #[test]
    fn the_watch_starts_again_after_a_gap_in_its_passes() {
        let first = Watch {
            since_ms: 1_000,
            last_pass_ms: None,
        };
        // The first pass: watching from now.
        let w = first.at(1_500, 100);
        assert_eq!(w.since_ms, 1_500);
        // Passes on time: still watching since then.
        let w = Watch {
            last_pass_ms: Some(1_500),
            ..w
        }
        .at(1_690, 100);
        assert_eq!(w.since_ms, 1_500);
        // A pass after more than two periods without one (the store did
        // not answer, or another instance led): watching from now again.
        let w = Watch {
            last_pass_ms: Some(1_690),
            ..w
        }
        .at(1_900, 100);
        assert_eq!(w.since_ms, 1_900);
    }
}
