//! Snapshot space, kept true: what snapshots hold is measured from their
//! files (a stat per snapshot file, no map replayed) and recorded in the
//! store — each snapshot's `used`, each medium's snapshot bytes (which its
//! `freesize` counts, rounded up to whole GiB) — and the data plane's
//! per-medium snapshot budgets are set from the store's figures.
//!
//! A medium's budget is what is free on it before snapshots count: its
//! size less the slices placed on it and the space running jobs booked, in
//! bytes. A copy-on-write save that would take the medium's snapshots over
//! it fails with ENOSPC (see `DataPlane::set_snapshot_budget`).
//!
//! One place for the jobs (after snapshot jobs, and after every job that
//! changes allocations), the snapshot-space reconciler (periodically: every
//! first write after a snapshot grows it) and start-up.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use svs_dataplane::{DataPlane, DataPlaneError};
use svs_domain::GIB;
use svs_store::{Store, StoreError};
use tracing::warn;

/// What one refresh found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SpaceRefresh {
    /// Figures (snapshots' `used`, media's snapshot bytes) that changed.
    pub changed: usize,
    /// Media that could not be measured (each logged); their figures and
    /// those of snapshots with data on them were left as they were.
    pub unmeasured: Vec<String>,
}

/// Measures every snapshot on every healthy medium, records what changed,
/// then sets every medium's snapshot budget.
pub async fn refresh_snapshot_space(
    store: &dyn Store,
    media: &Arc<dyn DataPlane>,
) -> Result<SpaceRefresh, StoreError> {
    let refresh = measure_snapshot_usage(store, media).await?;
    set_snapshot_budgets(store, media.as_ref()).await?;
    Ok(refresh)
}

/// Measures what snapshots hold on every medium that has not failed, and
/// records the figures that changed.
pub async fn measure_snapshot_usage(
    store: &dyn Store,
    media: &Arc<dyn DataPlane>,
) -> Result<SpaceRefresh, StoreError> {
    let usage = store.media_usage().await?;
    let mut refresh = SpaceRefresh::default();
    let mut per_medium = Vec::new();
    // Volume id → snapshot id (seq) → bytes, over every medium.
    let mut per_volume: BTreeMap<String, BTreeMap<u64, u64>> = BTreeMap::new();
    for u in usage.iter().filter(|u| !u.failed) {
        let medium = u.record.medium.id.clone();
        let dp = Arc::clone(media);
        let measured = {
            let medium = medium.clone();
            tokio::task::spawn_blocking(move || dp.medium_snapshot_usage(&medium)).await
        };
        let found = match measured {
            Ok(Ok(found)) => found,
            // A storage node's medium this data plane does not serve (not
            // wired to it yet): its figures stay as they are.
            Ok(Err(DataPlaneError::UnknownMedium(_)))
                if u.managed_by == svs_domain::ManagedBy::Node =>
            {
                continue;
            }
            Ok(Err(e)) => {
                warn!(medium = %medium, error = %e, "cannot measure snapshot space");
                refresh.unmeasured.push(medium);
                continue;
            }
            Err(e) => {
                warn!(medium = %medium, error = %e, "snapshot space task failed");
                refresh.unmeasured.push(medium);
                continue;
            }
        };
        let total: u64 = found.values().sum();
        if total != u.snapshot_bytes {
            per_medium.push((medium, total));
        }
        for ((volume_id, seq), bytes) in found {
            *per_volume
                .entry(volume_id)
                .or_default()
                .entry(seq)
                .or_default() += bytes;
        }
    }
    let unmeasured: BTreeSet<&str> = refresh.unmeasured.iter().map(String::as_str).collect();
    let mut per_snapshot = Vec::new();
    for (volume_id, used) in &per_volume {
        // A volume with a slice on a medium not measured has a partial sum.
        if !unmeasured.is_empty()
            && store
                .volume_slices(volume_id)
                .await?
                .iter()
                .any(|row| unmeasured.contains(row.slice.medium.as_str()))
        {
            continue;
        }
        for snapshot in store.volume_snapshots(volume_id).await? {
            let bytes = used.get(&snapshot.seq).copied().unwrap_or(0);
            if bytes != snapshot.used_bytes {
                per_snapshot.push((snapshot.id, bytes));
            }
        }
    }
    refresh.changed = per_snapshot.len() + per_medium.len();
    if refresh.changed > 0 {
        store.set_snapshot_usage(&per_snapshot, &per_medium).await?;
    }
    Ok(refresh)
}

/// Sets every medium's snapshot budget from the store's figures (see the
/// module's documentation); a failed medium has none left.
pub async fn set_snapshot_budgets(
    store: &dyn Store,
    media: &dyn DataPlane,
) -> Result<(), StoreError> {
    for u in store.media_usage().await? {
        let free_gib = if u.failed {
            0
        } else {
            u.record
                .medium
                .size
                .saturating_sub(u.allocated)
                .saturating_sub(u.reserved)
        };
        media.set_snapshot_budget(&u.record.medium.id, Some(free_gib.saturating_mul(GIB)));
    }
    Ok(())
}
