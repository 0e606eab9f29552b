//! The control plane's calls to the fronts this node runs (the slice
//! protocol's `FrontCall`; the JSON is `svs_front::calls_wire`): a job's
//! snapshot, rollback, or live slice move runs here, on the front that
//! serves the volume, so its bytes go between storage nodes and never
//! through `svs serve`.
//!
//! Each call runs on a thread of its own and is answered within
//! [`ANSWER_WITHIN`]; one still running then answers `running` and is
//! asked again. A live copy lives between its phases' calls as a
//! [`CopySession`] named by its begin call's id. A fill draws on the grant
//! the control plane gives it (its shared movement budgets stay there).
//! A copy not switched yet whose control plane stopped asking for
//! [`LEASE`] is dropped (the data plane takes it back, as an abort); a
//! switched one is kept until the control plane finishes or aborts it, or
//! begins the slice's copy again, or the front closes: its old place takes
//! every write until then, so whichever place the store names holds every
//! acknowledged write.
//!
//! A job's calls carry its claim (the job, and the claim's number): the
//! front keeps the newest claim it has seen of each job and refuses the
//! calls of an older one, so an instance that lost a job (its lease ran
//! out and another instance claimed it) can never steer the job's copies
//! again. A newer claim's first call stops the older claim's copies, their
//! targets kept for the newer one to resume from; a copy of a slice is
//! never begun over a later job's copy of it.

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use svs_dataplane::{
    CloneFill, CopyCounts, CopyOptions, CopyResume, CopyStats, DataPlane, DataPlaneError,
    LatestCheckpoint, SliceCopyKind, SliceMove, VolumeIo,
};
use svs_front::calls_wire::{BeganCopy, CopyProgress, FrontAnswer, FrontCall, FrontOp, JobClaim};
use tokio_util::sync::CancellationToken;

/// How long a call waits for its work before it answers `running`: well
/// within the slice protocol's request time limit.
const ANSWER_WITHIN: Duration = Duration::from_secs(1);
/// A copy (not switched yet) nobody asked about for this long is dropped.
const LEASE: Duration = Duration::from_secs(60);
/// After a copy ends, how long the store's layout may lag the front's.
const SETTLE: Duration = Duration::from_secs(30);
/// An answer nobody came back for is forgotten after this long.
const UNCLAIMED: Duration = Duration::from_secs(120);
/// How long dropping a copy waits for its running phase to end.
const FORGET_WAIT: Duration = Duration::from_secs(10);
/// How often a fill waiting for a grant looks at its cancel token.
const GRANT_POLL: Duration = Duration::from_millis(100);
/// Most a copy paced by grants moves at once (an unpaced copy to a node
/// moves 4 MiB).
const GRANTED_CHUNK: u64 = 1 << 20;
/// Jobs whose newest claim is remembered, per node (the least recently
/// heard of is forgotten past this).
const CLAIMS_KEPT: usize = 4096;

/// A front open here, as calls find it.
struct OpenFront {
    epoch: u64,
    io: Arc<dyn VolumeIo>,
    /// The slice TLS roots it was opened with (a node a copy goes to is
    /// reached with them).
    slicetlsroots: Vec<String>,
    /// Where its I/O goes now, per copy and column: as opened, then as its
    /// copies switched (see [`FrontCalls::layout`]).
    media: Vec<Vec<String>>,
    /// Media lost at the opening whose copy a rebuild here brought back.
    revived: Vec<String>,
    /// A copy of the volume ended here this recently: the layout the store
    /// names may lag behind the front's.
    settling: Option<Instant>,
}

/// The layout of a front as its live copies left it (see
/// [`FrontCalls::layout`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontLayout {
    pub media: Vec<Vec<String>>,
    pub revived: Vec<String>,
    /// A copy runs, or just ended: the control plane's answers may name
    /// the old layout or the new one for a while.
    pub moving: bool,
}

/// The calls of this node's fronts.
pub struct FrontCalls {
    media: Arc<dyn DataPlane>,
    /// Shared with the calls' threads (a switch moves the layout).
    fronts: Arc<Mutex<HashMap<String, OpenFront>>>,
    calls: Mutex<HashMap<String, Arc<Call>>>,
    /// Shared with the calls' threads (a begin replaces a slice's copy).
    copies: Arc<Mutex<HashMap<String, Arc<CopySession>>>>,
    /// The newest claim seen of each job, and when it was last heard of
    /// (shared with the begins' threads).
    claims: Arc<Mutex<HashMap<i64, (u64, Instant)>>>,
    /// The slices (volume, copy, column) whose copy a begin is setting up
    /// now: one begin of a slice at a time.
    beginning: Arc<Mutex<HashSet<BegunSlice>>>,
}

/// One call running (or answered and not asked again yet).
struct Call {
    /// The copy whose fill it runs.
    fill: Option<Arc<CopySession>>,
    result: Mutex<Option<io::Result<FrontAnswer>>>,
    done: Condvar,
    finished: Mutex<Option<Instant>>,
}

/// What a session copies.
enum Copying {
    /// Copy `copy`, column `column` of the front's volume, from its old
    /// medium `from` to `to` (a rebuild brings a lost copy back).
    Slice {
        copy: u32,
        column: u32,
        from: String,
        to: String,
        rebuild: bool,
    },
    /// A clone's copy into volume `into` (whose front runs here too): it
    /// changes no layout.
    Clone { into: String },
}

/// A live copy between its phases.
struct CopySession {
    volume: String,
    what: Copying,
    /// The job's claim that began it (None: no job's).
    claim: Option<JobClaim>,
    /// Taken over by a newer claim of its job: dropped, its target stays
    /// for that claim's copy to resume from.
    keep: AtomicBool,
    /// The copy, while no phase runs.
    slot: Mutex<Option<Box<dyn SliceMove>>>,
    cancel: CancellationToken,
    /// Copied bytes the fill may reach; None: no bound.
    grant: Mutex<Option<u64>>,
    granted: Condvar,
    stats: CopyStats,
    latest: LatestCheckpoint,
    /// (done, total) as the fill last said.
    position: Mutex<(u64, u64)>,
    heard: Mutex<Instant>,
    switched: AtomicBool,
    /// Dropped by the control plane's side going away, or the front
    /// closing: a phase running puts the copy back no more, it drops it.
    forgotten: AtomicBool,
    /// Dropped (after being forgotten).
    dropped: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update leaves the value whole: poisoning is ignored.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A data-plane failure as the call's refusal: its kind stays (the
/// control plane tells a passing failure from a lasting one by it).
fn data_plane_error(e: DataPlaneError) -> io::Error {
    let kind = match &e {
        DataPlaneError::Cancelled => io::ErrorKind::Interrupted,
        other => other.source_kind().unwrap_or(io::ErrorKind::Other),
    };
    io::Error::new(kind, e.to_string())
}

impl FrontCalls {
    /// Calls on fronts over `media` (the fronts' data plane: a node a copy
    /// goes to is added to it).
    pub fn new(media: Arc<dyn DataPlane>) -> FrontCalls {
        FrontCalls {
            media,
            fronts: Arc::default(),
            calls: Mutex::default(),
            copies: Arc::default(),
            claims: Arc::default(),
            beginning: Arc::default(),
        }
    }

    /// The volume's front opened here at `epoch` over `media` (per copy,
    /// per column).
    pub fn opened(
        &self,
        volume: &str,
        (epoch, media): (u64, &[Vec<String>]),
        io: Arc<dyn VolumeIo>,
        roots: &[String],
    ) {
        lock(&self.fronts).insert(
            volume.to_string(),
            OpenFront {
                epoch,
                io,
                slicetlsroots: roots.to_vec(),
                media: media.to_vec(),
                revived: Vec::new(),
                settling: None,
            },
        );
    }

    /// Where the open front's I/O goes now. A live copy changes it under
    /// the open front (its switch), and the store names the new place only
    /// after: the poller takes the control plane's layout as the front's
    /// own while a copy runs or just ended, or when they agree, instead of
    /// opening the volume again (which would close its exports, and,
    /// between a switch and its commit, open it over the old place).
    pub fn layout(&self, volume: &str) -> Option<FrontLayout> {
        let copying = lock(&self.copies)
            .values()
            .any(|s| s.volume == volume && matches!(s.what, Copying::Slice { .. }));
        let fronts = lock(&self.fronts);
        let f = fronts.get(volume)?;
        Some(FrontLayout {
            media: f.media.clone(),
            revived: f.revived.clone(),
            moving: copying || f.settling.is_some_and(|at| at.elapsed() < SETTLE),
        })
    }

    /// The control plane's layout agrees with the front's: nothing is
    /// settling any more.
    pub fn settled(&self, volume: &str) {
        if let Some(f) = lock(&self.fronts).get_mut(volume) {
            f.settling = None;
        }
    }

    /// The volume's front closes: calls for it are refused and its copies
    /// (and clones into it) dropped (blocking: a fill running stops first).
    pub fn closed(&self, volume: &str) {
        lock(&self.fronts).remove(volume);
        self.forget_copies(|s| s.volume == volume || s.clones_into(volume));
    }

    /// Answers one call (see the module docs).
    fn answer(&self, volume: &str, call: FrontCall) -> io::Result<FrontAnswer> {
        self.reap();
        // A cancel only stops: an older claim's is harmless.
        if call.op != FrontOp::Cancel {
            if let Some(claim) = call.claim {
                self.admit(claim)?;
            }
        }
        match call.op {
            FrontOp::Poll { grant } => {
                let running = lock(&self.calls).get(&call.call).cloned().ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("no call '{}' runs on this node's front", call.call),
                    )
                })?;
                if let Some(session) = &running.fill {
                    session.heard_of(grant);
                }
                return self.wait(&call.call, &running);
            }
            FrontOp::Cancel => {
                let running = lock(&self.calls).get(&call.call).cloned();
                if let Some(session) = running.as_ref().and_then(|c| c.fill.as_ref()) {
                    session.cancel.cancel();
                }
                return Ok(FrontAnswer::default());
            }
            _ => {}
        }
        // The same call again (its first answer was lost): as a poll.
        if let Some(running) = lock(&self.calls).get(&call.call).cloned() {
            return self.wait(&call.call, &running);
        }
        let (io, roots) = self.front(volume, call.epoch)?;
        let id = call.call.clone();
        let (work, fill) = self.work(volume, (&id, call.claim), io, &roots, call.op)?;
        let running = Arc::new(Call {
            fill,
            result: Mutex::new(None),
            done: Condvar::new(),
            finished: Mutex::new(None),
        });
        lock(&self.calls).insert(id.clone(), Arc::clone(&running));
        let on_thread = Arc::clone(&running);
        let spawned = std::thread::Builder::new()
            .name("front-call".into())
            .spawn(move || {
                let result = work();
                *lock(&on_thread.finished) = Some(Instant::now());
                *lock(&on_thread.result) = Some(result);
                on_thread.done.notify_all();
            });
        if let Err(e) = spawned {
            lock(&self.calls).remove(&id);
            return Err(e);
        }
        self.wait(&id, &running)
    }

    /// The call's answer once it is done (forgotten then), or `running`
    /// after [`ANSWER_WITHIN`], or as soon as its fill used up its grant.
    fn wait(&self, id: &str, running: &Call) -> io::Result<FrontAnswer> {
        let deadline = Instant::now() + ANSWER_WITHIN;
        let mut result = lock(&running.result);
        while result.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || running.fill.as_ref().is_some_and(|s| s.starved()) {
                break;
            }
            result = running
                .done
                .wait_timeout(result, left.min(GRANT_POLL))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        let progress = running.fill.as_ref().map(|s| s.progress());
        match result.take() {
            None => Ok(FrontAnswer {
                running: true,
                progress,
                ..FrontAnswer::default()
            }),
            Some(done) => {
                drop(result);
                lock(&self.calls).remove(id);
                let mut answer = done?;
                answer.progress = answer.progress.or(progress);
                Ok(answer)
            }
        }
    }

    /// Admits a call made under `claim`: refused when a newer claim of the
    /// job was seen (the caller lost the job); a newer one than the newest
    /// seen stops the older claims' copies, keeping their targets.
    fn admit(&self, claim: JobClaim) -> io::Result<()> {
        let mut claims = lock(&self.claims);
        let seen = claims.get(&claim.job).map(|(epoch, _)| *epoch);
        if let Some(newer) = superseded(&claims, Some(claim)) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "job {}'s claim {} was taken over by its claim {newer}: the instance \
                     that made this call no longer runs the job",
                    claim.job, claim.epoch
                ),
            ));
        }
        claims.insert(claim.job, (claim.epoch, Instant::now()));
        if claims.len() > CLAIMS_KEPT {
            let oldest = claims
                .iter()
                .min_by_key(|(_, (_, heard))| *heard)
                .map(|(job, _)| *job);
            if let Some(job) = oldest {
                claims.remove(&job);
            }
        }
        drop(claims);
        if seen != Some(claim.epoch) {
            for session in lock(&self.copies).values() {
                if session
                    .claim
                    .is_some_and(|c| c.job == claim.job && c.epoch < claim.epoch)
                {
                    session.taken_over();
                }
            }
        }
        Ok(())
    }

    /// The volume's front here, if open at `epoch`.
    fn front(&self, volume: &str, epoch: u64) -> io::Result<(Arc<dyn VolumeIo>, Vec<String>)> {
        match lock(&self.fronts).get(volume) {
            Some(f) if f.epoch == epoch => Ok((Arc::clone(&f.io), f.slicetlsroots.clone())),
            Some(f) => Err(io::Error::new(
                io::ErrorKind::NotConnected,
                format!(
                    "the front of volume {volume} runs here at epoch {}, not {epoch}",
                    f.epoch
                ),
            )),
            None => Err(io::Error::new(
                io::ErrorKind::NotConnected,
                format!("the front of volume {volume} is not open on this node"),
            )),
        }
    }

    /// Copy `copy` for its last phase. The session stays among the copies
    /// until that phase ends ([`CopySession::ended`]): a begin of the same
    /// slice meanwhile waits for it (the copy holds the slice's claim).
    fn end_session(&self, copy: &str) -> io::Result<(Arc<CopySession>, Box<dyn SliceMove>)> {
        let session = self.session(copy)?;
        let moving = session.take()?;
        session.forgotten.store(true, Ordering::SeqCst);
        Ok((session, moving))
    }

    fn session(&self, copy: &str) -> io::Result<Arc<CopySession>> {
        lock(&self.copies).get(copy).cloned().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no copy '{copy}' on this node's front (it ended, or its front closed)"),
            )
        })
    }

    /// What a call does (run on its own thread), and the copy it fills.
    #[allow(clippy::type_complexity)]
    fn work(
        &self,
        volume: &str,
        (id, claim): (&str, Option<JobClaim>),
        io: Arc<dyn VolumeIo>,
        roots: &[String],
        op: FrontOp,
    ) -> io::Result<(
        Box<dyn FnOnce() -> io::Result<FrontAnswer> + Send>,
        Option<Arc<CopySession>>,
    )> {
        let none = || FrontAnswer::default();
        Ok(match op {
            FrontOp::Snapshot { id } => (Box::new(move || io.snapshot(id).map(|()| none())), None),
            FrontOp::DeleteSnapshot { id } => (
                Box::new(move || io.delete_snapshot(id).map(|()| none())),
                None,
            ),
            FrontOp::Rollback { id } => (Box::new(move || io.rollback(id).map(|()| none())), None),
            FrontOp::BeginCopy {
                rebuild,
                copy,
                column,
                medium,
                resumefrom,
                node,
            } => {
                let (media, fronts, copies, claims) = (
                    Arc::clone(&self.media),
                    Arc::clone(&self.fronts),
                    Arc::clone(&self.copies),
                    Arc::clone(&self.claims),
                );
                let beginning = Arc::clone(&self.beginning);
                let (volume, id, roots) = (volume.to_string(), id.to_string(), roots.to_vec());
                // On the call's thread: reaching a node, and a running
                // phase of an earlier copy ending, may take longer than a
                // request may.
                let work = move || {
                    // Two begins of a slice at once (an older claim's,
                    // answered late, and a newer one's) would each set up
                    // the target, one over the other's.
                    let Some(_beginning) =
                        BeginGuard::enter(&beginning, (volume.clone(), copy, column))
                    else {
                        return Err(io::Error::new(
                            io::ErrorKind::Interrupted,
                            "another begin of this slice's copy is under way on this node's \
                             front; try again",
                        ));
                    };
                    if let Some(node) = node {
                        // The node a copy goes to (asked for its media).
                        super::add_nodes(media.as_ref(), &volume, &[node], &roots);
                    }
                    let this_slice = |s: &CopySession| {
                        s.volume == volume
                            && matches!(s.what, Copying::Slice { copy: c, column: k, .. }
                                if c == copy && k == column)
                    };
                    // A later job's copy of the slice is never replaced by
                    // an earlier job's (a movement is begun only once the
                    // one before it on the volume ended).
                    if let Some(later) = later_job(&copies, claim, this_slice) {
                        return Err(io::Error::new(
                            io::ErrorKind::PermissionDenied,
                            format!(
                                "job {later} copies this slice on this node's front: the \
                                 instance that made this call no longer runs its job"
                            ),
                        ));
                    }
                    // Its control plane's earlier copy of the slice (left
                    // by a restart, or by another instance that lost the
                    // job: its target stays for this one to resume from)
                    // goes first: one copy of a slice at a time. One
                    // whose running phase has not ended yet is kept, and
                    // this begin refused as transient, so that no two
                    // copies ever write the slice's target at once.
                    let mut stopping = Vec::new();
                    for old in take_copies(&copies, this_slice) {
                        old.forget();
                        if !old.dropped.load(Ordering::SeqCst) {
                            stopping.push(old);
                        }
                    }
                    if !stopping.is_empty() {
                        let mut sessions = lock(&copies);
                        for (n, old) in stopping.into_iter().enumerate() {
                            sessions.insert(format!("{id}-stopping-{n}"), old);
                        }
                        return Err(io::Error::new(
                            io::ErrorKind::Interrupted,
                            "an earlier copy of this slice is still stopping on this node's \
                             front; try again",
                        ));
                    }
                    let kind = if rebuild {
                        SliceCopyKind::Rebuild
                    } else {
                        SliceCopyKind::Move
                    };
                    let moving = io
                        .begin_slice_copy(kind, copy, column, &medium, resumefrom)
                        .map_err(data_plane_error)?;
                    let from = lock(&fronts)
                        .get(&volume)
                        .and_then(|f| f.media.get(copy as usize)?.get(column as usize).cloned())
                        .unwrap_or_default();
                    let what = Copying::Slice {
                        copy,
                        column,
                        from,
                        to: medium,
                        rebuild,
                    };
                    // A newer claim of the job heard of while this one set
                    // its copy up: this copy goes (its target with it, as it
                    // may be fresh while the store's checkpoint is older),
                    // and the newer claim begins again from what is there.
                    let claims = lock(&claims);
                    if let Some(newer) = superseded(&claims, claim) {
                        drop(claims);
                        drop(moving);
                        return Err(io::Error::new(
                            io::ErrorKind::PermissionDenied,
                            format!(
                                "the job's claim {newer} took over while this copy was begun: \
                                 the instance that made this call no longer runs the job"
                            ),
                        ));
                    }
                    let session = CopySession::new(&volume, (what, claim), moving);
                    // Inserted under the claims' lock: a newer claim
                    // admitted after this finds the session to take over.
                    let answer = begun(&copies, id, session);
                    drop(claims);
                    Ok(answer)
                };
                (Box::new(work), None)
            }
            FrontOp::BeginClone {
                snapshot,
                size,
                target,
                targetepoch,
            } => {
                // The new volume's front is opened here for the clone.
                let (into, _) = self.front(&target, targetepoch)?;
                let copies = Arc::clone(&self.copies);
                let (volume, id) = (volume.to_string(), id.to_string());
                let work = move || {
                    // An earlier run of the clone (its job restarted) goes
                    // first.
                    for old in take_copies(&copies, |s| s.clones_into(&target)) {
                        old.forget();
                    }
                    let view = io.snapshot_view(snapshot, size)?;
                    let moving = Box::new(CloneFill::new(view, into, size));
                    let what = Copying::Clone { into: target };
                    let session = CopySession::new(&volume, (what, claim), moving);
                    Ok(begun(&copies, id, session))
                };
                (Box::new(work), None)
            }
            FrontOp::Fill {
                copy,
                checkpointbytes,
                grant,
            } => {
                let session = self.session(&copy)?;
                session.heard_of(grant);
                let mut moving = session.take()?;
                let on_thread = Arc::clone(&session);
                let work = move || {
                    let s = &on_thread;
                    let options = CopyOptions {
                        cancel: s.cancel.clone(),
                        resume: CopyResume::publishing_to(
                            moving.starts_at(),
                            checkpointbytes,
                            &s.latest,
                        ),
                        stats: s.stats.clone(),
                        // Paced by grants: never far past one.
                        max_chunk: grant.map(|_| GRANTED_CHUNK),
                        ..CopyOptions::default()
                    };
                    let filled =
                        moving.fill(&options, &mut |done, total| s.progressed(done, total));
                    s.put_back(moving);
                    filled
                        .map(|()| FrontAnswer::default())
                        .map_err(data_plane_error)
                };
                (Box::new(work), Some(session))
            }
            FrontOp::Switch { copy } => {
                let session = self.session(&copy)?;
                let mut moving = session.take()?;
                let fronts = Arc::clone(&self.fronts);
                let work = move || {
                    let switched = moving.switch();
                    if switched.is_ok() {
                        session.switched.store(true, Ordering::SeqCst);
                        session.placed(&fronts, true);
                    }
                    session.put_back(moving);
                    switched.map(|()| none()).map_err(data_plane_error)
                };
                (Box::new(work), None)
            }
            FrontOp::Finish { copy } => {
                let (session, moving) = self.end_session(&copy)?;
                let (fronts, copies) = (Arc::clone(&self.fronts), Arc::clone(&self.copies));
                let work = move || {
                    let finished = moving.finish();
                    // The store names the new place by now; the answers
                    // catch up.
                    session.placed(&fronts, true);
                    session.ended(&copies, &copy);
                    finished.map(|()| none()).map_err(data_plane_error)
                };
                (Box::new(work), None)
            }
            FrontOp::Abort { copy } => {
                let (session, moving) = self.end_session(&copy)?;
                let (fronts, copies) = (Arc::clone(&self.fronts), Arc::clone(&self.copies));
                let work = move || {
                    let aborted = moving.abort();
                    if session.switched.load(Ordering::SeqCst) {
                        session.placed(&fronts, false);
                    }
                    session.ended(&copies, &copy);
                    aborted.map(|()| none()).map_err(data_plane_error)
                };
                (Box::new(work), None)
            }
            FrontOp::Poll { .. } | FrontOp::Cancel => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a poll or cancel of no running call",
                ))
            }
        })
    }

    /// Drops the copies `which` selects (blocking): a fill stops, a copy
    /// not switched goes back to its old place.
    fn forget_copies(&self, which: impl Fn(&CopySession) -> bool) {
        for session in take_copies(&self.copies, which) {
            session.forget();
        }
    }

    /// Forgets answers nobody came back for, and copies (not switched yet)
    /// nobody asked about within the lease.
    fn reap(&self) {
        lock(&self.calls)
            .retain(|_, c| lock(&c.finished).is_none_or(|at| at.elapsed() < UNCLAIMED));
        let stale = |s: &CopySession| {
            !s.switched.load(Ordering::SeqCst) && lock(&s.heard).elapsed() > LEASE
        };
        let gone = take_copies(&self.copies, stale);
        if !gone.is_empty() {
            tracing::warn!("a slice copy's control plane stopped asking about it: it is dropped");
            // Off the request: a running phase may take a while to end.
            let dropping = std::thread::Builder::new()
                .name("front-copy-drop".into())
                .spawn(move || gone.iter().for_each(|s| s.forget()));
            if let Err(e) = dropping {
                tracing::warn!(error = %e, "cannot drop the copies on a thread of their own");
            }
        }
    }
}

/// A slice of a volume: (volume, copy, column).
type BegunSlice = (String, u32, u32);

/// The newer claim of `claim`'s job seen, if any.
fn superseded(claims: &HashMap<i64, (u64, Instant)>, claim: Option<JobClaim>) -> Option<u64> {
    let claim = claim?;
    claims
        .get(&claim.job)
        .map(|(epoch, _)| *epoch)
        .filter(|&seen| seen > claim.epoch)
}

/// A slice's begin under way: entered once at a time, left on drop.
struct BeginGuard {
    beginning: Arc<Mutex<HashSet<BegunSlice>>>,
    slice: BegunSlice,
}

impl BeginGuard {
    fn enter(beginning: &Arc<Mutex<HashSet<BegunSlice>>>, slice: BegunSlice) -> Option<BeginGuard> {
        lock(beginning).insert(slice.clone()).then(|| BeginGuard {
            beginning: Arc::clone(beginning),
            slice,
        })
    }
}

impl Drop for BeginGuard {
    fn drop(&mut self) {
        lock(&self.beginning).remove(&self.slice);
    }
}

/// Takes the copies `which` selects out of the sessions (for the caller to
/// forget).
fn take_copies(
    copies: &Mutex<HashMap<String, Arc<CopySession>>>,
    which: impl Fn(&CopySession) -> bool,
) -> Vec<Arc<CopySession>> {
    let mut copies = lock(copies);
    let ids: Vec<String> = copies
        .iter()
        .filter(|(_, s)| which(s))
        .map(|(id, _)| id.clone())
        .collect();
    ids.iter().filter_map(|id| copies.remove(id)).collect()
}

/// The job of a copy `which` selects that is later than `claim`'s job.
fn later_job(
    copies: &Mutex<HashMap<String, Arc<CopySession>>>,
    claim: Option<JobClaim>,
    which: impl Fn(&CopySession) -> bool,
) -> Option<i64> {
    let job = claim?.job;
    lock(copies)
        .values()
        .filter(|s| which(s))
        .filter_map(|s| s.claim.map(|c| c.job))
        .find(|&other| other > job)
}

/// Keeps a begun copy as a session under its begin call's id; the begin's
/// answer.
fn begun(
    copies: &Mutex<HashMap<String, Arc<CopySession>>>,
    id: String,
    session: CopySession,
) -> FrontAnswer {
    let began = lock(&session.slot).as_ref().map(|moving| BeganCopy {
        startsat: moving.starts_at(),
        inplace: moving.in_place(),
    });
    lock(copies).insert(id, Arc::new(session));
    FrontAnswer {
        began,
        ..FrontAnswer::default()
    }
}

impl svs_sliceproto::FrontControl for FrontCalls {
    fn call(&self, volume: &str, request: &[u8]) -> io::Result<Vec<u8>> {
        let call: FrontCall = serde_json::from_slice(request).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not a front call: {e}"),
            )
        })?;
        let answer = self.answer(volume, call)?;
        serde_json::to_vec(&answer).map_err(io::Error::other)
    }
}

impl CopySession {
    fn new(
        volume: &str,
        (what, claim): (Copying, Option<JobClaim>),
        moving: Box<dyn SliceMove>,
    ) -> CopySession {
        CopySession {
            volume: volume.to_string(),
            what,
            claim,
            keep: AtomicBool::new(false),
            slot: Mutex::new(Some(moving)),
            cancel: CancellationToken::new(),
            grant: Mutex::new(None),
            granted: Condvar::new(),
            stats: CopyStats::default(),
            latest: LatestCheckpoint::default(),
            position: Mutex::new((0, 0)),
            heard: Mutex::new(Instant::now()),
            switched: AtomicBool::new(false),
            forgotten: AtomicBool::new(false),
            dropped: AtomicBool::new(false),
        }
    }

    /// It is a clone's copy into volume `into`.
    fn clones_into(&self, into: &str) -> bool {
        matches!(&self.what, Copying::Clone { into: i } if i == into)
    }

    /// A slice copy's I/O now goes to its target (`at_target`: a switch,
    /// a finish), or again to its old place (an abort after a switch): the
    /// front's layout says so. A clone's copy changes no layout.
    fn placed(&self, fronts: &Mutex<HashMap<String, OpenFront>>, at_target: bool) {
        let Copying::Slice {
            copy,
            column,
            from,
            to,
            rebuild,
        } = &self.what
        else {
            return;
        };
        let (place, revived) = if at_target {
            (to, *rebuild)
        } else {
            (from, false)
        };
        let mut fronts = lock(fronts);
        let Some(f) = fronts.get_mut(&self.volume) else {
            return;
        };
        let at = f
            .media
            .get_mut(*copy as usize)
            .and_then(|c| c.get_mut(*column as usize));
        if let Some(slot) = at {
            *slot = place.clone();
        }
        if revived && !f.revived.contains(place) {
            f.revived.push(place.clone());
        }
        f.settling = Some(Instant::now());
    }

    /// The copy, for a phase to run; a phase still running (a fill just
    /// cancelled) is waited for, briefly.
    fn take(&self) -> io::Result<Box<dyn SliceMove>> {
        *lock(&self.heard) = Instant::now();
        let until = Instant::now() + ANSWER_WITHIN;
        loop {
            if let Some(moving) = lock(&self.slot).take() {
                return Ok(moving);
            }
            if Instant::now() >= until {
                return Err(io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    "a phase of the copy is still running",
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A phase ended: the copy waits for the next (or is dropped, when it
    /// was forgotten meanwhile).
    fn put_back(&self, moving: Box<dyn SliceMove>) {
        if self.forgotten.load(Ordering::SeqCst) {
            self.drop_copy(moving);
            return;
        }
        *lock(&self.slot) = Some(moving);
        // Forgotten between the check and the put: dropped after all.
        if self.forgotten.load(Ordering::SeqCst) {
            if let Some(moving) = lock(&self.slot).take() {
                self.drop_copy(moving);
            }
        }
    }

    /// Its last phase (finish, abort) ended and let the copy go: it leaves
    /// the copies (unless a begin took it out already).
    fn ended(self: &Arc<Self>, copies: &Mutex<HashMap<String, Arc<CopySession>>>, id: &str) {
        self.dropped.store(true, Ordering::SeqCst);
        let mut copies = lock(copies);
        if copies.get(id).is_some_and(|s| Arc::ptr_eq(s, self)) {
            copies.remove(id);
        }
    }

    /// Drops the copy (its target kept when a newer claim took it over).
    fn drop_copy(&self, mut moving: Box<dyn SliceMove>) {
        if self.keep.load(Ordering::SeqCst) {
            moving.keep_target();
        }
        drop(moving);
        self.dropped.store(true, Ordering::SeqCst);
    }

    /// A newer claim of its job was heard of: a fill running stops, and
    /// the copy's target stays when it is dropped (the newer claim's copy
    /// of the slice drops it, and resumes from its checkpoint).
    fn taken_over(&self) {
        self.keep.store(true, Ordering::SeqCst);
        self.stop_fill();
    }

    /// A fill running (or waiting for a grant) stops.
    fn stop_fill(&self) {
        self.cancel.cancel();
        self.granted.notify_all();
    }

    /// The control plane asked about the copy; its fill may reach `grant`.
    fn heard_of(&self, grant: Option<u64>) {
        *lock(&self.heard) = Instant::now();
        *lock(&self.grant) = grant;
        self.granted.notify_all();
    }

    /// The fill's progress callback: records where it is, then waits while
    /// it copied what it was granted (until more is, or it is cancelled).
    fn progressed(&self, done: u64, total: u64) {
        *lock(&self.position) = (done, total);
        let mut grant = lock(&self.grant);
        while grant.is_some_and(|g| self.stats.copied() >= g) && !self.cancel.is_cancelled() {
            if lock(&self.heard).elapsed() > LEASE {
                tracing::warn!(
                    volume = self.volume,
                    "a slice copy's control plane stopped granting it bytes: it stops"
                );
                self.cancel.cancel();
                break;
            }
            grant = self
                .granted
                .wait_timeout(grant, GRANT_POLL)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// The fill copied what it was granted.
    fn starved(&self) -> bool {
        lock(&self.grant).is_some_and(|g| self.stats.copied() >= g)
    }

    fn progress(&self) -> CopyProgress {
        // The checkpoint is the one published durable, not the counter.
        let counts = CopyCounts {
            checkpoint: self.latest.get(),
            ..self.stats.counts()
        };
        CopyProgress::of(*lock(&self.position), counts)
    }

    /// Stops the copy: a fill running ends (cancelled) and drops it; one
    /// between phases is dropped now (blocking).
    fn forget(&self) {
        self.forgotten.store(true, Ordering::SeqCst);
        self.stop_fill();
        // A phase running drops it as it ends (a cancelled fill soon): the
        // slice is free for another copy once it did.
        let until = Instant::now() + FORGET_WAIT;
        loop {
            let moving = lock(&self.slot).take();
            if let Some(moving) = moving {
                self.drop_copy(moving);
            }
            if self.dropped.load(Ordering::SeqCst) || Instant::now() >= until {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
