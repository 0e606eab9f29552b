//! Held writes: the first write to a chunk after a snapshot without waiting
//! for the chunk's save to be durable.
//!
//! A save must be durable before the write that needs it can reach the
//! device, or a power cut could leave the live slice overwritten and the
//! snapshot without the old bytes. Waiting for two `fdatasync`s on every
//! first write made those writes 15 to 25 times slower than plain ones. A
//! slice opened for serving ([`SliceSnapshots::hold_writes`]) does this
//! instead, for a write or discard that needs a save (or touches a chunk a
//! held write touches):
//! 1. *claim*: the chunk is pending for the newest snapshot (its budget
//!    taken); nothing is copied: the old bytes stay in the live slice,
//!    which no write changes until the save is made, and the snapshot
//!    reads them there (the chunk is not in its map);
//! 2. *hold*: the write is appended to the slice's journal (`<stem>.journal`,
//!    a checksummed record with its data; no sync) instead of the live
//!    slice, and is answered. A later write to a chunk a held write
//!    touches is held too, so the order of writes is kept.
//!
//! A *commit* makes them real, in this order: the pending chunks' old bytes
//! copied from the live slice into the delta and `fdatasync`ed, their
//! records appended to the map and `fdatasync`ed (the snapshot now reads
//! them from the delta), the held writes applied to the live slice in
//! order, then the journal removed and the directory synced. It runs when
//! the client flushes (or writes with FUA), before a read or an extent
//! lookup of the live slice that held writes touch, before a copy reads the
//! snapshot files, before a snapshot is created, deleted or rolled back to,
//! when the slice is closed, and when a slice holds [`HELD_BYTES`] of
//! journal or [`HELD_WRITES`] writes.
//!
//! Why a snapshot is never torn: the live slice's bytes of a chunk change
//! only in step 3 of a commit (or in a replay, below), after the chunk's old
//! bytes and its record are on the device. Before that the snapshot reads
//! the chunk from the live slice, whose bytes there are the snapshot's: on
//! the device after a power cut too, since nothing wrote them. A record
//! whose delta bytes are not on the device is never on the device either
//! (the delta is synced before the map is written).
//!
//! Why nothing acknowledged is lost: a held write is in the journal before
//! it is answered. If svs stops (killed, or the slice not closed), the
//! journal is in the page cache, and the next open replays it: each record
//! in order, as a write with a synchronous save, then the live slice
//! synced and the journal removed. After a power cut only writes that the
//! client had not flushed can be missing (a flush commits first): a torn
//! record fails its checksum and ends the replay there. A journal a commit
//! removed never comes back to be replayed over later writes: the removal
//! is on the device before the commit ends. Each journal file's records are
//! checksummed with a generation of its own, so no bytes of another file
//! can pass for one of its records.

use super::{chunk_range, le_u64, SliceSnapshots, Snapshot};
use crate::extents::punch_hole;
use crate::fsutil::{fsync_dir, remove_if_exists};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::MutexGuard;
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

const MAGIC: &[u8; 8] = b"SVSHELD1";
const HEADER_LEN: u64 = 32;
const RECORD_HEADER: usize = 32;
const KIND_WRITE: u8 = 1;
const KIND_DISCARD: u8 = 2;

/// Journal bytes one slice holds at most before it commits.
pub(crate) const HELD_BYTES: u64 = 64 << 20;
/// Held writes one slice keeps at most before it commits.
pub(crate) const HELD_WRITES: usize = 16 * 1024;

/// The name of the journal of held writes next to the slice `<stem>.slice`.
pub(crate) fn journal_name(stem: &str) -> String {
    format!("{stem}.journal")
}

/// What a held request does to the live slice.
pub(super) enum Change<'a> {
    Write(&'a [u8]),
    Discard(u64),
}

/// One held request: its range, and where its data is in the journal.
#[derive(Debug, Clone, Copy)]
struct HeldWrite {
    discard: bool,
    offset: u64,
    len: u64,
    data_at: u64,
}

/// The held writes of a slice and their journal.
#[derive(Default)]
pub(super) struct Held {
    journal: Option<File>,
    generation: u64,
    /// Bytes of the journal in use (its header included once opened).
    len: u64,
    writes: Vec<HeldWrite>,
}

fn encode_header(generation: u64) -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[..8].copy_from_slice(MAGIC);
    h[8..16].copy_from_slice(&generation.to_le_bytes());
    let sum = xxh3_64(&h[..24]);
    h[24..].copy_from_slice(&sum.to_le_bytes());
    h
}

/// A record: kind, offset, length, then a checksum of those and the data
/// seeded with the journal's generation; then the data (a write's).
fn encode_record(generation: u64, kind: u8, offset: u64, len: u64, data: &[u8]) -> Vec<u8> {
    let mut r = Vec::with_capacity(RECORD_HEADER + data.len());
    r.push(kind);
    r.extend_from_slice(&[0u8; 7]);
    r.extend_from_slice(&offset.to_le_bytes());
    r.extend_from_slice(&len.to_le_bytes());
    r.extend_from_slice(&[0u8; 8]);
    r.extend_from_slice(data);
    let sum = record_sum(generation, &r);
    r[24..32].copy_from_slice(&sum.to_le_bytes());
    r
}

/// The checksum of a record whose checksum field is zero or ignored.
fn record_sum(generation: u64, record: &[u8]) -> u64 {
    let mut head = [0u8; RECORD_HEADER];
    head[..24].copy_from_slice(&record[..24]);
    xxh3_64_with_seed(
        &record[RECORD_HEADER..],
        xxh3_64_with_seed(&head, generation),
    )
}

/// The valid records of a journal's bytes, in order: those of the header's
/// generation up to the first torn or foreign one.
fn parse(bytes: &[u8]) -> Vec<(u8, u64, u64, &[u8])> {
    let mut out = Vec::new();
    let Some(header) = bytes.get(..HEADER_LEN as usize) else {
        return out;
    };
    if &header[..8] != MAGIC || le_u64(&header[24..]) != xxh3_64(&header[..24]) {
        return out;
    }
    let generation = le_u64(&header[8..]);
    let mut at = HEADER_LEN as usize;
    while let Some(head) = bytes.get(at..at + RECORD_HEADER) {
        let (kind, offset, len) = (head[0], le_u64(&head[8..]), le_u64(&head[16..]));
        let data_len = match kind {
            KIND_WRITE => usize::try_from(len).unwrap_or(usize::MAX),
            KIND_DISCARD => 0,
            _ => break,
        };
        let Some(record) = at
            .checked_add(RECORD_HEADER + data_len)
            .and_then(|end| bytes.get(at..end))
        else {
            break;
        };
        if record_sum(generation, record) != le_u64(&head[24..]) {
            break;
        }
        out.push((kind, offset, len, &record[RECORD_HEADER..]));
        at += record.len();
    }
    out
}

impl SliceSnapshots {
    /// From now on, writes that need a save are held (see the module docs):
    /// for a slice being served, whose owner commits on close
    /// ([`SliceSnapshots::commit`]).
    pub fn hold_writes(&self) {
        self.hold_enabled.store(true, Ordering::Relaxed);
    }

    fn journal_path(&self) -> PathBuf {
        self.dir.join(journal_name(&self.stem))
    }

    fn held_lock(&self) -> io::Result<MutexGuard<'_, Held>> {
        self.held
            .lock()
            .map_err(|_| io::Error::other("held writes lock poisoned"))
    }

    /// Holds a write or discard of `[offset, offset + len)` (under the
    /// write lock): claims the saves it needs, appends it to the journal.
    /// Commits when the slice holds too much.
    pub(super) fn hold(
        &self,
        snaps: &mut [Snapshot],
        live: &File,
        offset: u64,
        change: Change<'_>,
    ) -> io::Result<()> {
        let (kind, len, data) = match change {
            Change::Write(data) => (KIND_WRITE, data.len() as u64, data),
            Change::Discard(len) => (KIND_DISCARD, len, &[][..]),
        };
        self.stage(snaps, live, offset, len)?;
        let Some(newest) = snaps.last_mut() else {
            return Ok(());
        };
        let mut held = self.held_lock()?;
        if held.journal.is_none() {
            // Each journal file has a generation of its own: no record of
            // another file's can count in it.
            held.generation = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1);
            self.step()?;
            let journal = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(self.journal_path())?;
            self.step()?;
            journal.write_all_at(&encode_header(held.generation), 0)?;
            held.journal = Some(journal);
            held.len = HEADER_LEN;
        }
        let record = encode_record(held.generation, kind, offset, len, data);
        let at = held.len;
        self.step()?;
        if let Some(journal) = &held.journal {
            journal.write_all_at(&record, at)?;
        }
        held.len += record.len() as u64;
        held.writes.push(HeldWrite {
            discard: kind == KIND_DISCARD,
            offset,
            len,
            data_at: at + RECORD_HEADER as u64,
        });
        newest.held_chunks.extend(chunk_range(offset, len));
        self.holding.store(true, Ordering::Release);
        let full = held.len >= HELD_BYTES || held.writes.len() >= HELD_WRITES;
        drop(held);
        if full {
            self.commit_locked(snaps, live)?;
        }
        Ok(())
    }

    /// Commits the held writes, if any (see the module docs).
    pub fn commit(&self, live: &File) -> io::Result<()> {
        if !self.holding.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut snaps = self.write_lock()?;
        self.commit_locked(&mut snaps, live)
    }

    /// Commits the held writes if one touches `[offset, offset + len)`:
    /// before the live slice's bytes there are read.
    pub fn commit_range(&self, live: &File, offset: u64, len: u64) -> io::Result<()> {
        if self.holds_in(offset, len)? {
            self.commit(live)?;
        }
        Ok(())
    }

    /// Whether writes are held in `[offset, offset + len)`: a read there
    /// must commit first.
    pub fn holds_in(&self, offset: u64, len: u64) -> io::Result<bool> {
        if !self.holding.load(Ordering::Acquire) {
            return Ok(false);
        }
        let snaps = self.read_lock()?;
        Ok(snaps.last().is_some_and(|newest| {
            chunk_range(offset, len).any(|c| newest.held_chunks.contains(&c))
        }))
    }

    /// [`SliceSnapshots::commit`] under the write lock. On error what is
    /// held stays held (a later commit, or the replay, applies it again in
    /// order: applying a held write twice leaves the same bytes).
    pub(super) fn commit_locked(&self, snaps: &mut [Snapshot], live: &File) -> io::Result<()> {
        if !self.holding.load(Ordering::Acquire) {
            return Ok(());
        }
        let Some(newest) = snaps.last_mut() else {
            return Ok(());
        };
        self.persist(newest, live)?;
        let mut held = self.held_lock()?;
        let mut buf = Vec::new();
        if let Some(journal) = &held.journal {
            for w in &held.writes {
                self.step()?;
                if w.discard {
                    punch_hole(live, w.offset, w.len)?;
                } else {
                    buf.resize(w.len as usize, 0);
                    journal.read_exact_at(&mut buf, w.data_at)?;
                    live.write_all_at(&buf, w.offset)?;
                }
            }
        }
        // Gone for good before any later write reaches the live slice.
        if held.journal.is_some() {
            self.step()?;
            remove_if_exists(&self.journal_path())?;
            self.step()?;
            fsync_dir(&self.dir)?;
            held.journal = None;
            held.len = 0;
        }
        held.writes.clear();
        newest.held_chunks.clear();
        self.holding.store(false, Ordering::Release);
        Ok(())
    }

    /// Replays the journal a stopped process left (see the module docs):
    /// its valid records in order as writes with a synchronous save, then
    /// the live slice synced and the journal removed.
    pub(super) fn replay(&self, slice_path: &Path) -> io::Result<()> {
        let path = self.journal_path();
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let records = parse(&bytes);
        if !records.is_empty() {
            let live = OpenOptions::new().read(true).write(true).open(slice_path)?;
            let mut snaps = self.write_lock()?;
            // Answered writes: a full snapshot budget does not refuse them.
            self.replaying.store(true, Ordering::Relaxed);
            for (kind, offset, len, data) in records {
                self.save(&mut snaps, &live, offset, len)?;
                if kind == KIND_DISCARD {
                    punch_hole(&live, offset, len)?;
                } else {
                    live.write_all_at(data, offset)?;
                }
            }
            live.sync_data()?;
            self.replaying.store(false, Ordering::Relaxed);
        }
        remove_if_exists(&path)?;
        fsync_dir(&self.dir)
    }
}
