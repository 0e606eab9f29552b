//! Volume I/O: a volume's logical bytes over its slice files.
//!
//! Layout: the volume is striped over its columns in units of [`STRIPE`]
//! bytes: stripe `s` lives in column `s % columns`, at row `s / columns`.
//! The mapping does not depend on the volume's size, so growing a volume
//! (every column grows) never changes where existing bytes live. Each column
//! has one slice per copy; a write reaches every healthy copy before it
//! returns, a read is served by the first healthy copy that answers.
//!
//! Lost slices (degraded I/O): a slice whose medium failed (marked by the
//! service, or [`VolumeIo::fail_medium`]), whose file could not be opened,
//! or whose I/O errored is lost: I/O skips it from then on and its medium is
//! reported by [`DataPlane::failed_media`](crate::DataPlane::failed_media).
//! A request succeeds while every column it touches has a healthy copy that
//! took it; a column without one answers EIO (never zeros). A full medium
//! (ENOSPC) is not a failure: the request fails and the slice stays.
//!
//! Live moves and rebuilds: while a slice is copied to another medium (a
//! move copies the slice itself, a rebuild of a lost slice copies a healthy
//! copy of its column), writes at offsets the copy has already passed are
//! applied to the target too ("mirrored") after the copies are written, and
//! the copier holds the target's slice exclusively for each chunk it copies,
//! so a write is either copied by the copier or mirrored, never lost. The
//! switch to the new slice pauses the volume's writes at the barrier (see
//! below), so no write is half before and half after it. The
//! snapshot files travel too: the older snapshots never change during a copy
//! and the newest only grows (copy-on-write saves append to its map), so
//! they are copied while I/O goes on, then the records appended meanwhile
//! are caught up, the last ones at the switch. Snapshot creation, deletion and rollback are refused while a
//! slice of the volume is copied (the service runs one job per volume).
//!
//! Resumed live copies: a checkpoint covers the target below it (see
//! [`crate::CopyResume`]). Mirrored writes are made durable on the target by
//! every flush and FUA write, as on the source, so what a client made
//! durable below a checkpoint is on the target after a crash. A resumed copy
//! copies again what the volume's writes touched below its checkpoint since
//! the volume was opened (`WrittenChunks`): those made after a restart,
//! before the copy mirrored again.
//!
//! Snapshots: every slice has its copy-on-write snapshots
//! ([`SliceSnapshots`]); each write and discard goes through them. A volume
//! snapshot pauses I/O at one barrier (every request holds it shared, the
//! snapshot exclusively), so no request is torn across it, and snapshots
//! every healthy slice of every copy at that instant.

use crate::digest::{is_zero, CHUNK};
use crate::extents::{allocation, DataExtents, BLOCK};
use crate::fsutil::{create_dir_durable, fsync_dir, partial_path, RemoveOnDrop};
use crate::resume::{data_below, data_from, reopen_partial, Checkpoints};
use crate::snapshot::{delta_name, map_name, remove_snapshot_files};
use crate::throttle::Pacer;
use crate::{CopyOptions, DataPlaneError, LocalMedia, SliceKey, SliceSnapshots, COW_CHUNK};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError};
use std::time::{Duration, Instant};

/// Striping unit: 1 MiB (a GiB-sized column holds whole stripes).
pub const STRIPE: u64 = 1 << 20;

/// Records appended to the newest snapshot's map during a live copy that
/// may be left for the switch (with I/O paused); more are caught up first.
const CATCH_UP_CHUNKS: usize = 16;

/// Catch-up rounds before the switch (under steady writes the tail may never
/// shrink below [`CATCH_UP_CHUNKS`]; the pause then copies what is left).
const CATCH_UP_ROUNDS: usize = 8;

/// Time between two checks by reads that a slice's file is still on its
/// medium (a stat each): the open file of a pulled disk stays readable, so
/// reads alone would not notice it is gone (flushes check every time).
const LINK_CHECK_MS: u64 = 100;

/// Where a volume's slices are: `media[copy][column]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeLayout {
    pub volume_id: String,
    /// Logical size in bytes.
    pub size: u64,
    pub media: Vec<Vec<String>>,
}

/// A run of a volume's bytes of one allocation status (see
/// [`VolumeIo::extents`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub len: u64,
    /// Not allocated where reads come from: reads as zeroes.
    pub hole: bool,
}

/// Appends a run to `extents`, merged into the last one if of equal status.
fn push_extent(extents: &mut Vec<Extent>, len: u64, hole: bool) {
    if len == 0 {
        return;
    }
    match extents.last_mut() {
        Some(last) if last.hole == hole => last.len += len,
        _ => extents.push(Extent { len, hole }),
    }
}

/// A target being filled by a live move or rebuild.
struct Mirror {
    file: Arc<File>,
    medium: String,
    /// Bytes below this offset have been copied; writes there go to the
    /// target as well.
    copied_upto: u64,
    /// A write to the target failed: the copy fails, not the client's write.
    failed: AtomicBool,
    /// Mirrored writes since the last flush: a flush makes them durable on
    /// the target too, so a checkpoint below them stays true after a crash.
    dirty: AtomicBool,
}

/// A slice's open file and snapshots.
struct Live {
    file: Arc<File>,
    /// The snapshots of the slice, next to its file (so they change with
    /// the file when a move switches media).
    snapshots: SliceSnapshots,
}

struct SliceState {
    medium: String,
    /// `None` when the slice could not be opened (it is lost).
    live: Option<Live>,
    mirror: Option<Mirror>,
}

/// The [`CHUNK`]s of a column written (or discarded) since the volume was
/// opened. A copy resumed from a checkpoint copies these again below its
/// checkpoint: writes made before the crash reached its target (mirrored,
/// and fsynced by every flush and by the checkpoint itself), but writes made
/// after the restart and before the resumed copy mirrors again did not.
/// One bit per MiB of the column (128 KiB for a TiB); chunks past the size
/// the volume had when opened (it grew since) are kept as one lowest index.
struct WrittenChunks {
    bits: Vec<AtomicU64>,
    /// Lowest chunk written at or past `bits`' end (u64::MAX: none).
    beyond: AtomicU64,
}

impl WrittenChunks {
    fn new(column_bytes: u64) -> WrittenChunks {
        let chunks = column_bytes.div_ceil(CHUNK as u64);
        WrittenChunks {
            bits: (0..chunks.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            beyond: AtomicU64::new(u64::MAX),
        }
    }

    /// `[offset, offset + len)` of the column was written.
    fn mark(&self, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        let (first, last) = (offset / CHUNK as u64, (offset + len - 1) / CHUNK as u64);
        for chunk in first..=last {
            match self.bits.get((chunk / 64) as usize) {
                Some(word) => {
                    word.fetch_or(1 << (chunk % 64), Ordering::AcqRel);
                }
                None => {
                    self.beyond.fetch_min(chunk, Ordering::AcqRel);
                    return;
                }
            }
        }
    }

    /// Chunks written below `offset`, in order.
    fn below(&self, offset: u64) -> Vec<u64> {
        let end = offset.div_ceil(CHUNK as u64);
        let beyond = self.beyond.load(Ordering::Acquire);
        (0..end)
            .filter(|&chunk| {
                chunk >= beyond
                    || self
                        .bits
                        .get((chunk / 64) as usize)
                        .is_some_and(|word| word.load(Ordering::Acquire) & (1 << (chunk % 64)) != 0)
            })
            .collect()
    }
}

/// One slice file open for I/O.
struct SliceIo {
    key: SliceKey,
    state: RwLock<SliceState>,
    /// Written since the last flush.
    dirty: AtomicBool,
    /// Held by a flush from taking `dirty` until its fsync returned: a
    /// concurrent flush (another connection's) that finds `dirty` clear
    /// must not answer before the fsync that cleared it is done.
    syncing: Mutex<()>,
    /// Its medium failed or its I/O errored: I/O skips it until a rebuild
    /// replaces it.
    lost: AtomicBool,
    /// A live move or rebuild reads or fills it (see [`Busy`]).
    copying: AtomicBool,
    /// When a read last checked the file is linked (ms since the volume was
    /// opened, plus one; 0: never).
    link_checked_ms: AtomicU64,
    /// Test builds: every I/O on the slice fails with EIO, like a dying disk.
    #[cfg(test)]
    broken: AtomicBool,
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

    fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// The slice's file and snapshots if it is healthy.
    fn healthy<'a>(&self, state: &'a SliceState) -> Option<&'a Live> {
        if self.is_lost() {
            return None;
        }
        state.live.as_ref()
    }

    /// Whether I/O may use the slice (takes its lock shared).
    fn usable(&self) -> bool {
        !self.is_lost() && self.state.read().is_ok_and(|s| s.live.is_some())
    }

    /// Fails like a broken disk in tests that ask for it; a no-op otherwise.
    fn fault(&self) -> io::Result<()> {
        #[cfg(test)]
        if self.broken.load(Ordering::Acquire) {
            return Err(eio());
        }
        Ok(())
    }
}

/// EIO, which the NBD server passes on as is.
fn eio() -> io::Error {
    io::Error::from_raw_os_error(libc::EIO)
}

/// Whether an I/O error means the slice's medium failed (as opposed to a
/// full medium or a request the data plane refused).
pub(crate) fn is_media_failure(e: &io::Error) -> bool {
    match e.raw_os_error() {
        Some(code) => ![
            libc::ENOSPC,
            libc::EDQUOT,
            libc::EFBIG,
            libc::EINVAL,
            libc::EROFS,
            libc::EINTR,
        ]
        .contains(&code),
        // A short read: the file was cut under us.
        None => e.kind() == io::ErrorKind::UnexpectedEof,
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

    /// Reads from the first healthy copy of each column; a copy whose read
    /// fails is lost and the next one is tried. EIO when no copy can serve.
    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// Writes to every healthy copy; `fua` makes the bytes durable before
    /// returning. A copy whose write fails is lost; EIO unless a healthy
    /// copy of every touched column took it.
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()>;

    /// Deallocates a range on every healthy copy (reads return zeros
    /// afterwards); failures as for `write`.
    fn discard(&self, offset: u64, len: u64, fua: bool) -> io::Result<()>;

    /// Makes every acknowledged write durable; failures as for `write`.
    /// Covers every write acknowledged before it was called, whoever made
    /// it (all connections to a volume share one `VolumeIo`).
    fn flush(&self) -> io::Result<()>;

    /// Allocation of `[offset, offset + len)` as seen by reads: extents in
    /// order from `offset`, covering the range (neighbours of equal status
    /// merged). A hole reads as zeroes. Default: all data.
    fn extents(&self, offset: u64, len: u64) -> io::Result<Vec<Extent>> {
        let _ = offset;
        Ok(vec![Extent { len, hole: false }])
    }

    /// A hint that `[offset, offset + len)` will be read soon. Default: none.
    fn cache(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }

    /// Moves one slice (`copy`, `column`) to `to_medium` while the volume is
    /// in use, keeping every write made meanwhile; its snapshot files move
    /// with it. `commit` records the new placement; it runs with the slice's
    /// I/O paused, after the target is complete, verified and durable, and
    /// only then does I/O switch to the target. The source is left for the
    /// caller to delete. On any failure the target is removed and I/O
    /// continues on the source; a copy stopped by `options.cancel` keeps a
    /// checkpointed target for a resume (see [`crate::CopyResume`]).
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
    ///
    /// This, `delete_snapshot` and `rollback` skip lost slices (a rebuild
    /// brings a healthy copy's snapshots), and answer `ResourceBusy` while a
    /// slice of the volume is moved or rebuilt.
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

    /// Stops using every slice of this volume on `medium` (now lost). Idempotent.
    fn fail_medium(&self, _medium: &str) {}

    /// (copy, column) pairs whose slice is lost (its medium failed or its I/O errored).
    fn lost_slices(&self) -> Vec<(u32, u32)> {
        Vec::new()
    }

    /// Rebuilds the lost slice (copy, column) on `to_medium` from a healthy copy of the same column, including that
    /// copy's snapshot files, while the volume stays in use (writes made meanwhile reach the new slice, like a live move),
    /// throttled by options.rate_limit, verified against the source copy, durable; then `commit` runs with the slice's
    /// I/O paused and only then I/O uses the new slice. On failure the target files are removed.
    /// Error (DataPlaneError, not transient) when no healthy copy of the column exists.
    fn rebuild_slice(
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
            slice: format!("{}/c{copy}-k{column}", self.volume_id()),
            op: "rebuild",
            source: io::Error::from(io::ErrorKind::Unsupported),
        })
    }
}

/// A volume of [`LocalMedia`] open for I/O: its slice files, opened once.
pub struct LocalVolumeIo {
    media: LocalMedia,
    volume_id: String,
    size: AtomicU64,
    /// `slices[column][copy]`.
    slices: Vec<Vec<SliceIo>>,
    /// `written[column]`: what was written since the volume was opened.
    written: Vec<WrittenChunks>,
    /// Held shared by every request, exclusively by snapshot and rollback.
    barrier: RwLock<()>,
    /// Held shared by every live move and rebuild; snapshot creation,
    /// deletion and rollback need it exclusively (and are refused while a
    /// copy holds it: they would change the files being copied).
    copies: RwLock<()>,
    /// Clock of the reads' link checks.
    opened: Instant,
    /// Test builds: a pause between writing the copies and their mirrors,
    /// which widens the window a switch must not fall into.
    #[cfg(test)]
    phase_gap_us: AtomicU64,
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

/// Hints the kernel to read `[offset, offset + len)` of `file` ahead.
fn will_need(file: &File, offset: u64, len: u64) {
    let (Ok(off), Ok(n)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return;
    };
    // SAFETY: plain syscall on a valid, open descriptor; no memory is passed.
    // Only a hint: its result is ignored.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), off, n, libc::POSIX_FADV_WILLNEED);
    }
}

fn open_rw(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

/// What a write-like request does to each copy.
#[derive(Clone, Copy)]
enum Change<'a> {
    Write(&'a [u8]),
    Discard,
}

impl LocalVolumeIo {
    /// Opens every slice file of the layout. Slices on media marked failed
    /// and slices whose files cannot be opened are lost, not an error.
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
                let live = open_live(media, medium, &key);
                slices[column].push(SliceIo {
                    key,
                    lost: AtomicBool::new(live.is_none()),
                    state: RwLock::new(SliceState {
                        medium: medium.clone(),
                        live,
                        mirror: None,
                    }),
                    dirty: AtomicBool::new(false),
                    syncing: Mutex::new(()),
                    copying: AtomicBool::new(false),
                    link_checked_ms: AtomicU64::new(0),
                    #[cfg(test)]
                    broken: AtomicBool::new(false),
                });
            }
        }
        let column_bytes = layout.size.div_ceil(STRIPE * columns as u64) * STRIPE;
        Ok(LocalVolumeIo {
            media: media.clone(),
            volume_id: layout.volume_id.clone(),
            size: AtomicU64::new(layout.size),
            slices,
            written: (0..columns)
                .map(|_| WrittenChunks::new(column_bytes))
                .collect(),
            barrier: RwLock::new(()),
            copies: RwLock::new(()),
            opened: Instant::now(),
            #[cfg(test)]
            phase_gap_us: AtomicU64::new(0),
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

    /// Excludes live copies for a snapshot operation, or refuses it.
    fn no_copies(&self) -> io::Result<RwLockWriteGuard<'_, ()>> {
        match self.copies.try_write() {
            Ok(guard) => Ok(guard),
            Err(TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::ResourceBusy,
                format!(
                    "a slice of volume {} is being moved or rebuilt; try again when it is done",
                    self.volume_id
                ),
            )),
            Err(TryLockError::Poisoned(_)) => Err(io::Error::other("copy lock poisoned")),
        }
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

    /// Stops using a slice whose I/O failed and reports its medium.
    fn lose(&self, slice: &SliceIo, medium: &str, e: &io::Error) {
        if !slice.lost.swap(true, Ordering::AcqRel) {
            tracing::warn!(slice = %label(&slice.key), medium, error = %e,
                "slice I/O failed; the slice is lost and I/O goes on with the other copies");
        }
        self.media.saw_io_error(medium, e);
    }

    /// Fails unless the slice's file is still where it belongs (a medium
    /// whose directory went away keeps open files readable, but nothing
    /// written to them survives).
    fn check_linked(&self, slice: &SliceIo, state: &SliceState, live: &Live) -> io::Result<()> {
        let Ok(path) = self.media.slice_path(&state.medium, &slice.key) else {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        };
        let on_disk = std::fs::metadata(path)?;
        let open = live.file.metadata()?;
        if (on_disk.dev(), on_disk.ino()) != (open.dev(), open.ino()) {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        Ok(())
    }

    /// [`LocalVolumeIo::check_linked`] at most every [`LINK_CHECK_MS`] per slice.
    fn linked_lately(&self, slice: &SliceIo, state: &SliceState, live: &Live) -> io::Result<()> {
        let now = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX - 1) + 1;
        let last = slice.link_checked_ms.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < LINK_CHECK_MS {
            return Ok(());
        }
        slice.link_checked_ms.store(now, Ordering::Relaxed);
        self.check_linked(slice, state, live)
    }

    /// Runs `serve` for each stripe segment of `[offset, offset + len)` on
    /// the copy a read uses: the first healthy copy whose call succeeds; a
    /// copy that fails with a media error is lost and the next one is
    /// tried. EIO when no copy of a column can serve.
    fn on_serving_copies(
        &self,
        offset: u64,
        len: usize,
        mut serve: impl FnMut(&Live, &Segment) -> io::Result<()>,
    ) -> io::Result<()> {
        for seg in segments(self.slices.len(), offset, len) {
            let mut served = false;
            for slice in &self.slices[seg.column] {
                // A lost slice being rebuilt is held by the copier chunk by
                // chunk: not waiting for it keeps reads smooth.
                if slice.is_lost() {
                    continue;
                }
                let state = slice.read_state()?;
                let Some(live) = slice.healthy(&state) else {
                    continue;
                };
                let served_here = slice
                    .fault()
                    .and_then(|()| self.linked_lately(slice, &state, live))
                    .and_then(|()| serve(live, &seg));
                match served_here {
                    Ok(()) => {
                        served = true;
                        break;
                    }
                    Err(e) if is_media_failure(&e) => self.lose(slice, &state.medium, &e),
                    Err(e) => return Err(e),
                }
            }
            if !served {
                return Err(eio());
            }
        }
        Ok(())
    }

    /// Reads `buf` at volume `offset` over the stripes (see
    /// [`LocalVolumeIo::on_serving_copies`]).
    fn read_copies(
        &self,
        offset: u64,
        buf: &mut [u8],
        read: impl Fn(&Live, &mut [u8], u64) -> io::Result<()>,
    ) -> io::Result<()> {
        self.on_serving_copies(offset, buf.len(), |live, seg| {
            read(
                live,
                &mut buf[seg.buf_offset..seg.buf_offset + seg.len],
                seg.slice_offset,
            )
        })
    }

    /// The allocation of `[offset, offset + len)` where reads come from,
    /// each segment's runs given by `runs(live, slice_offset, len)`.
    fn extents_with(
        &self,
        offset: u64,
        len: u64,
        runs: impl Fn(&Live, u64, u64) -> io::Result<Vec<(u64, bool)>>,
    ) -> io::Result<Vec<Extent>> {
        let len = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "range too large"))?;
        let mut extents = Vec::new();
        self.on_serving_copies(offset, len, |live, seg| {
            // A slice file is never shorter than the volume: one that was
            // cut lost data, which must not be shown as holes (zeros).
            if live.file.metadata()?.len() < seg.slice_offset + seg.len as u64 {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
            }
            // Collected first: a copy that fails half way adds nothing.
            for (n, hole) in runs(live, seg.slice_offset, seg.len as u64)? {
                push_extent(&mut extents, n, hole);
            }
            Ok(())
        })?;
        Ok(extents)
    }

    /// A write or discard on every healthy copy (see [`VolumeIo::write`]).
    fn change(&self, offset: u64, len: usize, fua: bool, change: Change<'_>) -> io::Result<()> {
        let _barrier = self.pass()?;
        let segs = segments(self.slices.len(), offset, len);
        // A column without a healthy copy fails the request before any
        // copy is written.
        if segs
            .iter()
            .any(|seg| !self.slices[seg.column].iter().any(SliceIo::usable))
        {
            return Err(eio());
        }
        for seg in segs {
            let column = &self.slices[seg.column];
            let seg_len = seg.len as u64;
            // Before any copy is written: a copy that misses this write's
            // mirror (it starts mirroring later) finds it here.
            self.written[seg.column].mark(seg.slice_offset, seg_len);
            // Every copy saves what its snapshots need before any copy is
            // written: a save that fails (ENOSPC) leaves all copies as they were.
            for slice in column {
                if slice.is_lost() {
                    continue;
                }
                let state = slice.read_state()?;
                let Some(live) = slice.healthy(&state) else {
                    continue;
                };
                if let Err(e) = slice.fault().and_then(|()| {
                    live.snapshots
                        .prepare_write(&live.file, seg.slice_offset, seg_len)
                }) {
                    if !is_media_failure(&e) {
                        return Err(e);
                    }
                    self.lose(slice, &state.medium, &e);
                }
            }
            let mut took = 0usize;
            for slice in column {
                if slice.is_lost() {
                    continue;
                }
                let state = slice.read_state()?;
                let Some(live) = slice.healthy(&state) else {
                    continue;
                };
                let done = slice
                    .fault()
                    .and_then(|()| match change {
                        Change::Write(data) => live.snapshots.write(
                            &live.file,
                            seg.slice_offset,
                            &data[seg.buf_offset..seg.buf_offset + seg.len],
                        ),
                        Change::Discard => {
                            live.snapshots
                                .discard(&live.file, seg.slice_offset, seg_len)
                        }
                    })
                    .and_then(|()| if fua { live.file.sync_data() } else { Ok(()) });
                match done {
                    Ok(()) => {
                        took += 1;
                        if !fua {
                            slice.dirty.store(true, Ordering::Release);
                        }
                    }
                    Err(e) if is_media_failure(&e) => self.lose(slice, &state.medium, &e),
                    Err(e) => return Err(e),
                }
            }
            #[cfg(test)]
            {
                let gap = self.phase_gap_us.load(Ordering::Relaxed);
                if gap > 0 {
                    std::thread::sleep(std::time::Duration::from_micros(gap));
                }
            }
            // Targets of live moves and rebuilds, after every copy they are
            // filled from was written (see `fill_and_switch`).
            for slice in column {
                let state = slice.read_state()?;
                let Some(m) = &state.mirror else { continue };
                if seg.slice_offset >= m.copied_upto {
                    continue;
                }
                let mirrored = match change {
                    Change::Write(data) => m.file.write_all_at(
                        &data[seg.buf_offset..seg.buf_offset + seg.len],
                        seg.slice_offset,
                    ),
                    Change::Discard => punch_hole(&m.file, seg.slice_offset, seg_len),
                }
                .and_then(|()| {
                    if fua {
                        m.file.sync_data()
                    } else {
                        m.dirty.store(true, Ordering::Release);
                        Ok(())
                    }
                });
                if let Err(e) = mirrored {
                    tracing::warn!(slice = %label(&slice.key), error = %e, "write to a copy's target failed; the copy will fail");
                    m.failed.store(true, Ordering::Release);
                }
            }
            if took == 0 {
                return Err(eio());
            }
        }
        Ok(())
    }
}

/// Opens a slice's file and snapshots; `None` (the slice is lost) when its
/// medium is marked failed or they cannot be opened.
fn open_live(media: &LocalMedia, medium: &str, key: &SliceKey) -> Option<Live> {
    if media.is_marked_failed(medium) {
        return None;
    }
    let opened = media.slice_path(medium, key).and_then(|path| {
        let open = |op: &'static str| {
            move |source: io::Error| DataPlaneError::Io {
                medium: medium.to_string(),
                slice: label(key),
                op,
                source,
            }
        };
        let file = open_rw(&path).map_err(open("open"))?;
        let account = media.space_account(medium)?;
        let snapshots =
            SliceSnapshots::open_accounted(&path, account).map_err(open("open snapshots"))?;
        Ok(Live {
            file: Arc::new(file),
            snapshots,
        })
    });
    match opened {
        Ok(live) => {
            media.saw_present(medium);
            Some(live)
        }
        Err(e) => {
            if let DataPlaneError::Io { source, .. } = &e {
                if source.kind() != io::ErrorKind::NotFound && is_media_failure(source) {
                    media.saw_failure(medium);
                }
            }
            tracing::warn!(error = %e, "slice cannot be opened; it is lost");
            None
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
        self.read_copies(offset, buf, |live, out, at| {
            live.file.read_exact_at(out, at)
        })
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        self.check_range(offset, data.len() as u64)?;
        self.change(offset, data.len(), fua, Change::Write(data))
    }

    fn discard(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        self.check_range(offset, len)?;
        let len = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "range too large"))?;
        self.change(offset, len, fua, Change::Discard)
    }

    /// From the slice files' holes (SEEK_HOLE / SEEK_DATA): one `lseek`
    /// per stripe segment when it is all data.
    fn extents(&self, offset: u64, len: u64) -> io::Result<Vec<Extent>> {
        self.check_range(offset, len)?;
        self.extents_with(offset, len, |live, at, n| allocation(&live.file, at, n))
    }

    /// Starts reading the range into the page cache (`POSIX_FADV_WILLNEED`
    /// on the copies reads use).
    fn cache(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check_range(offset, len)?;
        let len = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "range too large"))?;
        self.on_serving_copies(offset, len, |live, seg| {
            will_need(&live.file, seg.slice_offset, seg.len as u64);
            Ok(())
        })
    }

    /// Makes every acknowledged write durable (fsync of the healthy slices
    /// written since the last flush); a slice whose fsync fails, or whose
    /// file is no longer on its medium, is lost.
    fn flush(&self) -> io::Result<()> {
        for column in &self.slices {
            for slice in column {
                // A copy's target holds acknowledged writes below its
                // checkpoint that a resumed copy does not copy again: they
                // are made durable there too (a rebuild's target belongs to
                // a lost slice, so this comes first). Only a slice claimed
                // by a copy has one: the others are not locked for it.
                if slice.copying.load(Ordering::Acquire) {
                    let state = slice.read_state()?;
                    if let Some(m) = state.mirror.as_ref() {
                        // As below: a concurrent flush must not answer
                        // before this sync has made the writes durable.
                        let _syncing = slice.syncing.lock().unwrap_or_else(|p| p.into_inner());
                        if m.dirty.swap(false, Ordering::AcqRel) {
                            if let Err(e) = m.file.sync_data() {
                                tracing::warn!(slice = %label(&slice.key), error = %e,
                                    "flush of a copy's target failed; the copy will fail");
                                m.failed.store(true, Ordering::Release);
                            }
                        }
                    }
                }
                if slice.is_lost() {
                    continue;
                }
                let state = slice.read_state()?;
                let Some(live) = slice.healthy(&state) else {
                    continue;
                };
                let synced = self
                    .check_linked(slice, &state, live)
                    .and_then(|()| slice.fault())
                    .and_then(|()| {
                        // A poisoned lock guards nothing but ordering.
                        let _syncing = slice.syncing.lock().unwrap_or_else(|p| p.into_inner());
                        if slice.dirty.swap(false, Ordering::AcqRel) {
                            live.file.sync_data().inspect_err(|_| {
                                slice.dirty.store(true, Ordering::Release);
                            })
                        } else {
                            Ok(())
                        }
                    });
                match synced {
                    Ok(()) => {}
                    Err(e) if is_media_failure(&e) => self.lose(slice, &state.medium, &e),
                    Err(e) => return Err(e),
                }
            }
            if !column.iter().any(SliceIo::usable) {
                return Err(eio());
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
        let slice = self.slice(copy, column)?;
        let from_medium = slice
            .read_state()
            .map_err(|e| self.err(slice, to_medium, "lock", e))?
            .medium
            .clone();
        if from_medium == to_medium {
            return Ok(());
        }
        if !slice.usable() {
            return Err(self.err(
                slice,
                to_medium,
                "move",
                io::Error::new(
                    io::ErrorKind::NotFound,
                    "the slice is lost; rebuild it instead of moving it",
                ),
            ));
        }
        self.copy_to(slice, slice, to_medium, options, progress, commit)
    }

    fn snapshot(&self, id: u64) -> io::Result<()> {
        let _no_copies = self.no_copies()?;
        let _paused = self.pause()?;
        let mut have = 0usize;
        let mut total = 0usize;
        for slice in self.all_slices() {
            let state = slice.read_state()?;
            let Some(live) = slice.healthy(&state) else {
                continue;
            };
            total += 1;
            if live.snapshots.list()?.iter().any(|s| s.id == id) {
                have += 1;
            }
        }
        if have == total {
            return Ok(());
        }
        // Taken on only some slices (an interrupted call): those parts are
        // from another instant, so the snapshot is taken again, whole.
        for slice in self.all_slices() {
            let state = slice.read_state()?;
            if let Some(live) = slice.healthy(&state) {
                live.snapshots.delete(id)?;
            }
        }
        for slice in self.all_slices() {
            let state = slice.read_state()?;
            if let Some(live) = slice.healthy(&state) {
                live.snapshots.create(id, &live.file)?;
            }
        }
        Ok(())
    }

    fn delete_snapshot(&self, id: u64) -> io::Result<()> {
        let _no_copies = self.no_copies()?;
        for slice in self.all_slices() {
            let state = slice.read_state()?;
            if let Some(live) = slice.healthy(&state) {
                live.snapshots.delete(id)?;
            }
        }
        Ok(())
    }

    fn rollback(&self, id: u64) -> io::Result<()> {
        let _no_copies = self.no_copies()?;
        let _paused = self.pause()?;
        for slice in self.all_slices() {
            let state = slice.read_state()?;
            let Some(live) = slice.healthy(&state) else {
                continue;
            };
            if !live.snapshots.list()?.iter().any(|s| s.id == id) {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("snapshot {id} is not on slice {}", label(&slice.key)),
                ));
            }
        }
        for slice in self.all_slices() {
            let state = slice.read_state()?;
            if let Some(live) = slice.healthy(&state) {
                live.snapshots.rollback(id, &live.file)?;
            }
        }
        Ok(())
    }

    fn snapshot_view(self: Arc<Self>, id: u64, size: u64) -> io::Result<Arc<dyn VolumeIo>> {
        let columns = self.slices.len() as u64;
        for slice in self.all_slices() {
            let state = slice.read_state()?;
            let Some(live) = slice.healthy(&state) else {
                continue;
            };
            let listed = live.snapshots.list()?;
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

    fn fail_medium(&self, medium: &str) {
        for slice in self.all_slices() {
            let Ok(state) = slice.read_state() else {
                slice.lost.store(true, Ordering::Release);
                continue;
            };
            if state.medium == medium {
                slice.lost.store(true, Ordering::Release);
            }
            if let Some(m) = state.mirror.as_ref().filter(|m| m.medium == medium) {
                m.failed.store(true, Ordering::Release);
            }
        }
    }

    fn lost_slices(&self) -> Vec<(u32, u32)> {
        let mut lost = Vec::new();
        for slice in self.all_slices() {
            if let Ok(state) = slice.read_state() {
                if let Some(live) = slice.healthy(&state) {
                    match self.check_linked(slice, &state, live) {
                        Err(e) if is_media_failure(&e) => self.lose(slice, &state.medium, &e),
                        _ => continue,
                    }
                }
            }
            if slice.is_lost() {
                lost.push((slice.key.copy, slice.key.column));
            }
        }
        lost.sort_unstable();
        lost
    }

    fn rebuild_slice(
        &self,
        copy: u32,
        column: u32,
        to_medium: &str,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
        commit: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), DataPlaneError> {
        let holder = self.slice(copy, column)?;
        let medium = holder
            .read_state()
            .map_err(|e| self.err(holder, to_medium, "lock", e))?
            .medium
            .clone();
        if holder.usable() && medium == to_medium {
            return Ok(()); // rebuilt already (a repeated call)
        }
        let source = self.slices[column as usize]
            .iter()
            .find(|s| s.key.copy != copy && s.usable())
            .ok_or_else(|| {
                self.err(
                    holder,
                    to_medium,
                    "rebuild",
                    io::Error::new(
                        io::ErrorKind::NotFound,
                        format!(
                            "no healthy copy of column {column} of volume {} to rebuild from",
                            self.volume_id
                        ),
                    ),
                )
            })?;
        // The caller says the slice is lost: I/O stops using it now.
        holder.lost.store(true, Ordering::Release);
        self.copy_to(source, holder, to_medium, options, progress, commit)
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

impl SnapshotView {
    fn check_range(&self, offset: u64, len: u64) -> io::Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "request beyond the end of the snapshot",
            )),
        }
    }
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
        self.check_range(offset, buf.len() as u64)?;
        self.volume.read_copies(offset, buf, |live, out, at| {
            live.snapshots.read(self.id, &live.file, at, out)
        })
    }

    /// A chunk a snapshot holds is data (or a hole when saved as zeroes);
    /// the rest is the live slices' allocation.
    fn extents(&self, offset: u64, len: u64) -> io::Result<Vec<Extent>> {
        self.check_range(offset, len)?;
        self.volume.extents_with(offset, len, |live, at, n| {
            live.snapshots.allocation(self.id, &live.file, at, n)
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

    fn lost_slices(&self) -> Vec<(u32, u32)> {
        self.volume.lost_slices()
    }
}

/// The snapshot files of a slice being copied while in use (see the module
/// docs): map bytes are fetched from the source's durable maps, the chunks
/// they name are copied from its deltas, each piece verified by reading it
/// back, all into `*.partial` files placed by [`SnapshotCopy::finish`].
struct SnapshotCopy {
    files: Vec<SnapshotFiles>,
    buf: Vec<u8>,
    check: Vec<u8>,
}

struct SnapshotFiles {
    id: u64,
    delta: File,
    map: File,
    /// Bytes of the source's map copied so far.
    map_len: u64,
    /// Chunks that copied map records put in the delta, not copied yet.
    pending: Vec<u64>,
    delta_part: RemoveOnDrop,
    map_part: RemoveOnDrop,
    delta_final: PathBuf,
    map_final: PathBuf,
}

fn create_partial(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
}

fn copy_differs(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{what} read back differs from the source"),
    )
}

impl SnapshotCopy {
    /// Creates the partial files for every snapshot of `snaps`, named for
    /// the slice `<stem>.slice` in `dir`.
    fn start(snaps: &SliceSnapshots, dir: &Path, stem: &str) -> io::Result<SnapshotCopy> {
        let mut files = Vec::new();
        for id in snaps.ids()? {
            let delta_final = dir.join(delta_name(stem, id));
            let map_final = dir.join(map_name(stem, id));
            let delta_part = RemoveOnDrop::new(partial_path(&delta_final));
            let delta = create_partial(delta_part.path())?;
            let map_part = RemoveOnDrop::new(partial_path(&map_final));
            let map = create_partial(map_part.path())?;
            files.push(SnapshotFiles {
                id,
                delta,
                map,
                map_len: 0,
                pending: Vec::new(),
                delta_part,
                map_part,
                delta_final,
                map_final,
            });
        }
        Ok(SnapshotCopy {
            files,
            buf: vec![0u8; COW_CHUNK as usize],
            check: vec![0u8; COW_CHUNK as usize],
        })
    }

    /// Appends the map records the source made durable since the last
    /// fetch; returns how many chunks they added to copy.
    fn fetch(&mut self, snaps: &SliceSnapshots) -> io::Result<usize> {
        let mut added = 0;
        for f in &mut self.files {
            let tail = snaps.map_since(f.id, f.map_len)?;
            if tail.bytes.is_empty() {
                continue;
            }
            f.map.write_all_at(&tail.bytes, f.map_len)?;
            let mut back = vec![0u8; tail.bytes.len()];
            f.map.read_exact_at(&mut back, f.map_len)?;
            if back != tail.bytes {
                return Err(copy_differs("snapshot map"));
            }
            f.map_len = tail.end;
            added += tail.data_chunks.len();
            f.pending.extend(tail.data_chunks);
        }
        Ok(added)
    }

    /// Copies up to `limit` pending chunks; returns the bytes copied.
    fn copy_pending(&mut self, snaps: &SliceSnapshots, limit: usize) -> io::Result<u64> {
        let mut copied = 0usize;
        for f in &mut self.files {
            while copied < limit {
                let Some(chunk) = f.pending.pop() else { break };
                let at = chunk * COW_CHUNK;
                snaps.read_delta_chunk(f.id, chunk, &mut self.buf)?;
                for (i, block) in self.buf.chunks(BLOCK as usize).enumerate() {
                    if !is_zero(block) {
                        f.delta.write_all_at(block, at + (i as u64) * BLOCK)?;
                    }
                }
                let mut done = 0;
                while done < self.check.len() {
                    match f.delta.read_at(&mut self.check[done..], at + done as u64)? {
                        0 => break,
                        n => done += n,
                    }
                }
                self.check[done..].fill(0);
                if self.check != self.buf {
                    return Err(copy_differs("snapshot delta"));
                }
                copied += 1;
            }
        }
        Ok(copied as u64 * COW_CHUNK)
    }

    /// Makes every file durable and renames it into place, deltas before
    /// maps (a map makes its snapshot exist). The placed files are removed
    /// when the returned guards drop, unless disarmed.
    fn finish(self, dir: &Path) -> io::Result<Vec<RemoveOnDrop>> {
        for f in &self.files {
            f.delta.sync_all()?;
            f.map.sync_all()?;
        }
        let (deltas, maps): (Vec<_>, Vec<_>) = self
            .files
            .into_iter()
            .map(|f| ((f.delta_part, f.delta_final), (f.map_part, f.map_final)))
            .unzip();
        let mut placed = Vec::new();
        for (mut part, final_path) in deltas.into_iter().chain(maps) {
            std::fs::rename(part.path(), &final_path)?;
            part.disarm();
            placed.push(RemoveOnDrop::new(final_path));
        }
        fsync_dir(dir)?;
        Ok(placed)
    }
}

/// A slice claimed by a live copy (as its source or its target) until dropped.
struct Busy<'a>(&'a SliceIo);

impl<'a> Busy<'a> {
    fn claim(slice: &'a SliceIo) -> io::Result<Busy<'a>> {
        if slice.copying.swap(true, Ordering::AcqRel) {
            return Err(io::Error::new(
                io::ErrorKind::ResourceBusy,
                format!("slice {} is already being copied", label(&slice.key)),
            ));
        }
        Ok(Busy(slice))
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.copying.store(false, Ordering::Release);
    }
}

/// The file and snapshots of the slice a copy reads from.
fn healthy_source<'a>(source: &SliceIo, state: &'a SliceState) -> io::Result<&'a Live> {
    source.healthy(state).ok_or_else(source_lost)
}

fn source_lost() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        "the copy being read from was lost during the copy",
    )
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

    fn err(&self, slice: &SliceIo, medium: &str, op: &'static str, e: io::Error) -> DataPlaneError {
        DataPlaneError::Io {
            medium: medium.to_string(),
            slice: label(&slice.key),
            op,
            source: e,
        }
    }

    /// Fills a new file for `holder` on `to_medium` from `source` (the same
    /// slice for a move, a healthy copy of its column for a rebuild) while
    /// I/O goes on, then switches `holder` to it (see `fill_and_switch`).
    /// Whatever happens, writes stop going to the target afterwards.
    fn copy_to(
        &self,
        source: &SliceIo,
        holder: &SliceIo,
        to_medium: &str,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
        commit: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), DataPlaneError> {
        let _copying = self.copies.read().map_err(|_| {
            self.err(
                holder,
                to_medium,
                "lock",
                io::Error::other("copy lock poisoned"),
            )
        })?;
        // One copy at a time reads or fills a slice: a rebuild reading a
        // slice that a move switches away would miss the writes after it.
        let _source = Busy::claim(source).map_err(|e| self.err(holder, to_medium, "copy", e))?;
        let _holder = if std::ptr::eq(source, holder) {
            None
        } else {
            Some(Busy::claim(holder).map_err(|e| self.err(holder, to_medium, "copy", e))?)
        };
        let target_path = self.media.slice_path(to_medium, &holder.key)?;
        let dir = target_path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        create_dir_durable(&dir).map_err(|e| self.err(holder, to_medium, "mkdir", e))?;
        // Snapshot files of an earlier, interrupted copy must not mix with
        // this one's.
        remove_snapshot_files(&target_path, false)
            .map_err(|e| self.err(holder, to_medium, "delete", e))?;
        let result = self.fill_and_switch(
            source,
            holder,
            &target_path,
            &dir,
            to_medium,
            options,
            progress,
            commit,
        );
        // Snapshot files came to the target (or went again on failure).
        self.media.snapshot_files_changed(to_medium);
        if let Ok(mut state) = holder.state.write() {
            state.mirror = None;
        }
        result
    }

    /// Copies the source's data (mirroring writes behind the copy cursor),
    /// verifying each chunk by reading it back, then its snapshot files,
    /// catching up on the copy-on-write saves made meanwhile; makes it all
    /// durable; then — with the slice's I/O paused — copies the last saves,
    /// renames the files into place (the slice file last), calls `commit`
    /// and switches `holder`'s I/O to the target.
    #[allow(clippy::too_many_arguments)]
    fn fill_and_switch(
        &self,
        source: &SliceIo,
        holder: &SliceIo,
        target_path: &Path,
        dir: &Path,
        to_medium: &str,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
        commit: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), DataPlaneError> {
        let io_err = |op: &'static str| move |e: io::Error| self.err(holder, to_medium, op, e);
        let same = std::ptr::eq(source, holder);
        let stem = target_path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".slice"))
            .unwrap_or_default()
            .to_string();
        let partial = partial_path(target_path);
        let (source_file, source_medium, held) = {
            let state = source.read_state().map_err(io_err("lock"))?;
            let live = source
                .healthy(&state)
                .ok_or_else(|| io_err("copy")(source_lost()))?;
            let held: u64 = live
                .snapshots
                .list()
                .map_err(io_err("list snapshots"))?
                .iter()
                .map(|s| s.used_bytes)
                .sum();
            (Arc::clone(&live.file), state.medium.clone(), held)
        };
        // The slice file resumes from its checkpoint when its partial file
        // is still there; the snapshot files are copied whole every time.
        let len = source_file.metadata().map_err(io_err("stat"))?.len();
        let resume = &options.resume;
        let (target, from) = match reopen_partial(&partial, len, resume.from) {
            Some(file) => (file, resume.from),
            None => {
                resume.restart().map_err(io_err("checkpoint"))?;
                let file = create_partial(&partial).map_err(io_err("create"))?;
                file.set_len(len).map_err(io_err("create"))?;
                (file, 0)
            }
        };
        let target = Arc::new(target);
        let mut guard = RemoveOnDrop::new(&partial);
        options.stats.resumed(from);
        let filled = self.fill(
            Fill {
                source,
                holder,
                source_file: &source_file,
                source_medium: &source_medium,
                target: &target,
                to_medium,
                from,
                held,
            },
            dir,
            &stem,
            options,
            progress,
        );
        let mut snapshot_copy = match filled {
            Err(DataPlaneError::Cancelled) => {
                // Kept for the next run when a checkpoint says how far it is.
                if from > 0 || options.stats.checkpoint() > 0 {
                    guard.disarm();
                }
                return Err(DataPlaneError::Cancelled);
            }
            r => r?,
        };

        // The switch, with the volume's writes paused at the barrier: every
        // write is wholly before it (in the source and, past the cursor,
        // mirrored) or wholly after (on the new slice), and no copy-on-write
        // save runs now. Reads go on.
        let _paused = self.pause().map_err(io_err("lock"))?;
        let mut state = holder.write_state().map_err(io_err("lock"))?;
        let source_state = if same {
            None
        } else {
            Some(source.read_state().map_err(io_err("lock"))?)
        };
        let len = {
            let src_state: &SliceState = source_state.as_deref().unwrap_or(&state);
            let live = healthy_source(source, src_state).map_err(io_err("copy"))?;
            snapshot_copy
                .fetch(&live.snapshots)
                .map_err(io_err("copy snapshots"))?;
            snapshot_copy
                .copy_pending(&live.snapshots, usize::MAX)
                .map_err(io_err("copy snapshots"))?;
            live.file.metadata().map_err(io_err("stat"))?.len()
        };
        if state
            .mirror
            .as_ref()
            .is_none_or(|m| m.failed.load(Ordering::Acquire))
        {
            return Err(io_err("write")(io::Error::other(
                "a write to the target failed during the copy",
            )));
        }
        target.set_len(len).map_err(io_err("truncate"))?;
        target.sync_all().map_err(io_err("fsync"))?;
        let mut placed = snapshot_copy
            .finish(dir)
            .map_err(io_err("place snapshots"))?;
        std::fs::rename(&partial, target_path).map_err(io_err("rename"))?;
        guard.disarm();
        placed.push(RemoveOnDrop::new(target_path));
        fsync_dir(dir).map_err(io_err("fsync"))?;
        // The copied snapshot files now count on the target medium.
        self.media.snapshot_files_changed(to_medium);
        let snapshots =
            SliceSnapshots::open_accounted(target_path, self.media.space_account(to_medium)?)
                .map_err(io_err("open snapshots"))?;
        if let Err(message) = commit() {
            // The placement did not change: the source stays authoritative
            // and the placed files go (`placed` drops).
            drop(snapshots);
            return Err(self.err(holder, to_medium, "commit", io::Error::other(message)));
        }
        for p in &mut placed {
            p.disarm();
        }
        drop(source_state);
        state.live = Some(Live {
            file: target,
            snapshots,
        });
        state.medium = to_medium.to_string();
        state.mirror = None;
        holder.dirty.store(false, Ordering::Release);
        holder.lost.store(false, Ordering::Release);
        Ok(())
    }
}

/// The two ends of a live copy (see [`LocalVolumeIo::fill`]).
struct Fill<'a> {
    source: &'a SliceIo,
    holder: &'a SliceIo,
    source_file: &'a File,
    source_medium: &'a str,
    /// The partial file: new, or holding the bytes below `from`.
    target: &'a Arc<File>,
    to_medium: &'a str,
    /// Where the slice file's copy starts (a checkpoint, or 0).
    from: u64,
    /// The source's snapshot bytes, as measured at the start.
    held: u64,
}

/// How often a live copy measures again what is left of the slice file
/// (writes into holes ahead of the copy add to it).
const REMEASURE: Duration = Duration::from_secs(1);

/// A live copy's progress: `done` of `total` bytes, `total` growing with
/// what writes during the move add (the catch-up).
struct Tally {
    done: u64,
    total: u64,
}

impl Tally {
    fn report(&self, progress: &mut dyn FnMut(u64, u64)) {
        progress(self.done, self.total.max(self.done));
    }
}

impl LocalVolumeIo {
    /// Fills the target from the source while I/O goes on: the slice file
    /// from `from` on (mirroring writes behind the copy cursor, verifying
    /// each chunk by reading it back, checkpointing now and then), durable;
    /// then the snapshot files, catching up on the copy-on-write saves made
    /// meanwhile. Returns the snapshot copy for the switch to finish.
    fn fill(
        &self,
        ends: Fill<'_>,
        dir: &Path,
        stem: &str,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<SnapshotCopy, DataPlaneError> {
        let Fill {
            source,
            holder,
            source_file,
            source_medium,
            target,
            to_medium,
            from,
            held,
        } = ends;
        let io_err = |op: &'static str| move |e: io::Error| self.err(holder, to_medium, op, e);
        let stats = &options.stats;
        let mut len = source_file.metadata().map_err(io_err("stat"))?.len();
        // What is left of the slice file as far as known now.
        let mut data_left = data_from(source_file, from, len).map_err(io_err("seek"))?;
        let done = data_below(source_file, from).map_err(io_err("seek"))?;
        let mut tally = Tally {
            done,
            total: done + data_left + held,
        };
        {
            let mut state = holder.write_state().map_err(io_err("lock"))?;
            state.mirror = Some(Mirror {
                file: Arc::clone(target),
                medium: to_medium.to_string(),
                copied_upto: from,
                failed: AtomicBool::new(false),
                dirty: AtomicBool::new(false),
            });
        }
        tally.report(progress);

        let pacer = Pacer::new(options.rate_limit, &options.cancel);
        let cancelled = |_| DataPlaneError::Cancelled;
        let mut bufs = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
        let copy_chunk = |state: &mut SliceState,
                          start: u64,
                          n: usize,
                          clear: bool,
                          bufs: &mut (Vec<u8>, Vec<u8>)|
         -> Result<(), DataPlaneError> {
            if source.is_lost() {
                return Err(io_err("copy")(source_lost()));
            }
            let mirror = state
                .mirror
                .as_mut()
                .ok_or_else(|| io_err("copy")(io::Error::other("copy state lost")))?;
            let data = &mut bufs.0[..n];
            if let Err(e) = source
                .fault()
                .and_then(|()| source_file.read_exact_at(data, start))
            {
                if is_media_failure(&e) {
                    self.lose(source, source_medium, &e);
                }
                return Err(self.err(source, source_medium, "read", e));
            }
            if clear {
                punch_hole(&mirror.file, start, n as u64).map_err(io_err("write"))?;
            }
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
            let check = &mut bufs.1[..n];
            mirror
                .file
                .read_exact_at(check, start)
                .map_err(io_err("verify"))?;
            if check != &bufs.0[..n] {
                return Err(DataPlaneError::VerifyFailed {
                    slice: label(&holder.key),
                    from: source_medium.to_string(),
                    to: to_medium.to_string(),
                });
            }
            if mirror.failed.load(Ordering::Acquire) {
                return Err(io_err("write")(io::Error::other(
                    "a write to the target failed during the copy",
                )));
            }
            Ok(())
        };

        // A resumed copy: below its checkpoint the target has every write
        // made before the interruption, but not those made since the volume
        // was opened again and before the mirror above was in place. Read
        // after the mirror is in place: a write not marked yet is mirrored.
        if from > 0 {
            for chunk in self.written[holder.key.column as usize].below(from) {
                pacer.check().map_err(cancelled)?;
                let start = chunk * CHUNK as u64;
                let n = (CHUNK as u64).min(from - start) as usize;
                let mut state = holder.write_state().map_err(io_err("lock"))?;
                copy_chunk(&mut state, start, n, true, &mut bufs)?;
                drop(state);
                stats.add_copied(n as u64);
                stats.add_catch_up(n as u64);
                tally.done += n as u64;
                tally.total += n as u64;
                tally.report(progress);
                pacer.pace(stats.copied()).map_err(cancelled)?;
            }
        }

        let mut checkpoints = Checkpoints::new(&options.resume, stats);
        let mut measured = Instant::now();
        let mut cursor = from;
        loop {
            pacer.check().map_err(cancelled)?;
            // One chunk with the target's slice held exclusively: a write
            // to the source either lands before the chunk is read, or is
            // mirrored after the cursor has passed it (writes reach the
            // mirror after the source, and the mirror under this lock).
            let mut state = holder.write_state().map_err(io_err("lock"))?;
            len = source_file.metadata().map_err(io_err("stat"))?.len();
            let next = {
                let mut extents = DataExtents::from(source_file, cursor, len);
                extents.next().transpose().map_err(io_err("seek"))?
            };
            let Some((start, end)) = next else {
                // Everything is copied: from now on every write is mirrored
                // (also past the end, should the slice grow meanwhile).
                if let Some(mirror) = state.mirror.as_mut() {
                    mirror.copied_upto = u64::MAX;
                }
                break;
            };
            let n = ((end - start).min(CHUNK as u64)) as usize;
            copy_chunk(&mut state, start, n, false, &mut bufs)?;
            cursor = start + n as u64;
            if let Some(mirror) = state.mirror.as_mut() {
                mirror.copied_upto = cursor;
            }
            drop(state);
            stats.add_copied(n as u64);
            tally.done += n as u64;
            data_left = data_left.saturating_sub(n as u64);
            if measured.elapsed() >= REMEASURE {
                // Writes into holes ahead of the copy add to what is left.
                let left = data_from(source_file, cursor, len).map_err(io_err("seek"))?;
                if left > data_left {
                    stats.add_catch_up(left - data_left);
                }
                tally.total = (tally.total + left).saturating_sub(data_left);
                data_left = left;
                measured = Instant::now();
            }
            tally.report(progress);
            if checkpoints.due() {
                checkpoints.take(target, cursor).map_err(io_err("fsync"))?;
            }
            pacer.pace(stats.copied()).map_err(cancelled)?;
        }
        // Durable before anyone relies on it; most was written back already.
        target.sync_all().map_err(io_err("fsync"))?;
        // An interruption from now on need not copy the slice file again.
        checkpoints.take(target, len).map_err(io_err("fsync"))?;

        // The snapshot files: everything, then what was saved meanwhile,
        // until what is left for the pause is small.
        let mut snapshot_copy = {
            let state = source.read_state().map_err(io_err("lock"))?;
            SnapshotCopy::start(
                &healthy_source(source, &state)
                    .map_err(io_err("copy"))?
                    .snapshots,
                dir,
                stem,
            )
            .map_err(io_err("create"))?
        };
        for round in 1.. {
            let added = {
                let state = source.read_state().map_err(io_err("lock"))?;
                snapshot_copy
                    .fetch(
                        &healthy_source(source, &state)
                            .map_err(io_err("copy"))?
                            .snapshots,
                    )
                    .map_err(io_err("copy snapshots"))?
            };
            let added_bytes = added as u64 * COW_CHUNK;
            if round == 1 {
                // The snapshots as they are now replace the estimate.
                tally.total = tally.total.saturating_sub(held) + added_bytes;
            } else {
                // Saved by writes made during the move.
                tally.total += added_bytes;
                stats.add_catch_up(added_bytes);
            }
            loop {
                pacer.check().map_err(cancelled)?;
                let copied = {
                    let state = source.read_state().map_err(io_err("lock"))?;
                    snapshot_copy
                        .copy_pending(
                            &healthy_source(source, &state)
                                .map_err(io_err("copy"))?
                                .snapshots,
                            CATCH_UP_CHUNKS,
                        )
                        .map_err(io_err("copy snapshots"))?
                };
                if copied == 0 {
                    break;
                }
                stats.add_copied(copied);
                tally.done += copied;
                tally.report(progress);
                pacer.pace(stats.copied()).map_err(cancelled)?;
            }
            if added <= CATCH_UP_CHUNKS || round >= CATCH_UP_ROUNDS {
                break;
            }
        }
        Ok(snapshot_copy)
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
        let (_d, media, mut layout) = volume(2, 2, 4);
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
        // A slice with snapshots moves with them.
        io.move_slice(
            0,
            0,
            "m4",
            &CopyOptions::default(),
            &mut |_, _| {},
            &mut || Ok(()),
        )
        .expect("move");
        let key = SliceKey {
            volume_id: "v".into(),
            copy: 0,
            column: 0,
        };
        media.delete_slice("m0", &key).expect("delete the source");
        layout.media[0][0] = "m4".into();
        assert!(read_all(view2.as_ref()) == after);
        assert!(read_all(io.as_ref()) == before);
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
        let live = state.live.as_ref().expect("live");
        live.snapshots.create(5, &live.file).expect("partial");
        drop(state);
        io.write(0, &pattern(2, (4 * MIB) as usize), false)
            .expect("write");
        let now = read_all(io.as_ref());
        io.snapshot(5).expect("snapshot");
        let view = Arc::clone(&io).snapshot_view(5, layout.size).expect("view");
        assert!(read_all(view.as_ref()) == now);
    }

    #[test]
    fn snapshot_operations_are_refused_during_a_move_and_the_move_goes_on() {
        let (_d, media, layout) = volume(1, 1, 8);
        let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
        io.write(0, &pattern(1, (8 * MIB) as usize), false)
            .expect("write");
        io.snapshot(1).expect("snapshot");
        let mut refused = Vec::new();
        io.move_slice(
            0,
            0,
            "m4",
            &CopyOptions::default(),
            &mut |_, _| {
                if refused.is_empty() {
                    refused.push(io.snapshot(2).unwrap_err());
                    refused.push(io.delete_snapshot(1).unwrap_err());
                    refused.push(io.rollback(1).unwrap_err());
                }
            },
            &mut || Ok(()),
        )
        .expect("move");
        assert_eq!(refused.len(), 3);
        for e in &refused {
            assert_eq!(e.kind(), io::ErrorKind::ResourceBusy, "{e}");
        }
        io.snapshot(2).expect("snapshot after the move");
        io.delete_snapshot(1).expect("delete after the move");
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
            .live
            .as_ref()
            .expect("live")
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
    fn a_write_over_the_snapshot_budget_fails_with_enospc_and_changes_nothing() {
        let (_d, media, layout) = volume(2, 1, 2);
        let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
        io.write(0, &pattern(1, (2 * MIB) as usize), false)
            .expect("write");
        let before = read_all(io.as_ref());
        io.snapshot(1).expect("snapshot");
        // The second copy's medium has room for its map block only.
        let held = media
            .medium_snapshot_usage("m1")
            .expect("usage")
            .values()
            .sum::<u64>();
        media.set_snapshot_budget("m1", Some(held));
        let err = io.write(4096, &pattern(2, 8192), false).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull, "{err}");
        assert!(err.to_string().contains("medium 'm1'"), "{err}");
        for copy in 0..2u32 {
            let key = SliceKey {
                volume_id: "v".into(),
                copy,
                column: 0,
            };
            let path = media
                .slice_path(&layout.media[copy as usize][0], &key)
                .expect("path");
            let mut got = vec![0u8; (2 * MIB) as usize];
            File::open(path)
                .expect("slice")
                .read_exact_at(&mut got, 0)
                .expect("read slice");
            assert!(got == before, "copy {copy} was written");
        }
        // A write to a chunk already saved on every copy costs nothing more.
        let view = Arc::clone(&io).snapshot_view(1, layout.size).expect("view");
        assert!(read_all(view.as_ref()) == before);
        // One chunk's room: the same write now goes through.
        media.set_snapshot_budget("m1", Some(held + COW_CHUNK + 4096));
        io.write(4096, &pattern(2, 8192), false)
            .expect("room for one chunk");
        // A second chunk does not fit.
        let err = io
            .write(COW_CHUNK + 4096, &pattern(3, 8192), false)
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull, "{err}");
        // The chunk saved already takes no more space.
        io.write(0, &pattern(4, 4096), false).expect("saved chunk");
        let mut expect = before.clone();
        expect[4096..4096 + 8192].copy_from_slice(&pattern(2, 8192));
        expect[..4096].copy_from_slice(&pattern(4, 4096));
        assert!(read_all(io.as_ref()) == expect);
        assert!(read_all(view.as_ref()) == before);
        // Deleting the snapshot frees its space: no save is needed at all.
        io.delete_snapshot(1).expect("delete");
        io.write(COW_CHUNK + 4096, &pattern(3, 8192), false)
            .expect("no snapshot, no save");
    }

    #[test]
    fn the_budget_count_follows_saves_without_scanning_and_is_re_measured_after_changes() {
        let (_d, media, layout) = volume(1, 1, 2);
        let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
        io.write(0, &pattern(1, (2 * MIB) as usize), false)
            .expect("write");
        io.snapshot(1).expect("snapshot");
        media.set_snapshot_budget("m0", Some(64 * MIB));
        assert_eq!(media.space.figures("m0"), (Some(64 * MIB), None));
        // Four chunks saved: the count is the files' measure plus exactly
        // what the saves allocated.
        io.write(0, &pattern(2, (4 * COW_CHUNK) as usize), false)
            .expect("write");
        let counted = media.space.figures("m0").1.expect("counted");
        let measured: u64 = media
            .medium_snapshot_usage("m0")
            .expect("usage")
            .values()
            .sum();
        assert_eq!(counted, measured);
        assert!(counted >= 4 * COW_CHUNK, "{counted}");
        // A file the count does not know of: a save does not scan for it...
        let stray = media
            .medium_dir("m0")
            .expect("dir")
            .join("v")
            .join("c9-k9.s1.delta");
        std::fs::write(&stray, vec![1u8; MIB as usize]).expect("stray");
        io.write(4 * COW_CHUNK, &pattern(3, 4096), false)
            .expect("write");
        assert_eq!(media.space.figures("m0").1, Some(counted + COW_CHUNK));
        // ...a new budget makes the next save measure the files again.
        media.set_snapshot_budget("m0", Some(64 * MIB));
        io.write(5 * COW_CHUNK, &pattern(3, 4096), false)
            .expect("write");
        let recounted = media.space.figures("m0").1.expect("counted");
        assert!(recounted >= counted + 2 * COW_CHUNK + MIB, "{recounted}");
        io.delete_snapshot(1).expect("delete");
        assert_eq!(media.space.figures("m0").1, None);
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

    fn ext(len: u64, hole: bool) -> Extent {
        Extent { len, hole }
    }

    #[test]
    fn extents_follow_the_slices_holes_across_stripes_and_columns() {
        let (_d, media, layout) = volume(2, 2, 4);
        let io = LocalVolumeIo::open(&media, &layout).expect("open");
        assert_eq!(
            io.extents(0, 8 * MIB).expect("extents"),
            vec![ext(8 * MIB, true)]
        );
        io.write(0, &pattern(1, 64 * 1024), false).expect("write");
        io.write(MIB + 4096, &pattern(2, 8192), false)
            .expect("write");
        // Stripes 2, 3 and 4: columns 0, 1, 0.
        io.write(3 * MIB - 4096, &pattern(3, (2 * MIB) as usize), false)
            .expect("write");
        assert_eq!(
            io.extents(0, 8 * MIB).expect("extents"),
            vec![
                ext(64 * 1024, false),
                ext(MIB + 4096 - 64 * 1024, true),
                ext(8192, false),
                ext(2 * MIB - 4096 - 12 * 1024, true),
                ext(2 * MIB, false),
                ext(3 * MIB + 4096, true),
            ]
        );
        // A range inside a data run is one extent; bounds are checked.
        assert_eq!(
            io.extents(3 * MIB, MIB).expect("extents"),
            vec![ext(MIB, false)]
        );
        assert!(io.extents(8 * MIB - 1, 2).is_err());
        io.cache(0, 8 * MIB).expect("cache");
        assert!(io.cache(8 * MIB, 1).is_err());
    }

    #[test]
    fn extents_come_from_the_copy_reads_use() {
        let (_d, media, layout) = volume(2, 1, 4);
        let io = LocalVolumeIo::open(&media, &layout).expect("open");
        io.write(0, &pattern(1, 64 * 1024), false).expect("write");
        // Copy 0 serves reads: a hole there is a hole (it reads as zeroes)...
        let key = SliceKey {
            volume_id: "v".into(),
            copy: 0,
            column: 0,
        };
        let path = media.slice_path("m0", &key).expect("path");
        let file = open_rw(&path).expect("open copy 0");
        punch_hole(&file, 0, 64 * 1024).expect("punch");
        assert_eq!(
            io.extents(0, 4 * MIB).expect("extents"),
            vec![ext(4 * MIB, true)]
        );
        // ...until copy 0 is lost: copy 1 serves, with the data.
        io.fail_medium("m0");
        assert_eq!(
            io.extents(0, 4 * MIB).expect("extents"),
            vec![ext(64 * 1024, false), ext(4 * MIB - 64 * 1024, true)]
        );
        io.fail_medium("m1");
        assert_eq!(
            io.extents(0, 4096).unwrap_err().raw_os_error(),
            Some(libc::EIO)
        );
    }

    #[test]
    fn a_snapshot_views_extents_are_the_data_it_holds_not_the_live_holes() {
        let (_d, media, layout) = volume(1, 1, 4);
        let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
        io.write(0, &pattern(1, 64 * 1024), false).expect("write");
        io.snapshot(1).expect("snapshot");
        io.discard(0, 64 * 1024, false).expect("discard");
        io.write(128 * 1024, &pattern(2, 64 * 1024), false)
            .expect("write");
        assert_eq!(
            io.extents(0, 4 * MIB).expect("live extents"),
            vec![
                ext(128 * 1024, true),
                ext(64 * 1024, false),
                ext(4 * MIB - 192 * 1024, true)
            ]
        );
        let view = Arc::clone(&io).snapshot_view(1, layout.size).expect("view");
        assert_eq!(
            view.extents(0, 4 * MIB).expect("view extents"),
            vec![ext(64 * 1024, false), ext(4 * MIB - 64 * 1024, true)]
        );
        assert!(view.extents(4 * MIB - 1, 2).is_err());
    }
}

#[cfg(test)]
#[path = "volume_copy_tests.rs"]
mod copy_tests;
