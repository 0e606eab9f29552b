//! Copy-on-write snapshots of one slice file (ext4 has no reflinks).
//!
//! Each snapshot `s{id}` of slice `c{copy}-k{column}` is two files next to it:
//! - `c{copy}-k{column}.s{id}.delta`: sparse; holds, at the chunk's own
//!   offset, the content a chunk had when it was first written after the
//!   snapshot (while the snapshot was the newest);
//! - `c{copy}-k{column}.s{id}.map`: the chunk map, an append-only log: a
//!   checksummed header (slice size at the snapshot, chunk size), then one
//!   24-byte checksummed record per saved chunk ("data in the delta" or
//!   "was zero"), or the "being deleted" mark. A log makes each first write
//!   cost one small append instead of rewriting the whole map (temp + rename
//!   would be O(map) per chunk); a torn tail record fails its checksum and is
//!   cut off on open, and only records made durable before the in-place write
//!   count. The map's existence is what makes a snapshot exist: it is written
//!   to a temporary name and renamed in (creation is O(1), no data copied),
//!   and removed first on deletion.
//!
//! Read of snapshot S at chunk c: the first of S, S+1, ..., newest that
//! holds c, else the live slice. A write first saves every chunk it touches
//! that the newest snapshot does not hold yet (durably), then writes in place.
//!
//! Locking: one `RwLock` per slice. Reads of snapshots and writes to chunks
//! the newest snapshot already holds share it; a copy-on-write, snapshot
//! creation, deletion and rollback hold it exclusively, so a snapshot read
//! never sees a live chunk between its save and its overwrite.

use crate::digest::is_zero;
use crate::extents::{allocation, punch_hole, DataExtents, BLOCK};
use crate::fsutil::{fsync_dir, remove_if_exists, slice_stem};
use crate::space::SpaceAccount;

mod held;

pub(crate) use held::journal_name;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use xxhash_rust::xxh3::xxh3_64;

/// Copy-on-write unit: 64 KiB. Small enough that a 4 KiB random write after
/// a snapshot copies only 16x its size (1 MiB stripes would copy 256x), large
/// enough that the in-memory map of a fully rewritten 64 GiB slice stays at
/// ~1 M entries and sequential writes save in large pieces; a multiple of
/// every filesystem block size, so holes stay holes.
pub const COW_CHUNK: u64 = 64 * 1024;

const MAGIC: &[u8; 8] = b"SVSSNAP1";
const HEADER_LEN: usize = 32;
const RECORD_LEN: usize = 24;
const TAG_DATA: u8 = 1;
const TAG_ZERO: u8 = 2;
const TAG_DELETING: u8 = 3;

/// What a snapshot holds for one chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Saved {
    /// The chunk's content is in the delta at the chunk's offset.
    Data,
    /// The chunk was all zeros (or a hole): nothing stored.
    Zero,
}

struct Snapshot {
    id: u64,
    /// Slice size when the snapshot was taken; the snapshot ends there.
    size: u64,
    delta: File,
    log: File,
    log_len: u64,
    chunks: HashMap<u64, Saved>,
    /// Chunks claimed for a save not made yet (so not in the map, nor in
    /// `chunks`), with the bytes of each the live slice has (0: a hole):
    /// their live bytes are still the snapshot's, because every write to
    /// them is held until the save is durable (the newest only).
    pending: HashMap<u64, u64>,
    /// Budget taken for the pending saves, settled when they are made.
    reserved: Vec<crate::space::Reservation>,
    /// Chunks a held write touches: every later write to them is held too,
    /// and a read of them commits first (the newest only).
    held_chunks: HashSet<u64>,
    /// Marked for deletion: finished by the next `delete` or `open`.
    deleting: bool,
}

/// A snapshot of a slice as listed by [`SliceSnapshots::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    pub id: u64,
    /// Bytes of the slice the snapshot covers (its size when taken).
    pub size: u64,
    /// Bytes allocated on disk by the snapshot's delta and map.
    pub used_bytes: u64,
}

/// Part of a snapshot's map (see [`SliceSnapshots::map_since`]).
pub(crate) struct MapTail {
    pub(crate) bytes: Vec<u8>,
    /// Map length after these bytes.
    pub(crate) end: u64,
    /// Chunks the records in `bytes` put in the delta.
    pub(crate) data_chunks: Vec<u64>,
}

impl MapTail {
    /// The map bytes `bytes` read from offset `from`, the map being `end`
    /// bytes long after them.
    pub(crate) fn new(bytes: Vec<u8>, from: u64, end: u64) -> MapTail {
        let records_from = from.max(HEADER_LEN as u64);
        let skip = (records_from - from) as usize;
        let data_chunks = bytes
            .get(skip..)
            .unwrap_or_default()
            .chunks_exact(RECORD_LEN)
            .filter(|r| r[0] == TAG_DATA)
            .map(|r| le_u64(&r[8..]))
            .collect();
        MapTail {
            bytes,
            end,
            data_chunks,
        }
    }
}

/// Name of snapshot `id`'s delta file next to the slice named `<stem>.slice`.
pub(crate) fn delta_name(stem: &str, id: u64) -> String {
    format!("{stem}.s{id}.delta")
}

/// Name of snapshot `id`'s map file next to the slice named `<stem>.slice`.
pub(crate) fn map_name(stem: &str, id: u64) -> String {
    format!("{stem}.s{id}.map")
}

/// The snapshot id and kind (`delta`, `map`, `map.tmp`, or a copy's
/// `*.partial`) of a file name of the slice `<stem>.slice`; `None` for
/// files that are not its snapshot files.
pub(crate) fn parse_snapshot_file<'a>(stem: &str, name: &'a str) -> Option<(u64, &'a str)> {
    let (id, kind) = name
        .strip_prefix(stem)?
        .strip_prefix(".s")?
        .split_once('.')?;
    Some((id.parse().ok()?, kind))
}

/// Removes the snapshot files of the slice at `slice_path` (all of them, or
/// only unfinished copies' `*.partial` files); a missing directory is
/// fine. Returns whether anything was removed.
pub(crate) fn remove_snapshot_files(slice_path: &Path, partial_only: bool) -> io::Result<bool> {
    let Some(stem) = slice_stem(slice_path) else {
        return Ok(false);
    };
    let dir = slice_path.parent().unwrap_or(Path::new("."));
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let mut removed = false;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some((_, kind)) = name.to_str().and_then(|n| parse_snapshot_file(stem, n)) else {
            continue;
        };
        if !partial_only || kind.ends_with(".partial") {
            remove_if_exists(&entry.path())?;
            removed = true;
        }
    }
    // A journal of held writes goes with its slice.
    if !partial_only {
        remove_if_exists(&dir.join(journal_name(stem)))?;
    }
    Ok(removed)
}

/// Length of the well-formed prefix of a map: its header (which must be
/// valid, with our chunk size), then the records up to the first torn one
/// (as [`SliceSnapshots::open`] cuts a torn tail off).
pub(crate) fn valid_map_len(bytes: &[u8]) -> io::Result<usize> {
    let header = bytes
        .get(..HEADER_LEN)
        .ok_or_else(|| invalid("map: short header"))?;
    if &header[..8] != MAGIC
        || le_u64(&header[24..]) != xxh3_64(&header[..24])
        || le_u64(&header[16..]) != COW_CHUNK
    {
        return Err(invalid("map: bad header"));
    }
    let good = bytes[HEADER_LEN..]
        .chunks_exact(RECORD_LEN)
        .take_while(|r| {
            le_u64(&r[16..]) == xxh3_64(&r[..16])
                && matches!(r[0], TAG_DATA | TAG_ZERO | TAG_DELETING)
        })
        .count();
    Ok(HEADER_LEN + good * RECORD_LEN)
}

/// Where a page of a map read from `from` stops: the last record boundary
/// (the header's end, or a record's) at most `max` bytes on, or the first
/// one after `from` when `max` is less than a record.
fn map_page_end(from: u64, max: u64) -> u64 {
    let (header, record) = (HEADER_LEN as u64, RECORD_LEN as u64);
    let boundary_at_or_below = |x: u64| {
        if x < header {
            0
        } else {
            header + (x - header) / record * record
        }
    };
    let end = boundary_at_or_below(from.saturating_add(max));
    if end > from {
        end
    } else if from < header {
        header
    } else {
        boundary_at_or_below(from).saturating_add(record)
    }
}

/// The snapshots of one slice file, oldest first.
pub struct SliceSnapshots {
    dir: PathBuf,
    stem: String,
    snapshots: RwLock<Vec<Snapshot>>,
    /// The medium's snapshot budget, when it has one: saves take from it.
    account: Option<SpaceAccount>,
    /// Writes that need a save are held (see `held`) instead of waiting
    /// for the save to be durable: set by [`SliceSnapshots::hold_writes`].
    hold_enabled: AtomicBool,
    /// Some write is held: reads and syncs commit first.
    holding: AtomicBool,
    /// A replay runs: its saves are for writes answered before, so the
    /// budget does not refuse them (it counts them still).
    replaying: AtomicBool,
    /// The held writes and their journal; locked only under the snapshot
    /// write lock.
    held: Mutex<held::Held>,
    #[cfg(test)]
    fault: std::sync::Mutex<Option<Fault>>,
}

/// Test-only fault injection: the I/O step numbered `at` fails; with
/// `Crash` every later step fails too (nothing more reaches the disk, as if
/// the process died there), with `NoSpace` only that one fails with ENOSPC.
#[cfg(test)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fault {
    pub(crate) at: usize,
    pub(crate) crash: bool,
    pub(crate) seen: usize,
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

fn encode_header(size: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..16].copy_from_slice(&size.to_le_bytes());
    h[16..24].copy_from_slice(&COW_CHUNK.to_le_bytes());
    let sum = xxh3_64(&h[..24]);
    h[24..].copy_from_slice(&sum.to_le_bytes());
    h
}

fn encode_record(tag: u8, chunk: u64) -> [u8; RECORD_LEN] {
    let mut r = [0u8; RECORD_LEN];
    r[0] = tag;
    r[8..16].copy_from_slice(&chunk.to_le_bytes());
    let sum = xxh3_64(&r[..16]);
    r[16..].copy_from_slice(&sum.to_le_bytes());
    r
}

fn le_u64(bytes: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&bytes[..8]);
    u64::from_le_bytes(a)
}

/// Reads into `buf` at `offset` until it is full or the file ends; returns
/// the bytes read.
pub(crate) fn read_up_to(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Reads from `offset` until `buf` is full or the file ends; the rest of
/// `buf` is zeroed (a delta is shorter than the slice past its last chunk).
fn read_zero_fill(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    let done = read_up_to(file, buf, offset)?;
    buf[done..].fill(0);
    Ok(())
}

/// Whether `[start, start + len)` of `file` is a hole (no data extent).
fn is_hole(file: &File, start: u64, len: u64) -> io::Result<bool> {
    Ok(DataExtents::from(file, start, start + len)
        .next()
        .transpose()?
        .is_none())
}

fn chunk_range(offset: u64, len: u64) -> std::ops::Range<u64> {
    if len == 0 {
        return 0..0;
    }
    offset / COW_CHUNK..(offset + len - 1) / COW_CHUNK + 1
}

impl SliceSnapshots {
    /// Opens the snapshots of the slice at `slice_path` (a `*.slice` file):
    /// replays each map (cutting off a torn tail), removes leftovers of an
    /// interrupted creation or deletion, and finishes any deletion that was
    /// marked but not done.
    pub fn open(slice_path: &Path) -> io::Result<SliceSnapshots> {
        Self::open_with(slice_path, None)
    }

    /// [`SliceSnapshots::open`], with copy-on-write saves counted against
    /// the medium's snapshot budget.
    pub(crate) fn open_accounted(
        slice_path: &Path,
        account: SpaceAccount,
    ) -> io::Result<SliceSnapshots> {
        Self::open_with(slice_path, Some(account))
    }

    fn open_with(slice_path: &Path, account: Option<SpaceAccount>) -> io::Result<SliceSnapshots> {
        let dir = slice_path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let stem = slice_stem(slice_path)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a slice file name"))?
            .to_string();
        let store = SliceSnapshots {
            dir,
            stem,
            snapshots: RwLock::new(Vec::new()),
            account,
            hold_enabled: AtomicBool::new(false),
            holding: AtomicBool::new(false),
            replaying: AtomicBool::new(false),
            held: Mutex::new(held::Held::default()),
            #[cfg(test)]
            fault: std::sync::Mutex::new(None),
        };
        let prefix = format!("{}.s", store.stem);
        let (mut maps, mut deltas) = (Vec::new(), Vec::new());
        let mut cleaned = false;
        for entry in fs::read_dir(&store.dir)? {
            let entry = entry?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let Some((id, suffix)) = name
                .strip_prefix(&prefix)
                .and_then(|rest| rest.split_once('.'))
            else {
                continue;
            };
            let Ok(id) = id.parse::<u64>() else { continue };
            match suffix {
                "map" => maps.push(id),
                "delta" => deltas.push(id),
                // An interrupted creation: the snapshot never existed.
                "map.tmp" => {
                    remove_if_exists(&entry.path())?;
                    cleaned = true;
                }
                _ => {}
            }
        }
        // A delta without a map: creation or deletion interrupted.
        for id in deltas.iter().filter(|id| !maps.contains(id)) {
            remove_if_exists(&store.delta_path(*id))?;
            cleaned = true;
        }
        if cleaned {
            fsync_dir(&store.dir)?;
        }
        maps.sort_unstable();
        let mut snapshots = Vec::with_capacity(maps.len());
        for id in maps {
            snapshots.push(store.load(id)?);
        }
        while let Some(idx) = snapshots.iter().position(|s| s.deleting) {
            store.finish_delete(&mut snapshots, idx)?;
        }
        if cleaned {
            store.files_changed();
        }
        *store.write_lock()? = snapshots;
        // Writes held when the process stopped: saved, then written.
        store.replay(slice_path)?;
        Ok(store)
    }

    fn delta_path(&self, id: u64) -> PathBuf {
        self.dir.join(delta_name(&self.stem, id))
    }

    fn map_path(&self, id: u64) -> PathBuf {
        self.dir.join(map_name(&self.stem, id))
    }

    fn read_lock(&self) -> io::Result<RwLockReadGuard<'_, Vec<Snapshot>>> {
        self.snapshots
            .read()
            .map_err(|_| io::Error::other("snapshot lock poisoned"))
    }

    fn write_lock(&self) -> io::Result<RwLockWriteGuard<'_, Vec<Snapshot>>> {
        self.snapshots
            .write()
            .map_err(|_| io::Error::other("snapshot lock poisoned"))
    }

    /// Counts one I/O step (test builds may fail it); a no-op otherwise.
    fn step(&self) -> io::Result<()> {
        #[cfg(test)]
        {
            let mut fault = self
                .fault
                .lock()
                .map_err(|_| io::Error::other("fault lock poisoned"))?;
            if let Some(f) = fault.as_mut() {
                let n = f.seen;
                f.seen += 1;
                if n == f.at || (f.crash && n > f.at) {
                    return Err(if f.crash {
                        io::Error::other("simulated crash")
                    } else {
                        io::Error::from_raw_os_error(libc::ENOSPC)
                    });
                }
            }
        }
        Ok(())
    }

    /// Snapshot files changed other than by a save: the medium's count is
    /// measured again before the next save.
    fn files_changed(&self) {
        if let Some(account) = &self.account {
            account.space.forget(&account.medium);
        }
    }

    #[cfg(test)]
    pub(crate) fn inject(&self, fault: Option<Fault>) {
        if let Ok(mut f) = self.fault.lock() {
            *f = fault;
        }
    }

    #[cfg(test)]
    pub(crate) fn steps_seen(&self) -> usize {
        self.fault
            .lock()
            .ok()
            .and_then(|f| f.map(|f| f.seen))
            .unwrap_or(0)
    }

    /// Replays snapshot `id`'s map.
    fn load(&self, id: u64) -> io::Result<Snapshot> {
        let map_path = self.map_path(id);
        let log = OpenOptions::new().read(true).write(true).open(&map_path)?;
        let bytes = fs::read(&map_path)?;
        let header = bytes
            .get(..HEADER_LEN)
            .ok_or_else(|| invalid(format!("{}: short header", map_path.display())))?;
        if &header[..8] != MAGIC || le_u64(&header[24..]) != xxh3_64(&header[..24]) {
            return Err(invalid(format!("{}: bad header", map_path.display())));
        }
        if le_u64(&header[16..]) != COW_CHUNK {
            return Err(invalid(format!("{}: other chunk size", map_path.display())));
        }
        let size = le_u64(&header[8..]);
        let mut chunks = HashMap::new();
        let mut deleting = false;
        let mut good = HEADER_LEN;
        for record in bytes[HEADER_LEN..].chunks_exact(RECORD_LEN) {
            if le_u64(&record[16..]) != xxh3_64(&record[..16]) {
                break; // a torn append: everything after it was never acknowledged
            }
            let chunk = le_u64(&record[8..]);
            match record[0] {
                TAG_DATA => {
                    chunks.insert(chunk, Saved::Data);
                }
                TAG_ZERO => {
                    chunks.insert(chunk, Saved::Zero);
                }
                TAG_DELETING => deleting = true,
                _ => break,
            }
            good += RECORD_LEN;
        }
        if good != bytes.len() {
            log.set_len(good as u64)?;
            log.sync_data()?;
        }
        let delta_path = self.delta_path(id);
        let delta = match OpenOptions::new().read(true).write(true).open(&delta_path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if chunks.values().any(|s| *s == Saved::Data) {
                    return Err(invalid(format!("{}: missing", delta_path.display())));
                }
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(&delta_path)?;
                fsync_dir(&self.dir)?;
                f
            }
            Err(e) => return Err(e),
        };
        Ok(Snapshot {
            id,
            size,
            delta,
            log,
            log_len: good as u64,
            chunks,
            pending: HashMap::new(),
            reserved: Vec::new(),
            held_chunks: HashSet::new(),
            deleting,
        })
    }

    /// Ids of every snapshot with files, oldest first (one being deleted
    /// included: its files travel with the slice and the deletion finishes
    /// where the slice is opened next).
    pub(crate) fn ids(&self) -> io::Result<Vec<u64>> {
        Ok(self.read_lock()?.iter().map(|s| s.id).collect())
    }

    /// Snapshot `id`'s map from byte `from` to its durable end, and the
    /// chunks those records say are in the delta. Read under the lock, so
    /// an append is seen whole and durable or not at all.
    pub(crate) fn map_since(&self, id: u64, from: u64) -> io::Result<MapTail> {
        self.map_page(id, from, u64::MAX)
    }

    /// [`SliceSnapshots::map_since`], at most about `max` bytes of it: a
    /// longer tail is cut at a record boundary (one record at least), and
    /// `end` is then where the bytes stop, for the caller to ask again from
    /// there (a storage node's reply must fit the protocol's max payload).
    pub(crate) fn map_page(&self, id: u64, from: u64, max: u64) -> io::Result<MapTail> {
        let snaps = self.read_lock()?;
        let snap = snaps
            .iter()
            .find(|s| s.id == id)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no snapshot {id}")))?;
        let durable = snap.log_len;
        let end = if durable.saturating_sub(from) > max {
            map_page_end(from, max).min(durable)
        } else {
            durable
        };
        let mut bytes = vec![0u8; end.saturating_sub(from) as usize];
        snap.log.read_exact_at(&mut bytes, from)?;
        Ok(MapTail::new(bytes, from, end))
    }

    /// Reads chunk `chunk` of snapshot `id`'s delta into `buf` (`COW_CHUNK`
    /// bytes; past the delta's end reads as zeros).
    pub(crate) fn read_delta_chunk(&self, id: u64, chunk: u64, buf: &mut [u8]) -> io::Result<()> {
        let snaps = self.read_lock()?;
        let snap = snaps
            .iter()
            .find(|s| s.id == id)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no snapshot {id}")))?;
        read_zero_fill(&snap.delta, buf, chunk * COW_CHUNK)
    }

    /// The snapshots, oldest first (those being deleted left out).
    pub fn list(&self) -> io::Result<Vec<SnapshotInfo>> {
        let snaps = self.read_lock()?;
        let mut out = Vec::new();
        for s in snaps.iter().filter(|s| !s.deleting) {
            let used = s.delta.metadata()?.blocks() * 512 + s.log.metadata()?.blocks() * 512;
            out.push(SnapshotInfo {
                id: s.id,
                size: s.size,
                used_bytes: used,
            });
        }
        Ok(out)
    }

    /// Takes snapshot `id` of the live slice `live` in O(1): makes the live
    /// slice durable, then creates an empty delta and map. Ids must grow (the
    /// newest snapshot has the largest id); taking an existing id again is a
    /// no-op, so a retried creation is safe.
    pub fn create(&self, id: u64, live: &File) -> io::Result<()> {
        let mut snaps = self.write_lock()?;
        if snaps.iter().any(|s| s.id == id && !s.deleting) {
            return Ok(());
        }
        // Held writes belong before the snapshot.
        self.commit_locked(&mut snaps, live)?;
        if snaps.iter().any(|s| s.id >= id) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("snapshot id {id} is not newer than every existing snapshot"),
            ));
        }
        // The snapshot's base is the live slice as acknowledged so far.
        self.step()?;
        live.sync_data()?;
        let size = live.metadata()?.len();
        self.step()?;
        let delta = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(self.delta_path(id))?;
        self.step()?;
        delta.sync_all()?;
        let tmp = self.dir.join(format!("{}.s{id}.map.tmp", self.stem));
        self.step()?;
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        self.step()?;
        log.write_all_at(&encode_header(size), 0)?;
        self.step()?;
        log.sync_all()?;
        self.step()?;
        fs::rename(&tmp, self.map_path(id))?;
        self.step()?;
        fsync_dir(&self.dir)?;
        snaps.push(Snapshot {
            id,
            size,
            delta,
            log,
            log_len: HEADER_LEN as u64,
            chunks: HashMap::new(),
            pending: HashMap::new(),
            reserved: Vec::new(),
            held_chunks: HashSet::new(),
            deleting: false,
        });
        self.files_changed();
        Ok(())
    }

    /// Appends records to a snapshot's map and makes them durable; on
    /// failure the map is cut back so no partial record stays.
    fn append(&self, snap: &mut Snapshot, records: &[(u8, u64)]) -> io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut bytes = Vec::with_capacity(records.len() * RECORD_LEN);
        for &(tag, chunk) in records {
            bytes.extend_from_slice(&encode_record(tag, chunk));
        }
        let written = self
            .step()
            .and_then(|()| snap.log.write_all_at(&bytes, snap.log_len))
            .and_then(|()| self.step())
            .and_then(|()| snap.log.sync_data());
        if let Err(e) = written {
            if self.step().is_ok() {
                let _ = snap.log.set_len(snap.log_len);
            }
            return Err(e);
        }
        snap.log_len += bytes.len() as u64;
        for &(tag, chunk) in records {
            match tag {
                TAG_DATA => {
                    snap.chunks.insert(chunk, Saved::Data);
                }
                TAG_ZERO => {
                    snap.chunks.insert(chunk, Saved::Zero);
                }
                _ => snap.deleting = true,
            }
        }
        Ok(())
    }

    /// Whether writing `[offset, offset + len)` must first save chunks (or
    /// be held behind a held write).
    fn needs_save(snaps: &[Snapshot], offset: u64, len: u64) -> bool {
        let Some(newest) = snaps.last() else {
            return false;
        };
        chunk_range(offset, len).any(|c| {
            (c * COW_CHUNK < newest.size && !newest.chunks.contains_key(&c))
                || newest.held_chunks.contains(&c)
        })
    }

    /// Saves into the newest snapshot every chunk of the range it does not
    /// hold yet, durably (one fsync of the delta and one of the map for the
    /// whole range, with any save staged before). On error nothing of the
    /// range counts as saved.
    fn save(&self, snaps: &mut [Snapshot], live: &File, offset: u64, len: u64) -> io::Result<()> {
        self.stage(snaps, live, offset, len)?;
        match snaps.last_mut() {
            Some(newest) => self.persist(newest, live),
            None => Ok(()),
        }
    }

    /// Claims for the newest snapshot every chunk of the range it neither
    /// holds nor has pending: pending, the live slice must not change there
    /// until [`SliceSnapshots::persist`] saved them (nothing is copied
    /// yet: the live slice keeps the old bytes meanwhile). With a budget,
    /// the space the saves may need (every chunk that is not a hole, and
    /// the map's growth) is taken from it now: ENOSPC then leaves the
    /// snapshot and the live slice as they were.
    fn stage(&self, snaps: &mut [Snapshot], live: &File, offset: u64, len: u64) -> io::Result<()> {
        let Some(newest) = snaps.last_mut() else {
            return Ok(());
        };
        let live_len = live.metadata()?.len();
        // The chunks to save and how many bytes of each the live slice has
        // (0: a hole, recorded as zero without reading).
        let mut wanted = Vec::new();
        for c in chunk_range(offset, len) {
            let start = c * COW_CHUNK;
            if start >= newest.size
                || newest.chunks.contains_key(&c)
                || newest.pending.contains_key(&c)
            {
                continue;
            }
            let n = COW_CHUNK.min(live_len.saturating_sub(start));
            let n = if n == 0 || is_hole(live, start, n)? {
                0
            } else {
                n
            };
            wanted.push((c, n));
        }
        if wanted.is_empty() {
            return Ok(());
        }
        if let Some(account) = &self.account {
            // Blocks the map gains by the records after the pending ones.
            let log_len = newest.log_len + (newest.pending.len() * RECORD_LEN) as u64;
            let end = log_len + (wanted.len() * RECORD_LEN) as u64;
            let growth = end.div_ceil(BLOCK).saturating_sub(log_len.div_ceil(BLOCK)) * BLOCK;
            let data: u64 = wanted.iter().map(|(_, n)| n.div_ceil(BLOCK) * BLOCK).sum();
            match account.reserve(data + growth) {
                Ok(reservation) => newest.reserved.push(reservation),
                Err(e) if !self.replaying.load(Ordering::Relaxed) => return Err(e),
                // The count gets the saves when the next measure sees them.
                Err(_) => account.space.forget(&account.medium),
            }
        }
        newest.pending.extend(wanted);
        Ok(())
    }

    /// Makes the newest snapshot's pending saves, durably: each chunk's
    /// bytes copied from the live slice into the delta (an all-zero one
    /// recorded as zero), the delta synced, then their map records
    /// appended and synced; the budget they took settled with what they
    /// used. On error they stay pending (a retry copies them again: the
    /// live slice has not changed there).
    fn persist(&self, newest: &mut Snapshot, live: &File) -> io::Result<()> {
        if newest.pending.is_empty() {
            return Ok(());
        }
        let mut pending: Vec<(u64, u64)> = newest.pending.iter().map(|(c, n)| (*c, *n)).collect();
        pending.sort_unstable();
        let mut buf = vec![0u8; COW_CHUNK as usize];
        let mut records = Vec::with_capacity(pending.len());
        let mut data_bytes = 0;
        for (c, n) in pending {
            let start = c * COW_CHUNK;
            let tag = if n == 0 {
                TAG_ZERO
            } else {
                let data = &mut buf[..n as usize];
                read_zero_fill(live, data, start)?;
                if is_zero(data) {
                    TAG_ZERO
                } else {
                    self.step()?;
                    newest.delta.write_all_at(data, start)?;
                    data_bytes += n.div_ceil(BLOCK) * BLOCK;
                    TAG_DATA
                }
            };
            records.push((tag, c));
        }
        if data_bytes > 0 {
            self.step()?;
            newest.delta.sync_data()?;
        }
        let log_len = newest.log_len;
        self.append(newest, &records)?;
        let growth = newest
            .log_len
            .div_ceil(BLOCK)
            .saturating_sub(log_len.div_ceil(BLOCK))
            * BLOCK;
        newest.pending.clear();
        if let Some(account) = &self.account {
            let mut used = data_bytes + growth;
            for reservation in newest.reserved.drain(..) {
                let share = used.min(reservation.bytes());
                used -= share;
                account.settle(reservation, share);
            }
        }
        Ok(())
    }

    /// Writes `data` at `offset` of the live slice, first saving what the
    /// newest snapshot needs. If saving fails (ENOSPC included) the live
    /// slice is not written.
    pub fn write(&self, live: &File, offset: u64, data: &[u8]) -> io::Result<()> {
        {
            let snaps = self.read_lock()?;
            if !Self::needs_save(&snaps, offset, data.len() as u64) {
                return live.write_all_at(data, offset);
            }
        }
        let mut snaps = self.write_lock()?;
        if self.hold_enabled.load(Ordering::Relaxed) {
            return self.hold(&mut snaps, live, offset, held::Change::Write(data));
        }
        self.save(&mut snaps, live, offset, data.len() as u64)?;
        self.step()?;
        live.write_all_at(data, offset)
    }

    /// Saves into the newest snapshot what it needs before `[offset, offset +
    /// len)` of the live slice is overwritten, without writing. Lets a caller
    /// with several copies save on every copy before writing any, so a failed
    /// save (ENOSPC) leaves every copy unwritten. Only sound while no
    /// snapshot can be created before the write that follows (the volume's
    /// barrier); [`SliceSnapshots::write`] then finds nothing left to save.
    pub fn prepare_write(&self, live: &File, offset: u64, len: u64) -> io::Result<()> {
        {
            let snaps = self.read_lock()?;
            if !Self::needs_save(&snaps, offset, len) {
                return Ok(());
            }
        }
        let mut snaps = self.write_lock()?;
        if self.hold_enabled.load(Ordering::Relaxed) {
            // The write that follows is held: staged is enough.
            return self.stage(&mut snaps, live, offset, len);
        }
        self.save(&mut snaps, live, offset, len)
    }

    /// Deallocates `[offset, offset + len)` of the live slice after saving
    /// what the newest snapshot needs.
    pub fn discard(&self, live: &File, offset: u64, len: u64) -> io::Result<()> {
        {
            let snaps = self.read_lock()?;
            if !Self::needs_save(&snaps, offset, len) {
                return punch_hole(live, offset, len);
            }
        }
        let mut snaps = self.write_lock()?;
        if self.hold_enabled.load(Ordering::Relaxed) {
            return self.hold(&mut snaps, live, offset, held::Change::Discard(len));
        }
        self.save(&mut snaps, live, offset, len)?;
        self.step()?;
        punch_hole(live, offset, len)
    }

    fn index(snaps: &[Snapshot], id: u64) -> io::Result<usize> {
        snaps
            .iter()
            .position(|s| s.id == id && !s.deleting)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no snapshot {id}")))
    }

    /// Fills `buf` with snapshot `idx`'s view of chunk `c` from `start`
    /// (`buf.len()` bytes, within the chunk); bytes past the snapshot's size
    /// read as zeros.
    fn view(
        snaps: &[Snapshot],
        idx: usize,
        live: &File,
        start: u64,
        buf: &mut [u8],
    ) -> io::Result<()> {
        let c = start / COW_CHUNK;
        match snaps[idx..]
            .iter()
            .find_map(|s| s.chunks.get(&c).map(|saved| (s, *saved)))
        {
            Some((s, Saved::Data)) => read_zero_fill(&s.delta, buf, start)?,
            Some((_, Saved::Zero)) => buf.fill(0),
            None => read_zero_fill(live, buf, start)?,
        }
        let size = snaps[idx].size;
        if start + buf.len() as u64 > size {
            let keep = size.saturating_sub(start) as usize;
            buf[keep..].fill(0);
        }
        Ok(())
    }

    /// The allocation of snapshot `id`'s view of `[offset, offset + len)`
    /// of the slice, as `(length, hole)` runs covering it: a chunk a
    /// snapshot from `id` on holds is data (its saved content) or a hole
    /// (saved as zeroes); runs of other chunks are the live slice's
    /// allocation; past the snapshot's size, a hole (reads give zeroes).
    pub(crate) fn allocation(
        &self,
        id: u64,
        live: &File,
        offset: u64,
        len: u64,
    ) -> io::Result<Vec<(u64, bool)>> {
        fn push(runs: &mut Vec<(u64, bool)>, n: u64, hole: bool) {
            match runs.last_mut() {
                Some(last) if last.1 == hole => last.0 += n,
                _ if n == 0 => {}
                _ => runs.push((n, hole)),
            }
        }
        let snaps = self.read_lock()?;
        let idx = Self::index(&snaps, id)?;
        let held = |c: u64| snaps[idx..].iter().find_map(|s| s.chunks.get(&c).copied());
        let end = offset.saturating_add(len);
        let limit = end.min(snaps[idx].size);
        let mut runs = Vec::new();
        let mut at = offset;
        while at < limit {
            let chunk_end = |at: u64| ((at / COW_CHUNK + 1) * COW_CHUNK).min(limit);
            match held(at / COW_CHUNK) {
                Some(saved) => {
                    push(&mut runs, chunk_end(at) - at, saved == Saved::Zero);
                    at = chunk_end(at);
                }
                None => {
                    // Up to the next held chunk: the live slice's own holes.
                    let mut run_end = chunk_end(at);
                    while run_end < limit && held(run_end / COW_CHUNK).is_none() {
                        run_end = chunk_end(run_end);
                    }
                    for (n, hole) in allocation(live, at, run_end - at)? {
                        push(&mut runs, n, hole);
                    }
                    at = run_end;
                }
            }
        }
        // Past the snapshot's size.
        push(&mut runs, end.saturating_sub(at), true);
        Ok(runs)
    }

    /// Reads snapshot `id` at `offset` (within the snapshot's size).
    pub fn read(&self, id: u64, live: &File, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let snaps = self.read_lock()?;
        let idx = Self::index(&snaps, id)?;
        match offset.checked_add(buf.len() as u64) {
            Some(end) if end <= snaps[idx].size => {}
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "read beyond the end of the snapshot",
                ))
            }
        }
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset + done as u64;
            let n = ((COW_CHUNK - at % COW_CHUNK) as usize).min(buf.len() - done);
            Self::view(&snaps, idx, live, at, &mut buf[done..done + n])?;
            done += n;
        }
        Ok(())
    }

    /// Returns the live slice to snapshot `id`'s content: every chunk whose
    /// view differs from live is rewritten through the copy-on-write path,
    /// so newer snapshots stay exact. Chunks past the snapshot's size (the
    /// slice grew after it) are zeroed; the slice keeps its current size.
    /// Idempotent: re-running after an interruption finishes the job.
    pub fn rollback(&self, id: u64, live: &File) -> io::Result<()> {
        let mut snaps = self.write_lock()?;
        self.commit_locked(&mut snaps, live)?;
        let idx = Self::index(&snaps, id)?;
        let size = snaps[idx].size;
        let live_len = live.metadata()?.len();
        // Only chunks some delta from S on holds can differ below the
        // snapshot's size; past it, every chunk with data must go.
        let mut candidates: BTreeSet<u64> = snaps[idx..]
            .iter()
            .flat_map(|s| s.chunks.keys().copied())
            .filter(|c| c * COW_CHUNK < size.min(live_len))
            .collect();
        let tail = size / COW_CHUNK * COW_CHUNK;
        for extent in DataExtents::from(live, tail, live_len) {
            let (start, end) = extent?;
            candidates.extend(chunk_range(start, end - start));
        }
        let mut want = vec![0u8; COW_CHUNK as usize];
        let mut have = vec![0u8; COW_CHUNK as usize];
        for c in candidates {
            let start = c * COW_CHUNK;
            let n = COW_CHUNK.min(live_len.saturating_sub(start)) as usize;
            if n == 0 {
                continue;
            }
            Self::view(&snaps, idx, live, start, &mut want[..n])?;
            read_zero_fill(live, &mut have[..n], start)?;
            if want[..n] == have[..n] {
                continue;
            }
            self.save(&mut snaps, live, start, n as u64)?;
            self.step()?;
            if is_zero(&want[..n]) {
                punch_hole(live, start, n as u64)?;
            } else {
                live.write_all_at(&want[..n], start)?;
            }
        }
        self.step()?;
        live.sync_data()
    }

    /// Deletes snapshot `id`, keeping the others exact: the chunks it holds
    /// that the next older snapshot needs and does not hold move there
    /// first. Missing ids are fine (a retried deletion). Crash-safe: a
    /// deletion is marked in the map first and finished on the next open.
    pub fn delete(&self, id: u64, live: &File) -> io::Result<()> {
        let mut snaps = self.write_lock()?;
        let Some(idx) = snaps.iter().position(|s| s.id == id) else {
            return Ok(());
        };
        // The held writes' saves go to the snapshot they were made for.
        self.commit_locked(&mut snaps, live)?;
        if !snaps[idx].deleting {
            self.append(&mut snaps[idx], &[(TAG_DELETING, 0)])?;
        }
        self.finish_delete(&mut snaps, idx)
    }

    fn finish_delete(&self, snaps: &mut Vec<Snapshot>, idx: usize) -> io::Result<()> {
        if idx > 0 {
            let (older, rest) = snaps.split_at_mut(idx);
            let (older, gone) = (&mut older[idx - 1], &rest[0]);
            let mut moves: Vec<(u64, Saved)> = gone
                .chunks
                .iter()
                .filter(|(c, _)| **c * COW_CHUNK < older.size && !older.chunks.contains_key(c))
                .map(|(c, s)| (*c, *s))
                .collect();
            moves.sort_unstable_by_key(|(c, _)| *c);
            let mut buf = vec![0u8; COW_CHUNK as usize];
            let mut records = Vec::with_capacity(moves.len());
            let mut any_data = false;
            for (c, saved) in moves {
                let tag = match saved {
                    Saved::Data => {
                        read_zero_fill(&gone.delta, &mut buf, c * COW_CHUNK)?;
                        self.step()?;
                        older.delta.write_all_at(&buf, c * COW_CHUNK)?;
                        any_data = true;
                        TAG_DATA
                    }
                    Saved::Zero => TAG_ZERO,
                };
                records.push((tag, c));
            }
            if any_data {
                self.step()?;
                older.delta.sync_data()?;
            }
            self.append(older, &records)?;
        }
        // The map goes first: without it the snapshot no longer exists and
        // an orphaned delta is removed on open.
        let id = snaps[idx].id;
        self.step()?;
        remove_if_exists(&self.map_path(id))?;
        self.step()?;
        fsync_dir(&self.dir)?;
        snaps.remove(idx);
        self.files_changed();
        self.step()?;
        remove_if_exists(&self.delta_path(id))?;
        self.step()?;
        fsync_dir(&self.dir)
    }
}

#[cfg(test)]
#[path = "snapshot_tests.rs"]
mod tests;
