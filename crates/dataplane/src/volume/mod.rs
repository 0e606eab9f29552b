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
//! below), so no write is half before and half after it; from then until the caller
//! commits the placement and finishes (or aborts) the move, the old place
//! takes every write too (see [`SliceMove`]). The
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

mod clone_fill;
mod device;
mod gate;
mod hooks;
mod io;
mod layout;
mod live_copy;
mod media;
mod pipelined;
mod slice;
mod slice_move;
mod snapshots;

pub use clone_fill::CloneFill;
pub(crate) use device::{LocalSlice, SliceChange, SliceDevice, Started};
pub use io::LocalVolumeIo;
pub(crate) use layout::label;
pub use layout::{Extent, VolumeLayout, STRIPE};
pub use media::{is_front_fenced, FrontFenced};
pub(crate) use media::{Front, NodeTarget, OpenedNodeTarget, SliceMedia};

use crate::{CopyOptions, DataPlaneError};
use std::sync::Arc;

/// EIO, which the NBD server passes on as is.
fn eio() -> std::io::Error {
    std::io::Error::from_raw_os_error(libc::EIO)
}

/// Whether an I/O error means the slice's medium failed (as opposed to a
/// full medium or a request the data plane refused).
pub(crate) fn is_media_failure(e: &std::io::Error) -> bool {
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
        None => e.kind() == std::io::ErrorKind::UnexpectedEof,
    }
}

/// What a write started by [`VolumeIo::start_write`] calls, once, with its
/// outcome and its data buffer.
pub type WriteDone = Box<dyn FnOnce(std::io::Result<()>, Vec<u8>) + Send>;

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
    fn read(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()>;

    /// `read` if it can be answered at once from memory (the page cache):
    /// `false`, with `buf` partly written, when it would wait for a disk,
    /// the network or a commit of held writes; the caller then reads where
    /// waiting is fine. Failures as for `read`. Default: never.
    fn read_cached(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<bool> {
        let _ = (offset, buf);
        Ok(false)
    }

    /// Writes to every healthy copy; `fua` makes the bytes durable before
    /// returning. A copy whose write fails is lost; EIO unless a healthy
    /// copy of every touched column took it.
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> std::io::Result<()>;

    /// Starts a plain (not FUA) `write` of `data` at `offset` that another
    /// thread may answer: `done` gets its outcome and `data` back, once,
    /// from whichever thread ends it (possibly this one, before this
    /// returns). Nothing here waits, so an async worker may call it. `Err`
    /// gives both back, nothing done, when the write cannot go this way
    /// (the volume is busy with a move, a copy is unreachable, ...): the
    /// caller then writes with [`VolumeIo::write`] where waiting is fine.
    /// Default: never.
    fn start_write(
        self: Arc<Self>,
        offset: u64,
        data: Vec<u8>,
        done: WriteDone,
    ) -> Result<(), (Vec<u8>, WriteDone)> {
        let _ = offset;
        Err((data, done))
    }

    /// Deallocates a range on every healthy copy (reads return zeros
    /// afterwards); failures as for `write`.
    fn discard(&self, offset: u64, len: u64, fua: bool) -> std::io::Result<()>;

    /// Makes every acknowledged write durable; failures as for `write`.
    /// Covers every write acknowledged before it was called, whoever made
    /// it (all connections to a volume share one `VolumeIo`).
    fn flush(&self) -> std::io::Result<()>;

    /// Allocation of `[offset, offset + len)` as seen by reads: extents in
    /// order from `offset`, covering the range (neighbours of equal status
    /// merged). A hole reads as zeroes. Default: all data.
    fn extents(&self, offset: u64, len: u64) -> std::io::Result<Vec<Extent>> {
        let _ = offset;
        Ok(vec![Extent { len, hole: false }])
    }

    /// A hint that `[offset, offset + len)` will be read soon. Default: none.
    fn cache(&self, offset: u64, len: u64) -> std::io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }

    /// Begins moving (`SliceCopyKind::Move`) or rebuilding
    /// (`SliceCopyKind::Rebuild`, from a healthy copy of its column) slice
    /// (`copy`, `column`) onto `to_medium` while the volume stays in use;
    /// the returned [`SliceMove`] runs the other phases. It claims the
    /// slices (one copy at a time reads or fills a slice; snapshot
    /// operations are refused until the move ends) and reopens the target's
    /// partial file at `resume_from` (a recorded checkpoint) when it is
    /// there; otherwise [`SliceMove::starts_at`] is 0 and the caller must
    /// forget its checkpoint before [`SliceMove::fill`]. A rebuild stops
    /// I/O using the slice now. A slice already on `to_medium` (healthy,
    /// for a rebuild) gives a move that is [`SliceMove::in_place`].
    fn begin_slice_copy(
        self: Arc<Self>,
        kind: SliceCopyKind,
        copy: u32,
        column: u32,
        to_medium: &str,
        resume_from: u64,
    ) -> Result<Box<dyn SliceMove>, DataPlaneError> {
        let _ = (kind, to_medium, resume_from);
        Err(DataPlaneError::Io {
            medium: String::new(),
            slice: format!("{}/c{copy}-k{column}", self.volume_id()),
            op: "move",
            source: std::io::Error::from(std::io::ErrorKind::Unsupported),
        })
    }

    /// Takes snapshot `id` (ids grow) of every slice of every copy at one
    /// instant: requests in flight finish first, new ones wait. Repeating a
    /// completed snapshot is a no-op; one that an earlier call (or a crash)
    /// left on only some slices is dropped and taken again, whole.
    ///
    /// This, `delete_snapshot` and `rollback` skip lost slices (a rebuild
    /// brings a healthy copy's snapshots), and answer `ResourceBusy` while a
    /// slice of the volume is moved or rebuilt.
    fn snapshot(&self, _id: u64) -> std::io::Result<()> {
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    }

    /// Deletes snapshot `id` from every slice (the others stay exact);
    /// missing is fine.
    fn delete_snapshot(&self, _id: u64) -> std::io::Result<()> {
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    }

    /// Returns the volume's content to snapshot `id` (newer snapshots stay
    /// exact; space the volume grew by since is zeroed). I/O waits meanwhile.
    fn rollback(&self, _id: u64) -> std::io::Result<()> {
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    }

    /// A read-only view of snapshot `id`, `size` bytes long (the volume's
    /// size when it was taken); writes fail with EROFS.
    fn snapshot_view(self: Arc<Self>, _id: u64, _size: u64) -> std::io::Result<Arc<dyn VolumeIo>> {
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    }

    /// Stops using every slice of this volume on `medium` (now lost). Idempotent.
    fn fail_medium(&self, _medium: &str) {}

    /// (copy, column) pairs whose slice is lost (its medium failed or its I/O errored).
    fn lost_slices(&self) -> Vec<(u32, u32)> {
        Vec::new()
    }

    /// Whether every copy in use is in this process (files of this host, or
    /// a storage node's own slices reached in process): a small write then
    /// completes at page-cache speed, with no network round trip.
    fn is_near(&self) -> bool {
        true
    }

    /// Whether reads are served in this process: every column has a healthy
    /// copy here (reads prefer it).
    fn reads_near(&self) -> bool {
        true
    }

    /// Whether a storage node refused this opening's epoch: a newer front
    /// end took the volume over, and every write, discard, flush and
    /// snapshot change fails with [`FrontFenced`] from now on (reads still
    /// work). The caller should close the volume here.
    fn is_fenced(&self) -> bool {
        false
    }
}

/// What a live slice copy does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SliceCopyKind {
    /// Moves a healthy slice to another medium.
    Move,
    /// Brings back a lost slice from a healthy copy of its column.
    Rebuild,
}

/// A live move or rebuild in explicit phases (see
/// [`VolumeIo::begin_slice_copy`]): [`SliceMove::fill`] until caught up and
/// verified, [`SliceMove::switch`] (I/O now served by the target), then
/// the caller commits the new placement and calls [`SliceMove::finish`],
/// or [`SliceMove::abort`] when it could not. Each phase blocks: run it
/// off async workers.
///
/// Crash safety: from the switch until finish or abort, a move's old place
/// still takes every write, discard and flush (one it fails, fails the
/// request), so it holds every acknowledged write whichever place the
/// store names when the process dies. Dropped unfinished, a move before
/// its switch goes back as by `abort`; after it, I/O stays on the target
/// with the old place kept as it is by then (as after a crash): a later
/// move of the slice to the same medium is `in_place` and finishes it.
pub trait SliceMove: Send {
    /// Where the slice file's copy starts: the checkpoint given to begin
    /// when its partial file is there, else 0 (the caller forgets its
    /// checkpoint before filling, so none points into a new file).
    fn starts_at(&self) -> u64;

    /// The slice is on the target already (a repeated call): fill and
    /// switch do nothing; the caller commits and finishes.
    fn in_place(&self) -> bool;

    /// Copies the slice file and its snapshot files while I/O goes on
    /// (mirroring writes behind the cursor, verifying each chunk,
    /// checkpointing through `options.resume`), durable; returns once the
    /// target is caught up and verified, or `Cancelled` when
    /// `options.cancel` fired (a checkpointed target is kept for a resume).
    fn fill(
        &mut self,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(), DataPlaneError>;

    /// With the volume's writes paused: the last catch-up, the target's
    /// files renamed into place, and the slice's I/O served by the target.
    fn switch(&mut self) -> Result<(), DataPlaneError>;

    /// The new placement is committed: the old place is let go (its files
    /// are the caller's to delete).
    fn finish(self: Box<Self>) -> Result<(), DataPlaneError>;

    /// The placement did not change: I/O goes back to the old place (it
    /// has every acknowledged write; a rebuilt slice is lost again) and
    /// the target's files are removed, except a partial file that a
    /// checkpoint of a cancelled fill covers.
    fn abort(self: Box<Self>) -> Result<(), DataPlaneError>;

    /// Dropped before its switch, its target's files stay (a partial
    /// file, a node's slice) for a later copy of the slice to resume
    /// from: another claim of the same job takes the copy over. The
    /// orphan reconciler removes them once no job works on the volume.
    fn keep_target(&mut self) {}
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod copy_tests;

#[cfg(test)]
mod test_moves;

#[cfg(test)]
mod parallel_tests;

#[cfg(test)]
mod loss_tests;
