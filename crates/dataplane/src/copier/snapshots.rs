//! Copying a slice's snapshot files, for offline copies and live moves
//! alike: map bytes are fetched from the source's durable maps, the delta
//! chunks they name are copied, each piece verified by reading it back, all
//! into parts ([`SnapshotParts`]: `*.partial` files next to the target
//! slice, on this host or on the target's storage node) that
//! [`SnapshotCopy::place`] puts in place. The older snapshots never change
//! during a live copy and the newest only grows, so fetching again catches
//! up with the saves made meanwhile.

use super::CopyError;
use crate::digest::is_zero;
use crate::extents::BLOCK;
use crate::fsutil::{fsync_dir, partial_path, RemoveOnDrop};
use crate::snapshot::{
    delta_name, map_name, parse_snapshot_file, read_up_to, valid_map_len, MapTail,
};
use crate::COW_CHUNK;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use svs_sliceproto::SnapshotPart;

/// Delta chunks copied between two checks of the cancel token and the
/// rate (1 MiB).
pub(crate) const SNAPSHOT_BATCH: usize = 16;

/// Where a copy reads a slice's snapshots from.
pub(crate) trait SnapshotSource {
    /// Ids of every snapshot with files, oldest first.
    fn snapshot_ids(&self) -> io::Result<Vec<u64>>;

    /// Snapshot `id`'s map from byte `from` to its durable end.
    fn snapshot_map_since(&self, id: u64, from: u64) -> io::Result<MapTail>;

    /// Reads chunk `chunk` of snapshot `id`'s saved data into `buf`
    /// ([`COW_CHUNK`] bytes; past the delta's end reads as zeros).
    fn read_snapshot_chunk(&self, id: u64, chunk: u64, buf: &mut [u8]) -> io::Result<()>;
}

/// One snapshot of a slice file that is not open for I/O.
struct SnapshotAt {
    id: u64,
    delta: Option<File>,
    /// The map's well-formed prefix (a torn tail is left behind, as opening
    /// the snapshots would cut it off).
    map: Vec<u8>,
}

/// The snapshot files of a slice file that is not open for I/O (an offline
/// copy's source): the complete snapshots (those with a map), their maps
/// read once.
pub(crate) struct SnapshotFilesAt(Vec<SnapshotAt>);

impl SnapshotFilesAt {
    /// The snapshots of the slice file `slice`, named `<stem>.slice`.
    pub(crate) fn read(slice: &Path, stem: &str) -> Result<SnapshotFilesAt, CopyError> {
        let src = CopyError::source;
        let dir = slice.parent().unwrap_or(Path::new("."));
        let mut ids = Vec::new();
        for entry in fs::read_dir(dir).map_err(src("list"))? {
            let entry = entry.map_err(src("list"))?;
            let name = entry.file_name();
            if let Some((id, "map")) = name.to_str().and_then(|n| parse_snapshot_file(stem, n)) {
                ids.push(id);
            }
        }
        ids.sort_unstable();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let mut map = fs::read(dir.join(map_name(stem, id))).map_err(src("read"))?;
            map.truncate(valid_map_len(&map).map_err(src("verify"))?);
            let delta = match File::open(dir.join(delta_name(stem, id))) {
                Ok(f) => Some(f),
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(e) => return Err(CopyError::Source("open", e)),
            };
            out.push(SnapshotAt { id, delta, map });
        }
        Ok(SnapshotFilesAt(out))
    }

    /// Bytes of saved data the maps name (what copying them copies).
    pub(crate) fn data_bytes(&self) -> u64 {
        self.0
            .iter()
            .map(|s| {
                MapTail::new(s.map.clone(), 0, s.map.len() as u64)
                    .data_chunks
                    .len() as u64
            })
            .sum::<u64>()
            * COW_CHUNK
    }

    fn get(&self, id: u64) -> io::Result<&SnapshotAt> {
        self.0
            .iter()
            .find(|s| s.id == id)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no snapshot {id}")))
    }
}

impl SnapshotSource for SnapshotFilesAt {
    fn snapshot_ids(&self) -> io::Result<Vec<u64>> {
        Ok(self.0.iter().map(|s| s.id).collect())
    }

    fn snapshot_map_since(&self, id: u64, from: u64) -> io::Result<MapTail> {
        let map = &self.get(id)?.map;
        let bytes = map.get(from as usize..).unwrap_or_default().to_vec();
        Ok(MapTail::new(bytes, from, map.len() as u64))
    }

    fn read_snapshot_chunk(&self, id: u64, chunk: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut done = 0;
        if let Some(delta) = &self.get(id)?.delta {
            done = read_up_to(delta, buf, chunk * COW_CHUNK)?;
        }
        buf[done..].fill(0);
        Ok(())
    }
}

/// Creates (empty) the partial file of a copy at `path`.
pub(crate) fn create_partial(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
}

/// Where a copy writes a slice's snapshot files until they are put in
/// place: `*.partial` files next to the target slice on this host
/// ([`PartFiles`]), or on the target's storage node (its
/// `WriteSnapshotPart` and `PlaceSnapshotParts`). Parts not put in place
/// go when this is dropped.
pub(crate) trait SnapshotParts: Send {
    /// Makes snapshot `id`'s map and delta, empty.
    fn start(&mut self, id: u64) -> io::Result<()>;
    /// Writes `data` at `offset` of snapshot `id`'s `part`.
    fn write(&self, id: u64, part: SnapshotPart, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Reads back what `part` holds at `offset`: the bytes read (fewer at
    /// its end).
    fn read(&self, id: u64, part: SnapshotPart, offset: u64, buf: &mut [u8]) -> io::Result<usize>;
    /// Makes every part durable and puts it in place, deltas before maps
    /// (a map makes its snapshot exist). The files placed on this host are
    /// removed when the returned guards drop, unless disarmed.
    fn place(self: Box<Self>, ids: &[u64]) -> io::Result<Vec<RemoveOnDrop>>;
}

/// Snapshot parts as `*.partial` files next to the slice `<stem>.slice` in
/// a directory of this host.
pub(crate) struct PartFiles {
    dir: PathBuf,
    stem: String,
    files: Vec<PartPair>,
}

struct PartPair {
    id: u64,
    delta: File,
    map: File,
    delta_part: RemoveOnDrop,
    map_part: RemoveOnDrop,
}

impl PartFiles {
    pub(crate) fn new(dir: &Path, stem: &str) -> PartFiles {
        PartFiles {
            dir: dir.to_path_buf(),
            stem: stem.to_string(),
            files: Vec::new(),
        }
    }

    fn file(&self, id: u64, part: SnapshotPart) -> io::Result<&File> {
        let pair =
            self.files.iter().find(|p| p.id == id).ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("no snapshot {id}"))
            })?;
        Ok(match part {
            SnapshotPart::Map => &pair.map,
            SnapshotPart::Delta => &pair.delta,
        })
    }
}

impl SnapshotParts for PartFiles {
    fn start(&mut self, id: u64) -> io::Result<()> {
        let delta_part =
            RemoveOnDrop::new(partial_path(&self.dir.join(delta_name(&self.stem, id))));
        let delta = create_partial(delta_part.path())?;
        let map_part = RemoveOnDrop::new(partial_path(&self.dir.join(map_name(&self.stem, id))));
        let map = create_partial(map_part.path())?;
        self.files.push(PartPair {
            id,
            delta,
            map,
            delta_part,
            map_part,
        });
        Ok(())
    }

    fn write(&self, id: u64, part: SnapshotPart, offset: u64, data: &[u8]) -> io::Result<()> {
        self.file(id, part)?.write_all_at(data, offset)
    }

    fn read(&self, id: u64, part: SnapshotPart, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        read_up_to(self.file(id, part)?, buf, offset)
    }

    fn place(self: Box<Self>, _ids: &[u64]) -> io::Result<Vec<RemoveOnDrop>> {
        for f in &self.files {
            f.delta.sync_all()?;
            f.map.sync_all()?;
        }
        let PartFiles { dir, stem, files } = *self;
        let mut deltas = Vec::new();
        let mut maps = Vec::new();
        for f in files {
            deltas.push((f.delta_part, dir.join(delta_name(&stem, f.id))));
            maps.push((f.map_part, dir.join(map_name(&stem, f.id))));
        }
        let mut placed = Vec::new();
        for (mut part, final_path) in deltas.into_iter().chain(maps) {
            fs::rename(part.path(), &final_path)?;
            part.disarm();
            placed.push(RemoveOnDrop::new(final_path));
        }
        fsync_dir(&dir)?;
        Ok(placed)
    }
}

/// The snapshot files of a slice being copied (see the module docs).
pub(crate) struct SnapshotCopy {
    files: Vec<SnapshotFiles>,
    parts: Box<dyn SnapshotParts>,
    buf: Vec<u8>,
    check: Vec<u8>,
}

struct SnapshotFiles {
    id: u64,
    /// Bytes of the source's map copied so far.
    map_len: u64,
    /// Chunks that copied map records put in the delta, not copied yet.
    pending: Vec<u64>,
}

impl SnapshotCopy {
    /// Starts the parts of every snapshot of `snaps` in `parts`.
    pub(crate) fn start<S: SnapshotSource + ?Sized>(
        snaps: &S,
        mut parts: Box<dyn SnapshotParts>,
    ) -> Result<SnapshotCopy, CopyError> {
        let mut files = Vec::new();
        for id in snaps.snapshot_ids().map_err(CopyError::source("list"))? {
            parts.start(id).map_err(CopyError::target("create"))?;
            files.push(SnapshotFiles {
                id,
                map_len: 0,
                pending: Vec::new(),
            });
        }
        Ok(SnapshotCopy {
            files,
            parts,
            buf: vec![0u8; COW_CHUNK as usize],
            check: vec![0u8; COW_CHUNK as usize],
        })
    }

    /// Appends the map records the source made durable since the last
    /// fetch, each read back; returns how many chunks they added to copy.
    pub(crate) fn fetch_maps<S: SnapshotSource + ?Sized>(
        &mut self,
        snaps: &S,
    ) -> Result<usize, CopyError> {
        let mut added = 0;
        for f in &mut self.files {
            // A source may answer a long map a page at a time (a storage
            // node does): asked again until it has nothing more.
            loop {
                let tail = snaps
                    .snapshot_map_since(f.id, f.map_len)
                    .map_err(CopyError::source("read"))?;
                if tail.bytes.is_empty() {
                    break;
                }
                if tail.end <= f.map_len {
                    return Err(CopyError::Source(
                        "read",
                        io::Error::new(io::ErrorKind::InvalidData, "a map page that ends nowhere"),
                    ));
                }
                self.parts
                    .write(f.id, SnapshotPart::Map, f.map_len, &tail.bytes)
                    .map_err(CopyError::target("write"))?;
                let mut back = vec![0u8; tail.bytes.len()];
                let got = self
                    .parts
                    .read(f.id, SnapshotPart::Map, f.map_len, &mut back)
                    .map_err(CopyError::target("verify"))?;
                if got != back.len() || back != tail.bytes {
                    return Err(CopyError::VerifyFailed);
                }
                f.map_len = tail.end;
                added += tail.data_chunks.len();
                f.pending.extend(tail.data_chunks);
            }
        }
        Ok(added)
    }

    /// Copies up to `limit` pending chunks (all-zero blocks left holes),
    /// each read back; returns the bytes copied.
    pub(crate) fn copy_chunks<S: SnapshotSource + ?Sized>(
        &mut self,
        snaps: &S,
        limit: usize,
    ) -> Result<u64, CopyError> {
        let mut copied = 0usize;
        for f in &mut self.files {
            while copied < limit {
                let Some(chunk) = f.pending.pop() else { break };
                let at = chunk * COW_CHUNK;
                snaps
                    .read_snapshot_chunk(f.id, chunk, &mut self.buf)
                    .map_err(CopyError::source("read"))?;
                for (i, block) in self.buf.chunks(BLOCK as usize).enumerate() {
                    if !is_zero(block) {
                        self.parts
                            .write(f.id, SnapshotPart::Delta, at + (i as u64) * BLOCK, block)
                            .map_err(CopyError::target("write"))?;
                    }
                }
                let done = self
                    .parts
                    .read(f.id, SnapshotPart::Delta, at, &mut self.check)
                    .map_err(CopyError::target("verify"))?;
                self.check[done..].fill(0);
                if self.check != self.buf {
                    return Err(CopyError::VerifyFailed);
                }
                copied += 1;
            }
        }
        Ok(copied as u64 * COW_CHUNK)
    }

    /// Makes every file durable and puts it in place, deltas before maps
    /// (a map makes its snapshot exist). The files placed on this host are
    /// removed when the returned guards drop, unless disarmed.
    pub(crate) fn place(self) -> Result<Vec<RemoveOnDrop>, CopyError> {
        let ids: Vec<u64> = self.files.iter().map(|f| f.id).collect();
        self.parts.place(&ids).map_err(CopyError::target("place"))
    }

    /// [`SnapshotCopy::fetch_maps`] with the error as `io::Error`.
    pub(crate) fn fetch<S: SnapshotSource + ?Sized>(&mut self, snaps: &S) -> io::Result<usize> {
        self.fetch_maps(snaps).map_err(CopyError::into_io)
    }

    /// [`SnapshotCopy::copy_chunks`] with the error as `io::Error`.
    pub(crate) fn copy_pending<S: SnapshotSource + ?Sized>(
        &mut self,
        snaps: &S,
        limit: usize,
    ) -> io::Result<u64> {
        self.copy_chunks(snaps, limit).map_err(CopyError::into_io)
    }

    /// [`SnapshotCopy::place`] with the error as `io::Error`.
    pub(crate) fn finish(self) -> io::Result<Vec<RemoveOnDrop>> {
        self.place().map_err(CopyError::into_io)
    }
}

impl CopyError {
    /// The I/O error of a failed snapshot copy (a mismatch read back is
    /// `InvalidData`).
    pub(crate) fn into_io(self) -> io::Error {
        match self {
            CopyError::Source(_, e) | CopyError::Target(_, e) => e,
            CopyError::VerifyFailed => io::Error::new(
                io::ErrorKind::InvalidData,
                "snapshot file read back differs from the source",
            ),
            CopyError::Cancelled => io::Error::other("copy cancelled"),
        }
    }
}
