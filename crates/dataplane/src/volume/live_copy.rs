//! Live copies: a slice moved or rebuilt to another medium while the
//! volume serves I/O (see the module docs of `volume`).

use super::device::SliceDevice;
use super::io::LocalVolumeIo;
use super::is_media_failure;
use super::layout::label;
use super::slice::{Live, Mirror, MirrorTarget, SliceIo, SliceState};
use crate::copier::{
    ChunkHold, Copier, CopyChunk, CopyError, CopySource, CopyTarget, SnapshotCopy, SnapshotParts,
    Verify,
};
use crate::digest::CHUNK;
use crate::resume::Checkpoints;
use crate::{CopyOptions, DataPlaneError, COW_CHUNK};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Records appended to the newest snapshot's map during a live copy that
/// may be left for the switch (with I/O paused); more are caught up first.
pub(super) const CATCH_UP_CHUNKS: usize = 16;

/// Catch-up rounds before the switch (under steady writes the tail may never
/// shrink below [`CATCH_UP_CHUNKS`]; the pause then copies what is left).
pub(super) const CATCH_UP_ROUNDS: usize = 8;

/// The file and snapshots of the slice a copy reads from.
pub(super) fn healthy_source<'a>(source: &SliceIo, state: &'a SliceState) -> io::Result<&'a Live> {
    source.healthy(state).ok_or_else(source_lost)
}

pub(super) fn source_lost() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        "the copy being read from was lost during the copy",
    )
}

impl LocalVolumeIo {
    pub(super) fn slice(&self, copy: u32, column: u32) -> Result<&SliceIo, DataPlaneError> {
        self.slices
            .get(column as usize)
            .and_then(|c| c.get(copy as usize))
            .ok_or_else(|| DataPlaneError::Io {
                medium: String::new(),
                slice: format!("{}/c{copy}-k{column}", self.volume_id),
                op: "move",
                source: io::Error::new(io::ErrorKind::NotFound, "no such slice"),
            })
    }

    /// The medium `slice` is on now (a copy to `to_medium` names that
    /// target in its error).
    pub(super) fn medium_of(
        &self,
        slice: &SliceIo,
        to_medium: &str,
    ) -> Result<String, DataPlaneError> {
        Ok(slice
            .read_state()
            .map_err(|e| self.err(slice, to_medium, "lock", e))?
            .medium
            .clone())
    }

    pub(super) fn err(
        &self,
        slice: &SliceIo,
        medium: &str,
        op: &'static str,
        e: io::Error,
    ) -> DataPlaneError {
        DataPlaneError::Io {
            medium: medium.to_string(),
            slice: label(&slice.key),
            op,
            source: e,
        }
    }
}

/// The two ends of a live copy (see [`LocalVolumeIo::fill`]).
pub(super) struct Fill<'a> {
    pub(super) source: &'a SliceIo,
    pub(super) holder: &'a SliceIo,
    pub(super) source_file: &'a dyn SliceDevice,
    pub(super) source_medium: &'a str,
    /// The partial file (new, or holding the bytes below `from`), or the
    /// slice on a storage node (new).
    pub(super) target: &'a MirrorTarget,
    pub(super) to_medium: &'a str,
    /// Where the slice file's copy starts (a checkpoint, or 0).
    pub(super) from: u64,
    /// The source's snapshot bytes, as measured at the start.
    pub(super) held: u64,
    /// The target holds an older version of the slice: compared chunk by
    /// chunk, only what differs rewritten (a resync in place).
    pub(super) compare: bool,
}

/// The source of a live copy as the copier reads it: the slice's device,
/// failing like a broken disk when a test asks for it.
struct LiveSource<'a> {
    slice: &'a SliceIo,
    device: &'a dyn SliceDevice,
}

impl CopySource for LiveSource<'_> {
    fn size(&self) -> io::Result<u64> {
        CopySource::size(self.device)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.slice.fault()?;
        CopySource::read_at(self.device, buf, offset)
    }

    fn next_data(&self, from: u64, len: u64) -> io::Result<Option<(u64, u64)>> {
        CopySource::next_data(self.device, from, len)
    }

    fn data_bytes(&self, from: u64, len: u64) -> io::Result<u64> {
        CopySource::data_bytes(self.device, from, len)
    }
}

/// Runs `copy` (of a chunk from `source` to `holder`'s target) with
/// `holder`'s slice held exclusively: a write to the source either lands
/// before the chunk is read, or is mirrored after the cursor has passed it
/// (writes reach the mirror after the source, and the mirror under this
/// lock). Then moves the mirror's cursor to `cursor(result)`, if any.
fn with_mirror<T>(
    source: &SliceIo,
    holder: &SliceIo,
    copy: impl FnOnce() -> Result<T, CopyError>,
    cursor: impl FnOnce(&T) -> Option<u64>,
) -> Result<T, CopyError> {
    let mut state = holder.write_state().map_err(CopyError::target("lock"))?;
    if source.is_lost() {
        return Err(CopyError::Target("copy", source_lost()));
    }
    let Some(mirror) = state.mirror.as_mut() else {
        return Err(CopyError::Target(
            "copy",
            io::Error::other("copy state lost"),
        ));
    };
    let copied = copy()?;
    if let Some(upto) = cursor(&copied) {
        mirror.copied_upto = upto;
    }
    if mirror.failed.load(Ordering::Acquire) {
        return Err(CopyError::Target(
            "write",
            io::Error::other("a write to the target failed during the copy"),
        ));
    }
    Ok(copied)
}

/// The mirror's cursor, moved past each chunk the copier copies (see
/// [`with_mirror`]); once everything is copied every write is mirrored
/// (also past the end, should the slice grow meanwhile).
struct MirrorCursor<'a> {
    source: &'a SliceIo,
    holder: &'a SliceIo,
}

impl ChunkHold for MirrorCursor<'_> {
    fn around(&mut self, copy_chunk: &mut CopyChunk<'_>) -> Result<Option<(u64, u64)>, CopyError> {
        with_mirror(self.source, self.holder, copy_chunk, |copied| {
            Some(copied.map_or(u64::MAX, |(_, end)| end))
        })
    }
}

impl LocalVolumeIo {
    /// Fills the target from the source while I/O goes on: the slice file
    /// from `from` on (mirroring writes behind the copy cursor, verifying
    /// each chunk by reading it back, checkpointing now and then), durable;
    /// then the snapshot files (into `snapshots_to`, when given: none when
    /// the slice has no snapshots on a storage node's target), catching up
    /// on the copy-on-write saves made meanwhile.
    /// Returns the snapshot copy for the switch to finish.
    pub(super) fn fill(
        &self,
        ends: Fill<'_>,
        snapshots_to: Option<Box<dyn SnapshotParts>>,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Option<SnapshotCopy>, DataPlaneError> {
        let Fill {
            source,
            holder,
            source_file,
            source_medium,
            target,
            to_medium,
            from,
            held,
            compare,
        } = ends;
        let io_err = |op: &'static str| move |e: io::Error| self.err(holder, to_medium, op, e);
        let snapshot_err = |op: &'static str| move |e: CopyError| io_err(op)(e.into_io());
        let failed = |e: CopyError| match e {
            CopyError::Source(op, e) => {
                // The copy read from failed: as a read would.
                if is_media_failure(&e) {
                    self.lose(source, source_medium, &e);
                }
                self.err(source, source_medium, op, e)
            }
            CopyError::Target(op, e) => self.err(holder, to_medium, op, e),
            CopyError::Cancelled => DataPlaneError::Cancelled,
            CopyError::VerifyFailed => DataPlaneError::VerifyFailed {
                slice: label(&holder.key),
                from: source_medium.to_string(),
                to: to_medium.to_string(),
            },
        };
        let read_from = LiveSource {
            slice: source,
            device: source_file,
        };
        let target_file: &dyn CopyTarget = target.as_ref();
        let mut copier = Copier::new(options, Verify::ReadBack, progress);
        if compare {
            copier.compare_target();
        }
        // The source's snapshot bytes are the estimate of theirs.
        copier.measure(&read_from, from, held).map_err(failed)?;
        {
            let mut state = holder.write_state().map_err(io_err("lock"))?;
            state.mirror = Some(Mirror {
                file: Arc::clone(target),
                medium: to_medium.to_string(),
                copied_upto: from,
                failed: AtomicBool::new(false),
                dirty: AtomicBool::new(false),
            });
        }
        copier.report();

        // A resumed copy: below its checkpoint the target has every write
        // made before the interruption, but not those made since the volume
        // was opened again and before the mirror above was in place. Read
        // after the mirror is in place: a write not marked yet is mirrored.
        if from > 0 {
            for chunk in self.written[holder.key.column as usize].below(from) {
                copier.check().map_err(failed)?;
                let start = chunk * CHUNK as u64;
                let n = (CHUNK as u64).min(from - start) as usize;
                with_mirror(
                    source,
                    holder,
                    || copier.copy_chunk(&read_from, target_file, start, n, true, None),
                    |_| None,
                )
                .map_err(failed)?;
                copier.stats().add_catch_up(n as u64);
                copier.tally.total += n as u64;
                copier.copied(n as u64).map_err(failed)?;
            }
        }

        let mut checkpoints = Checkpoints::new(&options.resume, &options.stats);
        let mut cursor = MirrorCursor { source, holder };
        copier
            .copy_data(
                &read_from,
                target_file,
                from,
                Some(&mut checkpoints),
                &mut cursor,
            )
            .map_err(failed)?;

        // The snapshot files: everything, then what was saved meanwhile,
        // until what is left for the pause is small.
        let Some(parts) = snapshots_to else {
            return Ok(None);
        };
        let mut snapshot_copy = {
            let state = source.read_state().map_err(io_err("lock"))?;
            SnapshotCopy::start(
                healthy_source(source, &state)
                    .map_err(io_err("copy"))?
                    .as_ref(),
                parts,
            )
            .map_err(snapshot_err("create"))?
        };
        for round in 1.. {
            let added = {
                let state = source.read_state().map_err(io_err("lock"))?;
                snapshot_copy
                    .fetch_maps(
                        healthy_source(source, &state)
                            .map_err(io_err("copy"))?
                            .as_ref(),
                    )
                    .map_err(snapshot_err("copy snapshots"))?
            };
            let added_bytes = added as u64 * COW_CHUNK;
            if round == 1 {
                // The snapshots as they are now replace the estimate.
                copier.tally.total = copier.tally.total.saturating_sub(held) + added_bytes;
            } else {
                // Saved by writes made during the move.
                copier.tally.total += added_bytes;
                copier.stats().add_catch_up(added_bytes);
            }
            loop {
                copier.check().map_err(failed)?;
                let copied = {
                    let state = source.read_state().map_err(io_err("lock"))?;
                    snapshot_copy
                        .copy_chunks(
                            healthy_source(source, &state)
                                .map_err(io_err("copy"))?
                                .as_ref(),
                            CATCH_UP_CHUNKS,
                        )
                        .map_err(snapshot_err("copy snapshots"))?
                };
                if copied == 0 {
                    break;
                }
                copier.copied(copied).map_err(failed)?;
            }
            if added <= CATCH_UP_CHUNKS || round >= CATCH_UP_ROUNDS {
                break;
            }
        }
        Ok(Some(snapshot_copy))
    }
}
