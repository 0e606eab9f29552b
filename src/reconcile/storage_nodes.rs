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
use crate::clock::Clock;
use crate::exports::ExportRegistry;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use svs_store::{StorageNodeState, Store};

pub struct StorageNodeLiveness {
    store: Arc<dyn Store>,
    exports: Arc<ExportRegistry>,
    clock: Arc<dyn Clock>,
    timeout: Duration,
    /// When this process started: a node is not judged by the time the
    /// control plane itself was down (it could not heartbeat then).
    started_ms: i64,
}

impl StorageNodeLiveness {
    pub fn new(
        store: Arc<dyn Store>,
        exports: Arc<ExportRegistry>,
        clock: Arc<dyn Clock>,
        timeout: Duration,
    ) -> StorageNodeLiveness {
        let started_ms = clock.now_ms();
        StorageNodeLiveness {
            store,
            exports,
            clock,
            timeout,
            started_ms,
        }
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
        if now.saturating_sub(self.started_ms) < self.timeout_ms() {
            return Ok(0);
        }
        let heard_before = now.saturating_sub(self.timeout_ms());
        let mut changed = 0;
        for node in self.store.storage_nodes().await? {
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
