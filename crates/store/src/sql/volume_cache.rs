//! `get_volume` answers kept in memory (see [`super::SqlStore::with_volume_cache`]).

use super::db::OnCommit;
use crate::records::Volume;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

/// `get_volume` results by (tenant, name or id). A read that raced a write
/// must not store what it read: entries are only added while the generation
/// is the one seen before the query.
#[derive(Debug, Default)]
pub(super) struct VolumeCache {
    generation: AtomicU64,
    entries: RwLock<HashMap<(i64, String), Volume>>,
}

/// Bound on cached volumes; the cache is emptied when it is full.
const VOLUME_CACHE_MAX: usize = 100_000;

impl VolumeCache {
    pub(super) fn get(&self, tenant_id: i64, name_or_id: &str) -> Option<Volume> {
        self.entries
            .read()
            .ok()?
            .get(&(tenant_id, name_or_id.to_string()))
            .cloned()
    }

    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub(super) fn insert(&self, seen: u64, tenant_id: i64, name_or_id: &str, volume: &Volume) {
        if let Ok(mut entries) = self.entries.write() {
            // Checked under the lock: `committed` bumps it under the same lock.
            if self.generation.load(Ordering::Acquire) != seen {
                return;
            }
            if entries.len() >= VOLUME_CACHE_MAX {
                entries.clear();
            }
            entries.insert((tenant_id, name_or_id.to_string()), volume.clone());
        }
    }
}

impl OnCommit for VolumeCache {
    /// Every commit may change what a volume read shows.
    fn committed(&self) {
        if let Ok(mut entries) = self.entries.write() {
            self.generation.fetch_add(1, Ordering::AcqRel);
            entries.clear();
        }
    }
}
