//! Behaviour every `Store` implementation must have, written against
//! `&dyn Store`. A backend runs the whole suite with
//! `svs_store::store_contract_tests!(open, two_handles: open_two)` (feature
//! `testing` outside this crate):
//!
//! - `open` is an async fn returning `(guard, store)`: the guard (a temporary
//!   directory, a scratch database) lives as long as the test, and `store`
//!   starts empty;
//! - `open_two` returns `(guard, first, second)`: two handles on one empty
//!   database with connections of their own, as two processes (two `svs
//!   serve` instances) would hold. Every booking rule is raced across them
//!   (`pairs.rs`), so a backend must enforce the rules inside its own
//!   transactions (a write lock, row locks or serializable retries), never
//!   through memory one handle keeps.

pub(crate) use crate::testing::{
    self, add_volume, create_spec, end, new_job, one_slice, user_and_policy,
};
use crate::*;
use svs_domain::{
    place_volume, AttachmentArgs, AttachmentManager, Consistency, JobSpec, JobState, MediumState,
    PlacementRequest, Reservation, Resiliency, ResizePlan, ResizeVolumeArgs, SliceGrowth,
    SliceMove, SnapshotArgs, SnapshotState, VolumeState, VolumeType,
};

mod claims;
mod infrastructure;
mod job_control;
mod keys;
mod leases;
mod pairs;
mod relocation;
mod snapshots;
mod storage_nodes;
mod users;
mod volumes;

pub use claims::*;
pub use infrastructure::*;
pub use job_control::*;
pub use keys::*;
pub use leases::*;
pub use pairs::*;
pub use relocation::*;
pub use snapshots::*;
pub use storage_nodes::*;
pub use users::*;
pub use volumes::*;

/// One `#[tokio::test]` per behaviour below, each on a fresh store from
/// `$open`; with `two_handles:`, one more per race of two handles (`pairs.rs`).
#[macro_export]
macro_rules! store_contract_tests {
    ($open:path, two_handles: $open_two:path) => {
        $crate::store_contract_tests!($open);
        $crate::store_contract_tests!(@pairs $open_two;
            two_handles_never_both_place_a_volume_in_the_same_space,
            two_handles_never_both_book_a_resize_in_the_same_space,
            two_handles_never_both_create_a_volume_of_one_name,
            two_handles_never_both_start_a_job_on_one_volume,
            two_handles_never_both_rotate_one_refresh_token,
            two_handles_never_both_disable_one_of_the_last_two_administrators,
            two_handles_never_both_issue_a_live_credential_for_one_node,
            two_handles_never_get_the_same_front_epoch,
            two_handles_never_both_make_a_current_signing_key,
            two_handles_rotating_at_once_leave_one_current_key,
            two_handles_never_both_acquire_one_free_lease,
            two_handles_never_both_claim_one_job,
        );
    };
    (@pairs $open_two:path; $($name:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let (_guard, first, second) = $open_two().await;
                $crate::contract::$name(&first, &second).await;
            }
        )+
    };
    ($open:path) => {
        $crate::store_contract_tests!(@each $open;
            a_medium_holding_slices_cannot_disappear_or_shrink,
            the_first_signing_key_ensured_stays_current,
            a_rotation_retires_the_current_key_and_drops_keys_retired_before_the_limit,
            a_rotation_to_a_stored_kid_is_refused_and_changes_nothing,
            a_rotation_on_a_store_without_keys_makes_the_key_current,
            a_free_lease_is_granted_and_refused_to_others_while_it_runs,
            an_expired_lease_goes_to_another_owner_with_a_higher_epoch,
            renewing_a_lease_keeps_its_epoch_and_extends_it,
            a_lease_released_by_its_owner_is_free_at_once,
            a_release_by_another_owner_changes_nothing,
            a_job_is_claimed_by_one_owner_until_its_lease_runs_out,
            a_node_s_front_report_replaces_its_last_one,
            a_write_under_a_taken_over_lease_is_refused_and_changes_nothing,
            a_released_job_is_claimable_at_once_and_a_finished_one_never,
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
            a_lost_copy_is_lost_alone_until_it_moves,
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
            a_storage_node_registers_its_media_and_claims_no_other,
            a_storage_node_drops_empty_media_and_fails_those_holding_slices,
            an_offline_storage_node_loses_its_copies_and_they_stay_lost_when_it_returns,
            a_new_or_revoked_credential_changes_the_slice_credential,
            node_copies_list_every_copy_on_the_nodes_media,
            the_front_epoch_only_grows,
            a_volume_front_node_is_wanted_of_it_while_the_volume_is_attached,
            a_lost_copy_records_the_generation_it_missed,
            a_node_medium_failed_by_a_front_records_the_generation_its_copies_missed,
            job_control_a_cancel_asked_for_first_wins_over_a_later_commit,
            job_control_a_commit_first_refuses_a_later_cancel,
            job_control_a_cancel_of_another_tenant_s_or_an_ended_job_changes_nothing,
            job_control_the_jobs_asked_about_with_a_cancel_are_listed,
            job_control_only_the_tenant_s_ended_job_is_deleted_with_its_steps,
            job_control_a_cancel_s_undo_steps_are_recorded_once,
            job_control_a_switched_slice_keeps_its_old_size_booked_on_its_source_until_the_job_ends,
            job_control_an_undo_switch_uses_up_the_booking_on_the_original_medium,
            job_control_a_lost_slice_moving_away_books_nothing_on_its_source,
            job_control_a_job_is_paused_resumed_and_given_a_rate_until_it_ends,
            job_control_a_step_s_failures_are_counted_with_the_last_cause,
            relocation_a_medium_has_one_drain_at_a_time_and_is_undrained_once_it_ends,
            relocation_a_failed_or_unknown_medium_is_neither_drained_nor_undrained,
            relocation_a_job_holds_a_free_volume_until_it_releases_it_or_ends,
            relocation_a_job_on_no_volume_is_named_by_its_object,
            relocation_step_slices_lists_each_slice_of_the_job_s_steps_once,
            relocation_placed_volumes_on_media_equal_their_volume_slices,
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

pub(crate) fn medium(id: &str, size: u64) -> MediumRecord {
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
    finish(store, job_id).await;
    (user, "vol-1".into(), job_id)
}

/// `volume_on_m1` and a 5 GiB volume vol-2 ("v2") with its one slice on m2;
/// returns the user, vol-1, vol-1's slice and a plan that grows vol-2 on m2
/// to 13 GiB (+8 GiB booked there).
pub(crate) async fn vol_1_on_m1_and_vol_2_on_m2(
    store: &dyn Store,
) -> (User, String, i64, ResizePlan) {
    let (user, volume, _) = volume_on_m1(store).await;
    let policy = policy_p(store, &user).await;
    let create = add_volume(store, &user, policy.id, "vol-2", "v2", 5).await;
    let on_m2 = store
        .place_slices("vol-2", &one_slice("m2", 5))
        .await
        .expect("slices");
    finish(store, create).await;
    let slice = first_slice_id(store, &volume).await;
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
    (user, volume, slice, grow_on_m2)
}

/// Ends job `id` Done.
pub(crate) async fn finish(store: &dyn Store, id: i64) {
    store
        .finish_job(id, &end(JobState::Done))
        .await
        .expect("done");
}

/// The volume named "v" of the tenant, through `get_volume` (the cached read).
pub(crate) async fn read_volume(store: &dyn Store, tenant_id: i64) -> Volume {
    store
        .get_volume(tenant_id, "v")
        .await
        .expect("read")
        .expect("volume")
}

/// The id of the volume's first slice.
pub(crate) async fn first_slice_id(store: &dyn Store, volume: &str) -> i64 {
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
pub(crate) async fn stored_volume(store: &dyn Store, id: &str) -> Volume {
    store.volume_by_id(id).await.expect("read").expect("volume")
}

/// The user's job `id`.
pub(crate) async fn stored_job(store: &dyn Store, user: &User, id: i64) -> Job {
    store
        .get_job(user.tenant_id, id)
        .await
        .expect("read")
        .expect("job")
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

pub(crate) fn resize_spec(allow_data_movement: bool) -> JobSpec {
    JobSpec::VolumeModifyExtend(ResizeVolumeArgs {
        size: 20,
        allow_data_movement,
        from_size: 10,
        plan: None,
    })
}

pub(crate) fn usage(all: &[MediumUsage], id: &str) -> (u64, u64, u64) {
    let m = all
        .iter()
        .find(|m| m.record.medium.id == id)
        .expect("medium");
    (m.allocated, m.reserved, m.free())
}

/// A move of the volume's slice from m1 to m2 while it grows 10 → 12 GiB.
pub(crate) fn move_plan(slice_id: i64) -> ResizePlan {
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

pub(crate) fn node(name: &str) -> NodeRecord {
    NodeRecord {
        name: name.into(),
        zone: String::new(),
        address: Some("10.0.0.7".into()),
        managed_by: ManagedBy::Api,
    }
}

/// A user of tenant `t` created at 5 ms.
pub(crate) async fn add_user(store: &dyn Store, email: &str, is_admin: bool) -> User {
    store
        .create_user(&testing::new_user("t", email, is_admin, 5))
        .await
        .expect("user created")
}

/// Medium `id` of 20 GiB in `/media/{id}` on `node` in `zone`.
pub(crate) fn medium_on(id: &str, node: &str, zone: &str) -> MediumRecord {
    testing::medium_at(id, node, zone, 20, format!("/media/{id}"))
}

pub(crate) fn conflict(result: StoreResult<()>) -> String {
    match result {
        Err(StoreError::Conflict(m)) => m,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

pub(crate) fn in_use<T: std::fmt::Debug>(result: StoreResult<T>) -> String {
    match result {
        Err(StoreError::InUse(m)) => m,
        other => panic!("expected InUse, got {other:?}"),
    }
}
