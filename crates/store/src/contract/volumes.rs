//! Volumes: listing, placement, resize plans, movements and their bookings.

use super::*;

pub async fn volumes_are_listed_by_name_whole_or_a_page_at_a_time(store: &dyn Store) {
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
    // Every tenant's, for the metrics.
    assert_eq!(
        names(store.all_volumes().await.expect("all")),
        ["a", "b", "c", "d", "e"]
    );
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

pub async fn a_copy_checkpoint_is_kept_until_its_step_switches(store: &dyn Store) {
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
    store.switch_slice(&step, &[]).await.expect("switch");
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

pub async fn a_movement_books_switches_and_releases_space_atomically(store: &dyn Store) {
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
    let moved = ["Copied c0-k0".to_string(), "Moved c0-k0".to_string()];
    store.switch_slice(&steps[0], &moved).await.expect("switch");
    let media = store.media_usage().await.expect("usage");
    assert_eq!(
        usage(&media, "m1"),
        (0, 10, 10),
        "the source stays booked until the job ends (a cancel moves the slice back there)"
    );
    assert_eq!(
        usage(&media, "m2"),
        (10, 2, 8),
        "only the growth stays booked"
    );
    assert!(
        store.switch_slice(&steps[0], &moved).await.is_err(),
        "a slice is never switched from a medium it is not on"
    );

    store
        .complete_resize(job_id, &volume, 12, 12, &end(JobState::Done))
        .await
        .expect("complete");
    let media = store.media_usage().await.expect("usage");
    assert_eq!(usage(&media, "m2"), (12, 0, 8));
    assert_eq!(usage(&media, "m1"), (0, 0, 20), "free once the job ended");
    let v = stored_volume(store, &volume).await;
    assert_eq!(
        (v.size, v.state, v.job.is_none()),
        (12, VolumeState::Ready, true)
    );
    let job = stored_job(store, &user, job_id).await;
    assert_eq!(job.state, JobState::Done);
    assert_eq!(
        job.details,
        ["found", "Copied c0-k0", "Moved c0-k0"],
        "the plan's detail once; the switch's with it, not again when refused"
    );
}

pub async fn a_failed_job_releases_its_reservations_and_frees_the_volume(store: &dyn Store) {
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

pub async fn placing_slices_twice_keeps_the_first_placement(store: &dyn Store) {
    let (_, volume, _) = volume_on_m1(store).await;
    let again = store
        .place_slices(&volume, &one_slice("m2", 10))
        .await
        .expect("idempotent");
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].slice.medium, "m1");
}

pub async fn cached_volume_reads_see_every_committed_change(store: &dyn Store) {
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

pub async fn a_placement_from_a_stale_reading_cannot_overbook_a_medium(store: &dyn Store) {
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

pub async fn a_resize_plan_from_a_stale_reading_cannot_overbook_a_medium(store: &dyn Store) {
    let (user, volume, first_slice, grow_on_m2) = vol_1_on_m1_and_vol_2_on_m2(store).await;
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

pub async fn a_resumed_job_keeps_its_booking_when_media_have_filled_since(store: &dyn Store) {
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

pub async fn a_used_policy_keeps_its_resiliency_and_cannot_be_deleted(store: &dyn Store) {
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

pub async fn a_failed_creation_leaves_the_volume_creating(store: &dyn Store) {
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

pub async fn a_recorded_resize_sizes_the_volume_while_its_job_goes_on(store: &dyn Store) {
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

pub async fn a_job_keeps_its_volumes_name_and_is_found_by_it_after_the_delete(store: &dyn Store) {
    let (user, volume, create_job) = volume_on_m1(store).await;
    let resize_job = start_resize(store, &user, &volume, false).await;
    assert_eq!(stored_job(store, &user, create_job).await.object_name, "v");
    assert_eq!(stored_job(store, &user, resize_job).await.object_name, "v");
    finish(store, resize_job).await;
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
