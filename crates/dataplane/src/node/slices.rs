//! [`NodeSlices`]: the slices of this node's media, served to fronts over
//! the slice protocol with the local data plane's own code (slice files,
//! copy-on-write snapshots, digests).

use super::names::check_name;
use crate::copier::CopyTarget;
use crate::digest::{chunks, digest_open_file, RangeHasher, CHUNK};
use crate::snapshot::COW_CHUNK;
use crate::volume::{LocalSlice, SliceDevice};
use crate::{DataPlane, DataPlaneError, LocalMedia, SliceKey, SliceSnapshots};
use std::collections::{BTreeSet, HashMap};
use std::fs::{self, OpenOptions};
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use svs_sliceproto::{MapTail, SliceBackend, SliceName, SnapshotInfo, SnapshotPart, StoredSlice};

/// Most map bytes one [`SliceBackend::snapshot_map_since`] answer carries
/// (1 MiB, about 43,000 records): the reply must fit the protocol's max
/// payload (4 MiB by default) and the client does not page maps itself. A
/// longer tail is cut at a record boundary and the answer's `end` is where
/// its bytes stop: a caller that wants the whole map asks again from `end`
/// until an answer has no bytes.
pub const MAP_PAGE_BYTES: u64 = 1 << 20;

/// The slices of this node's media as a [`SliceBackend`]: the same files
/// and semantics as [`LocalMedia`] (writes and discards through the
/// snapshots' copy-on-write, create and grow durable on return, delete
/// removes the slice with its snapshot files, the same digest).
///
/// Slices are opened on first use and kept open (a request is a few
/// microseconds; opening replays the snapshot maps). Each request runs
/// under its slice's shared lock, a delete (or a create that finds the
/// cached file replaced) under the exclusive one, so a deleted slice is
/// closed once no request uses it and never served again.
///
/// Errors carry their errno: an unknown medium and a slice this node does
/// not hold are ENOENT naming them, a name that is not a plain file name
/// (see `check_name`) and a read, write, discard or prepare past the end
/// are EINVAL, a full medium (its snapshot budget) is ENOSPC.
pub struct NodeSlices {
    media: LocalMedia,
    medium_names: BTreeSet<String>,
    open: Mutex<HashMap<SliceName, Arc<Slot>>>,
}

/// One slice's place in the cache.
#[derive(Default)]
struct Slot(RwLock<SlotState>);

#[derive(Default)]
enum SlotState {
    /// Not opened yet.
    #[default]
    Closed,
    Open(Arc<LocalSlice>),
    /// Deleted (or found missing): the slot left the cache; whoever still
    /// holds it looks the slice up again.
    Gone,
}

fn not_held(slice: &SliceName) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "slice {}/c{}-k{} is not on medium '{}' of this node",
            slice.volume, slice.copy, slice.column, slice.medium
        ),
    )
}

fn past_the_end(what: &str, offset: u64, len: u64, size: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what} of {len} bytes at {offset} goes past the end of the slice ({size} bytes)"),
    )
}

/// Bytes a range digest reads at a time (see [`RangeHasher`]).
const DIGEST_PIECE: usize = 128 << 10;

/// `offset + len`, EINVAL when it overflows.
fn range_end(offset: u64, len: u64) -> io::Result<u64> {
    offset.checked_add(len).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("range of {len} bytes at {offset} overflows"),
        )
    })
}

/// The data plane's error as the protocol sends it: its errno kept (the
/// server names the op and the slice in front of it).
fn to_io(e: DataPlaneError) -> io::Error {
    match e {
        DataPlaneError::UnknownMedium(m) => io::Error::new(
            io::ErrorKind::NotFound,
            format!("no medium '{m}' on this node"),
        ),
        DataPlaneError::Io { source, .. }
        | DataPlaneError::MediumUnusable { source, .. }
        | DataPlaneError::MediumUnreadable { source, .. }
            if source.raw_os_error().is_some() =>
        {
            source
        }
        DataPlaneError::Io { ref source, .. }
        | DataPlaneError::MediumUnusable { ref source, .. }
        | DataPlaneError::MediumUnreadable { ref source, .. } => {
            io::Error::new(source.kind(), e.to_string())
        }
        other => io::Error::other(other.to_string()),
    }
}

fn key(slice: &SliceName) -> SliceKey {
    SliceKey {
        volume_id: slice.volume.clone(),
        copy: slice.copy,
        column: slice.column,
    }
}

impl NodeSlices {
    /// Serves `media` (medium name, directory): each directory is created
    /// if needed and proven writable (as the local data plane checks its
    /// media). Fails on a medium name given twice or that is not a plain
    /// file name.
    pub fn open(media: Vec<(String, PathBuf)>) -> io::Result<NodeSlices> {
        let mut medium_names = BTreeSet::new();
        for (name, _) in &media {
            check_name("medium name", name)?;
            if !medium_names.insert(name.clone()) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("medium '{name}' is given twice"),
                ));
            }
        }
        let local = LocalMedia::new(media);
        for name in &medium_names {
            local.check_medium(name).map_err(to_io)?;
        }
        Ok(NodeSlices {
            media: local,
            medium_names,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// The media served, by name.
    pub fn media(&self) -> impl Iterator<Item = &str> {
        self.medium_names.iter().map(String::as_str)
    }

    /// Sets how many bytes snapshots may hold on `medium` (`None`: no
    /// limit, the default); see [`DataPlane::set_snapshot_budget`]. A
    /// copy-on-write save over it fails the write with ENOSPC.
    pub fn set_snapshot_budget(&self, medium: &str, bytes: Option<u64>) {
        self.media.set_snapshot_budget(medium, bytes);
    }

    /// Slices open now (for tests and status).
    pub fn open_slices(&self) -> usize {
        self.cache().len()
    }

    fn cache(&self) -> MutexGuard<'_, HashMap<SliceName, Arc<Slot>>> {
        // One insert or remove per update: poisoning is ignored.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The names are plain and the medium is one of this node's.
    fn check(&self, slice: &SliceName) -> io::Result<()> {
        check_name("volume id", &slice.volume)?;
        self.check_medium(&slice.medium)
    }

    fn check_medium(&self, medium: &str) -> io::Result<()> {
        check_name("medium name", medium)?;
        if !self.medium_names.contains(medium) {
            return Err(to_io(DataPlaneError::UnknownMedium(medium.to_string())));
        }
        Ok(())
    }

    fn slot(&self, slice: &SliceName) -> Arc<Slot> {
        let mut cache = self.cache();
        // The name is cloned only for a slice not cached yet.
        if let Some(slot) = cache.get(slice) {
            return Arc::clone(slot);
        }
        Arc::clone(cache.entry(slice.clone()).or_default())
    }

    /// Takes `slot` out of the cache (if it is still the one there).
    fn evict(&self, slice: &SliceName, slot: &Arc<Slot>) {
        let mut cache = self.cache();
        if cache.get(slice).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            cache.remove(slice);
        }
    }

    /// The slice's file on its medium (checked first).
    fn path_of(&self, slice: &SliceName) -> io::Result<PathBuf> {
        self.check(slice)?;
        self.media
            .slice_path(&slice.medium, &key(slice))
            .map_err(to_io)
    }

    /// Opens the slice's file and snapshots, as the local data plane does.
    fn open_slice(&self, slice: &SliceName) -> io::Result<LocalSlice> {
        let path = self
            .media
            .slice_path(&slice.medium, &key(slice))
            .map_err(to_io)?;
        let file = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // A medium whose directory is gone failed: say so, not
                // that the slice is merely not here.
                let dir = self.media.medium_dir(&slice.medium).map_err(to_io)?;
                if let Err(e) = fs::read_dir(&dir) {
                    return Err(io::Error::new(
                        e.kind(),
                        format!(
                            "medium '{}': directory {} cannot be listed: {e}",
                            slice.medium,
                            dir.display()
                        ),
                    ));
                }
                return Err(not_held(slice));
            }
            Err(e) => return Err(e),
        };
        let account = self.media.space_account(&slice.medium).map_err(to_io)?;
        let snapshots = SliceSnapshots::open_accounted(&path, account)?;
        Ok(LocalSlice::new(Arc::new(file), snapshots, path))
    }

    /// Runs `op` on the slice, opened (and cached) if it is not yet, under
    /// the slice's shared lock.
    fn with_slice<T>(
        &self,
        slice: &SliceName,
        op: impl FnOnce(&LocalSlice) -> io::Result<T>,
    ) -> io::Result<T> {
        self.check(slice)?;
        loop {
            let slot = self.slot(slice);
            {
                let state = slot.0.read().unwrap_or_else(PoisonError::into_inner);
                match &*state {
                    SlotState::Open(live) => return op(live),
                    SlotState::Gone => continue,
                    SlotState::Closed => {}
                }
            }
            let mut state = slot.0.write().unwrap_or_else(PoisonError::into_inner);
            if matches!(*state, SlotState::Closed) {
                match self.open_slice(slice) {
                    Ok(live) => *state = SlotState::Open(Arc::new(live)),
                    Err(e) => {
                        // Not cached: a slice asked for and missing leaves
                        // nothing behind.
                        *state = SlotState::Gone;
                        self.evict(slice, &slot);
                        return Err(e);
                    }
                }
            }
            // Opened (here or by another request): run it shared.
        }
    }

    /// [`NodeSlices::with_slice`] for a range `[offset, offset + len)` that
    /// must lie within the slice.
    fn with_range<T>(
        &self,
        slice: &SliceName,
        what: &str,
        offset: u64,
        len: u64,
        op: impl FnOnce(&LocalSlice) -> io::Result<T>,
    ) -> io::Result<T> {
        let end = range_end(offset, len)?;
        self.with_slice(slice, |live| {
            let size = live.size()?;
            if end > size {
                return Err(past_the_end(what, offset, len, size));
            }
            op(live)
        })
    }

    /// Runs `change` under the slice's exclusive lock (no request on it
    /// runs meanwhile), then drops the cached slice: the next request
    /// opens what is on disk then.
    fn exclusively<T>(
        &self,
        slice: &SliceName,
        change: impl FnOnce() -> io::Result<T>,
    ) -> io::Result<T> {
        self.check(slice)?;
        let slot = self.slot(slice);
        let mut state = slot.0.write().unwrap_or_else(PoisonError::into_inner);
        let changed = change();
        *state = SlotState::Gone;
        self.evict(slice, &slot);
        changed
    }
}

impl SliceBackend for NodeSlices {
    fn size(&self, slice: &SliceName) -> io::Result<u64> {
        self.with_slice(slice, |s| s.size())
    }

    fn read(&self, slice: &SliceName, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.with_range(slice, "read", offset, buf.len() as u64, |s| {
            s.read_at(buf, offset)
        })
    }

    fn read_cached(&self, slice: &SliceName, offset: u64, buf: &mut [u8]) -> io::Result<bool> {
        self.with_range(slice, "read", offset, buf.len() as u64, |s| {
            s.read_cached(buf, offset)
        })
    }

    fn prepare_write(&self, slice: &SliceName, offset: u64, len: u64) -> io::Result<()> {
        self.with_range(slice, "prepare", offset, len, |s| {
            s.prepare_write(offset, len)
        })
    }

    fn write(&self, slice: &SliceName, offset: u64, data: &[u8]) -> io::Result<()> {
        self.with_range(slice, "write", offset, data.len() as u64, |s| {
            s.write_at(data, offset)
        })
    }

    fn discard(&self, slice: &SliceName, offset: u64, len: u64) -> io::Result<()> {
        self.with_range(slice, "discard", offset, len, |s| s.discard(offset, len))
    }

    fn sync(&self, slice: &SliceName) -> io::Result<()> {
        self.with_slice(slice, |s| s.sync())
    }

    fn allocation(&self, slice: &SliceName, offset: u64, len: u64) -> io::Result<Vec<(u64, bool)>> {
        range_end(offset, len)?;
        self.with_slice(slice, |s| s.allocation(offset, len))
    }

    fn will_need(&self, slice: &SliceName, offset: u64, len: u64) {
        // A hint: a slice that cannot be opened is someone else's error.
        let _ = self.with_slice(slice, |s| {
            s.will_need(offset, len);
            Ok(())
        });
    }

    fn start_writeback(&self, slice: &SliceName, offset: u64, len: u64) {
        // A hint, as above.
        let _ = self.with_slice(slice, |s| {
            CopyTarget::start_writeback(s.file()?, offset, len);
            Ok(())
        });
    }

    fn next_data(&self, slice: &SliceName, from: u64, len: u64) -> io::Result<Option<(u64, u64)>> {
        self.with_slice(slice, |s| s.next_data(from, len))
    }

    fn data_bytes(&self, slice: &SliceName, from: u64, len: u64) -> io::Result<u64> {
        self.with_slice(slice, |s| s.data_bytes(from, len))
    }

    fn check_present(&self, slice: &SliceName) -> io::Result<()> {
        self.with_slice(slice, |s| s.check_present())
    }

    fn snapshots(&self, slice: &SliceName) -> io::Result<Vec<SnapshotInfo>> {
        let list = self.with_slice(slice, |s| s.snapshots())?;
        Ok(list
            .into_iter()
            .map(|s| SnapshotInfo {
                id: s.id,
                size: s.size,
                used_bytes: s.used_bytes,
            })
            .collect())
    }

    fn create_snapshot(&self, slice: &SliceName, id: u64) -> io::Result<()> {
        self.with_slice(slice, |s| s.create_snapshot(id))
    }

    fn delete_snapshot(&self, slice: &SliceName, id: u64) -> io::Result<()> {
        self.with_slice(slice, |s| s.delete_snapshot(id))
    }

    fn rollback(&self, slice: &SliceName, id: u64) -> io::Result<()> {
        self.with_slice(slice, |s| s.rollback(id))
    }

    fn read_snapshot(
        &self,
        slice: &SliceName,
        id: u64,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<()> {
        range_end(offset, buf.len() as u64)?;
        self.with_slice(slice, |s| s.read_snapshot(id, offset, buf))
    }

    fn snapshot_allocation(
        &self,
        slice: &SliceName,
        id: u64,
        offset: u64,
        len: u64,
    ) -> io::Result<Vec<(u64, bool)>> {
        range_end(offset, len)?;
        self.with_slice(slice, |s| s.snapshot_allocation(id, offset, len))
    }

    fn snapshot_ids(&self, slice: &SliceName) -> io::Result<Vec<u64>> {
        self.with_slice(slice, |s| s.snapshot_ids())
    }

    /// At most [`MAP_PAGE_BYTES`] per answer (see there).
    fn snapshot_map_since(&self, slice: &SliceName, id: u64, from: u64) -> io::Result<MapTail> {
        let tail = self.with_slice(slice, |s| s.snapshot_map_page(id, from, MAP_PAGE_BYTES))?;
        Ok(MapTail {
            bytes: tail.bytes,
            end: tail.end,
        })
    }

    fn read_snapshot_chunk(
        &self,
        slice: &SliceName,
        id: u64,
        chunk: u64,
        buf: &mut [u8],
    ) -> io::Result<()> {
        let offset = chunk.checked_mul(COW_CHUNK).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("chunk {chunk} is past any snapshot"),
            )
        })?;
        range_end(offset, buf.len() as u64)?;
        self.with_slice(slice, |s| s.read_snapshot_chunk(id, chunk, buf))
    }

    fn write_snapshot_part(
        &self,
        slice: &SliceName,
        id: u64,
        part: SnapshotPart,
        offset: u64,
        data: &[u8],
    ) -> io::Result<()> {
        let path = self.path_of(slice)?;
        super::snapshot_parts::write(&path, (id, part), offset, data)
    }

    fn read_snapshot_part(
        &self,
        slice: &SliceName,
        id: u64,
        part: SnapshotPart,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<usize> {
        let path = self.path_of(slice)?;
        super::snapshot_parts::read(&path, (id, part), offset, buf)
    }

    /// In place under the slice's exclusive lock; the slice is opened again
    /// (with its new snapshots) by the next request.
    fn place_snapshot_parts(&self, slice: &SliceName, ids: &[u64]) -> io::Result<()> {
        let path = self.path_of(slice)?;
        let placed = self.exclusively(slice, || super::snapshot_parts::place(&path, ids));
        // The snapshot files' space is counted again.
        self.media.snapshot_files_changed(&slice.medium);
        placed
    }

    fn drop_snapshot_parts(&self, slice: &SliceName) -> io::Result<()> {
        let path = self.path_of(slice)?;
        super::snapshot_parts::drop_parts(&path)
    }

    /// Creates the slice (or extends it), durable on return. A cached slice
    /// whose file is no longer the one on disk (removed and made again
    /// behind the node's back) is dropped, so the new file is served.
    fn create_slice(&self, slice: &SliceName, size: u64) -> io::Result<()> {
        self.check(slice)?;
        self.media
            .create_slice(&slice.medium, &key(slice), size)
            .map_err(to_io)?;
        let slot = self.cache().get(slice).cloned();
        if let Some(slot) = slot {
            let stale = match &*slot.0.read().unwrap_or_else(PoisonError::into_inner) {
                SlotState::Open(live) => live.check_present().is_err(),
                SlotState::Closed | SlotState::Gone => false,
            };
            if stale {
                self.exclusively(slice, || Ok(()))?;
            }
        }
        Ok(())
    }

    fn grow_slice(&self, slice: &SliceName, size: u64) -> io::Result<()> {
        // The slice must be here (ENOENT naming it otherwise); its open
        // file sees the new size.
        self.with_slice(slice, |_| Ok(()))?;
        self.media
            .grow_slice(&slice.medium, &key(slice), size)
            .map_err(to_io)
    }

    /// Closes the slice (once no request uses it) and removes its files,
    /// its snapshot files and any partial copy of it; a slice that is not
    /// here is fine (a retried delete), as for the local data plane.
    fn delete_slice(&self, slice: &SliceName) -> io::Result<()> {
        self.exclusively(slice, || {
            self.media
                .delete_slice(&slice.medium, &key(slice))
                .map_err(to_io)
        })
    }

    /// The local data plane's digest of the slice's bytes.
    fn digest(&self, slice: &SliceName) -> io::Result<u128> {
        let digest = self.with_slice(slice, |s| {
            digest_open_file(s.file()?, &mut vec![0u8; CHUNK])
        })?;
        Ok(digest.0)
    }

    /// Read here, on the node: only the 16 bytes of the digest travel.
    /// Past the slice's end the range reads as zeros (a stale copy may be
    /// shorter than a source that grew).
    fn range_digest(
        &self,
        slice: &SliceName,
        offset: u64,
        len: u64,
        seed: u64,
    ) -> io::Result<u128> {
        let end = range_end(offset, len)?;
        let mut buf = vec![0u8; len.min(DIGEST_PIECE as u64) as usize];
        let mut hasher = RangeHasher::new(seed);
        self.with_slice(slice, |s| {
            let present = s.size()?.clamp(offset, end);
            for (at, n) in chunks(offset, end, DIGEST_PIECE as u64) {
                // Past the slice's end: zeros.
                let piece = &mut buf[..n];
                let here = present.saturating_sub(at).min(n as u64) as usize;
                s.read_at(&mut piece[..here], at)?;
                piece[here..].fill(0);
                hasher.feed(piece);
            }
            Ok(())
        })?;
        Ok(hasher.finish())
    }

    /// The slice files on the medium (partial copies flagged), ordered by
    /// volume, copy and column.
    fn stored_slices(&self, medium: &str) -> io::Result<Vec<StoredSlice>> {
        self.check_medium(medium)?;
        let mut found: Vec<StoredSlice> = self
            .media
            .stored_slices(medium)
            .map_err(to_io)?
            .into_iter()
            .map(|s| StoredSlice {
                volume: s.key.volume_id,
                copy: s.key.copy,
                column: s.key.column,
                partial: s.partial,
            })
            .collect();
        found.sort_by(|a, b| {
            (&a.volume, a.copy, a.column, a.partial).cmp(&(&b.volume, b.copy, b.column, b.partial))
        });
        Ok(found)
    }
}
