//! The CSI node plugin end to end: the real `svs serve` and a real
//! `svs csi node --node host-1` on a unix socket. The test plays the
//! controller side over HTTP (a `"manager": "csi"` attachment, its `uri`
//! into the publish context) and the kubelet over gRPC: stage, publish
//! (read-write and read-only bind mounts, a raw block device), stats,
//! online expansion after an in-place resize, a plugin restart, and
//! idempotent teardown, leaving nothing mounted, looped or running.

use crate::harness::host_side::HostSide;
use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use svs_csi::proto::identity_client::IdentityClient;
use svs_csi::proto::node_client::NodeClient;
use svs_csi::proto::node_service_capability::{rpc, Type as CapabilityType};
use svs_csi::proto::volume_capability::access_mode::Mode;
use svs_csi::proto::volume_capability::{AccessMode, AccessType, BlockVolume, MountVolume};
use svs_csi::proto::volume_usage::Unit;
use svs_csi::proto::{
    CapacityRange, GetPluginCapabilitiesRequest, NodeExpandVolumeRequest,
    NodeGetCapabilitiesRequest, NodeGetInfoRequest, NodeGetVolumeStatsRequest,
    NodePublishVolumeRequest, NodeStageVolumeRequest, NodeUnpublishVolumeRequest,
    NodeUnstageVolumeRequest, VolumeCapability,
};
use svs_csi::tonic::transport::Channel;
use svs_csi::tonic::Code;
use svs_hostdev::host as hd;

pub(crate) type Node = NodeClient<Channel>;

impl HostSide {
    fn endpoint(&self) -> String {
        format!("unix://{}", self.path().join("csi.sock").display())
    }

    /// Starts `svs csi node` and waits until it answers.
    pub(crate) async fn start_node_plugin(&mut self) -> Node {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path().join("node.log"))
            .expect("node plugin log");
        let child = Command::new(svs_bin())
            .args(["csi", "node", "--node", "host-1", "--zone", "z1"])
            .arg("--endpoint")
            .arg(self.endpoint())
            .arg("--state-dir")
            .arg(self.path().join("state"))
            .env("SVS_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("svs csi node starts");
        self.process = Some(child);
        let start = Instant::now();
        loop {
            if let Ok(channel) = svs_csi::connect(&self.endpoint()).await {
                let mut node = NodeClient::new(channel);
                if node.node_get_info(NodeGetInfoRequest {}).await.is_ok() {
                    return node;
                }
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the node plugin did not answer: {}",
                self.node_log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The node plugin's Identity service (same socket).
    async fn node_identity(&self) -> IdentityClient<Channel> {
        IdentityClient::new(
            svs_csi::connect(&self.endpoint())
                .await
                .expect("node plugin socket"),
        )
    }

    fn node_log(&self) -> String {
        std::fs::read_to_string(self.path().join("node.log")).unwrap_or_default()
    }

    /// A directory as the kubelet makes it for a staging path.
    pub(crate) fn staging(&self, name: &str) -> PathBuf {
        let dir = self.path().join("staging").join(name);
        std::fs::create_dir_all(&dir).expect("staging dir");
        dir
    }

    /// A publish target: its parent exists, the target itself not yet.
    pub(crate) fn target(&self, pod: &str) -> PathBuf {
        let dir = self.path().join("pods").join(pod);
        std::fs::create_dir_all(&dir).expect("pod dir");
        dir.join("volume")
    }
}

/// Attaches `volume` to host-1 as the controller plugin does; returns the
/// attachment.
async fn csi_attach(app: &TestApp, volume: &str) -> Value {
    let path = format!("/volumes/{volume}/snapshots/top/attachments");
    let job = app
        .post_and_wait(&path, json!({"node": "host-1", "manager": "csi"}))
        .await;
    assert_eq!(job["state"], "Done", "{job}");
    let (status, a) = app.get(&format!("{path}/host-1")).await;
    assert_eq!(status, StatusCode::OK, "{a}");
    assert_eq!(a["manager"], "csi", "{a}");
    a
}

fn publish_context(a: &Value) -> HashMap<String, String> {
    [
        ("uri", a["uri"].as_str().unwrap_or_default()),
        ("exportname", a["exportname"].as_str().unwrap_or_default()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn capability(kind: AccessType, mode: Mode) -> Option<VolumeCapability> {
    Some(VolumeCapability {
        access_type: Some(kind),
        access_mode: Some(AccessMode { mode: mode as i32 }),
    })
}

fn mount_xfs() -> Option<VolumeCapability> {
    capability(
        AccessType::Mount(MountVolume {
            fs_type: "xfs".into(),
            ..MountVolume::default()
        }),
        Mode::SingleNodeWriter,
    )
}

fn block() -> Option<VolumeCapability> {
    capability(AccessType::Block(BlockVolume {}), Mode::SingleNodeWriter)
}

fn stage_request(
    id: &str,
    a: &Value,
    staging: &Path,
    cap: Option<VolumeCapability>,
) -> NodeStageVolumeRequest {
    NodeStageVolumeRequest {
        volume_id: id.into(),
        publish_context: publish_context(a),
        staging_target_path: staging.display().to_string(),
        volume_capability: cap,
        ..NodeStageVolumeRequest::default()
    }
}

fn publish_request(
    id: &str,
    staging: &Path,
    target: &Path,
    cap: Option<VolumeCapability>,
    readonly: bool,
) -> NodePublishVolumeRequest {
    NodePublishVolumeRequest {
        volume_id: id.into(),
        staging_target_path: staging.display().to_string(),
        target_path: target.display().to_string(),
        volume_capability: cap,
        readonly,
        ..NodePublishVolumeRequest::default()
    }
}

fn unpublish_request(id: &str, target: &Path) -> NodeUnpublishVolumeRequest {
    NodeUnpublishVolumeRequest {
        volume_id: id.into(),
        target_path: target.display().to_string(),
    }
}

fn unstage_request(id: &str, staging: &Path) -> NodeUnstageVolumeRequest {
    NodeUnstageVolumeRequest {
        volume_id: id.into(),
        staging_target_path: staging.display().to_string(),
    }
}

fn expand_request(id: &str, path: &Path, bytes: u64) -> NodeExpandVolumeRequest {
    NodeExpandVolumeRequest {
        volume_id: id.into(),
        volume_path: path.display().to_string(),
        capacity_range: Some(CapacityRange {
            required_bytes: bytes as i64,
            limit_bytes: 0,
        }),
        ..NodeExpandVolumeRequest::default()
    }
}

fn fstypes_on(target: &Path) -> Vec<String> {
    hd::mounts_on(target)
        .unwrap()
        .into_iter()
        .map(|m| m.fstype)
        .collect()
}

/// Resizes in place over HTTP, as ControllerExpandVolume does.
async fn resize_in_place(app: &TestApp, volume: &str, size: u64) {
    let job_id = app.start_resize(volume, size, false).await;
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
}

#[tokio::test]
async fn the_node_plugin_stages_publishes_grows_and_takes_down_a_file_volume() {
    let app = TestApp::start_with(crate::harness::attach::topology("0")).await;
    let mut host = HostSide::new();
    app.create_policy("mirror", 1, 1, 0).await;
    let id = app
        .create_volume_done(
            json!({"name": "f", "type": "file", "filesystem": "xfs", "size": 1, "policy": "mirror"}),
        )
        .await;
    let a = csi_attach(&app, "f").await;
    let mut node = host.start_node_plugin().await;

    let info = node
        .node_get_info(NodeGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.node_id, "host-1");
    assert_eq!(info.max_volumes_per_node, 0);
    let segments = info.accessible_topology.unwrap().segments;
    assert_eq!(
        segments,
        HashMap::from([(svs_csi::ZONE_TOPOLOGY_KEY.to_string(), "z1".to_string())])
    );
    let mut kinds: Vec<i32> = node
        .node_get_capabilities(NodeGetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner()
        .capabilities
        .into_iter()
        .filter_map(|c| c.r#type.map(|CapabilityType::Rpc(r)| r.r#type))
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        vec![
            rpc::Type::StageUnstageVolume as i32,
            rpc::Type::GetVolumeStats as i32,
            rpc::Type::ExpandVolume as i32
        ]
    );

    // Missing fields.
    for (request, message) in [
        (
            stage_request("", &a, &host.staging("f"), mount_xfs()),
            "volume_id is required",
        ),
        (
            stage_request(&id, &a, Path::new(""), mount_xfs()),
            "staging_target_path is required",
        ),
        (
            stage_request(&id, &a, &host.staging("f"), None),
            "volume_capability is required",
        ),
        (
            NodeStageVolumeRequest {
                publish_context: HashMap::new(),
                ..stage_request(&id, &a, &host.staging("f"), mount_xfs())
            },
            "publish_context.uri is required",
        ),
    ] {
        let status = node.node_stage_volume(request).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert_eq!(status.message(), message);
    }
    let status = node
        .node_publish_volume(publish_request(
            &id,
            &host.staging("f"),
            Path::new(""),
            mount_xfs(),
            false,
        ))
        .await
        .unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (Code::InvalidArgument, "target_path is required")
    );
    let status = node
        .node_unpublish_volume(unpublish_request("", &host.target("x")))
        .await
        .unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (Code::InvalidArgument, "volume_id is required")
    );

    // Publishing before staging is refused.
    let staging = host.staging("f");
    let status = node
        .node_publish_volume(publish_request(
            &id,
            &staging,
            &host.target("early"),
            mount_xfs(),
            false,
        ))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");

    // Stage (twice: idempotent): the volume's XFS on the staging path.
    for _ in 0..2 {
        node.node_stage_volume(stage_request(&id, &a, &staging, mount_xfs()))
            .await
            .unwrap_or_else(|e| panic!("{e:?}\n{}", host.node_log()));
    }
    assert_eq!(fstypes_on(&staging), vec!["xfs".to_string()]);

    // Publish read-write (twice) and write files there.
    let rw = host.target("writer");
    for _ in 0..2 {
        node.node_publish_volume(publish_request(&id, &staging, &rw, mount_xfs(), false))
            .await
            .unwrap();
    }
    let data = pattern(3, 4 << 20);
    std::fs::write(rw.join("data"), &data).unwrap();
    std::fs::create_dir(rw.join("dir")).unwrap();
    std::fs::write(rw.join("dir/small"), b"small").unwrap();
    assert_eq!(std::fs::read(staging.join("data")).unwrap(), data);

    // The plugin restarts: it finds its device and mount again.
    host.kill_process();
    let mut node = host.start_node_plugin().await;
    node.node_stage_volume(stage_request(&id, &a, &staging, mount_xfs()))
        .await
        .unwrap();
    assert_eq!(fstypes_on(&staging), vec!["xfs".to_string()]);

    // A second, read-only publish: reads work, writes fail with EROFS.
    let ro = host.target("reader");
    node.node_publish_volume(publish_request(&id, &staging, &ro, mount_xfs(), true))
        .await
        .unwrap();
    assert_eq!(std::fs::read(ro.join("data")).unwrap(), data);
    let err = std::fs::write(ro.join("nope"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");
    std::fs::write(rw.join("still"), b"rw").unwrap();
    // The same target with another mode is an incompatible publish.
    let status = node
        .node_publish_volume(publish_request(&id, &staging, &ro, mount_xfs(), false))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::AlreadyExists, "{status:?}");

    // Stats: bytes and inodes of the filesystem; unknown paths.
    let stats = node
        .node_get_volume_stats(NodeGetVolumeStatsRequest {
            volume_id: id.clone(),
            volume_path: rw.display().to_string(),
            staging_target_path: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let bytes = stats
        .usage
        .iter()
        .find(|u| u.unit == Unit::Bytes as i32)
        .expect("bytes");
    let inodes = stats
        .usage
        .iter()
        .find(|u| u.unit == Unit::Inodes as i32)
        .expect("inodes");
    let before = hd::filesystem_bytes(&rw).unwrap();
    assert_eq!(bytes.total as u64, before);
    assert!(bytes.used >= 4 << 20 && bytes.available > 0, "{bytes:?}");
    assert!(inodes.total > 0 && inodes.used >= 3, "{inodes:?}");
    assert!(before < GIB, "{before}");
    let status = node
        .node_get_volume_stats(NodeGetVolumeStatsRequest {
            volume_id: id.clone(),
            volume_path: host.path().join("missing").display().to_string(),
            staging_target_path: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    let stats_of = |volume: &str, path: &str| NodeGetVolumeStatsRequest {
        volume_id: volume.into(),
        volume_path: path.into(),
        staging_target_path: String::new(),
    };
    // An unknown volume is NOT_FOUND whatever its path (csi-sanity passes
    // "some/path"); a known one's path with `..` is INVALID_ARGUMENT.
    for path in [
        rw.display().to_string(),
        "some/path".into(),
        "/a/../b".into(),
    ] {
        let status = node
            .node_get_volume_stats(stats_of("not-staged", &path))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::NotFound, "{path}: {status:?}");
        assert_eq!(
            status.message(),
            "volume not-staged is not staged on this node"
        );
    }
    for path in [
        "../some/path".to_string(),
        format!("{}/../rw", rw.display()),
    ] {
        let status = node
            .node_get_volume_stats(stats_of(&id, &path))
            .await
            .unwrap_err();
        assert_eq!(
            (status.code(), status.message()),
            (
                Code::InvalidArgument,
                "volume_path must be an absolute path without '..'"
            ),
            "{path}"
        );
    }
    // A staged and published volume asked at a path it is not at is the
    // spec's NOT_FOUND row, relative (csi-sanity's "some/path"; `rw`
    // without its leading `/`: never resolved against the plugin's working
    // directory) or absolute (the host's own filesystem).
    let relative_rw = rw.strip_prefix("/").unwrap().display().to_string();
    for path in [
        "some/path".to_string(),
        relative_rw,
        host.path().display().to_string(),
    ] {
        let status = node
            .node_get_volume_stats(stats_of(&id, &path))
            .await
            .unwrap_err();
        assert_eq!(
            (status.code(), status.message()),
            (
                Code::NotFound,
                format!("volume {id} is not staged or published at {path}").as_str()
            ),
            "{path}"
        );
    }
    // Its staging path and a read-only publish are where it is.
    for path in [&staging, &ro] {
        node.node_get_volume_stats(stats_of(&id, &path.display().to_string()))
            .await
            .unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
    }
    for volume in [id.as_str(), "not-staged"] {
        let status = node
            .node_get_volume_stats(stats_of(volume, ""))
            .await
            .unwrap_err();
        assert_eq!(
            (status.code(), status.message()),
            (Code::InvalidArgument, "volume_path is required")
        );
    }

    // Grow in place over HTTP (the controller's part), then on the node.
    resize_in_place(&app, "f", 2).await;
    let grown = node
        .node_expand_volume(expand_request(&id, &rw, 2 * GIB))
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", host.node_log()))
        .into_inner();
    assert_eq!(grown.capacity_bytes as u64, 2 * GIB);
    let after = hd::filesystem_bytes(&rw).unwrap();
    assert!(after > before + GIB / 2, "df {before} -> {after}");
    assert_eq!(hd::filesystem_bytes(&ro).unwrap(), after);
    assert_eq!(std::fs::read(rw.join("data")).unwrap(), data);
    assert_eq!(std::fs::read(rw.join("dir/small")).unwrap(), b"small");
    // Again: nothing left to do.
    node.node_expand_volume(expand_request(&id, &rw, 2 * GIB))
        .await
        .unwrap();
    for path in [
        rw.clone(),
        PathBuf::from("some/path"),
        PathBuf::from("/a/../b"),
    ] {
        let status = node
            .node_expand_volume(expand_request("not-staged", &path, 2 * GIB))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::NotFound, "{path:?}: {status:?}");
        assert_eq!(
            status.message(),
            "volume not-staged is not staged on this node"
        );
    }
    for path in [PathBuf::from("some/path"), rw.join("../rw")] {
        let status = node
            .node_expand_volume(expand_request(&id, &path, 2 * GIB))
            .await
            .unwrap_err();
        assert_eq!(
            (status.code(), status.message()),
            (
                Code::InvalidArgument,
                "volume_path must be an absolute path without '..'"
            ),
            "{path:?}"
        );
    }
    let status = node
        .node_expand_volume(expand_request("not-staged", Path::new(""), 2 * GIB))
        .await
        .unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (Code::InvalidArgument, "volume_path is required")
    );

    // Teardown, each call twice.
    for target in [&ro, &rw] {
        for _ in 0..2 {
            node.node_unpublish_volume(unpublish_request(&id, target))
                .await
                .unwrap();
        }
        assert!(!target.exists(), "{}", target.display());
    }
    for _ in 0..2 {
        node.node_unstage_volume(unstage_request(&id, &staging))
            .await
            .unwrap_or_else(|e| panic!("{e:?}\n{}", host.node_log()));
    }
    assert!(fstypes_on(&staging).is_empty());
    assert!(staging.exists(), "the kubelet's staging directory stays");
    assert_eq!(host.leftovers(), Vec::<String>::new());
    // Formatted, grown online and unmounted through its FUSE file: none of
    // the FUSE library's expected warnings in the plugin's log.
    crate::harness::filesystem::fuse_library_stayed_quiet(&host.node_log());

    // The attachment goes without waiting for any agent.
    let job = app
        .delete_and_wait("/volumes/f/snapshots/top/attachments/host-1")
        .await;
    assert_eq!(job["state"], "Done", "{job}");
}

#[tokio::test]
async fn a_raw_block_volume_is_published_as_a_device_file_and_grows() {
    let app = TestApp::start_with(crate::harness::attach::topology("0")).await;
    let mut host = HostSide::new();
    app.create_policy("mirror", 1, 1, 0).await;
    let id = app
        .create_volume_done(json!({"name": "b", "type": "block", "size": 1, "policy": "mirror"}))
        .await;
    let a = csi_attach(&app, "b").await;
    let mut node = host.start_node_plugin().await;
    let staging = host.staging("b");
    node.node_stage_volume(stage_request(&id, &a, &staging, block()))
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", host.node_log()));
    assert!(fstypes_on(&staging).is_empty(), "nothing mounted for block");

    let target = host.target("dev");
    for _ in 0..2 {
        node.node_publish_volume(publish_request(&id, &staging, &target, block(), false))
            .await
            .unwrap_or_else(|e| panic!("{e:?}\n{}", host.node_log()));
    }
    let meta = std::fs::metadata(&target).unwrap();
    assert!(meta.file_type().is_block_device(), "{meta:?}");
    let data = pattern(9, 1 << 20);
    {
        let mut dev = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&target)
            .unwrap();
        dev.seek(SeekFrom::Start(GIB - (1 << 20))).unwrap();
        dev.write_all(&data).unwrap();
        dev.sync_all().unwrap();
        let mut back = vec![0u8; data.len()];
        dev.seek(SeekFrom::Start(GIB - (1 << 20))).unwrap();
        dev.read_exact(&mut back).unwrap();
        assert_eq!(back, data);
    }
    let stats = node
        .node_get_volume_stats(NodeGetVolumeStatsRequest {
            volume_id: id.clone(),
            volume_path: target.display().to_string(),
            staging_target_path: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stats.usage.len(), 1, "{stats:?}");
    assert_eq!(stats.usage[0].total as u64, GIB);
    assert_eq!(stats.usage[0].unit, Unit::Bytes as i32);
    // Not its device file: the spec's NOT_FOUND.
    for path in ["some/path".to_string(), host.path().display().to_string()] {
        let status = node
            .node_get_volume_stats(NodeGetVolumeStatsRequest {
                volume_id: id.clone(),
                volume_path: path.clone(),
                staging_target_path: String::new(),
            })
            .await
            .unwrap_err();
        assert_eq!(
            (status.code(), status.message()),
            (
                Code::NotFound,
                format!("volume {id} is not staged or published at {path}").as_str()
            )
        );
    }

    resize_in_place(&app, "b", 2).await;
    let grown = node
        .node_expand_volume(expand_request(&id, &target, 2 * GIB))
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", host.node_log()))
        .into_inner();
    assert_eq!(grown.capacity_bytes as u64, 2 * GIB);
    assert_eq!(hd::block_size(&target).unwrap(), 2 * GIB);
    {
        let mut dev = std::fs::File::open(&target).unwrap();
        let mut back = vec![0u8; data.len()];
        dev.seek(SeekFrom::Start(GIB - (1 << 20))).unwrap();
        dev.read_exact(&mut back).unwrap();
        assert_eq!(back, data, "the bytes stay where they were");
    }

    // A read-only publish refuses writes (its own read-only loop device
    // over the staged one), reads the bytes, and goes with its unpublish.
    let ro_target = host.target("dev-ro");
    node.node_publish_volume(publish_request(&id, &staging, &ro_target, block(), true))
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", host.node_log()));
    {
        let err = std::fs::OpenOptions::new()
            .write(true)
            .open(&ro_target)
            .and_then(|mut dev| dev.write_all(&data))
            .unwrap_err();
        assert!(
            matches!(
                err.raw_os_error(),
                Some(libc::EROFS) | Some(libc::EACCES) | Some(libc::EPERM)
            ),
            "{err}"
        );
        let mut dev = std::fs::File::open(&ro_target).unwrap();
        let mut back = vec![0u8; data.len()];
        dev.seek(SeekFrom::Start(GIB - (1 << 20))).unwrap();
        dev.read_exact(&mut back).unwrap();
        assert_eq!(back, data);
    }
    // Its loop device is over the staged device (the one the read-write
    // target is), and goes with the unpublish.
    let staged = {
        use std::os::unix::fs::MetadataExt;
        let rdev = std::fs::metadata(&target).unwrap().rdev();
        PathBuf::from(format!("/dev/loop{}", libc::minor(rdev)))
    };
    let over_staged = || {
        hd::loop_devices()
            .unwrap()
            .into_iter()
            .filter(|(_, back)| *back == staged)
            .count()
    };
    assert_eq!(over_staged(), 1, "{:?}", hd::loop_devices().unwrap());
    // That loop device is where the volume is, too: its size in stats.
    let stats = node
        .node_get_volume_stats(NodeGetVolumeStatsRequest {
            volume_id: id.clone(),
            volume_path: ro_target.display().to_string(),
            staging_target_path: String::new(),
        })
        .await
        .unwrap_or_else(|e| panic!("{e:?}"))
        .into_inner();
    assert_eq!(stats.usage[0].total as u64, 2 * GIB, "{stats:?}");
    node.node_unpublish_volume(unpublish_request(&id, &ro_target))
        .await
        .unwrap();
    // A loop device's detach completes once its last user lets go of it.
    let start = Instant::now();
    while over_staged() != 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the read-only loop device stays: {:?}",
            hd::loop_devices().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    for _ in 0..2 {
        node.node_unpublish_volume(unpublish_request(&id, &target))
            .await
            .unwrap();
    }
    assert!(!target.exists());
    for _ in 0..2 {
        node.node_unstage_volume(unstage_request(&id, &staging))
            .await
            .unwrap();
    }
    assert_eq!(host.leftovers(), Vec::<String>::new());
}

#[tokio::test]
async fn a_blank_volume_is_formatted_once_and_stays_staged_where_it_is() {
    let app = TestApp::start_with(crate::harness::attach::topology("0")).await;
    let mut host = HostSide::new();
    app.create_policy("mirror", 1, 1, 0).await;
    // A `block` volume has no filesystem: a mount capability formats it.
    let id = app
        .create_volume_done(json!({"name": "m", "type": "block", "size": 1, "policy": "mirror"}))
        .await;
    let a = csi_attach(&app, "m").await;
    let mut node = host.start_node_plugin().await;
    let ext4 = capability(
        AccessType::Mount(MountVolume::default()),
        Mode::SingleNodeWriter,
    );
    let staging = host.staging("m");
    node.node_stage_volume(stage_request(&id, &a, &staging, ext4.clone()))
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", host.node_log()));
    assert_eq!(fstypes_on(&staging), vec!["ext4".to_string()]);
    std::fs::write(staging.join("kept"), b"not formatted twice").unwrap();

    // Another staging path while staged: an incompatible stage.
    let status = node
        .node_stage_volume(stage_request(&id, &a, &host.staging("other"), ext4.clone()))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::AlreadyExists, "{status:?}");

    // Staged again after an unstage (an XFS capability now): the ext4 it
    // holds is mounted as it is, with its files.
    node.node_unstage_volume(unstage_request(&id, &staging))
        .await
        .unwrap();
    assert!(fstypes_on(&staging).is_empty());
    node.node_stage_volume(stage_request(&id, &a, &staging, mount_xfs()))
        .await
        .unwrap();
    assert_eq!(fstypes_on(&staging), vec!["ext4".to_string()]);
    assert_eq!(
        std::fs::read(staging.join("kept")).unwrap(),
        b"not formatted twice"
    );
    node.node_unstage_volume(unstage_request(&id, &staging))
        .await
        .unwrap();
    assert_eq!(host.leftovers(), Vec::<String>::new());
}

/// The CSI spec: GetPluginCapabilities describes the plugin as a whole,
/// the same from every instance. Asked of the node plugin alone, it must
/// still say there is a controller service (else a client stages without
/// ControllerPublish's context) and that volumes have a topology, which
/// NodeGetInfo then reports.
#[tokio::test]
async fn both_plugins_answer_the_same_plugin_capabilities() {
    let app = TestApp::start().await;
    let controller = crate::harness::csi_controller::Plugin::start(&app).await;
    let mut host = HostSide::new();
    let mut node = host.start_node_plugin().await;
    let node_caps = host
        .node_identity()
        .await
        .get_plugin_capabilities(GetPluginCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    let controller_caps = controller
        .identity()
        .get_plugin_capabilities(GetPluginCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    let names = crate::harness::csi_controller::plugin_capability_names;
    assert_eq!(names(&node_caps), names(&controller_caps));
    assert_eq!(
        names(&node_caps),
        crate::harness::csi_controller::PLUGIN_CAPABILITIES
    );
    let info = node
        .node_get_info(NodeGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        info.accessible_topology.map(|t| t.segments),
        Some(HashMap::from([(
            svs_csi::ZONE_TOPOLOGY_KEY.to_string(),
            "z1".to_string()
        )]))
    );
}

/// Accessibility constraints are advertised, so the node must have a
/// topology: `--zone` is required and must be a CSI topology value.
#[test]
fn the_node_plugin_needs_a_zone_that_is_a_topology_value() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let endpoint = format!("unix://{}", dir.path().join("csi.sock").display());
    let run = |zone: Option<&str>| {
        let mut command = Command::new(svs_bin());
        command
            .args(["csi", "node", "--node", "host-1", "--endpoint", &endpoint])
            .arg("--state-dir")
            .arg(&state)
            .env_remove("SVS_ZONE");
        if let Some(zone) = zone {
            command.arg(format!("--zone={zone}"));
        }
        let out = command.output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let stderr = run(None);
    assert!(
        stderr.contains("the following required arguments were not provided")
            && stderr.contains("--zone <ZONE>"),
        "{stderr}"
    );
    for bad in ["", "-z", "zone a", "a/b"] {
        let stderr = run(Some(bad));
        assert!(
            stderr.contains(&format!(
                "zone {bad:?} must be 1 to 63 letters, digits, '-', '_' or '.', \
                 starting and ending with a letter or digit"
            )),
            "{bad:?}: {stderr}"
        );
    }
    assert!(!state.exists(), "nothing made on the host");
}

#[test]
fn the_node_plugin_refuses_an_endpoint_that_is_not_a_unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let out = Command::new(svs_bin())
        .args([
            "csi",
            "node",
            "--node",
            "host-1",
            "--zone",
            "z1",
            "--endpoint",
            "tcp://127.0.0.1:9",
        ])
        .arg("--state-dir")
        .arg(&state)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("endpoint \"tcp://127.0.0.1:9\" must be unix:///absolute/path"),
        "{stderr}"
    );
    assert!(!state.exists(), "nothing made on the host");
}
