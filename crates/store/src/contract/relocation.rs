//! Moving slices off media: draining a medium (it takes nothing new while
//! its drain runs), and jobs that move slices of many volumes, holding
//! each volume while they move its slices.

use super::*;
use svs_domain::{DrainArgs, RebalanceArgs, SlicePlacement};

/// The user's drain of `medium`.
fn drain_job(user: &User, medium: &str) -> NewJob {
    new_job(
        user,
        JobSpec::MediaDrain(DrainArgs {
            medium: medium.into(),
        }),
        medium,
    )
}

/// The user's rebalance of every medium (object `all`).
fn rebalance_job(user: &User) -> NewJob {
    let args = RebalanceArgs {
        node: None,
        zone: None,
    };
    let object = args.scope();
    new_job(user, JobSpec::MediaRebalance(args), &object)
}

/// (failed, draining) of medium `id`, as `media_usage` says.
async fn medium_flags(store: &dyn Store, id: &str) -> (bool, bool) {
    let all = store.media_usage().await.expect("usage");
    let m = all
        .iter()
        .find(|m| m.record.medium.id == id)
        .expect("medium");
    (m.failed, m.draining)
}

/// The id of the unfinished job working on the volume, if any.
async fn active_job(store: &dyn Store, volume: &str) -> Option<i64> {
    store
        .active_volume_job(volume)
        .await
        .expect("read")
        .map(|j| j.id)
}

pub async fn relocation_a_medium_has_one_drain_at_a_time_and_is_undrained_once_it_ends(
    store: &dyn Store,
) {
    let (user, _, _) = volume_on_m1(store).await;
    assert_eq!(medium_flags(store, "m1").await, (false, false));

    let (drain, started) = store
        .drain_medium("m1", &drain_job(&user, "m1"))
        .await
        .expect("drain");
    assert!(started);
    assert_eq!(medium_flags(store, "m1").await, (false, true));
    assert_eq!(
        medium_flags(store, "m2").await,
        (false, false),
        "only the drained medium"
    );
    let job = stored_job(store, &user, drain).await;
    assert_eq!(
        (
            job.kind.as_str(),
            job.object.as_str(),
            job.object_name.as_str(),
            job.state,
            job.data_movement,
        ),
        ("media_drain", "m1", "m1", JobState::Pending, true)
    );

    // Asking again answers the drain under way and starts none.
    assert_eq!(
        store
            .drain_medium("m1", &drain_job(&user, "m1"))
            .await
            .expect("drain again"),
        (drain, false)
    );
    let unfinished = store.unfinished_jobs().await.expect("jobs");
    assert_eq!(
        unfinished.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![drain]
    );

    let refused = format!(
        "medium 'm1' is being drained by job {drain}; cancel it first with DELETE /jobs/{drain}"
    );
    assert_eq!(conflict(store.undrain_medium("m1").await), refused);
    store.set_job_running(drain, 4).await.expect("running");
    assert_eq!(conflict(store.undrain_medium("m1").await), refused);
    assert_eq!(medium_flags(store, "m1").await, (false, true));

    // A Draining medium stays so across a configuration sync (a restart).
    store
        .sync_media(&[medium("m1", 20), medium("m2", 20)])
        .await
        .expect("sync");
    assert_eq!(medium_flags(store, "m1").await, (false, true));

    // The drain's end frees what it held; the medium stays Draining.
    assert!(store.hold_volume("vol-1", drain).await.expect("hold"));
    finish(store, drain).await;
    assert_eq!(active_job(store, "vol-1").await, None);
    assert_eq!(medium_flags(store, "m1").await, (false, true));

    store.undrain_medium("m1").await.expect("undrain");
    assert_eq!(medium_flags(store, "m1").await, (false, false));
    store
        .undrain_medium("m1")
        .await
        .expect("undrain a Ready medium");
    assert_eq!(medium_flags(store, "m1").await, (false, false));

    // Once the drain ended, another may start.
    let (again, started) = store
        .drain_medium("m1", &drain_job(&user, "m1"))
        .await
        .expect("drain");
    assert!(started);
    assert_ne!(again, drain);
    assert_eq!(medium_flags(store, "m1").await, (false, true));
}

pub async fn relocation_a_failed_or_unknown_medium_is_neither_drained_nor_undrained(
    store: &dyn Store,
) {
    let (user, _, _) = volume_on_m1(store).await;
    assert!(store.set_medium_failed("m2", 5).await.expect("fail"));
    assert_eq!(
        conflict(
            store
                .drain_medium("m2", &drain_job(&user, "m2"))
                .await
                .map(|_| ())
        ),
        "medium 'm2' has failed; it holds nothing to drain"
    );
    assert_eq!(medium_flags(store, "m2").await, (true, false));
    assert!(
        store.unfinished_jobs().await.expect("jobs").is_empty(),
        "no drain recorded"
    );
    assert_eq!(
        conflict(store.undrain_medium("m2").await),
        "medium 'm2' has failed"
    );
    assert_eq!(medium_flags(store, "m2").await, (true, false));

    assert!(matches!(
        store.drain_medium("m9", &drain_job(&user, "m9")).await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store.undrain_medium("m9").await,
        Err(StoreError::NotFound)
    ));
    assert!(store.unfinished_jobs().await.expect("jobs").is_empty());

    // A Draining medium fails as a Ready one does.
    let (drain, _) = store
        .drain_medium("m1", &drain_job(&user, "m1"))
        .await
        .expect("drain");
    assert!(store.set_medium_failed("m1", 6).await.expect("fail"));
    assert_eq!(medium_flags(store, "m1").await, (true, false));
    assert_eq!(
        conflict(store.undrain_medium("m1").await),
        "medium 'm1' has failed"
    );
    assert_eq!(
        stored_job(store, &user, drain).await.state,
        JobState::Pending,
        "its drain is the job runner's to end"
    );
}

pub async fn relocation_a_job_holds_a_free_volume_until_it_releases_it_or_ends(store: &dyn Store) {
    let (user, volume, _) = volume_on_m1(store).await;
    let rebalance = store.create_job(&rebalance_job(&user)).await.expect("job");
    assert_eq!(active_job(store, &volume).await, None);

    assert!(store.hold_volume(&volume, rebalance).await.expect("hold"));
    assert_eq!(active_job(store, &volume).await, Some(rebalance));
    let held = stored_volume(store, &volume).await;
    assert_eq!(
        (held.state, held.job.map(|j| j.0)),
        (VolumeState::Ready, Some(rebalance)),
        "held, its state unchanged"
    );
    assert!(
        store.hold_volume(&volume, rebalance).await.expect("hold"),
        "holding again"
    );

    let other = store.create_job(&rebalance_job(&user)).await.expect("job");
    assert!(
        !store.hold_volume(&volume, other).await.expect("hold"),
        "another job holds it"
    );
    store.release_volume(&volume, other).await.expect("release");
    assert_eq!(
        active_job(store, &volume).await,
        Some(rebalance),
        "a job not holding it releases nothing"
    );

    store
        .release_volume(&volume, rebalance)
        .await
        .expect("release");
    assert_eq!(active_job(store, &volume).await, None);
    let freed = stored_volume(store, &volume).await;
    assert_eq!((freed.state, freed.job), (VolumeState::Ready, None));
    assert!(
        !store.hold_volume("vol-9", rebalance).await.expect("hold"),
        "no such volume"
    );

    // A volume busy with its own job cannot be held.
    let resize = start_resize(store, &user, &volume, false).await;
    assert!(!store.hold_volume(&volume, rebalance).await.expect("hold"));
    assert_eq!(active_job(store, &volume).await, Some(resize));
    finish(store, resize).await;

    // The holder's end frees the volume.
    assert!(store.hold_volume(&volume, rebalance).await.expect("hold"));
    finish(store, rebalance).await;
    assert_eq!(active_job(store, &volume).await, None);
    let freed = stored_volume(store, &volume).await;
    assert_eq!((freed.state, freed.job), (VolumeState::Ready, None));
    assert!(store.hold_volume(&volume, other).await.expect("hold"));
}

pub async fn relocation_a_job_on_no_volume_is_named_by_its_object(store: &dyn Store) {
    let (user, _, create) = volume_on_m1(store).await;
    let rebalance = store.create_job(&rebalance_job(&user)).await.expect("job");
    let job = stored_job(store, &user, rebalance).await;
    assert_eq!(
        (
            job.kind.as_str(),
            job.object.as_str(),
            job.object_name.as_str(),
            job.state,
            job.data_movement,
        ),
        ("media_rebalance", "all", "all", JobState::Pending, true)
    );
    let node = store
        .create_job(&new_job(
            &user,
            JobSpec::MediaRebalance(RebalanceArgs {
                node: Some("node-m1".into()),
                zone: None,
            }),
            "node:node-m1",
        ))
        .await
        .expect("job");
    assert_eq!(
        stored_job(store, &user, node).await.object_name,
        "node:node-m1"
    );
    assert_eq!(
        stored_job(store, &user, create).await.object_name,
        "v",
        "a volume's job keeps the volume's name"
    );
}

pub async fn relocation_step_slices_lists_each_slice_of_the_job_s_steps_once(store: &dyn Store) {
    let (user, volume, _) = volume_on_m1(store).await;
    store
        .sync_media(&[medium("m1", 20), medium("m2", 20), medium("m3", 20)])
        .await
        .expect("media");
    let policy = policy_p(store, &user).await;
    let create = add_volume(store, &user, policy.id, "vol-2", "v2", 2).await;
    let placed = store
        .place_slices(
            "vol-2",
            &[
                SlicePlacement {
                    copy: 0,
                    column: 0,
                    medium: "m2".into(),
                    size: 2,
                },
                SlicePlacement {
                    copy: 1,
                    column: 0,
                    medium: "m1".into(),
                    size: 2,
                },
            ],
        )
        .await
        .expect("slices");
    finish(store, create).await;
    let second_copy = placed
        .iter()
        .find(|s| s.slice.copy == 1)
        .expect("copy 1")
        .slice
        .id;
    let slice = first_slice_id(store, &volume).await;

    let job = store.create_job(&rebalance_job(&user)).await.expect("job");
    assert!(store.step_slices(job).await.expect("slices").is_empty());
    let step = |slice_id, from: &str, to: &str, size| SliceMove {
        slice_id,
        from_medium: from.into(),
        to_medium: to.into(),
        old_size: size,
        new_size: size,
    };
    let plan = ResizePlan {
        new_slice_size: 2,
        growths: Vec::new(),
        moves: vec![
            step(second_copy, "m1", "m3", 2),
            step(slice, "m1", "m2", 10),
        ],
        reservations: vec![
            Reservation {
                medium: "m3".into(),
                gib: 2,
            },
            Reservation {
                medium: "m2".into(),
                gib: 10,
            },
        ],
    };
    store
        .save_resize_plan(job, &plan, None)
        .await
        .expect("plan");
    // A second step of the first slice: still listed once, first.
    store
        .save_undo_steps(job, &[step(second_copy, "m3", "m1", 2)])
        .await
        .expect("undo steps");
    assert_eq!(store.resize_steps(job).await.expect("steps").len(), 3);

    let vol_2_copy_1 = StepSlice {
        slice_id: second_copy,
        volume_id: "vol-2".into(),
        volume_name: "v2".into(),
        copy: 1,
        column: 0,
    };
    let vol_1 = StepSlice {
        slice_id: slice,
        volume_id: volume.clone(),
        volume_name: "v".into(),
        copy: 0,
        column: 0,
    };
    assert_eq!(
        store.step_slices(job).await.expect("slices"),
        vec![vol_2_copy_1, vol_1.clone()]
    );
    assert!(store
        .step_slices(job + 1000)
        .await
        .expect("slices")
        .is_empty());

    // A slice whose volume is gone is not listed.
    store.delete_volume("vol-2").await.expect("delete");
    assert_eq!(store.step_slices(job).await.expect("slices"), vec![vol_1]);
}

/// What `volume_by_id` and `volume_slices` say of each of `ids`, as the
/// planner's one read must answer it.
async fn placed_one_by_one(store: &dyn Store, ids: &[&str]) -> Vec<PlacedVolume> {
    let mut placed = Vec::new();
    for id in ids {
        let volume = stored_volume(store, id).await;
        placed.push(PlacedVolume {
            volume_id: volume.id,
            name: volume.name,
            resiliency: volume.resiliency,
            zone: volume.zone,
            slices: store.volume_slices(id).await.expect("slices"),
        });
    }
    placed
}

/// The planner's read of the volumes on `media`.
async fn placed_on(store: &dyn Store, media: &[&str]) -> Vec<PlacedVolume> {
    let media: Vec<String> = media.iter().map(|m| m.to_string()).collect();
    store
        .placed_volumes_on(&media)
        .await
        .expect("placed volumes")
}

pub async fn relocation_placed_volumes_on_media_equal_their_volume_slices(store: &dyn Store) {
    // vol-1 on m1 and vol-2 on m2, of tenant t (policy p, no zone).
    vol_1_on_m1_and_vol_2_on_m2(store).await;
    store
        .sync_media(&[medium("m1", 20), medium("m2", 20), medium("m3", 20)])
        .await
        .expect("media");
    // vol-3, of another tenant, under a resilient policy and kept in a
    // zone: copy 0 on m3, copy 1 on m2 (recorded copy 1 first).
    let (other, _) = testing::user_and_policy_in(store, "t2", "o@example.com", true).await;
    let resilient = store
        .create_policy(
            other.tenant_id,
            &PolicyWrite {
                name: "r".into(),
                resiliency: Resiliency {
                    media: 1,
                    node: 0,
                    zone: 0,
                },
                attributes: Default::default(),
                by_name: other.name.clone(),
                by_email: other.email.clone(),
                now_ms: 1,
            },
        )
        .await
        .expect("policy");
    let mut vol_3 = testing::new_volume(&other, resilient.id, "vol-3", "v3", 4);
    vol_3.zone = Some("zone-m3".into());
    let create = store
        .create_volume(&vol_3, &new_job(&other, create_spec("v3", 4), "vol-3"))
        .await
        .expect("volume");
    let copy = |copy, medium: &str| SlicePlacement {
        copy,
        column: 0,
        medium: medium.into(),
        size: 4,
    };
    store
        .place_slices("vol-3", &[copy(1, "m2"), copy(0, "m3")])
        .await
        .expect("slices");
    finish(store, create).await;

    let on_m3 = placed_on(store, &["m3"]).await;
    assert_eq!(on_m3, placed_one_by_one(store, &["vol-3"]).await);
    assert_eq!(
        (
            on_m3[0].name.as_str(),
            on_m3[0].resiliency.media,
            on_m3[0].zone.as_deref()
        ),
        ("v3", 1, Some("zone-m3")),
        "its policy's resiliency and its own zone"
    );
    assert_eq!(
        on_m3[0]
            .slices
            .iter()
            .map(|s| (s.slice.copy, s.slice.medium.as_str(), s.node.as_str()))
            .collect::<Vec<_>>(),
        [(0, "m3", "node-m3"), (1, "m2", "node-m2")],
        "every slice, on any medium, by copy"
    );
    assert_eq!(
        placed_on(store, &["m1"]).await,
        placed_one_by_one(store, &["vol-1"]).await
    );
    assert_eq!(
        placed_on(store, &["m2"]).await,
        placed_one_by_one(store, &["vol-2", "vol-3"]).await
    );
    assert_eq!(
        placed_on(store, &["m3", "m1"]).await,
        placed_one_by_one(store, &["vol-1", "vol-3"]).await,
        "two media: by volume id"
    );
    assert_eq!(
        placed_on(store, &["m2", "m9", "m1", "m2"]).await,
        placed_one_by_one(store, &["vol-1", "vol-2", "vol-3"]).await,
        "each volume once; an unknown medium holds nothing"
    );
    assert!(placed_on(store, &["m9"]).await.is_empty());
    assert!(placed_on(store, &[]).await.is_empty());

    // A copy marked lost, and a slice on a failed medium, are lost.
    assert!(store
        .mark_slice_lost("vol-3", 1, 0, "m2", 5)
        .await
        .expect("lost"));
    assert!(store.set_medium_failed("m1", 6).await.expect("fail"));
    let on_both = placed_on(store, &["m1", "m3"]).await;
    assert_eq!(on_both, placed_one_by_one(store, &["vol-1", "vol-3"]).await);
    assert_eq!(
        on_both
            .iter()
            .flat_map(|v| &v.slices)
            .map(|s| (s.slice.medium.as_str(), s.lost, s.stale_generation))
            .collect::<Vec<_>>(),
        [
            ("m1", true, None),
            ("m3", false, None),
            ("m2", true, Some(0))
        ]
    );
}
