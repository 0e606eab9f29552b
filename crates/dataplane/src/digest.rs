//! Logical-content digest of a file, independent of its hole layout.
//!
//! The file is split into [`BLOCK`]-sized blocks at absolute offsets. All-zero
//! blocks (holes or written zeros) contribute nothing; every other block feeds
//! its offset (u64 little-endian) and bytes into an XXH3-128 stream, in offset
//! order; the file length (u64 little-endian) closes the stream. Only data
//! extents are read, so a huge sparse file digests in time proportional to
//! its data.

use crate::extents::{advise_sequential, DataExtents, BLOCK};
use crate::Digest;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use xxhash_rust::xxh3::Xxh3;

/// Bytes read per I/O call. Chunks end at multiples of this (or at extent
/// ends), so they always start [`BLOCK`]-aligned.
pub(crate) const CHUNK: usize = 1 << 20;

/// Whether `bytes` are all zero.
#[inline]
pub(crate) fn is_zero(bytes: &[u8]) -> bool {
    let (words, tail) = bytes.as_chunks::<8>();
    // OR together 128 bytes at a time (vectorises), stop at the first non-zero group.
    words.chunks(16).all(|group| {
        group
            .iter()
            .fold(0u64, |acc, w| acc | u64::from_ne_bytes(*w))
            == 0
    }) && tail.iter().all(|&b| b == 0)
}

/// The digest of one range of a slice, as a resync compares its source
/// and target chunk by chunk (see `copier::Copier::compare_target`):
/// XXH3-128 of the range's bytes with `seed`, `bytes` being the whole
/// range (zeros where the slice has holes or ends). Both ends compute it
/// the same way, the target's on its storage node. The seed is the copy's
/// own, drawn at random, so no bytes can be written to match another
/// range's digest on purpose; against chance, 128 bits.
pub(crate) fn range_digest(bytes: &[u8], seed: u64) -> u128 {
    xxhash_rust::xxh3::xxh3_128_with_seed(bytes, seed)
}

/// [`range_digest`] of a range fed in pieces, in order: a node digests a
/// range through a small buffer (no range-sized one to zero, and the bytes
/// are hashed while still in the CPU's cache).
pub(crate) struct RangeHasher(Xxh3);

impl RangeHasher {
    pub(crate) fn new(seed: u64) -> Self {
        RangeHasher(Xxh3::with_seed(seed))
    }

    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    pub(crate) fn finish(&self) -> u128 {
        self.0.digest128()
    }
}

/// The streaming digest computation.
pub(crate) struct BlockHasher(Xxh3);

impl BlockHasher {
    pub(crate) fn new() -> Self {
        BlockHasher(Xxh3::new())
    }

    /// Feeds `data`, the file's bytes at absolute `offset` (a multiple of
    /// [`BLOCK`]); chunks must come in increasing offset order and never
    /// overlap. `on_run(offset, bytes)` is called for each maximal run of
    /// non-zero blocks in `data`, in order.
    #[inline]
    pub(crate) fn feed<E>(
        &mut self,
        offset: u64,
        data: &[u8],
        on_run: impl FnMut(u64, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        data_runs(Some(self), offset, data, on_run)
    }

    /// The digest of a file of `len` bytes whose data has all been fed.
    pub(crate) fn finish(mut self, len: u64) -> Digest {
        self.0.update(&len.to_le_bytes());
        Digest(self.0.digest128())
    }
}

/// Calls `on_run(offset, bytes)` for each maximal run of non-zero blocks of
/// `data` (the bytes at `offset`, a multiple of [`BLOCK`]), in order,
/// feeding `hasher` (see [`BlockHasher::feed`]) when there is one.
#[inline]
pub(crate) fn data_runs<E>(
    mut hasher: Option<&mut BlockHasher>,
    offset: u64,
    data: &[u8],
    mut on_run: impl FnMut(u64, &[u8]) -> Result<(), E>,
) -> Result<(), E> {
    debug_assert_eq!(offset % BLOCK, 0);
    let mut run_start: Option<usize> = None;
    for (i, block) in data.chunks(BLOCK as usize).enumerate() {
        let at = i * BLOCK as usize;
        if is_zero(block) {
            if let Some(s) = run_start.take() {
                on_run(offset + s as u64, &data[s..at])?;
            }
        } else {
            if let Some(h) = hasher.as_deref_mut() {
                h.0.update(&(offset + at as u64).to_le_bytes());
                h.0.update(block);
            }
            run_start.get_or_insert(at);
        }
    }
    if let Some(s) = run_start {
        on_run(offset + s as u64, &data[s..])?;
    }
    Ok(())
}

/// Splits `[start, end)` into I/O chunks ending at multiples of `chunk`
/// (itself a multiple of [`BLOCK`]) or at `end`.
pub(crate) fn chunks(start: u64, end: u64, chunk: u64) -> impl Iterator<Item = (u64, usize)> {
    let mut pos = start;
    std::iter::from_fn(move || {
        if pos >= end {
            return None;
        }
        let next = ((pos / chunk + 1) * chunk).min(end);
        let item = (pos, (next - pos) as usize);
        pos = next;
        Some(item)
    })
}

/// Digest of an open file, reading through `buf` (at least [`CHUNK`] bytes).
pub(crate) fn digest_open_file(file: &File, buf: &mut [u8]) -> io::Result<Digest> {
    let len = file.metadata()?.len();
    advise_sequential(file);
    let mut hasher = BlockHasher::new();
    for extent in DataExtents::new(file, len) {
        let (start, end) = extent?;
        for (offset, n) in chunks(start, end, CHUNK as u64) {
            let data = &mut buf[..n];
            file.read_exact_at(data, offset)?;
            hasher.feed(offset, data, |_, _| Ok::<(), io::Error>(()))?;
        }
    }
    Ok(hasher.finish(len))
}

/// Logical-content digest of the file at `path` (the same value a verified
/// [`DataPlane::copy_slice`](crate::DataPlane::copy_slice) returns for a
/// slice with those contents).
pub fn digest_file(path: &Path) -> io::Result<Digest> {
    let file = File::open(path)?;
    digest_open_file(&file, &mut vec![0u8; CHUNK])
}

#[cfg(test)]
mod tests {
    use super::{range_digest, RangeHasher};

    #[test]
    fn a_range_fed_in_pieces_digests_as_it_does_whole() {
        let bytes: Vec<u8> = (0..(3 << 20) + 777u32)
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        for len in [0, 1, 16, 240, 241, 4096, 1 << 20, bytes.len()] {
            for piece in [1, 100, 4096, 128 << 10] {
                let mut hasher = RangeHasher::new(42);
                for part in bytes[..len].chunks(piece) {
                    hasher.feed(part);
                }
                assert_eq!(
                    hasher.finish(),
                    range_digest(&bytes[..len], 42),
                    "{len} bytes in pieces of {piece}"
                );
            }
        }
        assert_ne!(range_digest(&bytes, 42), range_digest(&bytes, 43));
    }
}
