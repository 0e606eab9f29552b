//! The copy of a slice's snapshot files during a live move (see the module
//! docs of `volume`).

use super::device::SliceDevice;
use crate::digest::is_zero;
use crate::extents::BLOCK;
use crate::fsutil::{fsync_dir, partial_path, RemoveOnDrop};
use crate::snapshot::{delta_name, map_name};
use crate::COW_CHUNK;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The snapshot files of a slice being copied while in use (see the module
/// docs): map bytes are fetched from the source's durable maps, the chunks
/// they name are copied from its deltas, each piece verified by reading it
/// back, all into `*.partial` files placed by [`SnapshotCopy::finish`].
pub(super) struct SnapshotCopy {
    pub(super) files: Vec<SnapshotFiles>,
    pub(super) buf: Vec<u8>,
    pub(super) check: Vec<u8>,
}

pub(super) struct SnapshotFiles {
    pub(super) id: u64,
    pub(super) delta: File,
    pub(super) map: File,
    /// Bytes of the source's map copied so far.
    pub(super) map_len: u64,
    /// Chunks that copied map records put in the delta, not copied yet.
    pub(super) pending: Vec<u64>,
    pub(super) delta_part: RemoveOnDrop,
    pub(super) map_part: RemoveOnDrop,
    pub(super) delta_final: PathBuf,
    pub(super) map_final: PathBuf,
}

pub(super) fn create_partial(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
}

pub(super) fn copy_differs(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{what} read back differs from the source"),
    )
}

impl SnapshotCopy {
    /// Creates the partial files for every snapshot of `snaps`, named for
    /// the slice `<stem>.slice` in `dir`.
    pub(super) fn start(
        snaps: &dyn SliceDevice,
        dir: &Path,
        stem: &str,
    ) -> io::Result<SnapshotCopy> {
        let mut files = Vec::new();
        for id in snaps.snapshot_ids()? {
            let delta_final = dir.join(delta_name(stem, id));
            let map_final = dir.join(map_name(stem, id));
            let delta_part = RemoveOnDrop::new(partial_path(&delta_final));
            let delta = create_partial(delta_part.path())?;
            let map_part = RemoveOnDrop::new(partial_path(&map_final));
            let map = create_partial(map_part.path())?;
            files.push(SnapshotFiles {
                id,
                delta,
                map,
                map_len: 0,
                pending: Vec::new(),
                delta_part,
                map_part,
                delta_final,
                map_final,
            });
        }
        Ok(SnapshotCopy {
            files,
            buf: vec![0u8; COW_CHUNK as usize],
            check: vec![0u8; COW_CHUNK as usize],
        })
    }

    /// Appends the map records the source made durable since the last
    /// fetch; returns how many chunks they added to copy.
    pub(super) fn fetch(&mut self, snaps: &dyn SliceDevice) -> io::Result<usize> {
        let mut added = 0;
        for f in &mut self.files {
            let tail = snaps.snapshot_map_since(f.id, f.map_len)?;
            if tail.bytes.is_empty() {
                continue;
            }
            f.map.write_all_at(&tail.bytes, f.map_len)?;
            let mut back = vec![0u8; tail.bytes.len()];
            f.map.read_exact_at(&mut back, f.map_len)?;
            if back != tail.bytes {
                return Err(copy_differs("snapshot map"));
            }
            f.map_len = tail.end;
            added += tail.data_chunks.len();
            f.pending.extend(tail.data_chunks);
        }
        Ok(added)
    }

    /// Copies up to `limit` pending chunks; returns the bytes copied.
    pub(super) fn copy_pending(
        &mut self,
        snaps: &dyn SliceDevice,
        limit: usize,
    ) -> io::Result<u64> {
        let mut copied = 0usize;
        for f in &mut self.files {
            while copied < limit {
                let Some(chunk) = f.pending.pop() else { break };
                let at = chunk * COW_CHUNK;
                snaps.read_snapshot_chunk(f.id, chunk, &mut self.buf)?;
                for (i, block) in self.buf.chunks(BLOCK as usize).enumerate() {
                    if !is_zero(block) {
                        f.delta.write_all_at(block, at + (i as u64) * BLOCK)?;
                    }
                }
                let mut done = 0;
                while done < self.check.len() {
                    match f.delta.read_at(&mut self.check[done..], at + done as u64)? {
                        0 => break,
                        n => done += n,
                    }
                }
                self.check[done..].fill(0);
                if self.check != self.buf {
                    return Err(copy_differs("snapshot delta"));
                }
                copied += 1;
            }
        }
        Ok(copied as u64 * COW_CHUNK)
    }

    /// Makes every file durable and renames it into place, deltas before
    /// maps (a map makes its snapshot exist). The placed files are removed
    /// when the returned guards drop, unless disarmed.
    pub(super) fn finish(self, dir: &Path) -> io::Result<Vec<RemoveOnDrop>> {
        for f in &self.files {
            f.delta.sync_all()?;
            f.map.sync_all()?;
        }
        let (deltas, maps): (Vec<_>, Vec<_>) = self
            .files
            .into_iter()
            .map(|f| ((f.delta_part, f.delta_final), (f.map_part, f.map_final)))
            .unzip();
        let mut placed = Vec::new();
        for (mut part, final_path) in deltas.into_iter().chain(maps) {
            std::fs::rename(part.path(), &final_path)?;
            part.disarm();
            placed.push(RemoveOnDrop::new(final_path));
        }
        fsync_dir(dir)?;
        Ok(placed)
    }
}
