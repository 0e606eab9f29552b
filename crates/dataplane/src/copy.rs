//! Copying a slice file: data extents only, zeros stay holes, throttled,
//! written to a partial file, made durable, verified and renamed; the
//! slice's snapshot files travel with it.

use crate::digest::{chunks, digest_open_file, BlockHasher, CHUNK};
use crate::extents::{advise_sequential, DataExtents, BLOCK};
use crate::fsutil::{create_dir_durable, fsync_dir, partial_path, remove_if_exists, RemoveOnDrop};
use crate::resume::{data_below, reopen_partial, Checkpoints};
use crate::snapshot::{
    delta_name, map_name, parse_snapshot_file, remove_snapshot_files, valid_map_len,
};
use crate::throttle::{Cancelled, Pacer};
use crate::{CopyOptions, CopyStats, Digest};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Why a copy failed; `local` adds media and slice names.
#[derive(Debug)]
pub(crate) enum CopyError {
    Source(&'static str, io::Error),
    Target(&'static str, io::Error),
    Cancelled,
    VerifyFailed,
}

impl From<Cancelled> for CopyError {
    fn from(_: Cancelled) -> Self {
        CopyError::Cancelled
    }
}

fn src(op: &'static str) -> impl FnOnce(io::Error) -> CopyError {
    move |e| CopyError::Source(op, e)
}

fn dst(op: &'static str) -> impl FnOnce(io::Error) -> CopyError {
    move |e| CopyError::Target(op, e)
}

/// Smallest I/O chunk when throttled (smaller chunks pace more smoothly).
const MIN_THROTTLED_CHUNK: u64 = 64 << 10;

/// Progress and pacing shared by every file of one slice copy.
struct Run<'a, 'p> {
    pacer: Pacer<'a>,
    /// Bytes per read (smaller when throttled, so pacing is smooth).
    chunk: u64,
    buf: Vec<u8>,
    done: u64,
    total: u64,
    progress: &'p mut dyn FnMut(u64, u64),
    stats: &'a CopyStats,
}

impl Run<'_, '_> {
    /// Copies the data extents of `source` (`len` bytes) to `target` from
    /// `from` on (0, or a checkpoint: the bytes below it are there
    /// already), makes it durable and checks it: a copy from the start
    /// against the digest of the bytes it read, a resumed one against the
    /// source's digest (its first part was not read by this run). Takes a
    /// checkpoint now and then when `checkpoints` are given. Returns the
    /// digest.
    fn copy_into(
        &mut self,
        source: &File,
        len: u64,
        target: &File,
        from: u64,
        mut checkpoints: Option<&mut Checkpoints<'_>>,
    ) -> Result<Digest, CopyError> {
        advise_sequential(source);
        let mut hasher = BlockHasher::new();
        let mut writeback = Writeback::new(target, from);
        for extent in DataExtents::from(source, from, len) {
            let (start, end) = extent.map_err(src("seek"))?;
            for (offset, n) in chunks(start, end, self.chunk) {
                self.pacer.check()?;
                let data = &mut self.buf[..n];
                source.read_exact_at(data, offset).map_err(src("read"))?;
                hasher
                    .feed(offset, data, |at, run| write_in_pieces(target, run, at))
                    .map_err(dst("write"))?;
                writeback.written_to(offset + n as u64);
                self.done += n as u64;
                self.total = self.total.max(self.done); // only if the source changed under us
                self.stats.add_copied(n as u64);
                (self.progress)(self.done, self.total);
                if let Some(c) = checkpoints.as_deref_mut().filter(|c| c.due()) {
                    c.take(target, offset + n as u64).map_err(dst("fsync"))?;
                }
                self.pacer.pace(self.stats.copied())?;
            }
        }
        self.pacer.check()?;
        // Make the copy durable, then verify it. Writeback was started as the
        // copy went, so little is left to flush; running the re-read alongside
        // the flush saved nothing measurable and stalled more often on hosts
        // that reclaim guest memory.
        target.sync_all().map_err(dst("fsync"))?;
        let digest = if from == 0 {
            hasher.finish(len)
        } else {
            digest_open_file(source, &mut self.buf).map_err(src("verify"))?
        };
        if let Some(c) = checkpoints {
            // A copy interrupted from now on (snapshot files, the switch)
            // need not copy the slice file again.
            c.take(target, len).map_err(dst("fsync"))?;
        }
        if digest_open_file(target, &mut self.buf).map_err(dst("verify"))? != digest {
            return Err(CopyError::VerifyFailed);
        }
        Ok(digest)
    }
}

/// Creates (empty, `len` bytes long) the partial file of a copy.
fn create_target(partial: &Path, len: u64) -> Result<File, CopyError> {
    let target = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(partial)
        .map_err(dst("create"))?;
    target.set_len(len).map_err(dst("create"))?;
    Ok(target)
}

/// Data bytes of a file (what a copy reads).
fn data_len(file: &File, len: u64) -> io::Result<u64> {
    let mut total = 0;
    for extent in DataExtents::new(file, len) {
        let (start, end) = extent?;
        total += end - start;
    }
    Ok(total)
}

/// A snapshot of the source slice, as files to copy.
struct SnapshotSource {
    id: u64,
    delta: Option<(File, u64)>,
    /// The map's well-formed prefix (a torn tail is left behind, as
    /// opening the snapshots would cut it off).
    map: Vec<u8>,
}

/// The snapshot files of the slice at `slice` (complete snapshots: those
/// with a map), oldest first.
fn snapshot_sources(slice: &Path, stem: &str) -> Result<Vec<SnapshotSource>, CopyError> {
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
        let map = fs::read(dir.join(map_name(stem, id))).map_err(src("read"))?;
        let keep = valid_map_len(&map).map_err(src("verify"))?;
        let delta = match File::open(dir.join(delta_name(stem, id))) {
            Ok(f) => {
                let len = f.metadata().map_err(src("stat"))?.len();
                Some((f, len))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(CopyError::Source("open", e)),
        };
        out.push(SnapshotSource {
            id,
            delta,
            map: map[..keep].to_vec(),
        });
    }
    Ok(out)
}

/// Writes `bytes` to a new file at `path`, makes it durable and reads it
/// back to check it.
fn write_verified(path: &Path, bytes: &[u8]) -> Result<(), CopyError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(dst("create"))?;
    file.write_all_at(bytes, 0).map_err(dst("write"))?;
    file.sync_all().map_err(dst("fsync"))?;
    let mut back = vec![0u8; bytes.len()];
    file.read_exact_at(&mut back, 0).map_err(dst("verify"))?;
    if back != bytes || file.metadata().map_err(dst("verify"))?.len() != bytes.len() as u64 {
        return Err(CopyError::VerifyFailed);
    }
    Ok(())
}

/// Copies the slice file `from` to `to` with its snapshot files (see
/// [`DataPlane::copy_slice`](crate::DataPlane::copy_slice)) and returns the
/// digest of the slice's contents.
///
/// Every file is written to a `*.partial` name, made durable and verified
/// (slice and deltas by logical digest, maps byte for byte); the snapshot
/// files are renamed into place first and the slice file last, because the
/// slice file's existence marks a complete copy. Stale snapshot files of
/// the slice on the target are removed first, so an older copy's snapshots
/// never mix with these. On failure everything this copy created goes.
pub(crate) fn copy_file(
    from: &Path,
    to: &Path,
    options: &CopyOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Digest, CopyError> {
    let pacer = Pacer::new(options.rate_limit, &options.cancel);
    pacer.check()?;
    if from == to {
        // Nothing to copy; removing "stale" target files would remove the source's.
        return digest_open_file(
            &File::open(from).map_err(src("open"))?,
            &mut vec![0u8; CHUNK],
        )
        .map_err(src("read"));
    }

    let source = File::open(from).map_err(src("open"))?;
    let len = source.metadata().map_err(src("stat"))?.len();
    let stem = from
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".slice"))
        .ok_or_else(|| CopyError::Source("open", io::Error::other("not a slice file name")))?
        .to_string();
    let snapshots = snapshot_sources(from, &stem)?;
    let mut total = data_len(&source, len).map_err(src("seek"))?;
    for s in &snapshots {
        if let Some((delta, delta_len)) = &s.delta {
            total += data_len(delta, *delta_len).map_err(src("seek"))?;
        }
    }

    let dir = to.parent().unwrap_or(Path::new("."));
    create_dir_durable(dir).map_err(dst("mkdir"))?;
    remove_snapshot_files(to, false).map_err(dst("delete"))?;

    // At most ~1/10 s of data per chunk when throttled, so pacing is smooth.
    let chunk = match pacer.rate() {
        Some(rate) => (rate / 10 / BLOCK * BLOCK).clamp(MIN_THROTTLED_CHUNK, CHUNK as u64),
        None => CHUNK as u64,
    };
    // The slice file resumes from its checkpoint when its partial file is
    // still there; snapshot files are small and copied whole every time.
    let partial = partial_path(to);
    let resume = &options.resume;
    let (target, from) = match reopen_partial(&partial, len, resume.from) {
        Some(file) => (file, resume.from),
        None => {
            resume.restart().map_err(dst("checkpoint"))?;
            (create_target(&partial, len)?, 0)
        }
    };
    let mut guard = RemoveOnDrop::new(&partial);
    let stats = &options.stats;
    stats.resumed(from);
    let done = data_below(&source, from).map_err(src("seek"))?;
    let mut run = Run {
        pacer,
        chunk,
        buf: vec![0u8; CHUNK],
        done,
        total,
        progress,
        stats,
    };
    (run.progress)(done, total);
    let mut checkpoints = Checkpoints::new(resume, stats);
    let digest = match run.copy_into(&source, len, &target, from, Some(&mut checkpoints)) {
        Err(CopyError::VerifyFailed) => {
            // The partial file goes, so a checkpoint recorded for it
            // is forgotten by the next run (it finds no file to resume).
            drop(guard); // removes the partial file
            remove_if_exists(to).map_err(dst("delete"))?;
            fsync_dir(dir).map_err(dst("fsync"))?;
            return Err(CopyError::VerifyFailed);
        }
        Err(CopyError::Cancelled) => {
            // Kept for the next run when a checkpoint says how far it is.
            if from > 0 || stats.checkpoint() > 0 {
                guard.disarm();
            }
            return Err(CopyError::Cancelled);
        }
        r => r?,
    };
    drop(target);

    // (partial guard, final name) of every snapshot file, deltas first:
    // a map makes its snapshot exist, so it must not land before its delta.
    let mut deltas = Vec::new();
    let mut maps = Vec::new();
    for s in &snapshots {
        if let Some((delta, delta_len)) = &s.delta {
            let final_path = dir.join(delta_name(&stem, s.id));
            let part = RemoveOnDrop::new(partial_path(&final_path));
            let target = create_target(part.path(), *delta_len)?;
            run.copy_into(delta, *delta_len, &target, 0, None)?;
            deltas.push((part, final_path));
        }
        let final_path = dir.join(map_name(&stem, s.id));
        let part = RemoveOnDrop::new(partial_path(&final_path));
        write_verified(part.path(), &s.map)?;
        maps.push((part, final_path));
    }
    run.pacer.check()?;

    // Placed snapshot files are removed again unless the slice lands too.
    let mut placed = Vec::new();
    for (mut part, final_path) in deltas.into_iter().chain(maps) {
        fs::rename(part.path(), &final_path).map_err(dst("rename"))?;
        part.disarm();
        placed.push(RemoveOnDrop::new(final_path));
    }
    fsync_dir(dir).map_err(dst("fsync"))?;
    fs::rename(&partial, to).map_err(dst("rename"))?;
    guard.disarm();
    for p in &mut placed {
        p.disarm();
    }
    fsync_dir(dir).map_err(dst("fsync"))?;
    Ok(digest)
}

/// Largest single write to the target. Page-cache writes of this size make
/// the kernel allocate small folios; 1 MiB writes ask for large ones, which on
/// hosts that hand free memory back (virtual machines with page reporting)
/// stall on compaction and refaults.
const WRITE_PIECE: usize = 128 << 10;

fn write_in_pieces(target: &File, run: &[u8], at: u64) -> io::Result<()> {
    let mut offset = at;
    for piece in run.chunks(WRITE_PIECE) {
        target.write_all_at(piece, offset)?;
        offset += piece.len() as u64;
    }
    Ok(())
}

/// Bytes of target written between starts of writeback.
const WRITEBACK_STEP: u64 = 16 << 20;

/// Starts writeback of the target as the copy goes (`sync_file_range`), so
/// the device works while we copy and the final fsync has little left to do.
struct Writeback<'a> {
    file: &'a File,
    started_to: u64,
}

impl<'a> Writeback<'a> {
    /// Writeback of `file` from `from` on.
    fn new(file: &'a File, from: u64) -> Self {
        Writeback {
            file,
            started_to: from,
        }
    }

    /// Everything before `offset` has been written.
    fn written_to(&mut self, offset: u64) {
        if offset < self.started_to + WRITEBACK_STEP {
            return;
        }
        let (Ok(from), Ok(n)) = (
            libc::off64_t::try_from(self.started_to),
            libc::off64_t::try_from(offset - self.started_to),
        ) else {
            return;
        };
        // SAFETY: plain syscall on a valid, open descriptor; no memory is
        // passed. Only a hint: the final fsync reports any write error.
        unsafe {
            libc::sync_file_range(self.file.as_raw_fd(), from, n, libc::SYNC_FILE_RANGE_WRITE);
        }
        self.started_to = offset;
    }
}
