//! Snapshots of an open volume: taken, deleted and rolled back on every
//! slice at one instant, and the read-only view of one.

use super::io::LocalVolumeIo;
use super::layout::{label, Extent};
use super::{SliceCopyKind, SliceMove, VolumeIo};
use crate::DataPlaneError;
use std::io;
use std::sync::Arc;

/// A read-only view of one snapshot of a volume (see
/// [`VolumeIo::snapshot_view`]).
pub(super) struct SnapshotView {
    pub(super) volume: Arc<LocalVolumeIo>,
    pub(super) id: u64,
    pub(super) size: u64,
}

pub(super) fn read_only() -> io::Error {
    io::Error::from_raw_os_error(libc::EROFS)
}

impl SnapshotView {
    pub(super) fn check_range(&self, offset: u64, len: u64) -> io::Result<()> {
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
            live.read_snapshot(self.id, at, out)
        })
    }

    /// A chunk a snapshot holds is data (or a hole when saved as zeroes);
    /// the rest is the live slices' allocation.
    fn extents(&self, offset: u64, len: u64) -> io::Result<Vec<Extent>> {
        self.check_range(offset, len)?;
        self.volume.extents_with(offset, len, |live, at, n| {
            live.snapshot_allocation(self.id, at, n)
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

    fn begin_slice_copy(
        self: Arc<Self>,
        _kind: SliceCopyKind,
        copy: u32,
        column: u32,
        _to_medium: &str,
        _resume_from: u64,
    ) -> Result<Box<dyn SliceMove>, DataPlaneError> {
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

impl LocalVolumeIo {
    pub(super) fn take_snapshot(&self, id: u64) -> io::Result<()> {
        self.not_fenced()?;
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
            if live.snapshots()?.iter().any(|s| s.id == id) {
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
                live.delete_snapshot(id)?;
            }
        }
        for slice in self.all_slices() {
            let state = slice.read_state()?;
            if let Some(live) = slice.healthy(&state) {
                live.create_snapshot(id)?;
            }
        }
        Ok(())
    }

    pub(super) fn remove_snapshot(&self, id: u64) -> io::Result<()> {
        self.not_fenced()?;
        let _no_copies = self.no_copies()?;
        for slice in self.all_slices() {
            let state = slice.read_state()?;
            if let Some(live) = slice.healthy(&state) {
                live.delete_snapshot(id)?;
            }
        }
        Ok(())
    }

    pub(super) fn roll_back(&self, id: u64) -> io::Result<()> {
        self.not_fenced()?;
        let _no_copies = self.no_copies()?;
        let _paused = self.pause()?;
        for slice in self.all_slices() {
            let state = slice.read_state()?;
            let Some(live) = slice.healthy(&state) else {
                continue;
            };
            if !live.snapshots()?.iter().any(|s| s.id == id) {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("snapshot {id} is not on slice {}", label(&slice.key)),
                ));
            }
        }
        for slice in self.all_slices() {
            let state = slice.read_state()?;
            if let Some(live) = slice.healthy(&state) {
                live.rollback(id)?;
            }
        }
        Ok(())
    }

    pub(super) fn view_snapshot(
        self: Arc<Self>,
        id: u64,
        size: u64,
    ) -> io::Result<Arc<dyn VolumeIo>> {
        let columns = self.slices.len() as u64;
        for slice in self.all_slices() {
            let state = slice.read_state()?;
            let Some(live) = slice.healthy(&state) else {
                continue;
            };
            let listed = live.snapshots()?;
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
