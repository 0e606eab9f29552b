//! Live copies: a slice moved or rebuilt to another medium while the
//! volume serves I/O (see the module docs of `volume`).

use super::device::{LocalSlice, SliceDevice};
use super::io::LocalVolumeIo;
use super::is_media_failure;
use super::layout::label;
use super::slice::{Live, Mirror, SliceIo, SliceState};
use super::snapshot_copy::{create_partial, SnapshotCopy};
use crate::digest::{is_zero, CHUNK};
use crate::extents::{punch_hole, BLOCK};
use crate::fsutil::{create_dir_durable, fsync_dir, partial_path, RemoveOnDrop};
use crate::resume::{reopen_partial, Checkpoints};
use crate::snapshot::remove_snapshot_files;
use crate::throttle::Pacer;
use crate::{CopyOptions, DataPlaneError, SliceSnapshots, COW_CHUNK};
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

/// A slice claimed by a live copy (as its source or its target) until dropped.
pub(super) struct Busy<'a>(&'a SliceIo);

impl<'a> Busy<'a> {
    pub(super) fn claim(slice: &'a SliceIo) -> io::Result<Busy<'a>> {
        if slice.copying.swap(true, Ordering::AcqRel) {
            return Err(io::Error::new(
                io::ErrorKind::ResourceBusy,
                format!("slice {} is already being copied", label(&slice.key)),
            ));
        }
        Ok(Busy(slice))
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.copying.store(false, Ordering::Release);
    }
}

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

    /// Fills a new file for `holder` on `to_medium` from `source` (the same
    /// slice for a move, a healthy copy of its column for a rebuild) while
    /// I/O goes on, then switches `holder` to it (see `fill_and_switch`).
    /// Whatever happens, writes stop going to the target afterwards.
    pub(super) fn copy_to(
        &self,
        source: &SliceIo,
        holder: &SliceIo,
        to_medium: &str,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
        commit: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), DataPlaneError> {
        let _copying = self.copies.read().map_err(|_| {
            self.err(
                holder,
                to_medium,
                "lock",
                io::Error::other("copy lock poisoned"),
            )
        })?;
        // One copy at a time reads or fills a slice: a rebuild reading a
        // slice that a move switches away would miss the writes after it.
        let _source = Busy::claim(source).map_err(|e| self.err(holder, to_medium, "copy", e))?;
        let _holder = if std::ptr::eq(source, holder) {
            None
        } else {
            Some(Busy::claim(holder).map_err(|e| self.err(holder, to_medium, "copy", e))?)
        };
        let target_path = self.media.slice_path(to_medium, &holder.key)?;
        let dir = target_path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        create_dir_durable(&dir).map_err(|e| self.err(holder, to_medium, "mkdir", e))?;
        // Snapshot files of an earlier, interrupted copy must not mix with
        // this one's.
        remove_snapshot_files(&target_path, false)
            .map_err(|e| self.err(holder, to_medium, "delete", e))?;
        let result = self.fill_and_switch(
            source,
            holder,
            &target_path,
            &dir,
            to_medium,
            options,
            progress,
            commit,
        );
        // Snapshot files came to the target (or went again on failure).
        self.media.snapshot_files_changed(to_medium);
        if let Ok(mut state) = holder.state.write() {
            state.mirror = None;
        }
        result
    }

    /// Copies the source's data (mirroring writes behind the copy cursor),
    /// verifying each chunk by reading it back, then its snapshot files,
    /// catching up on the copy-on-write saves made meanwhile; makes it all
    /// durable; then — with the slice's I/O paused — copies the last saves,
    /// renames the files into place (the slice file last), calls `commit`
    /// and switches `holder`'s I/O to the target.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn fill_and_switch(
        &self,
        source: &SliceIo,
        holder: &SliceIo,
        target_path: &Path,
        dir: &Path,
        to_medium: &str,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
        commit: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), DataPlaneError> {
        let io_err = |op: &'static str| move |e: io::Error| self.err(holder, to_medium, op, e);
        let same = std::ptr::eq(source, holder);
        let stem = target_path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".slice"))
            .unwrap_or_default()
            .to_string();
        let partial = partial_path(target_path);
        let (source_file, source_medium, held) = {
            let state = source.read_state().map_err(io_err("lock"))?;
            let live = source
                .healthy(&state)
                .ok_or_else(|| io_err("copy")(source_lost()))?;
            let held: u64 = live
                .snapshots()
                .map_err(io_err("list snapshots"))?
                .iter()
                .map(|s| s.used_bytes)
                .sum();
            (Arc::clone(live), state.medium.clone(), held)
        };
        // The slice file resumes from its checkpoint when its partial file
        // is still there; the snapshot files are copied whole every time.
        let len = source_file.size().map_err(io_err("stat"))?;
        let resume = &options.resume;
        let (target, from) = match reopen_partial(&partial, len, resume.from) {
            Some(file) => (file, resume.from),
            None => {
                resume.restart().map_err(io_err("checkpoint"))?;
                let file = create_partial(&partial).map_err(io_err("create"))?;
                file.set_len(len).map_err(io_err("create"))?;
                (file, 0)
            }
        };
        let target = Arc::new(target);
        let mut guard = RemoveOnDrop::new(&partial);
        options.stats.resumed(from);
        let filled = self.fill(
            Fill {
                source,
                holder,
                source_file: source_file.as_ref(),
                source_medium: &source_medium,
                target: &target,
                to_medium,
                from,
                held,
            },
            dir,
            &stem,
            options,
            progress,
        );
        let mut snapshot_copy = match filled {
            Err(DataPlaneError::Cancelled) => {
                // Kept for the next run when a checkpoint says how far it is.
                if from > 0 || options.stats.checkpoint() > 0 {
                    guard.disarm();
                }
                return Err(DataPlaneError::Cancelled);
            }
            r => r?,
        };

        // The switch, with the volume's writes paused at the barrier: every
        // write is wholly before it (in the source and, past the cursor,
        // mirrored) or wholly after (on the new slice), and no copy-on-write
        // save runs now. Reads go on.
        let _paused = self.pause().map_err(io_err("lock"))?;
        let mut state = holder.write_state().map_err(io_err("lock"))?;
        let source_state = if same {
            None
        } else {
            Some(source.read_state().map_err(io_err("lock"))?)
        };
        let len = {
            let src_state: &SliceState = source_state.as_deref().unwrap_or(&state);
            let live = healthy_source(source, src_state).map_err(io_err("copy"))?;
            snapshot_copy
                .fetch(live.as_ref())
                .map_err(io_err("copy snapshots"))?;
            snapshot_copy
                .copy_pending(live.as_ref(), usize::MAX)
                .map_err(io_err("copy snapshots"))?;
            live.size().map_err(io_err("stat"))?
        };
        if state
            .mirror
            .as_ref()
            .is_none_or(|m| m.failed.load(Ordering::Acquire))
        {
            return Err(io_err("write")(io::Error::other(
                "a write to the target failed during the copy",
            )));
        }
        target.set_len(len).map_err(io_err("truncate"))?;
        target.sync_all().map_err(io_err("fsync"))?;
        let mut placed = snapshot_copy
            .finish(dir)
            .map_err(io_err("place snapshots"))?;
        std::fs::rename(&partial, target_path).map_err(io_err("rename"))?;
        guard.disarm();
        placed.push(RemoveOnDrop::new(target_path));
        fsync_dir(dir).map_err(io_err("fsync"))?;
        // The copied snapshot files now count on the target medium.
        self.media.snapshot_files_changed(to_medium);
        let snapshots =
            SliceSnapshots::open_accounted(target_path, self.media.space_account(to_medium)?)
                .map_err(io_err("open snapshots"))?;
        if let Err(message) = commit() {
            // The placement did not change: the source stays authoritative
            // and the placed files go (`placed` drops).
            drop(snapshots);
            return Err(self.err(holder, to_medium, "commit", io::Error::other(message)));
        }
        for p in &mut placed {
            p.disarm();
        }
        drop(source_state);
        state.live = Some(Arc::new(LocalSlice::new(
            target,
            snapshots,
            target_path.to_path_buf(),
        )));
        state.medium = to_medium.to_string();
        state.mirror = None;
        holder.dirty.store(false, Ordering::Release);
        holder.lost.store(false, Ordering::Release);
        Ok(())
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
