//! Behaviour every `Store` implementation must have, run against SQLite.
//! Written against the trait so a PostgreSQL store can reuse them.

use crate::*;
use svs_domain::{
    CreateVolumeArgs, JobSpec, JobState, Medium, Reservation, Resiliency, ResizePlan,
    ResizeVolumeArgs, SliceGrowth, SliceMove, SlicePlacement, VolumeState, VolumeType,
};

async fn open() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(&dir.path().join("svs.db"))
        .await
        .expect("store opens");
    (dir, store)
}

fn medium(id: &str, size: u64) -> MediumRecord {
    MediumRecord {
        medium: Medium {
            id: id.into(),
            node: format!("node-{id}"),
            zone: format!("zone-{id}"),
            size,
        },
        directory: format!("/media/{id}"),
    }
}

/// A tenant, a user, a policy and a 10 GiB volume with one slice on m1.
async fn volume_on_m1(store: &dyn Store) -> (User, String, i64) {
    store
        .sync_media(&[medium("m1", 20), medium("m2", 20)])
        .await
        .expect("media");
    let user = store
        .create_user(&NewUser {
            tenant: "t".into(),
            email: "u@example.com".into(),
            name: "u".into(),
            password_hash: "x".into(),
            is_admin: true,
            now_ms: 1,
        })
        .await
        .expect("user");
    let policy = store
        .create_policy(
            user.tenant_id,
            &PolicyWrite {
                name: "p".into(),
                resiliency: Resiliency {
                    media: 0,
                    node: 0,
                    zone: 0,
                },
                attributes: Default::default(),
                by_name: "u".into(),
                by_email: "u@example.com".into(),
                now_ms: 1,
            },
        )
        .await
        .expect("policy");
    let job = new_job(&user, create_spec(), "vol-1");
    let job_id = store
        .create_volume(
            &NewVolume {
                id: "vol-1".into(),
                tenant_id: user.tenant_id,
                name: "v".into(),
                kind: VolumeType::Block,
                size: 10,
                policy_id: policy.id,
                zone: None,
                attributes: Default::default(),
                now_ms: 1,
            },
            &job,
        )
        .await
        .expect("volume");
    store
        .place_slices(
            "vol-1",
            &[SlicePlacement {
                copy: 0,
                column: 0,
                medium: "m1".into(),
                size: 10,
            }],
        )
        .await
        .expect("slices");
    store
        .finish_job(job_id, &end(JobState::Done))
        .await
        .expect("done");
    (user, "vol-1".into(), job_id)
}

fn create_spec() -> JobSpec {
    JobSpec::VolumeCreate(CreateVolumeArgs {
        name: "vol-1".into(),
        size: 10,
        policy: "p".into(),
        kind: VolumeType::Block,
    })
}

fn resize_spec(allow_data_movement: bool) -> JobSpec {
    JobSpec::VolumeModifyExtend(ResizeVolumeArgs {
        size: 20,
        allow_data_movement,
        from_size: 10,
    })
}

fn new_job(user: &User, spec: JobSpec, object: &str) -> NewJob {
    NewJob {
        tenant_id: user.tenant_id,
        spec,
        object: object.into(),
        user_id: user.id,
        username: user.name.clone(),
        useremail: user.email.clone(),
        now_ms: 2,
    }
}

fn end(state: JobState) -> JobEnd {
    JobEnd {
        state,
        status: state.as_str().into(),
        detail: None,
        now_ms: 3,
    }
}

fn usage(all: &[MediumUsage], id: &str) -> (u64, u64, u64) {
    let m = all
        .iter()
        .find(|m| m.record.medium.id == id)
        .expect("medium");
    (m.allocated, m.reserved, m.free())
}

/// A move of the volume's slice from m1 to m2 while it grows 10 → 12 GiB.
fn move_plan(slice_id: i64) -> ResizePlan {
    ResizePlan {
        new_slice_size: 12,
        growths: Vec::<SliceGrowth>::new(),
        moves: vec![SliceMove {
            slice_id,
            from_medium: "m1".into(),
            to_medium: "m2".into(),
            old_size: 10,
            new_size: 12,
        }],
        reservations: vec![Reservation {
            medium: "m2".into(),
            gib: 12,
        }],
    }
}

#[tokio::test]
async fn a_medium_holding_slices_cannot_disappear_or_shrink() {
    let (_dir, store) = open().await;
    volume_on_m1(&store).await;
    let gone = store.sync_media(&[medium("m2", 20)]).await;
    assert!(matches!(gone, Err(StoreError::InUse(m)) if m.contains("m1")));
    let shrunk = store.sync_media(&[medium("m1", 5), medium("m2", 20)]).await;
    assert!(matches!(shrunk, Err(StoreError::InUse(_))));
    let mut moved = medium("m1", 20);
    moved.directory = "/elsewhere".into();
    assert!(store.sync_media(&[moved, medium("m2", 20)]).await.is_err());
    // An empty medium may go; a used one may grow.
    store
        .sync_media(&[medium("m1", 30)])
        .await
        .expect("m2 removed, m1 grown");
    assert_eq!(store.media_usage().await.expect("usage").len(), 1);
}

#[tokio::test]
async fn a_movement_books_switches_and_releases_space_atomically() {
    let (_dir, store) = open().await;
    let (user, volume, _) = volume_on_m1(&store).await;
    let slice_id = store.volume_slices(&volume).await.expect("slices")[0]
        .slice
        .id;
    let job = new_job(&user, resize_spec(true), &volume);
    let job_id = store
        .start_volume_job(&volume, VolumeState::Resizing, &job)
        .await
        .expect("job");
    store
        .save_resize_plan(job_id, &move_plan(slice_id), Some("found"))
        .await
        .expect("plan");
    // Saving again (a resumed job) changes nothing.
    store
        .save_resize_plan(job_id, &move_plan(slice_id), Some("found"))
        .await
        .expect("plan again");
    let media = store.media_usage().await.expect("usage");
    assert_eq!(usage(&media, "m1"), (10, 0, 10));
    assert_eq!(usage(&media, "m2"), (0, 12, 8));

    let steps = store.resize_steps(job_id).await.expect("steps");
    assert_eq!(steps.len(), 1);
    store.switch_slice(&steps[0]).await.expect("switch");
    let media = store.media_usage().await.expect("usage");
    assert_eq!(
        usage(&media, "m1"),
        (0, 0, 20),
        "the source is free once switched"
    );
    assert_eq!(
        usage(&media, "m2"),
        (10, 2, 8),
        "only the growth stays booked"
    );
    assert!(
        store.switch_slice(&steps[0]).await.is_err(),
        "a slice is never switched from a medium it is not on"
    );

    store
        .complete_resize(job_id, &volume, 12, 12, &end(JobState::Done))
        .await
        .expect("complete");
    let media = store.media_usage().await.expect("usage");
    assert_eq!(usage(&media, "m2"), (12, 0, 8));
    let v = store
        .volume_by_id(&volume)
        .await
        .expect("read")
        .expect("volume");
    assert_eq!(
        (v.size, v.state, v.job.is_none()),
        (12, VolumeState::Ready, true)
    );
    let job = store
        .get_job(user.tenant_id, job_id)
        .await
        .expect("read")
        .expect("job");
    assert_eq!(job.state, JobState::Done);
    assert_eq!(job.details.first().map(String::as_str), Some("found"));
    assert_eq!(job.details.len(), 1, "the plan's detail is recorded once");
}

#[tokio::test]
async fn a_failed_job_releases_its_reservations_and_frees_the_volume() {
    let (_dir, store) = open().await;
    let (user, volume, _) = volume_on_m1(&store).await;
    let slice_id = store.volume_slices(&volume).await.expect("slices")[0]
        .slice
        .id;
    let job_id = store
        .start_volume_job(
            &volume,
            VolumeState::Resizing,
            &new_job(&user, resize_spec(false), &volume),
        )
        .await
        .expect("job");
    store
        .save_resize_plan(job_id, &move_plan(slice_id), None)
        .await
        .expect("plan");
    assert!(store
        .active_volume_job(&volume)
        .await
        .expect("read")
        .is_some());
    store
        .finish_job(
            job_id,
            &JobEnd {
                detail: Some("boom".into()),
                ..end(JobState::Error)
            },
        )
        .await
        .expect("finish");
    let media = store.media_usage().await.expect("usage");
    assert_eq!(usage(&media, "m2"), (0, 0, 20));
    assert!(store
        .active_volume_job(&volume)
        .await
        .expect("read")
        .is_none());
    let v = store
        .volume_by_id(&volume)
        .await
        .expect("read")
        .expect("volume");
    assert_eq!((v.size, v.state), (10, VolumeState::Ready));
    let job = store
        .get_job(user.tenant_id, job_id)
        .await
        .expect("read")
        .expect("job");
    assert_eq!(
        (job.state, job.details.clone()),
        (JobState::Error, vec!["boom".to_string()])
    );
    assert_eq!(store.unfinished_jobs().await.expect("read").len(), 0);
}

#[tokio::test]
async fn placing_slices_twice_keeps_the_first_placement() {
    let (_dir, store) = open().await;
    let (_, volume, _) = volume_on_m1(&store).await;
    let again = store
        .place_slices(
            &volume,
            &[SlicePlacement {
                copy: 0,
                column: 0,
                medium: "m2".into(),
                size: 10,
            }],
        )
        .await
        .expect("idempotent");
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].slice.medium, "m1");
}

#[tokio::test]
async fn revoking_refresh_tokens_touches_only_that_user() {
    let (_dir, store) = open().await;
    let (user, _, _) = volume_on_m1(&store).await;
    let other = store
        .create_user(&NewUser {
            tenant: "t".into(),
            email: "other@example.com".into(),
            name: "o".into(),
            password_hash: "x".into(),
            is_admin: false,
            now_ms: 1,
        })
        .await
        .expect("second user");
    for (id, hash) in [(user.id, "a"), (user.id, "b"), (other.id, "c")] {
        store
            .add_refresh_token(&NewRefreshToken {
                user_id: id,
                token_hash: hash.into(),
                issued_ms: 1,
                expires_ms: 9,
            })
            .await
            .expect("token stored");
    }
    assert_eq!(
        store.revoke_refresh_tokens(user.id).await.expect("revoke"),
        2
    );
    assert!(
        store
            .refresh_token("a")
            .await
            .expect("read")
            .expect("a")
            .revoked
    );
    let other_token = store.refresh_token("c").await.expect("read").expect("c");
    assert!(!other_token.revoked, "another user's token stays valid");
    assert!(store.refresh_token("zzz").await.expect("read").is_none());
}

#[tokio::test]
async fn cached_volume_reads_see_every_committed_change() {
    let (_dir, store) = open().await;
    let (user, volume, _) = volume_on_m1(&store).await;
    let read = |s: &SqliteStore| {
        let s = s.clone();
        async move {
            s.get_volume(user.tenant_id, "v")
                .await
                .expect("read")
                .expect("volume")
        }
    };
    assert_eq!(read(&store).await.state, VolumeState::Ready);
    assert_eq!(
        read(&store).await.state,
        VolumeState::Ready,
        "served from cache"
    );
    let job_id = store
        .start_volume_job(
            &volume,
            VolumeState::Resizing,
            &new_job(&user, resize_spec(false), &volume),
        )
        .await
        .expect("job");
    assert_eq!(read(&store).await.state, VolumeState::Resizing);
    store
        .set_job_progress(job_id, 42, "Moving")
        .await
        .expect("progress");
    assert_eq!(read(&store).await.job.map(|j| j.1), Some(42));
    store
        .complete_resize(job_id, &volume, 12, 12, &end(JobState::Done))
        .await
        .expect("complete");
    let v = read(&store).await;
    assert_eq!((v.size, v.state, v.job), (12, VolumeState::Ready, None));
    store.delete_volume(&volume).await.expect("delete");
    assert!(store
        .get_volume(user.tenant_id, "v")
        .await
        .expect("read")
        .is_none());
}
