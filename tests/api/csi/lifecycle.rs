//! The whole CSI lifecycle as an orchestrator drives it, against the real
//! `svs serve`, `svs csi controller` and `svs csi node` (host-1): a `file`
//! volume from StorageClass-like parameters, published and staged, files
//! written, ControllerExpandVolume + NodeExpandVolume with a larger `df`, a
//! snapshot, a clone from it with the files read back, and everything torn
//! down with nothing left mounted, looped or running.

use crate::harness::attach::topology;
use crate::harness::csi_controller::{mode, Plugin};
use crate::harness::host_side::HostSide;
use crate::harness::*;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use svs_csi::proto::volume_capability::access_mode::Mode;
use svs_csi::proto::volume_capability::{AccessType, MountVolume};
use svs_csi::proto::volume_content_source::{SnapshotSource, Type as SourceType};
use svs_csi::proto::*;
use svs_hostdev::host as hd;

fn xfs_mount() -> VolumeCapability {
    VolumeCapability {
        access_mode: mode(Mode::SingleNodeWriter),
        access_type: Some(AccessType::Mount(MountVolume {
            fs_type: "xfs".into(),
            ..MountVolume::default()
        })),
    }
}

/// The StorageClass `svs-file` of deploy/kubernetes, with what the
/// provisioner adds (`--extra-create-metadata`).
fn storage_class() -> HashMap<String, String> {
    [
        ("policy", "mirror"),
        ("type", "file"),
        ("filesystem", "xfs"),
        ("csi.storage.k8s.io/pvc/name", "data"),
        ("csi.storage.k8s.io/pvc/namespace", "default"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn sha(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// ControllerPublish to host-1, NodeStage at `staging`, NodePublish at a
/// new pod target; returns the target.
async fn publish_and_stage(
    controller: &Plugin,
    host: &HostSide,
    node: &mut super::node::Node,
    volume_id: &str,
    pod: &str,
) -> (PathBuf, PathBuf) {
    let published = controller
        .controller()
        .controller_publish_volume(ControllerPublishVolumeRequest {
            volume_id: volume_id.into(),
            node_id: "host-1".into(),
            volume_capability: Some(xfs_mount()),
            readonly: false,
            ..Default::default()
        })
        .await
        .expect("ControllerPublishVolume")
        .into_inner();
    let staging = host.staging(pod);
    node.node_stage_volume(NodeStageVolumeRequest {
        volume_id: volume_id.into(),
        publish_context: published.publish_context,
        staging_target_path: staging.display().to_string(),
        volume_capability: Some(xfs_mount()),
        ..Default::default()
    })
    .await
    .expect("NodeStageVolume");
    let target = host.target(pod);
    node.node_publish_volume(NodePublishVolumeRequest {
        volume_id: volume_id.into(),
        staging_target_path: staging.display().to_string(),
        target_path: target.display().to_string(),
        volume_capability: Some(xfs_mount()),
        readonly: false,
        ..Default::default()
    })
    .await
    .expect("NodePublishVolume");
    (staging, target)
}

/// NodeUnpublish, NodeUnstage, ControllerUnpublish.
async fn take_down(
    controller: &Plugin,
    node: &mut super::node::Node,
    volume_id: &str,
    (staging, target): (&Path, &Path),
) {
    node.node_unpublish_volume(NodeUnpublishVolumeRequest {
        volume_id: volume_id.into(),
        target_path: target.display().to_string(),
    })
    .await
    .expect("NodeUnpublishVolume");
    node.node_unstage_volume(NodeUnstageVolumeRequest {
        volume_id: volume_id.into(),
        staging_target_path: staging.display().to_string(),
    })
    .await
    .expect("NodeUnstageVolume");
    controller
        .controller()
        .controller_unpublish_volume(ControllerUnpublishVolumeRequest {
            volume_id: volume_id.into(),
            node_id: "host-1".into(),
            ..Default::default()
        })
        .await
        .expect("ControllerUnpublishVolume");
}

#[tokio::test]
async fn a_file_volume_lives_through_the_whole_csi_lifecycle() {
    let app = TestApp::start_with(topology("0")).await;
    app.create_policy("mirror", 1, 1, 0).await;
    let controller = Plugin::start(&app).await;
    let mut host = HostSide::new();
    let mut node = host.start_node_plugin().await;

    // CreateVolume as the provisioner sends it for a 4 GiB PVC.
    let volume = controller
        .controller()
        .create_volume(CreateVolumeRequest {
            name: "pvc-6c0f2a44-0b1e-4d8e-9a61-3f2b8f0c9e11".into(),
            capacity_range: Some(CapacityRange {
                required_bytes: (4 * GIB) as i64,
                limit_bytes: 0,
            }),
            volume_capabilities: vec![xfs_mount()],
            parameters: storage_class(),
            ..Default::default()
        })
        .await
        .expect("CreateVolume")
        .into_inner()
        .volume
        .expect("a volume");
    let id = volume.volume_id.clone();
    assert_eq!(volume.capacity_bytes, (4 * GIB) as i64);

    let (staging, target) = publish_and_stage(&controller, &host, &mut node, &id, "pod-a").await;
    assert_eq!(
        hd::mounts_on(&staging).unwrap()[0].fstype,
        "xfs",
        "staged as the StorageClass asked"
    );
    let mut files = BTreeMap::new();
    for i in 0..6u64 {
        let path = target.join(format!("file-{i}"));
        let data = pattern(i + 40, 512 << 10);
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&data).unwrap();
        f.sync_all().unwrap();
        files.insert(format!("file-{i}"), sha(&data));
    }
    std::fs::File::open(&target).unwrap().sync_all().unwrap();
    let df_before = hd::filesystem_bytes(&target).unwrap();

    // The resizer: ControllerExpandVolume (in place), then the kubelet's
    // NodeExpandVolume on the staged volume.
    let expanded = controller
        .controller()
        .controller_expand_volume(ControllerExpandVolumeRequest {
            volume_id: id.clone(),
            capacity_range: Some(CapacityRange {
                required_bytes: (6 * GIB) as i64,
                limit_bytes: 0,
            }),
            volume_capability: Some(xfs_mount()),
            ..Default::default()
        })
        .await
        .expect("ControllerExpandVolume")
        .into_inner();
    assert_eq!(expanded.capacity_bytes, (6 * GIB) as i64);
    assert!(expanded.node_expansion_required);
    node.node_expand_volume(NodeExpandVolumeRequest {
        volume_id: id.clone(),
        volume_path: target.display().to_string(),
        staging_target_path: staging.display().to_string(),
        capacity_range: Some(CapacityRange {
            required_bytes: (6 * GIB) as i64,
            limit_bytes: 0,
        }),
        volume_capability: Some(xfs_mount()),
        ..Default::default()
    })
    .await
    .expect("NodeExpandVolume");
    let df_after = hd::filesystem_bytes(&target).unwrap();
    assert!(
        df_after > df_before + GIB && df_after <= 6 * GIB,
        "df {df_before} -> {df_after}"
    );
    for (name, want) in &files {
        assert_eq!(&sha(&std::fs::read(target.join(name)).unwrap()), want);
    }

    // A snapshot, and a clone of it with the files.
    let snapshot = controller
        .controller()
        .create_snapshot(CreateSnapshotRequest {
            source_volume_id: id.clone(),
            name: "snapshot-5b1d".into(),
            ..Default::default()
        })
        .await
        .expect("CreateSnapshot")
        .into_inner()
        .snapshot
        .expect("a snapshot");
    assert!(snapshot.ready_to_use);
    let clone = controller
        .controller()
        .create_volume(CreateVolumeRequest {
            name: "pvc-clone".into(),
            capacity_range: Some(CapacityRange {
                required_bytes: (6 * GIB) as i64,
                limit_bytes: 0,
            }),
            volume_capabilities: vec![xfs_mount()],
            parameters: storage_class(),
            volume_content_source: Some(VolumeContentSource {
                r#type: Some(SourceType::Snapshot(SnapshotSource {
                    snapshot_id: snapshot.snapshot_id.clone(),
                })),
            }),
            ..Default::default()
        })
        .await
        .expect("CreateVolume from a snapshot")
        .into_inner()
        .volume
        .expect("a clone");
    let clone_paths =
        publish_and_stage(&controller, &host, &mut node, &clone.volume_id, "pod-b").await;
    for (name, want) in &files {
        let got = std::fs::read(clone_paths.1.join(name)).unwrap();
        assert_eq!(&sha(&got), want, "{name} in the clone");
    }

    // Tear everything down, as the orchestrator does when the PVCs go.
    take_down(
        &controller,
        &mut node,
        &clone.volume_id,
        (&clone_paths.0, &clone_paths.1),
    )
    .await;
    take_down(&controller, &mut node, &id, (&staging, &target)).await;
    for volume_id in [&clone.volume_id, &id] {
        if volume_id == &id {
            controller
                .controller()
                .delete_snapshot(DeleteSnapshotRequest {
                    snapshot_id: snapshot.snapshot_id.clone(),
                    ..Default::default()
                })
                .await
                .expect("DeleteSnapshot");
        }
        controller
            .controller()
            .delete_volume(DeleteVolumeRequest {
                volume_id: volume_id.clone(),
                ..Default::default()
            })
            .await
            .expect("DeleteVolume");
    }
    let (_, volumes) = app.get("/volumes").await;
    assert_eq!(volumes, serde_json::json!([]), "every volume is gone");
    host.kill_process();
    let left = host.leftovers();
    assert!(left.is_empty(), "left behind: {left:?}");
}
