//! The Node service (`svs csi node`): makes a published volume real on
//! this host with the host agent's code (`svs_agent::host`): NodeStage
//! connects the attachment's NBD export (device process + loop device) and
//! mounts its filesystem at the staging path; NodePublish bind-mounts that
//! (or, for raw block, the device itself) at the workload's target.
//!
//! What it holds is recorded in its own `--state-dir` like the agent's, so
//! a restarted node plugin finds its devices and mounts again; devices and
//! mounts outlive the plugin process.
//!
//! The attachment itself is the controller's (ControllerPublishVolume makes
//! it with `"manager": "csi"`, so the host agent leaves it alone); its NBD
//! URI reaches this service in the publish context.

// Every CSI call answers with tonic's (large) Status: the helpers return
// it as is rather than boxing it only to unbox it at the gRPC boundary.
#![allow(clippy::result_large_err)]

use super::required;
use std::collections::HashSet;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use svs_agent::device::parse_uri;
use svs_agent::host::{Connection, Host};
use svs_csi::proto::node_server::Node;
use svs_csi::proto::node_service_capability::{rpc, Rpc, Type as CapabilityType};
use svs_csi::proto::volume_capability::access_mode::Mode;
use svs_csi::proto::volume_capability::AccessType;
use svs_csi::proto::volume_usage::Unit;
use svs_csi::proto::{
    NodeExpandVolumeRequest, NodeExpandVolumeResponse, NodeGetCapabilitiesRequest,
    NodeGetCapabilitiesResponse, NodeGetInfoRequest, NodeGetInfoResponse,
    NodeGetVolumeStatsRequest, NodeGetVolumeStatsResponse, NodePublishVolumeRequest,
    NodePublishVolumeResponse, NodeServiceCapability, NodeStageVolumeRequest,
    NodeStageVolumeResponse, NodeUnpublishVolumeRequest, NodeUnpublishVolumeResponse,
    NodeUnstageVolumeRequest, NodeUnstageVolumeResponse, Topology, VolumeCapability, VolumeUsage,
};
use svs_csi::tonic::{Request, Response, Status};
use svs_hostdev::host as hd;
use svs_hostdev::FsType;

/// Publish-context keys (set by the controller's ControllerPublishVolume).
pub const CONTEXT_URI: &str = "uri";
pub const CONTEXT_EXPORT: &str = "exportname";
/// Optional: `"true"` when the attachment is read-only.
pub const CONTEXT_READONLY: &str = "readonly";

pub struct NodeService {
    node: String,
    zone: String,
    host: Arc<Mutex<Host>>,
    /// Volumes with a call in progress: a second call on one of them is
    /// ABORTED (the orchestrator retries), as the CSI spec asks.
    busy: Arc<Mutex<HashSet<String>>>,
}

/// Marks a volume busy for the life of one call.
struct BusyGuard {
    busy: Arc<Mutex<HashSet<String>>>,
    volume: String,
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.busy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.volume);
    }
}

/// How a volume is used on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Access {
    /// A filesystem; the requested type (empty: whatever it holds, ext4 on
    /// a blank volume).
    Mount {
        fs_type: String,
    },
    Block,
}

fn access(capability: &Option<VolumeCapability>) -> Result<(Access, bool), Status> {
    let capability = capability
        .as_ref()
        .ok_or_else(|| required("volume_capability"))?;
    let kind = match &capability.access_type {
        Some(AccessType::Mount(m)) => Access::Mount {
            fs_type: m.fs_type.clone(),
        },
        Some(AccessType::Block(_)) => Access::Block,
        None => return Err(required("volume_capability.access_type")),
    };
    let reader_only = capability.access_mode.as_ref().is_some_and(|m| {
        m.mode == Mode::SingleNodeReaderOnly as i32 || m.mode == Mode::MultiNodeReaderOnly as i32
    });
    Ok((kind, reader_only))
}

/// A volume id names a directory in the state dir: svs ids only.
fn volume_key(volume_id: &str) -> Result<String, Status> {
    if volume_id.is_empty() {
        return Err(required("volume_id"));
    }
    let ok = volume_id.len() <= 128
        && !volume_id.starts_with('.')
        && volume_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if !ok {
        return Err(Status::not_found(format!(
            "volume {volume_id:?} is not an svs volume id"
        )));
    }
    Ok(volume_id.to_string())
}

fn path_arg(value: &str, field: &str) -> Result<PathBuf, Status> {
    if value.is_empty() {
        return Err(required(field));
    }
    judge_path(value, field)
}

/// A non-empty path argument: absolute, without `..`.
fn judge_path(value: &str, field: &str) -> Result<PathBuf, Status> {
    let path = PathBuf::from(value);
    if !path.is_absolute()
        || path
            .components()
            .any(|c| c == std::path::Component::ParentDir)
    {
        return Err(Status::invalid_argument(format!(
            "{field} must be an absolute path without '..'"
        )));
    }
    Ok(path)
}

fn internal(e: impl std::fmt::Display) -> Status {
    Status::internal(e.to_string())
}

fn to_i64(bytes: u64) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

/// The device of a volume staged here; NOT_FOUND for any other volume.
/// Asked before a call judges its path: the CSI spec answers NOT_FOUND
/// for an unknown volume whatever path comes with it.
fn staged_device(host: &Host, key: &str) -> Result<PathBuf, Status> {
    host.device(key)
        .ok_or_else(|| Status::not_found(format!("volume {key} is not staged on this node")))
}

/// NodeGetVolumeStats' `volume_path`: `..` is refused (INVALID_ARGUMENT,
/// as for every path argument); any other path the volume is not at is the
/// spec's NOT_FOUND row ("does not exist on specified volume_path"). A
/// relative path is one of those (csi-sanity asks "some/path"): the volume
/// is only ever staged and published at absolute paths, and it is not
/// resolved against the plugin's working directory.
fn stats_path(key: &str, value: &str) -> Result<PathBuf, Status> {
    let path = PathBuf::from(value);
    if path
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        return Err(Status::invalid_argument(
            "volume_path must be an absolute path without '..'",
        ));
    }
    if !path.is_absolute() {
        return Err(not_at(key, &path));
    }
    Ok(path)
}

fn not_at(key: &str, path: &Path) -> Status {
    Status::not_found(format!(
        "volume {key} is not staged or published at {}",
        path.display()
    ))
}

/// How a staged volume is at `path`.
#[derive(Debug, PartialEq, Eq)]
enum At {
    /// Its device, or the read-only loop device a read-only block publish
    /// put over it.
    Block,
    /// A file or directory in its filesystem (the staging mount or a bind
    /// mount of it).
    Filesystem,
}

/// Whether the volume staged on `device` is at `path`: NOT_FOUND when the
/// path is missing or belongs to something else (another volume, the
/// host's own filesystem).
fn volume_at(key: &str, device: &Path, path: &Path) -> Result<At, Status> {
    use std::os::unix::fs::MetadataExt;
    let ours = std::fs::metadata(device).map_err(internal)?.rdev();
    let meta = std::fs::metadata(path).map_err(|_| not_at(key, path))?;
    if meta.file_type().is_block_device() {
        let over_ours = || {
            read_only_loop_at(path).is_some_and(|dev| {
                hd::loop_devices()
                    .ok()
                    .into_iter()
                    .flatten()
                    .any(|(d, back)| d == dev && back == device)
            })
        };
        return if meta.rdev() == ours || over_ours() {
            Ok(At::Block)
        } else {
            Err(not_at(key, path))
        };
    }
    // ext4 and XFS report their block device's number as every file's
    // st_dev, bind mounts included.
    if meta.dev() == ours {
        Ok(At::Filesystem)
    } else {
        Err(not_at(key, path))
    }
}

/// Takes every mount off `target` (a stack of them included).
fn unmount_all(target: &Path) -> Result<(), Status> {
    // Bounded: a mount that will not go is an error, not a spin.
    for _ in 0..8 {
        if hd::mounts_on(target).map_err(internal)?.is_empty() {
            return Ok(());
        }
        let mut tries = 0;
        while let Err(e) = hd::unmount(target) {
            // A just-closed file can keep it busy for a moment.
            tries += 1;
            if tries > 20 {
                return Err(internal(format!(
                    "unmount of {} failed: {e}",
                    target.display()
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    Err(internal(format!("{} stays mounted", target.display())))
}

/// Removes a publish target (directory or file), if it is there.
fn remove_target(target: &Path) -> Result<(), Status> {
    let result = match std::fs::symlink_metadata(target) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.is_dir() => std::fs::remove_dir(target),
        Ok(_) => std::fs::remove_file(target),
    };
    result.map_err(|e| internal(format!("cannot remove {}: {e}", target.display())))
}

impl NodeService {
    pub fn new(node: String, zone: String, host: Host) -> NodeService {
        NodeService {
            node,
            zone,
            host: Arc::new(Mutex::new(host)),
            busy: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    fn claim(&self, volume: &str) -> Result<BusyGuard, Status> {
        let mut busy = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        if !busy.insert(volume.to_string()) {
            return Err(Status::aborted(format!(
                "an operation on volume {volume} is in progress"
            )));
        }
        Ok(BusyGuard {
            busy: self.busy.clone(),
            volume: volume.to_string(),
        })
    }

    /// Runs `work` on the host off the async threads (mounts, device
    /// processes and tools block).
    async fn on_host<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Host) -> Result<T, Status> + Send + 'static,
    ) -> Result<T, Status> {
        let host = self.host.clone();
        tokio::task::spawn_blocking(move || {
            let mut h = host.lock().unwrap_or_else(|p| p.into_inner());
            work(&mut h)
        })
        .await
        .map_err(internal)?
    }
}

/// Stage: connect, then for a filesystem make it (only on a blank volume)
/// and mount it at `staging`.
fn stage(
    host: &mut Host,
    key: &str,
    connection: &Connection,
    staging: &Path,
    kind: &Access,
) -> Result<(), Status> {
    if let Some(at) = host.mountpath(key).filter(|at| at != staging) {
        return Err(Status::already_exists(format!(
            "volume {key} is staged at {}",
            at.display()
        )));
    }
    let connected = host.connect(key, connection).map_err(internal)?;
    let Access::Mount { fs_type } = kind else {
        return Ok(());
    };
    let device = connected.device;
    let fs = match hd::filesystem_type(&device).map_err(internal)? {
        Some(found) => FsType::parse(&found).ok_or_else(|| {
            Status::failed_precondition(format!(
                "volume {key} holds a {found} filesystem; svs mounts ext4 or xfs"
            ))
        })?,
        None => {
            let fs = match fs_type.as_str() {
                "" => FsType::Ext4,
                other => FsType::parse(other).ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "fs_type {other:?} is not supported: ext4 or xfs"
                    ))
                })?,
            };
            if connection.readonly {
                return Err(Status::failed_precondition(format!(
                    "volume {key} is blank and attached read-only: no filesystem can be made"
                )));
            }
            tracing::info!(volume = key, fs = fs.name(), "formatting a blank volume");
            svs_hostdev::mkfs(&device, fs).map_err(internal)?;
            fs
        }
    };
    host.mount(key, &device, staging, fs, connection.readonly)
        .map_err(internal)?;
    Ok(())
}

/// Publish a staged filesystem: bind mount, read-only when asked.
fn publish_mount(
    host: &Host,
    key: &str,
    staging: &Path,
    target: &Path,
    readonly: bool,
) -> Result<(), Status> {
    if host.mountpath(key).as_deref() != Some(staging) {
        return Err(Status::failed_precondition(format!(
            "volume {key} is not staged at {}",
            staging.display()
        )));
    }
    if let Some(m) = hd::mounts_on(target).map_err(internal)?.last() {
        return if m.read_only == readonly {
            Ok(())
        } else {
            Err(Status::already_exists(format!(
                "{} is published with readonly={}",
                target.display(),
                m.read_only
            )))
        };
    }
    std::fs::create_dir_all(target)
        .map_err(|e| internal(format!("cannot make {}: {e}", target.display())))?;
    hd::bind_mount(staging, target, readonly).map_err(internal)
}

/// Publish a raw block volume: its device bind-mounted onto a file. A
/// read-only bind mount does not stop writes to a device node, so a
/// read-only publish gets a read-only loop device over the staged device
/// (found again at unpublish by the device number of the target).
fn publish_block(host: &Host, key: &str, target: &Path, readonly: bool) -> Result<(), Status> {
    let device = host
        .device(key)
        .ok_or_else(|| Status::failed_precondition(format!("volume {key} is not staged")))?;
    if let Some(m) = hd::mounts_on(target).map_err(internal)?.last() {
        return if m.read_only == readonly {
            Ok(())
        } else {
            Err(Status::already_exists(format!(
                "{} is published with readonly={}",
                target.display(),
                m.read_only
            )))
        };
    }
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| internal(format!("cannot make {}: {e}", parent.display())))?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(target)
        .map_err(|e| internal(format!("cannot make {}: {e}", target.display())))?;
    if !readonly {
        return hd::bind_mount(&device, target, false).map_err(internal);
    }
    let read_only = hd::loop_attach_kept(&device, true).map_err(internal)?;
    hd::bind_mount(&read_only, target, true).map_err(|e| {
        let _ = hd::loop_detach(&read_only);
        internal(e)
    })
}

/// The read-only loop device a read-only block publish put at `target`:
/// a loop device (major 7) whose backing file is another block device.
fn read_only_loop_at(target: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = std::fs::metadata(target).ok()?;
    if !meta.file_type().is_block_device() {
        return None;
    }
    let rdev = meta.rdev();
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    if major != 7 {
        return None;
    }
    let device = PathBuf::from(format!("/dev/loop{minor}"));
    hd::loop_devices()
        .ok()?
        .into_iter()
        .find(|(dev, back)| *dev == device && back.to_string_lossy().starts_with("/dev/"))
        .map(|(dev, _)| dev)
}

fn capability(kind: rpc::Type) -> NodeServiceCapability {
    NodeServiceCapability {
        r#type: Some(CapabilityType::Rpc(Rpc {
            r#type: kind as i32,
        })),
    }
}

#[svs_csi::tonic::async_trait]
impl Node for NodeService {
    async fn node_stage_volume(
        &self,
        request: Request<NodeStageVolumeRequest>,
    ) -> Result<Response<NodeStageVolumeResponse>, Status> {
        let r = request.into_inner();
        let key = volume_key(&r.volume_id)?;
        let staging = path_arg(&r.staging_target_path, "staging_target_path")?;
        let (kind, reader_only) = access(&r.volume_capability)?;
        let uri = r
            .publish_context
            .get(CONTEXT_URI)
            .filter(|u| !u.is_empty())
            .cloned()
            .ok_or_else(|| required("publish_context.uri"))?;
        let (_, export) = parse_uri(&uri)
            .ok_or_else(|| Status::invalid_argument(format!("unusable NBD URI {uri:?}")))?;
        let export = r
            .publish_context
            .get(CONTEXT_EXPORT)
            .filter(|e| !e.is_empty())
            .cloned()
            .unwrap_or(export);
        let readonly = reader_only
            || r.publish_context.get(CONTEXT_READONLY).map(String::as_str) == Some("true");
        let _busy = self.claim(&key)?;
        self.on_host(move |host| {
            let connection = Connection {
                volume_id: &key,
                snapshot_id: svs_domain::LIVE_SNAPSHOT_NAME,
                volume_name: &key,
                export_name: &export,
                uri: &uri,
                readonly,
                size: 0,
            };
            stage(host, &key, &connection, &staging, &kind)
        })
        .await?;
        Ok(Response::new(NodeStageVolumeResponse {}))
    }

    async fn node_unstage_volume(
        &self,
        request: Request<NodeUnstageVolumeRequest>,
    ) -> Result<Response<NodeUnstageVolumeResponse>, Status> {
        let r = request.into_inner();
        let key = volume_key(&r.volume_id)?;
        path_arg(&r.staging_target_path, "staging_target_path")?;
        let _busy = self.claim(&key)?;
        self.on_host(move |host| host.detach(&key).map_err(internal))
            .await?;
        Ok(Response::new(NodeUnstageVolumeResponse {}))
    }

    async fn node_publish_volume(
        &self,
        request: Request<NodePublishVolumeRequest>,
    ) -> Result<Response<NodePublishVolumeResponse>, Status> {
        let r = request.into_inner();
        let key = volume_key(&r.volume_id)?;
        let target = path_arg(&r.target_path, "target_path")?;
        let staging = path_arg(&r.staging_target_path, "staging_target_path")?;
        let (kind, reader_only) = access(&r.volume_capability)?;
        let readonly = r.readonly || reader_only;
        let _busy = self.claim(&key)?;
        self.on_host(move |host| match kind {
            Access::Mount { .. } => publish_mount(host, &key, &staging, &target, readonly),
            Access::Block => publish_block(host, &key, &target, readonly),
        })
        .await?;
        Ok(Response::new(NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<NodeUnpublishVolumeRequest>,
    ) -> Result<Response<NodeUnpublishVolumeResponse>, Status> {
        let r = request.into_inner();
        let key = volume_key(&r.volume_id)?;
        let target = path_arg(&r.target_path, "target_path")?;
        let _busy = self.claim(&key)?;
        self.on_host(move |_| {
            let read_only = read_only_loop_at(&target);
            unmount_all(&target)?;
            if let Some(device) = read_only {
                hd::loop_detach(&device).map_err(internal)?;
            }
            remove_target(&target)
        })
        .await?;
        Ok(Response::new(NodeUnpublishVolumeResponse {}))
    }

    async fn node_get_volume_stats(
        &self,
        request: Request<NodeGetVolumeStatsRequest>,
    ) -> Result<Response<NodeGetVolumeStatsResponse>, Status> {
        let r = request.into_inner();
        let key = volume_key(&r.volume_id)?;
        if r.volume_path.is_empty() {
            return Err(required("volume_path"));
        }
        let usage = self
            .on_host(move |host| {
                let device = staged_device(host, &key)?;
                let path = stats_path(&key, &r.volume_path)?;
                if volume_at(&key, &device, &path)? == At::Block {
                    let total = hd::block_size(&device).map_err(internal)?;
                    return Ok(vec![VolumeUsage {
                        total: to_i64(total),
                        unit: Unit::Bytes as i32,
                        ..VolumeUsage::default()
                    }]);
                }
                let s = hd::filesystem_stats(&path).map_err(internal)?;
                Ok(vec![
                    VolumeUsage {
                        available: to_i64(s.available_bytes),
                        total: to_i64(s.total_bytes),
                        used: to_i64(s.used_bytes),
                        unit: Unit::Bytes as i32,
                    },
                    VolumeUsage {
                        available: to_i64(s.free_inodes),
                        total: to_i64(s.total_inodes),
                        used: to_i64(s.used_inodes),
                        unit: Unit::Inodes as i32,
                    },
                ])
            })
            .await?;
        Ok(Response::new(NodeGetVolumeStatsResponse {
            usage,
            volume_condition: None,
        }))
    }

    async fn node_expand_volume(
        &self,
        request: Request<NodeExpandVolumeRequest>,
    ) -> Result<Response<NodeExpandVolumeResponse>, Status> {
        let r = request.into_inner();
        let key = volume_key(&r.volume_id)?;
        if r.volume_path.is_empty() {
            return Err(required("volume_path"));
        }
        let want = r
            .capacity_range
            .as_ref()
            .map(|c| u64::try_from(c.required_bytes).unwrap_or(0))
            .unwrap_or(0);
        let _busy = self.claim(&key)?;
        let size = self
            .on_host(move |host| {
                staged_device(host, &key)?;
                judge_path(&r.volume_path, "volume_path")?;
                host.expand(&key, want).map_err(internal)
            })
            .await?;
        Ok(Response::new(NodeExpandVolumeResponse {
            capacity_bytes: to_i64(size),
        }))
    }

    async fn node_get_capabilities(
        &self,
        _: Request<NodeGetCapabilitiesRequest>,
    ) -> Result<Response<NodeGetCapabilitiesResponse>, Status> {
        Ok(Response::new(NodeGetCapabilitiesResponse {
            capabilities: vec![
                capability(rpc::Type::StageUnstageVolume),
                capability(rpc::Type::ExpandVolume),
                capability(rpc::Type::GetVolumeStats),
            ],
        }))
    }

    async fn node_get_info(
        &self,
        _: Request<NodeGetInfoRequest>,
    ) -> Result<Response<NodeGetInfoResponse>, Status> {
        Ok(Response::new(NodeGetInfoResponse {
            node_id: self.node.clone(),
            max_volumes_per_node: 0,
            accessible_topology: Some(Topology {
                segments: [(svs_csi::ZONE_TOPOLOGY_KEY.to_string(), self.zone.clone())].into(),
            }),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use svs_csi::proto::volume_capability::{AccessMode, BlockVolume, MountVolume};

    fn capability(kind: AccessType, mode: Mode) -> Option<VolumeCapability> {
        Some(VolumeCapability {
            access_type: Some(kind),
            access_mode: Some(AccessMode { mode: mode as i32 }),
        })
    }

    #[test]
    fn volume_ids_must_be_svs_ids() {
        assert_eq!(
            volume_key("3f0c-9a_b.1").unwrap(),
            "3f0c-9a_b.1".to_string()
        );
        assert_eq!(
            volume_key("").unwrap_err().code(),
            svs_csi::tonic::Code::InvalidArgument
        );
        for bad in ["..", "../etc", "a/b", ".hidden", "a b"] {
            assert_eq!(
                volume_key(bad).unwrap_err().code(),
                svs_csi::tonic::Code::NotFound,
                "{bad}"
            );
        }
    }

    #[test]
    fn paths_must_be_absolute_without_parent_steps() {
        assert_eq!(path_arg("/a/b", "t").unwrap(), Path::new("/a/b"));
        assert_eq!(path_arg("", "t").unwrap_err().message(), "t is required");
        assert!(path_arg("a/b", "t").is_err());
        assert!(path_arg("/a/../b", "t").is_err());
    }

    #[test]
    fn a_stats_path_refuses_parent_steps_and_is_not_found_relative() {
        assert_eq!(stats_path("v", "/a/b").unwrap(), Path::new("/a/b"));
        for dotted in ["/a/../b", "../b", "a/.."] {
            let e = stats_path("v", dotted).unwrap_err();
            assert_eq!(
                (e.code(), e.message()),
                (
                    svs_csi::tonic::Code::InvalidArgument,
                    "volume_path must be an absolute path without '..'"
                ),
                "{dotted}"
            );
        }
        let e = stats_path("v", "some/path").unwrap_err();
        assert_eq!(
            (e.code(), e.message()),
            (
                svs_csi::tonic::Code::NotFound,
                "volume v is not staged or published at some/path"
            )
        );
    }

    #[test]
    fn reader_only_modes_make_the_volume_read_only() {
        let mount = AccessType::Mount(MountVolume {
            fs_type: "xfs".into(),
            ..MountVolume::default()
        });
        assert_eq!(
            access(&capability(mount.clone(), Mode::SingleNodeWriter)).unwrap(),
            (
                Access::Mount {
                    fs_type: "xfs".into()
                },
                false
            )
        );
        assert!(
            access(&capability(mount, Mode::MultiNodeReaderOnly))
                .unwrap()
                .1
        );
        assert_eq!(
            access(&capability(
                AccessType::Block(BlockVolume {}),
                Mode::SingleNodeReaderOnly
            ))
            .unwrap(),
            (Access::Block, true)
        );
        assert_eq!(
            access(&None).unwrap_err().message(),
            "volume_capability is required"
        );
    }
}
