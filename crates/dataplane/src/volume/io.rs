//! The front end of an open volume: stripes over columns, copies, the
//! barrier, degraded reads and writes.

use super::gate::{Gate, Passing, Paused};
use super::hooks::{CopiesMode, SliceHooks, VolumeHooks};
use super::layout::{label, push_extent, segments, Extent, Segment, VolumeLayout, STRIPE};
use super::media::{Front, SliceMedia};
use super::slice::{Live, SliceIo, SliceState, WrittenChunks};
use super::{
    eio, is_media_failure, SliceChange, SliceCopyKind, SliceMove, Started, VolumeIo, WriteDone,
};
use crate::loss_record::{NotRecorded, REFUSED};
use crate::{DataPlaneError, SliceKey};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockWriteGuard, TryLockError};
use std::time::Instant;

/// Time between two checks by reads that a slice's file is still on its
/// medium (a stat each): the open file of a pulled disk stays readable, so
/// reads alone would not notice it is gone (flushes check every time).
pub(super) const LINK_CHECK_MS: u64 = 100;

/// A volume open for I/O: its slices (files of this host's media, or
/// slices on storage nodes), opened once.
pub struct LocalVolumeIo {
    pub(super) media: Arc<dyn SliceMedia>,
    pub(super) volume_id: String,
    /// This opening's epoch, and whether a node fenced it.
    pub(super) front: Arc<Front>,
    pub(super) size: AtomicU64,
    /// `slices[column][copy]`.
    pub(super) slices: Vec<Vec<SliceIo>>,
    /// `written[column]`: what was written since the volume was opened.
    pub(super) written: Vec<WrittenChunks>,
    /// Passed by every write-like request, paused by snapshot, rollback
    /// and a move's switch.
    pub(super) barrier: Arc<Gate>,
    /// Taken shared to begin a live move or rebuild; snapshot creation,
    /// deletion and rollback take it exclusively and are refused while
    /// `active_copies` is not zero (they would change the files being
    /// copied, or miss a place a switch may go back to).
    pub(super) copies: RwLock<()>,
    /// Live copies begun and not ended, plus switched slices whose old
    /// place is kept until their move finishes or is undone.
    pub(super) active_copies: AtomicUsize,
    /// Clock of the reads' link checks.
    pub(super) opened: Instant,
    /// Fault hooks of test builds (empty otherwise).
    pub(super) hooks: VolumeHooks,
}

/// What a write-like request does to each copy.
#[derive(Clone, Copy)]
pub(super) enum Change<'a> {
    Write(&'a [u8]),
    Discard,
}

/// A segment's change started on its copies ([`LocalVolumeIo::start_segment`]).
pub(super) struct SegmentInFlight {
    /// Sent to copies on other nodes: (copy, device, request).
    pub(super) far: Vec<(usize, Live, Started)>,
    /// Copies that took it so far.
    pub(super) took: usize,
    pub(super) failed: Option<io::Error>,
}

impl SegmentInFlight {
    pub(super) fn tally(&mut self, outcome: io::Result<bool>) {
        match outcome {
            Ok(took_it) => self.took += usize::from(took_it),
            Err(e) => self.failed = self.failed.take().or(Some(e)),
        }
    }
}

impl LocalVolumeIo {
    /// Opens every slice file of the layout. Slices on media marked failed
    /// and slices whose files cannot be opened are lost, not an error.
    pub(crate) fn open<M: SliceMedia + Clone>(
        media: &M,
        layout: &VolumeLayout,
    ) -> Result<LocalVolumeIo, DataPlaneError> {
        let columns = layout.media.first().map_or(0, Vec::len);
        if columns == 0 || layout.media.iter().any(|c| c.len() != columns) {
            return Err(DataPlaneError::Io {
                medium: String::new(),
                slice: layout.volume_id.clone(),
                op: "open",
                source: io::Error::new(io::ErrorKind::InvalidInput, "malformed layout"),
            });
        }
        let front = Arc::new(Front::new(&layout.volume_id, layout.epoch));
        let mut slices: Vec<Vec<SliceIo>> = (0..columns).map(|_| Vec::new()).collect();
        for (copy, row) in layout.media.iter().enumerate() {
            for (column, medium) in row.iter().enumerate() {
                let key = SliceKey {
                    volume_id: layout.volume_id.clone(),
                    copy: copy as u32,
                    column: column as u32,
                };
                let live = media.open_slice(medium, &key, &front);
                // A slice that could not be opened was reported: writes
                // skipping it wait for that record too.
                let loss = live
                    .is_none()
                    .then(|| media.pending_record(medium, &key))
                    .flatten();
                slices[column].push(SliceIo {
                    key,
                    lost: AtomicBool::new(live.is_none()),
                    loss: Mutex::new(loss),
                    state: RwLock::new(SliceState {
                        medium: medium.clone(),
                        live,
                        mirror: None,
                        retiring: None,
                    }),
                    dirty: AtomicBool::new(false),
                    syncing: Mutex::new(()),
                    copying: AtomicBool::new(false),
                    rebuilt: AtomicBool::new(false),
                    link_checked_ms: AtomicU64::new(0),
                    hooks: SliceHooks::default(),
                });
            }
        }
        let column_bytes = layout.size.div_ceil(STRIPE * columns as u64) * STRIPE;
        Ok(LocalVolumeIo {
            media: Arc::new(media.clone()),
            volume_id: layout.volume_id.clone(),
            front,
            size: AtomicU64::new(layout.size),
            slices,
            written: (0..columns)
                .map(|_| WrittenChunks::new(column_bytes))
                .collect(),
            barrier: Arc::default(),
            copies: RwLock::new(()),
            active_copies: AtomicUsize::new(0),
            opened: Instant::now(),
            hooks: VolumeHooks::default(),
        })
    }

    /// Fails once a node has fenced this opening: it may change nothing.
    pub(super) fn not_fenced(&self) -> io::Result<()> {
        if self.front.is_fenced() {
            return Err(self.front.error());
        }
        Ok(())
    }

    pub(super) fn pause(&self) -> io::Result<Paused<'_>> {
        Ok(self.barrier.pause())
    }

    pub(super) fn pass(&self) -> io::Result<Passing> {
        Ok(self.barrier.pass())
    }

    /// Excludes live copies for a snapshot operation, or refuses it.
    pub(super) fn no_copies(&self) -> io::Result<RwLockWriteGuard<'_, ()>> {
        match self.copies.try_write() {
            Ok(guard) if self.active_copies.load(Ordering::Acquire) == 0 => Ok(guard),
            Ok(_) | Err(TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::ResourceBusy,
                format!(
                    "a slice of volume {} is being moved or rebuilt; try again when it is done",
                    self.volume_id
                ),
            )),
            Err(TryLockError::Poisoned(_)) => Err(io::Error::other("copy lock poisoned")),
        }
    }

    pub(super) fn all_slices(&self) -> impl Iterator<Item = &SliceIo> {
        self.slices.iter().flatten()
    }

    pub(super) fn check_range(&self, offset: u64, len: u64) -> io::Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size() => Ok(()),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "request beyond the end of the volume",
            )),
        }
    }

    /// Stops using a slice whose I/O failed and reports its medium.
    pub(super) fn lose(&self, slice: &SliceIo, medium: &str, e: &io::Error) {
        if !slice.lost.swap(true, Ordering::AcqRel) {
            tracing::warn!(slice = %label(&slice.key), medium, error = %e,
                "slice I/O failed; the slice is lost and I/O goes on with the other copies");
        }
        slice.keep_loss(self.media.saw_io_error(medium, &slice.key, e));
    }

    /// Waits until the service has recorded the loss of every lost slice
    /// whose loss this opening reported: a write (or flush) that skipped a
    /// copy is answered only then (see [`crate::LossRecord`]). Called with
    /// no lock of the volume held, so recording (which marks media failed
    /// in open volumes) never waits on it. Errs as fenced when the service
    /// refuses the record (the volume's front is elsewhere now) or a node
    /// fences this opening meanwhile.
    pub(super) fn await_loss_records(&self) -> io::Result<()> {
        for slice in self.all_slices() {
            let Some(record) = slice.pending_loss() else {
                continue;
            };
            match record.wait(|| self.front.is_fenced(), &label(&slice.key)) {
                Ok(()) => {}
                Err(NotRecorded::Fenced) => return Err(self.front.error()),
                Err(NotRecorded::Refused) => return Err(self.front.fence(REFUSED)),
            }
        }
        Ok(())
    }

    /// Fails unless the slice's file is still where it belongs (a medium
    /// whose directory went away keeps open files readable, but nothing
    /// written to them survives).
    pub(super) fn check_linked(&self, state: &SliceState, live: &Live) -> io::Result<()> {
        // A medium no longer served has lost its slices.
        if !self.media.serves(&state.medium) {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        live.check_present()
    }

    /// [`LocalVolumeIo::check_linked`] at most every [`LINK_CHECK_MS`] per slice.
    pub(super) fn linked_lately(
        &self,
        slice: &SliceIo,
        state: &SliceState,
        live: &Live,
    ) -> io::Result<()> {
        let now = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX - 1) + 1;
        let last = slice.link_checked_ms.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < LINK_CHECK_MS {
            return Ok(());
        }
        slice.link_checked_ms.store(now, Ordering::Relaxed);
        self.check_linked(state, live)
    }

    /// Runs `serve` for each stripe segment of `[offset, offset + len)` on
    /// the copy a read uses: the first healthy copy whose call succeeds,
    /// copies in this process first (see [`SliceDevice::is_near`]); a copy
    /// that fails with a media error is lost and the next one is tried.
    /// EIO when no copy of a column can serve.
    pub(super) fn on_serving_copies(
        &self,
        offset: u64,
        len: usize,
        mut serve: impl FnMut(&Live, &Segment) -> io::Result<()>,
    ) -> io::Result<()> {
        for seg in segments(self.slices.len(), offset, len) {
            let mut served = false;
            let near_first = [true, false]
                .into_iter()
                .flat_map(|near| self.slices[seg.column].iter().map(move |s| (near, s)));
            for (near, slice) in near_first {
                // A lost slice being rebuilt is held by the copier chunk by
                // chunk: not waiting for it keeps reads smooth.
                if slice.is_lost() {
                    continue;
                }
                let state = slice.read_state()?;
                let Some(live) = slice.healthy(&state) else {
                    continue;
                };
                if live.is_near() != near {
                    continue;
                }
                let served_here = slice
                    .fault()
                    .and_then(|()| self.linked_lately(slice, &state, live))
                    .and_then(|()| serve(live, &seg));
                match served_here {
                    Ok(()) => {
                        served = true;
                        break;
                    }
                    Err(e) if is_media_failure(&e) => self.lose(slice, &state.medium, &e),
                    Err(e) => return Err(e),
                }
            }
            if !served {
                return Err(eio());
            }
        }
        Ok(())
    }

    /// Reads `buf` at volume `offset` over the stripes (see
    /// [`LocalVolumeIo::on_serving_copies`]).
    pub(super) fn read_copies(
        &self,
        offset: u64,
        buf: &mut [u8],
        mut read: impl FnMut(&Live, &mut [u8], u64) -> io::Result<()>,
    ) -> io::Result<()> {
        self.on_serving_copies(offset, buf.len(), |live, seg| {
            read(
                live,
                &mut buf[seg.buf_offset..seg.buf_offset + seg.len],
                seg.slice_offset,
            )
        })
    }

    /// The allocation of `[offset, offset + len)` where reads come from,
    /// each segment's runs given by `runs(live, slice_offset, len)`.
    pub(super) fn extents_with(
        &self,
        offset: u64,
        len: u64,
        runs: impl Fn(&Live, u64, u64) -> io::Result<Vec<(u64, bool)>>,
    ) -> io::Result<Vec<Extent>> {
        let len = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "range too large"))?;
        let mut extents = Vec::new();
        self.on_serving_copies(offset, len, |live, seg| {
            // A slice file is never shorter than the volume: one that was
            // cut lost data, which must not be shown as holes (zeros).
            if live.size()? < seg.slice_offset + seg.len as u64 {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
            }
            // Collected first: a copy that fails half way adds nothing.
            for (n, hole) in runs(live, seg.slice_offset, seg.len as u64)? {
                push_extent(&mut extents, n, hole);
            }
            Ok(())
        })?;
        Ok(extents)
    }

    /// A write or discard on every healthy copy (see [`VolumeIo::write`]),
    /// answered once every copy it skipped is recorded lost.
    pub(super) fn change(
        &self,
        offset: u64,
        len: usize,
        fua: bool,
        change: Change<'_>,
    ) -> io::Result<()> {
        self.change_copies(offset, len, fua, change)?;
        self.await_loss_records()
    }

    fn change_copies(
        &self,
        offset: u64,
        len: usize,
        fua: bool,
        change: Change<'_>,
    ) -> io::Result<()> {
        self.not_fenced()?;
        let _barrier = self.pass()?;
        let segs = self.segments_to_change(offset, len)?;
        for seg in segs {
            let flight = self.start_segment(&seg, fua, change)?;
            let (took, failed) = self.finish_far(&seg, flight, fua);
            if let Some(e) = failed {
                return Err(e);
            }
            self.hooks.between_copies_and_mirrors();
            self.change_targets(&seg, fua, change)?;
            if took == 0 {
                return Err(eio());
            }
        }
        Ok(())
    }

    /// The stripe segments of a change; EIO when a column it touches has no
    /// healthy copy (before any copy is written).
    pub(super) fn segments_to_change(&self, offset: u64, len: usize) -> io::Result<Vec<Segment>> {
        let segs = segments(self.slices.len(), offset, len);
        if segs
            .iter()
            .any(|seg| !self.slices[seg.column].iter().any(SliceIo::usable))
        {
            return Err(eio());
        }
        Ok(segs)
    }

    /// Starts a change of one segment on every copy of its column: marks
    /// it written, saves what snapshots need, sends it to the copies on
    /// other nodes and writes this process's own. An error before anything
    /// was sent fails at once; one after is in the result (what was sent
    /// is still collected).
    pub(super) fn start_segment(
        &self,
        seg: &Segment,
        fua: bool,
        change: Change<'_>,
    ) -> io::Result<SegmentInFlight> {
        let column = &self.slices[seg.column];
        let seg_len = seg.len as u64;
        // Before any copy is written: a copy that misses this write's
        // mirror (it starts mirroring later) finds it here.
        self.written[seg.column].mark(seg.slice_offset, seg_len);
        // Every copy saves what its snapshots need before any copy is
        // written: a save that fails (ENOSPC) leaves all copies as they were.
        for slice in column {
            if slice.is_lost() && !slice.copying.load(Ordering::Acquire) {
                continue;
            }
            let state = slice.read_state()?;
            // A switched move's old place too: it must take every
            // acknowledged write (see `Retiring`), so its failure fails
            // the request rather than losing the slice.
            if let Some((_, old)) = state.mirrored_retiring() {
                old.prepare_write(seg.slice_offset, seg_len)?;
            }
            let Some(live) = slice.healthy(&state) else {
                continue;
            };
            if let Err(e) = slice
                .fault()
                .and_then(|()| live.prepare_write(seg.slice_offset, seg_len))
            {
                if !is_media_failure(&e) {
                    return Err(e);
                }
                self.lose(slice, &state.medium, &e);
            }
        }
        let slice_change = match change {
            Change::Write(data) => SliceChange::Write(
                &data[seg.buf_offset..seg.buf_offset + seg.len],
                seg.slice_offset,
            ),
            Change::Discard => SliceChange::Discard(seg.slice_offset, seg_len),
        };
        let mut flight = SegmentInFlight {
            far: Vec::new(),
            took: 0,
            failed: None,
        };
        // Copies on other nodes first: sent to every node at once, their
        // replies waited for after this process's own copies are written,
        // so the request pays one round trip however many copies it has.
        for (copy, slice) in column.iter().enumerate() {
            if slice.is_lost() {
                continue;
            }
            let state = match slice.read_state() {
                Ok(state) => state,
                Err(e) => {
                    // What was sent is still waited for.
                    flight.failed = Some(e);
                    return Ok(flight);
                }
            };
            let Some(live) = slice.healthy(&state).filter(|live| !live.is_near()) else {
                continue;
            };
            let started = match slice.fault() {
                Ok(()) => live.start(slice_change),
                Err(e) => Started::Done(Err(e)),
            };
            flight.far.push((copy, Arc::clone(live), started));
        }
        // Each near copy's write, made durable for FUA. A sync is worth a
        // thread: the copies' syncs then overlap (see
        // docs/architecture.md); a page-cache write is not.
        let write_copy = |slice: &SliceIo| -> io::Result<bool> {
            if slice.is_lost() {
                return Ok(false);
            }
            let state = slice.read_state()?;
            let Some(live) = slice.healthy(&state).filter(|live| live.is_near()) else {
                return Ok(false);
            };
            let done = slice
                .fault()
                .and_then(|()| live.finish(live.start(slice_change)))
                .and_then(|()| if fua { live.sync() } else { Ok(()) });
            self.took_change(slice, &state.medium, fua, done)
        };
        let parallel = match self.hooks.copies_mode() {
            CopiesMode::Serial => false,
            CopiesMode::ParallelSyncs => fua,
            CopiesMode::ParallelAll => true,
        };
        let outcomes = if parallel && flight.far.is_empty() {
            run_each(column, write_copy)
        } else {
            column.iter().map(write_copy).collect()
        };
        for outcome in outcomes {
            flight.tally(outcome);
        }
        Ok(flight)
    }

    /// Waits for the copies on other nodes a segment's change was sent to
    /// (every one, also after a failure: no reply is left behind, and no
    /// copy is left unaccounted for): how many copies took it in all, and
    /// the first failure. A FUA write is made durable on them by a sync
    /// sent to each once its write is in (a node runs a connection's
    /// requests at once, in no set order).
    pub(super) fn finish_far(
        &self,
        seg: &Segment,
        mut flight: SegmentInFlight,
        fua: bool,
    ) -> (usize, Option<io::Error>) {
        let column = &self.slices[seg.column];
        let mut written = Vec::new();
        for (copy, live, started) in std::mem::take(&mut flight.far) {
            match live.finish(started) {
                Ok(()) if fua => {
                    let sync = live.start(SliceChange::Sync);
                    written.push((copy, live, sync));
                }
                done => flight.tally(self.took_far_change(&column[copy], fua, done)),
            }
        }
        for (copy, live, sync) in written {
            flight.tally(self.took_far_change(&column[copy], fua, live.finish(sync)));
        }
        (flight.took, flight.failed)
    }

    /// A segment's change on the targets of live moves and rebuilds, after
    /// every copy they are filled from was written (see
    /// `LocalVolumeIo::fill`), and on the old places of switched moves.
    pub(super) fn change_targets(
        &self,
        seg: &Segment,
        fua: bool,
        change: Change<'_>,
    ) -> io::Result<()> {
        let seg_len = seg.len as u64;
        for slice in &self.slices[seg.column] {
            let state = slice.read_state()?;
            if let Some((retiring, old)) = state.mirrored_retiring() {
                match change {
                    Change::Write(data) => old.write_at(
                        &data[seg.buf_offset..seg.buf_offset + seg.len],
                        seg.slice_offset,
                    ),
                    Change::Discard => old.discard(seg.slice_offset, seg_len),
                }
                .and_then(|()| if fua { old.sync() } else { Ok(()) })
                .inspect_err(|e| {
                    tracing::warn!(slice = %label(&slice.key), medium = %retiring.medium, error = %e,
                        "write to a moved slice's old place failed; the write fails");
                })?;
                if !fua {
                    retiring.dirty.store(true, Ordering::Release);
                }
            }
            let Some(m) = &state.mirror else { continue };
            // A target that failed a write fails its copy: writing it
            // more would only wait on a node that stopped answering.
            if seg.slice_offset >= m.copied_upto || m.failed.load(Ordering::Acquire) {
                continue;
            }
            let mirrored = match change {
                Change::Write(data) => m.file.write_at(
                    &data[seg.buf_offset..seg.buf_offset + seg.len],
                    seg.slice_offset,
                ),
                Change::Discard => m.file.punch_hole(seg.slice_offset, seg_len),
            }
            .and_then(|()| {
                if fua {
                    m.file.sync_data()
                } else {
                    m.dirty.store(true, Ordering::Release);
                    Ok(())
                }
            });
            if let Err(e) = mirrored {
                tracing::warn!(slice = %label(&slice.key), error = %e, "write to a copy's target failed; the copy will fail");
                m.failed.store(true, Ordering::Release);
            }
        }
        Ok(())
    }
}

impl LocalVolumeIo {
    /// The outcome `done` of a change to one copy: whether the copy took
    /// it. A media failure loses the copy (the request goes on with the
    /// others); any other failure fails the request.
    fn took_change(
        &self,
        slice: &SliceIo,
        medium: &str,
        fua: bool,
        done: io::Result<()>,
    ) -> io::Result<bool> {
        match done {
            Ok(()) => {
                if !fua {
                    slice.dirty.store(true, Ordering::Release);
                }
                Ok(true)
            }
            Err(e) if is_media_failure(&e) => {
                self.lose(slice, medium, &e);
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// [`LocalVolumeIo::took_far_change`] of a plain write to copy `copy`
    /// of `seg`'s column.
    pub(super) fn took_far(
        &self,
        seg: &Segment,
        copy: usize,
        done: io::Result<()>,
    ) -> io::Result<bool> {
        self.took_far_change(&self.slices[seg.column][copy], false, done)
    }

    /// [`LocalVolumeIo::took_change`] of a copy on another node, whose
    /// state is read again only when it failed.
    fn took_far_change(
        &self,
        slice: &SliceIo,
        fua: bool,
        done: io::Result<()>,
    ) -> io::Result<bool> {
        match done {
            Err(e) if is_media_failure(&e) => {
                let state = slice.read_state()?;
                self.took_change(slice, &state.medium, fua, Err(e))
            }
            done => self.took_change(slice, "", fua, done),
        }
    }
}

/// A flush's sync sent to a copy on another node: the slice's sync lock
/// (a concurrent flush answers only once this sync is done), whether it
/// had writes to make durable, and the request.
struct FarFlush<'a> {
    _syncing: MutexGuard<'a, ()>,
    live: Live,
    was_dirty: bool,
    started: Started,
}

impl LocalVolumeIo {
    /// Sends the flush of a healthy copy on another node that is neither
    /// being copied nor a moved slice's (those flush by
    /// [`LocalVolumeIo::flush_slice`]): one sync that checks the slice is in
    /// place, as `flush_slice` checks a near one.
    fn start_far_flush<'a>(&self, slice: &'a SliceIo) -> io::Result<Option<FarFlush<'a>>> {
        if slice.is_lost() || slice.copying.load(Ordering::Acquire) {
            return Ok(None);
        }
        let state = slice.read_state()?;
        if state.retiring.is_some() || !self.media.serves(&state.medium) {
            return Ok(None);
        }
        let Some(live) = slice.healthy(&state).filter(|live| !live.is_near()) else {
            return Ok(None);
        };
        let live = Arc::clone(live);
        drop(state);
        // A poisoned lock guards nothing but ordering.
        let syncing = slice.syncing.lock().unwrap_or_else(|p| p.into_inner());
        let was_dirty = slice.dirty.swap(false, Ordering::AcqRel);
        let started = match slice.fault() {
            Ok(()) => live.start(SliceChange::CheckedSync),
            Err(e) => Started::Done(Err(e)),
        };
        Ok(Some(FarFlush {
            _syncing: syncing,
            live,
            was_dirty,
            started,
        }))
    }

    /// The outcome of a [`LocalVolumeIo::start_far_flush`], as
    /// `flush_slice`'s: a media failure loses the copy.
    fn finish_far_flush(&self, slice: &SliceIo, flush: FarFlush<'_>) -> io::Result<()> {
        let FarFlush {
            _syncing,
            live,
            was_dirty,
            started,
        } = flush;
        let Err(e) = live.finish(started) else {
            return Ok(());
        };
        if was_dirty {
            slice.dirty.store(true, Ordering::Release);
        }
        if !is_media_failure(&e) {
            return Err(e);
        }
        let state = slice.read_state()?;
        self.lose(slice, &state.medium, &e);
        Ok(())
    }
}

impl LocalVolumeIo {
    /// Makes the acknowledged writes of one slice durable (and those
    /// mirrored to a copy's target); a slice whose fsync fails, or whose
    /// file is no longer on its medium, is lost. Errs on any other failure.
    fn flush_slice(&self, slice: &SliceIo) -> io::Result<()> {
        // A copy's target holds acknowledged writes below its checkpoint
        // that a resumed copy does not copy again: they are made durable
        // there too (a rebuild's target belongs to a lost slice, so this
        // comes first). Only a slice claimed by a copy has one: the others
        // are not locked for it.
        if slice.copying.load(Ordering::Acquire) {
            let state = slice.read_state()?;
            if let Some(m) = state.mirror.as_ref() {
                // As below: a concurrent flush must not answer before this
                // sync has made the writes durable.
                let _syncing = slice.syncing.lock().unwrap_or_else(|p| p.into_inner());
                if m.dirty.swap(false, Ordering::AcqRel) && !m.failed.load(Ordering::Acquire) {
                    if let Err(e) = m.file.sync_data() {
                        tracing::warn!(slice = %label(&slice.key), error = %e,
                            "flush of a copy's target failed; the copy will fail");
                        m.failed.store(true, Ordering::Release);
                    }
                }
            }
        }
        if slice.is_lost() && !slice.copying.load(Ordering::Acquire) {
            return Ok(());
        }
        let state = slice.read_state()?;
        if let Some((retiring, old)) = state.mirrored_retiring() {
            // The old place of a switched move holds every acknowledged
            // write until the move finishes.
            let _syncing = slice.syncing.lock().unwrap_or_else(|p| p.into_inner());
            if retiring.dirty.swap(false, Ordering::AcqRel) {
                old.sync().inspect_err(|_| {
                    retiring.dirty.store(true, Ordering::Release);
                })?;
            }
        }
        let Some(live) = slice.healthy(&state) else {
            return Ok(());
        };
        let synced = self
            .check_linked(&state, live)
            .and_then(|()| slice.fault())
            .and_then(|()| {
                // A poisoned lock guards nothing but ordering.
                let _syncing = slice.syncing.lock().unwrap_or_else(|p| p.into_inner());
                if slice.dirty.swap(false, Ordering::AcqRel) {
                    live.sync().inspect_err(|_| {
                        slice.dirty.store(true, Ordering::Release);
                    })
                } else {
                    Ok(())
                }
            });
        match synced {
            Ok(()) => Ok(()),
            Err(e) if is_media_failure(&e) => {
                self.lose(slice, &state.medium, &e);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// Runs `job` for each of `items` at once: each but the first on a thread
/// of its own, the first here; the outcomes in order. A thread that cannot
/// be started leaves its item to run here after the first.
fn run_each<T: Sync, R: Send>(items: &[T], job: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let Some((first, rest)) = items.split_first() else {
        return Vec::new();
    };
    if rest.is_empty() {
        return vec![job(first)];
    }
    let job = &job;
    std::thread::scope(|scope| {
        let started: Vec<_> = rest
            .iter()
            .map(|item| {
                std::thread::Builder::new()
                    .name("svs-copy-io".into())
                    .spawn_scoped(scope, move || job(item))
                    .map_err(|_| item)
            })
            .collect();
        let mut out = Vec::with_capacity(items.len());
        out.push(job(first));
        for handle in started {
            out.push(match handle {
                Ok(handle) => handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                Err(item) => job(item),
            });
        }
        out
    })
}

impl VolumeIo for LocalVolumeIo {
    fn volume_id(&self) -> &str {
        &self.volume_id
    }

    fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    fn set_size(&self, size: u64) {
        self.size.store(size, Ordering::Release);
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.check_range(offset, buf.len() as u64)?;
        self.read_copies(offset, buf, |live, out, at| live.read_at(out, at))
    }

    /// Each stripe segment from the copy `read` would use, while every one
    /// is in memory; the first that is not ends the attempt (`false` is
    /// not a failure: no copy is lost for it).
    fn read_cached(&self, offset: u64, buf: &mut [u8]) -> io::Result<bool> {
        self.check_range(offset, buf.len() as u64)?;
        let mut cached = true;
        self.read_copies(offset, buf, |live, out, at| {
            if cached {
                cached = live.read_cached(out, at)?;
            }
            Ok(())
        })?;
        Ok(cached)
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        self.check_range(offset, data.len() as u64)?;
        self.change(offset, data.len(), fua, Change::Write(data))
    }

    fn start_write(
        self: Arc<Self>,
        offset: u64,
        data: Vec<u8>,
        done: WriteDone,
    ) -> Result<(), (Vec<u8>, WriteDone)> {
        self.start_pipelined(offset, data, done)
    }

    fn discard(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        self.check_range(offset, len)?;
        let len = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "range too large"))?;
        self.change(offset, len, fua, Change::Discard)
    }

    /// From the slice files' holes (SEEK_HOLE / SEEK_DATA): one `lseek`
    /// per stripe segment when it is all data.
    fn extents(&self, offset: u64, len: u64) -> io::Result<Vec<Extent>> {
        self.check_range(offset, len)?;
        self.extents_with(offset, len, |live, at, n| live.allocation(at, n))
    }

    /// Starts reading the range into the page cache (`POSIX_FADV_WILLNEED`
    /// on the copies reads use).
    fn cache(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check_range(offset, len)?;
        let len = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "range too large"))?;
        self.on_serving_copies(offset, len, |live, seg| {
            live.will_need(seg.slice_offset, seg.len as u64);
            Ok(())
        })
    }

    /// Makes every acknowledged write durable (fsync of the healthy slices
    /// written since the last flush); a slice whose fsync fails, or whose
    /// file is no longer on its medium, is lost.
    fn flush(&self) -> io::Result<()> {
        self.not_fenced()?;
        let slices: Vec<&SliceIo> = self.all_slices().collect();
        let mut synced: Vec<Option<io::Result<()>>> = slices.iter().map(|_| None).collect();
        // Copies on other nodes first: a sync sent to each at once (their
        // nodes check the slices are in place as they sync), waited for
        // after this process's own copies are synced.
        let mut far = Vec::new();
        for (i, slice) in slices.iter().enumerate() {
            if let Some(sync) = self.start_far_flush(slice)? {
                far.push((i, sync));
            }
        }
        // The near slices with writes to make durable sync at once, each on
        // its own thread (see docs/architecture.md); the others (a link
        // check each) one after another.
        let is_far = |i: usize| far.iter().any(|(f, _)| *f == i);
        if self.hooks.copies_mode() != CopiesMode::Serial {
            let to_sync: Vec<usize> = (0..slices.len())
                .filter(|&i| {
                    !is_far(i)
                        && (slices[i].dirty.load(Ordering::Acquire)
                            || slices[i].copying.load(Ordering::Acquire))
                })
                .collect();
            if to_sync.len() > 1 {
                let outcomes = run_each(&to_sync, |&i| self.flush_slice(slices[i]));
                for (&i, outcome) in to_sync.iter().zip(outcomes) {
                    synced[i] = Some(outcome);
                }
            }
        }
        for (i, slice) in slices.iter().enumerate() {
            if synced[i].is_none() && !is_far(i) {
                synced[i] = Some(self.flush_slice(slice));
            }
        }
        for (i, sync) in far {
            synced[i] = Some(self.finish_far_flush(slices[i], sync));
        }
        let mut next = synced.into_iter();
        for column in &self.slices {
            for outcome in next.by_ref().take(column.len()) {
                outcome.unwrap_or(Ok(()))?;
            }
            if !column.iter().any(SliceIo::usable) {
                return Err(eio());
            }
        }
        self.await_loss_records()
    }

    fn snapshot(&self, id: u64) -> io::Result<()> {
        self.take_snapshot(id)
    }

    fn delete_snapshot(&self, id: u64) -> io::Result<()> {
        self.remove_snapshot(id)
    }

    fn rollback(&self, id: u64) -> io::Result<()> {
        self.roll_back(id)
    }

    fn snapshot_view(self: Arc<Self>, id: u64, size: u64) -> io::Result<Arc<dyn VolumeIo>> {
        self.view_snapshot(id, size)
    }

    fn fail_medium(&self, medium: &str) {
        for slice in self.all_slices() {
            let Ok(state) = slice.read_state() else {
                slice.lost.store(true, Ordering::Release);
                continue;
            };
            if state.medium == medium {
                slice.lost.store(true, Ordering::Release);
            }
            if let Some(m) = state.mirror.as_ref().filter(|m| m.medium == medium) {
                m.failed.store(true, Ordering::Release);
            }
        }
    }

    fn is_fenced(&self) -> bool {
        self.front.is_fenced()
    }

    fn is_near(&self) -> bool {
        self.all_slices().all(|slice| {
            if slice.is_lost() {
                // A write that skips it waits for its loss to be recorded
                // (a round trip to the control plane): not near until then.
                return slice.pending_loss().is_none();
            }
            slice
                .read_state()
                .map_or(true, |s| s.live.as_ref().is_none_or(|live| live.is_near()))
        })
    }

    fn reads_near(&self) -> bool {
        self.slices.iter().all(|column| {
            column.iter().any(|slice| {
                !slice.is_lost()
                    && slice
                        .read_state()
                        .is_ok_and(|s| s.live.as_ref().is_some_and(|live| live.is_near()))
            })
        })
    }

    fn lost_slices(&self) -> Vec<(u32, u32)> {
        let mut lost = Vec::new();
        for slice in self.all_slices() {
            if let Ok(state) = slice.read_state() {
                if let Some(live) = slice.healthy(&state) {
                    match self.check_linked(&state, live) {
                        Err(e) if is_media_failure(&e) => self.lose(slice, &state.medium, &e),
                        _ => continue,
                    }
                }
            }
            if slice.is_lost() {
                lost.push((slice.key.copy, slice.key.column));
            }
        }
        lost.sort_unstable();
        lost
    }

    fn begin_slice_copy(
        self: Arc<Self>,
        kind: SliceCopyKind,
        copy: u32,
        column: u32,
        to_medium: &str,
        resume_from: u64,
    ) -> Result<Box<dyn SliceMove>, DataPlaneError> {
        self.begin_copy(kind, (copy, column), to_medium, resume_from)
    }
}
