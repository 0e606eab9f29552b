//! Snapshot space per medium: what snapshots hold on it against the budget
//! the service gives it ([`DataPlane::set_snapshot_budget`]).
//!
//! Media have logical sizes (their directories may share one filesystem),
//! so a full medium is not something the filesystem reports: a
//! copy-on-write save that would take the medium's snapshot bytes over its
//! budget fails with ENOSPC before anything is written. The count is kept
//! in memory: measured from the medium's snapshot files when first needed
//! (and again after anything changed them other than a save), then moved by
//! each save. A save costs one lock and an addition, never a directory scan.
//!
//! [`DataPlane::set_snapshot_budget`]: crate::DataPlane::set_snapshot_budget

use crate::usage::medium_snapshot_bytes;
use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Every medium's snapshot count and budget; shared by clones of
/// [`LocalMedia`](crate::LocalMedia) and every slice's snapshots.
#[derive(Debug, Default)]
pub(crate) struct SnapshotSpace {
    media: Mutex<HashMap<String, Arc<Mutex<MediumSpace>>>>,
}

#[derive(Debug, Default)]
struct MediumSpace {
    /// Bytes snapshots may hold on the medium; `None` = no limit.
    budget: Option<u64>,
    /// Bytes snapshots hold (saves in progress included); `None` = unknown,
    /// measured from the files at the next save.
    used: Option<u64>,
    /// Moves on each re-measurement, so a save that reserved before it does
    /// not correct a count that no longer includes its reservation.
    generation: u64,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The figures stay consistent whatever panicked while holding them.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SnapshotSpace {
    fn medium(&self, medium: &str) -> Arc<Mutex<MediumSpace>> {
        Arc::clone(locked(&self.media).entry(medium.to_string()).or_default())
    }

    pub(crate) fn set_budget(&self, medium: &str, budget: Option<u64>) {
        let space = self.medium(medium);
        let mut space = locked(&space);
        space.budget = budget;
        // A cheap occasion to correct what the in-memory count missed.
        space.used = None;
    }

    /// The count is measured again at the next save: snapshot files on the
    /// medium changed other than by a save (creation, deletion, a copy).
    pub(crate) fn forget(&self, medium: &str) {
        let space = self.medium(medium);
        locked(&space).used = None;
    }

    /// The medium's budget and its snapshot bytes as counted now (`None`
    /// when not measured since the last change).
    #[cfg(test)]
    pub(crate) fn figures(&self, medium: &str) -> (Option<u64>, Option<u64>) {
        let space = self.medium(medium);
        let space = locked(&space);
        (space.budget, space.used)
    }
}

/// One medium's account, held by the snapshots of each slice on it.
#[derive(Debug, Clone)]
pub(crate) struct SpaceAccount {
    pub(crate) space: Arc<SnapshotSpace>,
    pub(crate) medium: String,
    /// The medium's directory (measured when the count is unknown).
    pub(crate) dir: PathBuf,
}

/// Bytes taken from a medium's budget for one save.
pub(crate) struct Reservation {
    bytes: u64,
    generation: u64,
}

impl Reservation {
    /// The bytes taken.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl SpaceAccount {
    /// Takes `bytes` from the medium's budget for a save, or fails with
    /// ENOSPC (`StorageFull`) when its snapshots would hold more than the
    /// budget. Nothing is taken when `bytes` is 0 (a save that only records
    /// zero chunks in a map block already allocated costs nothing).
    pub(crate) fn reserve(&self, bytes: u64) -> io::Result<Reservation> {
        let space = self.space.medium(&self.medium);
        let mut space = locked(&space);
        if bytes == 0 {
            return Ok(Reservation {
                bytes,
                generation: space.generation,
            });
        }
        let used = match space.used {
            Some(used) => used,
            None => {
                let used = medium_snapshot_bytes(&self.dir)?.values().sum();
                space.used = Some(used);
                space.generation += 1;
                used
            }
        };
        if let Some(budget) = space.budget {
            if used.saturating_add(bytes) > budget {
                return Err(io::Error::new(
                    io::ErrorKind::StorageFull,
                    format!(
                        "No space left on medium '{}' for snapshot data: snapshots hold {used} \
                         bytes of {budget} free, this write needs {bytes} more",
                        self.medium
                    ),
                ));
            }
        }
        space.used = Some(used + bytes);
        Ok(Reservation {
            bytes,
            generation: space.generation,
        })
    }

    /// Ends a reservation: the save used `used` of its bytes (0 when it
    /// failed); the rest goes back to the budget.
    pub(crate) fn settle(&self, reservation: Reservation, used: u64) {
        let unused = reservation.bytes.saturating_sub(used);
        if unused == 0 {
            return;
        }
        let space = self.space.medium(&self.medium);
        let mut space = locked(&space);
        if space.generation != reservation.generation {
            return;
        }
        if let Some(count) = space.used.as_mut() {
            *count = count.saturating_sub(unused);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(dir: &std::path::Path) -> SpaceAccount {
        SpaceAccount {
            space: Arc::default(),
            medium: "m0".to_string(),
            dir: dir.to_path_buf(),
        }
    }

    #[test]
    fn reservations_count_against_the_budget_and_unused_bytes_return() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = account(dir.path());
        a.space.set_budget("m0", Some(100_000));
        let r = a.reserve(65_536).expect("within budget");
        assert_eq!(a.space.figures("m0"), (Some(100_000), Some(65_536)));
        let err = a.reserve(65_536).err().expect("over budget");
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        assert!(err.to_string().contains("medium 'm0'"), "{err}");
        // The save used only 4 KiB: 61,440 bytes go back.
        a.settle(r, 4096);
        assert_eq!(a.space.figures("m0").1, Some(4096));
        a.reserve(65_536).expect("room again");
        assert_eq!(a.space.figures("m0").1, Some(69_632));
        // Free saves pass even over budget.
        a.space.set_budget("m0", Some(0));
        a.reserve(0).expect("nothing to take");
    }

    #[test]
    fn an_unknown_count_is_measured_from_the_medium_s_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let v = dir.path().join("v1");
        std::fs::create_dir_all(&v).expect("dir");
        std::fs::write(v.join("c0-k0.s1.delta"), vec![5u8; 8192]).expect("delta");
        let a = account(dir.path());
        a.space.set_budget("m0", Some(8192 + 4096));
        let err = a.reserve(8192).err().expect("8 KiB held, 4 KiB left");
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        assert_eq!(a.space.figures("m0").1, Some(8192));
        a.reserve(4096).expect("fits exactly");
        std::fs::remove_file(v.join("c0-k0.s1.delta")).expect("rm");
        a.space.forget("m0");
        a.reserve(8192).expect("measured again: nothing held");
        assert_eq!(a.space.figures("m0").1, Some(8192));
    }

    #[test]
    fn a_reservation_from_before_a_re_measurement_does_not_correct_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = account(dir.path());
        a.space.set_budget("m0", Some(1 << 20));
        let old = a.reserve(65_536).expect("reserve");
        a.space.forget("m0");
        a.reserve(4096).expect("re-measured: an empty medium");
        a.settle(old, 0);
        assert_eq!(a.space.figures("m0").1, Some(4096));
    }

    #[test]
    fn without_a_budget_nothing_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = account(dir.path());
        a.reserve(u64::MAX / 2).expect("no limit");
        a.space.set_budget("m0", None);
        a.reserve(u64::MAX / 2).expect("still no limit");
    }
}
