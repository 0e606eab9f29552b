//! Live copies: a slice moved or rebuilt to another medium while the
//! volume serves I/O (see the module docs of `volume`).

use super::device::SliceDevice;
use super::io::LocalVolumeIo;
use super::is_media_failure;
use super::layout::label;
use super::slice::{Live, Mirror, SliceIo, SliceState};
use super::snapshot_copy::SnapshotCopy;
use crate::digest::{is_zero, CHUNK};
use crate::extents::{punch_hole, BLOCK};
use crate::resume::Checkpoints;
use crate::throttle::Pacer;
use crate::{CopyOptions, DataPlaneError, COW_CHUNK};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// The partial file: new, or holding the bytes below `from`.
    pub(super) target: &'a Arc<File>,
    pub(super) to_medium: &'a str,
    /// Where the slice file's copy starts (a checkpoint, or 0).
    pub(super) from: u64,
    /// The source's snapshot bytes, as measured at the start.
    pub(super) held: u64,
}

/// How often a live copy measures again what is left of the slice file
/// (writes into holes ahead of the copy add to it).
pub(super) const REMEASURE: Duration = Duration::from_secs(1);

/// A live copy's progress: `done` of `total` bytes, `total` growing with
/// what writes during the move add (the catch-up).
pub(super) struct Tally {
    pub(super) done: u64,
    pub(super) total: u64,
}

impl Tally {
    pub(super) fn report(&self, progress: &mut dyn FnMut(u64, u64)) {
        progress(self.done, self.total.max(self.done));
    }
}

impl LocalVolumeIo {
    /// Fills the target from the source while I/O goes on: the slice file
    /// from `from` on (mirroring writes behind the copy cursor, verifying
    /// each chunk by reading it back, checkpointing now and then), durable;
    /// then the snapshot files, catching up on the copy-on-write saves made
    /// meanwhile. Returns the snapshot copy for the switch to finish.
    pub(super) fn fill(
        &self,
        ends: Fill<'_>,
        dir: &Path,
        stem: &str,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<SnapshotCopy, DataPlaneError> {
        let Fill {
            source,
            holder,
            source_file,
            source_medium,
            target,
            to_medium,
            from,
            held,
        } = ends;
        let io_err = |op: &'static str| move |e: io::Error| self.err(holder, to_medium, op, e);
        let stats = &options.stats;
        let mut len = source_file.size().map_err(io_err("stat"))?;
        // What is left of the slice file as far as known now.
        let mut data_left = source_file.data_bytes(from, len).map_err(io_err("seek"))?;
        let done = source_file.data_bytes(0, from).map_err(io_err("seek"))?;
        let mut tally = Tally {
            done,
            total: done + data_left + held,
        };
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
        tally.report(progress);

        let pacer = Pacer::new(options.rate_limit, &options.cancel);
        let cancelled = |_| DataPlaneError::Cancelled;
        let mut bufs = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
        let copy_chunk = |state: &mut SliceState,
                          start: u64,
                          n: usize,
                          clear: bool,
                          bufs: &mut (Vec<u8>, Vec<u8>)|
         -> Result<(), DataPlaneError> {
            if source.is_lost() {
                return Err(io_err("copy")(source_lost()));
            }
            let mirror = state
                .mirror
                .as_mut()
                .ok_or_else(|| io_err("copy")(io::Error::other("copy state lost")))?;
            let data = &mut bufs.0[..n];
            if let Err(e) = source
                .fault()
                .and_then(|()| source_file.read_at(data, start))
            {
                if is_media_failure(&e) {
                    self.lose(source, source_medium, &e);
                }
                return Err(self.err(source, source_medium, "read", e));
            }
            if clear {
                punch_hole(&mirror.file, start, n as u64).map_err(io_err("write"))?;
            }
            let mut at = 0usize;
            while at < n {
                let block = (BLOCK as usize).min(n - at);
                let piece = &data[at..at + block];
                if !is_zero(piece) {
                    mirror
                        .file
                        .write_all_at(piece, start + at as u64)
                        .map_err(io_err("write"))?;
                }
                at += block;
            }
            // Verify the chunk against the source bytes just read.
            let check = &mut bufs.1[..n];
            mirror
                .file
                .read_exact_at(check, start)
                .map_err(io_err("verify"))?;
            if check != &bufs.0[..n] {
                return Err(DataPlaneError::VerifyFailed {
                    slice: label(&holder.key),
                    from: source_medium.to_string(),
                    to: to_medium.to_string(),
                });
            }
            if mirror.failed.load(Ordering::Acquire) {
                return Err(io_err("write")(io::Error::other(
                    "a write to the target failed during the copy",
                )));
            }
            Ok(())
        };

        // A resumed copy: below its checkpoint the target has every write
        // made before the interruption, but not those made since the volume
        // was opened again and before the mirror above was in place. Read
        // after the mirror is in place: a write not marked yet is mirrored.
        if from > 0 {
            for chunk in self.written[holder.key.column as usize].below(from) {
                pacer.check().map_err(cancelled)?;
                let start = chunk * CHUNK as u64;
                let n = (CHUNK as u64).min(from - start) as usize;
                let mut state = holder.write_state().map_err(io_err("lock"))?;
                copy_chunk(&mut state, start, n, true, &mut bufs)?;
                drop(state);
                stats.add_copied(n as u64);
                stats.add_catch_up(n as u64);
                tally.done += n as u64;
                tally.total += n as u64;
                tally.report(progress);
                pacer.pace(stats.copied()).map_err(cancelled)?;
            }
        }

        let mut checkpoints = Checkpoints::new(&options.resume, stats);
        let mut measured = Instant::now();
        let mut cursor = from;
        loop {
            pacer.check().map_err(cancelled)?;
            // One chunk with the target's slice held exclusively: a write
            // to the source either lands before the chunk is read, or is
            // mirrored after the cursor has passed it (writes reach the
            // mirror after the source, and the mirror under this lock).
            let mut state = holder.write_state().map_err(io_err("lock"))?;
            len = source_file.size().map_err(io_err("stat"))?;
            let next = { source_file.next_data(cursor, len).map_err(io_err("seek"))? };
            let Some((start, end)) = next else {
                // Everything is copied: from now on every write is mirrored
                // (also past the end, should the slice grow meanwhile).
                if let Some(mirror) = state.mirror.as_mut() {
                    mirror.copied_upto = u64::MAX;
                }
                break;
            };
            let n = ((end - start).min(CHUNK as u64)) as usize;
            copy_chunk(&mut state, start, n, false, &mut bufs)?;
            cursor = start + n as u64;
            if let Some(mirror) = state.mirror.as_mut() {
                mirror.copied_upto = cursor;
            }
            drop(state);
            stats.add_copied(n as u64);
            tally.done += n as u64;
            data_left = data_left.saturating_sub(n as u64);
            if measured.elapsed() >= REMEASURE {
                // Writes into holes ahead of the copy add to what is left.
                let left = source_file
                    .data_bytes(cursor, len)
                    .map_err(io_err("seek"))?;
                if left > data_left {
                    stats.add_catch_up(left - data_left);
                }
                tally.total = (tally.total + left).saturating_sub(data_left);
                data_left = left;
                measured = Instant::now();
            }
            tally.report(progress);
            if checkpoints.due() {
                checkpoints.take(target, cursor).map_err(io_err("fsync"))?;
            }
            pacer.pace(stats.copied()).map_err(cancelled)?;
        }
        // Durable before anyone relies on it; most was written back already.
        target.sync_all().map_err(io_err("fsync"))?;
        // An interruption from now on need not copy the slice file again.
        checkpoints.take(target, len).map_err(io_err("fsync"))?;

        // The snapshot files: everything, then what was saved meanwhile,
        // until what is left for the pause is small.
        let mut snapshot_copy = {
            let state = source.read_state().map_err(io_err("lock"))?;
            SnapshotCopy::start(
                healthy_source(source, &state)
                    .map_err(io_err("copy"))?
                    .as_ref(),
                dir,
                stem,
            )
            .map_err(io_err("create"))?
        };
        for round in 1.. {
            let added = {
                let state = source.read_state().map_err(io_err("lock"))?;
                snapshot_copy
                    .fetch(
                        healthy_source(source, &state)
                            .map_err(io_err("copy"))?
                            .as_ref(),
                    )
                    .map_err(io_err("copy snapshots"))?
            };
            let added_bytes = added as u64 * COW_CHUNK;
            if round == 1 {
                // The snapshots as they are now replace the estimate.
                tally.total = tally.total.saturating_sub(held) + added_bytes;
            } else {
                // Saved by writes made during the move.
                tally.total += added_bytes;
                stats.add_catch_up(added_bytes);
            }
            loop {
                pacer.check().map_err(cancelled)?;
                let copied = {
                    let state = source.read_state().map_err(io_err("lock"))?;
                    snapshot_copy
                        .copy_pending(
                            healthy_source(source, &state)
                                .map_err(io_err("copy"))?
                                .as_ref(),
                            CATCH_UP_CHUNKS,
                        )
                        .map_err(io_err("copy snapshots"))?
                };
                if copied == 0 {
                    break;
                }
                stats.add_copied(copied);
                tally.done += copied;
                tally.report(progress);
                pacer.pace(stats.copied()).map_err(cancelled)?;
            }
            if added <= CATCH_UP_CHUNKS || round >= CATCH_UP_ROUNDS {
                break;
            }
        }
        Ok(snapshot_copy)
    }
}
