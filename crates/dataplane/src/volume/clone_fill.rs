//! A clone's copy: a new volume filled with a snapshot's content, read
//! through the source volume's snapshot view (so writes to the source,
//! moves of its slices and copy-on-write saves meanwhile are all seen),
//! wherever that runs: in `svs serve`, or on the storage node that runs the
//! source's front (then the bytes go from node to node).
//!
//! [`CloneFill`] runs it in the phases of a [`SliceMove`] (a fill, then a
//! finish), so a storage node's front runs it with the same machinery as a
//! live slice copy: paced by grants, its progress and counters reported,
//! cancelled and dropped the same way.

use super::{SliceMove, VolumeIo};
use crate::throttle::{Cancelled, Pacer};
use crate::{CopyOptions, DataPlaneError};
use std::io;
use std::sync::Arc;

/// Unit of a clone's copy; all-zero pieces are skipped (the new volume's
/// slices are sparse, so they already read as zeros).
const CLONE_PIECE: usize = 1 << 20;

/// Bytes of the view whose allocation one `extents` call asks for: holes
/// are found a window at a time, so the list of extents stays small
/// however large the volume.
const EXTENT_WINDOW: u64 = 1 << 30;

fn failed(op: &'static str) -> impl Fn(io::Error) -> DataPlaneError {
    move |source| DataPlaneError::Clone { op, source }
}

/// Copies the first `size` bytes of `view` into `target`: only the view's
/// data extents are read (a window at a time, from [`VolumeIo::extents`]:
/// the snapshot's saved chunks and the live slices' allocation), piece by
/// piece, all-zero pieces skipped; holes stay holes (the target is new and
/// sparse). Paced by `options` (data bytes per second and its budgets),
/// `progress(done, size)` after each piece and each hole; flushes the
/// target at the end. Returns the bytes of data written. A resumed clone
/// copies again from the start: every piece is written whole.
fn fill_from_view(
    view: &dyn VolumeIo,
    target: &dyn VolumeIo,
    size: u64,
    options: &CopyOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<u64, DataPlaneError> {
    let mut fill = Fill {
        view,
        target,
        size,
        options,
        pacer: Pacer::new(options.rate_limit, &options.budgets, &options.cancel),
        buf: vec![0u8; CLONE_PIECE],
        written: 0,
        progress,
    };
    let mut offset = 0u64;
    while offset < size {
        fill.pacer
            .check()
            .map_err(|Cancelled| DataPlaneError::Cancelled)?;
        let window_end = offset + (size - offset).min(EXTENT_WINDOW);
        let extents = view
            .extents(offset, window_end - offset)
            .map_err(failed("finding the snapshot's data"))?;
        for extent in extents {
            let end = (offset + extent.len).min(window_end);
            if extent.hole {
                (fill.progress)(end, size);
            } else {
                fill.data(offset, end)?;
            }
            offset = end;
        }
        // Extents short of their window (never expected) cannot stall the
        // copy: the rest of the window is copied as data.
        fill.data(offset, window_end)?;
        offset = window_end;
    }
    target.flush().map_err(failed("flushing the new volume"))?;
    Ok(fill.written)
}

/// The state of one [`fill_from_view`].
struct Fill<'a> {
    view: &'a dyn VolumeIo,
    target: &'a dyn VolumeIo,
    size: u64,
    options: &'a CopyOptions,
    pacer: Pacer<'a>,
    buf: Vec<u8>,
    written: u64,
    progress: &'a mut dyn FnMut(u64, u64),
}

impl Fill<'_> {
    /// Copies `[offset, end)` of the view, a data extent, piece by piece;
    /// all-zero pieces are not written.
    fn data(&mut self, mut offset: u64, end: u64) -> Result<(), DataPlaneError> {
        let cancelled = |Cancelled| DataPlaneError::Cancelled;
        while offset < end {
            self.pacer.check().map_err(cancelled)?;
            let len =
                usize::try_from((end - offset).min(CLONE_PIECE as u64)).unwrap_or(CLONE_PIECE);
            let piece = &mut self.buf[..len];
            self.view
                .read(offset, piece)
                .map_err(failed("reading the snapshot"))?;
            if piece.iter().any(|&b| b != 0) {
                self.target
                    .write(offset, piece, false)
                    .map_err(failed("writing the new volume"))?;
                self.written += len as u64;
                self.options.stats.add_copied(len as u64);
                self.pacer.pace(self.written).map_err(cancelled)?;
            }
            offset += len as u64;
            (self.progress)(offset, self.size);
        }
        Ok(())
    }
}

/// A clone's copy as a [`SliceMove`]: its fill is `fill_from_view`; it
/// starts at 0 every time, and has nothing to switch, finish or abort (the
/// new volume is the clone job's to keep or discard).
pub struct CloneFill {
    view: Arc<dyn VolumeIo>,
    target: Arc<dyn VolumeIo>,
    size: u64,
}

impl CloneFill {
    pub fn new(view: Arc<dyn VolumeIo>, target: Arc<dyn VolumeIo>, size: u64) -> CloneFill {
        CloneFill { view, target, size }
    }
}

impl SliceMove for CloneFill {
    fn starts_at(&self) -> u64 {
        0
    }

    fn in_place(&self) -> bool {
        false
    }

    fn fill(
        &mut self,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(), DataPlaneError> {
        fill_from_view(
            self.view.as_ref(),
            self.target.as_ref(),
            self.size,
            options,
            progress,
        )
        .map(drop)
    }

    fn switch(&mut self) -> Result<(), DataPlaneError> {
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<(), DataPlaneError> {
        Ok(())
    }

    fn abort(self: Box<Self>) -> Result<(), DataPlaneError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volume::Extent;
    use crate::CopyStats;
    use std::sync::Mutex;

    /// A volume in memory (what `fill_from_view` needs of one).
    /// Its allocation: 64 KiB blocks, all-zero ones are holes. Reads are
    /// recorded.
    struct Memory {
        bytes: Mutex<Vec<u8>>,
        flushed: Mutex<bool>,
        reads: Mutex<Vec<(u64, usize)>>,
    }

    const BLOCK: usize = 64 * 1024;

    impl Memory {
        fn new(bytes: Vec<u8>) -> Arc<Memory> {
            Arc::new(Memory {
                bytes: Mutex::new(bytes),
                flushed: Mutex::new(false),
                reads: Mutex::new(Vec::new()),
            })
        }
    }

    impl VolumeIo for Memory {
        fn volume_id(&self) -> &str {
            "memory"
        }
        fn size(&self) -> u64 {
            self.bytes.lock().map(|b| b.len() as u64).unwrap_or(0)
        }
        fn set_size(&self, _size: u64) {}
        fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
            let bytes = self
                .bytes
                .lock()
                .map_err(|_| io::Error::other("poisoned"))?;
            let at = offset as usize;
            buf.copy_from_slice(&bytes[at..at + buf.len()]);
            self.reads
                .lock()
                .map_err(|_| io::Error::other("poisoned"))?
                .push((offset, buf.len()));
            Ok(())
        }
        fn extents(&self, offset: u64, len: u64) -> io::Result<Vec<Extent>> {
            let bytes = self
                .bytes
                .lock()
                .map_err(|_| io::Error::other("poisoned"))?;
            let mut extents: Vec<Extent> = Vec::new();
            let (mut at, end) = (offset as usize, (offset + len) as usize);
            while at < end {
                let next = ((at / BLOCK + 1) * BLOCK).min(end);
                let block = (at / BLOCK) * BLOCK;
                let block_end = (block + BLOCK).min(bytes.len());
                let hole = bytes[block..block_end].iter().all(|&b| b == 0);
                let n = (next - at) as u64;
                match extents.last_mut() {
                    Some(last) if last.hole == hole => last.len += n,
                    _ => extents.push(Extent { len: n, hole }),
                }
                at = next;
            }
            Ok(extents)
        }
        fn write(&self, offset: u64, data: &[u8], _fua: bool) -> io::Result<()> {
            let mut bytes = self
                .bytes
                .lock()
                .map_err(|_| io::Error::other("poisoned"))?;
            let at = offset as usize;
            bytes[at..at + data.len()].copy_from_slice(data);
            Ok(())
        }
        fn discard(&self, _offset: u64, _len: u64, _fua: bool) -> io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> io::Result<()> {
            *self
                .flushed
                .lock()
                .map_err(|_| io::Error::other("poisoned"))? = true;
            Ok(())
        }
    }

    /// Runs `fill_from_view`; the bytes written and the progress seen.
    fn fill(
        view: &Arc<Memory>,
        target: &Arc<Memory>,
        size: usize,
        options: &CopyOptions,
    ) -> (u64, Vec<(u64, u64)>) {
        let mut seen = Vec::new();
        let written = fill_from_view(
            view.as_ref(),
            target.as_ref(),
            size as u64,
            options,
            &mut |done, total| seen.push((done, total)),
        )
        .expect("clone");
        (written, seen)
    }

    #[test]
    fn a_clone_copies_data_extents_and_flushes() {
        let size = 3 * CLONE_PIECE + 4096;
        let mut source = vec![0u8; size];
        source[5] = 1;
        source[2 * CLONE_PIECE + 7] = 2;
        source[size - 1] = 3;
        let view = Memory::new(source.clone());
        let target = Memory::new(vec![0u8; size]);
        let stats = CopyStats::default();
        let options = CopyOptions {
            stats: stats.clone(),
            ..CopyOptions::default()
        };
        let (written, seen) = fill(&view, &target, size, &options);
        // Three data extents: the first and third pieces' first blocks, and
        // the last (short) block.
        assert_eq!(written, (2 * BLOCK + 4096) as u64);
        assert_eq!(stats.copied(), written);
        assert_eq!(*target.bytes.lock().expect("bytes"), source);
        assert!(*target.flushed.lock().expect("flushed"));
        assert_eq!(seen.last(), Some(&(size as u64, size as u64)));
    }

    #[test]
    fn a_clone_reads_only_the_data_extents_of_its_snapshot() {
        // 8 MiB with data in two blocks: one at the start, one straddling
        // a piece boundary.
        let size = 8 * CLONE_PIECE;
        let mut source = vec![0u8; size];
        source[10] = 1;
        source[3 * CLONE_PIECE - 5] = 2;
        let view = Memory::new(source.clone());
        let target = Memory::new(vec![0u8; size]);
        let (written, seen) = fill(&view, &target, size, &CopyOptions::default());
        assert_eq!(*target.bytes.lock().expect("bytes"), source);
        assert_eq!(written, 2 * BLOCK as u64);
        // Only the two data blocks were read, nothing of the holes.
        let reads = view.reads.lock().expect("reads").clone();
        assert_eq!(
            reads,
            [(0, BLOCK), ((3 * CLONE_PIECE - BLOCK) as u64, BLOCK)]
        );
        assert_eq!(seen.last(), Some(&(size as u64, size as u64)));
        assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0), "{seen:?}");
    }

    #[test]
    fn a_cancelled_clone_stops_before_its_next_piece() {
        let view = Memory::new(vec![1u8; 2 * CLONE_PIECE]);
        let target = Memory::new(vec![0u8; 2 * CLONE_PIECE]);
        let options = CopyOptions::default();
        options.cancel.cancel();
        let mut fill = CloneFill::new(view, target.clone(), 2 * CLONE_PIECE as u64);
        let result = fill.fill(&options, &mut |_, _| {});
        assert!(matches!(result, Err(DataPlaneError::Cancelled)));
        assert!(target.bytes.lock().expect("bytes").iter().all(|&b| b == 0));
    }
}
