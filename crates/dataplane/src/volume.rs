//! Volume I/O: a volume's logical bytes over its slice files.
//!
//! Layout: the volume is striped over its columns in units of [`STRIPE`]
//! bytes: stripe `s` lives in column `s % columns`, at row `s / columns`.
//! The mapping does not depend on the volume's size, so growing a volume
//! (every column grows) never changes where existing bytes live. Each column
//! has one slice per copy; a write reaches every copy before it returns,
//! a read is served by the first copy that answers.
//!
//! Live moves: while a slice is copied to another medium, writes at offsets
//! the copy has already passed are applied to the target too ("mirrored"),
//! and the copier holds the slice exclusively for each chunk it copies, so a
//! write is either copied by the copier or mirrored, never lost. The final
//! switch runs with the slice's I/O paused.
//!
//! Snapshots: every slice has its copy-on-write snapshots
//! ([`SliceSnapshots`]); each write and discard goes through them. A volume
//! snapshot pauses I/O at one barrier (every request holds it shared, the
//! snapshot exclusively), so no request is torn across it, and snapshots
//! every slice of every copy at that instant.

use crate::digest::{is_zero, CHUNK};
use crate::extents::{DataExtents, BLOCK};
use crate::fsutil::{create_dir_durable, fsync_dir, partial_path, remove_if_exists, RemoveOnDrop};
use crate::throttle::Pacer;
use crate::{CopyOptions, DataPlaneError, LocalMedia, SliceKey, SliceSnapshots};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Striping unit: 1 MiB (a GiB-sized column holds whole stripes).
pub const STRIPE: u64 = 1 << 20;

/// Where a volume's slices are: `media[copy][column]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeLayout {
    pub volume_id: String,
    /// Logical size in bytes.
    pub size: u64,
    pub media: Vec<Vec<String>>,
}

/// A target being filled by a live move.
struct Mirror {
    file: Arc<File>,
    /// Bytes below this offset have been copied; writes there go to the
    /// target as well.
    copied_upto: u64,
}

struct SliceState {
    medium: String,
    file: Arc<File>,
    mirror: Option<Mirror>,
    /// The snapshots of the slice, next to its file (so they change with
    /// the file when a move switches media).
    snapshots: SliceSnapshots,
}

/// One slice file open for I/O.
struct SliceIo {
    key: SliceKey,
    state: RwLock<SliceState>,
    /// Written since the last flush.
    dirty: AtomicBool,
}

impl SliceIo {
    fn read_state(&self) -> io::Result<RwLockReadGuard<'_, SliceState>> {
        self.state
            .read()
            .map_err(|_| io::Error::other("slice lock poisoned"))
    }

    fn write_state(&self) -> io::Result<RwLockWriteGuard<'_, SliceState>> {
        self.state
            .write()
            .map_err(|_| io::Error::other("slice lock poisoned"))
    }
}

/// A volume open for I/O. Shared by every connection to the volume and by
/// the mover, so writes and live moves see each other.
pub trait VolumeIo: Send + Sync + 'static {
    fn volume_id(&self) -> &str;

    /// Logical size in bytes.
    fn size(&self) -> u64;

    /// After a resize: new readers see the new size; bytes stay where they are.
    fn set_size(&self, size: u64);

    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// Writes to every copy; `fua` makes the bytes durable before returning.
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()>;

    /// Deallocates a range on every copy (reads return zeros afterwards).
    fn discard(&self, offset: u64, len: u64, fua: bool) -> io::Result<()>;

    /// Makes every acknowledged write durable.
    fn flush(&self) -> io::Result<()>;

    /// Moves one slice (`copy`, `column`) to `to_medium` while the volume is
    /// in use, keeping every write made meanwhile. `commit` records the new
    /// placement; it runs with the slice's I/O paused, after the target is
    /// complete, verified and durable, and only then does I/O switch to the
    /// target. The source is left for the caller to delete. On any failure
    /// the target is removed and I/O continues on the source.
    fn move_slice(
        &self,
        copy: u32,
        column: u32,
        to_medium: &str,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
        commit: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), DataPlaneError>;

    /// Takes snapshot `id` (ids grow) of every slice of every copy at one
    /// instant: requests in flight finish first, new ones wait. Repeating a
    /// completed snapshot is a no-op; one that an earlier call (or a crash)
    /// left on only some slices is dropped and taken again, whole.
    fn snapshot(&self, _id: u64) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }

    /// Deletes snapshot `id` from every slice (the others stay exact);
    /// missing is fine.
    fn delete_snapshot(&self, _id: u64) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }

    /// Returns the volume's content to snapshot `id` (newer snapshots stay
    /// exact; space the volume grew by since is zeroed). I/O waits meanwhile.
    fn rollback(&self, _id: u64) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }

    /// A read-only view of snapshot `id`, `size` bytes long (the volume's
    /// size when it was taken); writes fail with EROFS.
    fn snapshot_view(self: Arc<Self>, _id: u64, _size: u64) -> io::Result<Arc<dyn VolumeIo>> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

/// A volume of [`LocalMedia`] open for I/O: its slice files, opened once.
pub struct LocalVolumeIo {
    media: LocalMedia,
    volume_id: String,
    size: AtomicU64,
    /// `slices[column][copy]`.
    slices: Vec<Vec<SliceIo>>,
    /// Held shared by every request, exclusively by snapshot and rollback.
    barrier: RwLock<()>,
}

/// A piece of a request that falls in one stripe of one column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Segment {
    column: usize,
    /// Offset inside the column's slice files.
    slice_offset: u64,
    /// Offset inside the request's buffer.
    buf_offset: usize,
    len: usize,
}

/// Splits `[offset, offset + len)` into per-column segments.
/// Reads `buf` at volume `offset` over the stripes of `slices`
/// (`slices[column][copy]`): each piece from the first copy whose `read`
/// succeeds, so one bad copy does not fail a read another copy can serve.
fn read_striped(
    slices: &[Vec<SliceIo>],
    offset: u64,
    buf: &mut [u8],
    read: impl Fn(&SliceState, &mut [u8], u64) -> io::Result<()>,
) -> io::Result<()> {
    for seg in segments(slices.len(), offset, buf.len()) {
        let out = &mut buf[seg.buf_offset..seg.buf_offset + seg.len];
        let mut last = None;
        for slice in &slices[seg.column] {
            let state = slice.read_state()?;
            match read(&state, out, seg.slice_offset) {
                Ok(()) => {
                    last = None;
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        if let Some(e) = last {
            return Err(e);
        }
    }
    Ok(())
}

fn segments(columns: usize, offset: u64, len: usize) -> Vec<Segment> {
    let columns = columns.max(1) as u64;
    let mut out = Vec::new();
    let mut done = 0usize;
    while done < len {
        let at = offset + done as u64;
        let stripe = at / STRIPE;
        let within = at % STRIPE;
        let n = ((STRIPE - within) as usize).min(len - done);
        out.push(Segment {
            column: (stripe % columns) as usize,
            slice_offset: (stripe / columns) * STRIPE + within,
            buf_offset: done,
            len: n,
        });
        done += n;
    }
    out
}

pub(crate) fn punch_hole(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let (Ok(off), Ok(n)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "range too large",
        ));
    };
    // SAFETY: plain syscall on a valid, open descriptor; no memory is passed.
    let r = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            off,
            n,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn open_rw(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

impl LocalVolumeIo {
    /// Opens every slice file of the layout.
    pub fn open(
        media: &LocalMedia,
        layout: &VolumeLayout,
    ) -> Result<LocalVolumeIo, DataPlaneError> {
        let columns = layout.media.first().map_or(0, Vec::len);
        if columns == 0 || layout.media.iter().any(|c| c.len() != columns) {
            return Err(DataPlaneError::Io {
                medium: String::new(),
                slice: layout.volume_id.clone(),
                op: "open",
                source: io::Error::new(io::ErrorKind::InvalidInput, "malformed layout"),
            });
        }
        let mut slices: Vec<Vec<SliceIo>> = (0..columns).map(|_| Vec::new()).collect();
        for (copy, row) in layout.media.iter().enumerate() {
            for (column, medium) in row.iter().enumerate() {
                let key = SliceKey {
                    volume_id: layout.volume_id.clone(),
                    copy: copy as u32,
                    column: column as u32,
                };
                let path = media.slice_path(medium, &key)?;
                let file = open_rw(&path).map_err(|e| DataPlaneError::Io {
                    medium: medium.clone(),
                    slice: label(&key),
                    op: "open",
                    source: e,
                })?;
                let snapshots = SliceSnapshots::open(&path).map_err(|e| DataPlaneError::Io {
                    medium: medium.clone(),
                    slice: label(&key),
                    op: "open snapshots",
                    source: e,
                })?;
                slices[column].push(SliceIo {
                    key,
                    state: RwLock::new(SliceState {
                        medium: medium.clone(),
                        file: Arc::new(file),
                        mirror: None,
                        snapshots,
                    }),
                    dirty: AtomicBool::new(false),
                });
            }
        }
        Ok(LocalVolumeIo {
            media: media.clone(),
            volume_id: layout.volume_id.clone(),
            size: AtomicU64::new(layout.size),
            slices,
            barrier: RwLock::new(()),
        })
    }

    fn pause(&self) -> io::Result<RwLockWriteGuard<'_, ()>> {
        self.barrier
            .write()
            .map_err(|_| io::Error::other("barrier poisoned"))
    }

    fn pass(&self) -> io::Result<RwLockReadGuard<'_, ()>> {
        self.barrier
            .read()
            .map_err(|_| io::Error::other("barrier poisoned"))
    }

    fn all_slices(&self) -> impl Iterator<Item = &SliceIo> {
        self.slices.iter().flatten()
    }

    fn check_range(&self, offset: u64, len: u64) -> io::Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size() => Ok(()),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "request beyond the end of the volume",
            )),
        }
    }
}

impl VolumeIo for LocalVolumeIo {
    fn volume_id(&self) -> &str {
        &self.volume_id
    }

    fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    fn set_size(&self, size: u64) {
        self.size.store(size, Ordering::Release);
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.check_range(offset, buf.len() as u64)?;
        read_striped(&self.slices, offset, buf, |state, out, at| {
            state.file.read_exact_at(out, at)
        })
    }

    /// Writes to every copy; `fua` makes the bytes durable before returning.
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        self.check_range(offset, data.len() as u64)?;
        let _barrier = self.pass()?;
        for seg in segments(self.slices.len(), offset, data.len()) {
            let bytes = &data[seg.buf_offset..seg.buf_offset + seg.len];
            // Every copy saves what its snapshots need before any copy is
            // written: a save that fails (ENOSPC) leaves all copies as they were.
            for slice in &self.slices[seg.column] {
                let state = slice.read_state()?;
                state
                    .snapshots
                    .prepare_write(&state.file, seg.slice_offset, seg.len as u64)?;
            }
            for slice in &self.slices[seg.column] {
                let state = slice.read_state()?;
                state
                    .snapshots
                    .write(&state.file, seg.slice_offset, bytes)?;
                if let Some(m) = &state.mirror {
                    if seg.slice_offset < m.copied_upto {
                        m.file.write_all_at(bytes, seg.slice_offset)?;
                    }
                }
                if fua {
                    state.file.sync_data()?;
                    if let Some(m) = &state.mirror {
                        m.file.sync_data()?;
                    }
                } else {
                    slice.dirty.store(true, Ordering::Release);
                }
            }
        }
        Ok(())
    }

    /// Deallocates a range on every copy (reads return zeros afterwards).
    fn discard(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        self.check_range(offset, len)?;
        let len = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "range too large"))?;
        let _barrier = self.pass()?;
        for seg in segments(self.slices.len(), offset, len) {
            for slice in &self.slices[seg.column] {
                let state = slice.read_state()?;
                state
                    .snapshots
                    .prepare_write(&state.file, seg.slice_offset, seg.len as u64)?;
            }
            for slice in &self.slices[seg.column] {
                let state = slice.read_state()?;
                state
                    .snapshots
                    .discard(&state.file, seg.slice_offset, seg.len as u64)?;
                if let Some(m) = &state.mirror {
                    if seg.slice_offset < m.copied_upto {
                        punch_hole(&m.file, seg.slice_offset, seg.len as u64)?;
                    }
                }
                if fua {
                    state.file.sync_data()?;
                } else {
                    slice.dirty.store(true, Ordering::Release);
                }
            }
        }
        Ok(())
    }

    /// Makes every acknowledged write durable (fsync of the slices written
    /// since the last flush, and of any target being filled).
    fn flush(&self) -> io::Result<()> {
        for column in &self.slices {
            for slice in column {
                if slice.dirty.swap(false, Ordering::AcqRel) {
                    let state = slice.read_state()?;
                    if let Err(e) = state.file.sync_data().and_then(|()| match &state.mirror {
                        Some(m) => m.file.sync_data(),
                        None => Ok(()),
                    }) {
                        slice.dirty.store(true, Ordering::Release);
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }

    fn move_slice(
        &self,
        copy: u32,
        column: u32,
        to_medium: &str,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
        commit: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), DataPlaneError> {
        self.move_slice_to(copy, column, to_medium, options, progress, commit)
    }

    fn snapshot(&self, id: u64) -> io::Result<()> {
        let _paused = self.pause()?;
        let mut have = 0usize;
        let mut total = 0usize;
        for slice in self.all_slices() {
            total += 1;
            if slice
                .read_state()?
                .snapshots
                .list()?
                .iter()
                .any(|s| s.id == id)
            {
                have += 1;
            }
        }
        if have == total {
            return Ok(());
        }
        // Taken on only some slices (an interrupted call): those parts are
        // from another instant, so the snapshot is taken again, whole.
        for slice in self.all_slices() {
            slice.read_state()?.snapshots.delete(id)?;
        }
        for slice in self.all_slices() {
            let state = slice.read_state()?;
            state.snapshots.create(id, &state.file)?;
        }
        Ok(())
    }

    fn delete_snapshot(&self, id: u64) -> io::Result<()> {
        for slice in self.all_slices() {
            slice.read_state()?.snapshots.delete(id)?;
        }
        Ok(())
    }

    fn rollback(&self, id: u64) -> io::Result<()> {
        let _paused = self.pause()?;
        for slice in self.all_slices() {
            if !slice
                .read_state()?
                .snapshots
                .list()?
                .iter()
                .any(|s| s.id == id)
            {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("snapshot {id} is not on slice {}", label(&slice.key)),
                ));
            }
        }
        for slice in self.all_slices() {
            let state = slice.read_state()?;
            state.snapshots.rollback(id, &state.file)?;
        }
        Ok(())
    }

    fn snapshot_view(self: Arc<Self>, id: u64, size: u64) -> io::Result<Arc<dyn VolumeIo>> {
        let columns = self.slices.len() as u64;
        for slice in self.all_slices() {
            let listed = slice.read_state()?.snapshots.list()?;
            let Some(info) = listed.into_iter().find(|s| s.id == id) else {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("snapshot {id} is not on slice {}", label(&slice.key)),
                ));
            };
            if info
                .size
                .checked_mul(columns)
                .is_some_and(|held| size > held)
            {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("snapshot {id} holds less than {size} bytes"),
                ));
            }
        }
        Ok(Arc::new(SnapshotView {
            volume: self,
            id,
            size,
        }))
    }
}

/// A read-only view of one snapshot of a volume (see
/// [`VolumeIo::snapshot_view`]).
struct SnapshotView {
    volume: Arc<LocalVolumeIo>,
    id: u64,
    size: u64,
}

fn read_only() -> io::Error {
    io::Error::from_raw_os_error(libc::EROFS)
}

impl VolumeIo for SnapshotView {
    fn volume_id(&self) -> &str {
        &self.volume.volume_id
    }

    fn size(&self) -> u64 {
        self.size
    }

    /// A snapshot keeps the size it was taken at.
    fn set_size(&self, _size: u64) {}

    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        match offset.checked_add(buf.len() as u64) {
            Some(end) if end <= self.size => {}
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "request beyond the end of the snapshot",
                ))
            }
        }
        read_striped(&self.volume.slices, offset, buf, |state, out, at| {
            state.snapshots.read(self.id, &state.file, at, out)
        })
    }

    fn write(&self, _offset: u64, _data: &[u8], _fua: bool) -> io::Result<()> {
        Err(read_only())
    }

    fn discard(&self, _offset: u64, _len: u64, _fua: bool) -> io::Result<()> {
        Err(read_only())
    }

    fn flush(&self) -> io::Result<()> {
        Ok(())
    }

    fn move_slice(
        &self,
        copy: u32,
        column: u32,
        _to_medium: &str,
        _options: &CopyOptions,
        _progress: &mut dyn FnMut(u64, u64),
        _commit: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), DataPlaneError> {
        Err(DataPlaneError::Io {
            medium: String::new(),
            slice: format!("{}/c{copy}-k{column}", self.volume.volume_id),
            op: "move",
            source: read_only(),
        })
    }
}

impl LocalVolumeIo {
    fn slice(&self, copy: u32, column: u32) -> Result<&SliceIo, DataPlaneError> {
        self.slices
            .get(column as usize)
            .and_then(|c| c.get(copy as usize))
            .ok_or_else(|| DataPlaneError::Io {
                medium: String::new(),
                slice: format!("{}/c{copy}-k{column}", self.volume_id),
                op: "move",
                source: io::Error::new(io::ErrorKind::NotFound, "no such slice"),
            })
    }

    /// Copies the slice's data (mirroring writes behind the copy cursor),
    /// verifies each chunk by reading it back, makes the target durable,
    /// then — with the slice's I/O paused — renames it into place, calls
    /// `commit` and switches the slice's I/O to the target.
    fn move_slice_to(
        &self,
        copy: u32,
        column: u32,
        to_medium: &str,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
        commit: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), DataPlaneError> {
        let slice = self.slice(copy, column)?;
        let from_medium = slice
            .read_state()
            .map_err(|e| self.err(slice, to_medium, "lock", e))?
            .medium
            .clone();
        if from_medium == to_medium {
            return Ok(());
        }
        // Snapshot files do not travel with a moved slice yet.
        let snapshots = slice
            .read_state()
            .map_err(|e| self.err(slice, to_medium, "lock", e))?
            .snapshots
            .list()
            .map_err(|e| self.err(slice, to_medium, "list snapshots", e))?;
        if !snapshots.is_empty() {
            return Err(self.err(
                slice,
                to_medium,
                "move",
                io::Error::new(
                    io::ErrorKind::Unsupported,
                    "the slice has snapshots; moving them is not supported yet",
                ),
            ));
        }
        let target_path = self.media.slice_path(to_medium, &slice.key)?;
        let dir = target_path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        create_dir_durable(&dir).map_err(|e| self.err(slice, to_medium, "mkdir", e))?;
        let partial = partial_path(&target_path);
        let mut guard = RemoveOnDrop::new(&partial);
        let result = self.fill_and_switch(
            slice,
            &target_path,
            &partial,
            &dir,
            to_medium,
            options,
            progress,
            commit,
        );
        // Whatever happened, writes stop going to the target.
        if let Ok(mut state) = slice.state.write() {
            state.mirror = None;
        }
        if result.is_ok() {
            guard.disarm();
        }
        result
    }

    fn err(&self, slice: &SliceIo, medium: &str, op: &'static str, e: io::Error) -> DataPlaneError {
        DataPlaneError::Io {
            medium: medium.to_string(),
            slice: label(&slice.key),
            op,
            source: e,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn fill_and_switch(
        &self,
        slice: &SliceIo,
        target_path: &Path,
        partial: &PathBuf,
        dir: &Path,
        to_medium: &str,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
        commit: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), DataPlaneError> {
        let io_err = |op: &'static str| move |e: io::Error| self.err(slice, to_medium, op, e);
        let target = Arc::new(
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(partial)
                .map_err(io_err("create"))?,
        );
        {
            let mut state = slice.write_state().map_err(io_err("lock"))?;
            let len = state.file.metadata().map_err(io_err("stat"))?.len();
            target.set_len(len).map_err(io_err("create"))?;
            state.mirror = Some(Mirror {
                file: Arc::clone(&target),
                copied_upto: 0,
            });
        }

        // Data to copy, as far as known now (writes may add some).
        let estimate = {
            let state = slice.read_state().map_err(io_err("lock"))?;
            let len = state.file.metadata().map_err(io_err("stat"))?.len();
            DataExtents::new(&state.file, len)
                .filter_map(Result::ok)
                .map(|(a, b)| b - a)
                .sum::<u64>()
        };
        let pacer = Pacer::new(options.rate_limit, &options.cancel);
        let mut src_buf = vec![0u8; CHUNK];
        let mut check_buf = vec![0u8; CHUNK];
        let mut done = 0u64;
        let mut cursor = 0u64;
        loop {
            pacer.check().map_err(|_| DataPlaneError::Cancelled)?;
            // One chunk with the slice held exclusively: no write can slip
            // between reading the source and advancing the cursor.
            let mut state = slice.write_state().map_err(io_err("lock"))?;
            let len = state.file.metadata().map_err(io_err("stat"))?.len();
            let next = {
                let mut extents = DataExtents::from(&state.file, cursor, len);
                extents.next().transpose().map_err(io_err("seek"))?
            };
            let Some((start, end)) = next else {
                if let Some(m) = state.mirror.as_mut() {
                    m.copied_upto = len;
                }
                break;
            };
            let n = ((end - start).min(CHUNK as u64)) as usize;
            let data = &mut src_buf[..n];
            state
                .file
                .read_exact_at(data, start)
                .map_err(io_err("read"))?;
            let mirror = state
                .mirror
                .as_mut()
                .ok_or_else(|| io_err("copy")(io::Error::other("move state lost")))?;
            let mut at = 0usize;
            while at < n {
                let block = (BLOCK as usize).min(n - at);
                let piece = &data[at..at + block];
                if !is_zero(piece) {
                    mirror
                        .file
                        .write_all_at(piece, start + at as u64)
                        .map_err(io_err("write"))?;
                }
                at += block;
            }
            // Verify the chunk against the source bytes just read.
            let check = &mut check_buf[..n];
            mirror
                .file
                .read_exact_at(check, start)
                .map_err(io_err("verify"))?;
            if check != &data[..] {
                return Err(DataPlaneError::VerifyFailed {
                    slice: label(&slice.key),
                    from: state.medium.clone(),
                    to: to_medium.to_string(),
                });
            }
            cursor = start + n as u64;
            mirror.copied_upto = cursor;
            drop(state);
            done += n as u64;
            progress(done, estimate.max(done));
            pacer.pace(done).map_err(|_| DataPlaneError::Cancelled)?;
        }

        // Durable before anyone relies on it; most was written back already.
        target.sync_all().map_err(io_err("fsync"))?;
        let mut state = slice.write_state().map_err(io_err("lock"))?;
        // A snapshot taken during the copy would be left behind.
        if !state
            .snapshots
            .list()
            .map_err(io_err("list snapshots"))?
            .is_empty()
        {
            return Err(io_err("move")(io::Error::new(
                io::ErrorKind::Unsupported,
                "the slice has snapshots; moving them is not supported yet",
            )));
        }
        // Writes that arrived since: mirrored (the cursor is at the end).
        target.sync_all().map_err(io_err("fsync"))?;
        std::fs::rename(partial, target_path).map_err(io_err("rename"))?;
        fsync_dir(dir).map_err(io_err("fsync"))?;
        let snapshots = match SliceSnapshots::open(target_path) {
            Ok(s) => s,
            Err(e) => {
                let _ = remove_if_exists(target_path);
                return Err(io_err("open snapshots")(e));
            }
        };
        if let Err(message) = commit() {
            // The placement did not change: the source stays authoritative.
            let _ = remove_if_exists(target_path);
            return Err(self.err(slice, to_medium, "commit", io::Error::other(message)));
        }
        state.file = target;
        state.snapshots = snapshots;
        state.medium = to_medium.to_string();
        state.mirror = None;
        Ok(())
    }
}

fn label(key: &SliceKey) -> String {
    format!("{}/c{}-k{}", key.volume_id, key.copy, key.column)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::DataPlane;
    use std::thread;

    const MIB: u64 = 1 << 20;

    /// Media m0..m4 in a temp dir; a volume `v` with `copies` × `columns`
    /// slices of `slice_mib` MiB on m0, m1, ...
    fn volume(
        copies: usize,
        columns: usize,
        slice_mib: u64,
    ) -> (tempfile::TempDir, LocalMedia, VolumeLayout) {
        let dir = tempfile::tempdir().expect("temp dir");
        let media =
            LocalMedia::new((0..5).map(|i| (format!("m{i}"), dir.path().join(format!("m{i}")))));
        let mut layout = VolumeLayout {
            volume_id: "v".into(),
            size: columns as u64 * slice_mib * MIB,
            media: Vec::new(),
        };
        let mut next = 0;
        for copy in 0..copies {
            let mut row = Vec::new();
            for column in 0..columns {
                let medium = format!("m{next}");
                next += 1;
                let key = SliceKey {
                    volume_id: "v".into(),
                    copy: copy as u32,
                    column: column as u32,
                };
                media
                    .create_slice(&medium, &key, slice_mib * MIB)
                    .expect("slice");
                row.push(medium);
            }
            layout.media.push(row);
        }
        (dir, media, layout)
    }

    fn pattern(seed: u8, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1)
            .collect()
    }

    #[test]
    fn writes_reach_every_copy_and_read_back_across_stripes() {
        let (_d, media, layout) = volume(2, 2, 4);
        let io = LocalVolumeIo::open(&media, &layout).expect("open");
        let data = pattern(7, (2 * MIB + 4096) as usize);
        io.write(MIB - 2048, &data, false).expect("write");
        io.flush().expect("flush");
        let mut back = vec![0u8; data.len()];
        io.read(MIB - 2048, &mut back).expect("read");
        assert!(back == data);
        // Stripe 0 is in column 0, stripe 1 in column 1, stripe 2 in column 0 row 1.
        for copy in 0..2u32 {
            for (column, off, at) in [
                (0u32, MIB - 2048, 0usize),
                (1, 0, 2048),
                (0, MIB, 2048 + MIB as usize),
            ] {
                let key = SliceKey {
                    volume_id: "v".into(),
                    copy,
                    column,
                };
                let path = media
                    .slice_path(&layout.media[copy as usize][column as usize], &key)
                    .expect("path");
                let file = File::open(path).expect("slice");
                let mut got = vec![0u8; 1024];
                file.read_exact_at(&mut got, off).expect("read slice");
                assert!(got == data[at..at + 1024], "copy {copy} column {column}");
            }
        }
    }

    #[test]
    fn requests_beyond_the_end_are_refused() {
        let (_d, media, layout) = volume(1, 1, 2);
        let io = LocalVolumeIo::open(&media, &layout).expect("open");
        let mut buf = [0u8; 10];
        assert!(io.read(2 * MIB - 5, &mut buf).is_err());
        assert!(io.write(u64::MAX - 2, &buf, false).is_err());
        assert!(io.discard(2 * MIB, 1, false).is_err());
    }

    #[test]
    fn discard_reads_back_as_zeros_on_every_copy() {
        let (_d, media, layout) = volume(2, 1, 2);
        let io = LocalVolumeIo::open(&media, &layout).expect("open");
        io.write(0, &pattern(1, 65536), true).expect("write");
        io.discard(4096, 8192, false).expect("discard");
        let mut back = vec![1u8; 8192];
        io.read(4096, &mut back).expect("read");
        assert!(back.iter().all(|&b| b == 0));
    }

    #[test]
    fn growing_the_volume_keeps_every_byte_where_it_was() {
        let (_d, media, mut layout) = volume(1, 2, 2);
        let io = LocalVolumeIo::open(&media, &layout).expect("open");
        let data = pattern(3, (4 * MIB) as usize);
        io.write(0, &data, false).expect("write");
        for column in 0..2u32 {
            let key = SliceKey {
                volume_id: "v".into(),
                copy: 0,
                column,
            };
            media
                .grow_slice(&layout.media[0][column as usize], &key, 4 * MIB)
                .expect("grow");
        }
        layout.size = 8 * MIB;
        io.set_size(layout.size);
        let reopened = LocalVolumeIo::open(&media, &layout).expect("reopen");
        let mut back = vec![0u8; data.len()];
        reopened.read(0, &mut back).expect("read");
        assert!(back == data);
        reopened
            .write(7 * MIB, &pattern(4, 4096), false)
            .expect("write in the new space");
    }

    #[test]
    fn a_live_move_keeps_every_write_made_during_the_copy() {
        let (_d, media, layout) = volume(1, 1, 64);
        let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
        io.write(0, &pattern(9, (16 * MIB) as usize), false)
            .expect("initial data");
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (io, stop) = (Arc::clone(&io), Arc::clone(&stop));
            thread::spawn(move || {
                let mut written = Vec::new();
                let mut i = 0u64;
                while !stop.load(Ordering::Acquire) {
                    // Spread over the whole slice: before and after the cursor.
                    let off = (i * 7919 * 4096) % (63 * MIB);
                    let data = pattern((i % 251) as u8, 4096);
                    io.write(off, &data, false).expect("write during move");
                    written.push((off, data));
                    i += 1;
                }
                written
            })
        };
        let options = CopyOptions {
            rate_limit: Some(64 * MIB),
            ..CopyOptions::default()
        };
        let mut committed = false;
        io.move_slice(0, 0, "m4", &options, &mut |_, _| {}, &mut || {
            committed = true;
            Ok(())
        })
        .expect("move");
        stop.store(true, Ordering::Release);
        let written = writer.join().expect("writer");
        assert!(committed);
        assert!(written.len() > 10, "the writer ran during the move");
        // Later writes win: replay to find each offset's last value.
        let mut last = std::collections::HashMap::new();
        for (off, data) in &written {
            last.insert(*off, data.clone());
        }
        let key = SliceKey {
            volume_id: "v".into(),
            copy: 0,
            column: 0,
        };
        let target = File::open(media.slice_path("m4", &key).expect("path")).expect("moved slice");
        for (off, data) in &last {
            let mut got = vec![0u8; 4096];
            target.read_exact_at(&mut got, *off).expect("read target");
            assert!(&got == data, "offset {off} lost a write");
            let mut via_io = vec![0u8; 4096];
            io.read(*off, &mut via_io).expect("read via io");
            assert!(&via_io == data);
        }
        assert!(!partial_path(&media.slice_path("m4", &key).expect("path")).exists());
    }

    #[test]
    fn a_refused_commit_leaves_io_on_the_source_and_no_target() {
        let (_d, media, layout) = volume(1, 1, 8);
        let io = LocalVolumeIo::open(&media, &layout).expect("open");
        io.write(0, &pattern(5, 65536), false).expect("write");
        let err = io
            .move_slice(
                0,
                0,
                "m4",
                &CopyOptions::default(),
                &mut |_, _| {},
                &mut || Err("store down".into()),
            )
            .unwrap_err();
        assert!(err.to_string().contains("store down"), "{err}");
        let key = SliceKey {
            volume_id: "v".into(),
            copy: 0,
            column: 0,
        };
        let target = media.slice_path("m4", &key).expect("path");
        assert!(!target.exists() && !partial_path(&target).exists());
        io.write(0, &pattern(6, 4096), false).expect("write after");
        let src = File::open(media.slice_path("m0", &key).expect("path")).expect("source");
        let mut got = vec![0u8; 4096];
        src.read_exact_at(&mut got, 0).expect("read");
        assert!(got == pattern(6, 4096), "I/O still goes to the source");
    }

    fn read_all(io: &dyn VolumeIo) -> Vec<u8> {
        let mut buf = vec![0u8; io.size() as usize];
        io.read(0, &mut buf).expect("read");
        buf
    }

    #[test]
    fn a_snapshot_view_reads_the_volume_as_it_was_while_it_changes() {
        let (_d, media, layout) = volume(2, 2, 4);
        let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
        io.write(MIB - 100, &pattern(1, (3 * MIB) as usize), false)
            .expect("write");
        let before = read_all(io.as_ref());
        io.snapshot(1).expect("snapshot");
        io.snapshot(1).expect("repeated snapshot is a no-op");
        io.write(0, &pattern(2, (5 * MIB) as usize), false)
            .expect("write after");
        io.discard(6 * MIB, MIB, false).expect("discard after");
        let after = read_all(io.as_ref());
        let view = Arc::clone(&io).snapshot_view(1, layout.size).expect("view");
        assert!(read_all(view.as_ref()) == before);
        let err = view.write(0, &[1], false).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EROFS));
        assert_eq!(
            view.discard(0, 1, false).unwrap_err().raw_os_error(),
            Some(libc::EROFS)
        );
        assert!(Arc::clone(&io).snapshot_view(1, layout.size + 1).is_err());
        assert!(Arc::clone(&io).snapshot_view(2, layout.size).is_err());

        // A second snapshot; rolling back to the first keeps the second.
        io.snapshot(2).expect("snapshot 2");
        io.rollback(1).expect("rollback");
        assert!(read_all(io.as_ref()) == before);
        let view2 = Arc::clone(&io)
            .snapshot_view(2, layout.size)
            .expect("view 2");
        assert!(read_all(view2.as_ref()) == after);

        // Reopening the volume finds both; deleting the first keeps the second.
        drop((view, view2));
        drop(io);
        let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("reopen"));
        io.delete_snapshot(1).expect("delete");
        io.delete_snapshot(1).expect("delete again");
        assert!(Arc::clone(&io).snapshot_view(1, layout.size).is_err());
        let view2 = Arc::clone(&io)
            .snapshot_view(2, layout.size)
            .expect("view 2");
        assert!(read_all(view2.as_ref()) == after);
        // Moving a slice with snapshots is refused (its files would stay behind).
        let err = io
            .move_slice(
                0,
                0,
                "m4",
                &CopyOptions::default(),
                &mut |_, _| {},
                &mut || Ok(()),
            )
            .unwrap_err();
        assert!(err.to_string().contains("has snapshots"), "{err}");
        // Deleting the slices removes their snapshot files too.
        io.delete_snapshot(2).expect("delete 2");
        io.snapshot(3).expect("snapshot 3");
        drop((view2, io));
        for (copy, row) in layout.media.iter().enumerate() {
            for (column, medium) in row.iter().enumerate() {
                let key = SliceKey {
                    volume_id: "v".into(),
                    copy: copy as u32,
                    column: column as u32,
                };
                media.delete_slice(medium, &key).expect("delete slice");
                let dir = media.medium_dir(medium).expect("dir").join("v");
                assert!(!dir.exists(), "{} left behind", dir.display());
            }
        }
    }

    #[test]
    fn a_snapshot_left_on_some_slices_is_taken_again_whole() {
        let (_d, media, layout) = volume(1, 2, 2);
        let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
        io.write(0, &pattern(1, (4 * MIB) as usize), false)
            .expect("write");
        // As an interrupted call leaves it: column 0 only, at an older instant.
        let first = &io.slices[0][0];
        let state = first.read_state().expect("state");
        state.snapshots.create(5, &state.file).expect("partial");
        drop(state);
        io.write(0, &pattern(2, (4 * MIB) as usize), false)
            .expect("write");
        let now = read_all(io.as_ref());
        io.snapshot(5).expect("snapshot");
        let view = Arc::clone(&io).snapshot_view(5, layout.size).expect("view");
        assert!(read_all(view.as_ref()) == now);
    }

    #[test]
    fn a_snapshot_taken_during_a_move_fails_the_move_and_stays_exact() {
        let (_d, media, layout) = volume(1, 1, 8);
        let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
        io.write(0, &pattern(1, (8 * MIB) as usize), false)
            .expect("write");
        let before = read_all(io.as_ref());
        let mut taken = false;
        let err = io
            .move_slice(
                0,
                0,
                "m4",
                &CopyOptions::default(),
                &mut |_, _| {
                    if !taken {
                        io.snapshot(1).expect("snapshot during the copy");
                        taken = true;
                    }
                },
                &mut || Ok(()),
            )
            .unwrap_err();
        assert!(taken);
        assert!(err.to_string().contains("has snapshots"), "{err}");
        let key = SliceKey {
            volume_id: "v".into(),
            copy: 0,
            column: 0,
        };
        let target = media.slice_path("m4", &key).expect("path");
        assert!(!target.exists() && !partial_path(&target).exists());
        io.write(0, &pattern(2, 4096), false).expect("write after");
        let view = Arc::clone(&io).snapshot_view(1, layout.size).expect("view");
        assert!(read_all(view.as_ref()) == before);
    }

    #[test]
    fn a_write_whose_save_finds_no_space_reaches_no_copy() {
        let (_d, media, layout) = volume(2, 1, 2);
        let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
        io.write(0, &pattern(1, (2 * MIB) as usize), false)
            .expect("write");
        let before = read_all(io.as_ref());
        io.snapshot(1).expect("snapshot");
        // The second copy's save fails: its first delta write finds no space.
        io.slices[0][1]
            .read_state()
            .expect("state")
            .snapshots
            .inject(Some(crate::snapshot::Fault {
                at: 0,
                crash: false,
                seen: 0,
            }));
        let err = io.write(4096, &pattern(2, 8192), false).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
        for copy in 0..2u32 {
            let key = SliceKey {
                volume_id: "v".into(),
                copy,
                column: 0,
            };
            let path = media
                .slice_path(&layout.media[copy as usize][0], &key)
                .expect("path");
            let file = File::open(path).expect("slice");
            let mut got = vec![0u8; (2 * MIB) as usize];
            file.read_exact_at(&mut got, 0).expect("read slice");
            assert!(got == before, "copy {copy} was written");
        }
        let view = Arc::clone(&io).snapshot_view(1, layout.size).expect("view");
        assert!(read_all(view.as_ref()) == before);
        // With space again the write goes through on both copies.
        io.write(4096, &pattern(2, 8192), false).expect("retry");
        assert!(read_all(view.as_ref()) == before);
    }

    #[test]
    fn no_write_is_torn_across_a_snapshot() {
        let (_d, media, layout) = volume(2, 2, 4);
        let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
        let len = (2 * MIB + 8192) as usize;
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (io, stop) = (Arc::clone(&io), Arc::clone(&stop));
            thread::spawn(move || {
                let mut seed = 0u8;
                while !stop.load(Ordering::Acquire) {
                    seed = seed.wrapping_add(1);
                    // Spans three stripes over both columns and both copies.
                    io.write(MIB - 4096, &pattern(seed, len), false)
                        .expect("write");
                }
            })
        };
        for id in 1..=20u64 {
            io.snapshot(id).expect("snapshot");
            let view = Arc::clone(&io)
                .snapshot_view(id, layout.size)
                .expect("view");
            let mut got = vec![0u8; len];
            view.read(MIB - 4096, &mut got).expect("read");
            let whole = got.iter().all(|&b| b == 0)
                || (0..=255u8)
                    .any(|seed| got[..64] == pattern(seed, 64)[..] && got == pattern(seed, len));
            assert!(whole, "snapshot {id} holds a torn write");
        }
        stop.store(true, Ordering::Release);
        writer.join().expect("writer");
    }

    #[test]
    fn one_column_maps_offsets_unchanged() {
        let s = segments(1, 5 * STRIPE + 7, 100);
        assert_eq!(
            s,
            vec![Segment {
                column: 0,
                slice_offset: 5 * STRIPE + 7,
                buf_offset: 0,
                len: 100
            }]
        );
    }

    #[test]
    fn stripes_rotate_over_columns_and_split_at_boundaries() {
        let s = segments(2, STRIPE - 10, 20 + STRIPE as usize);
        assert_eq!(
            s,
            vec![
                Segment {
                    column: 0,
                    slice_offset: STRIPE - 10,
                    buf_offset: 0,
                    len: 10
                },
                Segment {
                    column: 1,
                    slice_offset: 0,
                    buf_offset: 10,
                    len: STRIPE as usize
                },
                Segment {
                    column: 0,
                    slice_offset: STRIPE,
                    buf_offset: 10 + STRIPE as usize,
                    len: 10
                },
            ]
        );
    }

    #[test]
    fn the_mapping_does_not_depend_on_the_volume_size() {
        // Stripe 7 of a 3-column volume: column 1, row 2 — whatever the size.
        let s = segments(3, 7 * STRIPE + 5, 1);
        assert_eq!(s[0].column, 1);
        assert_eq!(s[0].slice_offset, 2 * STRIPE + 5);
    }
}
