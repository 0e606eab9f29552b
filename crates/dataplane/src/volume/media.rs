//! What an open volume needs from the media its slices are on: it opens
//! its slices through this and reports their failures to it, so the volume
//! front end does not depend on how media are served
//! ([`LocalMedia`](crate::LocalMedia) implements it for this host's
//! directories, [`ClusterMedia`](crate::ClusterMedia) for storage nodes'
//! media too).

use super::device::SliceDevice;
use crate::copier::CopyTarget;
use crate::space::SpaceAccount;
use crate::{DataPlaneError, LossRecord, SliceKey};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub(crate) trait SliceMedia: Send + Sync + 'static {
    /// Opens a slice for I/O by the front `front`; `None` (the slice is
    /// lost) when its medium is marked failed or the slice cannot be opened.
    fn open_slice(
        &self,
        medium: &str,
        key: &SliceKey,
        front: &Arc<Front>,
    ) -> Option<Arc<dyn SliceDevice>>;

    /// I/O on the slice `key` of the medium failed with `e`: the record of
    /// that failure (a write that skipped the slice is answered once it is
    /// recorded).
    fn saw_io_error(&self, medium: &str, key: &SliceKey, e: &io::Error) -> LossRecord;

    /// The record of a failure of the slice `key` (or of its medium) not
    /// made yet (pending or refused): a slice that could not be opened was reported, and
    /// writes skipping it wait for that record.
    fn pending_record(&self, _medium: &str, _key: &SliceKey) -> Option<LossRecord> {
        None
    }

    /// Whether the medium is served at all (a medium no longer served has
    /// lost its slices).
    fn serves(&self, medium: &str) -> bool;

    /// Where the slice's file is (or goes) on a medium of this host.
    fn slice_path(&self, medium: &str, key: &SliceKey) -> Result<PathBuf, DataPlaneError>;

    /// The snapshot space account of a medium of this host.
    fn space_account(&self, medium: &str) -> Result<SpaceAccount, DataPlaneError>;

    /// Snapshot files came to or left the medium other than by saves.
    fn snapshot_files_changed(&self, medium: &str);

    /// Whether the medium is a storage node's (reached over the network)
    /// rather than a directory of this host.
    fn is_node_medium(&self, _medium: &str) -> bool {
        false
    }

    /// The slice `key` already on a node medium, with its size, as the
    /// target of a live copy written with `front`'s epoch: a stale copy
    /// resynced in place, or the slice of an interrupted copy resumed from
    /// its checkpoint. `None` when the node does not hold it.
    fn open_node_target(
        &self,
        medium: &str,
        key: &SliceKey,
        _front: &Arc<Front>,
    ) -> Result<Option<OpenedNodeTarget>, DataPlaneError> {
        Err(DataPlaneError::Io {
            medium: medium.to_string(),
            slice: super::layout::label(key),
            op: "open",
            source: io::Error::new(io::ErrorKind::Unsupported, "not a storage node's medium"),
        })
    }

    /// Creates the slice `key`, `len` bytes, empty, on a node medium (an
    /// earlier one of that name is deleted first), as the target of a
    /// live copy written with `front`'s epoch.
    fn create_node_target(
        &self,
        medium: &str,
        key: &SliceKey,
        _len: u64,
        _front: &Arc<Front>,
    ) -> Result<Arc<dyn NodeTarget>, DataPlaneError> {
        Err(DataPlaneError::Io {
            medium: medium.to_string(),
            slice: super::layout::label(key),
            op: "create",
            source: io::Error::new(io::ErrorKind::Unsupported, "not a storage node's medium"),
        })
    }
}

/// A slice found on a node medium (see [`SliceMedia::open_node_target`]),
/// with its size in bytes.
pub(crate) type OpenedNodeTarget = (Arc<dyn NodeTarget>, u64);

/// The target of a live copy onto a storage node's medium: a slice written
/// through the slice protocol (fenced with the volume's epoch), created
/// under its final name (it is in no placement until the switch commits).
pub(crate) trait NodeTarget: CopyTarget + Send + Sync {
    /// Grows the slice to `len` bytes (the volume grew during the copy).
    fn grow(&self, len: u64) -> io::Result<()>;

    /// Deletes the slice from its node (the copy was undone).
    fn remove(&self) -> io::Result<()>;

    /// Where a live copy writes the slice's snapshot files on the node.
    fn snapshot_parts(&self) -> Box<dyn crate::copier::SnapshotParts>;
}

/// The front end of one opening of a volume, as its slices see it: the
/// epoch its fenced requests carry, and whether a storage node said a
/// newer front took the volume over.
#[derive(Debug)]
pub(crate) struct Front {
    pub(crate) volume_id: String,
    pub(crate) epoch: u64,
    fenced: AtomicBool,
}

impl Front {
    pub(crate) fn new(volume_id: &str, epoch: u64) -> Front {
        Front {
            volume_id: volume_id.to_string(),
            epoch,
            fenced: AtomicBool::new(false),
        }
    }

    /// Whether a node refused this front's epoch: every later write fails.
    pub(crate) fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::Acquire)
    }

    /// A node refused this front's epoch (`StaleEpoch`): records it and
    /// returns the error the request fails with.
    pub(crate) fn fence(&self, why: &str) -> io::Error {
        if !self.fenced.swap(true, Ordering::AcqRel) {
            tracing::warn!(volume = %self.volume_id, epoch = self.epoch, why,
                "a newer front end took the volume over; this one writes no more");
        }
        self.error()
    }

    /// The error a write of a fenced front fails with.
    pub(crate) fn error(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::ReadOnlyFilesystem,
            FrontFenced {
                volume_id: self.volume_id.clone(),
                epoch: self.epoch,
            },
        )
    }
}

/// Why a write (or discard, flush, snapshot change) of a volume failed: a
/// storage node refused this front end's epoch, because the volume was
/// opened again elsewhere with a higher one. Not a media failure: no copy
/// is lost for it, and every later write of this opening fails the same
/// way (the volume must be closed here; see [`is_front_fenced`] and
/// [`VolumeIo::is_fenced`](crate::VolumeIo::is_fenced)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontFenced {
    pub volume_id: String,
    /// The epoch this front wrote with.
    pub epoch: u64,
}

impl std::fmt::Display for FrontFenced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "volume {}: this front end (epoch {}) was fenced by a newer one and may not write",
            self.volume_id, self.epoch
        )
    }
}

impl std::error::Error for FrontFenced {}

/// Whether `e` (from a volume's I/O) is [`FrontFenced`].
pub fn is_front_fenced(e: &io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.downcast_ref::<FrontFenced>().is_some())
}
