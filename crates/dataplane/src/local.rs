//! Local media: each medium is a directory; each slice a sparse file at
//! `<dir>/<volume_id>/c<copy>-k<column>.slice`.

use crate::copier::CopySource;
use crate::copy::{copy_file, CopyError};
use crate::fsutil::{create_dir_durable, fsync_dir, partial_path, remove_if_exists};
use crate::snapshot::remove_snapshot_files;
use crate::space::{SnapshotSpace, SpaceAccount};
use crate::volume::{
    Front, LocalSlice, LocalVolumeIo, SliceDevice, SliceMedia, VolumeIo, VolumeLayout,
};
use crate::SliceSnapshots;
use crate::{
    CopyFailure, CopyFailureListener, CopyOptions, DataPlane, DataPlaneError, Digest, LossRecord,
    SliceKey, StoredSlice,
};
use std::collections::HashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

/// Media held as directories on this machine. Clones share the media (added
/// and removed at runtime), what is known about their health and their
/// snapshot space.
#[derive(Debug, Clone)]
pub struct LocalMedia {
    /// Medium id → directory.
    dirs: Arc<RwLock<HashMap<String, PathBuf>>>,
    health: Arc<MediaHealth>,
    pub(crate) space: Arc<SnapshotSpace>,
}

/// What the data plane knows about its media's health.
#[derive(Debug, Default)]
struct MediaHealth {
    /// Marked failed by the service ([`DataPlane::set_medium_failed`]).
    marked: Mutex<BTreeSet<String>>,
    /// Seen failing: a slice's I/O on it errored.
    failing: Mutex<BTreeSet<String>>,
    /// Copies lost alone: a file of theirs missing from a medium that still
    /// reads.
    lost_copies: Mutex<BTreeSet<(String, SliceKey)>>,
    /// Seen with their directory in place (so a missing one is gone, not
    /// merely not created yet).
    present: Mutex<BTreeSet<String>>,
    /// Told of each medium that joins `failing` and each copy that joins
    /// `lost_copies`.
    listener: Listener,
    /// The record of each failure told to the listener: a medium's
    /// (`None`) or a copy's alone, until forgotten with it.
    records: Mutex<HashMap<RecordKey, LossRecord>>,
}

/// A failure's key among the records: the medium, and the copy when only
/// that copy failed.
type RecordKey = (String, Option<SliceKey>);

fn record_key(medium: &str, slice: &SliceKey, medium_failed: bool) -> RecordKey {
    (medium.to_string(), (!medium_failed).then(|| slice.clone()))
}

#[derive(Default)]
struct Listener(Mutex<Option<CopyFailureListener>>);

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Listener")
    }
}

fn locked<T>(set: &Mutex<BTreeSet<T>>) -> MutexGuard<'_, BTreeSet<T>> {
    // The sets stay consistent whatever panicked while holding them.
    set.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LocalMedia {
    /// `media`: medium id → directory.
    pub fn new(media: impl IntoIterator<Item = (String, PathBuf)>) -> LocalMedia {
        LocalMedia {
            dirs: Arc::new(RwLock::new(media.into_iter().collect())),
            health: Arc::default(),
            space: Arc::default(),
        }
    }

    /// Forgets everything known about a medium: its directory, health and
    /// snapshot space.
    pub(crate) fn forget(&self, medium: &str) {
        self.dirs
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(medium);
        locked(&self.health.marked).remove(medium);
        locked(&self.health.failing).remove(medium);
        self.forget_lost_copies(medium);
        locked(&self.health.present).remove(medium);
        self.space.set_budget(medium, None);
        self.space.forget(medium);
    }

    pub(crate) fn is_marked_failed(&self, medium: &str) -> bool {
        locked(&self.health.marked).contains(medium)
    }

    /// Tells the listener, if any, of a failure, with its new record (made
    /// at once without a listener). Cloned out: the listener runs without
    /// the lock held.
    fn tell(&self, medium: &str, slice: &SliceKey, medium_failed: bool) -> LossRecord {
        let record = LossRecord::default();
        self.records()
            .insert(record_key(medium, slice, medium_failed), record.clone());
        let listener = self
            .health
            .listener
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match listener {
            Some(listener) => listener(
                &CopyFailure {
                    medium: medium.to_string(),
                    slice: slice.clone(),
                    medium_failed,
                },
                &record,
            ),
            None => record.recorded(),
        }
        record
    }

    /// The record of a failure of the copy `slice` on `medium` (its own or
    /// its medium's) not made (pending or refused), if any: what a write
    /// skipping the copy waits for.
    pub(crate) fn pending_record(&self, medium: &str, slice: &SliceKey) -> Option<LossRecord> {
        let records = self.records();
        [None, Some(slice.clone())]
            .into_iter()
            .filter_map(|copy| records.get(&(medium.to_string(), copy)))
            .find(|r| !r.is_recorded())
            .cloned()
    }

    fn records(&self) -> MutexGuard<'_, HashMap<RecordKey, LossRecord>> {
        // One insert, lookup or retain per update: poisoning is ignored.
        self.health
            .records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets the records of the medium's failures (all of them, or only
    /// the copy `slice`'s).
    fn forget_records(&self, medium: &str, slice: Option<&SliceKey>) {
        self.records()
            .retain(|(m, copy), _| m != medium || slice.is_some_and(|s| copy.as_ref() != Some(s)));
    }

    /// Whether `e`, met on a copy on the medium, says the medium failed:
    /// anything but a file missing (ENOENT) from a medium whose directory
    /// is there and lists, which says only that the file went (a copy
    /// lost alone, or a volume deleted under its I/O).
    fn medium_failed_by(&self, medium: &str, e: &io::Error) -> bool {
        let missing_file = e.raw_os_error() == Some(libc::ENOENT);
        let medium_reads = self
            .medium_dir(medium)
            .is_ok_and(|dir| fs::read_dir(dir).is_ok());
        !(missing_file && medium_reads)
    }

    /// Records that I/O on a copy of the medium failed with `e`: the
    /// medium failed (see [`DataPlane::failed_media`]), or only that copy
    /// is lost (see [`DataPlane::failed_copies`]); the listener hears of
    /// each the first time. The failure's record.
    pub(crate) fn saw_io_error(&self, medium: &str, slice: &SliceKey, e: &io::Error) -> LossRecord {
        let medium_failed = self.medium_failed_by(medium, e);
        self.record_failure(medium, slice, medium_failed)
    }

    /// Records that a copy on the medium failed: the whole medium (see
    /// [`DataPlane::failed_media`]) or that copy alone (see
    /// [`DataPlane::failed_copies`]); the listener hears of each the first
    /// time. Also for media this host does not hold (a storage node's).
    /// Its record: new when the failure is, else the one it was told with.
    pub(crate) fn record_failure(
        &self,
        medium: &str,
        slice: &SliceKey,
        medium_failed: bool,
    ) -> LossRecord {
        let newly = if medium_failed {
            locked(&self.health.failing).insert(medium.to_string())
        } else {
            locked(&self.health.lost_copies).insert((medium.to_string(), slice.clone()))
        };
        if newly {
            return self.tell(medium, slice, medium_failed);
        }
        self.records()
            .get(&record_key(medium, slice, medium_failed))
            .cloned()
            .unwrap_or_else(LossRecord::already_recorded)
    }

    /// The copy's file was created or deleted on the medium: whatever was
    /// lost there before is not any more.
    pub(crate) fn forget_lost_copy(&self, medium: &str, slice: &SliceKey) {
        locked(&self.health.lost_copies).remove(&(medium.to_string(), slice.clone()));
        self.forget_records(medium, Some(slice));
    }

    fn forget_lost_copies(&self, medium: &str) {
        locked(&self.health.lost_copies).retain(|(m, _)| m != medium);
        self.forget_records(medium, None);
    }

    /// Records that the medium's directory was there.
    pub(crate) fn saw_present(&self, medium: &str) {
        let mut present = locked(&self.health.present);
        if !present.contains(medium) {
            present.insert(medium.to_string());
        }
    }

    /// Path of a slice's file on a medium (whether or not it exists).
    pub fn slice_path(&self, medium: &str, slice: &SliceKey) -> Result<PathBuf, DataPlaneError> {
        Ok(self
            .medium_dir(medium)?
            .join(&slice.volume_id)
            .join(format!("c{}-k{}.slice", slice.copy, slice.column)))
    }

    /// The medium's snapshot budget account, for a slice's snapshots.
    pub(crate) fn space_account(&self, medium: &str) -> Result<SpaceAccount, DataPlaneError> {
        Ok(SpaceAccount {
            space: Arc::clone(&self.space),
            medium: medium.to_string(),
            dir: self.medium_dir(medium)?,
        })
    }

    /// Snapshot files on the medium changed other than by a save.
    pub(crate) fn snapshot_files_changed(&self, medium: &str) {
        self.space.forget(medium);
    }

    pub(crate) fn medium_dir(&self, medium: &str) -> Result<PathBuf, DataPlaneError> {
        self.dirs
            .read()
            // The map stays consistent whatever panicked while holding it.
            .unwrap_or_else(PoisonError::into_inner)
            .get(medium)
            .cloned()
            .ok_or_else(|| DataPlaneError::UnknownMedium(medium.to_string()))
    }
}

/// The slice a file name `<volume_id>/c<copy>-k<column>.slice[.partial]`
/// stands for, and whether it is a partial copy.
fn parse_slice_file(volume_id: &str, file_name: &str) -> Option<StoredSlice> {
    let (stem, partial) = match file_name.strip_suffix(".partial") {
        Some(stem) => (stem, true),
        None => (file_name, false),
    };
    let (copy, column) = stem
        .strip_suffix(".slice")?
        .strip_prefix('c')?
        .split_once("-k")?;
    Some(StoredSlice {
        key: SliceKey {
            volume_id: volume_id.to_string(),
            copy: copy.parse().ok()?,
            column: column.parse().ok()?,
        },
        partial,
    })
}

/// How a slice is named in errors: `<volume_id>/c<copy>-k<column>`.
fn slice_label(slice: &SliceKey) -> String {
    format!("{}/c{}-k{}", slice.volume_id, slice.copy, slice.column)
}

/// Maps an I/O error to `DataPlaneError::Io` for `op` on the slice.
fn io_err<'a>(
    medium: &'a str,
    slice: &'a SliceKey,
    op: &'static str,
) -> impl FnOnce(io::Error) -> DataPlaneError + 'a {
    move |source| DataPlaneError::Io {
        medium: medium.to_string(),
        slice: slice_label(slice),
        op,
        source,
    }
}

/// Directory holding a slice file.
fn parent(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new("."))
}

/// Extends the open file to `size` if shorter (never truncates), then fsyncs it.
fn extend_and_sync(file: &File, size: u64) -> io::Result<()> {
    if file.metadata()?.len() < size {
        file.set_len(size)?;
    }
    file.sync_all()
}

/// Writes, fsyncs and removes a probe file in `dir`.
fn probe(dir: &Path) -> io::Result<()> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        ".svs-probe-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let path = dir.join(name);
    let written = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        f.write_all(b"svs medium probe\n")?;
        f.sync_all()
    })();
    let removed = remove_if_exists(&path);
    written?;
    removed?;
    fsync_dir(dir)
}

impl DataPlane for LocalMedia {
    fn serves_medium(&self, medium: &str) -> bool {
        self.medium_dir(medium).is_ok()
    }

    fn check_medium(&self, medium: &str) -> Result<(), DataPlaneError> {
        let dir = self.medium_dir(medium)?;
        create_dir_durable(&dir)
            .and_then(|()| probe(&dir))
            .map_err(|source| DataPlaneError::MediumUnusable {
                medium: medium.to_string(),
                dir: dir.clone(),
                source,
            })?;
        self.saw_present(medium);
        Ok(())
    }

    fn add_medium(&self, medium: &str, directory: &Path) -> Result<bool, DataPlaneError> {
        let added = {
            let mut dirs = self.dirs.write().unwrap_or_else(PoisonError::into_inner);
            match dirs.get(medium) {
                Some(known) if known == directory => false,
                Some(known) => {
                    return Err(DataPlaneError::MediumExists {
                        medium: medium.to_string(),
                        dir: known.clone(),
                    })
                }
                None => {
                    dirs.insert(medium.to_string(), directory.to_path_buf());
                    true
                }
            }
        };
        match self.check_medium(medium) {
            Ok(()) => Ok(added),
            Err(e) => {
                if added {
                    self.forget_medium(medium);
                }
                Err(e)
            }
        }
    }

    fn forget_medium(&self, medium: &str) {
        self.forget(medium);
    }

    fn remove_medium(&self, medium: &str) -> Result<(), DataPlaneError> {
        if self.medium_dir(medium).is_err() {
            return Ok(());
        }
        // Only files svs names as slices (and their partial copies and
        // snapshot files) go, with the volume directories they leave empty;
        // the directory itself and anything else in it stay.
        let cleaned = match self.stored_slices(medium) {
            Err(DataPlaneError::MediumUnreadable { source, .. })
                if source.kind() == io::ErrorKind::NotFound =>
            {
                Ok(())
            }
            Err(e) => Err(e),
            Ok(stored) => stored
                .iter()
                .try_for_each(|s| self.delete_slice(medium, &s.key)),
        };
        // Forgotten even when a file could not be removed: the store no
        // longer knows the medium, so nothing may be placed on it.
        self.forget(medium);
        cleaned
    }

    fn create_slice(
        &self,
        medium: &str,
        slice: &SliceKey,
        size: u64,
    ) -> Result<(), DataPlaneError> {
        let path = self.slice_path(medium, slice)?;
        let dir = parent(&path);
        create_dir_durable(dir).map_err(io_err(medium, slice, "mkdir"))?;
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err(medium, slice, "create"))?;
        extend_and_sync(&file, size).map_err(io_err(medium, slice, "create"))?;
        fsync_dir(dir).map_err(io_err(medium, slice, "fsync"))?;
        self.forget_lost_copy(medium, slice);
        Ok(())
    }

    fn grow_slice(&self, medium: &str, slice: &SliceKey, size: u64) -> Result<(), DataPlaneError> {
        let path = self.slice_path(medium, slice)?;
        let file = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(io_err(medium, slice, "grow"))?;
        extend_and_sync(&file, size).map_err(io_err(medium, slice, "grow"))
    }

    fn delete_slice(&self, medium: &str, slice: &SliceKey) -> Result<(), DataPlaneError> {
        let path = self.slice_path(medium, slice)?;
        // Going, whatever was lost of it there.
        self.forget_lost_copy(medium, slice);
        let dir = parent(&path);
        remove_if_exists(&path).map_err(io_err(medium, slice, "delete"))?;
        remove_if_exists(&partial_path(&path)).map_err(io_err(medium, slice, "delete"))?;
        let removed = remove_snapshot_files(&path, false);
        self.snapshot_files_changed(medium);
        removed.map_err(io_err(medium, slice, "delete"))?;
        match fsync_dir(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            r => r.map_err(io_err(medium, slice, "fsync"))?,
        }
        // Fails while other slices of the volume remain: that is fine.
        if fs::remove_dir(dir).is_ok() {
            fsync_dir(parent(dir)).map_err(io_err(medium, slice, "fsync"))?;
        }
        Ok(())
    }

    fn copy_slice(
        &self,
        from_medium: &str,
        to_medium: &str,
        slice: &SliceKey,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Digest, DataPlaneError> {
        let from = self.slice_path(from_medium, slice)?;
        let to = self.slice_path(to_medium, slice)?;
        let copied = copy_file(&from, &to, options, progress);
        self.snapshot_files_changed(to_medium);
        copied.map_err(|e| match e {
            CopyError::Source(op, source) => {
                // The copy a movement reads from failed: as a read would.
                if crate::volume::is_media_failure(&source) {
                    self.saw_io_error(from_medium, slice, &source);
                }
                io_err(from_medium, slice, op)(source)
            }
            CopyError::Target(op, source) => io_err(to_medium, slice, op)(source),
            CopyError::Cancelled => DataPlaneError::Cancelled,
            CopyError::VerifyFailed => DataPlaneError::VerifyFailed {
                slice: slice_label(slice),
                from: from_medium.to_string(),
                to: to_medium.to_string(),
            },
        })
    }

    fn delete_partial_copy(&self, medium: &str, slice: &SliceKey) -> Result<(), DataPlaneError> {
        let slice_path = self.slice_path(medium, slice)?;
        let path = partial_path(&slice_path);
        remove_if_exists(&path).map_err(io_err(medium, slice, "delete"))?;
        // Snapshot files without their slice: a copy interrupted between
        // placing them and the slice file.
        let orphaned = match slice_path.try_exists() {
            Ok(exists) => !exists,
            Err(e) => return Err(io_err(medium, slice, "stat")(e)),
        };
        let removed = remove_snapshot_files(&slice_path, !orphaned);
        self.snapshot_files_changed(medium);
        removed.map_err(io_err(medium, slice, "delete"))?;
        match fsync_dir(parent(&path)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            r => r.map_err(io_err(medium, slice, "fsync")),
        }
    }

    fn stored_slices(&self, medium: &str) -> Result<Vec<StoredSlice>, DataPlaneError> {
        let dir = self.medium_dir(medium)?;
        let unreadable = |source| DataPlaneError::MediumUnreadable {
            medium: medium.to_string(),
            dir: dir.clone(),
            source,
        };
        let mut found = Vec::new();
        for volume_dir in fs::read_dir(&dir).map_err(unreadable)? {
            let volume_dir = volume_dir.map_err(unreadable)?;
            if !volume_dir.file_type().map_err(unreadable)?.is_dir() {
                continue;
            }
            let Some(volume_id) = volume_dir.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let entries = match fs::read_dir(volume_dir.path()) {
                Ok(entries) => entries,
                // Removed since it was listed (its last slice was deleted).
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(unreadable(e)),
            };
            for entry in entries {
                let entry = entry.map_err(unreadable)?;
                if let Some(slice) = entry
                    .file_name()
                    .to_str()
                    .and_then(|name| parse_slice_file(&volume_id, name))
                {
                    found.push(slice);
                }
            }
        }
        Ok(found)
    }

    /// Counted as a copy counts it ([`CopySource::data_bytes`]), so the
    /// two agree on what a copy moves.
    fn slice_data_bytes(&self, medium: &str, slice: &SliceKey) -> Result<u64, DataPlaneError> {
        let path = self.slice_path(medium, slice)?;
        let file = File::open(&path).map_err(io_err(medium, slice, "open"))?;
        let len = file
            .metadata()
            .map_err(io_err(medium, slice, "stat"))?
            .len();
        CopySource::data_bytes(&file, 0, len).map_err(io_err(medium, slice, "seek"))
    }

    fn open_volume(&self, layout: &VolumeLayout) -> Result<Arc<dyn VolumeIo>, DataPlaneError> {
        Ok(Arc::new(LocalVolumeIo::open(self, layout)?))
    }

    fn medium_snapshot_usage(
        &self,
        medium: &str,
    ) -> Result<BTreeMap<(String, u64), u64>, DataPlaneError> {
        let dir = self.medium_dir(medium)?;
        crate::usage::medium_snapshot_bytes(&dir).map_err(|source| {
            DataPlaneError::MediumUnreadable {
                medium: medium.to_string(),
                dir: dir.clone(),
                source,
            }
        })
    }

    fn medium_written_bytes(&self, medium: &str) -> Result<u64, DataPlaneError> {
        let dir = self.medium_dir(medium)?;
        crate::usage::medium_written_bytes(&dir).map_err(|source| {
            DataPlaneError::MediumUnreadable {
                medium: medium.to_string(),
                dir: dir.clone(),
                source,
            }
        })
    }

    fn set_snapshot_budget(&self, medium: &str, bytes: Option<u64>) {
        self.space.set_budget(medium, bytes);
    }

    fn set_medium_failed(&self, medium: &str, failed: bool) {
        if failed {
            locked(&self.health.marked).insert(medium.to_string());
        } else {
            locked(&self.health.marked).remove(medium);
            locked(&self.health.failing).remove(medium);
            self.forget_lost_copies(medium);
        }
    }

    fn failed_copies(&self) -> Vec<(String, SliceKey)> {
        locked(&self.health.lost_copies).iter().cloned().collect()
    }

    fn on_copy_failure(&self, listener: CopyFailureListener) {
        *self
            .health
            .listener
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(listener);
    }

    fn probe_slice(
        &self,
        medium: &str,
        slice: &SliceKey,
        snapshots: &[u64],
    ) -> Result<(), DataPlaneError> {
        self.probe(medium, slice, snapshots)
    }

    fn failed_media(&self) -> Vec<String> {
        let mut failed = locked(&self.health.failing).clone();
        let present = locked(&self.health.present).clone();
        for medium in present {
            let gone = self
                .medium_dir(&medium)
                .is_ok_and(|dir| matches!(dir.try_exists(), Ok(false)));
            if gone {
                failed.insert(medium);
            }
        }
        failed.into_iter().collect()
    }
}

fn open_rw(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

impl SliceMedia for LocalMedia {
    /// Opens a slice's file and snapshots as a [`LocalSlice`]; `None` (the
    /// slice is lost) when its medium is marked failed or they cannot be
    /// opened.
    fn open_slice(
        &self,
        medium: &str,
        key: &SliceKey,
        _front: &Arc<Front>,
    ) -> Option<Arc<dyn SliceDevice>> {
        let media = self;
        if media.is_marked_failed(medium) {
            return None;
        }
        let opened = media.slice_path(medium, key).and_then(|path| {
            let open = |op: &'static str| {
                move |source: io::Error| DataPlaneError::Io {
                    medium: medium.to_string(),
                    slice: slice_label(key),
                    op,
                    source,
                }
            };
            let file = open_rw(&path).map_err(open("open"))?;
            let account = media.space_account(medium)?;
            let snapshots =
                SliceSnapshots::open_accounted(&path, account).map_err(open("open snapshots"))?;
            let device: Arc<dyn SliceDevice> =
                Arc::new(LocalSlice::new(Arc::new(file), snapshots, path));
            Ok(device)
        });
        match opened {
            Ok(live) => {
                media.saw_present(medium);
                Some(live)
            }
            Err(e) => {
                if let DataPlaneError::Io { source, .. } = &e {
                    // A missing file loses this copy alone (when its medium
                    // still reads), as it would for I/O.
                    if crate::volume::is_media_failure(source) {
                        media.saw_io_error(medium, key, source);
                    }
                }
                tracing::warn!(error = %e, "slice cannot be opened; it is lost");
                None
            }
        }
    }

    fn saw_io_error(&self, medium: &str, key: &SliceKey, e: &io::Error) -> LossRecord {
        LocalMedia::saw_io_error(self, medium, key, e)
    }

    fn pending_record(&self, medium: &str, key: &SliceKey) -> Option<LossRecord> {
        LocalMedia::pending_record(self, medium, key)
    }

    fn serves(&self, medium: &str) -> bool {
        self.medium_dir(medium).is_ok()
    }

    fn slice_path(&self, medium: &str, key: &SliceKey) -> Result<PathBuf, DataPlaneError> {
        LocalMedia::slice_path(self, medium, key)
    }

    fn space_account(&self, medium: &str) -> Result<SpaceAccount, DataPlaneError> {
        LocalMedia::space_account(self, medium)
    }

    fn snapshot_files_changed(&self, medium: &str) {
        LocalMedia::snapshot_files_changed(self, medium);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_file_names_parse_back_to_their_slice() {
        let slice = parse_slice_file("v1", "c1-k12.slice").expect("a slice");
        assert_eq!(
            (slice.key.copy, slice.key.column, slice.partial),
            (1, 12, false)
        );
        assert_eq!(slice.key.volume_id, "v1");
        assert!(parse_slice_file("v1", "c0-k0.slice.partial").is_some_and(|s| s.partial));
        for other in [
            "c0-k0",
            "c0.slice",
            "x0-k0.slice",
            "c0-kx.slice",
            ".svs-probe-1-2",
            "c0-k0.s3.delta",
            "c0-k0.s3.map",
            "c0-k0.s3.map.tmp",
        ] {
            assert_eq!(parse_slice_file("v1", other), None, "{other}");
        }
    }
}
