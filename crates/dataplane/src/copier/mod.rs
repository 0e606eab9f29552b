//! The one slice copier: a source slice's data extents to a target, holes
//! left holes, paced to a rate, cancellable, checkpointed for a resume,
//! counted ([`CopyStats`], progress) and verified. Offline copies (`copy`)
//! and live moves and rebuilds (`volume::live_copy`) both run it, and both
//! copy a slice's snapshot files with [`SnapshotCopy`].
//!
//! A copy reads a [`CopySource`] (a slice file, or an open slice device)
//! and writes a [`CopyTarget`] (the partial file of the new slice; a slice
//! on a storage node will be another). It verifies in one of two ways
//! ([`Verify`]): each chunk read back from the target as it is written, or
//! the whole target's digest against the source's at the end.

mod snapshots;

pub(crate) use snapshots::{
    create_partial, PartFiles, SnapshotCopy, SnapshotFilesAt, SnapshotParts, SnapshotSource,
    SNAPSHOT_BATCH,
};

use crate::digest::{chunks, data_runs, digest_open_file, BlockHasher, CHUNK};
use crate::extents::{advise_sequential, punch_hole, DataExtents, BLOCK};
use crate::resume::Checkpoints;
use crate::throttle::{Cancelled, Pacer};
use crate::{CopyOptions, CopyStats, Digest};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// Why a copy failed; callers add media and slice names.
#[derive(Debug)]
pub(crate) enum CopyError {
    /// The source failed (`op`: what the copy did).
    Source(&'static str, io::Error),
    /// The target failed.
    Target(&'static str, io::Error),
    Cancelled,
    /// What was read back from the target is not what was written.
    VerifyFailed,
}

impl From<Cancelled> for CopyError {
    fn from(_: Cancelled) -> Self {
        CopyError::Cancelled
    }
}

impl CopyError {
    pub(crate) fn source(op: &'static str) -> impl FnOnce(io::Error) -> CopyError {
        move |e| CopyError::Source(op, e)
    }

    pub(crate) fn target(op: &'static str) -> impl FnOnce(io::Error) -> CopyError {
        move |e| CopyError::Target(op, e)
    }
}

/// What a copy reads: a slice's bytes. Offsets are inside the slice.
pub(crate) trait CopySource {
    /// The slice's size in bytes.
    fn size(&self) -> io::Result<u64>;

    /// Reads exactly `buf.len()` bytes at `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;

    /// The first data extent `(start, end)` in `[from, len)`, if any;
    /// `start` is a multiple of [`BLOCK`], `end` one too or `len`.
    fn next_data(&self, from: u64, len: u64) -> io::Result<Option<(u64, u64)>>;

    /// Data bytes in `[from, len)`.
    fn data_bytes(&self, from: u64, len: u64) -> io::Result<u64>;

    /// A hint that the slice will be read front to back.
    fn will_read_all(&self) {}

    /// The digest of the slice's contents (see [`crate::digest`]), read
    /// through `buf` (at least [`CHUNK`] bytes).
    fn digest(&self, buf: &mut [u8]) -> io::Result<Digest> {
        let len = self.size()?;
        let mut hasher = BlockHasher::new();
        let mut at = 0;
        while let Some((start, end)) = self.next_data(at, len)? {
            for (offset, n) in chunks(start, end, CHUNK as u64) {
                let data = &mut buf[..n];
                self.read_at(data, offset)?;
                hasher.feed(offset, data, |_, _| Ok::<(), io::Error>(()))?;
            }
            at = end;
        }
        Ok(hasher.finish(len))
    }
}

/// Where a copy writes: the new slice, under a temporary name until the
/// copy is complete.
pub(crate) trait CopyTarget {
    /// Writes all of `data` at `offset`.
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()>;

    /// Reads exactly `buf.len()` bytes at `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;

    /// Makes `[offset, offset + len)` a hole (reads as zeros).
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()>;

    /// Makes every write so far durable (before a checkpoint is recorded).
    fn sync_data(&self) -> io::Result<()>;

    /// Makes the whole target durable, data and metadata (a copy's end).
    fn sync_all(&self) -> io::Result<()>;

    /// The digest of the target's contents, read through `buf` (at least
    /// [`CHUNK`] bytes).
    fn digest(&self, buf: &mut [u8]) -> io::Result<Digest>;

    /// A hint: `[offset, offset + len)` is written and may go to the
    /// device now, so the final sync has little left to do.
    fn start_writeback(&self, _offset: u64, _len: u64) {}

    /// How much an unthrottled copy moves to this target per chunk (a
    /// multiple of [`CHUNK`]). A target on a storage node takes more than a
    /// local file: its writes of a chunk are in flight together, and the
    /// copy waits for them once per chunk.
    fn chunk(&self) -> usize {
        CHUNK
    }

    /// Writes the target verifies itself as it makes them, several in
    /// flight while the copy reads on (a target on a storage node: what
    /// [`Verify::ReadBack`] asks, without the bytes coming back); None:
    /// each chunk written, then checked with [`CopyTarget::holds`].
    fn verified_writes(&self) -> Option<Box<dyn VerifiedWrites + '_>> {
        None
    }

    /// Whether the target holds exactly `data` at `offset` (a resync's
    /// compare, see [`Copier::compare_target`]), reading through `scratch`
    /// (at least `data.len()` bytes). Here the target's bytes are read and
    /// compared; a target on a storage node compares digests computed on
    /// the node instead, so its bytes do not travel.
    fn holds(&self, data: &[u8], offset: u64, scratch: &mut [u8]) -> io::Result<bool> {
        let theirs = &mut scratch[..data.len()];
        self.read_at(theirs, offset)?;
        Ok(*theirs == *data)
    }
}

/// Writes in flight to a target, each checked there (see
/// [`CopyTarget::verified_writes`]).
pub(crate) trait VerifiedWrites {
    /// Sends `data` to be written at `offset`; does not wait for it.
    fn send(&mut self, data: &[u8], offset: u64);

    /// Waits for every write sent: whether the target holds each as sent.
    fn finish(self: Box<Self>) -> io::Result<bool>;
}

impl CopySource for File {
    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.read_exact_at(buf, offset)
    }

    fn next_data(&self, from: u64, len: u64) -> io::Result<Option<(u64, u64)>> {
        DataExtents::from(self, from, len).next().transpose()
    }

    fn data_bytes(&self, from: u64, len: u64) -> io::Result<u64> {
        let mut total = 0;
        for extent in DataExtents::from(self, from, len) {
            let (start, end) = extent?;
            total += end.min(len) - start;
        }
        Ok(total)
    }

    fn will_read_all(&self) {
        advise_sequential(self);
    }

    fn digest(&self, buf: &mut [u8]) -> io::Result<Digest> {
        digest_open_file(self, buf)
    }
}

/// Largest single write to a target file. Page-cache writes of this size
/// make the kernel allocate small folios; 1 MiB writes ask for large ones,
/// which on hosts that hand free memory back (virtual machines with page
/// reporting) stall on compaction and refaults.
const WRITE_PIECE: usize = 128 << 10;

impl CopyTarget for File {
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        let mut at = offset;
        for piece in data.chunks(WRITE_PIECE) {
            self.write_all_at(piece, at)?;
            at += piece.len() as u64;
        }
        Ok(())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.read_exact_at(buf, offset)
    }

    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        punch_hole(self, offset, len)
    }

    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }

    fn sync_all(&self) -> io::Result<()> {
        File::sync_all(self)
    }

    fn digest(&self, buf: &mut [u8]) -> io::Result<Digest> {
        digest_open_file(self, buf)
    }

    /// `sync_file_range(SYNC_FILE_RANGE_WRITE)`.
    fn start_writeback(&self, offset: u64, len: u64) {
        let (Ok(from), Ok(n)) = (
            libc::off64_t::try_from(offset),
            libc::off64_t::try_from(len),
        ) else {
            return;
        };
        // SAFETY: plain syscall on a valid, open descriptor; no memory is
        // passed. Only a hint: the final fsync reports any write error.
        unsafe {
            libc::sync_file_range(self.as_raw_fd(), from, n, libc::SYNC_FILE_RANGE_WRITE);
        }
    }
}

/// How a copy checks what it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verify {
    /// Each chunk is checked on the target against the bytes just read
    /// from the source (a live copy: its source changes while it is
    /// copied, so no digest of it would hold): read back and compared here,
    /// or, on a storage node, read back and digested there with a seed
    /// drawn per write, the digest coming back with the write's answer
    /// ([`CopyTarget::verified_writes`]), so the chunk does not cross the
    /// network twice.
    ReadBack,
    /// At the end, the target's digest is compared with the digest of the
    /// bytes the copy read, or of the whole source when the copy resumed
    /// (an offline copy; the caller gets the digest).
    Digest,
}

/// A copy's progress: `done` of `total` bytes (the total grows with what a
/// live copy finds to catch up with).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tally {
    pub(crate) done: u64,
    pub(crate) total: u64,
}

/// What a copy holds while it copies one chunk of the slice's data: a live
/// copy holds the target's slice exclusively, so that a write is either
/// copied or mirrored (see `volume::live_copy`).
pub(crate) trait ChunkHold {
    /// Runs `copy_chunk`, which copies the next chunk and returns its range
    /// `(start, end)`, or `None` when everything is copied; returns what it
    /// returned.
    fn around(&mut self, copy_chunk: &mut CopyChunk<'_>) -> Result<Option<(u64, u64)>, CopyError>;
}

/// One step of [`Copier::copy_data`] (see [`ChunkHold`]).
pub(crate) type CopyChunk<'s> = dyn FnMut() -> Result<Option<(u64, u64)>, CopyError> + 's;

/// Nothing is held: the source does not change while it is copied.
pub(crate) struct Unheld;

impl ChunkHold for Unheld {
    fn around(&mut self, copy_chunk: &mut CopyChunk<'_>) -> Result<Option<(u64, u64)>, CopyError> {
        copy_chunk()
    }
}

/// Smallest I/O chunk when throttled (smaller chunks pace more smoothly).
const MIN_THROTTLED_CHUNK: u64 = 64 << 10;

/// How often a copy measures again what is left of the source (writes into
/// holes ahead of a live copy add to it).
pub(crate) const REMEASURE: Duration = Duration::from_secs(1);

/// The data of one write to a target that verifies its writes
/// ([`Copier::copy_pieces`]): small enough that the target starts on a
/// chunk's first piece while the copy reads the next ones.
const VERIFIED_PIECE: usize = 1 << 20;

/// Bytes of target written between starts of writeback.
const WRITEBACK_STEP: u64 = 16 << 20;

/// One copy run: its pacing, counters, progress and buffers, shared by the
/// slice file and its snapshot files.
pub(crate) struct Copier<'a, 'p> {
    pacer: Pacer<'a>,
    stats: &'a CopyStats,
    verify: Verify,
    /// Bytes per chunk of the data walk when throttled (small, so pacing
    /// is smooth); None: the target's [`CopyTarget::chunk`].
    chunk: Option<u64>,
    /// [`CopyOptions::max_chunk`], a whole number of blocks.
    max_chunk: u64,
    buf: Vec<u8>,
    /// Read-back buffer ([`Verify::ReadBack`]).
    check: Vec<u8>,
    pub(crate) tally: Tally,
    /// Data bytes of the source left to copy, as last measured.
    left: u64,
    /// The target already holds an older version of the slice (a stale
    /// copy being resynced): see [`Copier::compare_target`].
    compare: bool,
    progress: &'p mut dyn FnMut(u64, u64),
}

impl<'a, 'p> Copier<'a, 'p> {
    pub(crate) fn new(
        options: &'a CopyOptions,
        verify: Verify,
        progress: &'p mut dyn FnMut(u64, u64),
    ) -> Self {
        let pacer = Pacer::new(options.rate_limit, &options.budgets, &options.cancel)
            .gated(options.gate.as_deref());
        // At most ~1/10 s of data per chunk when throttled; unthrottled,
        // the target's chunk (see `copy_data`).
        let chunk = pacer
            .rate()
            .map(|rate| (rate / 10 / BLOCK * BLOCK).clamp(MIN_THROTTLED_CHUNK, CHUNK as u64));
        let max_chunk = options
            .max_chunk
            .map_or(u64::MAX, |most| (most / BLOCK * BLOCK).max(BLOCK));
        Copier {
            pacer,
            stats: &options.stats,
            verify,
            chunk,
            max_chunk,
            buf: vec![0u8; CHUNK],
            check: match verify {
                Verify::ReadBack => vec![0u8; CHUNK],
                Verify::Digest => Vec::new(),
            },
            tally: Tally::default(),
            left: 0,
            compare: false,
            progress,
        }
    }

    /// The target holds an older version of the slice (a stale copy of a
    /// returning storage node, resynced in place; DRBD's checksum-based
    /// resync is the model): [`Copier::copy_data`] then walks every chunk,
    /// holes of the source too, compares each with the target and writes
    /// only the chunks that differ — the data, and holes punched where
    /// the source has none and the target has some. Writes are verified
    /// as always; [`CopyStats::rewritten`] counts the bytes rewritten.
    pub(crate) fn compare_target(&mut self) {
        self.compare = true;
        if self.check.is_empty() {
            self.check = vec![0u8; CHUNK];
        }
    }

    /// Resyncs `[start, start + n)` (see [`Copier::compare_target`]): the
    /// source's bytes (zeros where it has a hole, not read) are compared
    /// with the target's, and written only when they differ: the range is
    /// punched out, then its non-zero blocks written and verified as
    /// [`Copier::copy_chunk`] does. `hasher` is fed what was read.
    fn resync_chunk(
        &mut self,
        source: &dyn CopySource,
        target: &dyn CopyTarget,
        start: u64,
        n: usize,
        hasher: Option<&mut BlockHasher>,
    ) -> Result<(), CopyError> {
        let end = start + n as u64;
        let has_data = source
            .next_data(start, end)
            .map_err(CopyError::source("seek"))?
            .is_some();
        let data = &mut self.buf[..n];
        if has_data {
            source
                .read_at(data, start)
                .map_err(CopyError::source("read"))?;
        } else {
            data.fill(0);
        }
        if let Some(hasher) = hasher {
            hasher
                .feed(start, data, |_, _| Ok::<(), io::Error>(()))
                .map_err(CopyError::source("read"))?;
        }
        let same = target
            .holds(data, start, &mut self.check)
            .map_err(CopyError::target("compare"))?;
        self.stats.add_compared(n as u64, !same);
        if same {
            return Ok(());
        }
        target
            .punch_hole(start, n as u64)
            .map_err(CopyError::target("write"))?;
        data_runs(None, start, data, |at, run| target.write_at(run, at))
            .map_err(CopyError::target("write"))?;
        self.verify_chunk(target, start, n)
    }

    /// [`Verify::ReadBack`]: whether the target holds the chunk just
    /// written. A target on a storage node answers with digests it computes
    /// itself ([`CopyTarget::holds`]), so the chunk does not travel back.
    fn verify_chunk(
        &mut self,
        target: &dyn CopyTarget,
        start: u64,
        n: usize,
    ) -> Result<(), CopyError> {
        if self.verify != Verify::ReadBack {
            return Ok(());
        }
        let written = &self.buf[..n];
        if target
            .holds(written, start, &mut self.check)
            .map_err(CopyError::target("verify"))?
        {
            Ok(())
        } else {
            Err(CopyError::VerifyFailed)
        }
    }

    pub(crate) fn stats(&self) -> &'a CopyStats {
        self.stats
    }

    /// Fails when the copy was cancelled.
    pub(crate) fn check(&self) -> Result<(), CopyError> {
        Ok(self.pacer.check()?)
    }

    /// Measures what there is to copy of `source` from `from` on (a
    /// checkpoint, or 0): the progress starts at the data below `from`, of
    /// a total of the source's data and `more` bytes (its snapshots').
    /// Nothing is reported yet (see [`Copier::report`]).
    pub(crate) fn measure(
        &mut self,
        source: &dyn CopySource,
        from: u64,
        more: u64,
    ) -> Result<(), CopyError> {
        let len = source.size().map_err(CopyError::source("stat"))?;
        let seek = || CopyError::source("seek");
        let (left, done) = if self.compare {
            // Every byte is compared, holes too.
            (len.saturating_sub(from), from.min(len))
        } else {
            (
                source.data_bytes(from, len).map_err(seek())?,
                source.data_bytes(0, from.min(len)).map_err(seek())?,
            )
        };
        self.left = left;
        self.tally = Tally {
            done,
            total: done + self.left + more,
        };
        Ok(())
    }

    /// Grows the buffers to hold a chunk of `len` bytes.
    fn fit_buffers(&mut self, len: usize) {
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        if !self.check.is_empty() && self.check.len() < len {
            self.check.resize(len, 0);
        }
    }

    /// Tells the caller's progress callback where the copy stands.
    pub(crate) fn report(&mut self) {
        (self.progress)(self.tally.done, self.tally.total.max(self.tally.done));
    }

    /// `n` more bytes were copied: counted, reported, paced.
    pub(crate) fn copied(&mut self, n: u64) -> Result<(), CopyError> {
        self.stats.add_copied(n);
        self.tally.done += n;
        self.report();
        Ok(self.pacer.pace(self.stats.copied())?)
    }

    /// Copies `[start, start + n)` (`start` a multiple of [`BLOCK`], `n` at
    /// most [`CHUNK`]): the all-zero blocks are not written (holes stay
    /// holes; with `clear` the range is punched out first, for a target
    /// that may hold older bytes there), with [`Verify::ReadBack`] the
    /// range is read back and compared, and `hasher` (a digest-verified
    /// copy's) is fed the bytes read.
    pub(crate) fn copy_chunk(
        &mut self,
        source: &dyn CopySource,
        target: &dyn CopyTarget,
        start: u64,
        n: usize,
        clear: bool,
        hasher: Option<&mut BlockHasher>,
    ) -> Result<(), CopyError> {
        if clear {
            target
                .punch_hole(start, n as u64)
                .map_err(CopyError::target("write"))?;
        }
        // A digest-verified copy checks at its end, not write by write.
        let verified = match self.verify {
            Verify::ReadBack => target.verified_writes(),
            Verify::Digest => None,
        };
        if let Some(writes) = verified {
            return self.copy_pieces(source, writes, start, n, hasher);
        }
        let data = &mut self.buf[..n];
        source
            .read_at(data, start)
            .map_err(CopyError::source("read"))?;
        data_runs(hasher, start, data, |at, run| target.write_at(run, at))
            .map_err(CopyError::target("write"))?;
        self.verify_chunk(target, start, n)
    }

    /// [`Copier::copy_chunk`] to a target that verifies its writes: read a
    /// piece, send its data, read the next while the target writes and
    /// checks it; then wait for them all.
    fn copy_pieces(
        &mut self,
        source: &dyn CopySource,
        mut writes: Box<dyn VerifiedWrites + '_>,
        start: u64,
        n: usize,
        mut hasher: Option<&mut BlockHasher>,
    ) -> Result<(), CopyError> {
        let end = start + n as u64;
        for (at, len) in chunks(start, end, VERIFIED_PIECE as u64) {
            let from = (at - start) as usize;
            let data = &mut self.buf[from..from + len];
            source
                .read_at(data, at)
                .map_err(CopyError::source("read"))?;
            data_runs(hasher.as_deref_mut(), at, data, |at, run| {
                writes.send(run, at);
                Ok::<(), io::Error>(())
            })
            .map_err(CopyError::target("write"))?;
        }
        if writes.finish().map_err(CopyError::target("write"))? {
            Ok(())
        } else {
            Err(CopyError::VerifyFailed)
        }
    }

    /// Copies the source's data from `from` on (0, or a checkpoint: the
    /// target holds the bytes below it) to `target`, chunk by chunk inside
    /// `hold`, reading the source's size again for each chunk (it may grow
    /// while a live copy runs); takes a checkpoint now and then when
    /// `checkpoints` are given; then makes the target durable, takes a
    /// last checkpoint at the end and, with [`Verify::Digest`], checks the
    /// target's digest and returns it.
    pub(crate) fn copy_data(
        &mut self,
        source: &dyn CopySource,
        target: &dyn CopyTarget,
        from: u64,
        mut checkpoints: Option<&mut Checkpoints<'_>>,
        hold: &mut dyn ChunkHold,
    ) -> Result<Option<Digest>, CopyError> {
        source.will_read_all();
        // A resumed copy did not read the part below `from`: it checks
        // against the whole source's digest instead.
        let mut hasher = (self.verify == Verify::Digest && from == 0).then(BlockHasher::new);
        let mut len = source.size().map_err(CopyError::source("stat"))?;
        let mut cursor = from;
        let mut writeback_from = from;
        let mut measured = Instant::now();
        // A resync keeps to CHUNK: it rewrites whole chunks that differ.
        let chunk = self
            .chunk
            .unwrap_or(if self.compare {
                CHUNK as u64
            } else {
                target.chunk() as u64
            })
            .min(self.max_chunk);
        self.fit_buffers(chunk as usize);
        loop {
            self.check()?;
            let copied = hold.around(&mut || {
                len = source.size().map_err(CopyError::source("stat"))?;
                if self.compare {
                    // Every chunk, holes of the source too: the target may
                    // hold older data there.
                    if cursor >= len {
                        return Ok(None);
                    }
                    let end = ((cursor / chunk + 1) * chunk).min(len);
                    let n = (end - cursor) as usize;
                    self.resync_chunk(source, target, cursor, n, hasher.as_mut())?;
                    return Ok(Some((cursor, end)));
                }
                let next = source
                    .next_data(cursor, len)
                    .map_err(CopyError::source("seek"))?;
                let Some((start, end)) = next else {
                    return Ok(None);
                };
                let end = ((start / chunk + 1) * chunk).min(end);
                let n = (end - start) as usize;
                self.copy_chunk(source, target, start, n, false, hasher.as_mut())?;
                Ok(Some((start, end)))
            })?;
            let Some((start, end)) = copied else { break };
            let n = end - start;
            cursor = end;
            if end >= writeback_from + WRITEBACK_STEP {
                target.start_writeback(writeback_from, end - writeback_from);
                writeback_from = end;
            }
            self.stats.add_copied(n);
            self.tally.done += n;
            self.left = self.left.saturating_sub(n);
            if measured.elapsed() >= REMEASURE {
                // Writes into holes ahead of the copy add to what is left
                // (a resync walks every byte: only growth adds to it).
                let left = if self.compare {
                    len.saturating_sub(cursor)
                } else {
                    source
                        .data_bytes(cursor, len)
                        .map_err(CopyError::source("seek"))?
                };
                if left > self.left {
                    self.stats.add_catch_up(left - self.left);
                }
                self.tally.total = (self.tally.total + left).saturating_sub(self.left);
                self.left = left;
                measured = Instant::now();
            }
            self.report();
            if let Some(c) = checkpoints.as_deref_mut().filter(|c| c.due()) {
                c.take(cursor, || target.sync_data())
                    .map_err(CopyError::target("fsync"))?;
            }
            self.pacer.pace(self.stats.copied())?;
        }
        self.check()?;
        // Durable before anyone relies on it; most was written back already.
        target.sync_all().map_err(CopyError::target("fsync"))?;
        let digest = match (self.verify, hasher) {
            (Verify::ReadBack, _) => None,
            (Verify::Digest, Some(hasher)) => Some(hasher.finish(len)),
            (Verify::Digest, None) => Some(
                source
                    .digest(&mut self.buf)
                    .map_err(CopyError::source("verify"))?,
            ),
        };
        if let Some(c) = checkpoints {
            // An interruption from now on (snapshot files, the switch) need
            // not copy the slice's data again.
            c.take(len, || target.sync_data())
                .map_err(CopyError::target("fsync"))?;
        }
        if let Some(digest) = digest {
            let copied = target
                .digest(&mut self.buf)
                .map_err(CopyError::target("verify"))?;
            if copied != digest {
                return Err(CopyError::VerifyFailed);
            }
        }
        Ok(digest)
    }
}

#[cfg(test)]
mod tests;
