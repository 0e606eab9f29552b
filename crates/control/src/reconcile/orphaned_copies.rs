//! No copy is left behind: removes slice files that no job is writing and
//! no slice uses — partial files of an interrupted copy, and complete copies
//! of a slice on a medium that is not (or no longer) its placement, such as
//! the target of a move that failed or the source of one that switched.
//!
//! Only volumes the store knows are touched, and only while no job works on
//! them (none running here, none unfinished in the store): a job in progress
//! owns its copies and cleans up after itself. Complete files of volumes the
//! store does not know are left alone: they may be another store's data.

use super::{ReconcileError, Reconciler};
use crate::jobs::VolumeActivity;
use async_trait::async_trait;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use svs_dataplane::{DataPlane, DataPlaneError, StoredSlice};
use svs_store::Store;
use tracing::{info, warn};

pub struct OrphanedCopies {
    pub store: Arc<dyn Store>,
    pub media: Arc<dyn DataPlane>,
    pub activity: Arc<VolumeActivity>,
    pub period: Duration,
}

/// The slice files found on media, by volume: (medium, file).
type Found = BTreeMap<String, Vec<(String, StoredSlice)>>;

impl OrphanedCopies {
    /// Every slice file on every medium; `failed` counts media that could
    /// not be listed (each logged).
    async fn find(&self, failed: &mut usize) -> Result<Found, ReconcileError> {
        let mut found = Found::new();
        for usage in self.store.media_usage().await? {
            let remote = usage.managed_by == svs_domain::ManagedBy::Node;
            let medium = usage.record.medium.id;
            let media = Arc::clone(&self.media);
            let listed = {
                let medium = medium.clone();
                tokio::task::spawn_blocking(move || media.stored_slices(&medium)).await
            };
            match listed {
                Ok(Ok(files)) => {
                    for file in files {
                        found
                            .entry(file.key.volume_id.clone())
                            .or_default()
                            .push((medium.clone(), file));
                    }
                }
                // A storage node's medium this data plane does not serve
                // (not wired to it yet): nothing of it to judge here.
                Ok(Err(DataPlaneError::UnknownMedium(_))) if remote => {}
                Ok(Err(e)) => {
                    warn!(medium = %medium, error = %e, "cannot list slice files");
                    *failed += 1;
                }
                Err(e) => {
                    warn!(medium = %medium, error = %e, "listing task failed");
                    *failed += 1;
                }
            }
        }
        Ok(found)
    }

    /// Removes the orphaned files of one volume; returns how many went.
    async fn clean_volume(
        &self,
        volume_id: &str,
        files: Vec<(String, StoredSlice)>,
    ) -> Result<usize, ReconcileError> {
        let Some(_quiet) = self.activity.try_quiet(volume_id) else {
            return Ok(0);
        };
        if self.store.active_volume_job(volume_id).await?.is_some() {
            return Ok(0);
        }
        let known = self.store.volume_by_id(volume_id).await?.is_some();
        let placements: HashSet<(String, u32, u32)> = self
            .store
            .volume_slices(volume_id)
            .await?
            .into_iter()
            .map(|r| (r.slice.medium, r.slice.copy, r.slice.column))
            .collect();
        let placed_elsewhere = |medium: &str, file: &StoredSlice| {
            let (copy, column) = (file.key.copy, file.key.column);
            !placements.contains(&(medium.to_string(), copy, column))
                && placements
                    .iter()
                    .any(|(m, c, k)| m != medium && *c == copy && *k == column)
        };
        let orphans: Vec<(String, StoredSlice)> = files
            .into_iter()
            .filter(|(medium, file)| file.partial || (known && placed_elsewhere(medium, file)))
            .collect();
        if orphans.is_empty() {
            return Ok(0);
        }
        let media = Arc::clone(&self.media);
        match tokio::task::spawn_blocking(move || remove(media.as_ref(), &orphans)).await {
            Ok(removed) => Ok(removed?),
            Err(e) => {
                warn!(volume = %volume_id, error = %e, "removal task failed");
                Err(ReconcileError::Incomplete(1))
            }
        }
    }
}

fn remove(
    media: &dyn DataPlane,
    orphans: &[(String, StoredSlice)],
) -> Result<usize, DataPlaneError> {
    for (medium, file) in orphans {
        let key = &file.key;
        if file.partial {
            media.delete_partial_copy(medium, key)?;
        } else {
            media.delete_slice(medium, key)?;
        }
        info!(
            medium = %medium,
            volume = %key.volume_id,
            copy = key.copy,
            column = key.column,
            partial = file.partial,
            "removed an orphaned copy"
        );
    }
    Ok(orphans.len())
}

#[async_trait]
impl Reconciler for OrphanedCopies {
    fn name(&self) -> &'static str {
        "reconcile-orphaned-copies"
    }

    fn period(&self) -> Duration {
        self.period
    }

    async fn reconcile(&self) -> Result<usize, ReconcileError> {
        let mut failed = 0;
        let found = self.find(&mut failed).await?;
        let mut removed = 0;
        for (volume_id, files) in found {
            match self.clean_volume(&volume_id, files).await {
                Ok(n) => removed += n,
                Err(ReconcileError::DataPlane(e)) => {
                    warn!(volume = %volume_id, error = %e, "cannot remove an orphaned copy");
                    failed += 1;
                }
                Err(e) => return Err(e),
            }
        }
        if failed > 0 {
            return Err(ReconcileError::Incomplete(failed));
        }
        Ok(removed)
    }
}
