//! The offline copy of a slice ([`DataPlane::copy_slice`]) to or from a
//! storage node's medium: the source read through its slice device (a file
//! here, or requests to its node), the target a partial file renamed into
//! place (this host) or a slice created on the node under its final name
//! (fenced writes with `options.epoch`; deleted again if the copy fails).
//! Verified by digest: the target read back and hashed as the source was.
//!
//! Checkpoints as a local copy takes them: the target is made durable
//! before each is recorded, and a copy given one (`options.resume.from`)
//! resumes there when its target is still there with the source's length
//! (the partial file on this host, the slice on the node), what lies
//! beyond the checkpoint cleared first; else the checkpoint is forgotten
//! before anything is written and the copy starts from 0. An interrupted
//! copy (cancelled) with a checkpoint keeps its target; a failed one
//! removes it.
//!
//! Not yet: snapshot files (a slice with snapshots is refused).

use std::io;
use std::sync::Arc;

use super::ClusterMedia;
use crate::copier::{create_partial, Copier, CopyError, CopySource, CopyTarget, Unheld, Verify};
use crate::fsutil::{create_dir_durable, fsync_dir, partial_path, RemoveOnDrop};
use crate::resume::{reopen_partial, Checkpoints};
use crate::snapshot::remove_snapshot_files;
use crate::volume::{is_media_failure, label, Front, SliceDevice, SliceMedia};
use crate::{CopyOptions, DataPlaneError, Digest, SliceKey};

/// A slice device read by the copier.
struct DeviceSource<'a>(&'a dyn SliceDevice);

impl CopySource for DeviceSource<'_> {
    fn size(&self) -> io::Result<u64> {
        CopySource::size(self.0)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        CopySource::read_at(self.0, buf, offset)
    }

    fn next_data(&self, from: u64, len: u64) -> io::Result<Option<(u64, u64)>> {
        CopySource::next_data(self.0, from, len)
    }

    fn data_bytes(&self, from: u64, len: u64) -> io::Result<u64> {
        CopySource::data_bytes(self.0, from, len)
    }
}

/// See the module docs.
pub(super) fn copy_with_node(
    media: &ClusterMedia,
    from_medium: &str,
    to_medium: &str,
    slice: &SliceKey,
    options: &CopyOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Digest, DataPlaneError> {
    let io_err = |medium: &str, op: &'static str| {
        let medium = medium.to_string();
        move |source: io::Error| DataPlaneError::Io {
            medium,
            slice: label(slice),
            op,
            source,
        }
    };
    let front = Arc::new(Front::new(&slice.volume_id, options.epoch));
    let source = SliceMedia::open_slice(media, from_medium, slice, &front).ok_or_else(|| {
        io_err(from_medium, "open")(io::Error::new(
            io::ErrorKind::NotFound,
            "the slice cannot be opened",
        ))
    })?;
    let has_snapshots = !source
        .snapshot_ids()
        .map_err(io_err(from_medium, "list snapshots"))?
        .is_empty();
    if has_snapshots {
        return Err(DataPlaneError::SnapshotsCannotMove {
            slice: label(slice),
            from: from_medium.to_string(),
            to: to_medium.to_string(),
        });
    }
    let read_from = DeviceSource(source.as_ref());
    let mut copier = Copier::new(options, Verify::Digest, progress);
    let failed = |e: CopyError| match e {
        CopyError::Source(op, e) => {
            // The copy a movement reads from failed: as a read would.
            if is_media_failure(&e) {
                SliceMedia::saw_io_error(media, from_medium, slice, &e);
            }
            io_err(from_medium, op)(e)
        }
        CopyError::Target(op, e) => io_err(to_medium, op)(e),
        CopyError::Cancelled => DataPlaneError::Cancelled,
        CopyError::VerifyFailed => DataPlaneError::VerifyFailed {
            slice: label(slice),
            from: from_medium.to_string(),
            to: to_medium.to_string(),
        },
    };
    copier.check().map_err(failed)?;
    if from_medium == to_medium {
        // Nothing to copy: the slice is where it goes.
        let mut buf = vec![0u8; crate::digest::CHUNK];
        return read_from
            .digest(&mut buf)
            .map_err(io_err(from_medium, "read"));
    }
    let len = read_from.size().map_err(io_err(from_medium, "stat"))?;
    let resume = &options.resume;
    let stats = &options.stats;

    if media.is_node_medium(to_medium) {
        // The node's slice of an interrupted run, at the source's length:
        // resumed at the checkpoint, what lies beyond it cleared (copied
        // after the checkpoint, it may differ from the source now).
        let resumable = match resume.from {
            0 => None,
            from => media
                .open_node_target(to_medium, slice, &front)?
                .filter(|(_, size)| *size == len && from <= len)
                .map(|(target, _)| target),
        };
        let (target, from) = match resumable {
            Some(target) => {
                if resume.from < len {
                    target
                        .punch_hole(resume.from, len - resume.from)
                        .map_err(io_err(to_medium, "discard"))?;
                }
                (target, resume.from)
            }
            None => {
                resume.restart().map_err(io_err(to_medium, "checkpoint"))?;
                (media.create_node_target(to_medium, slice, len, &front)?, 0)
            }
        };
        stats.resumed(from);
        copier.measure(&read_from, from, 0).map_err(failed)?;
        copier.report();
        let mut checkpoints = Checkpoints::new(resume, stats);
        let copied = copier.copy_data(
            &read_from,
            target.as_ref(),
            from,
            Some(&mut checkpoints),
            &mut Unheld,
        );
        return match copied {
            Ok(Some(digest)) => {
                media.local.forget_lost_copy(to_medium, slice);
                Ok(digest)
            }
            // Kept for the next run when a checkpoint says how far it is.
            Err(CopyError::Cancelled) if from > 0 || stats.checkpoint() > 0 => {
                Err(DataPlaneError::Cancelled)
            }
            outcome => {
                // No half-copied slice stays on the node.
                if let Err(e) = target.remove() {
                    tracing::warn!(error = %e, medium = to_medium,
                        "a failed copy's slice could not be removed from its node");
                }
                match outcome {
                    Err(e) => Err(failed(e)),
                    _ => Err(failed(CopyError::VerifyFailed)),
                }
            }
        };
    }

    // To a medium of this host: a partial file, renamed into place.
    let path = media.local.slice_path(to_medium, slice)?;
    let dir = path.parent().map(|d| d.to_path_buf()).unwrap_or_default();
    create_dir_durable(&dir).map_err(io_err(to_medium, "mkdir"))?;
    remove_snapshot_files(&path, false).map_err(io_err(to_medium, "delete"))?;
    let partial = partial_path(&path);
    let (file, from) = match reopen_partial(&partial, len, resume.from) {
        Some(file) => (file, resume.from),
        None => {
            resume.restart().map_err(io_err(to_medium, "checkpoint"))?;
            let file = create_partial(&partial).map_err(io_err(to_medium, "create"))?;
            file.set_len(len).map_err(io_err(to_medium, "create"))?;
            (file, 0)
        }
    };
    let mut guard = RemoveOnDrop::new(&partial);
    stats.resumed(from);
    copier.measure(&read_from, from, 0).map_err(failed)?;
    copier.report();
    let target: &dyn CopyTarget = &file;
    let mut checkpoints = Checkpoints::new(resume, stats);
    let copied = copier.copy_data(
        &read_from,
        target,
        from,
        Some(&mut checkpoints),
        &mut Unheld,
    );
    let digest = match copied {
        Ok(Some(digest)) => digest,
        Ok(None) => return Err(failed(CopyError::VerifyFailed)),
        Err(CopyError::Cancelled) => {
            // Kept for the next run when a checkpoint says how far it is.
            if from > 0 || stats.checkpoint() > 0 {
                guard.disarm();
            }
            return Err(DataPlaneError::Cancelled);
        }
        Err(e) => return Err(failed(e)),
    };
    drop(file);
    std::fs::rename(&partial, &path).map_err(io_err(to_medium, "rename"))?;
    guard.disarm();
    fsync_dir(&dir).map_err(io_err(to_medium, "fsync"))?;
    media.local.forget_lost_copy(to_medium, slice);
    Ok(digest)
}
