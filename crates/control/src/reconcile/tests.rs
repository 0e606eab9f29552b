//! Unit tests of the pollers (on a paused clock) and of each reconciler
//! (against a real SQLite store and local media in a temporary directory).

use super::*;
use crate::front_layout::ExportRegistry;
use crate::jobs::VolumeActivity;
use crate::testing::Fixture;
use crate::workers::{WorkerBoard, WorkerState};
use async_trait::async_trait;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use svs_common::clock::{Clock, ManualClock};
use svs_dataplane::{DataPlane, SliceKey};
use svs_domain::{AttachmentArgs, JobSpec, ResizeVolumeArgs, VolumeState, GIB};
use svs_store::{JobEnd, NewAttachment};
use tokio_util::sync::CancellationToken;

const VOLUME: &str = "vol-1";
const EXPORT: &str = "export-1";

/// A 1 GiB volume whose one slice is on m1 (its file created), attached
/// to node n1, and the reconcilers' surroundings.
struct Attached {
    base: Fixture,
    exports: Arc<ExportRegistry>,
    activity: Arc<VolumeActivity>,
}

fn done() -> JobEnd {
    JobEnd::done("done".into(), 3)
}

impl Attached {
    async fn new() -> Attached {
        let base = Fixture::new().await;
        let job = base.create_volume(VOLUME, "v", 1).await;
        base.store
            .place_slices(VOLUME, &svs_store::testing::one_slice("m1", 1))
            .await
            .expect("slices");
        base.local
            .create_slice("m1", &slice(), GIB)
            .expect("slice file");
        base.store.finish_job(job, &done()).await.expect("done");
        let attach = JobSpec::AttachmentCreate(AttachmentArgs {
            node: "n1".into(),
            readonly: false,
            mountpoint: String::new(),
            snapshot: "top".into(),
        });
        let job = base
            .store
            .create_attachment(
                &NewAttachment {
                    volume_id: VOLUME.into(),
                    snapshot: "top".into(),
                    node: "n1".into(),
                    tenant_id: base.user.tenant_id,
                    readonly: false,
                    mountpoint: String::new(),
                    export_name: EXPORT.into(),
                    now_ms: 1,
                    manager: svs_domain::AttachmentManager::Agent,
                },
                &base.new_job(attach, VOLUME),
            )
            .await
            .expect("attachment");
        base.store
            .set_attachment_state(VOLUME, "top", "n1", "Attached")
            .await
            .expect("attached");
        base.store.finish_job(job, &done()).await.expect("done");
        Attached {
            exports: Arc::new(ExportRegistry::new(base.media())),
            activity: Arc::new(VolumeActivity::default()),
            base,
        }
    }

    fn exports_reconciler(&self) -> ExportsReconciler {
        ExportsReconciler {
            store: Arc::clone(&self.base.store),
            exports: Arc::clone(&self.exports),
            node_media: Arc::new(crate::node_media::NodeMediaSync::new(
                Arc::clone(&self.base.store),
                self.base.media(),
                Arc::new(svs_common::slice_tls::SliceTls::off()),
            )),
            activity: Arc::clone(&self.activity),
            period: Duration::from_secs(60),
        }
    }

    fn orphaned_copies(&self) -> OrphanedCopies {
        OrphanedCopies {
            store: Arc::clone(&self.base.store),
            media: self.base.media(),
            activity: Arc::clone(&self.activity),
            period: Duration::from_secs(60),
        }
    }

    fn slice_file(&self, medium: &str) -> PathBuf {
        self.base.slice_file(medium, VOLUME)
    }
}

fn slice() -> SliceKey {
    SliceKey {
        volume_id: VOLUME.into(),
        copy: 0,
        column: 0,
    }
}

fn partial(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

fn plant(path: &Path) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
    std::fs::write(path, b"left behind").expect("planted");
}

#[tokio::test]
async fn attached_volumes_are_exported_once_and_a_second_pass_changes_nothing() {
    let f = Attached::new().await;
    let reconciler = f.exports_reconciler();
    assert!(!f.exports.is_exported(EXPORT));
    assert_eq!(reconciler.reconcile().await.expect("pass"), 1);
    assert!(f.exports.is_exported(EXPORT));
    assert!(f.exports.volume_io(VOLUME).is_some());
    assert_eq!(reconciler.reconcile().await.expect("pass"), 0);
}

#[tokio::test]
async fn exports_of_a_volume_a_job_works_on_are_left_to_the_job() {
    let f = Attached::new().await;
    let reconciler = f.exports_reconciler();
    let busy = f.activity.job_started(VOLUME).await;
    assert_eq!(reconciler.reconcile().await.expect("pass"), 0);
    assert!(!f.exports.is_exported(EXPORT));
    drop(busy);
    // A detach that ended meanwhile: nothing to export any more.
    f.base
        .store
        .delete_attachment(VOLUME, "top", "n1")
        .await
        .expect("detached");
    assert_eq!(reconciler.reconcile().await.expect("pass"), 0);
    assert!(!f.exports.is_exported(EXPORT));
}

#[tokio::test]
async fn orphaned_copies_go_and_the_placed_slice_stays() {
    let f = Attached::new().await;
    let placed = f.slice_file("m1");
    let stale = f.slice_file("m2");
    plant(&stale);
    plant(&partial(&stale));
    plant(&partial(&placed));
    assert_eq!(f.orphaned_copies().reconcile().await.expect("pass"), 3);
    assert!(placed.exists());
    for gone in [stale.clone(), partial(&stale), partial(&placed)] {
        assert!(!gone.exists(), "{} is left", gone.display());
    }
    assert_eq!(f.orphaned_copies().reconcile().await.expect("pass"), 0);
}

#[tokio::test]
async fn copies_of_a_volume_with_a_job_running_or_unfinished_are_left_alone() {
    let f = Attached::new().await;
    let target = partial(&f.slice_file("m2"));
    plant(&target);
    // A job running here holds the volume.
    let busy = f.activity.job_started(VOLUME).await;
    assert_eq!(f.orphaned_copies().reconcile().await.expect("pass"), 0);
    assert!(target.exists());
    drop(busy);
    // A job the store has not finished (paused by a stop, not resumed yet).
    let resize = JobSpec::VolumeModifyExtend(ResizeVolumeArgs {
        size: 2,
        allow_data_movement: true,
        from_size: 1,
        plan: None,
    });
    let job = f
        .base
        .store
        .start_volume_job(
            VOLUME,
            VolumeState::Resizing,
            &f.base.new_job(resize, VOLUME),
        )
        .await
        .expect("job");
    assert_eq!(f.orphaned_copies().reconcile().await.expect("pass"), 0);
    assert!(target.exists());
    f.base
        .store
        .finish_job(job, &JobEnd::error("failed".into(), 4))
        .await
        .expect("ended");
    assert_eq!(f.orphaned_copies().reconcile().await.expect("pass"), 1);
    assert!(!target.exists());
}

/// Fails every other pass.
struct Flaky {
    passes: AtomicUsize,
}

#[async_trait]
impl Reconciler for Flaky {
    fn name(&self) -> &'static str {
        "flaky"
    }

    fn period(&self) -> Duration {
        Duration::from_secs(30)
    }

    async fn reconcile(&self) -> Result<usize, ReconcileError> {
        match self.passes.fetch_add(1, Ordering::SeqCst) % 2 {
            0 => Err(ReconcileError::Incomplete(1)),
            _ => Ok(1),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_reconciler_polls_on_its_timer_keeps_going_after_errors_and_stops_with_the_token() {
    let board = WorkerBoard::default();
    let flaky = Arc::new(Flaky {
        passes: AtomicUsize::new(0),
    });
    // No leadership: a process alone runs every reconciler.
    let reconcilers = Reconcilers::new(
        &board,
        Arc::new(ManualClock::new(1_000)),
        vec![(Scope::Leader, flaky.clone())],
    );
    reconcilers.run_once().await;
    let status = &board.statuses()[0];
    assert_eq!((status.errors, status.consecutive_errors), (1, 1));
    assert_eq!(status.state, WorkerState::Idle);
    assert_eq!(status.period_secs, Some(30));
    assert_eq!(
        status.last_error.as_deref(),
        Some("1 repair(s) failed; see the service log")
    );

    let shutdown = CancellationToken::new();
    let handle = reconcilers.spawn(shutdown.clone());
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert_eq!(
        flaky.passes.load(Ordering::SeqCst),
        1,
        "not before its period"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(flaky.passes.load(Ordering::SeqCst), 2);
    assert_eq!(board.statuses()[0].consecutive_errors, 0);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(flaky.passes.load(Ordering::SeqCst), 3);
    assert_eq!(board.statuses()[0].errors, 2);

    shutdown.cancel();
    handle.await.expect("pollers end");
    assert_eq!(board.statuses()[0].state, WorkerState::Done);
}

/// The snapshot-space reconciler records what a snapshot holds once writes
/// grew it, and sets the budget that makes a save with no room fail.
#[tokio::test]
async fn snapshot_space_is_measured_recorded_and_budgets_follow_the_store() {
    use svs_domain::{Consistency, SnapshotArgs};
    use svs_store::NewSnapshot;
    let a = Attached::new().await;
    let store = &a.base.store;
    let media = a.base.media();
    let reconciler = SnapshotSpace {
        store: Arc::clone(store),
        media: Arc::clone(&media),
        period: Duration::from_secs(10),
    };
    // m1 is exactly as large as the volume's slice: nothing left for
    // snapshot data.
    let sized = |m1: u64| {
        ["m1", "m2"].map(|id| {
            svs_store::testing::medium(
                id,
                if id == "m1" { m1 } else { 20 },
                a.base.root.join(id).display().to_string(),
            )
        })
    };
    store.sync_media(&sized(1)).await.expect("m1 at 1 GiB");
    let spec = JobSpec::SnapshotCreate(SnapshotArgs {
        name: "s1".into(),
        snapshot_id: "snap-1".into(),
    });
    let job = store
        .create_snapshot(
            &NewSnapshot {
                id: "snap-1".into(),
                volume_id: VOLUME.into(),
                tenant_id: a.base.user.tenant_id,
                name: "s1".into(),
                consistency: Consistency::Crash,
                volume_size: 1,
                attributes: Default::default(),
                now_ms: 2,
            },
            &a.base.new_job(spec, VOLUME),
        )
        .await
        .expect("snapshot row");
    store.finish_job(job, &done()).await.expect("done");
    let seq = store.volume_snapshots(VOLUME).await.expect("snapshots")[0].seq;
    let io = media
        .open_volume(&svs_dataplane::VolumeLayout {
            volume_id: VOLUME.into(),
            size: GIB,
            media: vec![vec!["m1".into()]],
            epoch: 0,
        })
        .expect("open");
    io.write(0, &[7u8; 256 * 1024], false).expect("data");
    io.snapshot(seq).expect("snapshot");

    assert_eq!(reconciler.reconcile().await.expect("pass"), 2);
    let held = |store: Arc<dyn svs_store::Store>| async move {
        let medium = store.media_usage().await.expect("usage")[0].snapshot_bytes;
        let snapshot = store.volume_snapshots(VOLUME).await.expect("snapshots")[0].used_bytes;
        (medium, snapshot)
    };
    let (medium, snapshot) = held(Arc::clone(store)).await;
    assert!(medium > 0 && medium < 65536, "an empty map: {medium}");
    assert_eq!(snapshot, medium);
    assert_eq!(reconciler.reconcile().await.expect("pass"), 0, "no change");
    // The budget is 0 bytes: the first overwrite of saved data fails whole.
    let err = io.write(0, &[9u8; 4096], false).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::StorageFull, "{err}");
    let mut back = vec![0u8; 4096];
    io.read(0, &mut back).expect("read");
    assert_eq!(back, vec![7u8; 4096]);

    // A larger medium: room for the save; the next pass records its size.
    store.sync_media(&sized(2)).await.expect("m1 at 2 GiB");
    reconciler.reconcile().await.expect("pass");
    io.write(0, &[9u8; 4096], false).expect("room now");
    // The save is made (on disk, to be measured) at the flush.
    io.flush().expect("flush");
    assert_eq!(reconciler.reconcile().await.expect("pass"), 2);
    let (medium, snapshot) = held(Arc::clone(store)).await;
    assert!(medium >= 65536, "one saved chunk: {medium}");
    assert_eq!(snapshot, medium);
    let free = store.media_usage().await.expect("usage")[0].free();
    assert_eq!(
        free, 0,
        "2 GiB less the slice and 1 GiB (rounded up) of snapshot"
    );
}

/// Counts its passes.
#[derive(Default)]
struct Counting {
    passes: AtomicUsize,
}

impl Counting {
    fn passes(&self) -> usize {
        self.passes.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Reconciler for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }

    fn period(&self) -> Duration {
        Duration::from_millis(20)
    }

    async fn reconcile(&self) -> Result<usize, ReconcileError> {
        self.passes.fetch_add(1, Ordering::SeqCst);
        Ok(0)
    }
}

/// An instance's leadership over `store`, with its own board; not the only
/// instance (the lease decides), its lease `ttl` long.
fn instance(
    store: Arc<dyn svs_store::Store>,
    clock: Arc<dyn Clock>,
    owner: &str,
    ttl: Duration,
) -> (WorkerBoard, Arc<Leadership>) {
    let board = WorkerBoard::default();
    let leadership = Leadership::new(
        store,
        clock,
        &board,
        LeadershipSettings {
            owner: owner.into(),
            timing: LeaseTiming { ttl },
            sole: false,
        },
    );
    (board, leadership)
}

/// The note on the board's `name` worker.
fn note(board: &WorkerBoard, name: &str) -> String {
    board
        .statuses()
        .into_iter()
        .find(|s| s.name == name)
        .and_then(|s| s.note)
        .unwrap_or_default()
}

/// Two instances on one store: one leads, the other takes over once the
/// leader gives the lease up, and a third once a leader stops renewing.
async fn one_of_two_instances_leads(
    first: Arc<dyn svs_store::Store>,
    second: Arc<dyn svs_store::Store>,
) {
    let clock = Arc::new(ManualClock::new(1_000_000));
    // Long enough that a store's answer on a loaded machine comes within
    // the trust window (three quarters of it) of the grant it asked for.
    let ttl = Duration::from_millis(2_000);
    let (board_a, a) = instance(Arc::clone(&first), clock.clone(), "instance-a", ttl);
    let (board_b, b) = instance(second, clock.clone(), "instance-b", ttl);
    assert!(a.renew().await, "a free lease");
    assert!(!b.renew().await, "a leads");
    assert!(a.is_leader() && !b.is_leader());
    let first_epoch = a.epoch().expect("a's epoch");
    let a_note = note(&board_a, LEADER_WORKER);
    assert!(
        a_note.starts_with("leader: this instance (instance-a)"),
        "{a_note}"
    );
    let b_note = note(&board_b, LEADER_WORKER);
    assert!(b_note.starts_with("follower: another instance"), "{b_note}");

    // a stops cleanly: b takes over at its next renewal.
    a.release().await;
    assert!(!a.is_leader());
    assert!(b.renew().await, "released");
    let second_epoch = b.epoch().expect("b's epoch");
    assert!(second_epoch > first_epoch, "{second_epoch} > {first_epoch}");

    // b stops renewing (paused, cut off): it stops leading a margin before
    // its lease runs out in the store, and c (a restarted a: another
    // owner) takes over once it has.
    let (_board_c, c) = instance(first, clock.clone(), "instance-c", ttl);
    assert!(!c.renew().await, "b's lease runs");
    tokio::time::sleep(LeaseTiming { ttl }.trusted_for()).await;
    assert!(!b.is_leader(), "trusted for ttl - margin only");
    assert!(!c.renew().await, "not run out in the store yet");
    clock.advance(ttl + Duration::from_millis(1));
    assert!(c.renew().await, "b's lease ran out");
    assert!(c.epoch().expect("c's epoch") > second_epoch);
    assert!(!b.renew().await, "c holds it now");
    assert!(!b.is_leader());
}

#[tokio::test]
async fn one_of_two_instances_leads_on_sqlite() {
    let (_dir, first, second) = svs_store::testing::temp_sqlite_twice().await;
    one_of_two_instances_leads(Arc::new(first), Arc::new(second)).await;
}

#[tokio::test]
async fn one_of_two_instances_leads_on_postgresql() {
    use svs_store::{PgSettings, SqlStore};
    let db = svs_store::test_postgres::TestDatabase::new().await;
    let open = || async {
        SqlStore::open_postgres(&db.url, &PgSettings::default())
            .await
            .expect("store opens")
    };
    let (first, second) = (open().await, open().await);
    one_of_two_instances_leads(Arc::new(first), Arc::new(second)).await;
}

/// A follower runs its own reconcilers and skips the leader's, until the
/// leader stops: its pollers then run them too, and at its own stop it
/// gives the lease up at once.
#[tokio::test]
async fn a_follower_skips_the_leaders_reconcilers_until_the_leader_stops() {
    let (_dir, sqlite) = svs_store::testing::temp_sqlite().await;
    let store: Arc<dyn svs_store::Store> = Arc::new(sqlite);
    let clock: Arc<dyn Clock> = Arc::new(svs_common::clock::SystemClock);
    let ttl = Duration::from_secs(3);
    let (_board_a, a) = instance(Arc::clone(&store), Arc::clone(&clock), "instance-a", ttl);
    assert!(a.renew().await);

    let (board, b) = instance(Arc::clone(&store), Arc::clone(&clock), "instance-b", ttl);
    let (shared, own) = (Arc::new(Counting::default()), Arc::new(Counting::default()));
    let reconcilers = Reconcilers::new(
        &board,
        Arc::clone(&clock),
        vec![
            (Scope::Leader, shared.clone() as Arc<dyn Reconciler>),
            (Scope::EveryInstance, own.clone() as Arc<dyn Reconciler>),
        ],
    )
    .led_by(Arc::clone(&b));
    reconcilers.run_once().await;
    assert!(!b.is_leader());
    assert_eq!((shared.passes(), own.passes()), (0, 1));
    let skipped = &board.statuses()[1];
    assert_eq!(skipped.state, WorkerState::Idle);
    assert_eq!(
        skipped.note.as_deref(),
        Some("skipped: another instance leads the reconcilers")
    );

    let shutdown = CancellationToken::new();
    let handle = reconcilers.spawn(shutdown.clone());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(shared.passes(), 0, "a still leads");
    assert!(own.passes() > 1);
    a.release().await;
    // b's next renewal (every second) takes the lease; its poller runs.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while shared.passes() == 0 {
        assert!(tokio::time::Instant::now() < deadline, "b never led");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(b.is_leader());
    assert_eq!(board.statuses()[1].note, None, "runs here now");

    shutdown.cancel();
    handle.await.expect("pollers end");
    assert!(!b.is_leader());
    let statuses = board.statuses();
    assert_eq!(statuses[0].name, LEADER_WORKER);
    assert_eq!(statuses[0].state, WorkerState::Done);
    // Given up at b's stop: a new instance takes it at once.
    let (_board_c, c) = instance(store, clock, "instance-c", ttl);
    assert!(c.renew().await);
}

/// On SQLite the process is its store's only instance: it leads at once,
/// even while the lease of a process that crashed before it runs.
#[tokio::test]
async fn the_only_instance_leads_while_a_dead_processs_lease_runs() {
    let (_dir, sqlite) = svs_store::testing::temp_sqlite().await;
    let store: Arc<dyn svs_store::Store> = Arc::new(sqlite);
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(1_000_000));
    let ttl = Duration::from_secs(10);
    let (_board, crashed) = instance(Arc::clone(&store), Arc::clone(&clock), "crashed", ttl);
    assert!(crashed.renew().await);
    let board = WorkerBoard::default();
    let restarted = Leadership::new(
        store,
        clock,
        &board,
        LeadershipSettings {
            owner: "restarted".into(),
            timing: LeaseTiming { ttl },
            sole: true,
        },
    );
    assert!(restarted.renew().await, "the only instance");
    assert_eq!(restarted.epoch(), None, "the lease is not its own yet");
    let shown = note(&board, LEADER_WORKER);
    assert!(shown.starts_with("leader: the only instance"), "{shown}");
    restarted.release().await;
    assert!(!restarted.is_leader(), "stopped");
}
