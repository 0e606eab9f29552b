//! Snapshots: ids, names and the claim on their volume.

use super::*;

/// Starts the user's job that snapshots vol-1 (10 GiB) as `id` named `name`.
async fn snapshot(store: &dyn Store, user: &User, id: &str, name: &str) -> StoreResult<i64> {
    let snapshot = NewSnapshot {
        id: id.into(),
        volume_id: "vol-1".into(),
        tenant_id: user.tenant_id,
        name: name.into(),
        consistency: Consistency::Crash,
        volume_size: 10,
        attributes: Default::default(),
        now_ms: 5,
    };
    let spec = JobSpec::SnapshotCreate(SnapshotArgs {
        name: name.into(),
        snapshot_id: id.into(),
    });
    store
        .create_snapshot(&snapshot, &new_job(user, spec, "vol-1"))
        .await
}

pub async fn snapshots_get_growing_ids_unique_names_and_claim_their_volume(store: &dyn Store) {
    let (user, volume, _) = volume_on_m1(store).await;
    let job = snapshot(store, &user, "s-1", "daily")
        .await
        .expect("snapshot");
    // The volume is busy with the snapshot's job.
    let again = snapshot(store, &user, "s-2", "hourly").await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    assert!(
        store.snapshot_by_id("s-2").await.expect("read").is_none(),
        "nothing half-made"
    );
    finish(store, job).await;
    store
        .set_snapshot_state("s-1", SnapshotState::Ready)
        .await
        .expect("ready");
    let duplicate = snapshot(store, &user, "s-3", "daily").await;
    assert!(
        matches!(duplicate, Err(StoreError::Conflict(_))),
        "{duplicate:?}"
    );
    let job = snapshot(store, &user, "s-4", "hourly")
        .await
        .expect("second snapshot");
    finish(store, job).await;

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
    let job = snapshot(store, &user, "s-5", "later")
        .await
        .expect("third snapshot");
    finish(store, job).await;
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
