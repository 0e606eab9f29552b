//! The CSI controller plugin: the real `svs csi controller` process on a
//! unix socket in front of the real `svs serve`, driven over gRPC the way
//! the orchestrator's sidecars drive it (the csi-sanity controller
//! scenarios), and seed rule 7: through CSI, no data ever moves.

use crate::harness::csi_controller::*;
use crate::harness::{
    movement_topology, spread_topology, svs_bin, TestApp, TestConfig, ADMIN_EMAIL, GIB,
};
use reqwest::StatusCode;
use serde_json::Value;
use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::Duration;
use svs_csi::proto::identity_client::IdentityClient;
use svs_csi::proto::volume_capability::access_mode::Mode;
use svs_csi::proto::volume_capability::{AccessType, BlockVolume, MountVolume};
use svs_csi::proto::*;
use svs_csi::tonic::Code;

const NO_IN_PLACE: &str = "GetModificationPlan: Could not find an in-place modification plan";

/// The service with a policy "none" and the plugin in front of it.
async fn setup(config: TestConfig) -> (TestApp, Plugin) {
    let app = TestApp::start_with(config).await;
    app.create_policy("none", 0, 0, 0).await;
    let plugin = Plugin::start(&app).await;
    (app, plugin)
}

fn mount() -> VolumeCapability {
    VolumeCapability {
        access_mode: mode(Mode::SingleNodeWriter),
        access_type: Some(AccessType::Mount(MountVolume::default())),
    }
}

fn block() -> VolumeCapability {
    VolumeCapability {
        access_mode: mode(Mode::SingleNodeWriter),
        access_type: Some(AccessType::Block(BlockVolume {})),
    }
}

fn params(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn gib(n: u64) -> Option<CapacityRange> {
    Some(CapacityRange {
        required_bytes: (n * GIB) as i64,
        limit_bytes: 0,
    })
}

fn create_request(name: &str, size: u64) -> CreateVolumeRequest {
    CreateVolumeRequest {
        name: name.into(),
        capacity_range: gib(size),
        volume_capabilities: vec![mount()],
        parameters: params(&[("policy", "none")]),
        ..Default::default()
    }
}

fn code<T: std::fmt::Debug>(result: Result<T, svs_csi::tonic::Status>) -> Code {
    result.expect_err("an error").code()
}

async fn jobs(app: &TestApp) -> Vec<Value> {
    let (status, body) = app.get("/jobs?count=1000").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body.as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn the_plugin_says_what_it_is_and_is_ready() {
    let (_app, plugin) = setup(TestConfig::default()).await;
    let info = plugin
        .identity()
        .get_plugin_info(GetPluginInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, svs_csi::DRIVER_NAME);
    assert_eq!(info.vendor_version, env!("CARGO_PKG_VERSION"));
    let caps = plugin
        .identity()
        .get_plugin_capabilities(GetPluginCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        plugin_capability_names(&caps),
        PLUGIN_CAPABILITIES,
        "{caps:?}"
    );
    let probe = plugin
        .identity()
        .probe(ProbeRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(probe.ready, Some(true));
    let caps = plugin
        .controller()
        .controller_get_capabilities(ControllerGetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    use controller_service_capability::rpc::Type as Rpc;
    let kinds: Vec<i32> = caps
        .capabilities
        .iter()
        .filter_map(|c| {
            c.r#type
                .as_ref()
                .map(|controller_service_capability::Type::Rpc(r)| r.r#type)
        })
        .collect();
    let want: Vec<i32> = [
        Rpc::CreateDeleteVolume,
        Rpc::PublishUnpublishVolume,
        Rpc::ListVolumes,
        Rpc::GetCapacity,
        Rpc::CreateDeleteSnapshot,
        Rpc::ListSnapshots,
        Rpc::ExpandVolume,
    ]
    .iter()
    .map(|k| *k as i32)
    .collect();
    assert_eq!(kinds, want);
    let unimplemented = plugin
        .controller()
        .controller_get_volume(ControllerGetVolumeRequest {
            volume_id: "x".into(),
        })
        .await;
    assert_eq!(code(unimplemented), Code::Unimplemented);
}

#[tokio::test]
async fn the_probe_fails_with_a_wrong_password() {
    let app = TestApp::start().await;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("csi.sock");
    let endpoint = format!("unix://{}", socket.display());
    let mut child = Command::new(svs_bin())
        .args(["csi", "controller", "--endpoint", &endpoint, "--url"])
        .arg(&app.base)
        .args(["--email", ADMIN_EMAIL])
        .env("SVS_CSI_PASSWORD", "wrong-password")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let channel = connect_when_listening(&endpoint).await;
    let probe = IdentityClient::new(channel).probe(ProbeRequest {}).await;
    let _ = child.kill();
    let _ = child.wait();
    let status = probe.expect_err("not ready");
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
}

/// Short tokens: every call renews the IdToken (it expires within the
/// margin), and once the refresh token has expired too, the plugin signs
/// in again.
#[tokio::test]
async fn the_session_renews_and_signs_in_again() {
    let config = TestConfig {
        token_lifetime: "2s".into(),
        refresh_token_lifetime: "3s".into(),
        ..TestConfig::default()
    };
    let (_app, plugin) = setup(config).await;
    create(&plugin, create_request("early", 1)).await;
    create(&plugin, create_request("soon", 1)).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    create(&plugin, create_request("late", 1)).await;
    let log = std::fs::read_to_string(plugin.dir.path().join("plugin.log")).unwrap();
    assert!(log.contains("signing in again"), "{log}");
    let probe = plugin.identity().probe(ProbeRequest {}).await.unwrap();
    assert_eq!(probe.into_inner().ready, Some(true));
}

#[tokio::test]
async fn create_volume_is_idempotent_and_checks_its_arguments() {
    let (app, plugin) = setup(spread_topology()).await;
    let first = create(&plugin, create_request("pvc-1", 1)).await;
    assert_eq!(first.capacity_bytes, GIB as i64);
    assert_eq!(
        first.volume_context.get("type").map(String::as_str),
        Some("file")
    );
    let again = create(&plugin, create_request("pvc-1", 1)).await;
    assert_eq!(again.volume_id, first.volume_id);
    let (status, volume) = app.get(&format!("/volumes/{}", first.volume_id)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(volume["name"], "pvc-1");
    assert_eq!(volume["type"], "file");
    assert_eq!(volume["filesystem"], "ext4");
    assert_eq!(volume["policy"], "none");

    // Same name, other size.
    let other = plugin
        .controller()
        .create_volume(create_request("pvc-1", 3))
        .await;
    assert_eq!(code(other), Code::AlreadyExists);

    let mut no_name = create_request("", 1);
    no_name.name.clear();
    assert_eq!(
        code(plugin.controller().create_volume(no_name).await),
        Code::InvalidArgument
    );
    let mut no_caps = create_request("pvc-2", 1);
    no_caps.volume_capabilities.clear();
    assert_eq!(
        code(plugin.controller().create_volume(no_caps).await),
        Code::InvalidArgument
    );
    let mut no_policy = create_request("pvc-2", 1);
    no_policy.parameters.clear();
    let status = plugin
        .controller()
        .create_volume(no_policy)
        .await
        .expect_err("no policy");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("policy"), "{status:?}");
    let mut unknown_policy = create_request("pvc-2", 1);
    unknown_policy.parameters = params(&[("policy", "gold")]);
    assert_eq!(
        code(plugin.controller().create_volume(unknown_policy).await),
        Code::InvalidArgument
    );
    let mut unknown_parameter = create_request("pvc-2", 1);
    unknown_parameter.parameters = params(&[("policy", "none"), ("color", "red")]);
    assert_eq!(
        code(plugin.controller().create_volume(unknown_parameter).await),
        Code::InvalidArgument
    );
    let mut multi_node = create_request("pvc-2", 1);
    multi_node.volume_capabilities[0].access_mode = mode(Mode::MultiNodeMultiWriter);
    assert_eq!(
        code(plugin.controller().create_volume(multi_node).await),
        Code::InvalidArgument
    );
    let mut too_small_limit = create_request("pvc-2", 1);
    too_small_limit.capacity_range = Some(CapacityRange {
        required_bytes: 1,
        limit_bytes: 1000,
    });
    assert_eq!(
        code(plugin.controller().create_volume(too_small_limit).await),
        Code::OutOfRange
    );
    // Nothing of the refused calls was created.
    let (_, volumes) = app.get("/volumes").await;
    assert_eq!(volumes.as_array().map(Vec::len), Some(1), "{volumes}");

    // A long name, bytes rounded up to whole GiB, a block capability, a
    // zone from the topology.
    let long = format!("pvc-{}", "x".repeat(100));
    let mut request = create_request(&long, 1);
    request.capacity_range = Some(CapacityRange {
        required_bytes: (GIB + GIB / 2) as i64,
        limit_bytes: (2 * GIB) as i64,
    });
    request.volume_capabilities = vec![block()];
    request.accessibility_requirements = Some(TopologyRequirement {
        requisite: Vec::new(),
        preferred: vec![Topology {
            segments: params(&[(svs_csi::ZONE_TOPOLOGY_KEY, "zone-b")]),
        }],
    });
    let volume = create(&plugin, request.clone()).await;
    assert_eq!(volume.capacity_bytes, 2 * GIB as i64);
    assert_eq!(
        volume.accessible_topology[0].segments[svs_csi::ZONE_TOPOLOGY_KEY],
        "zone-b"
    );
    let (_, view) = app.get(&format!("/volumes/{}", volume.volume_id)).await;
    assert_eq!(view["type"], "block");
    assert_eq!(view["zone"], "zone-b");
    let name = view["name"].as_str().unwrap();
    assert!(name.starts_with("csi-") && name.len() == 44, "{name}");
    assert_eq!(create(&plugin, request).await.volume_id, volume.volume_id);

    // ValidateVolumeCapabilities.
    let confirmed = plugin
        .controller()
        .validate_volume_capabilities(ValidateVolumeCapabilitiesRequest {
            volume_id: first.volume_id.clone(),
            volume_capabilities: vec![mount()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(confirmed.confirmed.is_some(), "{confirmed:?}");
    let refused = plugin
        .controller()
        .validate_volume_capabilities(ValidateVolumeCapabilitiesRequest {
            volume_id: first.volume_id.clone(),
            volume_capabilities: vec![VolumeCapability {
                access_mode: mode(Mode::MultiNodeMultiWriter),
                access_type: Some(AccessType::Mount(MountVolume::default())),
            }],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(refused.confirmed.is_none() && !refused.message.is_empty());
    let unknown = plugin
        .controller()
        .validate_volume_capabilities(ValidateVolumeCapabilitiesRequest {
            volume_id: "no-such-volume".into(),
            volume_capabilities: vec![mount()],
            ..Default::default()
        })
        .await;
    assert_eq!(code(unknown), Code::NotFound);
    let no_caps = plugin
        .controller()
        .validate_volume_capabilities(ValidateVolumeCapabilitiesRequest {
            volume_id: first.volume_id.clone(),
            ..Default::default()
        })
        .await;
    assert_eq!(code(no_caps), Code::InvalidArgument);

    // DeleteVolume, twice, and of an unknown id.
    for _ in 0..2 {
        plugin
            .controller()
            .delete_volume(DeleteVolumeRequest {
                volume_id: first.volume_id.clone(),
                ..Default::default()
            })
            .await
            .expect("DeleteVolume");
    }
    let (status, _) = app.get(&format!("/volumes/{}", first.volume_id)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    plugin
        .controller()
        .delete_volume(DeleteVolumeRequest {
            volume_id: "no-such-volume".into(),
            ..Default::default()
        })
        .await
        .expect("an unknown volume is already deleted");
    assert_eq!(
        code(
            plugin
                .controller()
                .delete_volume(DeleteVolumeRequest::default())
                .await
        ),
        Code::InvalidArgument
    );
}

/// No medium has room: RESOURCE_EXHAUSTED, and a retry does not find a
/// half-made volume to answer with.
#[tokio::test]
async fn create_volume_without_room_is_resource_exhausted() {
    let (app, plugin) = setup(spread_topology()).await;
    for _ in 0..2 {
        let status = plugin
            .controller()
            .create_volume(create_request("huge", 40))
            .await
            .expect_err("no room");
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    }
    let (_, volumes) = app.get("/volumes").await;
    assert_eq!(volumes, serde_json::json!([]));
}

#[tokio::test]
async fn list_volumes_pages_by_token() {
    let (_app, plugin) = setup(TestConfig::default()).await;
    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(
            create(&plugin, create_request(&format!("list-{n}"), 1))
                .await
                .volume_id,
        );
    }
    let mut seen = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let page = plugin
            .controller()
            .list_volumes(ListVolumesRequest {
                max_entries: 2,
                starting_token: token.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(page.entries.len() <= 2);
        seen.extend(
            page.entries
                .iter()
                .map(|e| e.volume.as_ref().unwrap().volume_id.clone()),
        );
        pages += 1;
        if page.next_token.is_empty() {
            break;
        }
        token = page.next_token;
    }
    assert_eq!(pages, 3);
    seen.sort();
    ids.sort();
    assert_eq!(seen, ids);
    let all = plugin
        .controller()
        .list_volumes(ListVolumesRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!((all.entries.len(), all.next_token.as_str()), (5, ""));
    let bad = plugin
        .controller()
        .list_volumes(ListVolumesRequest {
            max_entries: 2,
            starting_token: "not-a-token".into(),
        })
        .await;
    assert_eq!(code(bad), Code::Aborted);
}

#[tokio::test]
async fn capacity_is_the_free_space_of_the_zone() {
    let (_app, plugin) = setup(spread_topology()).await;
    let capacity = |zone: Option<&str>| {
        let mut controller = plugin.controller();
        let topology = zone.map(|z| Topology {
            segments: params(&[(svs_csi::ZONE_TOPOLOGY_KEY, z)]),
        });
        async move {
            controller
                .get_capacity(GetCapacityRequest {
                    accessible_topology: topology,
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner()
                .available_capacity
        }
    };
    assert_eq!(capacity(None).await, 22 * GIB as i64);
    assert_eq!(capacity(Some("zone-a")).await, 10 * GIB as i64);
    assert_eq!(capacity(Some("zone-b")).await, 12 * GIB as i64);
    assert_eq!(capacity(Some("zone-x")).await, 0);
    let mut request = create_request("in-a", 4);
    request.accessibility_requirements = Some(TopologyRequirement {
        requisite: vec![Topology {
            segments: params(&[(svs_csi::ZONE_TOPOLOGY_KEY, "zone-a")]),
        }],
        preferred: Vec::new(),
    });
    create(&plugin, request).await;
    assert_eq!(capacity(Some("zone-a")).await, 6 * GIB as i64);
    assert_eq!(capacity(None).await, 18 * GIB as i64);
}

#[tokio::test]
async fn publish_attaches_to_the_node_once() {
    let config = TestConfig {
        nodes: vec![("host-1", "127.0.0.1")],
        ..TestConfig::default()
    };
    let (app, plugin) = setup(config).await;
    let volume = create(&plugin, create_request("pub", 1)).await;
    let publish = |volume_id: &str, node: &str, readonly: bool| ControllerPublishVolumeRequest {
        volume_id: volume_id.into(),
        node_id: node.into(),
        volume_capability: Some(mount()),
        readonly,
        ..Default::default()
    };
    let first = plugin
        .controller()
        .controller_publish_volume(publish(&volume.volume_id, "host-1", false))
        .await
        .expect("published")
        .into_inner()
        .publish_context;
    let uri = &first["uri"];
    assert!(
        uri.starts_with(&app.nbd_base) && uri.ends_with(&first["exportname"]),
        "{first:?}"
    );
    let (status, attachment) = app
        .get(&format!(
            "/volumes/{}/snapshots/top/attachments/host-1",
            volume.volume_id
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{attachment}");
    assert_eq!(attachment["state"], "Attached");
    assert_eq!(attachment["readonly"], false);
    let again = plugin
        .controller()
        .controller_publish_volume(publish(&volume.volume_id, "host-1", false))
        .await
        .expect("published again")
        .into_inner()
        .publish_context;
    assert_eq!(again, first);
    let readonly = plugin
        .controller()
        .controller_publish_volume(publish(&volume.volume_id, "host-1", true))
        .await;
    assert_eq!(code(readonly), Code::AlreadyExists);
    let unknown_node = plugin
        .controller()
        .controller_publish_volume(publish(&volume.volume_id, "host-9", false))
        .await;
    assert_eq!(code(unknown_node), Code::NotFound);
    let unknown_volume = plugin
        .controller()
        .controller_publish_volume(publish("no-such-volume", "host-1", false))
        .await;
    assert_eq!(code(unknown_volume), Code::NotFound);
    let mut no_capability = publish(&volume.volume_id, "host-1", false);
    no_capability.volume_capability = None;
    assert_eq!(
        code(
            plugin
                .controller()
                .controller_publish_volume(no_capability)
                .await
        ),
        Code::InvalidArgument
    );
    // Attached: not deleted.
    let attached = plugin
        .controller()
        .delete_volume(DeleteVolumeRequest {
            volume_id: volume.volume_id.clone(),
            ..Default::default()
        })
        .await;
    assert_eq!(code(attached), Code::FailedPrecondition);

    for _ in 0..2 {
        plugin
            .controller()
            .controller_unpublish_volume(ControllerUnpublishVolumeRequest {
                volume_id: volume.volume_id.clone(),
                node_id: "host-1".into(),
                ..Default::default()
            })
            .await
            .expect("unpublished");
    }
    let (status, _) = app
        .get(&format!(
            "/volumes/{}/snapshots/top/attachments/host-1",
            volume.volume_id
        ))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    plugin
        .controller()
        .delete_volume(DeleteVolumeRequest {
            volume_id: volume.volume_id.clone(),
            ..Default::default()
        })
        .await
        .expect("deleted once detached");
}

#[tokio::test]
async fn snapshots_are_created_listed_cloned_and_deleted() {
    let (app, plugin) = setup(TestConfig::default()).await;
    let source = create(&plugin, create_request("src", 1)).await;
    let other = create(&plugin, create_request("other", 1)).await;
    let snap = |volume: &str, name: &str| CreateSnapshotRequest {
        source_volume_id: volume.into(),
        name: name.into(),
        ..Default::default()
    };
    let first = plugin
        .controller()
        .create_snapshot(snap(&source.volume_id, "snap-1"))
        .await
        .expect("snapshot")
        .into_inner()
        .snapshot
        .unwrap();
    assert!(first.ready_to_use);
    assert_eq!(first.source_volume_id, source.volume_id);
    assert_eq!(first.size_bytes, GIB as i64);
    assert!(first.creation_time.is_some());
    assert!(first
        .snapshot_id
        .starts_with(&format!("{}:", source.volume_id)));
    let again = plugin
        .controller()
        .create_snapshot(snap(&source.volume_id, "snap-1"))
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert_eq!(again.snapshot_id, first.snapshot_id);
    let taken = plugin
        .controller()
        .create_snapshot(snap(&other.volume_id, "snap-1"))
        .await;
    assert_eq!(code(taken), Code::AlreadyExists);
    assert_eq!(
        code(
            plugin
                .controller()
                .create_snapshot(snap(&source.volume_id, ""))
                .await
        ),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            plugin
                .controller()
                .create_snapshot(snap("no-such-volume", "snap-x"))
                .await
        ),
        Code::NotFound
    );
    for name in ["snap-2", "snap-3"] {
        plugin
            .controller()
            .create_snapshot(snap(&source.volume_id, name))
            .await
            .unwrap();
    }
    plugin
        .controller()
        .create_snapshot(snap(&other.volume_id, "snap-4"))
        .await
        .unwrap();

    let list = |request: ListSnapshotsRequest| {
        let mut controller = plugin.controller();
        async move {
            controller
                .list_snapshots(request)
                .await
                .unwrap()
                .into_inner()
        }
    };
    // Paging over all four.
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = list(ListSnapshotsRequest {
            max_entries: 3,
            starting_token: token.clone(),
            ..Default::default()
        })
        .await;
        seen.extend(
            page.entries
                .iter()
                .map(|e| e.snapshot.clone().unwrap().snapshot_id),
        );
        if page.next_token.is_empty() {
            break;
        }
        token = page.next_token;
    }
    assert_eq!(seen.len(), 4, "{seen:?}");
    let by_source = list(ListSnapshotsRequest {
        source_volume_id: source.volume_id.clone(),
        ..Default::default()
    })
    .await;
    assert_eq!(by_source.entries.len(), 3);
    let by_id = list(ListSnapshotsRequest {
        snapshot_id: first.snapshot_id.clone(),
        ..Default::default()
    })
    .await;
    assert_eq!(by_id.entries.len(), 1);
    assert_eq!(
        by_id.entries[0].snapshot.as_ref().unwrap().snapshot_id,
        first.snapshot_id
    );
    for unknown in ["nothing", "no-such-volume:snap"] {
        let none = list(ListSnapshotsRequest {
            snapshot_id: unknown.into(),
            ..Default::default()
        })
        .await;
        assert!(none.entries.is_empty());
    }
    let bad = plugin
        .controller()
        .list_snapshots(ListSnapshotsRequest {
            starting_token: "x".into(),
            ..Default::default()
        })
        .await;
    assert_eq!(code(bad), Code::Aborted);

    // A clone from the first snapshot.
    let mut request = create_request("clone", 1);
    request.volume_content_source = Some(VolumeContentSource {
        r#type: Some(volume_content_source::Type::Snapshot(
            volume_content_source::SnapshotSource {
                snapshot_id: first.snapshot_id.clone(),
            },
        )),
    });
    let clone = create(&plugin, request.clone()).await;
    match clone.content_source.and_then(|s| s.r#type) {
        Some(volume_content_source::Type::Snapshot(s)) => {
            assert_eq!(s.snapshot_id, first.snapshot_id)
        }
        other => panic!("content source {other:?}"),
    }
    let (_, view) = app.get(&format!("/volumes/{}", clone.volume_id)).await;
    assert_eq!(view["contentvolume"], source.volume_id.as_str());
    assert_eq!(create(&plugin, request).await.volume_id, clone.volume_id);
    let mut missing = create_request("clone-2", 1);
    missing.volume_content_source = Some(VolumeContentSource {
        r#type: Some(volume_content_source::Type::Snapshot(
            volume_content_source::SnapshotSource {
                snapshot_id: format!("{}:no-such-snapshot", source.volume_id),
            },
        )),
    });
    assert_eq!(
        code(plugin.controller().create_volume(missing).await),
        Code::NotFound
    );

    // DeleteSnapshot, twice, and of ids svs never made.
    for _ in 0..2 {
        plugin
            .controller()
            .delete_snapshot(DeleteSnapshotRequest {
                snapshot_id: first.snapshot_id.clone(),
                ..Default::default()
            })
            .await
            .expect("deleted");
    }
    for id in ["nothing", "no-such-volume:snap"] {
        plugin
            .controller()
            .delete_snapshot(DeleteSnapshotRequest {
                snapshot_id: id.into(),
                ..Default::default()
            })
            .await
            .expect("already absent");
    }
    let left = list(ListSnapshotsRequest {
        source_volume_id: source.volume_id.clone(),
        ..Default::default()
    })
    .await;
    assert_eq!(left.entries.len(), 2);
}

async fn expand(
    plugin: &Plugin,
    volume_id: &str,
    size: u64,
    capability: Option<VolumeCapability>,
) -> Result<ControllerExpandVolumeResponse, svs_csi::tonic::Status> {
    plugin
        .controller()
        .controller_expand_volume(ControllerExpandVolumeRequest {
            volume_id: volume_id.into(),
            capacity_range: gib(size),
            volume_capability: capability,
            ..Default::default()
        })
        .await
        .map(|r| r.into_inner())
}

#[tokio::test]
async fn expansion_grows_in_place_once() {
    let (app, plugin) = setup(spread_topology()).await;
    let volume = create(&plugin, create_request("grow", 1)).await;
    let grown = expand(&plugin, &volume.volume_id, 2, Some(mount()))
        .await
        .expect("expanded");
    assert_eq!(grown.capacity_bytes, 2 * GIB as i64);
    assert!(grown.node_expansion_required);
    let (_, view) = app.get(&format!("/volumes/{}", volume.volume_id)).await;
    assert_eq!(view["size"], 2);
    let resizes = |jobs: &[Value]| -> Vec<Value> {
        jobs.iter()
            .filter(|j| j["type"] == "volume_modify_extend")
            .cloned()
            .collect()
    };
    let done = resizes(&jobs(&app).await);
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0]["state"], "Done");
    assert_eq!(done[0]["args"]["allowdatamovement"], false, "{}", done[0]);

    // The same or a smaller size: success, no new job.
    for size in [2, 1] {
        let same = expand(&plugin, &volume.volume_id, size, None)
            .await
            .expect("nothing to do");
        assert_eq!(same.capacity_bytes, 2 * GIB as i64);
        assert!(same.node_expansion_required);
    }
    assert_eq!(resizes(&jobs(&app).await).len(), 1);

    // Beyond 10 × the size.
    let status = expand(&plugin, &volume.volume_id, 21, None)
        .await
        .expect_err("out of range");
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    assert_eq!(
        status.message(),
        "size must be at most 10 times the current size (20 GiB)"
    );
    assert_eq!(
        code(expand(&plugin, "no-such-volume", 2, None).await),
        Code::NotFound
    );
    let no_range = plugin
        .controller()
        .controller_expand_volume(ControllerExpandVolumeRequest {
            volume_id: volume.volume_id.clone(),
            ..Default::default()
        })
        .await;
    assert_eq!(code(no_range), Code::InvalidArgument);

    // A raw block volume needs nothing from the node.
    let mut request = create_request("raw", 1);
    request.volume_capabilities = vec![block()];
    let raw = create(&plugin, request).await;
    let grown = expand(&plugin, &raw.volume_id, 3, Some(block()))
        .await
        .expect("expanded");
    assert_eq!(grown.capacity_bytes, 3 * GIB as i64);
    assert!(!grown.node_expansion_required);
}

/// Seed rule 7: where only a data movement could make room, CSI expansion
/// fails with the in-place message and moves nothing.
#[tokio::test]
async fn expansion_never_moves_data() {
    let app = TestApp::start_with(movement_topology("0")).await;
    let id = app.mirror_beside_filler().await;
    let media = |slices: Vec<Value>| -> Vec<(Value, Value, Value)> {
        slices
            .into_iter()
            .map(|s| (s["copy"].clone(), s["column"].clone(), s["media"].clone()))
            .collect()
    };
    let before = media(app.slices("data").await);
    let plugin = Plugin::start(&app).await;

    // 18 GiB: m1 has room to grow in place, m2 does not; a movement to
    // m3 (after deleting the filler) is what the REST API would need.
    let status = expand(&plugin, &id, 18, None)
        .await
        .expect_err("no in-place plan");
    assert!(
        matches!(
            status.code(),
            Code::FailedPrecondition | Code::ResourceExhausted
        ),
        "{status:?}"
    );
    assert_eq!(status.message(), NO_IN_PLACE);
    // Even with room for a movement, CSI does not move.
    app.delete_volume("filler").await;
    let status = expand(&plugin, &id, 18, None)
        .await
        .expect_err("still no in-place plan");
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert_eq!(status.message(), NO_IN_PLACE);

    assert_eq!(media(app.slices("data").await), before);
    let (_, volume) = app.get("/volumes/data").await;
    assert_eq!(volume["size"], 15);
    let all = jobs(&app).await;
    let resizes: Vec<&Value> = all
        .iter()
        .filter(|j| j["type"] == "volume_modify_extend")
        .collect();
    assert_eq!(resizes.len(), 2, "{all:?}");
    for job in &all {
        assert_ne!(job["args"]["allowdatamovement"], true, "{job}");
        assert!(
            !job["status"].as_str().unwrap_or("").starts_with("Moving"),
            "{job}"
        );
        assert!(
            !job["details"].as_array().into_iter().flatten().any(|d| d
                .as_str()
                .is_some_and(|d| d.to_lowercase().contains("moving"))),
            "{job}"
        );
    }
    for job in resizes {
        assert_eq!(job["state"], "Error", "{job}");
        assert_eq!(job["args"]["allowdatamovement"], false, "{job}");
    }
}

/// A job already runs on the volume (a data movement started over REST):
/// the CSI calls on it answer ABORTED, and the orchestrator retries.
#[tokio::test]
async fn calls_on_a_busy_volume_are_aborted() {
    let app = TestApp::start_with(movement_topology("4 MiB")).await;
    // 16 MiB to move at 4 MiB/s: about 4 s.
    let id = app.mirror_with_16_mib_on_m2().await;
    let plugin = Plugin::start(&app).await;
    let job = app.start_resize("data", 18, true).await;
    let status = expand(&plugin, &id, 19, None).await.expect_err("busy");
    assert_eq!(status.code(), Code::Aborted, "{status:?}");
    assert!(status.message().contains("is in progress"), "{status:?}");
    let delete = plugin
        .controller()
        .delete_volume(DeleteVolumeRequest {
            volume_id: id.clone(),
            ..Default::default()
        })
        .await;
    assert_eq!(code(delete), Code::Aborted);
    assert_eq!(app.wait_job(&job).await["state"], "Done");
    // Grown by the REST call: the same size over CSI has nothing to do.
    let same = expand(&plugin, &id, 18, None).await.expect("done already");
    assert_eq!(same.capacity_bytes, 18 * GIB as i64);
}

/// The plugin refuses to start without a password or with a bad endpoint,
/// saying why.
#[test]
fn the_controller_needs_a_password_and_a_unix_endpoint() {
    let run = |endpoint: &str, password: Option<&str>| {
        let mut command = Command::new(svs_bin());
        command
            .args(["csi", "controller", "--endpoint", endpoint])
            .args(["--url", "http://127.0.0.1:9", "--email", ADMIN_EMAIL])
            .env_remove("SVS_CSI_PASSWORD");
        if let Some(p) = password {
            command.env("SVS_CSI_PASSWORD", p);
        }
        let out = command.output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("unix://{}", dir.path().join("csi.sock").display());
    let stderr = run(&endpoint, None);
    assert!(
        stderr.contains("no password: set SVS_CSI_PASSWORD or pass --password-file"),
        "{stderr}"
    );
    let stderr = run("tcp://127.0.0.1:9", Some("x"));
    assert!(
        stderr.contains("endpoint \"tcp://127.0.0.1:9\" must be unix:///absolute/path"),
        "{stderr}"
    );
}

/// Every request body the CSI code builds that names `allowdatamovement`
/// sets it false, and the CSI code never calls the client's resize (which
/// takes a movement flag).
#[test]
fn the_csi_code_never_asks_for_a_data_movement() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/csi-driver/src");
    let mut named = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let at = format!("{}:{}: {line}", path.display(), n + 1);
            assert!(!code.contains("resize_volume("), "{at}");
            assert!(!code.contains("allow_data_movement"), "{at}");
            let mut rest = code;
            while let Some(i) = rest.find("\"allowdatamovement\"") {
                rest = &rest[i + "\"allowdatamovement\"".len()..];
                let value = rest.trim_start().trim_start_matches(':').trim_start();
                assert!(value.starts_with("false"), "{at}");
                named += 1;
            }
        }
    }
    // The expansion's body names it (false), so the scan saw it.
    assert!(named >= 1);
}
