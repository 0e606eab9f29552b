//! A live move or rebuild in phases (see [`SliceMove`]): begin claims the
//! slices and finds where the copy starts, fill copies while I/O goes on
//! (`LocalVolumeIo::fill`), switch places the files and serves I/O from
//! them, finish lets the old place go, abort goes back to it.

use super::device::{LocalSlice, SliceDevice};
use super::io::LocalVolumeIo;
use super::live_copy::{healthy_source, source_lost, Fill};
use super::media::NodeTarget;
use super::slice::{MirrorTarget, Placed, Retiring, SliceIo, SliceState};
use super::{SliceCopyKind, SliceMove};
use crate::copier::{create_partial, PartFiles, SnapshotCopy, SnapshotParts};
use crate::fsutil::{
    create_dir_durable, fsync_dir, partial_path, remove_if_exists, slice_stem, RemoveOnDrop,
};
use crate::resume::reopen_partial;
use crate::snapshot::remove_snapshot_files;
use crate::{CopyOptions, DataPlaneError, SliceSnapshots};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Begun,
    Filled,
    Switched,
    /// A fill or switch failed: only abort (or drop) is left.
    Failed,
    Ended,
}

/// The target of a copy that is not in place.
struct Target {
    place: Place,
    /// Where the slice's copy starts: a checkpoint, or 0.
    from: u64,
    /// The target holds an older version of the slice (a lost copy
    /// resynced on its own medium): the fill compares chunk by chunk and
    /// rewrites only what differs (see `Copier::compare_target`).
    compare: bool,
}

/// Where the target is.
enum Place {
    Local(LocalPlace),
    Node(NodePlace),
}

/// A target on a storage node's medium: the slice under its final name
/// (the node has no partial names). On another medium than the slice's it
/// is in no placement until the switch is committed: undone, it is removed
/// (one the removal misses is an orphan the service's reconciler removes
/// once no job works on the volume), unless an interrupted copy keeps it
/// to resume from its checkpoint.
struct NodePlace {
    /// Opened by begin (a stale copy, or a resumed copy's slice), else
    /// created by fill.
    slice: Option<Arc<dyn NodeTarget>>,
    /// The lost copy's own slice, resynced in place: the placement names
    /// it, so undoing the copy never removes it (it stays lost).
    own: bool,
    /// An interrupted copy with a checkpoint: kept for the resume.
    keep: bool,
    /// The slice has snapshots: their files are copied to the node too.
    snapshots: bool,
    /// Their copy, from the fill to the switch.
    snapshot_copy: Option<SnapshotCopy>,
}

/// A target on a medium of this host: a partial file renamed into place
/// at the switch, with the snapshot files.
struct LocalPlace {
    path: PathBuf,
    dir: PathBuf,
    partial: PathBuf,
    stem: String,
    /// The partial file: reopened by begin at `from`, else created by fill.
    file: Option<Arc<File>>,
    /// Removes the partial file unless a resume may use it.
    partial_guard: Option<RemoveOnDrop>,
    snapshot_copy: Option<SnapshotCopy>,
}

impl Drop for Target {
    /// A node's slice that never served I/O goes, unless it is the lost
    /// copy's own or kept for a resume (a partial file goes by its guard).
    fn drop(&mut self) {
        if let Place::Node(NodePlace {
            slice: Some(node),
            own: false,
            keep: false,
            ..
        }) = &self.place
        {
            if let Err(e) = node.remove() {
                tracing::warn!(error = %e,
                    "the unfinished copy on a storage node could not be removed; \
                     the orphan reconciler will remove it");
            }
        }
    }
}

/// [`SliceMove`] of a [`LocalVolumeIo`].
struct LocalSliceMove {
    io: Arc<LocalVolumeIo>,
    kind: SliceCopyKind,
    copy: u32,
    column: u32,
    /// The copy read from: the slice itself for a move.
    source_copy: u32,
    to_medium: String,
    stage: Stage,
    /// `None`: in place.
    target: Option<Target>,
    resume_from: u64,
    /// The slices are claimed (released on drop).
    claimed: bool,
}

impl LocalVolumeIo {
    /// [`VolumeIo::begin_slice_copy`](super::VolumeIo::begin_slice_copy)
    /// of slice `(copy, column)`.
    pub(super) fn begin_copy(
        self: Arc<Self>,
        kind: SliceCopyKind,
        slice: (u32, u32),
        to_medium: &str,
        resume_from: u64,
    ) -> Result<Box<dyn SliceMove>, DataPlaneError> {
        let moving = LocalSliceMove::begin(self, kind, slice, to_medium, resume_from)?;
        Ok(Box::new(moving))
    }
}

impl LocalSliceMove {
    fn begin(
        io: Arc<LocalVolumeIo>,
        kind: SliceCopyKind,
        (copy, column): (u32, u32),
        to_medium: &str,
        resume_from: u64,
    ) -> Result<LocalSliceMove, DataPlaneError> {
        let holder = io.slice(copy, column)?;
        let medium = io.medium_of(holder, to_medium)?;
        let mut this = LocalSliceMove {
            io: Arc::clone(&io),
            kind,
            copy,
            column,
            source_copy: copy,
            to_medium: to_medium.to_string(),
            stage: Stage::Begun,
            target: None,
            resume_from,
            claimed: false,
        };
        let in_place = match kind {
            SliceCopyKind::Move => medium == to_medium,
            // A rebuild switched here before in this opening: only the
            // commit (or finish) was missing. A usable slice on the target
            // medium without that is a stale copy opened since (the store
            // says it is lost): resynced, never trusted as it is.
            SliceCopyKind::Rebuild => {
                holder.usable() && medium == to_medium && holder.rebuilt.load(Ordering::Acquire)
            }
        };
        // A lost copy rebuilt on the medium it was lost on: its slice there
        // is the target, compared rather than copied again.
        let own = kind == SliceCopyKind::Rebuild && medium == to_medium;
        if in_place {
            return Ok(this);
        }
        let err = |op, e| io.err(holder, to_medium, op, e);
        if holder
            .read_state()
            .map_err(|e| err("lock", e))?
            .retiring
            .is_some()
        {
            return Err(err(
                "copy",
                io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    "a switched move of the slice is not finished",
                ),
            ));
        }
        let source = match kind {
            SliceCopyKind::Move if !holder.usable() => {
                // Said of the medium the lost copy is on, not the target.
                return Err(io.err(
                    holder,
                    &medium,
                    "move",
                    io::Error::new(
                        io::ErrorKind::NotFound,
                        "the slice is lost; rebuild it instead of moving it",
                    ),
                ));
            }
            SliceCopyKind::Move => holder,
            SliceCopyKind::Rebuild => {
                let source = io.slices[column as usize]
                    .iter()
                    .find(|s| s.key.copy != copy && s.usable())
                    .ok_or_else(|| {
                        err(
                            "rebuild",
                            io::Error::new(
                                io::ErrorKind::NotFound,
                                format!(
                                    "no healthy copy of column {column} of volume {} to rebuild from",
                                    io.volume_id
                                ),
                            ),
                        )
                    })?;
                // The caller says the slice is lost: I/O stops using it now.
                holder.lost.store(true, Ordering::Release);
                source
            }
        };
        this.source_copy = source.key.copy;
        {
            // Waits for a snapshot operation in progress; refuses new ones
            // until this move ends.
            let _copies = io
                .copies
                .read()
                .map_err(|_| err("lock", io::Error::other("copy lock poisoned")))?;
            source.claim().map_err(|e| err("copy", e))?;
            if !std::ptr::eq(source, holder) {
                if let Err(e) = holder.claim() {
                    source.release();
                    return Err(err("copy", e));
                }
            }
            io.active_copies.fetch_add(1, Ordering::AcqRel);
            this.claimed = true;
        }
        let (len, has_snapshots) = {
            let state = source.read_state().map_err(|e| err("lock", e))?;
            let live = healthy_source(source, &state).map_err(|e| err("copy", e))?;
            (
                live.size().map_err(|e| err("stat", e))?,
                !live
                    .snapshot_ids()
                    .map_err(|e| err("list snapshots", e))?
                    .is_empty(),
            )
        };
        if io.media.is_node_medium(to_medium) {
            let found = node_target(&io, holder, to_medium, len, own, resume_from)?;
            this.target = Some(Target {
                place: Place::Node(NodePlace {
                    slice: found.slice,
                    own,
                    keep: false,
                    snapshots: has_snapshots,
                    snapshot_copy: None,
                }),
                from: found.from,
                compare: found.compare,
            });
            return Ok(this);
        }
        let path = io.media.slice_path(to_medium, &holder.key)?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        create_dir_durable(&dir).map_err(|e| err("mkdir", e))?;
        // Snapshot files of an earlier, interrupted copy must not mix with
        // this one's.
        remove_snapshot_files(&path, false).map_err(|e| err("delete", e))?;
        // The slice file resumes from its checkpoint when its partial file
        // is still there; else the caller forgets the checkpoint before the
        // fill creates the file again.
        let partial = partial_path(&path);
        let mut reopened = reopen_partial(&partial, len, resume_from).map(Arc::new);
        let from = if reopened.is_some() { resume_from } else { 0 };
        let mut compare = false;
        if own && reopened.is_none() {
            // The stale file becomes the partial one, compared chunk by
            // chunk; renamed back into place at the switch.
            if let Some(file) =
                stale_as_partial(&path, &partial, len).map_err(|e| err("open", e))?
            {
                reopened = Some(Arc::new(file));
                compare = true;
            }
        }
        let stem = slice_stem(&path).unwrap_or_default().to_string();
        this.target = Some(Target {
            place: Place::Local(LocalPlace {
                path,
                dir,
                partial,
                stem,
                file: reopened,
                partial_guard: None,
                snapshot_copy: None,
            }),
            from,
            compare,
        });
        Ok(this)
    }

    fn holder(&self) -> Result<&SliceIo, DataPlaneError> {
        self.io.slice(self.copy, self.column)
    }

    fn err(&self, op: &'static str, e: io::Error) -> DataPlaneError {
        match self.holder() {
            Ok(holder) => self.io.err(holder, &self.to_medium, op, e),
            Err(other) => other,
        }
    }

    /// A phase's outcome: the move goes on to `next`, or fails after
    /// `undo`.
    fn after(
        &mut self,
        outcome: Result<(), DataPlaneError>,
        next: Stage,
        undo: fn(&mut LocalSliceMove),
    ) -> Result<(), DataPlaneError> {
        if outcome.is_ok() {
            self.stage = next;
        } else {
            self.stage = Stage::Failed;
            undo(self);
        }
        outcome
    }

    fn out_of_order(&self, phase: &str) -> DataPlaneError {
        self.err(
            "copy",
            io::Error::other(format!("{phase} called in stage {:?}", self.stage)),
        )
    }

    /// Writes stop going to the target (they are not part of a placement).
    fn stop_mirroring(&self) {
        if let Ok(holder) = self.holder() {
            if let Ok(mut state) = holder.state.write() {
                state.mirror = None;
            }
        }
    }

    /// Undoes everything before the switch: the mirror goes, and the
    /// target's files (the partial file too, unless a resume may use it).
    fn drop_target(&mut self) {
        // Without claims, the mirror (if any) is another copy's.
        if !self.claimed {
            return;
        }
        self.stop_mirroring();
        if self.target.take().is_some() {
            // The snapshot files' partial copies went with it.
            self.io.media.snapshot_files_changed(&self.to_medium);
        }
    }

    fn run_fill(
        &mut self,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(), DataPlaneError> {
        let io = Arc::clone(&self.io);
        let ends = Ends::of(
            &io,
            (self.copy, self.source_copy, self.column),
            &self.to_medium,
        )?;
        let (holder, source, to_medium) = (ends.holder, ends.source, ends.to_medium);
        let io_err = |op: &'static str| ends.err(op);
        let Some(target) = self.target.as_mut() else {
            return Ok(());
        };
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
        let (from, compare) = (target.from, target.compare);
        let fill = |file: &MirrorTarget, snapshots_to: Option<Box<dyn SnapshotParts>>, progress| {
            options.stats.resumed(from);
            io.fill(
                Fill {
                    source,
                    holder,
                    source_file: source_file.as_ref(),
                    source_medium: &source_medium,
                    target: file,
                    to_medium,
                    from,
                    held,
                    compare,
                },
                snapshots_to,
                options,
                progress,
            )
        };
        let local = match &mut target.place {
            Place::Local(local) => local,
            Place::Node(node) => {
                let slice = match &node.slice {
                    Some(opened) => Arc::clone(opened),
                    None => {
                        let len = source_file.size().map_err(io_err("stat"))?;
                        let created =
                            io.media
                                .create_node_target(to_medium, &holder.key, len, &io.front)?;
                        // Kept from now on: dropping the target removes it.
                        node.slice = Some(Arc::clone(&created));
                        created
                    }
                };
                let parts = node.snapshots.then(|| slice.snapshot_parts());
                let file: MirrorTarget = slice;
                let filled = fill(&file, parts, progress);
                if matches!(filled, Err(DataPlaneError::Cancelled))
                    && (from > 0 || options.stats.checkpoint() > 0)
                {
                    // Kept for the next run, as a partial file is.
                    node.keep = true;
                }
                node.snapshot_copy = filled?;
                return Ok(());
            }
        };
        let file = match local.file.take() {
            Some(file) => file,
            None => {
                // Starting again: the caller forgot its checkpoint.
                let len = source_file.size().map_err(io_err("stat"))?;
                let file = create_partial(&local.partial).map_err(io_err("create"))?;
                file.set_len(len).map_err(io_err("create"))?;
                target.from = 0;
                Arc::new(file)
            }
        };
        let mut guard = RemoveOnDrop::new(&local.partial);
        let mirror: MirrorTarget = Arc::clone(&file) as MirrorTarget;
        let parts = Box::new(PartFiles::new(&local.dir, &local.stem));
        let filled = fill(&mirror, Some(parts), progress);
        match filled {
            Ok(snapshot_copy) => {
                local.file = Some(file);
                local.snapshot_copy = snapshot_copy;
                local.partial_guard = Some(guard);
                Ok(())
            }
            Err(DataPlaneError::Cancelled) => {
                // Kept for the next run when a checkpoint says how far it is.
                if from > 0 || options.stats.checkpoint() > 0 {
                    guard.disarm();
                }
                Err(DataPlaneError::Cancelled)
            }
            Err(e) => Err(e),
        }
    }

    /// The switch, with the volume's writes paused at the barrier: every
    /// write is wholly before it (in the source and, past the cursor,
    /// mirrored) or wholly after (on the new slice, and on a move's old
    /// place), and no copy-on-write save runs now. Reads go on.
    fn run_switch(&mut self) -> Result<(), DataPlaneError> {
        let io = Arc::clone(&self.io);
        let ends = Ends::of(
            &io,
            (self.copy, self.source_copy, self.column),
            &self.to_medium,
        )?;
        let (holder, source, to_medium) = (ends.holder, ends.source, ends.to_medium);
        let same = std::ptr::eq(source, holder);
        let io_err = |op: &'static str| ends.err(op);
        let Some(target) = self.target.as_mut() else {
            return Ok(());
        };
        let not_filled = || io_err("copy")(io::Error::other("the target is not filled"));
        let _paused = io.pause().map_err(io_err("lock"))?;
        let mut state = holder.write_state().map_err(io_err("lock"))?;
        let source_state = if same {
            None
        } else {
            Some(source.read_state().map_err(io_err("lock"))?)
        };
        let len = {
            let src_state: &SliceState = source_state.as_deref().unwrap_or(&state);
            let live = healthy_source(source, src_state).map_err(io_err("copy"))?;
            let snapshot_copy = match &mut target.place {
                Place::Local(local) => Some(local.snapshot_copy.as_mut().ok_or_else(not_filled)?),
                Place::Node(node) if node.snapshots => {
                    Some(node.snapshot_copy.as_mut().ok_or_else(not_filled)?)
                }
                Place::Node(_) => None,
            };
            if let Some(snapshot_copy) = snapshot_copy {
                snapshot_copy
                    .fetch(live.as_ref())
                    .map_err(io_err("copy snapshots"))?;
                snapshot_copy
                    .copy_pending(live.as_ref(), usize::MAX)
                    .map_err(io_err("copy snapshots"))?;
            }
            live.size().map_err(io_err("stat"))?
        };
        drop(source_state);
        if state
            .mirror
            .as_ref()
            .is_none_or(|m| m.failed.load(Ordering::Acquire))
        {
            return Err(io_err("write")(io::Error::other(
                "a write to the target failed during the copy",
            )));
        }
        let (new_live, placed) = match &mut target.place {
            Place::Local(local) => {
                let (Some(file), Some(snapshot_copy)) =
                    (local.file.clone(), local.snapshot_copy.take())
                else {
                    return Err(not_filled());
                };
                file.set_len(len).map_err(io_err("truncate"))?;
                file.sync_all().map_err(io_err("fsync"))?;
                let mut placed = snapshot_copy.finish().map_err(io_err("place snapshots"))?;
                std::fs::rename(&local.partial, &local.path).map_err(io_err("rename"))?;
                if let Some(guard) = local.partial_guard.as_mut() {
                    guard.disarm();
                }
                placed.push(RemoveOnDrop::new(&local.path));
                fsync_dir(&local.dir).map_err(io_err("fsync"))?;
                // The copied snapshot files now count on the target medium.
                io.media.snapshot_files_changed(to_medium);
                let snapshots =
                    SliceSnapshots::open_accounted(&local.path, io.media.space_account(to_medium)?)
                        .map_err(io_err("open snapshots"))?;
                let placed = placed
                    .iter_mut()
                    .map(|p| {
                        p.disarm();
                        p.path().to_path_buf()
                    })
                    .collect();
                let live: Arc<dyn SliceDevice> =
                    Arc::new(LocalSlice::new(file, snapshots, local.path.clone()));
                (live, Placed::Files(placed))
            }
            Place::Node(NodePlace {
                slice: slot,
                snapshot_copy,
                ..
            }) => {
                let node = slot.clone().ok_or_else(not_filled)?;
                // The volume may have grown during the copy.
                node.grow(len).map_err(io_err("grow"))?;
                node.sync_all().map_err(io_err("sync"))?;
                if let Some(snapshots) = snapshot_copy.take() {
                    // Put in place before the slice is opened with them.
                    snapshots.finish().map_err(io_err("place snapshots"))?;
                }
                let live = io
                    .media
                    .open_slice(to_medium, &holder.key, &io.front)
                    .ok_or_else(|| {
                        io_err("open")(io::Error::other(
                            "the copied slice cannot be opened on its storage node",
                        ))
                    })?;
                // Serving I/O from now on: kept when the target goes.
                *slot = None;
                (live, Placed::Node(node))
            }
        };
        let old_medium = std::mem::replace(&mut state.medium, to_medium.to_string());
        let old_live = state.live.replace(new_live);
        state.retiring = Some(Retiring {
            medium: old_medium,
            live: old_live,
            mirrored: self.kind == SliceCopyKind::Move,
            // Its writes since the last flush may not be durable yet.
            dirty: AtomicBool::new(true),
            placed,
        });
        io.active_copies.fetch_add(1, Ordering::AcqRel);
        state.mirror = None;
        holder.dirty.store(false, Ordering::Release);
        holder.lost.store(false, Ordering::Release);
        holder
            .rebuilt
            .store(self.kind == SliceCopyKind::Rebuild, Ordering::Release);
        Ok(())
    }

    /// Serves the slice from its old place again and removes the new
    /// place's files; nothing to do without a switched old place.
    fn go_back(&self) -> Result<(), DataPlaneError> {
        let holder = self.holder()?;
        let retiring = {
            let _paused = self.io.pause().map_err(|e| self.err("lock", e))?;
            let mut state = holder.write_state().map_err(|e| self.err("lock", e))?;
            let Some(retiring) = state.retiring.take() else {
                return Ok(());
            };
            self.io.active_copies.fetch_sub(1, Ordering::AcqRel);
            holder.rebuilt.store(false, Ordering::Release);
            state.medium = retiring.medium.clone();
            // The new place's file closes when its last reader is done.
            let _new = std::mem::replace(&mut state.live, retiring.live.clone());
            if retiring.mirrored {
                // Every acknowledged write is there; a flush makes it durable.
                holder.dirty.store(true, Ordering::Release);
                holder.lost.store(false, Ordering::Release);
            } else {
                holder.lost.store(true, Ordering::Release);
            }
            retiring
        };
        if retiring.medium == self.to_medium {
            // A lost copy resynced on its own medium: its place is the
            // placement's, and stays (lost) for the next recovery.
            return Ok(());
        }
        let placed = match &retiring.placed {
            Placed::Files(placed) => placed,
            Placed::Node(node) => {
                return node.remove().map_err(|e| self.err("delete", e));
            }
        };
        let mut dirs = Vec::new();
        for path in placed {
            remove_if_exists(path).map_err(|e| self.err("delete", e))?;
            if let Some(dir) = path.parent().filter(|d| !dirs.contains(d)) {
                dirs.push(dir);
            }
        }
        for dir in dirs {
            fsync_dir(dir).map_err(|e| self.err("fsync", e))?;
        }
        self.io.media.snapshot_files_changed(&self.to_medium);
        Ok(())
    }
}

impl SliceMove for LocalSliceMove {
    fn starts_at(&self) -> u64 {
        self.target.as_ref().map_or(self.resume_from, |t| t.from)
    }

    fn in_place(&self) -> bool {
        self.target.is_none()
    }

    fn fill(
        &mut self,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(), DataPlaneError> {
        if self.stage != Stage::Begun {
            return Err(self.out_of_order("fill"));
        }
        let filled = self.run_fill(options, progress);
        self.after(filled, Stage::Filled, |m| m.stop_mirroring())
    }

    fn switch(&mut self) -> Result<(), DataPlaneError> {
        if self.stage != Stage::Filled && !(self.in_place() && self.stage == Stage::Begun) {
            return Err(self.out_of_order("switch"));
        }
        let switched = self.run_switch();
        self.after(switched, Stage::Switched, LocalSliceMove::drop_target)
    }

    fn finish(mut self: Box<Self>) -> Result<(), DataPlaneError> {
        if self.stage != Stage::Switched && !self.in_place() {
            return Err(self.out_of_order("finish"));
        }
        let holder = self.holder()?;
        let retiring = holder
            .write_state()
            .map_err(|e| self.err("lock", e))?
            .retiring
            .take();
        if retiring.is_some() {
            self.io.active_copies.fetch_sub(1, Ordering::AcqRel);
        }
        self.stage = Stage::Ended;
        Ok(())
    }

    fn abort(mut self: Box<Self>) -> Result<(), DataPlaneError> {
        let result = match self.stage {
            Stage::Switched => self.go_back(),
            // An in-place move may find the old place a dropped move kept.
            _ if self.in_place() => self.go_back(),
            _ => {
                self.drop_target();
                Ok(())
            }
        };
        self.stage = Stage::Ended;
        result
    }

    fn keep_target(&mut self) {
        let Some(target) = self.target.as_mut() else {
            return;
        };
        match &mut target.place {
            Place::Node(node) => node.keep = true,
            Place::Local(local) => {
                if let Some(guard) = local.partial_guard.as_mut() {
                    guard.disarm();
                }
            }
        }
    }
}

impl Drop for LocalSliceMove {
    fn drop(&mut self) {
        match self.stage {
            Stage::Begun | Stage::Filled | Stage::Failed => self.drop_target(),
            // As after a crash: I/O stays on the target and the old place
            // still takes every write, until a move of the slice to the
            // same medium finishes or aborts.
            Stage::Switched | Stage::Ended => {}
        }
        if self.claimed {
            if let Ok(holder) = self.holder() {
                holder.release();
            }
            if self.source_copy != self.copy {
                if let Ok(source) = self.io.slice(self.source_copy, self.column) {
                    source.release();
                }
            }
            self.io.active_copies.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// What begin finds on a node medium to copy onto (see [`node_target`]).
struct FoundNodeTarget {
    /// `None`: the fill creates a fresh slice.
    slice: Option<Arc<dyn NodeTarget>>,
    /// Where the copy starts.
    from: u64,
    /// The slice holds an older version of the slice: compared.
    compare: bool,
}

impl FoundNodeTarget {
    /// A fresh slice, copied from the start.
    const FRESH: FoundNodeTarget = FoundNodeTarget {
        slice: None,
        from: 0,
        compare: false,
    };
}

/// The target on a node medium that begin finds there: the lost copy's
/// own (stale) slice (`own`), grown to `len` if the volume grew, compared,
/// from `resume_from` when the step has a checkpoint; or the slice of an
/// interrupted copy of `len` bytes, resumed from its checkpoint, what lies
/// beyond it cleared (copied after the checkpoint, it may have changed in
/// the source since). Else a fresh slice, copied from the start.
fn node_target(
    io: &LocalVolumeIo,
    holder: &SliceIo,
    to_medium: &str,
    len: u64,
    own: bool,
    resume_from: u64,
) -> Result<FoundNodeTarget, DataPlaneError> {
    if !own && resume_from == 0 {
        return Ok(FoundNodeTarget::FRESH);
    }
    let err = |op, e| io.err(holder, to_medium, op, e);
    let Some((slice, size)) = io
        .media
        .open_node_target(to_medium, &holder.key, &io.front)?
    else {
        return Ok(FoundNodeTarget::FRESH);
    };
    if own && size <= len {
        if size < len {
            slice.grow(len).map_err(|e| err("grow", e))?;
        }
        return Ok(FoundNodeTarget {
            slice: Some(slice),
            from: resume_from.min(len),
            compare: true,
        });
    }
    if !own && size == len && resume_from <= len {
        if resume_from < len {
            slice
                .punch_hole(resume_from, len - resume_from)
                .map_err(|e| err("discard", e))?;
        }
        return Ok(FoundNodeTarget {
            slice: Some(slice),
            from: resume_from,
            compare: false,
        });
    }
    Ok(FoundNodeTarget::FRESH)
}

/// A lost copy's stale file on its own medium, renamed to the partial name
/// and sized `len` (the volume may have grown), for a resync to compare
/// against; `None` when it is not there.
fn stale_as_partial(path: &Path, partial: &Path, len: u64) -> io::Result<Option<File>> {
    match std::fs::rename(path, partial) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(partial)?;
    if file.metadata()?.len() > len {
        // Not this slice's size: copied from the start instead.
        drop(file);
        remove_if_exists(partial)?;
        return Ok(None);
    }
    file.set_len(len)?;
    Ok(Some(file))
}

/// The two slices of a phase (the holder and the copy read from), with
/// errors named after the target; borrowed apart from the move's target
/// state, which the phase changes.
#[derive(Clone, Copy)]
struct Ends<'a> {
    io: &'a LocalVolumeIo,
    holder: &'a SliceIo,
    source: &'a SliceIo,
    to_medium: &'a str,
}

impl<'a> Ends<'a> {
    fn of(
        io: &'a LocalVolumeIo,
        (copy, source_copy, column): (u32, u32, u32),
        to_medium: &'a str,
    ) -> Result<Ends<'a>, DataPlaneError> {
        Ok(Ends {
            io,
            holder: io.slice(copy, column)?,
            source: io.slice(source_copy, column)?,
            to_medium,
        })
    }

    /// An error of `op` on the target.
    fn err(self, op: &'static str) -> impl Fn(io::Error) -> DataPlaneError + 'a {
        move |e| self.io.err(self.holder, self.to_medium, op, e)
    }
}
