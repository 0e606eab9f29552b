//! Behaviour every `Store` implementation must have, written against
//! `&dyn Store`. A backend runs the whole suite with
//! `store_contract_tests!(open)`, where `open` is an async fn returning
//! `(guard, store)`: the guard (a temporary directory, a scratch database)
//! lives as long as the test, and `store` starts empty.

use crate::testing::{self, new_job, user_and_policy};
use crate::*;
use svs_domain::{
    place_volume, AttachmentArgs, AttachmentManager, Consistency, CreateVolumeArgs, JobSpec,
    JobState, MediumState, PlacementRequest, Reservation, Resiliency, ResizePlan, ResizeVolumeArgs,
    SliceGrowth, SliceMove, SlicePlacement, SnapshotArgs, SnapshotState, VolumeState, VolumeType,
};

/// One `#[tokio::test]` per behaviour below, each on a fresh store from `$open`.
macro_rules! store_contract_tests {
    ($open:path) => {
        store_contract_tests!(@each $open;
            a_medium_holding_slices_cannot_disappear_or_shrink,
            a_movement_books_switches_and_releases_space_atomically,
            a_copy_checkpoint_is_kept_until_its_step_switches,
            a_failed_job_releases_its_reservations_and_frees_the_volume,
            placing_slices_twice_keeps_the_first_placement,
            revoking_refresh_tokens_touches_only_that_user,
            rotating_a_refresh_token_retires_it_and_reuse_revokes_its_family,
            concurrent_rotations_of_one_token_let_only_one_through,
            purging_removes_expired_and_revoked_refresh_tokens_only,
            cached_volume_reads_see_every_committed_change,
            a_placement_from_a_stale_reading_cannot_overbook_a_medium,
            a_resize_plan_from_a_stale_reading_cannot_overbook_a_medium,
            a_resumed_job_keeps_its_booking_when_media_have_filled_since,
            a_used_policy_keeps_its_resiliency_and_cannot_be_deleted,
            a_failed_creation_leaves_the_volume_creating,
            snapshots_get_growing_ids_unique_names_and_claim_their_volume,
            a_failed_medium_loses_its_slices_and_takes_no_more,
            a_node_has_at_most_one_live_agent_credential,
            a_node_lists_its_attachments_of_every_tenant_with_host_reports,
            a_recorded_resize_sizes_the_volume_while_its_job_goes_on,
            users_are_listed_changed_and_ended_sessions_raise_the_generation,
            the_last_enabled_administrator_cannot_be_disabled_demoted_or_deleted,
            deleting_a_user_removes_its_tokens_and_keeps_its_jobs,
            a_job_keeps_its_volumes_name_and_is_found_by_it_after_the_delete,
            api_media_survive_configuration_syncs_and_the_configuration_takes_over_what_it_lists,
            a_medium_is_resized_and_removed_only_within_what_it_holds,
            a_node_is_removed_only_when_nothing_depends_on_it,
            configured_nodes_no_longer_listed_go_unless_something_depends_on_them,
            volumes_are_listed_by_name_whole_or_a_page_at_a_time,
        );
    };
    (@each $open:path; $($name:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let (_guard, store) = $open().await;
                $crate::contract::$name(&store).await;
            }
        )+
    };
}

fn medium(id: &str, size: u64) -> MediumRecord {
    testing::medium(id, size, format!("/media/{id}"))
}

/// A tenant, a user, a policy and a 10 GiB volume with one slice on m1.
pub(crate) async fn volume_on_m1(store: &dyn Store) -> (User, String, i64) {
    store
        .sync_media(&[medium("m1", 20), medium("m2", 20)])
        .await
        .expect("media");
    let (user, policy) = user_and_policy(store).await;
    let job_id = add_volume(store, &user, policy.id, "vol-1", "v", 10).await;
    store
        .place_slices("vol-1", &one_slice("m1", 10))
        .await
        .expect("slices");
    store
        .finish_job(job_id, &end(JobState::Done))
        .await
        .expect("done");
    (user, "vol-1".into(), job_id)
}

/// A new volume in state Creating, with its create job.
pub(crate) async fn add_volume(
    store: &dyn Store,
    user: &User,
    policy_id: i64,
    id: &str,
    name: &str,
    size: u64,
) -> i64 {
    store
        .create_volume(
            &NewVolume {
                id: id.into(),
                tenant_id: user.tenant_id,
                name: name.into(),
                kind: VolumeType::Block,
                size,
                policy_id,
                zone: None,
                attributes: Default::default(),
                now_ms: 1,
            },
            &new_job(user, create_spec(), id),
        )
        .await
        .expect("volume")
}

pub(crate) async fn volumes_are_listed_by_name_whole_or_a_page_at_a_time(store: &dyn Store) {
    let (user, policy) = user_and_policy(store).await;
    for name in ["c", "a", "e", "b", "d"] {
        add_volume(store, &user, policy.id, &format!("id-{name}"), name, 1).await;
    }
    let names = |volumes: Vec<Volume>| volumes.into_iter().map(|v| v.name).collect::<Vec<_>>();
    let list = |page: Option<Page>| async move {
        names(
            store
                .list_volumes(user.tenant_id, page)
                .await
                .expect("list"),
        )
    };
    assert_eq!(list(None).await, ["a", "b", "c", "d", "e"]);
    let page = |page, count| Some(Page { page, count });
    assert_eq!(list(page(1, 2)).await, ["a", "b"]);
    assert_eq!(list(page(2, 2)).await, ["c", "d"]);
    assert_eq!(list(page(3, 2)).await, ["e"]);
    assert!(list(page(4, 2)).await.is_empty());
    assert_eq!(list(page(1, 1000)).await.len(), 5);
    // Another tenant's volumes are not counted in its pages.
    assert!(store
        .list_volumes(user.tenant_id + 1, page(1, 10))
        .await
        .expect("list")
        .is_empty());
}

/// The volume named "v" of the tenant, through `get_volume` (the cached read).
async fn read_volume(store: &dyn Store, tenant_id: i64) -> Volume {
    store
        .get_volume(tenant_id, "v")
        .await
        .expect("read")
        .expect("volume")
}

/// The id of the volume's first slice.
async fn first_slice_id(store: &dyn Store, volume: &str) -> i64 {
    store.volume_slices(volume).await.expect("slices")[0]
        .slice
        .id
}

/// Starts the user's resize job (to 20 GiB) on the volume.
pub(crate) async fn start_resize(
    store: &dyn Store,
    user: &User,
    volume: &str,
    allow_data_movement: bool,
) -> i64 {
    store
        .start_volume_job(
            volume,
            VolumeState::Resizing,
            &new_job(user, resize_spec(allow_data_movement), volume),
        )
        .await
        .expect("job")
}

/// The user's policy "p".
pub(crate) async fn policy_p(store: &dyn Store, user: &User) -> Policy {
    store
        .get_policy(user.tenant_id, "p")
        .await
        .expect("read")
        .expect("policy")
}

/// The volume as stored (`volume_by_id`, never cached).
async fn stored_volume(store: &dyn Store, id: &str) -> Volume {
    store.volume_by_id(id).await.expect("read").expect("volume")
}

/// The user's job `id`.
async fn stored_job(store: &dyn Store, user: &User, id: i64) -> Job {
    store
        .get_job(user.tenant_id, id)
        .await
        .expect("read")
        .expect("job")
}

/// One slice (copy 0, column 0) of `size` GiB on `medium`.
fn one_slice(medium: &str, size: u64) -> [SlicePlacement; 1] {
    [SlicePlacement {
        copy: 0,
        column: 0,
        medium: medium.into(),
        size,
    }]
}

/// Media as the job runner's planner reads them.
pub(crate) async fn media_states(store: &dyn Store) -> Vec<MediumState> {
    store
        .media_usage()
        .await
        .expect("usage")
        .into_iter()
        .map(|u| MediumState {
            used: u.used(),
            medium: u.record.medium,
        })
        .collect()
}

fn create_spec() -> JobSpec {
    JobSpec::VolumeCreate(CreateVolumeArgs {
        name: "vol-1".into(),
        size: 10,
        policy: "p".into(),
        kind: VolumeType::Block,
        source: None,
    })
}

fn resize_spec(allow_data_movement: bool) -> JobSpec {
    JobSpec::VolumeModifyExtend(ResizeVolumeArgs {
        size: 20,
        allow_data_movement,
        from_size: 10,
    })
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

pub(crate) async fn a_medium_holding_slices_cannot_disappear_or_shrink(store: &dyn Store) {
    volume_on_m1(store).await;
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

pub(crate) async fn a_copy_checkpoint_is_kept_until_its_step_switches(store: &dyn Store) {
    let (user, volume, _) = volume_on_m1(store).await;
    let slice_id = first_slice_id(store, &volume).await;
    let job_id = start_resize(store, &user, &volume, true).await;
    store
        .save_resize_plan(job_id, &move_plan(slice_id), None)
        .await
        .expect("plan");
    let step = store.resize_steps(job_id).await.expect("steps")[0].clone();
    assert_eq!(step.checkpoint, None, "a new step copies from the start");
    let at = |offset, live| Some(CopyCheckpoint { offset, live });
    for checkpoint in [at(64 << 20, false), at(5 << 40, true), None, at(1, true)] {
        store
            .record_copy_checkpoint(step.id, checkpoint)
            .await
            .expect("checkpoint");
        let steps = store.resize_steps(job_id).await.expect("steps");
        assert_eq!(steps[0].checkpoint, checkpoint);
    }
    store.switch_slice(&step).await.expect("switch");
    store
        .record_copy_checkpoint(step.id, at(2 << 20, true))
        .await
        .expect("ignored");
    assert_eq!(
        store.resize_steps(job_id).await.expect("steps")[0].checkpoint,
        at(1, true),
        "a switched step's checkpoint no longer moves"
    );
}

pub(crate) async fn a_movement_books_switches_and_releases_space_atomically(store: &dyn Store) {
    let (user, volume, _) = volume_on_m1(store).await;
    let slice_id = first_slice_id(store, &volume).await;
    let job_id = start_resize(store, &user, &volume, true).await;
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
    let v = stored_volume(store, &volume).await;
    assert_eq!(
        (v.size, v.state, v.job.is_none()),
        (12, VolumeState::Ready, true)
    );
    let job = stored_job(store, &user, job_id).await;
    assert_eq!(job.state, JobState::Done);
    assert_eq!(job.details.first().map(String::as_str), Some("found"));
    assert_eq!(job.details.len(), 1, "the plan's detail is recorded once");
}

pub(crate) async fn a_failed_job_releases_its_reservations_and_frees_the_volume(store: &dyn Store) {
    let (user, volume, _) = volume_on_m1(store).await;
    let slice_id = first_slice_id(store, &volume).await;
    let job_id = start_resize(store, &user, &volume, false).await;
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
    let v = stored_volume(store, &volume).await;
    assert_eq!((v.size, v.state), (10, VolumeState::Ready));
    let job = stored_job(store, &user, job_id).await;
    assert_eq!(
        (job.state, job.details.clone()),
        (JobState::Error, vec!["boom".to_string()])
    );
    assert_eq!(store.unfinished_jobs().await.expect("read").len(), 0);
}

pub(crate) async fn placing_slices_twice_keeps_the_first_placement(store: &dyn Store) {
    let (_, volume, _) = volume_on_m1(store).await;
    let again = store
        .place_slices(&volume, &one_slice("m2", 10))
        .await
        .expect("idempotent");
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].slice.medium, "m1");
}

pub(crate) async fn revoking_refresh_tokens_touches_only_that_user(store: &dyn Store) {
    let (user, _, _) = volume_on_m1(store).await;
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
                family: format!("family-{hash}"),
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

async fn add_token(store: &dyn Store, user_id: i64, hash: &str, family: &str, expires_ms: i64) {
    store
        .add_refresh_token(&NewRefreshToken {
            user_id,
            token_hash: hash.into(),
            family: family.into(),
            issued_ms: 1,
            expires_ms,
        })
        .await
        .expect("token stored");
}

async fn token(store: &dyn Store, hash: &str) -> Option<RefreshTokenRecord> {
    store.refresh_token(hash).await.expect("read")
}

pub(crate) async fn rotating_a_refresh_token_retires_it_and_reuse_revokes_its_family(
    store: &dyn Store,
) {
    let (user, _, _) = volume_on_m1(store).await;
    add_token(store, user.id, "a1", "fa", 1000).await;
    add_token(store, user.id, "b1", "fb", 1000).await;
    let rotated = store
        .rotate_refresh_token("a1", "a2", 10)
        .await
        .expect("rotate");
    assert_eq!(rotated, RefreshRotation::Rotated { user_id: user.id });
    let a1 = token(store, "a1").await.expect("a1 kept");
    assert!(a1.retired && !a1.revoked);
    let a2 = token(store, "a2").await.expect("a2 added");
    assert_eq!(
        (
            a2.user_id,
            a2.family.as_str(),
            a2.expires_ms,
            a2.retired,
            a2.revoked
        ),
        (user.id, "fa", 1000, false, false),
        "the new token inherits the family and its expiry"
    );
    assert_eq!(
        store
            .rotate_refresh_token("a2", "a3", 20)
            .await
            .expect("rotate"),
        RefreshRotation::Rotated { user_id: user.id }
    );
    // a1 again: reuse. The family (a1, a2, a3) is revoked, not the other sign-in.
    assert_eq!(
        store
            .rotate_refresh_token("a1", "a4", 30)
            .await
            .expect("reuse"),
        RefreshRotation::Reused {
            user_id: user.id,
            revoked: 3
        }
    );
    assert!(token(store, "a4").await.is_none(), "nothing was added");
    assert!(token(store, "a3").await.expect("a3").revoked);
    assert!(!token(store, "b1").await.expect("b1").revoked);
    for hash in ["a3", "a1", "unknown"] {
        assert_eq!(
            store
                .rotate_refresh_token(hash, "x", 40)
                .await
                .expect("rotate"),
            RefreshRotation::Invalid,
            "{hash}"
        );
    }
    // Expired: invalid, and nothing changes.
    assert_eq!(
        store
            .rotate_refresh_token("b1", "b2", 1000)
            .await
            .expect("rotate"),
        RefreshRotation::Invalid
    );
    assert!(!token(store, "b1").await.expect("b1").retired);
    assert_eq!(store.revoke_refresh_family("fb").await.expect("revoke"), 1);
    assert!(token(store, "b1").await.expect("b1").revoked);
}

pub(crate) async fn concurrent_rotations_of_one_token_let_only_one_through(store: &dyn Store) {
    let (user, _, _) = volume_on_m1(store).await;
    add_token(store, user.id, "t", "f", 1000).await;
    let (first, second) = tokio::join!(
        store.rotate_refresh_token("t", "n1", 10),
        store.rotate_refresh_token("t", "n2", 10)
    );
    let mut outcomes = [first.expect("first"), second.expect("second")];
    outcomes.sort_by_key(|o| matches!(o, RefreshRotation::Reused { .. }));
    assert_eq!(outcomes[0], RefreshRotation::Rotated { user_id: user.id });
    assert!(
        matches!(outcomes[1], RefreshRotation::Reused { .. }),
        "{outcomes:?}"
    );
}

pub(crate) async fn purging_removes_expired_and_revoked_refresh_tokens_only(store: &dyn Store) {
    let (user, _, _) = volume_on_m1(store).await;
    add_token(store, user.id, "live", "f1", 1000).await;
    add_token(store, user.id, "expired", "f2", 100).await;
    add_token(store, user.id, "revoked", "f3", 1000).await;
    add_token(store, user.id, "retired", "f4", 1000).await;
    store.revoke_refresh_family("f3").await.expect("revoke");
    store
        .rotate_refresh_token("retired", "next", 50)
        .await
        .expect("rotate");
    assert_eq!(store.purge_refresh_tokens(100).await.expect("purge"), 2);
    for (hash, kept) in [
        ("live", true),
        ("expired", false),
        ("revoked", false),
        ("retired", true),
        ("next", true),
    ] {
        assert_eq!(token(store, hash).await.is_some(), kept, "{hash}");
    }
}

pub(crate) async fn cached_volume_reads_see_every_committed_change(store: &dyn Store) {
    let (user, volume, _) = volume_on_m1(store).await;
    assert_eq!(
        read_volume(store, user.tenant_id).await.state,
        VolumeState::Ready
    );
    assert_eq!(
        read_volume(store, user.tenant_id).await.state,
        VolumeState::Ready,
        "served from cache"
    );
    let job_id = start_resize(store, &user, &volume, false).await;
    assert_eq!(
        read_volume(store, user.tenant_id).await.state,
        VolumeState::Resizing
    );
    store
        .set_job_progress(job_id, 42, "Moving")
        .await
        .expect("progress");
    assert_eq!(
        read_volume(store, user.tenant_id).await.job.map(|j| j.1),
        Some(42)
    );
    store
        .complete_resize(job_id, &volume, 12, 12, &end(JobState::Done))
        .await
        .expect("complete");
    let v = read_volume(store, user.tenant_id).await;
    assert_eq!((v.size, v.state, v.job), (12, VolumeState::Ready, None));
    store.delete_volume(&volume).await.expect("delete");
    assert!(store
        .get_volume(user.tenant_id, "v")
        .await
        .expect("read")
        .is_none());
}

pub(crate) async fn a_placement_from_a_stale_reading_cannot_overbook_a_medium(store: &dyn Store) {
    let (user, _, _) = volume_on_m1(store).await;
    let policy = policy_p(store, &user).await;
    add_volume(store, &user, policy.id, "vol-a", "a", 15).await;
    add_volume(store, &user, policy.id, "vol-b", "b", 15).await;
    // Both placements are computed from the same reading: each fits on m2
    // alone, not both.
    let stale = media_states(store).await;
    let request = PlacementRequest {
        size: 15,
        resiliency: Resiliency::default(),
        zone: None,
    };
    let first = place_volume(&stale, &request).expect("placement");
    let second = place_volume(&stale, &request).expect("placement");
    assert_eq!(first[0].medium, "m2");
    assert_eq!(first, second);

    store
        .place_slices("vol-a", &first)
        .await
        .expect("first fits");
    let before = store.media_usage().await.expect("usage");
    let refused = store.place_slices("vol-b", &second).await;
    assert!(
        matches!(&refused, Err(StoreError::InsufficientSpace { medium }) if medium == "m2"),
        "{refused:?}"
    );
    assert_eq!(
        refused.map(|_| ()).map_err(|e| e.to_string()),
        Err("medium 'm2' no longer has room for this plan".to_string())
    );
    assert!(store
        .volume_slices("vol-b")
        .await
        .expect("slices")
        .is_empty());
    let after = store.media_usage().await.expect("usage");
    assert_eq!(usage(&after, "m2"), usage(&before, "m2"), "nothing booked");
    assert_eq!(usage(&after, "m2"), (15, 0, 5));
}

pub(crate) async fn a_resize_plan_from_a_stale_reading_cannot_overbook_a_medium(store: &dyn Store) {
    let (user, volume, _) = volume_on_m1(store).await;
    let policy = policy_p(store, &user).await;
    let create = add_volume(store, &user, policy.id, "vol-2", "v2", 5).await;
    let on_m2 = store
        .place_slices("vol-2", &one_slice("m2", 5))
        .await
        .expect("slices");
    store
        .finish_job(create, &end(JobState::Done))
        .await
        .expect("done");
    let first_slice = first_slice_id(store, &volume).await;
    // From the same reading (m2: 5 of 20 GiB used), moving vol-1's slice to
    // m2 (12 GiB) and growing vol-2 there (+8 GiB) each fit; both do not.
    let stale = media_states(store).await;
    assert_eq!(
        stale
            .iter()
            .find(|m| m.medium.id == "m2")
            .map(MediumState::free),
        Some(15)
    );
    let grow_on_m2 = ResizePlan {
        new_slice_size: 13,
        growths: vec![SliceGrowth {
            slice_id: on_m2[0].slice.id,
            medium: "m2".into(),
            from: 5,
            to: 13,
        }],
        moves: Vec::new(),
        reservations: vec![Reservation {
            medium: "m2".into(),
            gib: 8,
        }],
    };
    let move_job = start_resize(store, &user, &volume, true).await;
    let grow_job = start_resize(store, &user, "vol-2", false).await;
    store
        .save_resize_plan(move_job, &move_plan(first_slice), Some("found"))
        .await
        .expect("first plan fits");
    let refused = store
        .save_resize_plan(grow_job, &grow_on_m2, Some("found"))
        .await;
    assert!(
        matches!(&refused, Err(StoreError::InsufficientSpace { medium }) if medium == "m2"),
        "{refused:?}"
    );
    assert!(store
        .resize_steps(grow_job)
        .await
        .expect("steps")
        .is_empty());
    let job = stored_job(store, &user, grow_job).await;
    assert!(job.details.is_empty(), "no detail recorded");
    let media = store.media_usage().await.expect("usage");
    assert_eq!(
        usage(&media, "m2"),
        (5, 12, 3),
        "only the first plan is booked"
    );
}

pub(crate) async fn a_resumed_job_keeps_its_booking_when_media_have_filled_since(
    store: &dyn Store,
) {
    let (user, volume, _) = volume_on_m1(store).await;
    let slice_id = first_slice_id(store, &volume).await;
    let job_id = start_resize(store, &user, &volume, true).await;
    store
        .save_resize_plan(job_id, &move_plan(slice_id), None)
        .await
        .expect("plan");
    // m2 is now 12 of 20 GiB booked: the same plan would not fit twice, but a
    // job that already has its steps is left as it is.
    store
        .save_resize_plan(job_id, &move_plan(slice_id), None)
        .await
        .expect("saved plan kept");
    let mut bigger = move_plan(slice_id);
    bigger.reservations[0].gib = 20;
    store
        .save_resize_plan(job_id, &bigger, None)
        .await
        .expect("saved plan kept");
    let media = store.media_usage().await.expect("usage");
    assert_eq!(usage(&media, "m2"), (0, 12, 8));
    // Likewise a volume whose slices are recorded keeps them.
    let again = store
        .place_slices(&volume, &one_slice("m2", 20))
        .await
        .expect("placement kept");
    assert_eq!(again[0].slice.medium, "m1");
}

pub(crate) async fn a_used_policy_keeps_its_resiliency_and_cannot_be_deleted(store: &dyn Store) {
    let (user, _, _) = volume_on_m1(store).await;
    let policy = policy_p(store, &user).await;
    let write = |resiliency| PolicyWrite {
        name: "p".into(),
        resiliency,
        attributes: Default::default(),
        by_name: "u".into(),
        by_email: "u@example.com".into(),
        now_ms: 5,
    };
    let changed = store
        .update_policy(
            user.tenant_id,
            "p",
            &write(Resiliency {
                media: 1,
                ..policy.resiliency
            }),
        )
        .await;
    assert!(
        matches!(&changed, Err(StoreError::InUse(m))
            if m == "policy 'p' is used by 1 volume(s); its resiliency cannot change"),
        "{changed:?}"
    );
    let same = store
        .update_policy(user.tenant_id, "p", &write(policy.resiliency))
        .await
        .expect("other fields may change");
    assert_eq!(same.updated_ms, Some(5));
    let deleted = store.delete_policy(user.tenant_id, "p").await;
    assert!(
        matches!(&deleted, Err(StoreError::InUse(m)) if m == "policy 'p' is used by 1 volume(s)"),
        "{deleted:?}"
    );
    assert!(matches!(
        store.delete_policy(user.tenant_id, "nope").await,
        Err(StoreError::NotFound)
    ));
}

pub(crate) async fn a_failed_creation_leaves_the_volume_creating(store: &dyn Store) {
    let (user, _, _) = volume_on_m1(store).await;
    let policy = policy_p(store, &user).await;
    let job_id = add_volume(store, &user, policy.id, "vol-f", "f", 5).await;
    store
        .finish_job(job_id, &end(JobState::Error))
        .await
        .expect("finish");
    let v = stored_volume(store, "vol-f").await;
    assert_eq!((v.state, v.job), (VolumeState::Creating, None));
}

fn new_snapshot(user: &User, id: &str, name: &str) -> NewSnapshot {
    NewSnapshot {
        id: id.into(),
        volume_id: "vol-1".into(),
        tenant_id: user.tenant_id,
        name: name.into(),
        consistency: Consistency::Crash,
        volume_size: 10,
        attributes: Default::default(),
        now_ms: 5,
    }
}

fn snapshot_spec(id: &str, name: &str) -> JobSpec {
    JobSpec::SnapshotCreate(SnapshotArgs {
        name: name.into(),
        snapshot_id: id.into(),
    })
}

pub(crate) async fn snapshots_get_growing_ids_unique_names_and_claim_their_volume(
    store: &dyn Store,
) {
    let (user, volume, _) = volume_on_m1(store).await;
    let job = store
        .create_snapshot(
            &new_snapshot(&user, "s-1", "daily"),
            &new_job(&user, snapshot_spec("s-1", "daily"), &volume),
        )
        .await
        .expect("snapshot");
    // The volume is busy with the snapshot's job.
    let again = store
        .create_snapshot(
            &new_snapshot(&user, "s-2", "hourly"),
            &new_job(&user, snapshot_spec("s-2", "hourly"), &volume),
        )
        .await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    assert!(
        store.snapshot_by_id("s-2").await.expect("read").is_none(),
        "nothing half-made"
    );
    store
        .finish_job(job, &end(JobState::Done))
        .await
        .expect("done");
    store
        .set_snapshot_state("s-1", SnapshotState::Ready)
        .await
        .expect("ready");
    let duplicate = store
        .create_snapshot(
            &new_snapshot(&user, "s-3", "daily"),
            &new_job(&user, snapshot_spec("s-3", "daily"), &volume),
        )
        .await;
    assert!(
        matches!(duplicate, Err(StoreError::Conflict(_))),
        "{duplicate:?}"
    );
    let job = store
        .create_snapshot(
            &new_snapshot(&user, "s-4", "hourly"),
            &new_job(&user, snapshot_spec("s-4", "hourly"), &volume),
        )
        .await
        .expect("second snapshot");
    store
        .finish_job(job, &end(JobState::Done))
        .await
        .expect("done");

    let listed = store
        .list_snapshots(user.tenant_id, Some(&volume))
        .await
        .expect("list");
    let names: Vec<&str> = listed.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["daily", "hourly"]);
    assert!(listed[0].seq < listed[1].seq, "ids grow: {listed:?}");
    assert_eq!(listed[0].state, SnapshotState::Ready);
    assert_eq!(listed[0].volume_name, "v");
    let by_name = store.get_snapshot(&volume, "hourly").await.expect("get");
    assert_eq!(by_name.map(|s| s.id), Some("s-4".to_string()));
    assert!(store
        .list_snapshots(user.tenant_id + 1, None)
        .await
        .expect("other tenant")
        .is_empty());

    store
        .update_snapshot("s-4", "renamed", &Default::default())
        .await
        .expect("rename");
    let clash = store
        .update_snapshot("s-4", "daily", &Default::default())
        .await;
    assert!(matches!(clash, Err(StoreError::Conflict(_))), "{clash:?}");
    store
        .set_snapshot_usage(&[("s-1".into(), 4096)], &[("m1".into(), 3 << 30)])
        .await
        .expect("usage");
    let s1 = store
        .snapshot_by_id("s-1")
        .await
        .expect("read")
        .expect("s-1");
    assert_eq!(s1.used_bytes, 4096);
    let (allocated, reserved, free) = usage(&store.media_usage().await.expect("usage"), "m1");
    assert_eq!(
        (allocated, reserved, free),
        (10, 0, 20 - 10 - 3),
        "snapshot GiB are used"
    );
    // And a booking sees them too.
    let policy = policy_p(store, &user).await;
    add_volume(store, &user, policy.id, "vol-2", "w", 8).await;
    let too_big = store.place_slices("vol-2", &one_slice("m1", 8)).await;
    assert!(
        matches!(too_big, Err(StoreError::InsufficientSpace { .. })),
        "7 GiB free once snapshots count: {too_big:?}"
    );

    store.delete_snapshot("s-1").await.expect("delete");
    assert!(store.snapshot_by_id("s-1").await.expect("read").is_none());
    // A deleted snapshot's id is never given again.
    let job = store
        .create_snapshot(
            &new_snapshot(&user, "s-5", "later"),
            &new_job(&user, snapshot_spec("s-5", "later"), &volume),
        )
        .await
        .expect("third snapshot");
    store
        .finish_job(job, &end(JobState::Done))
        .await
        .expect("done");
    let later = store
        .snapshot_by_id("s-5")
        .await
        .expect("read")
        .expect("s-5");
    assert!(later.seq > listed[1].seq);
    // The volume's deletion takes its snapshots along.
    store.delete_volume(&volume).await.expect("delete volume");
    assert!(store
        .volume_snapshots(&volume)
        .await
        .expect("list")
        .is_empty());
}

pub(crate) async fn a_failed_medium_loses_its_slices_and_takes_no_more(store: &dyn Store) {
    let (user, volume, _) = volume_on_m1(store).await;
    assert!(store.set_medium_failed("m1").await.expect("fail"));
    assert!(!store.set_medium_failed("m1").await.expect("again"));
    assert!(matches!(
        store.set_medium_failed("nope").await,
        Err(StoreError::NotFound)
    ));
    let slices = store.volume_slices(&volume).await.expect("slices");
    assert!(slices.iter().all(|s| s.lost), "{slices:?}");
    let v = read_volume(store, user.tenant_id).await;
    assert_eq!((v.lost_slices, v.lost_columns), (1, 1));
    let media = store.media_usage().await.expect("usage");
    let failed: Vec<(&str, bool)> = media
        .iter()
        .map(|m| (m.record.medium.id.as_str(), m.failed))
        .collect();
    assert_eq!(failed, [("m1", true), ("m2", false)]);
}

fn node(name: &str) -> NodeRecord {
    NodeRecord {
        name: name.into(),
        zone: String::new(),
        address: Some("10.0.0.7".into()),
        managed_by: ManagedBy::Api,
    }
}

fn credential(node: &str, id: &str) -> NodeCredential {
    NodeCredential {
        node: node.into(),
        credential_id: id.into(),
        secret_hash: format!("hash-{id}"),
        created_ms: 5,
    }
}

pub(crate) async fn a_node_has_at_most_one_live_agent_credential(store: &dyn Store) {
    store.create_node(&node("host-7")).await.expect("node");
    assert!(matches!(
        store.create_node(&node("host-7")).await,
        Err(StoreError::Conflict(m)) if m == "node 'host-7' already exists"
    ));
    assert!(matches!(
        store.set_node_credential(&credential("nope", "c0")).await,
        Err(StoreError::NotFound)
    ));
    assert!(store.node_agents().await.expect("agents").is_empty());

    store
        .set_node_credential(&credential("host-7", "c1"))
        .await
        .expect("credential");
    assert_eq!(
        store.node_credential("c1").await.expect("read"),
        Some(credential("host-7", "c1"))
    );
    // A new credential replaces the old one.
    store
        .set_node_credential(&credential("host-7", "c2"))
        .await
        .expect("credential");
    assert_eq!(store.node_credential("c1").await.expect("read"), None);
    assert!(store.node_credential("c2").await.expect("read").is_some());

    store.touch_node_agent("host-7", 42).await.expect("touch");
    assert_eq!(
        store.node_agents().await.expect("agents"),
        vec![NodeAgentRecord {
            node: "host-7".into(),
            has_credential: true,
            last_seen_ms: Some(42),
        }]
    );
    assert!(store
        .revoke_node_credential("host-7")
        .await
        .expect("revoke"));
    assert!(!store
        .revoke_node_credential("host-7")
        .await
        .expect("revoke"));
    assert_eq!(store.node_credential("c2").await.expect("read"), None);
    // When it was last seen outlives the credential.
    assert_eq!(
        store.node_agents().await.expect("agents"),
        vec![NodeAgentRecord {
            node: "host-7".into(),
            has_credential: false,
            last_seen_ms: Some(42),
        }]
    );
}

pub(crate) async fn a_node_lists_its_attachments_of_every_tenant_with_host_reports(
    store: &dyn Store,
) {
    let (user, volume, _) = volume_on_m1(store).await;
    let other = store
        .create_user(&NewUser {
            tenant: "t2".into(),
            email: "o@example.com".into(),
            name: "o".into(),
            password_hash: "x".into(),
            is_admin: false,
            now_ms: 1,
        })
        .await
        .expect("user");
    let policy = store
        .create_policy(
            other.tenant_id,
            &PolicyWrite {
                name: "p".into(),
                resiliency: Resiliency {
                    media: 0,
                    node: 0,
                    zone: 0,
                },
                attributes: Default::default(),
                by_name: "o".into(),
                by_email: "o@example.com".into(),
                now_ms: 1,
            },
        )
        .await
        .expect("policy");
    let job = add_volume(store, &other, policy.id, "vol-0", "w", 4).await;
    store
        .finish_job(job, &end(JobState::Done))
        .await
        .expect("done");
    for (owner, id) in [(&user, volume.as_str()), (&other, "vol-0")] {
        for node in ["host-7", "host-8"] {
            let job = store
                .create_attachment(
                    &NewAttachment {
                        volume_id: id.into(),
                        snapshot: "top".into(),
                        node: node.into(),
                        tenant_id: owner.tenant_id,
                        readonly: false,
                        mountpoint: "/mnt".into(),
                        export_name: format!("{id}-{node}"),
                        now_ms: 4,
                        manager: if node == "host-8" {
                            AttachmentManager::Csi
                        } else {
                            AttachmentManager::Agent
                        },
                    },
                    &new_job(
                        owner,
                        JobSpec::AttachmentCreate(AttachmentArgs {
                            node: node.into(),
                            readonly: false,
                            mountpoint: "/mnt".into(),
                            snapshot: "top".into(),
                        }),
                        id,
                    ),
                )
                .await
                .expect("attachment");
            store
                .finish_job(job, &end(JobState::Done))
                .await
                .expect("done");
        }
    }
    let listed = store.node_attachments("host-7").await.expect("list");
    let ids: Vec<&str> = listed
        .iter()
        .map(|a| a.attachment.volume_id.as_str())
        .collect();
    assert_eq!(ids, ["vol-0", "vol-1"]);
    assert!(listed.iter().all(|a| a.attachment.node == "host-7"));
    assert_eq!(listed[0].volume_size, 4);
    assert_eq!(listed[1].volume_size, 10);
    assert_eq!(listed[1].volume_kind, VolumeType::Block);
    assert_eq!(listed[1].snapshot_size, None);
    assert!(listed.iter().all(|a| a.attachment.host.is_none()));
    assert!(listed
        .iter()
        .all(|a| a.attachment.manager == AttachmentManager::Agent));
    let csi = store.node_attachments("host-8").await.expect("list");
    assert_eq!(csi.len(), 2);
    assert!(csi
        .iter()
        .all(|a| a.attachment.manager == AttachmentManager::Csi));

    let report = HostReport {
        state: "Mounted".into(),
        detail: None,
        device: Some("/dev/loop3".into()),
        mount_path: Some("/var/lib/svs/mounts/v".into()),
        filesystem_bytes: Some(10 << 30),
        filesystem_size: Some(10),
        grow_error: None,
        grow_job: Some(4),
        updated_ms: 9,
    };
    store
        .set_host_report("vol-1", "top", "host-7", &report)
        .await
        .expect("report");
    assert!(matches!(
        store
            .set_host_report("vol-1", "top", "host-9", &report)
            .await,
        Err(StoreError::NotFound)
    ));
    let a = store
        .get_attachment("vol-1", "top", "host-7")
        .await
        .expect("read")
        .expect("attachment");
    assert_eq!(a.host.as_ref(), Some(&report));
    let b = store
        .get_attachment("vol-1", "top", "host-8")
        .await
        .expect("read")
        .expect("attachment");
    assert_eq!(b.host, None);
    // A CSI attachment is never the agent's, whatever is reported on it.
    store
        .set_host_report("vol-1", "top", "host-8", &report)
        .await
        .expect("report");
    let b = store
        .get_attachment("vol-1", "top", "host-8")
        .await
        .expect("read")
        .expect("attachment");
    assert_eq!(b.manager, AttachmentManager::Csi);
    assert!(!b.is_agent_managed());
    assert!(a.is_agent_managed());
}

pub(crate) async fn a_recorded_resize_sizes_the_volume_while_its_job_goes_on(store: &dyn Store) {
    let (user, volume, _) = volume_on_m1(store).await;
    let job = start_resize(store, &user, &volume, false).await;
    store
        .record_resize(job, &volume, 20, 20)
        .await
        .expect("record");
    store
        .record_resize(job, &volume, 20, 20)
        .await
        .expect("again");
    let v = stored_volume(store, &volume).await;
    assert_eq!((v.size, v.state), (20, VolumeState::Resizing));
    assert_eq!(v.job.map(|(id, _, _)| id), Some(job));
    assert!(store
        .volume_slices(&volume)
        .await
        .expect("slices")
        .iter()
        .all(|r| r.slice.size == 20));
    assert_eq!(stored_job(store, &user, job).await.state, JobState::Pending);
    store
        .finish_job(job, &end(JobState::Error))
        .await
        .expect("end");
    let v = stored_volume(store, &volume).await;
    assert_eq!((v.size, v.state), (20, VolumeState::Ready));
}

async fn new_user(store: &dyn Store, email: &str, is_admin: bool) -> User {
    store
        .create_user(&NewUser {
            tenant: "t".into(),
            email: email.into(),
            name: email.split('@').next().unwrap_or(email).into(),
            password_hash: "x".into(),
            is_admin,
            now_ms: 5,
        })
        .await
        .expect("user created")
}

pub(crate) async fn users_are_listed_changed_and_ended_sessions_raise_the_generation(
    store: &dyn Store,
) {
    let admin = new_user(store, "admin@example.com", true).await;
    let user = new_user(store, "user@example.com", false).await;
    assert!(!user.disabled);
    assert_eq!((user.token_generation, user.created_ms), (0, 5));
    let listed = store.list_users().await.expect("list");
    let emails: Vec<&str> = listed.iter().map(|u| u.email.as_str()).collect();
    assert_eq!(emails, ["admin@example.com", "user@example.com"]);
    add_token(store, user.id, "u1", "f-u", 99).await;
    add_token(store, admin.id, "a1", "f-a", 99).await;

    // A change without end_sessions leaves tokens and generation alone.
    let promoted = store
        .update_user(
            user.id,
            &UserChange {
                is_admin: Some(true),
                ..Default::default()
            },
        )
        .await
        .expect("promoted");
    assert!(promoted.is_admin && !promoted.disabled);
    assert_eq!(promoted.token_generation, 0);
    assert!(!token(store, "u1").await.expect("u1").revoked);

    let disabled = store
        .update_user(
            user.id,
            &UserChange {
                disabled: Some(true),
                password_hash: Some("new-hash".into()),
                end_sessions: true,
                ..Default::default()
            },
        )
        .await
        .expect("disabled");
    assert!(disabled.disabled && disabled.is_admin);
    assert_eq!(disabled.token_generation, 1);
    assert_eq!(disabled.password_hash, "new-hash");
    assert!(token(store, "u1").await.expect("u1").revoked);
    assert!(
        !token(store, "a1").await.expect("a1").revoked,
        "another user's tokens stay"
    );
    let read = store
        .user_by_id(user.id)
        .await
        .expect("read")
        .expect("user");
    assert!(read.disabled);
    assert_eq!(read.token_generation, 1);
    assert!(matches!(
        store.update_user(9999, &UserChange::default()).await,
        Err(StoreError::NotFound)
    ));
}

pub(crate) async fn the_last_enabled_administrator_cannot_be_disabled_demoted_or_deleted(
    store: &dyn Store,
) {
    let admin = new_user(store, "admin@example.com", true).await;
    let other = new_user(store, "other@example.com", true).await;
    add_token(store, admin.id, "a1", "f-a", 99).await;
    // Two admins: one may go.
    store
        .update_user(
            other.id,
            &UserChange {
                disabled: Some(true),
                ..Default::default()
            },
        )
        .await
        .expect("one of two disabled");
    let last = |r: StoreResult<User>| matches!(r, Err(StoreError::Conflict(m)) if m == LAST_ADMIN);
    assert!(last(
        store
            .update_user(
                admin.id,
                &UserChange {
                    disabled: Some(true),
                    end_sessions: true,
                    ..Default::default()
                },
            )
            .await
    ));
    assert!(last(
        store
            .update_user(
                admin.id,
                &UserChange {
                    is_admin: Some(false),
                    ..Default::default()
                },
            )
            .await
    ));
    assert!(matches!(
        store.delete_user(admin.id).await,
        Err(StoreError::Conflict(m)) if m == LAST_ADMIN
    ));
    // Nothing changed by the refusals.
    let read = store
        .user_by_id(admin.id)
        .await
        .expect("read")
        .expect("admin");
    assert!(read.is_admin && !read.disabled);
    assert_eq!(read.token_generation, 0);
    assert!(!token(store, "a1").await.expect("a1").revoked);
    // The disabled one comes back; then the first may be demoted.
    store
        .update_user(
            other.id,
            &UserChange {
                disabled: Some(false),
                ..Default::default()
            },
        )
        .await
        .expect("enabled");
    store
        .update_user(
            admin.id,
            &UserChange {
                is_admin: Some(false),
                ..Default::default()
            },
        )
        .await
        .expect("demoted");
}

pub(crate) async fn deleting_a_user_removes_its_tokens_and_keeps_its_jobs(store: &dyn Store) {
    let (owner, _, job_id) = volume_on_m1(store).await;
    let user = new_user(store, "user@example.com", false).await;
    add_token(store, user.id, "u1", "f-u", 99).await;
    store.delete_user(user.id).await.expect("deleted");
    assert!(store.user_by_id(user.id).await.expect("read").is_none());
    assert!(store
        .user_by_email("user@example.com")
        .await
        .expect("read")
        .is_none());
    assert!(token(store, "u1").await.is_none());
    assert!(matches!(
        store.delete_user(user.id).await,
        Err(StoreError::NotFound)
    ));
    // The volume's owner goes too; its job keeps who started it.
    let admin = new_user(store, "admin@example.com", true).await;
    store.delete_user(owner.id).await.expect("owner deleted");
    let job = stored_job(store, &admin, job_id).await;
    assert_eq!(job.useremail, "u@example.com");
    // The e-mail can be used again.
    new_user(store, "user@example.com", false).await;
}

pub(crate) async fn a_job_keeps_its_volumes_name_and_is_found_by_it_after_the_delete(
    store: &dyn Store,
) {
    let (user, volume, create_job) = volume_on_m1(store).await;
    let resize_job = start_resize(store, &user, &volume, false).await;
    assert_eq!(stored_job(store, &user, create_job).await.object_name, "v");
    assert_eq!(stored_job(store, &user, resize_job).await.object_name, "v");
    store
        .finish_job(resize_job, &end(JobState::Done))
        .await
        .expect("done");
    store.delete_volume(&volume).await.expect("deleted");

    let by = |object: &str| JobFilter {
        object: Some(object.into()),
        page: 1,
        count: 10,
        ..Default::default()
    };
    let ids = |jobs: Vec<Job>| jobs.iter().map(|j| j.id).collect::<Vec<_>>();
    let by_name = store
        .list_jobs(user.tenant_id, &by("v"))
        .await
        .expect("list");
    assert!(by_name
        .iter()
        .all(|j| j.object_name == "v" && j.object == volume));
    assert_eq!(ids(by_name), [resize_job, create_job]);
    let by_id = store
        .list_jobs(user.tenant_id, &by(&volume))
        .await
        .expect("list");
    assert_eq!(ids(by_id), [resize_job, create_job]);
    let none = store
        .list_jobs(user.tenant_id, &by("w"))
        .await
        .expect("list");
    assert!(none.is_empty());
}

/// Medium `id` of 20 GiB in `/media/{id}` on `node` in `zone`.
fn medium_on(id: &str, node: &str, zone: &str) -> MediumRecord {
    MediumRecord {
        medium: svs_domain::Medium {
            id: id.into(),
            node: node.into(),
            zone: zone.into(),
            size: 20,
        },
        directory: format!("/media/{id}"),
    }
}

/// (id, managed by) of every medium.
async fn media_sources(store: &dyn Store) -> Vec<(String, ManagedBy)> {
    store
        .media_usage()
        .await
        .expect("usage")
        .into_iter()
        .map(|u| (u.record.medium.id, u.managed_by))
        .collect()
}

/// (name, managed by) of every node.
async fn node_sources(store: &dyn Store) -> Vec<(String, ManagedBy)> {
    store
        .list_nodes()
        .await
        .expect("nodes")
        .into_iter()
        .map(|n| (n.name, n.managed_by))
        .collect()
}

fn conflict(result: StoreResult<()>) -> String {
    match result {
        Err(StoreError::Conflict(m)) => m,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

fn in_use<T: std::fmt::Debug>(result: StoreResult<T>) -> String {
    match result {
        Err(StoreError::InUse(m)) => m,
        other => panic!("expected InUse, got {other:?}"),
    }
}

pub(crate) async fn api_media_survive_configuration_syncs_and_the_configuration_takes_over_what_it_lists(
    store: &dyn Store,
) {
    use ManagedBy::{Api, Config};
    store.sync_media(&[medium("m1", 20)]).await.expect("media");
    let m9 = medium_on("m9", "host-9", "zone-9");
    store.create_medium(&m9).await.expect("api medium");
    assert_eq!(
        media_sources(store).await,
        [("m1".into(), Config), ("m9".into(), Api)]
    );
    // Its node is made with it, in its zone.
    let nodes = store.list_nodes().await.expect("nodes");
    assert_eq!(nodes.len(), 1);
    assert_eq!(
        (
            nodes[0].name.as_str(),
            nodes[0].zone.as_str(),
            nodes[0].managed_by
        ),
        ("host-9", "zone-9", Api)
    );

    assert_eq!(
        conflict(store.create_medium(&m9).await),
        "medium 'm9' already exists"
    );
    assert_eq!(
        conflict(
            store
                .create_medium(&medium_on("m1", "host-9", "zone-9"))
                .await
        ),
        "medium 'm1' already exists"
    );
    let mut shared = medium_on("m8", "host-9", "zone-9");
    shared.directory = "/media/m1".into();
    assert_eq!(
        conflict(store.create_medium(&shared).await),
        "medium 'm1' already uses directory /media/m1; each medium needs its own"
    );
    assert_eq!(
        conflict(
            store
                .create_medium(&medium_on("m8", "host-9", "zone-8"))
                .await
        ),
        "node 'host-9' is in zone 'zone-9', not 'zone-8'"
    );
    assert_eq!(media_sources(store).await.len(), 2, "nothing added");

    // A sync of the configuration leaves API media alone...
    store.sync_media(&[medium("m1", 20)]).await.expect("sync");
    assert_eq!(
        media_sources(store).await,
        [("m1".into(), Config), ("m9".into(), Api)]
    );
    // ...takes over one it lists...
    store
        .sync_media(&[medium("m1", 20), m9.clone()])
        .await
        .expect("sync");
    assert_eq!(
        media_sources(store).await,
        [("m1".into(), Config), ("m9".into(), Config)]
    );
    // ...which it then forgets like its own.
    store.sync_media(&[medium("m1", 20)]).await.expect("sync");
    assert_eq!(media_sources(store).await, [("m1".into(), Config)]);
}

pub(crate) async fn a_medium_is_resized_and_removed_only_within_what_it_holds(store: &dyn Store) {
    let (_user, volume, _) = volume_on_m1(store).await;
    assert_eq!(
        in_use(store.set_medium_size("m1", 9).await),
        "medium 'm1' cannot shrink to 9 GiB: 10 GiB of it is in use (slices, snapshots and \
         running jobs' bookings)"
    );
    store.set_medium_size("m1", 10).await.expect("down to use");
    store.set_medium_size("m1", 50).await.expect("grow");
    let usage = store.media_usage().await.expect("usage");
    assert_eq!(usage[0].record.medium.size, 50);
    assert!(matches!(
        store.set_medium_size("nope", 5).await,
        Err(StoreError::NotFound)
    ));

    assert_eq!(
        in_use(store.delete_medium("m1").await),
        "medium 'm1' holds slices of volume(s) 'v'; delete those volumes first"
    );
    let removed = store.delete_medium("m2").await.expect("empty medium goes");
    assert_eq!(removed.directory, "/media/m2");
    assert!(matches!(
        store.delete_medium("m2").await,
        Err(StoreError::NotFound)
    ));
    store.delete_volume(&volume).await.expect("volume gone");
    store.delete_medium("m1").await.expect("now empty");
    assert!(store.media_usage().await.expect("usage").is_empty());
}

pub(crate) async fn a_node_is_removed_only_when_nothing_depends_on_it(store: &dyn Store) {
    let (user, volume, _) = volume_on_m1(store).await;
    let media_node = |name: &str| NodeRecord {
        name: name.into(),
        zone: String::new(),
        address: None,
        managed_by: ManagedBy::Config,
    };
    store
        .sync_nodes(&[media_node("node-m1"), media_node("node-m2")])
        .await
        .expect("nodes");
    store.create_node(&node("host-7")).await.expect("node");
    store
        .set_node_credential(&credential("host-7", "c1"))
        .await
        .expect("credential");
    let job = store
        .create_attachment(
            &NewAttachment {
                volume_id: volume.clone(),
                snapshot: "top".into(),
                node: "host-7".into(),
                tenant_id: user.tenant_id,
                readonly: false,
                mountpoint: "/mnt".into(),
                export_name: "e".into(),
                now_ms: 4,
                manager: AttachmentManager::Agent,
            },
            &new_job(
                &user,
                JobSpec::AttachmentCreate(AttachmentArgs {
                    node: "host-7".into(),
                    readonly: false,
                    mountpoint: "/mnt".into(),
                    snapshot: "top".into(),
                }),
                &volume,
            ),
        )
        .await
        .expect("attachment");
    store
        .finish_job(job, &end(JobState::Done))
        .await
        .expect("done");

    assert_eq!(
        in_use(store.delete_node("node-m1").await),
        "node 'node-m1' has media holding slices of volume(s) 'v'; delete those volumes, \
         then remove the node's media"
    );
    assert_eq!(
        in_use(store.delete_node("host-7").await),
        "node 'host-7' has attachments of volume(s) 'v'; detach them first"
    );
    assert_eq!(
        in_use(store.delete_node("node-m2").await),
        "node 'node-m2' has media 'm2'; remove them first"
    );
    store
        .delete_attachment(&volume, "top", "host-7")
        .await
        .expect("detached");
    store.delete_node("host-7").await.expect("removed");
    // Its credential went with it.
    assert_eq!(store.node_credential("c1").await.expect("read"), None);
    assert!(store.node_agents().await.expect("agents").is_empty());
    assert!(matches!(
        store.delete_node("host-7").await,
        Err(StoreError::NotFound)
    ));
    store.delete_medium("m2").await.expect("medium");
    store
        .delete_node("node-m2")
        .await
        .expect("node without media");
    assert_eq!(
        node_sources(store).await,
        [("node-m1".into(), ManagedBy::Config)]
    );
}

pub(crate) async fn configured_nodes_no_longer_listed_go_unless_something_depends_on_them(
    store: &dyn Store,
) {
    use ManagedBy::{Api, Config};
    let configured = |name: &str| NodeRecord {
        name: name.into(),
        zone: "z".into(),
        address: None,
        managed_by: Config,
    };
    store
        .sync_nodes(&[configured("a"), configured("b")])
        .await
        .expect("nodes");
    store.create_node(&node("c")).await.expect("api node");
    store.sync_nodes(&[configured("a")]).await.expect("b goes");
    assert_eq!(
        node_sources(store).await,
        [("a".into(), Config), ("c".into(), Api)]
    );
    // The configuration takes over a node it lists.
    store
        .sync_nodes(&[configured("a"), configured("c")])
        .await
        .expect("sync");
    assert_eq!(
        node_sources(store).await,
        [("a".into(), Config), ("c".into(), Config)]
    );
    store
        .create_medium(&medium_on("mx", "a", "z"))
        .await
        .expect("medium on a");
    assert_eq!(
        in_use(store.sync_nodes(&[]).await),
        "node 'a' is no longer in the configuration file, but node 'a' has media 'mx'; \
         remove them first"
    );
    assert_eq!(
        node_sources(store).await,
        [("a".into(), Config), ("c".into(), Config)],
        "nothing changed"
    );
}
