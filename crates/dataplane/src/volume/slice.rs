//! One slice of an open volume: its live file, a copy's target, the
//! chunks written since the volume was opened.

use super::device::SliceDevice;
use super::hooks::SliceHooks;
use super::media::NodeTarget;
use crate::copier::CopyTarget;
use crate::digest::CHUNK;
use crate::{LossRecord, SliceKey};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Where a live copy's target is written: the partial file of a local
/// target, or a slice on a storage node.
pub(super) type MirrorTarget = Arc<dyn CopyTarget + Send + Sync>;

/// A target being filled by a live move or rebuild.
pub(super) struct Mirror {
    pub(super) file: MirrorTarget,
    pub(super) medium: String,
    /// Bytes below this offset have been copied; writes there go to the
    /// target as well.
    pub(super) copied_upto: u64,
    /// A write to the target failed: the copy fails, not the client's write.
    pub(super) failed: AtomicBool,
    /// Mirrored writes since the last flush: a flush makes them durable on
    /// the target too, so a checkpoint below them stays true after a crash.
    pub(super) dirty: AtomicBool,
}

/// A slice open for I/O (see [`SliceDevice`]).
pub(crate) type Live = Arc<dyn SliceDevice>;

/// The place a slice was switched away from, kept until the caller has
/// committed the new placement (finish) or gone back to it (abort).
pub(super) struct Retiring {
    pub(super) medium: String,
    /// The slice as it was there (`None`: it could not be opened).
    pub(super) live: Option<Live>,
    /// A move's old place gets every write, discard and flush until the
    /// move finishes, so going back loses nothing; a rebuild's is lost.
    pub(super) mirrored: bool,
    /// Mirrored writes since the last flush.
    pub(super) dirty: AtomicBool,
    /// The new place, removed if the switch is undone.
    pub(super) placed: Placed,
}

/// What a switch placed on the new medium.
pub(super) enum Placed {
    /// The files on a medium of this host.
    Files(Vec<PathBuf>),
    /// The slice on a storage node.
    Node(Arc<dyn NodeTarget>),
}

pub(super) struct SliceState {
    pub(super) medium: String,
    /// `None` when the slice could not be opened (it is lost).
    pub(super) live: Option<Live>,
    pub(super) mirror: Option<Mirror>,
    pub(super) retiring: Option<Retiring>,
}

impl SliceState {
    /// The old place a switched move still writes to.
    pub(super) fn mirrored_retiring(&self) -> Option<(&Retiring, &Live)> {
        let r = self.retiring.as_ref().filter(|r| r.mirrored)?;
        Some((r, r.live.as_ref()?))
    }
}

/// The [`CHUNK`]s of a column written (or discarded) since the volume was
/// opened. A copy resumed from a checkpoint copies these again below its
/// checkpoint: writes made before the crash reached its target (mirrored,
/// and fsynced by every flush and by the checkpoint itself), but writes made
/// after the restart and before the resumed copy mirrors again did not.
/// One bit per MiB of the column (128 KiB for a TiB); chunks past the size
/// the volume had when opened (it grew since) are kept as one lowest index.
pub(super) struct WrittenChunks {
    pub(super) bits: Vec<AtomicU64>,
    /// Lowest chunk written at or past `bits`' end (u64::MAX: none).
    pub(super) beyond: AtomicU64,
}

impl WrittenChunks {
    pub(super) fn new(column_bytes: u64) -> WrittenChunks {
        let chunks = column_bytes.div_ceil(CHUNK as u64);
        WrittenChunks {
            bits: (0..chunks.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            beyond: AtomicU64::new(u64::MAX),
        }
    }

    /// `[offset, offset + len)` of the column was written.
    pub(super) fn mark(&self, offset: u64, len: u64) {
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
    pub(super) fn below(&self, offset: u64) -> Vec<u64> {
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
pub(super) struct SliceIo {
    pub(super) key: SliceKey,
    pub(super) state: RwLock<SliceState>,
    /// Written since the last flush.
    pub(super) dirty: AtomicBool,
    /// Held by a flush from taking `dirty` until its fsync returned: a
    /// concurrent flush (another connection's) that finds `dirty` clear
    /// must not answer before the fsync that cleared it is done.
    pub(super) syncing: Mutex<()>,
    /// Its medium failed or its I/O errored: I/O skips it until a rebuild
    /// replaces it.
    pub(super) lost: AtomicBool,
    /// The record of its loss this opening reported, while the service may
    /// not have it yet (see [`LossRecord`]).
    pub(super) loss: Mutex<Option<LossRecord>>,
    /// A live move or rebuild reads or fills it (see [`SliceIo::claim`]).
    pub(super) copying: AtomicBool,
    /// A rebuild switched it in this opening (its place holds every write
    /// since): a repeated rebuild to that place is in place. A slice that
    /// was usable since the volume opened may be a stale copy the store
    /// says is lost, and is never taken as rebuilt.
    pub(super) rebuilt: AtomicBool,
    /// When a read last checked the file is linked (ms since the volume was
    /// opened, plus one; 0: never).
    pub(super) link_checked_ms: AtomicU64,
    /// Fault hooks of test builds (empty otherwise).
    pub(super) hooks: SliceHooks,
}

impl SliceIo {
    pub(super) fn read_state(&self) -> io::Result<RwLockReadGuard<'_, SliceState>> {
        self.state
            .read()
            .map_err(|_| io::Error::other("slice lock poisoned"))
    }

    pub(super) fn write_state(&self) -> io::Result<RwLockWriteGuard<'_, SliceState>> {
        self.state
            .write()
            .map_err(|_| io::Error::other("slice lock poisoned"))
    }

    pub(super) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// Keeps the record of the slice's loss (one kept and not recorded
    /// stays: writes wait for the first, or fail with it refused).
    pub(super) fn keep_loss(&self, record: LossRecord) {
        let mut loss = self.loss.lock().unwrap_or_else(|p| p.into_inner());
        if loss.as_ref().is_none_or(LossRecord::is_recorded) {
            *loss = Some(record);
        }
    }

    /// The record of the slice's loss while it is not recorded (pending,
    /// or refused).
    pub(super) fn pending_loss(&self) -> Option<LossRecord> {
        if !self.is_lost() {
            return None;
        }
        let loss = self.loss.lock().unwrap_or_else(|p| p.into_inner());
        loss.as_ref().filter(|r| !r.is_recorded()).cloned()
    }

    /// The slice's file and snapshots if it is healthy.
    pub(super) fn healthy<'a>(&self, state: &'a SliceState) -> Option<&'a Live> {
        if self.is_lost() {
            return None;
        }
        state.live.as_ref()
    }

    /// Whether I/O may use the slice (takes its lock shared).
    pub(super) fn usable(&self) -> bool {
        !self.is_lost() && self.state.read().is_ok_and(|s| s.live.is_some())
    }

    /// Claims the slice for one copy (as its source or its target) until
    /// [`SliceIo::release`]: a rebuild reading a slice that a move switches
    /// away would miss the writes after it.
    pub(super) fn claim(&self) -> io::Result<()> {
        if self.copying.swap(true, Ordering::AcqRel) {
            return Err(io::Error::new(
                io::ErrorKind::ResourceBusy,
                format!(
                    "slice {} is already being copied",
                    super::layout::label(&self.key)
                ),
            ));
        }
        Ok(())
    }

    pub(super) fn release(&self) {
        self.copying.store(false, Ordering::Release);
    }

    /// Fails like a broken disk in tests that ask for it; a no-op otherwise.
    pub(super) fn fault(&self) -> io::Result<()> {
        self.hooks.fault()
    }
}
