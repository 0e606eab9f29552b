//! In-memory stand-ins for what a storage node plugs in, for tests: slices
//! as byte vectors ([`MemBackend`]), epochs in a map ([`MemEpochs`]) and
//! one accepted credential ([`OneCredential`]).

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::{
    Authenticator, EpochStore, MapTail, SliceBackend, SliceName, SnapshotInfo, StoredSlice,
};

/// Blocks of this size are holes when all zero.
const BLOCK: u64 = 4096;

#[derive(Default, Clone)]
struct MemSlice {
    data: Vec<u8>,
    snapshots: BTreeMap<u64, Vec<u8>>,
}

/// Slices in memory. Ops on a missing slice fail with ENOENT, ranges past
/// the end with EINVAL.
#[derive(Default)]
pub struct MemBackend {
    slices: Mutex<HashMap<SliceName, MemSlice>>,
    /// Reads at these offsets sleep this long first (replies out of order).
    slow_reads: Mutex<HashMap<u64, Duration>>,
    /// Writes, discards and syncs sleep this long first (a slow disk, or a
    /// node far away).
    change_delay: Mutex<Duration>,
    /// While set, every op waits (a node that stops answering).
    stalled: Mutex<bool>,
    unstalled: Condvar,
    /// Ops run (writes, discards, syncs, snapshot changes), to show a
    /// refused op did not run.
    pub changes: AtomicU64,
    pub hints: AtomicU64,
    /// Bytes written by `Write` ops (what a resync rewrote).
    pub written_bytes: AtomicU64,
    /// The digest `RangeDigest` answers with (see
    /// [`MemBackend::digest_ranges_with`]).
    range_digest: Mutex<Option<RangeDigestFn>>,
}

/// A range digest function: the range's bytes and the seed.
pub type RangeDigestFn = fn(&[u8], u64) -> u128;

fn enoent(slice: &SliceName) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("no slice {slice}"))
}

fn einval(what: &str) -> io::Error {
    io::Error::from_raw_os_error(libc::EINVAL).with_context(what)
}

trait Context {
    fn with_context(self, what: &str) -> io::Error;
}

impl Context for io::Error {
    fn with_context(self, what: &str) -> io::Error {
        // Keeps the errno in the kind: the server sends EINVAL for it.
        io::Error::new(self.kind(), format!("{what}: {self}"))
    }
}

fn range(data: &[u8], offset: u64, len: u64) -> io::Result<std::ops::Range<usize>> {
    let end = offset
        .checked_add(len)
        .ok_or_else(|| einval("range overflows"))?;
    if end > data.len() as u64 {
        return Err(einval("range past the end of the slice"));
    }
    Ok(offset as usize..end as usize)
}

/// Runs of `[offset, offset + len)` by 4 KiB blocks: all zero is a hole.
fn runs(data: &[u8], offset: u64, len: u64) -> io::Result<Vec<(u64, bool)>> {
    let r = range(data, offset, len)?;
    let mut out: Vec<(u64, bool)> = Vec::new();
    let mut at = r.start;
    while at < r.end {
        let end = ((at as u64 / BLOCK + 1) * BLOCK).min(r.end as u64) as usize;
        let hole = data[at..end].iter().all(|&b| b == 0);
        match out.last_mut() {
            Some((n, h)) if *h == hole => *n += (end - at) as u64,
            _ => out.push(((end - at) as u64, hole)),
        }
        at = end;
    }
    Ok(out)
}

impl MemBackend {
    pub fn new() -> MemBackend {
        MemBackend::default()
    }

    /// Makes `RangeDigest` answer with `f`, the one its caller compares
    /// with (a data plane's); the default is FNV-1a of the seed and bytes.
    pub fn digest_ranges_with(&self, f: RangeDigestFn) {
        *self.range_digest.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
    }

    fn slices(&self) -> MutexGuard<'_, HashMap<SliceName, MemSlice>> {
        self.wait_unstalled();
        self.slices.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn with<T>(
        &self,
        slice: &SliceName,
        f: impl FnOnce(&mut MemSlice) -> io::Result<T>,
    ) -> io::Result<T> {
        let mut slices = self.slices();
        let s = slices.get_mut(slice).ok_or_else(|| enoent(slice))?;
        f(s)
    }

    fn changed(&self) {
        self.changes.fetch_add(1, Ordering::SeqCst);
    }

    /// Makes reads at `offset` sleep `delay` first.
    pub fn slow_read_at(&self, offset: u64, delay: Duration) {
        self.slow_reads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(offset, delay);
    }

    /// Every later write, discard and sync sleeps `delay` before it runs.
    pub fn delay_changes(&self, delay: Duration) {
        *self.change_delay.lock().unwrap_or_else(|e| e.into_inner()) = delay;
    }

    fn sleep_change_delay(&self) {
        let delay = *self.change_delay.lock().unwrap_or_else(|e| e.into_inner());
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
    }

    /// While `stalled`, every op waits.
    pub fn set_stalled(&self, stalled: bool) {
        *self.stalled.lock().unwrap_or_else(|e| e.into_inner()) = stalled;
        self.unstalled.notify_all();
    }

    fn wait_unstalled(&self) {
        let mut stalled = self.stalled.lock().unwrap_or_else(|e| e.into_inner());
        while *stalled {
            stalled = self
                .unstalled
                .wait(stalled)
                .unwrap_or_else(|e| e.into_inner());
        }
    }

    /// A copy of the slice's bytes (None: no such slice).
    pub fn bytes(&self, slice: &SliceName) -> Option<Vec<u8>> {
        self.slices
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(slice)
            .map(|s| s.data.clone())
    }
}

impl SliceBackend for MemBackend {
    fn size(&self, slice: &SliceName) -> io::Result<u64> {
        self.with(slice, |s| Ok(s.data.len() as u64))
    }

    fn read(&self, slice: &SliceName, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let delay = self
            .slow_reads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&offset)
            .copied();
        if let Some(delay) = delay {
            std::thread::sleep(delay);
        }
        self.with(slice, |s| {
            let r = range(&s.data, offset, buf.len() as u64)?;
            buf.copy_from_slice(&s.data[r]);
            Ok(())
        })
    }

    fn prepare_write(&self, slice: &SliceName, offset: u64, len: u64) -> io::Result<()> {
        self.with(slice, |s| range(&s.data, offset, len).map(drop))?;
        self.changed();
        Ok(())
    }

    fn write(&self, slice: &SliceName, offset: u64, data: &[u8]) -> io::Result<()> {
        self.sleep_change_delay();
        self.with(slice, |s| {
            let r = range(&s.data, offset, data.len() as u64)?;
            s.data[r].copy_from_slice(data);
            Ok(())
        })?;
        self.changed();
        self.written_bytes
            .fetch_add(data.len() as u64, Ordering::SeqCst);
        Ok(())
    }

    fn discard(&self, slice: &SliceName, offset: u64, len: u64) -> io::Result<()> {
        self.sleep_change_delay();
        self.with(slice, |s| {
            let r = range(&s.data, offset, len)?;
            s.data[r].fill(0);
            Ok(())
        })?;
        self.changed();
        Ok(())
    }

    fn sync(&self, slice: &SliceName) -> io::Result<()> {
        self.sleep_change_delay();
        self.with(slice, |_| Ok(()))?;
        self.changed();
        Ok(())
    }

    fn allocation(&self, slice: &SliceName, offset: u64, len: u64) -> io::Result<Vec<(u64, bool)>> {
        self.with(slice, |s| runs(&s.data, offset, len))
    }

    fn will_need(&self, _slice: &SliceName, _offset: u64, _len: u64) {
        self.hints.fetch_add(1, Ordering::SeqCst);
    }

    fn next_data(&self, slice: &SliceName, from: u64, len: u64) -> io::Result<Option<(u64, u64)>> {
        self.with(slice, |s| {
            let len = len.min(s.data.len() as u64);
            let mut at = from;
            for (n, hole) in runs(&s.data, from, len.saturating_sub(from))? {
                if !hole {
                    return Ok(Some((at, at + n)));
                }
                at += n;
            }
            Ok(None)
        })
    }

    fn data_bytes(&self, slice: &SliceName, from: u64, len: u64) -> io::Result<u64> {
        self.with(slice, |s| {
            let len = len.min(s.data.len() as u64);
            let runs = runs(&s.data, from, len.saturating_sub(from))?;
            Ok(runs.iter().filter(|r| !r.1).map(|r| r.0).sum())
        })
    }

    fn check_present(&self, slice: &SliceName) -> io::Result<()> {
        self.with(slice, |_| Ok(()))
    }

    fn snapshots(&self, slice: &SliceName) -> io::Result<Vec<SnapshotInfo>> {
        self.with(slice, |s| {
            Ok(s.snapshots
                .iter()
                .map(|(&id, data)| SnapshotInfo {
                    id,
                    size: data.len() as u64,
                    used_bytes: data.len() as u64,
                })
                .collect())
        })
    }

    fn create_snapshot(&self, slice: &SliceName, id: u64) -> io::Result<()> {
        self.with(slice, |s| {
            s.snapshots.insert(id, s.data.clone());
            Ok(())
        })?;
        self.changed();
        Ok(())
    }

    fn delete_snapshot(&self, slice: &SliceName, id: u64) -> io::Result<()> {
        self.with(slice, |s| {
            s.snapshots.remove(&id);
            Ok(())
        })?;
        self.changed();
        Ok(())
    }

    fn rollback(&self, slice: &SliceName, id: u64) -> io::Result<()> {
        self.with(slice, |s| {
            let data = s.snapshots.get(&id).ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("no snapshot {id}"))
            })?;
            s.data = data.clone();
            Ok(())
        })?;
        self.changed();
        Ok(())
    }

    fn read_snapshot(
        &self,
        slice: &SliceName,
        id: u64,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<()> {
        self.with(slice, |s| {
            let data = s.snapshots.get(&id).ok_or_else(|| enoent(slice))?;
            let r = range(data, offset, buf.len() as u64)?;
            buf.copy_from_slice(&data[r]);
            Ok(())
        })
    }

    fn snapshot_allocation(
        &self,
        slice: &SliceName,
        id: u64,
        offset: u64,
        len: u64,
    ) -> io::Result<Vec<(u64, bool)>> {
        self.with(slice, |s| {
            let data = s.snapshots.get(&id).ok_or_else(|| enoent(slice))?;
            runs(data, offset, len)
        })
    }

    fn snapshot_ids(&self, slice: &SliceName) -> io::Result<Vec<u64>> {
        self.with(slice, |s| Ok(s.snapshots.keys().copied().collect()))
    }

    /// The "map" of a test snapshot is its ids, 8 bytes each.
    fn snapshot_map_since(&self, slice: &SliceName, id: u64, from: u64) -> io::Result<MapTail> {
        self.with(slice, |s| {
            if !s.snapshots.contains_key(&id) {
                return Err(enoent(slice));
            }
            let map: Vec<u8> = s.snapshots.keys().flat_map(|k| k.to_le_bytes()).collect();
            let from = (from as usize).min(map.len());
            Ok(MapTail {
                bytes: map[from..].to_vec(),
                end: map.len() as u64,
            })
        })
    }

    fn read_snapshot_chunk(
        &self,
        slice: &SliceName,
        id: u64,
        chunk: u64,
        buf: &mut [u8],
    ) -> io::Result<()> {
        let offset = chunk
            .checked_mul(buf.len() as u64)
            .ok_or_else(|| einval("chunk overflows"))?;
        self.read_snapshot(slice, id, offset, buf)
    }

    fn create_slice(&self, slice: &SliceName, size: u64) -> io::Result<()> {
        let size = usize::try_from(size).map_err(|_| einval("size"))?;
        let mut slices = self.slices();
        let s = slices.entry(slice.clone()).or_default();
        if s.data.len() < size {
            s.data.resize(size, 0);
        }
        Ok(())
    }

    fn grow_slice(&self, slice: &SliceName, size: u64) -> io::Result<()> {
        let size = usize::try_from(size).map_err(|_| einval("size"))?;
        self.with(slice, |s| {
            if s.data.len() < size {
                s.data.resize(size, 0);
            }
            Ok(())
        })
    }

    fn delete_slice(&self, slice: &SliceName) -> io::Result<()> {
        self.slices().remove(slice);
        Ok(())
    }

    /// FNV-1a, 128 bits.
    fn digest(&self, slice: &SliceName) -> io::Result<u128> {
        self.with(slice, |s| {
            let mut h: u128 = 0x6c62272e07bb014262b821756295c58d;
            for &b in &s.data {
                h ^= u128::from(b);
                h = h.wrapping_mul(0x0000000001000000000000000000013B);
            }
            Ok(h)
        })
    }

    /// The range's bytes (zeros past the end) through the function set by
    /// [`MemBackend::digest_ranges_with`], else FNV-1a, 128 bits, of the
    /// seed and then the bytes.
    fn range_digest(
        &self,
        slice: &SliceName,
        offset: u64,
        len: u64,
        seed: u64,
    ) -> io::Result<u128> {
        let bytes = self.with(slice, |s| {
            let n = usize::try_from(len).map_err(|_| einval("length"))?;
            let mut bytes = vec![0u8; n];
            let start = usize::try_from(offset)
                .unwrap_or(usize::MAX)
                .min(s.data.len());
            let end = start.saturating_add(n).min(s.data.len());
            bytes[..end - start].copy_from_slice(&s.data[start..end]);
            Ok(bytes)
        })?;
        let custom = *self.range_digest.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = custom {
            return Ok(f(&bytes, seed));
        }
        let mut h: u128 = 0x6c62272e07bb014262b821756295c58d;
        for b in seed.to_le_bytes().into_iter().chain(bytes) {
            h ^= u128::from(b);
            h = h.wrapping_mul(0x0000000001000000000000000000013B);
        }
        Ok(h)
    }

    fn stored_slices(&self, medium: &str) -> io::Result<Vec<StoredSlice>> {
        let mut list: Vec<StoredSlice> = self
            .slices()
            .keys()
            .filter(|k| k.medium == medium)
            .map(|k| StoredSlice {
                volume: k.volume.clone(),
                copy: k.copy,
                column: k.column,
                partial: false,
            })
            .collect();
        list.sort_by(|a, b| (&a.volume, a.copy, a.column).cmp(&(&b.volume, b.copy, b.column)));
        Ok(list)
    }
}

/// Epochs in memory, counting the raises.
#[derive(Default)]
pub struct MemEpochs {
    epochs: Mutex<HashMap<String, u64>>,
    pub raises: AtomicU64,
}

impl EpochStore for MemEpochs {
    fn highest(&self, volume: &str) -> io::Result<u64> {
        let epochs = self.epochs.lock().unwrap_or_else(|e| e.into_inner());
        Ok(epochs.get(volume).copied().unwrap_or(0))
    }

    fn raise(&self, volume: &str, epoch: u64) -> io::Result<()> {
        self.raises.fetch_add(1, Ordering::SeqCst);
        let mut epochs = self.epochs.lock().unwrap_or_else(|e| e.into_inner());
        epochs.insert(volume.to_string(), epoch);
        Ok(())
    }
}

/// Accepts one credential.
pub struct OneCredential(pub String);

impl Authenticator for OneCredential {
    fn authenticate(
        &self,
        credential: &str,
        caller: &str,
        _peer: SocketAddr,
    ) -> Result<(), String> {
        if credential == self.0 {
            Ok(())
        } else {
            Err(format!(
                "unknown or revoked node credential (caller {caller:?})"
            ))
        }
    }
}
