//! Which volumes a job is working on right now, in this process.
//!
//! A running job holds its volume "busy"; a reconciler that repairs a
//! volume's files or exports first makes sure it is quiet — no job runs on
//! it, and none starts until the repair is done — so a repair never races a
//! job (a copy being written, an export being closed).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

#[derive(Default)]
pub struct VolumeActivity {
    volumes: Mutex<HashMap<String, Arc<RwLock<()>>>>,
}

/// Held by a job while it runs on a volume; several jobs may hold it.
pub struct VolumeBusy {
    _guard: OwnedRwLockReadGuard<()>,
}

/// Held by a reconciler while it repairs a volume: no job runs on it.
pub struct VolumeQuiet {
    _guard: OwnedRwLockWriteGuard<()>,
}

impl VolumeActivity {
    fn lock_of(&self, volume_id: &str) -> Arc<RwLock<()>> {
        let mut volumes = self.volumes.lock().unwrap_or_else(|p| p.into_inner());
        // Forget volumes nobody holds, so the map does not grow for ever.
        volumes.retain(|_, lock| Arc::strong_count(lock) > 1);
        Arc::clone(volumes.entry(volume_id.to_string()).or_default())
    }

    /// Marks the volume busy for a job; waits while a reconciler repairs it
    /// (briefly: a few store reads and file removals).
    pub async fn job_started(&self, volume_id: &str) -> VolumeBusy {
        VolumeBusy {
            _guard: self.lock_of(volume_id).read_owned().await,
        }
    }

    /// The volume, quiet, if no job is working on it now.
    pub fn try_quiet(&self, volume_id: &str) -> Option<VolumeQuiet> {
        self.lock_of(volume_id)
            .try_write_owned()
            .ok()
            .map(|guard| VolumeQuiet { _guard: guard })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_volume_is_quiet_only_while_no_job_runs_on_it() {
        let activity = VolumeActivity::default();
        let busy = activity.job_started("v1").await;
        let second = activity.job_started("v1").await;
        assert!(activity.try_quiet("v1").is_none());
        assert!(activity.try_quiet("v2").is_some(), "other volumes are free");
        drop((busy, second));
        let quiet = activity.try_quiet("v1").expect("no job runs on v1");
        // A job starting now waits for the repair.
        let waiting = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            activity.job_started("v1"),
        )
        .await;
        assert!(waiting.is_err());
        drop(quiet);
        let _busy = activity.job_started("v1").await;
    }
}
