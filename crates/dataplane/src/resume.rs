//! Resumable copies: durable checkpoints of a slice copy, and what a copy
//! tells its caller about itself (where it resumed, what it copied, what it
//! had to catch up with).
//!
//! A checkpoint `offset` means: the target's partial file holds the
//! source's slice-file bytes below `offset`, verified by reading them back,
//! and they were fsynced before the checkpoint was handed to the caller to
//! record. A copy given such an offset ([`CopyResume::from`]) reopens the
//! partial file instead of creating it and copies only from there; when the
//! partial file is not there (or not of the source's length) it tells the
//! caller to forget the checkpoint before it writes anything, so a recorded
//! checkpoint never points into a file that was started again.

use crate::extents::punch_hole;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Records a checkpoint (see the module docs); `0` forgets it.
pub type CheckpointFn = dyn Fn(u64) -> Result<(), String> + Send + Sync;

/// Where a copy starts and how it records its checkpoints.
#[derive(Clone, Default)]
pub struct CopyResume {
    /// A recorded checkpoint to resume from; 0 copies from the start.
    pub from: u64,
    /// Where checkpoints go; `None` takes none.
    pub record: Option<Arc<CheckpointFn>>,
    /// A checkpoint is taken once at least this many bytes were copied
    /// since the last one and at least [`CopyResume::min_interval`] passed
    /// (whichever comes later), so the store is not hammered.
    pub every_bytes: u64,
    pub min_interval: Duration,
}

impl fmt::Debug for CopyResume {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CopyResume")
            .field("from", &self.from)
            .field("records", &self.record.is_some())
            .field("every_bytes", &self.every_bytes)
            .field("min_interval", &self.min_interval)
            .finish()
    }
}

/// The latest durable checkpoint of a running copy, shared between the
/// copy's thread (which sets it once the target is synced below it) and
/// the caller (which records it in its own time: a checkpoint recorded late
/// only makes a resume start earlier).
#[derive(Debug, Clone, Default)]
pub struct LatestCheckpoint(Arc<AtomicU64>);

impl LatestCheckpoint {
    /// The latest checkpoint (0: none yet).
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    fn set(&self, offset: u64) {
        self.0.fetch_max(offset, Ordering::AcqRel);
    }
}

impl CopyResume {
    /// Resumes at `from`, checkpointing every `every_bytes` (and at most
    /// once a second) into `latest` for the caller to record.
    pub fn publishing_to(from: u64, every_bytes: u64, latest: &LatestCheckpoint) -> CopyResume {
        let latest = latest.clone();
        CopyResume::new(
            from,
            every_bytes,
            Arc::new(move |offset| {
                latest.set(offset);
                Ok(())
            }),
        )
    }

    /// Checkpoints every `every_bytes` (and at most once a second).
    pub fn new(from: u64, every_bytes: u64, record: Arc<CheckpointFn>) -> CopyResume {
        CopyResume {
            from,
            record: Some(record),
            every_bytes,
            min_interval: Duration::from_secs(1),
        }
    }

    /// The copy starts from zero although a checkpoint was given: the
    /// checkpoint is forgotten first, and the copy fails if it cannot be.
    pub(crate) fn restart(&self) -> io::Result<()> {
        match &self.record {
            Some(record) if self.from > 0 => record(0)
                .map_err(|e| io::Error::other(format!("cannot forget the copy's checkpoint: {e}"))),
            _ => Ok(()),
        }
    }
}

/// The figures of a copy run at one moment (see [`CopyStats`]): what a
/// copy run elsewhere (a storage node's front) reports, and its caller
/// shows as its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyCounts {
    pub resumed_at: u64,
    pub copied: u64,
    pub catch_up: u64,
    pub compared: u64,
    pub rewritten: u64,
    pub checkpoint: u64,
}

/// Counters of one copy run, shared with its caller (cheap to clone).
#[derive(Debug, Clone, Default)]
pub struct CopyStats(Arc<Counters>);

#[derive(Debug, Default)]
struct Counters {
    resumed_at: AtomicU64,
    copied: AtomicU64,
    catch_up: AtomicU64,
    checkpoint: AtomicU64,
    compared: AtomicU64,
    rewritten: AtomicU64,
}

impl CopyStats {
    /// The slice-file offset this run started from (0: the start).
    pub fn resumed_at(&self) -> u64 {
        self.0.resumed_at.load(Ordering::Relaxed)
    }

    /// Bytes this run read from the source and wrote to the target (what
    /// it copied; verification reads are not counted).
    pub fn copied(&self) -> u64 {
        self.0.copied.load(Ordering::Relaxed)
    }

    /// Bytes found to copy that the estimate at the start did not hold:
    /// writes made during the move (data written into holes ahead of the
    /// copy, copy-on-write saves of snapshots, ranges written while the copy
    /// was interrupted).
    pub fn catch_up(&self) -> u64 {
        self.0.catch_up.load(Ordering::Relaxed)
    }

    /// Bytes of an older copy on the target this run compared with the
    /// source (a resync in place; 0 for a copy onto a new slice).
    pub fn compared(&self) -> u64 {
        self.0.compared.load(Ordering::Relaxed)
    }

    /// Of [`CopyStats::compared`], the bytes that differed and were
    /// rewritten (or punched out where the source has a hole).
    pub fn rewritten(&self) -> u64 {
        self.0.rewritten.load(Ordering::Relaxed)
    }

    /// Every figure at once.
    pub fn counts(&self) -> CopyCounts {
        CopyCounts {
            resumed_at: self.resumed_at(),
            copied: self.copied(),
            catch_up: self.catch_up(),
            compared: self.compared(),
            rewritten: self.rewritten(),
            checkpoint: self.checkpoint(),
        }
    }

    /// Takes the figures of a copy run elsewhere.
    pub fn set_counts(&self, counts: &CopyCounts) {
        let c = &self.0;
        c.resumed_at.store(counts.resumed_at, Ordering::Relaxed);
        c.copied.store(counts.copied, Ordering::Relaxed);
        c.catch_up.store(counts.catch_up, Ordering::Relaxed);
        c.compared.store(counts.compared, Ordering::Relaxed);
        c.rewritten.store(counts.rewritten, Ordering::Relaxed);
        c.checkpoint.store(counts.checkpoint, Ordering::Relaxed);
    }

    pub(crate) fn add_compared(&self, n: u64, rewritten: bool) {
        self.0.compared.fetch_add(n, Ordering::Relaxed);
        if rewritten {
            self.0.rewritten.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The last checkpoint this run recorded (0: none).
    pub fn checkpoint(&self) -> u64 {
        self.0.checkpoint.load(Ordering::Relaxed)
    }

    pub(crate) fn resumed(&self, at: u64) {
        self.0.resumed_at.store(at, Ordering::Relaxed);
    }

    pub(crate) fn add_copied(&self, n: u64) {
        self.0.copied.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn add_catch_up(&self, n: u64) {
        self.0.catch_up.fetch_add(n, Ordering::Relaxed);
    }
}

/// Decides when a checkpoint is due and records it.
pub(crate) struct Checkpoints<'a> {
    resume: &'a CopyResume,
    stats: &'a CopyStats,
    /// `stats.copied()` at the last checkpoint.
    copied_then: u64,
    at: Instant,
}

impl<'a> Checkpoints<'a> {
    pub(crate) fn new(resume: &'a CopyResume, stats: &'a CopyStats) -> Self {
        Checkpoints {
            resume,
            stats,
            copied_then: stats.copied(),
            at: Instant::now(),
        }
    }

    /// Whether a checkpoint is due now.
    pub(crate) fn due(&self) -> bool {
        self.resume.record.is_some()
            && self.stats.copied() - self.copied_then >= self.resume.every_bytes
            && self.at.elapsed() >= self.resume.min_interval
    }

    /// Makes the target durable (`make_durable`), then records that every
    /// byte below `offset` is there. A checkpoint the caller could not
    /// record is only logged: the copy goes on, a resume starts earlier.
    pub(crate) fn take(
        &mut self,
        offset: u64,
        make_durable: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        let Some(record) = &self.resume.record else {
            return Ok(());
        };
        make_durable()?;
        match record(offset) {
            Ok(()) => self.stats.0.checkpoint.store(offset, Ordering::Relaxed),
            Err(e) => {
                tracing::warn!(offset, error = %e, "cannot record a copy checkpoint; the copy goes on")
            }
        }
        self.copied_then = self.stats.copied();
        self.at = Instant::now();
        Ok(())
    }
}

/// Reopens the partial file of an interrupted copy to resume at `from`:
/// only when it is there with the source's length `len`. What lies at or
/// beyond `from` is cleared (punched out), since bytes copied after the
/// last checkpoint may since have changed in the source.
pub(crate) fn reopen_partial(partial: &Path, len: u64, from: u64) -> Option<File> {
    if from == 0 || from > len {
        return None;
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(partial)
        .ok()?;
    if file.metadata().ok()?.len() != len {
        return None;
    }
    if from < len {
        punch_hole(&file, from, len - from).ok()?;
    }
    Some(file)
}
