//! The slice-device seam: what the volume front end (stripes, copies, the
//! barrier, degraded reads) needs of one slice, wherever it is. The front
//! end holds each slice as an `Arc<dyn SliceDevice>` and never touches a
//! file itself; [`LocalSlice`] is the slice file and its snapshot files on a
//! medium of this host, and a slice on a storage node (over the network)
//! plugs in as another implementation.
//!
//! Offsets are inside the slice. An error that [`super::is_media_failure`]
//! calls a media failure makes the front end lose the slice and go on with
//! its other copies; any other error fails the request.

use crate::copier::{CopySource, SnapshotSource};
use crate::extents::{allocation, will_need, DataExtents};
use crate::snapshot::MapTail;
use crate::{SliceSnapshots, SnapshotInfo};
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::sync::Arc;
use svs_sliceproto::{Sent, SliceClient};

/// A change [`SliceDevice::start`] makes: a write of the bytes at the
/// offset, a discard of `(offset, len)`, a sync of every write so far, or
/// (a flush's) a sync after [`SliceDevice::check_present`].
#[derive(Clone, Copy)]
pub(crate) enum SliceChange<'a> {
    Write(&'a [u8], u64),
    Discard(u64, u64),
    Sync,
    CheckedSync,
}

impl SliceChange<'_> {
    /// What the change is called in logs.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            SliceChange::Write(..) => "write",
            SliceChange::Discard(..) => "discard",
            SliceChange::Sync | SliceChange::CheckedSync => "sync",
        }
    }
}

/// A change started by [`SliceDevice::start`].
pub(crate) enum Started {
    /// Made already (or failed before it was sent).
    Done(io::Result<()>),
    /// Sent over this connection, its reply to come (and the change's name).
    Sent(Arc<SliceClient>, Sent, &'static str),
}

/// One slice: its bytes and its copy-on-write snapshots.
pub(crate) trait SliceDevice: Send + Sync {
    /// The slice's size in bytes.
    fn size(&self) -> io::Result<u64>;

    /// Reads exactly `buf.len()` bytes at `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;

    /// [`SliceDevice::read_at`] if it can be answered at once, from memory:
    /// `false` (with `buf` partly written) when it would wait for a disk,
    /// the network or a commit. Default: never.
    fn read_cached(&self, buf: &mut [u8], offset: u64) -> io::Result<bool> {
        let _ = (buf, offset);
        Ok(false)
    }

    /// Saves what the snapshots need before `[offset, offset + len)`
    /// changes (copy-on-write), without changing the slice: every copy of a
    /// column does this before any copy is written, so a save that fails
    /// (no space) leaves every copy as it was.
    fn prepare_write(&self, offset: u64, len: u64) -> io::Result<()>;

    /// Writes `data` at `offset` (saving first what the snapshots need).
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()>;

    /// Makes `[offset, offset + len)` read as zeros (saving first what the
    /// snapshots need).
    fn discard(&self, offset: u64, len: u64) -> io::Result<()>;

    /// Makes every write so far durable.
    fn sync(&self) -> io::Result<()>;

    /// Runs of `[offset, offset + len)`: `(length, hole)`, in order.
    fn allocation(&self, offset: u64, len: u64) -> io::Result<Vec<(u64, bool)>>;

    /// Hints that `[offset, offset + len)` will be read soon.
    fn will_need(&self, offset: u64, len: u64);

    /// The first data extent `(start, end)` in `[from, len)`, if any
    /// (a live copy walks the data and skips holes).
    fn next_data(&self, from: u64, len: u64) -> io::Result<Option<(u64, u64)>>;

    /// Data bytes in `[from, len)`.
    fn data_bytes(&self, from: u64, len: u64) -> io::Result<u64>;

    /// Fails (ENOENT) unless the slice is still where it belongs: a medium
    /// whose directory went away keeps open files readable, but nothing
    /// written to them survives.
    fn check_present(&self) -> io::Result<()>;

    /// The snapshots, oldest first (those being deleted left out).
    fn snapshots(&self) -> io::Result<Vec<SnapshotInfo>>;

    /// Takes snapshot `id` of the slice as it is now.
    fn create_snapshot(&self, id: u64) -> io::Result<()>;

    /// Deletes snapshot `id` (missing is fine).
    fn delete_snapshot(&self, id: u64) -> io::Result<()>;

    /// Makes the slice what it was at snapshot `id`.
    fn rollback(&self, id: u64) -> io::Result<()>;

    /// Reads snapshot `id`'s bytes at `offset`.
    fn read_snapshot(&self, id: u64, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// [`SliceDevice::allocation`] of snapshot `id`.
    fn snapshot_allocation(&self, id: u64, offset: u64, len: u64) -> io::Result<Vec<(u64, bool)>>;

    /// Ids of every snapshot with files, oldest first (a copy carries them all).
    fn snapshot_ids(&self) -> io::Result<Vec<u64>>;

    /// Snapshot `id`'s map from byte `from` to its durable end (a copy
    /// fetches what was appended since its last fetch).
    fn snapshot_map_since(&self, id: u64, from: u64) -> io::Result<MapTail>;

    /// Reads chunk `chunk` of snapshot `id`'s saved data into `buf`.
    fn read_snapshot_chunk(&self, id: u64, chunk: u64, buf: &mut [u8]) -> io::Result<()>;

    /// Whether its I/O stays in this process (a file of this host, or a
    /// storage node's own slice reached in process): reads prefer such a
    /// copy to one over the network.
    fn is_near(&self) -> bool {
        true
    }

    /// Whether [`SliceDevice::prepare_write`] and [`SliceDevice::start`] of
    /// a write return without waiting (no round trip to learn about
    /// snapshots, no connection to open), so a pipelined write may run
    /// them on an async worker. A file of this host: yes (page cache).
    fn starts_at_once(&self) -> bool {
        true
    }

    /// Starts `change`; [`SliceDevice::finish`] waits for it. A slice on a
    /// storage node sends it and returns at once, so that a write to several
    /// copies waits for one round trip, not one per copy; a file of this
    /// host is changed here (the default: a page-cache write costs less than
    /// handing it to another thread).
    fn start(&self, change: SliceChange<'_>) -> Started {
        Started::Done(match change {
            SliceChange::Write(data, offset) => self.write_at(data, offset),
            SliceChange::Discard(offset, len) => self.discard(offset, len),
            SliceChange::Sync => self.sync(),
            SliceChange::CheckedSync => self.check_present().and_then(|()| self.sync()),
        })
    }

    /// Waits for a change [`SliceDevice::start`] started: its outcome.
    fn finish(&self, started: Started) -> io::Result<()> {
        match started {
            Started::Done(outcome) => outcome,
            Started::Sent(client, sent, _) => client.collect(sent),
        }
    }

    /// The local implementation, for tests that reach into its snapshots.
    #[cfg(test)]
    fn as_local(&self) -> Option<&LocalSlice> {
        None
    }
}

/// A live copy reads a slice through the device.
impl<'d> CopySource for dyn SliceDevice + 'd {
    fn size(&self) -> io::Result<u64> {
        SliceDevice::size(self)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        SliceDevice::read_at(self, buf, offset)
    }

    fn next_data(&self, from: u64, len: u64) -> io::Result<Option<(u64, u64)>> {
        SliceDevice::next_data(self, from, len)
    }

    fn data_bytes(&self, from: u64, len: u64) -> io::Result<u64> {
        SliceDevice::data_bytes(self, from, len)
    }
}

impl<'d> SnapshotSource for dyn SliceDevice + 'd {
    fn snapshot_ids(&self) -> io::Result<Vec<u64>> {
        SliceDevice::snapshot_ids(self)
    }

    fn snapshot_map_since(&self, id: u64, from: u64) -> io::Result<MapTail> {
        SliceDevice::snapshot_map_since(self, id, from)
    }

    fn read_snapshot_chunk(&self, id: u64, chunk: u64, buf: &mut [u8]) -> io::Result<()> {
        SliceDevice::read_snapshot_chunk(self, id, chunk, buf)
    }
}

/// A slice file on a medium of this host, with its snapshot files next to
/// it (so they change with the file when a move switches media).
pub(crate) struct LocalSlice {
    file: Arc<File>,
    snapshots: SliceSnapshots,
    /// Where the file belongs: [`SliceDevice::check_present`] compares it
    /// with the open file.
    path: PathBuf,
}

impl LocalSlice {
    /// A slice being served: its writes after a snapshot are held until
    /// their saves are durable (see the `snapshot` module's `held`).
    pub(crate) fn new(file: Arc<File>, snapshots: SliceSnapshots, path: PathBuf) -> LocalSlice {
        snapshots.hold_writes();
        LocalSlice {
            file,
            snapshots,
            path,
        }
    }

    /// The open slice file (a storage node digests it), its held writes
    /// committed first.
    pub(crate) fn file(&self) -> io::Result<&File> {
        self.snapshots.commit(&self.file)?;
        Ok(&self.file)
    }

    /// [`SliceDevice::snapshot_map_since`], at most about `max` bytes of it
    /// (see [`SliceSnapshots::map_page`]).
    pub(crate) fn snapshot_map_page(&self, id: u64, from: u64, max: u64) -> io::Result<MapTail> {
        self.snapshots.commit(&self.file)?;
        self.snapshots.map_page(id, from, max)
    }

    #[cfg(test)]
    pub(crate) fn snapshot_files(&self) -> &SliceSnapshots {
        &self.snapshots
    }
}

impl SliceDevice for LocalSlice {
    fn size(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.snapshots
            .commit_range(&self.file, offset, buf.len() as u64)?;
        self.file.read_exact_at(buf, offset)
    }

    /// From the page cache (`RWF_NOWAIT`), unless writes held there need
    /// their commit first.
    fn read_cached(&self, buf: &mut [u8], offset: u64) -> io::Result<bool> {
        if self.snapshots.holds_in(offset, buf.len() as u64)? {
            return Ok(false);
        }
        crate::extents::read_cached_at(&self.file, buf, offset)
    }

    fn prepare_write(&self, offset: u64, len: u64) -> io::Result<()> {
        self.snapshots.prepare_write(&self.file, offset, len)
    }

    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        self.snapshots.write(&self.file, offset, data)
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.snapshots.discard(&self.file, offset, len)
    }

    fn sync(&self) -> io::Result<()> {
        self.snapshots.commit(&self.file)?;
        self.file.sync_data()
    }

    /// From the file's holes (SEEK_HOLE / SEEK_DATA).
    fn allocation(&self, offset: u64, len: u64) -> io::Result<Vec<(u64, bool)>> {
        self.snapshots.commit(&self.file)?;
        allocation(&self.file, offset, len)
    }

    /// `POSIX_FADV_WILLNEED`.
    fn will_need(&self, offset: u64, len: u64) {
        will_need(&self.file, offset, len);
    }

    fn next_data(&self, from: u64, len: u64) -> io::Result<Option<(u64, u64)>> {
        self.snapshots.commit(&self.file)?;
        DataExtents::from(&self.file, from, len).next().transpose()
    }

    fn data_bytes(&self, from: u64, len: u64) -> io::Result<u64> {
        self.snapshots.commit(&self.file)?;
        let mut total = 0;
        for extent in DataExtents::from(&self.file, from, len) {
            let (start, end) = extent?;
            total += end.min(len) - start;
        }
        Ok(total)
    }

    /// The file at the slice's path is the open one (same device and inode).
    fn check_present(&self) -> io::Result<()> {
        let on_disk = std::fs::metadata(&self.path)?;
        let open = self.file.metadata()?;
        if (on_disk.dev(), on_disk.ino()) != (open.dev(), open.ino()) {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        Ok(())
    }

    fn snapshots(&self) -> io::Result<Vec<SnapshotInfo>> {
        self.snapshots.list()
    }

    fn create_snapshot(&self, id: u64) -> io::Result<()> {
        self.snapshots.create(id, &self.file)
    }

    fn delete_snapshot(&self, id: u64) -> io::Result<()> {
        self.snapshots.delete(id, &self.file)
    }

    fn rollback(&self, id: u64) -> io::Result<()> {
        self.snapshots.rollback(id, &self.file)
    }

    fn read_snapshot(&self, id: u64, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.snapshots.read(id, &self.file, offset, buf)
    }

    fn snapshot_allocation(&self, id: u64, offset: u64, len: u64) -> io::Result<Vec<(u64, bool)>> {
        self.snapshots.allocation(id, &self.file, offset, len)
    }

    // A copy of the snapshot files sees every save its target's mirrored
    // writes need: held writes are committed first.
    fn snapshot_ids(&self) -> io::Result<Vec<u64>> {
        self.snapshots.commit(&self.file)?;
        self.snapshots.ids()
    }

    fn snapshot_map_since(&self, id: u64, from: u64) -> io::Result<MapTail> {
        self.snapshots.commit(&self.file)?;
        self.snapshots.map_since(id, from)
    }

    fn read_snapshot_chunk(&self, id: u64, chunk: u64, buf: &mut [u8]) -> io::Result<()> {
        self.snapshots.commit(&self.file)?;
        self.snapshots.read_delta_chunk(id, chunk, buf)
    }

    #[cfg(test)]
    fn as_local(&self) -> Option<&LocalSlice> {
        Some(self)
    }
}

/// Closing the slice commits what it holds; if that fails, the next open
/// replays the journal.
impl Drop for LocalSlice {
    fn drop(&mut self) {
        if let Err(e) = self.snapshots.commit(&self.file) {
            tracing::warn!(error = %e, path = %self.path.display(),
                "cannot commit a slice's held writes on close; the next open replays them");
        }
    }
}
