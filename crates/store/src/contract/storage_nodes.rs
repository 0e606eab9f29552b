//! Storage nodes: registrations, claims, liveness, copies, front epochs.

use super::*;

fn disk(id: &str, size: u64) -> StorageMedium {
    StorageMedium {
        id: id.into(),
        size,
        directory: format!("/srv/{id}"),
    }
}

fn registration(node: &str, media: &[StorageMedium], now_ms: i64) -> StorageRegistration {
    StorageRegistration {
        node: node.into(),
        slice_address: "127.0.0.2:7450".into(),
        front_address: Some("127.0.0.2:10809".into()),
        media: media.to_vec(),
        now_ms,
        new_slice_credential: format!("secret-{now_ms}"),
    }
}

/// `(id, node, zone, size, failed, managed_by)` of every medium.
async fn media_of(store: &dyn Store) -> Vec<(String, String, String, u64, bool, ManagedBy)> {
    store
        .media_usage()
        .await
        .expect("usage")
        .into_iter()
        .map(|m| {
            (
                m.record.medium.id,
                m.record.medium.node,
                m.record.medium.zone,
                m.record.medium.size,
                m.failed,
                m.managed_by,
            )
        })
        .collect()
}

/// A storage node sn-1 (zone z1) with media d1 and d2, and the 10 GiB
/// volume "v" with its one slice on d1.
async fn volume_on_d1(store: &dyn Store) -> (User, String) {
    let mut sn = node("sn-1");
    sn.zone = "z1".into();
    store.create_node(&sn).await.expect("node");
    store
        .register_storage_node(&registration("sn-1", &[disk("d1", 20), disk("d2", 20)], 10))
        .await
        .expect("register");
    let (user, policy) = user_and_policy(store).await;
    let job = add_volume(store, &user, policy.id, "vol-1", "v", 10).await;
    store
        .place_slices("vol-1", &one_slice("d1", 10))
        .await
        .expect("slices");
    finish(store, job).await;
    (user, "vol-1".into())
}

pub async fn a_storage_node_registers_its_media_and_claims_no_other(store: &dyn Store) {
    assert!(matches!(
        store
            .register_storage_node(&registration("nope", &[], 5))
            .await,
        Err(StoreError::NotFound)
    ));
    store.sync_media(&[medium("m1", 20)]).await.expect("media");
    let mut sn = node("sn-1");
    sn.zone = "z1".into();
    store.create_node(&sn).await.expect("node");
    store.create_node(&node("sn-2")).await.expect("node");
    let first = store
        .register_storage_node(&registration("sn-1", &[disk("d1", 20)], 10))
        .await
        .expect("register");
    assert_eq!(first.slice_credential, "secret-10");
    assert_eq!(first.added_media, ["d1"]);
    assert!(!first.came_back);
    let expected = vec![
        (
            "d1".to_string(),
            "sn-1".to_string(),
            "z1".to_string(),
            20,
            false,
            ManagedBy::Node,
        ),
        (
            "m1".to_string(),
            "node-m1".to_string(),
            "zone-m1".to_string(),
            20,
            false,
            ManagedBy::Config,
        ),
    ];
    assert_eq!(media_of(store).await, expected);
    // A heartbeat keeps the credential and updates the size.
    let again = store
        .register_storage_node(&registration("sn-1", &[disk("d1", 30)], 20))
        .await
        .expect("heartbeat");
    assert_eq!(again.slice_credential, "secret-10");
    assert!(again.added_media.is_empty());
    assert_eq!(media_of(store).await[0].3, 30);
    let nodes = store.storage_nodes().await.expect("nodes");
    assert_eq!(
        nodes,
        [StorageNodeRecord {
            name: "sn-1".into(),
            zone: "z1".into(),
            slice_address: "127.0.0.2:7450".into(),
            last_heartbeat_ms: 20,
            state: StorageNodeState::Online,
            slice_credential: Some("secret-10".into()),
            front_address: Some("127.0.0.2:10809".into()),
        }]
    );
    // Another node's medium, the file's: the whole request is refused.
    let before = media_of(store).await;
    let refused = store
        .register_storage_node(&registration("sn-2", &[disk("d9", 5), disk("d1", 5)], 30))
        .await;
    assert!(
        matches!(&refused, Err(StoreError::Conflict(m))
            if m == "node 'sn-2' cannot claim: medium 'd1' already exists, managed by storage node 'sn-1'"),
        "{refused:?}"
    );
    let refused = store
        .register_storage_node(&registration("sn-2", &[disk("m1", 5)], 30))
        .await;
    assert!(
        matches!(&refused, Err(StoreError::Conflict(m))
            if m == "node 'sn-2' cannot claim: medium 'm1' already exists, managed by the configuration file"),
        "{refused:?}"
    );
    assert_eq!(media_of(store).await, before);
    assert_eq!(store.storage_nodes().await.expect("nodes").len(), 1);
    // Nor may the configuration file take a node's medium.
    let taken = store
        .sync_media(&[medium("m1", 20), medium("d1", 20)])
        .await;
    assert!(
        matches!(&taken, Err(StoreError::Conflict(m)) if m == "medium 'd1' is registered by \
            storage node 'sn-1'; give the configuration's medium another name"),
        "{taken:?}"
    );
    assert_eq!(media_of(store).await, before);
}

pub async fn a_storage_node_drops_empty_media_and_fails_those_holding_slices(store: &dyn Store) {
    let (user, volume) = volume_on_d1(store).await;
    let done = store
        .register_storage_node(&registration("sn-1", &[], 20))
        .await
        .expect("heartbeat");
    assert_eq!(done.removed_media, ["d2"]);
    assert_eq!(done.failed_media, ["d1"]);
    let media = media_of(store).await;
    assert_eq!(media.len(), 1);
    assert!(media[0].4, "d1 failed: {media:?}");
    let v = read_volume(store, user.tenant_id).await;
    assert_eq!(v.lost_slices, 1);
    // Listed again: back in service, its copy still lost.
    let back = store
        .register_storage_node(&registration("sn-1", &[disk("d1", 20)], 30))
        .await
        .expect("heartbeat");
    assert_eq!(back.restored_media, ["d1"]);
    assert_eq!(back.volumes_to_recover, [volume.as_str()]);
    assert!(!media_of(store).await[0].4);
    let slices = store.volume_slices(&volume).await.expect("slices");
    assert!(slices[0].lost, "{slices:?}");
    assert_eq!(read_volume(store, user.tenant_id).await.lost_slices, 1);
}

pub async fn an_offline_storage_node_loses_its_copies_and_they_stay_lost_when_it_returns(
    store: &dyn Store,
) {
    let (user, volume) = volume_on_d1(store).await;
    // Heard at 10: not before 10, nothing changes.
    assert_eq!(
        store
            .mark_storage_node_offline("sn-1", 10, 50)
            .await
            .expect("offline"),
        None
    );
    assert_eq!(
        store
            .mark_storage_node_offline("nope", 100, 50)
            .await
            .expect("offline"),
        None
    );
    let failed = store
        .mark_storage_node_offline("sn-1", 11, 50)
        .await
        .expect("offline");
    assert_eq!(failed, Some(vec!["d1".to_string(), "d2".to_string()]));
    // Offline already: nothing more.
    assert_eq!(
        store
            .mark_storage_node_offline("sn-1", 100, 60)
            .await
            .expect("offline"),
        None
    );
    assert_eq!(
        store.storage_nodes().await.expect("nodes")[0].state,
        StorageNodeState::Offline
    );
    assert!(media_of(store).await.iter().all(|m| m.4));
    assert_eq!(read_volume(store, user.tenant_id).await.lost_slices, 1);

    let back = store
        .register_storage_node(&registration("sn-1", &[disk("d1", 20), disk("d2", 20)], 70))
        .await
        .expect("back");
    assert!(back.came_back);
    assert_eq!(back.restored_media, ["d1", "d2"]);
    assert_eq!(back.volumes_to_recover, [volume.as_str()]);
    assert_eq!(
        store.storage_nodes().await.expect("nodes")[0].state,
        StorageNodeState::Online
    );
    assert!(media_of(store).await.iter().all(|m| !m.4));
    // The copy that missed writes stays lost on a healthy medium.
    let slices = store.volume_slices(&volume).await.expect("slices");
    assert!(slices[0].lost, "{slices:?}");
    let v = read_volume(store, user.tenant_id).await;
    assert_eq!((v.lost_slices, v.lost_columns), (1, 1));
}

pub async fn a_new_or_revoked_credential_changes_the_slice_credential(store: &dyn Store) {
    store.create_node(&node("sn-1")).await.expect("node");
    let storage = |id: &str| NodeCredential {
        node: "sn-1".into(),
        credential_id: id.into(),
        secret_hash: format!("hash-{id}"),
        created_ms: 5,
        role: CredentialRole::Storage,
    };
    store
        .set_node_credential(&storage("c1"))
        .await
        .expect("credential");
    assert_eq!(
        store.node_credential("c1").await.expect("read"),
        Some(storage("c1"))
    );
    let first = store
        .register_storage_node(&registration("sn-1", &[], 10))
        .await
        .expect("register");
    assert_eq!(first.slice_credential, "secret-10");
    store
        .set_node_credential(&storage("c2"))
        .await
        .expect("credential");
    assert_eq!(
        store.storage_nodes().await.expect("nodes")[0].slice_credential,
        None
    );
    let second = store
        .register_storage_node(&registration("sn-1", &[], 20))
        .await
        .expect("register");
    assert_eq!(second.slice_credential, "secret-20");
    assert!(store.revoke_node_credential("sn-1").await.expect("revoke"));
    let third = store
        .register_storage_node(&registration("sn-1", &[], 30))
        .await
        .expect("register");
    assert_eq!(third.slice_credential, "secret-30");
}

pub async fn node_copies_list_every_copy_on_the_nodes_media(store: &dyn Store) {
    let (user, volume) = volume_on_d1(store).await;
    assert_eq!(
        store.node_copies("sn-1").await.expect("copies"),
        [NodeCopy {
            volume_id: volume.clone(),
            volume_name: "v".into(),
            tenant_id: user.tenant_id,
            copy: 0,
            column: 0,
            medium: "d1".into(),
            size: 10,
            lost: false,
            stale_generation: None,
        }]
    );
    assert!(store
        .mark_slice_lost(&volume, 0, 0, "d1", 40)
        .await
        .expect("lost"));
    assert!(store.node_copies("sn-1").await.expect("copies")[0].lost);
    assert!(store.node_copies("nope").await.expect("copies").is_empty());
}

pub async fn the_front_epoch_only_grows(store: &dyn Store) {
    let (_user, volume, _) = volume_on_m1(store).await;
    assert_eq!(store.next_front_epoch(&volume).await.expect("epoch"), 1);
    assert_eq!(store.next_front_epoch(&volume).await.expect("epoch"), 2);
    assert!(matches!(
        store.next_front_epoch("nope").await,
        Err(StoreError::NotFound)
    ));
}

pub async fn two_handles_never_get_the_same_front_epoch(first: &dyn Store, second: &dyn Store) {
    let (_user, volume, _) = volume_on_m1(first).await;
    let mut seen = Vec::new();
    for _ in 0..20 {
        let (a, b) = tokio::join!(
            first.next_front_epoch(&volume),
            second.next_front_epoch(&volume)
        );
        seen.push(a.expect("first"));
        seen.push(b.expect("second"));
    }
    seen.sort_unstable();
    assert_eq!(seen, (1..=40).collect::<Vec<u64>>());
}

pub async fn a_lost_copy_records_the_generation_it_missed(store: &dyn Store) {
    let (user, volume) = volume_on_d1(store).await;
    let stale = |slices: &[SliceRow]| {
        slices
            .iter()
            .map(|s| s.stale_generation)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        stale(&store.volume_slices(&volume).await.expect("slices")),
        [None]
    );
    // Two fronts opened the volume: the second's writes are the ones the
    // copy misses when its node goes.
    assert_eq!(store.next_front_epoch(&volume).await.expect("epoch"), 1);
    assert_eq!(store.next_front_epoch(&volume).await.expect("epoch"), 2);
    assert!(store
        .mark_storage_node_offline("sn-1", 11, 50)
        .await
        .expect("offline")
        .is_some());
    assert_eq!(
        stale(&store.volume_slices(&volume).await.expect("slices")),
        [Some(2)]
    );
    let copies = store.node_copies("sn-1").await.expect("copies");
    assert_eq!(
        (copies[0].lost, copies[0].stale_generation),
        (true, Some(2))
    );
    // Later fronts do not change what it missed, nor does a second mark,
    // nor the node's return.
    assert_eq!(store.next_front_epoch(&volume).await.expect("epoch"), 3);
    assert!(!store
        .mark_slice_lost(&volume, 0, 0, "d1", 60)
        .await
        .expect("lost already"));
    store
        .register_storage_node(&registration("sn-1", &[disk("d1", 20), disk("d2", 20)], 70))
        .await
        .expect("back");
    let slices = store.volume_slices(&volume).await.expect("slices");
    assert_eq!(
        (slices[0].lost, slices[0].stale_generation),
        (true, Some(2))
    );
    assert_eq!(read_volume(store, user.tenant_id).await.lost_slices, 1);
}

pub async fn a_node_medium_failed_by_a_front_records_the_generation_its_copies_missed(
    store: &dyn Store,
) {
    let (user, volume) = volume_on_d1(store).await;
    assert_eq!(store.next_front_epoch(&volume).await.expect("epoch"), 1);
    // The front gave the node up before the node was judged Offline.
    assert!(store.set_medium_failed("d1", 40).await.expect("failed"));
    let slices = store.volume_slices(&volume).await.expect("slices");
    assert_eq!(
        (slices[0].lost, slices[0].stale_generation),
        (true, Some(1))
    );
    // Offline afterwards keeps what it missed first.
    assert_eq!(store.next_front_epoch(&volume).await.expect("epoch"), 2);
    assert!(store
        .mark_storage_node_offline("sn-1", 11, 50)
        .await
        .expect("offline")
        .is_some());
    let copies = store.node_copies("sn-1").await.expect("copies");
    assert_eq!(
        (copies[0].lost, copies[0].stale_generation),
        (true, Some(1))
    );
    assert_eq!(read_volume(store, user.tenant_id).await.lost_slices, 1);
}

pub async fn a_volume_front_node_is_wanted_of_it_while_the_volume_is_attached(store: &dyn Store) {
    let (user, volume) = volume_on_d1(store).await;
    let front = |node: Option<&str>, epoch| VolumeFront {
        node: node.map(str::to_string),
        epoch,
    };
    assert_eq!(
        store.volume_front(&volume).await.expect("read"),
        front(None, 0)
    );
    assert!(matches!(
        store.volume_front("nope").await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store.set_front_node("nope", Some("sn-1")).await,
        Err(StoreError::NotFound)
    ));
    store
        .set_front_node(&volume, Some("sn-1"))
        .await
        .expect("set");
    assert_eq!(
        store.volume_front(&volume).await.expect("read"),
        front(Some("sn-1"), 0)
    );
    assert_eq!(store.front_counts().await.expect("counts")["sn-1"], 1);
    // Not attached: wanted of the node for a job, without exports.
    let fronts = store.node_fronts("sn-1").await.expect("fronts");
    assert_eq!(fronts.len(), 1);
    assert!(fronts[0].attachments.is_empty());
    assert_eq!(
        store.unattached_fronts().await.expect("unattached"),
        vec![volume.clone()]
    );
    let job = store
        .create_attachment(
            &NewAttachment {
                volume_id: volume.clone(),
                snapshot: "top".into(),
                node: "host-7".into(),
                tenant_id: user.tenant_id,
                readonly: true,
                mountpoint: String::new(),
                export_name: "e1".into(),
                now_ms: 20,
                manager: AttachmentManager::Csi,
            },
            &new_job(
                &user,
                JobSpec::AttachmentCreate(AttachmentArgs {
                    node: "host-7".into(),
                    readonly: true,
                    mountpoint: String::new(),
                    snapshot: "top".into(),
                }),
                &volume,
            ),
        )
        .await
        .expect("attach");
    finish(store, job).await;
    assert_eq!(store.next_front_epoch(&volume).await.expect("epoch"), 1);
    let fronts = store.node_fronts("sn-1").await.expect("fronts");
    assert_eq!(fronts.len(), 1);
    assert_eq!(
        (
            fronts[0].volume_id.as_str(),
            fronts[0].epoch,
            fronts[0].size
        ),
        (volume.as_str(), 1, 10)
    );
    assert_eq!(fronts[0].attachments.len(), 1);
    assert_eq!(fronts[0].attachments[0].export_name, "e1");
    assert_eq!(
        fronts[0].attachments[0].front_address.as_deref(),
        Some("127.0.0.2:10809")
    );
    assert!(store.node_fronts("sn-2").await.expect("fronts").is_empty());
    assert!(store
        .unattached_fronts()
        .await
        .expect("unattached")
        .is_empty());
    // Still attached: the front stays.
    assert!(!store.clear_unattached_front(&volume).await.expect("kept"));
    store
        .delete_attachment(&volume, "top", "host-7")
        .await
        .expect("detach");
    assert!(store
        .clear_unattached_front(&volume)
        .await
        .expect("cleared"));
    assert_eq!(
        store.volume_front(&volume).await.expect("read"),
        front(None, 1)
    );
    assert!(store.front_counts().await.expect("counts").is_empty());
}

pub async fn a_node_s_front_report_replaces_its_last_one(store: &dyn Store) {
    assert!(store.front_reports().await.expect("reports").is_empty());
    store
        .set_front_report("sn-b", "[1]", 1)
        .await
        .expect("report");
    store
        .set_front_report("sn-a", "[2]", 2)
        .await
        .expect("report");
    store
        .set_front_report("sn-b", "[3]", 3)
        .await
        .expect("report");
    assert_eq!(
        store.front_reports().await.expect("reports"),
        vec![
            ("sn-a".to_string(), "[2]".to_string()),
            ("sn-b".into(), "[3]".into())
        ]
    );
}
