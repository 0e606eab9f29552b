//! Copying a slice file that is not open for I/O (with the slice copier):
//! data extents only, zeros stay holes, throttled, written to a partial
//! file, made durable, verified by digest and renamed; the slice's snapshot
//! files travel with it.

pub(crate) use crate::copier::CopyError;
use crate::copier::{
    Copier, CopySource, PartFiles, SnapshotCopy, SnapshotFilesAt, Unheld, Verify, SNAPSHOT_BATCH,
};
use crate::digest::{digest_open_file, CHUNK};
use crate::fsutil::{
    create_dir_durable, fsync_dir, partial_path, remove_if_exists, slice_stem, RemoveOnDrop,
};
use crate::resume::{reopen_partial, Checkpoints};
use crate::snapshot::remove_snapshot_files;
use crate::{CopyOptions, Digest};
use std::fs::{self, File};
use std::io;
use std::path::Path;

/// Creates (empty, `len` bytes long) the partial file of a copy.
fn create_target(partial: &Path, len: u64) -> Result<File, CopyError> {
    let target = crate::copier::create_partial(partial).map_err(CopyError::target("create"))?;
    target.set_len(len).map_err(CopyError::target("create"))?;
    Ok(target)
}

/// Copies the slice file `from` to `to` with its snapshot files (see
/// [`DataPlane::copy_slice`](crate::DataPlane::copy_slice)) and returns the
/// digest of the slice's contents.
///
/// Every file is written to a `*.partial` name, made durable and verified
/// (the slice by logical digest, snapshot files by reading back what was
/// written); the snapshot files are renamed into place first and the slice
/// file last, because the slice file's existence marks a complete copy.
/// Stale snapshot files of the slice on the target are removed first, so
/// an older copy's snapshots never mix with these. On failure everything
/// this copy created goes.
pub(crate) fn copy_file(
    from: &Path,
    to: &Path,
    options: &CopyOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Digest, CopyError> {
    let src = CopyError::source;
    let dst = CopyError::target;
    let mut copier = Copier::new(options, Verify::Digest, progress);
    copier.check()?;
    if from == to {
        // Nothing to copy; removing "stale" target files would remove the source's.
        return digest_open_file(
            &File::open(from).map_err(src("open"))?,
            &mut vec![0u8; CHUNK],
        )
        .map_err(src("read"));
    }

    let source = File::open(from).map_err(src("open"))?;
    let len = source.size().map_err(src("stat"))?;
    let stem = slice_stem(from)
        .ok_or_else(|| CopyError::Source("open", io::Error::other("not a slice file name")))?
        .to_string();
    let snapshots = SnapshotFilesAt::read(from, &stem)?;

    let dir = to.parent().unwrap_or(Path::new("."));
    create_dir_durable(dir).map_err(dst("mkdir"))?;
    remove_snapshot_files(to, false).map_err(dst("delete"))?;

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
    copier.measure(&source, from, snapshots.data_bytes())?;
    copier.report();
    let mut checkpoints = Checkpoints::new(resume, stats);
    let copied = copier.copy_data(&source, &target, from, Some(&mut checkpoints), &mut Unheld);
    let digest = match copied {
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
        Ok(Some(digest)) => digest,
        Ok(None) => return Err(CopyError::VerifyFailed), // a digest copy has one
        Err(e) => return Err(e),
    };
    drop(target);

    let mut snapshot_copy = SnapshotCopy::start(&snapshots, Box::new(PartFiles::new(dir, &stem)))?;
    snapshot_copy.fetch_maps(&snapshots)?;
    loop {
        copier.check()?;
        let copied = snapshot_copy.copy_chunks(&snapshots, SNAPSHOT_BATCH)?;
        if copied == 0 {
            break;
        }
        copier.copied(copied)?;
    }
    copier.check()?;
    // Placed snapshot files are removed again unless the slice lands too.
    let mut placed = snapshot_copy.place()?;
    fs::rename(&partial, to).map_err(dst("rename"))?;
    guard.disarm();
    for p in &mut placed {
        p.disarm();
    }
    fsync_dir(dir).map_err(dst("fsync"))?;
    Ok(digest)
}
