//! Copying a slice file: data extents only, zeros stay holes, throttled,
//! written to a partial file, made durable, renamed and verified.

use crate::digest::{chunks, digest_open_file, BlockHasher, CHUNK};
use crate::extents::{advise_sequential, DataExtents, BLOCK};
use crate::fsutil::{create_dir_durable, fsync_dir, partial_path, remove_if_exists, RemoveOnDrop};
use crate::throttle::{Cancelled, Pacer};
use crate::{CopyOptions, Digest};
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

/// Copies `from` to `to` (see [`DataPlane::copy_slice`](crate::DataPlane::copy_slice))
/// and returns the digest of the copied contents.
pub(crate) fn copy_file(
    from: &Path,
    to: &Path,
    options: &CopyOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Digest, CopyError> {
    let pacer = Pacer::new(options.rate_limit, &options.cancel);
    pacer.check()?;

    let source = File::open(from).map_err(src("open"))?;
    let len = source.metadata().map_err(src("stat"))?.len();
    advise_sequential(&source);
    let mut total = 0;
    for extent in DataExtents::new(&source, len) {
        let (start, end) = extent.map_err(src("seek"))?;
        total += end - start;
    }

    let dir = to.parent().unwrap_or(Path::new("."));
    create_dir_durable(dir).map_err(dst("mkdir"))?;
    let partial = partial_path(to);
    let mut guard = RemoveOnDrop::new(&partial);
    let target = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&partial)
        .map_err(dst("create"))?;
    target.set_len(len).map_err(dst("create"))?;

    // At most ~1/10 s of data per chunk when throttled, so pacing is smooth.
    let chunk = match pacer.rate() {
        Some(rate) => (rate / 10 / BLOCK * BLOCK).clamp(MIN_THROTTLED_CHUNK, CHUNK as u64),
        None => CHUNK as u64,
    };
    let mut buf = vec![0u8; CHUNK];
    let mut hasher = BlockHasher::new();
    let mut writeback = Writeback::new(&target);
    let mut done = 0u64;
    progress(0, total);
    for extent in DataExtents::new(&source, len) {
        let (start, end) = extent.map_err(src("seek"))?;
        for (offset, n) in chunks(start, end, chunk) {
            pacer.check()?;
            let data = &mut buf[..n];
            source.read_exact_at(data, offset).map_err(src("read"))?;
            hasher
                .feed(offset, data, |at, run| write_in_pieces(&target, run, at))
                .map_err(dst("write"))?;
            writeback.written_to(offset + n as u64);
            done += n as u64;
            total = total.max(done); // only if the source changed under us
            progress(done, total);
            pacer.pace(done)?;
        }
    }
    let digest = hasher.finish(len);
    pacer.check()?;

    // Make the copy durable, then verify it. Writeback was started as the
    // copy went, so little is left to flush; running the re-read alongside
    // the flush saved nothing measurable and stalled more often on hosts
    // that reclaim guest memory. Only a verified copy is renamed into place.
    target.sync_all().map_err(dst("fsync"))?;
    if digest_open_file(&target, &mut buf).map_err(dst("verify"))? != digest {
        drop(guard); // removes the partial file
        remove_if_exists(to).map_err(dst("delete"))?;
        fsync_dir(dir).map_err(dst("fsync"))?;
        return Err(CopyError::VerifyFailed);
    }
    drop(target);
    fs::rename(&partial, to).map_err(dst("rename"))?;
    guard.disarm();
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
    fn new(file: &'a File) -> Self {
        Writeback {
            file,
            started_to: 0,
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
