//! Pipelined writes: a plain write to a volume with copies on other nodes,
//! started on the caller's thread (an async worker: nothing here waits)
//! and answered by the slice client's reader thread that takes the last
//! copy's reply off its socket. No thread waits per request or per copy:
//! the request costs one thread hand-off at the end instead of three
//! (docs/architecture.md, "Pipelined writes").
//!
//! Only the common case is pipelined: every copy in use healthy or its
//! loss recorded, no live move or rebuild on the columns written, every
//! far copy connected and known to have no snapshots. Anything else is
//! refused before any copy is touched, and the caller writes the blocking
//! way. When a write finds more work after its replies (a copy failed, a
//! move began meanwhile), that work runs on a thread of its own, as the
//! blocking way does it.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use svs_sliceproto::Replies;

use super::gate::Passing;
use super::io::{Change, LocalVolumeIo, SegmentInFlight};
use super::layout::Segment;
use super::slice::SliceIo;
use super::{eio, Started, WriteDone};

/// A pipelined write between its start and its last reply.
struct InFlight {
    io: Arc<LocalVolumeIo>,
    segments: Vec<(Segment, SegmentInFlight)>,
    /// A failure met while starting (what was sent is still collected).
    failed: Option<io::Error>,
    data: Vec<u8>,
    pass: Passing,
    done: WriteDone,
}

impl LocalVolumeIo {
    /// See [`super::VolumeIo::start_write`].
    pub(super) fn start_pipelined(
        self: Arc<Self>,
        offset: u64,
        data: Vec<u8>,
        done: WriteDone,
    ) -> Result<(), (Vec<u8>, WriteDone)> {
        if self.check_range(offset, data.len() as u64).is_err() || self.front.is_fenced() {
            return Err((data, done));
        }
        // Never waits: a pause waiting for this write would wait for the
        // async worker this runs on.
        let Some(pass) = self.barrier.try_pass() else {
            return Err((data, done));
        };
        let Ok(segs) = self.segments_to_change(offset, data.len()) else {
            return Err((data, done));
        };
        if !segs.iter().all(|seg| self.pipelines(seg.column)) {
            return Err((data, done));
        }
        let mut segments = Vec::with_capacity(segs.len());
        let mut failed = None;
        for seg in segs {
            match self.start_segment(&seg, false, Change::Write(&data)) {
                Ok(flight) => segments.push((seg, flight)),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        // The callback takes the write from here once every reply is in:
        // `arm` below, after every registration, is the earliest it runs.
        let slot: Arc<Mutex<Option<InFlight>>> = Arc::new(Mutex::new(None));
        let replies = {
            let slot = Arc::clone(&slot);
            Replies::new(move || {
                let write = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(write) = write {
                    write.finish();
                }
            })
        };
        for (_, flight) in &segments {
            for (_, _, started) in &flight.far {
                if let Started::Sent(client, sent, _) = started {
                    client.call_on_replies(sent, &replies);
                }
            }
        }
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(InFlight {
            io: self,
            segments,
            failed,
            data,
            pass,
            done,
        });
        replies.arm();
        Ok(())
    }

    /// Whether a write to `column` may be pipelined (see the module docs).
    fn pipelines(&self, column: usize) -> bool {
        let mut far = 0;
        let simple = self.slices[column].iter().all(|slice| {
            if slice.is_lost() {
                return slice.pending_loss().is_none() && !slice.copying.load(Ordering::Acquire);
            }
            let Ok(state) = slice.read_state() else {
                return false;
            };
            let Some(live) = state.live.as_ref() else {
                return false;
            };
            if state.mirror.is_some()
                || state.retiring.is_some()
                || slice.copying.load(Ordering::Acquire)
            {
                return false;
            }
            if !live.is_near() {
                far += 1;
            }
            live.starts_at_once()
        });
        // Without a far copy the write is done at once anyway.
        simple && far > 0
    }

    /// Whether the write's end needs nothing that may wait: no copy
    /// failed or was lost, no move or rebuild began on its columns.
    fn ends_at_once<'a>(
        &self,
        mut segments: impl Iterator<Item = (&'a Segment, &'a SegmentInFlight)>,
    ) -> bool {
        let simple = |slice: &SliceIo| {
            slice
                .read_state()
                .is_ok_and(|state| state.mirror.is_none() && state.retiring.is_none())
                && slice.pending_loss().is_none()
        };
        segments.all(|(seg, flight)| {
            flight.failed.is_none() && self.slices[seg.column].iter().all(simple)
        })
    }
}

/// A segment's outcome: its flight and its far copies' replies.
type Collected = (Segment, SegmentInFlight, Vec<(usize, io::Result<()>)>);

impl InFlight {
    /// Runs once every reply is in (or its connection broke): on the
    /// thread that read the last reply, so what may wait goes to a thread
    /// of its own.
    fn finish(self) {
        let InFlight {
            io,
            segments,
            failed,
            data,
            pass,
            done,
        } = self;
        // Every reply is in: collecting waits for none.
        let collected: Vec<Collected> = segments
            .into_iter()
            .map(|(seg, mut flight)| {
                let far = std::mem::take(&mut flight.far)
                    .into_iter()
                    .map(|(copy, live, started)| (copy, live.finish(started)))
                    .collect();
                (seg, flight, far)
            })
            .collect();
        let quick = failed.is_none()
            && collected
                .iter()
                .all(|(_, _, far)| far.iter().all(|(_, outcome)| outcome.is_ok()))
            && io.ends_at_once(collected.iter().map(|(seg, flight, _)| (seg, flight)));
        if !quick {
            return Self::finish_elsewhere(io, collected, failed, data, pass, done);
        }
        let mut result = Ok(());
        for (seg, mut flight, far) in collected {
            for (copy, outcome) in far {
                flight.tally(io.took_far(&seg, copy, outcome));
            }
            if flight.took == 0 {
                result = Err(eio());
            }
        }
        drop(pass);
        done(result, data);
    }

    /// The rest of a write whose end may wait (a copy's loss and its
    /// record, targets of moves), as [`LocalVolumeIo::write`] ends one, on
    /// a thread of its own.
    fn finish_elsewhere(
        io: Arc<LocalVolumeIo>,
        collected: Vec<Collected>,
        failed: Option<io::Error>,
        data: Vec<u8>,
        pass: Passing,
        done: WriteDone,
    ) {
        let end = move || {
            let mut result = match failed {
                Some(e) => Err(e),
                None => Ok(()),
            };
            let mut segments = Vec::with_capacity(collected.len());
            for (seg, mut flight, far) in collected {
                for (copy, outcome) in far {
                    flight.tally(io.took_far(&seg, copy, outcome));
                }
                segments.push((seg, flight));
            }
            for (seg, flight) in segments {
                if result.is_err() {
                    break;
                }
                if let Some(e) = flight.failed {
                    result = Err(e);
                    break;
                }
                io.hooks.between_copies_and_mirrors();
                result = io
                    .change_targets(&seg, false, Change::Write(&data))
                    .and_then(|()| if flight.took == 0 { Err(eio()) } else { Ok(()) });
            }
            // With no lock of the volume held (see `await_loss_records`).
            drop(pass);
            let result = result.and_then(|()| io.await_loss_records());
            done(result, data);
        };
        let end = Arc::new(Mutex::new(Some(end)));
        let spawned = {
            let end = Arc::clone(&end);
            std::thread::Builder::new()
                .name("svs-write-end".into())
                .spawn(move || {
                    if let Some(end) = end.lock().unwrap_or_else(|e| e.into_inner()).take() {
                        end();
                    }
                })
        };
        if spawned.is_err() {
            // No thread to be had: ended here, which may hold up this
            // connection's replies meanwhile, rather than never.
            if let Some(end) = end.lock().unwrap_or_else(|e| e.into_inner()).take() {
                end();
            }
        }
    }
}
