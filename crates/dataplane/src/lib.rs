//! The svs data plane: one interface over media, and its local implementation
//! where each slice is a sparse file in a medium's directory, with its
//! snapshot files next to it (they travel with the slice when it is copied,
//! moved or rebuilt).
//!
//! Media fail: a medium marked failed ([`DataPlane::set_medium_failed`]), or
//! one whose slice I/O errors or whose directory disappears
//! ([`DataPlane::failed_media`]), loses its slices; a copy whose file alone
//! is missing from a medium that still reads is lost by itself
//! ([`DataPlane::failed_copies`]). Volumes keep serving from their other
//! copies, and a rebuild ([`VolumeIo::begin_slice_copy`]) brings a copy back.
//!
//! Every call is blocking (file I/O, fsync); async callers run them in
//! `spawn_blocking`. All calls are idempotent so a job resumed after a crash
//! can simply repeat the step it was on.

mod copier;
mod copy;
mod digest;
mod extents;
mod fsutil;
mod local;
mod loss_record;
mod node;
mod probe;
mod remote;
mod resume;
mod snapshot;
mod space;
mod throttle;
mod usage;
mod volume;

pub use digest::digest_file;
pub use local::LocalMedia;
pub use loss_record::LossRecord;
pub use node::{start_slice_server, FileEpochStore, NodeSlices, SharedSecret, MAP_PAGE_BYTES};
pub use remote::{ClusterMedia, NodeEndpoint, DEFAULT_REQUEST_TIMEOUT};
pub use resume::{CheckpointFn, CopyCounts, CopyResume, CopyStats, LatestCheckpoint};
pub use snapshot::{SliceSnapshots, SnapshotInfo, COW_CHUNK};
/// The slice protocol's TLS settings, for [`NodeEndpoint::tls`].
pub use svs_sliceproto::ClientTls;
pub use throttle::{CopyGate, CopyGrants, MovementBudgets, RateBudget};
/// The one stop signal of a copy: the service's shutdown token (or a child
/// of it) reaches every copy as it is.
pub use tokio_util::sync::CancellationToken;
pub use volume::{
    is_front_fenced, CloneFill, Extent, FrontFenced, LocalVolumeIo, SliceCopyKind, SliceMove,
    VolumeIo, VolumeLayout, WriteDone, STRIPE,
};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;

/// A failure the data plane's I/O just met on a copy of a slice (see
/// [`DataPlane::on_copy_failure`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyFailure {
    pub medium: String,
    /// The copy whose I/O (or probe) failed.
    pub slice: SliceKey,
    /// The medium failed, not only this copy: its directory is gone or
    /// unreadable, or the I/O error came from the medium (EIO, data cut
    /// short). False when only a file of this copy is missing from a medium
    /// that still reads: that copy alone is lost.
    pub medium_failed: bool,
}

/// Told of each [`CopyFailure`], with its [`LossRecord`]: the listener
/// settles the record once the service has the failure in its store (or
/// will not take it). Writes that skipped the copy are answered only then.
/// Called on the I/O thread that saw it: it must hand the news on (a
/// channel) and return at once.
pub type CopyFailureListener = Arc<dyn Fn(&CopyFailure, &LossRecord) + Send + Sync>;

/// Identifies a slice's file independently of which medium holds it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SliceKey {
    pub volume_id: String,
    pub copy: u32,
    pub column: u32,
}

/// Logical-content checksum of a slice: equal for two slices whose bytes are
/// equal, whether a zero range is a hole or written zeros.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digest(pub u128);

/// How a copy runs.
#[derive(Debug, Clone, Default)]
pub struct CopyOptions {
    /// Bytes per second of data copied (holes are free); `None` = unthrottled.
    pub rate_limit: Option<u64>,
    /// Rates shared with other copies that it also keeps within (the
    /// movement budgets of the nodes it copies between).
    pub budgets: Vec<Arc<RateBudget>>,
    /// Cancelled to stop the copy early; it then fails with `Cancelled`
    /// and keeps its partial file for a resume from its last checkpoint.
    pub cancel: CancellationToken,
    /// Where the slice file's copy starts, and where its checkpoints go.
    pub resume: CopyResume,
    /// What the copy did, for the caller to show while and after it runs.
    pub stats: CopyStats,
    /// The volume's front epoch: a copy onto a storage node's medium writes
    /// with it (its writes are fenced: a node that has seen a higher epoch
    /// of the volume refuses them). Ignored by copies between local media.
    pub epoch: u64,
    /// Most bytes the copy moves per chunk. None: the target's own chunk
    /// (4 MiB to a storage node, 1 MiB to a local file), smaller when
    /// `rate_limit` or `budgets` throttle it. A copy paced from outside (a
    /// storage node's copy, by the control plane's grants) sets it, so that
    /// it never runs far past what it was granted.
    pub max_chunk: Option<u64>,
    /// The job's live control of its copies (pause, its own rate): read at
    /// every step of the pacing. None: the options above alone.
    pub gate: Option<Arc<CopyGate>>,
}

/// A slice file found on a medium (see [`DataPlane::stored_slices`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSlice {
    pub key: SliceKey,
    /// An unfinished copy (its temporary file), not a usable slice.
    pub partial: bool,
}

#[derive(Debug, Error)]
pub enum DataPlaneError {
    #[error("unknown medium '{0}'")]
    UnknownMedium(String),
    #[error("medium '{medium}' is already served from {dir}")]
    MediumExists { medium: String, dir: PathBuf },
    #[error("medium '{medium}': directory {dir} cannot be created or written: {source}")]
    MediumUnusable {
        medium: String,
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("medium '{medium}': directory {dir} cannot be listed: {source}")]
    MediumUnreadable {
        medium: String,
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("slice {slice} on medium '{medium}': {op}: {source}")]
    Io {
        medium: String,
        slice: String,
        op: &'static str,
        source: std::io::Error,
    },
    #[error("copy of slice {slice} from '{from}' to '{to}' failed verification: checksums differ")]
    VerifyFailed {
        slice: String,
        from: String,
        to: String,
    },
    #[error("copy cancelled")]
    Cancelled,
    #[error("medium '{medium}' on storage node '{node}': {op}: {source}")]
    Node {
        medium: String,
        node: String,
        op: &'static str,
        source: std::io::Error,
    },
    /// A call to the volume's front on a storage node failed (a job steered
    /// there).
    #[error("the volume's front on storage node '{node}': {source}")]
    Front {
        node: String,
        source: std::io::Error,
    },
    /// A clone's copy failed (see [`CloneFill`]).
    #[error("{op}: {source}")]
    Clone {
        op: &'static str,
        source: std::io::Error,
    },
    #[error("medium '{medium}' is already served by storage node '{node}'")]
    MediumOnNode { medium: String, node: String },
    #[error("unknown storage node '{0}'")]
    UnknownNode(String),
    /// An offline copy ([`DataPlane::copy_slice`]) to or from a storage
    /// node carries no snapshot files (a live copy does).
    #[error("slice {slice} ('{from}' to '{to}'): an offline copy to or from a storage node cannot carry its snapshots")]
    SnapshotsCannotMove {
        slice: String,
        from: String,
        to: String,
    },
}

impl DataPlaneError {
    /// Whether trying the same operation again may succeed: the I/O was
    /// interrupted or timed out, or a storage node could not be reached,
    /// not refused.
    pub fn is_transient(&self) -> bool {
        self.source_kind().is_some_and(is_passing)
    }

    /// The kind of the I/O error behind it, when an I/O error is.
    pub fn source_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            DataPlaneError::Io { source, .. }
            | DataPlaneError::Node { source, .. }
            | DataPlaneError::Front { source, .. }
            | DataPlaneError::Clone { source, .. }
            | DataPlaneError::MediumUnusable { source, .. }
            | DataPlaneError::MediumUnreadable { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
}

/// Whether an I/O failure of this kind may pass: the I/O was interrupted
/// or timed out, or a storage node could not be reached (or no longer
/// runs what was asked of it), not refused.
pub fn is_passing(kind: std::io::ErrorKind) -> bool {
    matches!(
        kind,
        std::io::ErrorKind::Interrupted
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::NotConnected
            | std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::BrokenPipe
    )
}

/// Operations on slices. Sizes are in bytes.
pub trait DataPlane: Send + Sync + 'static {
    /// Creates the medium's directory if needed and proves it writable
    /// (write, fsync and remove a probe file).
    fn check_medium(&self, medium: &str) -> Result<(), DataPlaneError>;

    /// Whether slices can be placed on `medium` here now: a local medium
    /// this data plane has, or a storage node's medium it reaches. Costs no
    /// I/O (a lookup).
    fn serves_medium(&self, medium: &str) -> bool;

    /// Starts serving a medium added at runtime: its directory is created if
    /// needed and proven writable (as [`DataPlane::check_medium`]), else the
    /// medium is not added. The same medium and directory again is fine;
    /// another directory for a known medium is `MediumExists`. True when
    /// the medium is new.
    fn add_medium(&self, medium: &str, directory: &Path) -> Result<bool, DataPlaneError>;

    /// Stops serving a medium without touching its files (undoes an
    /// `add_medium` the store then refused). Unknown media are fine.
    fn forget_medium(&self, medium: &str);

    /// Stops serving a medium that holds no slice any more: files it still
    /// has that svs names as slices (orphaned or partial copies, with their
    /// snapshot files) are removed, then the medium is forgotten (also when
    /// a file could not be removed: that error is returned). The directory
    /// and any other file in it stay. Unknown media are fine.
    fn remove_medium(&self, medium: &str) -> Result<(), DataPlaneError>;

    /// Creates the slice as a sparse file of `size` bytes; if it exists it is
    /// extended to `size` (never truncated). Durable on return.
    fn create_slice(&self, medium: &str, slice: &SliceKey, size: u64)
        -> Result<(), DataPlaneError>;

    /// Extends the slice to `size` bytes (no-op if already at least that).
    /// Existing bytes never move. Durable on return.
    fn grow_slice(&self, medium: &str, slice: &SliceKey, size: u64) -> Result<(), DataPlaneError>;

    /// Removes the slice, its snapshot files and any partial copy of it on
    /// this medium; missing files are fine. Removes the volume's directory
    /// once empty.
    fn delete_slice(&self, medium: &str, slice: &SliceKey) -> Result<(), DataPlaneError>;

    /// Copies the slice from one medium to another: only data extents are read
    /// (SEEK_DATA/SEEK_HOLE) and all-zero blocks stay holes; throttled to
    /// `options.rate_limit`; written to a temporary name and fsynced; the
    /// temporary copy is re-read and its digest compared with the source's;
    /// only a verified copy is renamed to the slice's name (then the directory
    /// is fsynced). The slice's snapshot files travel with it: copied (the
    /// chunks their maps name, every piece read back and compared), durable and
    /// in place before the slice file is renamed in, so an existing slice
    /// file always has its snapshots next to it. `progress(done, total)` is
    /// called as data bytes are copied. On any failure everything the copy
    /// created on the target is removed (and, when verification fails, any
    /// earlier complete target), so no half-copied slice is left behind;
    /// except that a copy stopped by `options.cancel` keeps the temporary
    /// slice file when a checkpoint covers part of it, for a later call
    /// with `options.resume.from` set to that checkpoint to copy only the
    /// rest (see [`CopyResume`]; a resumed copy is verified against a fresh
    /// digest of the whole source).
    fn copy_slice(
        &self,
        from_medium: &str,
        to_medium: &str,
        slice: &SliceKey,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Digest, DataPlaneError>;

    /// Removes the temporary files of an unfinished copy of the slice on
    /// this medium, if any, and snapshot files left without their slice by
    /// an interrupted copy; the slice itself is left alone.
    fn delete_partial_copy(&self, medium: &str, slice: &SliceKey) -> Result<(), DataPlaneError>;

    /// Every slice file (complete or partial) on the medium, in no
    /// particular order. Files that are not slices are ignored.
    fn stored_slices(&self, medium: &str) -> Result<Vec<StoredSlice>, DataPlaneError>;

    /// Bytes of data in slice `slice` on `medium`: what a copy of it
    /// reads and writes (holes, never written, are not copied), in one
    /// pass over its extents (SEEK_DATA/SEEK_HOLE on a file, the slice
    /// protocol's `DataBytes` on a storage node). The slice file only:
    /// its snapshots are not counted.
    fn slice_data_bytes(&self, medium: &str, slice: &SliceKey) -> Result<u64, DataPlaneError>;

    /// Opens a volume for I/O: every slice of the layout, shared by every
    /// connection and by live slice moves.
    fn open_volume(&self, layout: &VolumeLayout) -> Result<Arc<dyn VolumeIo>, DataPlaneError>;

    /// Bytes every snapshot on the medium holds (deltas and maps as
    /// allocated on disk), by volume id and snapshot id, in one pass over
    /// the medium (a stat per snapshot file).
    fn medium_snapshot_usage(
        &self,
        medium: &str,
    ) -> Result<std::collections::BTreeMap<(String, u64), u64>, DataPlaneError>;

    /// Bytes written on the medium: the disk space its slices, their
    /// snapshots and copies in progress take (sparse: what was never
    /// written takes nothing), in one pass (a stat per file).
    fn medium_written_bytes(&self, medium: &str) -> Result<u64, DataPlaneError>;

    /// Sets how many bytes snapshots may hold on the medium (`None`: no
    /// limit, the default). A copy-on-write save that would take the
    /// medium's snapshot bytes over it fails with ENOSPC
    /// (`io::ErrorKind::StorageFull`) before anything is written, so the
    /// write that needed it fails and the volume and its snapshots stay as
    /// they were. Data planes without a notion of logical capacity ignore it.
    fn set_snapshot_budget(&self, _medium: &str, _bytes: Option<u64>) {}

    /// Marks a medium failed (or healthy again) for volumes opened from now on: their slices on it are treated as lost.
    fn set_medium_failed(&self, _medium: &str, _failed: bool) {}

    /// Media on which this data plane has seen I/O fail (a slice read/write/fsync error, or the directory gone)
    /// since start or since `set_medium_failed(m, false)`; the service polls it and records them as Failed.
    fn failed_media(&self) -> Vec<String> {
        Vec::new()
    }

    /// Copies lost alone, on media that still read (a slice or snapshot file of theirs missing), as (medium,
    /// slice), since start, since their file was created or deleted there, or since `set_medium_failed(m,
    /// false)`; the service polls it and records them as lost.
    fn failed_copies(&self) -> Vec<(String, SliceKey)> {
        Vec::new()
    }

    /// Calls `listener` once each time a medium joins [`DataPlane::failed_media`] or a copy joins
    /// [`DataPlane::failed_copies`] because I/O on it failed (read, write, flush, a slice file gone, a copy's
    /// source, a probe), so the service records it at once instead of at its next poll. One listener; a second
    /// call replaces it. Without a listener every record counts as made at once.
    fn on_copy_failure(&self, _listener: CopyFailureListener) {}

    /// Checks that a slice's file and the files of its snapshots `snapshots` (ids) are on the medium and readable,
    /// as I/O would find them. Err names what is not; the copy, or the medium, is then reported failed (see
    /// `failed_copies`, `failed_media`).
    fn probe_slice(
        &self,
        _medium: &str,
        _slice: &SliceKey,
        _snapshots: &[u64],
    ) -> Result<(), DataPlaneError> {
        Ok(())
    }

    /// Serves `medium` of a storage node reached at `endpoint` (see
    /// [`ClusterMedia::add_node_medium`]); true when the medium is new. A
    /// data plane of local media only refuses.
    fn add_node_medium(
        &self,
        _medium: &str,
        endpoint: NodeEndpoint,
    ) -> Result<bool, DataPlaneError> {
        Err(DataPlaneError::UnknownNode(endpoint.node))
    }

    /// The storage node serving `medium`, if a node serves it.
    fn node_of(&self, _medium: &str) -> Option<String> {
        None
    }

    /// Sends `request` to the front of `volume` that storage node `node`
    /// runs (`svs_sliceproto::FrontControl`) and returns its answer. A
    /// data plane that reaches no storage node has none to call.
    fn front_call(&self, node: &str, volume: &str, request: &[u8]) -> std::io::Result<Vec<u8>> {
        let _ = (volume, request);
        Err(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            format!("storage node '{node}' is not reached from here"),
        ))
    }
}

#[cfg(test)]
mod tests;
