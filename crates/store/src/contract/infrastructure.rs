//! Media and nodes: their sources, sizes, failures and agent credentials.

use super::*;

pub async fn a_medium_holding_slices_cannot_disappear_or_shrink(store: &dyn Store) {
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

pub async fn a_failed_medium_loses_its_slices_and_takes_no_more(store: &dyn Store) {
    let (user, volume, _) = volume_on_m1(store).await;
    assert!(store.set_medium_failed("m1", 10).await.expect("fail"));
    assert!(!store.set_medium_failed("m1", 10).await.expect("again"));
    assert!(matches!(
        store.set_medium_failed("nope", 10).await,
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

pub async fn a_lost_copy_is_lost_alone_until_it_moves(store: &dyn Store) {
    let (user, volume, _) = volume_on_m1(store).await;
    // Cached before the change: the change must show through the cache.
    assert_eq!(read_volume(store, user.tenant_id).await.lost_slices, 0);
    assert!(!store
        .mark_slice_lost(&volume, 0, 0, "m2", 5)
        .await
        .expect("not on m2"));
    assert!(!store
        .mark_slice_lost("nope", 0, 0, "m1", 5)
        .await
        .expect("no such volume"));
    assert!(!store
        .mark_slice_lost(&volume, 1, 0, "m1", 5)
        .await
        .expect("no such copy"));
    assert!(store
        .mark_slice_lost(&volume, 0, 0, "m1", 5)
        .await
        .expect("lost"));
    assert!(!store
        .mark_slice_lost(&volume, 0, 0, "m1", 6)
        .await
        .expect("again"));
    let slices = store.volume_slices(&volume).await.expect("slices");
    assert!(slices.iter().all(|s| s.lost), "{slices:?}");
    // No front ever opened it: it missed generation 0.
    assert_eq!(slices[0].stale_generation, Some(0), "{slices:?}");
    let v = read_volume(store, user.tenant_id).await;
    assert_eq!((v.lost_slices, v.lost_columns), (1, 1));
    // The medium itself stays healthy and keeps taking slices.
    let media = store.media_usage().await.expect("usage");
    assert!(media.iter().all(|m| !m.failed), "{media:?}");

    // Moved (rebuilt) onto another medium, the copy is a fresh one.
    let slice_id = first_slice_id(store, &volume).await;
    let job_id = start_resize(store, &user, &volume, true).await;
    store
        .save_resize_plan(job_id, &move_plan(slice_id), None)
        .await
        .expect("plan");
    let steps = store.resize_steps(job_id).await.expect("steps");
    store.switch_slice(&steps[0], &[]).await.expect("switch");
    let slices = store.volume_slices(&volume).await.expect("slices");
    assert_eq!(
        slices
            .iter()
            .map(|s| (s.slice.medium.as_str(), s.lost, s.stale_generation))
            .collect::<Vec<_>>(),
        [("m2", false, None)]
    );
    let v = read_volume(store, user.tenant_id).await;
    assert_eq!((v.lost_slices, v.lost_columns), (0, 0));
}

fn credential(node: &str, id: &str) -> NodeCredential {
    NodeCredential {
        node: node.into(),
        credential_id: id.into(),
        secret_hash: format!("hash-{id}"),
        created_ms: 5,
        role: CredentialRole::Agent,
    }
}

pub async fn a_node_has_at_most_one_live_agent_credential(store: &dyn Store) {
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
    // A new credential replaces the old one, whatever its role.
    let both = NodeCredential {
        role: CredentialRole::AgentAndStorage,
        ..credential("host-7", "c2")
    };
    store.set_node_credential(&both).await.expect("credential");
    assert_eq!(store.node_credential("c1").await.expect("read"), None);
    assert_eq!(store.node_credential("c2").await.expect("read"), Some(both));

    store.touch_node_agent("host-7", 42).await.expect("touch");
    assert_eq!(
        store.node_agents().await.expect("agents"),
        vec![NodeAgentRecord {
            node: "host-7".into(),
            credential_role: Some(CredentialRole::AgentAndStorage),
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
            credential_role: None,
            last_seen_ms: Some(42),
        }]
    );
}

pub async fn a_node_lists_its_attachments_of_every_tenant_with_host_reports(store: &dyn Store) {
    let (user, volume, _) = volume_on_m1(store).await;
    let (other, policy) = testing::user_and_policy_in(store, "t2", "o@example.com", false).await;
    let job = add_volume(store, &other, policy.id, "vol-0", "w", 4).await;
    finish(store, job).await;
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
            finish(store, job).await;
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

pub async fn api_media_survive_configuration_syncs_and_the_configuration_takes_over_what_it_lists(
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

pub async fn a_medium_is_resized_and_removed_only_within_what_it_holds(store: &dyn Store) {
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

pub async fn a_node_is_removed_only_when_nothing_depends_on_it(store: &dyn Store) {
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
    finish(store, job).await;

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

pub async fn configured_nodes_no_longer_listed_go_unless_something_depends_on_them(
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
