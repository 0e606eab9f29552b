//! This host's devices and mounts, reconciled with the node's desired
//! attachments. Per attachment: a device process (see `device`) serving
//! the volume as a FUSE file, a loop device over the file, and for `file`
//! volumes the filesystem mounted on it, grown when the volume grows.
//!
//! Everything this host holds is recorded in `<state_dir>/attachments/`
//! (one JSON file per attachment, written before each step it describes),
//! so a restarted agent finds its devices and mounts again instead of
//! making second ones; a device process that died is noticed and replaced.
//! Nothing here is undone by a guard: mounts must outlive the agent.

use super::device::{
    address_file, fuse_dir, kernel_device_file, parse_uri, uri_uses_tls, write_address,
    BlockDeviceMode, DeviceSpec, FILE_NAME,
};
use super::service::{DesiredAttachment, HostReport};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use svs_hostdev::host as hd;
use svs_hostdev::FsType;

/// Where the agent keeps its records and devices, and mounts by default.
#[derive(Debug, Clone)]
pub struct HostConfig {
    pub state_dir: PathBuf,
    /// `file` volumes without a mountpoint go to `<mount_root>/<volume>`.
    pub mount_root: PathBuf,
    /// The `svs` binary, started as `svs agent-device`.
    pub exe: PathBuf,
    pub mode: BlockDeviceMode,
}

/// Why a kernel NBD device does not grow.
const STUCK_SIZE: &str =
    "the kernel NBD device keeps the size it was connected with: detach and attach again";

/// A failed grow is tried again after this long (or when the size changes).
const GROW_RETRY_SECS: u64 = 60;
/// How long a device process has to connect and mount its FUSE file.
const DEVICE_START: Duration = Duration::from_secs(30);

/// What this host holds for one attachment.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    volumeid: String,
    snapshotid: String,
    volumename: String,
    exportname: String,
    readonly: bool,
    /// Set once the device process runs.
    device_pid: Option<u32>,
    loop_device: Option<PathBuf>,
    /// Where the filesystem is mounted, while it is.
    mountpath: Option<PathBuf>,
    /// The agent made the mount's directory (and removes it at detach).
    created_mountpath: bool,
    /// GiB: the volume size the mounted filesystem fills.
    grown_for: Option<u64>,
    /// The last failed grow: (size in GiB, message, when in Unix seconds).
    grow_error: Option<(u64, String, u64)>,
    /// The job whose request the last grow attempt answered.
    #[serde(default)]
    grow_job: Option<i64>,
    /// `host:port` the device process was last told (its address file);
    /// None in records of agents before it.
    #[serde(default)]
    address: Option<String>,
}

/// What a desired attachment asks of the device recorded for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DeviceChange {
    /// Nothing: the same export, mode and address.
    Keep,
    /// The same export at another address (the volume's front moved to
    /// another node): the device process is told and follows; the loop
    /// device and the mount stay.
    Address,
    /// Another export or mode: the device (and its mount) is taken down and
    /// made again.
    Replace,
}

fn device_change(rec: &Record, export_name: &str, readonly: bool, address: &str) -> DeviceChange {
    if rec.exportname != export_name || rec.readonly != readonly {
        DeviceChange::Replace
    } else if rec.address.as_deref() != Some(address) {
        DeviceChange::Address
    } else {
        DeviceChange::Keep
    }
}

/// One attachment's report, for the service.
pub struct Outcome {
    pub volume_id: String,
    pub snapshot_id: String,
    pub report: HostReport,
}

/// What to connect: one attachment's export.
pub struct Connection<'a> {
    pub volume_id: &'a str,
    pub snapshot_id: &'a str,
    pub volume_name: &'a str,
    pub export_name: &'a str,
    /// `nbd://host:port/<exportname>`.
    pub uri: &'a str,
    pub readonly: bool,
    /// Bytes the device must have (the volume's size); 0: as it connects.
    pub size: u64,
}

/// A connected attachment.
pub struct Connected {
    /// `/dev/loopN` (or `/dev/nbdN`).
    pub device: PathBuf,
    /// The device has the size asked for (a kernel NBD device keeps the
    /// size it was connected with).
    pub sized: bool,
    /// Something worth telling (a device process was replaced).
    pub note: Option<String>,
}

pub struct Host {
    config: HostConfig,
    records: BTreeMap<String, Record>,
    /// Device processes this agent started (reaped when they exit; the
    /// ones an earlier agent started belong to init).
    children: HashMap<u32, Child>,
    /// Something is left to do (a busy unmount, a grow to retry): the
    /// agent comes back sooner than its usual long poll.
    pending: bool,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl Host {
    /// Opens the state directory, loads the records and removes what an
    /// agent that died mid-step left without a record.
    pub fn open(config: HostConfig) -> Result<Host, String> {
        for dir in [
            config.state_dir.join("attachments"),
            config.state_dir.join("devices"),
        ] {
            std::fs::create_dir_all(&dir)
                .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        }
        let mut records = BTreeMap::new();
        let dir = config.state_dir.join("attachments");
        let entries =
            std::fs::read_dir(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(key) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".json"))
            else {
                continue;
            };
            match std::fs::read(&path)
                .map_err(text)
                .and_then(|b| serde_json::from_slice::<Record>(&b).map_err(text))
            {
                Ok(r) => {
                    records.insert(key.to_string(), r);
                }
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "unreadable record skipped")
                }
            }
        }
        let mut host = Host {
            config,
            records,
            children: HashMap::new(),
            pending: false,
        };
        host.remove_orphan_devices();
        Ok(host)
    }

    pub fn pending(&self) -> bool {
        self.pending
    }

    fn device_dir(&self, key: &str) -> PathBuf {
        self.config.state_dir.join("devices").join(key)
    }

    fn record_path(&self, key: &str) -> PathBuf {
        self.config
            .state_dir
            .join("attachments")
            .join(format!("{key}.json"))
    }

    /// Writes the record durably (temp file, fsync, rename).
    fn save(&mut self, key: &str, record: &Record) -> Result<(), String> {
        let path = self.record_path(key);
        let tmp = path.with_extension("json.tmp");
        let bytes = serde_json::to_vec_pretty(record).map_err(text)?;
        let mut f = std::fs::File::create(&tmp)
            .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        f.write_all(&bytes)
            .and_then(|()| f.sync_all())
            .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &path)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        self.records.insert(key.to_string(), record.clone());
        Ok(())
    }

    fn forget(&mut self, key: &str) {
        let _ = std::fs::remove_file(self.record_path(key));
        self.records.remove(key);
    }

    /// Brings the host in line with `desired`; one outcome per desired
    /// attachment. Attachments the service no longer has are taken down
    /// without a report (there is nothing left to report to).
    /// CSI attachments are skipped entirely: the CSI node plugin makes them
    /// real and the service expects no report from the agent.
    pub fn reconcile(&mut self, desired: &[DesiredAttachment]) -> Vec<Outcome> {
        self.pending = false;
        self.reap_children();
        let desired: Vec<&DesiredAttachment> = desired.iter().filter(|d| !d.is_csi()).collect();
        let mut outcomes = Vec::new();
        for d in desired.iter().copied() {
            let key = d.key();
            // Its export is being made: the attachment job's end wakes the
            // agent again.
            if d.state == "Attaching" {
                continue;
            }
            let report = if d.detaching() {
                match self.detach(&key) {
                    Ok(()) => HostReport::state("Disconnected"),
                    Err(e) => {
                        self.pending = true;
                        HostReport::error(e)
                    }
                }
            } else {
                self.attach(&key, d).unwrap_or_else(|e| {
                    self.pending = true;
                    HostReport::error(e)
                })
            };
            outcomes.push(Outcome {
                volume_id: d.volumeid.clone(),
                snapshot_id: d.snapshotid.clone(),
                report,
            });
        }
        let gone: Vec<String> = self
            .records
            .keys()
            .filter(|k| !desired.iter().any(|d| &d.key() == *k))
            .cloned()
            .collect();
        for key in gone {
            if let Err(e) = self.detach(&key) {
                self.pending = true;
                tracing::warn!(attachment = key, error = %e, "not taken down");
            }
        }
        outcomes
    }

    fn attach(&mut self, key: &str, d: &DesiredAttachment) -> Result<HostReport, String> {
        let connected = self.connect(
            key,
            &Connection {
                volume_id: &d.volumeid,
                snapshot_id: &d.snapshotid,
                volume_name: &d.volumename,
                export_name: &d.exportname,
                uri: &d.uri,
                readonly: d.readonly,
                size: d.size << 30,
            },
        )?;
        self.mount_and_grow(key, d, connected)
    }

    /// Connects one attachment's export as a block device on this host
    /// (device process, then a loop device over its FUSE file, or the
    /// kernel's NBD device), or finds the one connected earlier, replacing
    /// a device process that died. A new export or a changed mode takes the
    /// old device (and its mount) down first; the same export at a new
    /// address is followed by the running device. The device is brought to
    /// `c.size` bytes where it can grow.
    pub fn connect(&mut self, key: &str, c: &Connection) -> Result<Connected, String> {
        let (address, export) =
            parse_uri(c.uri).ok_or_else(|| format!("unusable NBD URI {:?}", c.uri))?;
        let change = self
            .records
            .get(key)
            .map(|r| device_change(r, c.export_name, c.readonly, &address));
        if change == Some(DeviceChange::Replace) {
            self.detach(key)?;
        }
        let mut rec = self.records.get(key).cloned().unwrap_or_else(|| Record {
            volumeid: c.volume_id.to_string(),
            snapshotid: c.snapshot_id.to_string(),
            volumename: c.volume_name.to_string(),
            exportname: c.export_name.to_string(),
            readonly: c.readonly,
            device_pid: None,
            loop_device: None,
            mountpath: None,
            created_mountpath: false,
            grown_for: None,
            grow_error: None,
            grow_job: None,
            address: None,
        });
        let dir = self.device_dir(key);
        let file = fuse_dir(&dir).join(FILE_NAME);
        let mut note = None;

        if !self.device_running(&rec, &dir) {
            if rec.device_pid.is_some() {
                self.clear_stale(&mut rec, &dir);
                note = Some("the device process had stopped: reconnected".to_string());
            }
            // The device reads it whenever it connects again.
            write_address(&dir, &address)?;
            rec.address = Some(address.clone());
            // Recorded before the process starts: an agent that dies in
            // between leaves a record to clean up, not an unknown device.
            self.save(key, &rec)?;
            let pid = self.spawn_device(
                &dir,
                &DeviceSpec {
                    address,
                    export,
                    readonly: c.readonly,
                    kernel: self.config.mode == BlockDeviceMode::KernelNbd,
                    tls: uri_uses_tls(c.uri),
                    ca_cert: svs_common::tls::ca_cert_file().map(Path::to_path_buf),
                },
            )?;
            rec.device_pid = Some(pid);
            self.save(key, &rec)?;
            self.wait_device(pid, &dir, &file)?;
        } else if change == Some(DeviceChange::Address) {
            note = self.follow_address(key, &mut rec, &dir, &address)?;
        }
        let pid = rec
            .device_pid
            .ok_or_else(|| "the device process is not recorded".to_string())?;

        // A kernel NBD device is the block device itself; it keeps the
        // size it was connected with.
        if let Some(nbd) = kernel_device(&dir) {
            let sized = hd::block_size(&nbd).map_err(text)? >= c.size;
            return Ok(Connected {
                device: nbd,
                sized,
                note,
            });
        }
        let lo = match rec.loop_device.clone() {
            Some(l) if hd::loop_devices_of(&file).map_err(text)?.contains(&l) => l,
            _ => {
                let l = hd::loop_attach_kept(&file, c.readonly).map_err(text)?;
                rec.loop_device = Some(l.clone());
                self.save(key, &rec)?;
                l
            }
        };
        self.fill_device(pid, &file, &lo, c.size)?;
        Ok(Connected {
            device: lo,
            sized: true,
            note,
        })
    }

    /// The volume's front moved to `address` (same export): the device
    /// process's address file says so, and a SIGHUP makes it connect there
    /// now rather than once its old connection fails (a dead node's
    /// connection may hang for the client's request timeout first). A
    /// request in flight on the old connection is re-sent on the new one.
    /// The device, the loop device and the mount stay. Returns the note for
    /// the report. A record of an older agent, without an address, only
    /// learns it (its device process reads no address file).
    fn follow_address(
        &mut self,
        key: &str,
        rec: &mut Record,
        dir: &Path,
        address: &str,
    ) -> Result<Option<String>, String> {
        write_address(dir, address)?;
        let from = rec.address.replace(address.to_string());
        self.save(key, rec)?;
        let Some(from) = from else {
            return Ok(None);
        };
        if kernel_device(dir).is_some() {
            tracing::warn!(
                attachment = key,
                to = address,
                "a kernel NBD device cannot follow its moved front"
            );
            return Ok(Some(format!(
                "the volume's front moved to {address}: a kernel NBD device cannot follow it; \
                 detach and attach again"
            )));
        }
        if let Some(pid) = rec.device_pid {
            signal(pid, libc::SIGHUP);
        }
        tracing::info!(
            attachment = key,
            from,
            to = address,
            "the volume's front moved; the device follows"
        );
        Ok(Some(format!("the volume's front moved to {address}")))
    }

    /// Brings a FUSE-backed device to at least `want` bytes: the device
    /// process learns the volume's size, then the loop device the file's.
    fn fill_device(&self, pid: u32, file: &Path, lo: &Path, want: u64) -> Result<(), String> {
        if file_size(file)? < want {
            self.refresh_device(pid, file, want)?;
        }
        if hd::block_size(lo).map_err(text)? < want {
            hd::loop_refresh(lo).map_err(text)?;
        }
        Ok(())
    }

    /// The block device of a connected attachment.
    pub fn device(&self, key: &str) -> Option<PathBuf> {
        let rec = self.records.get(key)?;
        block_device(rec, &self.device_dir(key))
    }

    /// Where the attachment's filesystem is mounted, while it is.
    pub fn mountpath(&self, key: &str) -> Option<PathBuf> {
        self.records.get(key)?.mountpath.clone()
    }

    /// Mounts the filesystem on the attachment's `device` at `target` (made
    /// when missing, and then removed at detach), moving it from an earlier
    /// target; nothing when it is mounted there already. Ok(true) when it
    /// mounted now. Another filesystem on `target` is an error.
    pub fn mount(
        &mut self,
        key: &str,
        device: &Path,
        target: &Path,
        fs: FsType,
        readonly: bool,
    ) -> Result<bool, String> {
        let mut rec = self
            .records
            .get(key)
            .cloned()
            .ok_or_else(|| format!("{key} is not connected"))?;
        if let Some(old) = rec.mountpath.clone().filter(|old| old != target) {
            self.unmount_ours(&mut rec, &old, device)?;
            self.save(key, &rec)?;
        }
        match hd::mounts_on(target).map_err(text)?.last() {
            Some(m) if Path::new(&m.source) == device => Ok(false),
            Some(m) => Err(format!(
                "{} is already the mount point of {}",
                target.display(),
                m.source
            )),
            None => {
                if !target.exists() {
                    std::fs::create_dir_all(target)
                        .map_err(|e| format!("cannot make {}: {e}", target.display()))?;
                    rec.created_mountpath = true;
                }
                hd::mount_kept(device, target, fs, readonly).map_err(text)?;
                rec.mountpath = Some(target.to_path_buf());
                self.save(key, &rec)?;
                Ok(true)
            }
        }
    }

    /// The volume grew: brings the attachment's device to `want` bytes (at
    /// least asks its device process for the volume's size once) and grows
    /// the filesystem mounted on it read-write to fill it, online. Returns
    /// the device's size in bytes.
    pub fn expand(&mut self, key: &str, want: u64) -> Result<u64, String> {
        let rec = self
            .records
            .get(key)
            .cloned()
            .ok_or_else(|| format!("{key} is not connected"))?;
        let dir = self.device_dir(key);
        let device =
            block_device(&rec, &dir).ok_or_else(|| format!("{key} has no block device"))?;
        if kernel_device(&dir).is_none() {
            let pid = rec
                .device_pid
                .ok_or_else(|| format!("{key} has no device process"))?;
            let file = fuse_dir(&dir).join(FILE_NAME);
            self.refresh_device(pid, &file, want)?;
            hd::loop_refresh(&device).map_err(text)?;
        }
        let size = hd::block_size(&device).map_err(text)?;
        if size < want {
            return Err(STUCK_SIZE.to_string());
        }
        if let (Some(target), false) = (&rec.mountpath, rec.readonly) {
            let fs = hd::mounts_on(target)
                .map_err(text)?
                .last()
                .filter(|m| Path::new(&m.source) == device)
                .and_then(|m| FsType::parse(&m.fstype))
                .ok_or_else(|| {
                    format!("no ext4 or XFS of {key} is mounted on {}", target.display())
                })?;
            hd::grow_mounted(fs, &device, target).map_err(text)?;
        }
        Ok(size)
    }

    /// Reports a block volume connected; mounts a file volume and grows its
    /// filesystem when the device has the volume's size.
    fn mount_and_grow(
        &mut self,
        key: &str,
        d: &DesiredAttachment,
        connected: Connected,
    ) -> Result<HostReport, String> {
        let Connected {
            device: lo,
            sized,
            note,
        } = connected;
        let lo = lo.as_path();
        let device = Some(lo.display().to_string());
        if !d.is_file() {
            let hostdetail = if sized {
                note
            } else {
                Some(STUCK_SIZE.to_string())
            };
            return Ok(HostReport {
                device,
                hostdetail,
                ..HostReport::state("Connected")
            });
        }

        let target = self.mount_target(d)?;
        let fs = FsType::parse(d.filesystem.as_deref().unwrap_or("ext4"))
            .ok_or_else(|| format!("unknown filesystem {:?}", d.filesystem))?;
        if self.mount(key, lo, &target, fs, d.readonly)? {
            // What the filesystem fills is read from it: a growth that
            // failed before a detach left it smaller than the volume.
            if let Some(mut rec) = self.records.get(key).cloned() {
                if rec.grown_for.is_none() {
                    rec.grown_for = Some(filled_gib(lo, d.size));
                }
                self.save(key, &rec)?;
            }
        }
        let mut rec = self
            .records
            .get(key)
            .cloned()
            .ok_or_else(|| format!("{key} is not connected"))?;

        if !d.readonly && rec.grown_for.is_some_and(|g| g < d.size) {
            // A job asking anew (a retry at the same size) is answered now.
            let asked_anew = d.growjob.is_some() && d.growjob != rec.grow_job;
            let wait_more = !asked_anew
                && rec.grow_error.as_ref().is_some_and(|(size, _, at)| {
                    *size == d.size && now_secs().saturating_sub(*at) < GROW_RETRY_SECS
                });
            if d.growjob.is_some() && !wait_more {
                rec.grow_job = d.growjob;
            }
            if !sized {
                rec.grow_error = Some((d.size, STUCK_SIZE.to_string(), now_secs()));
                self.save(key, &rec)?;
            } else if !wait_more {
                match hd::grow_mounted(fs, lo, &target) {
                    Ok(()) => {
                        tracing::info!(volume = d.volumename, size = d.size, "filesystem grown");
                        rec.grown_for = Some(d.size);
                        rec.grow_error = None;
                    }
                    Err(e) => {
                        tracing::warn!(volume = d.volumename, error = %e, "filesystem not grown");
                        rec.grow_error = Some((d.size, e.to_string(), now_secs()));
                    }
                }
                self.save(key, &rec)?;
            }
            if rec.grown_for.is_some_and(|g| g < d.size) {
                self.pending = true;
            }
        }
        let growerror = rec
            .grow_error
            .as_ref()
            .filter(|(size, _, _)| *size == d.size)
            .map(|(_, m, _)| m.clone());
        Ok(HostReport {
            hostdetail: note,
            device,
            mountpath: Some(target.display().to_string()),
            filesystembytes: hd::filesystem_bytes(&target).ok(),
            filesystemsize: rec.grown_for,
            growerror,
            growjob: rec.grow_job,
            ..HostReport::state("Mounted")
        })
    }

    /// Unmounts, disconnects and forgets one attachment. A busy mount is an
    /// error naming it; nothing is forced.
    pub fn detach(&mut self, key: &str) -> Result<(), String> {
        let Some(mut rec) = self.records.get(key).cloned() else {
            return Ok(());
        };
        let dir = self.device_dir(key);
        if let (Some(target), Some(dev)) = (rec.mountpath.clone(), block_device(&rec, &dir)) {
            self.unmount_ours(&mut rec, &target, &dev)?;
            self.save(key, &rec)?;
        }
        if let Some(lo) = rec.loop_device.clone() {
            let file = fuse_dir(&dir).join(FILE_NAME);
            if hd::loop_devices_of(&file).map_err(text)?.contains(&lo) {
                hd::loop_detach(&lo).map_err(|e| format!("cannot detach {}: {e}", lo.display()))?;
            }
            rec.loop_device = None;
            self.save(key, &rec)?;
        }
        if let Some(pid) = rec.device_pid {
            self.stop_device(pid, &dir);
        }
        remove_device_dir(&dir)?;
        self.forget(key);
        Ok(())
    }

    /// Unmounts the filesystem this agent mounted on `target` (if it still
    /// is) and removes the directory it made for it.
    fn unmount_ours(&mut self, rec: &mut Record, target: &Path, lo: &Path) -> Result<(), String> {
        let ours = hd::mounts_on(target)
            .map_err(text)?
            .iter()
            .any(|m| Path::new(&m.source) == lo);
        if ours {
            hd::unmount(target)
                .map_err(|e| format!("unmount of {} failed: {e}", target.display()))?;
        }
        rec.mountpath = None;
        if rec.created_mountpath {
            let _ = std::fs::remove_dir(target);
            rec.created_mountpath = false;
        }
        Ok(())
    }

    /// The device process died: what was built on it no longer works.
    /// Its filesystem is detached lazily (its unwritten pages cannot reach
    /// the volume any more; what was flushed is on the volume), then the
    /// loop device and the dead FUSE mount go.
    fn clear_stale(&mut self, rec: &mut Record, dir: &Path) {
        if let (Some(target), Some(dev)) = (&rec.mountpath, block_device(rec, dir)) {
            if hd::mounts_on(target)
                .map(|ms| ms.iter().any(|m| Path::new(&m.source) == dev))
                .unwrap_or(false)
            {
                let _ = hd::unmount_lazy(target);
            }
        }
        rec.mountpath = None;
        if let Some(lo) = rec.loop_device.take() {
            let _ = hd::loop_detach(&lo);
        }
        if let Some(pid) = rec.device_pid.take() {
            self.stop_device(pid, dir);
        }
        let _ = remove_device_dir(dir);
    }

    fn mount_target(&self, d: &DesiredAttachment) -> Result<PathBuf, String> {
        if !d.mountpoint.is_empty() {
            let p = PathBuf::from(&d.mountpoint);
            if !p.is_absolute() || p.components().any(|c| c == Component::ParentDir) {
                return Err(format!(
                    "mountpoint {:?} must be an absolute path without '..'",
                    d.mountpoint
                ));
            }
            return Ok(p);
        }
        let name = if d.snapshotid == "top" {
            d.volumename.clone()
        } else {
            format!("{}@{}", d.volumename, d.snapshotname)
        };
        Ok(self.config.mount_root.join(name))
    }

    fn spawn_device(&mut self, dir: &Path, spec: &DeviceSpec) -> Result<u32, String> {
        use std::os::unix::process::CommandExt;
        std::fs::create_dir_all(fuse_dir(dir))
            .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("device.log"))
            .map_err(|e| format!("cannot open the device log: {e}"))?;
        let log2 = log.try_clone().map_err(text)?;
        let mut child = Command::new(&self.config.exe)
            .arg("agent-device")
            .arg("--dir")
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(log)
            .stderr(log2)
            // Its own process group: signals to the agent's group (a
            // terminal's ^C, `kill -- -PGID`) leave the device running.
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start the device process: {e}"))?;
        let spec = serde_json::to_vec(spec).map_err(text)?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(&spec)
                .map_err(|e| format!("cannot start the device process: {e}"))?;
        }
        let pid = child.id();
        self.children.insert(pid, child);
        Ok(pid)
    }

    /// Waits for the device's FUSE file, or for the process to give up.
    fn wait_device(&mut self, pid: u32, dir: &Path, file: &Path) -> Result<(), String> {
        let start = Instant::now();
        loop {
            if let Some(child) = self.children.get_mut(&pid) {
                if let Ok(Some(status)) = child.try_wait() {
                    self.children.remove(&pid);
                    return Err(format!(
                        "the device process exited ({status}): {}",
                        last_line(&dir.join("device.log"))
                    ));
                }
            }
            if kernel_device(dir).is_some()
                || (fuse_mounted(dir) && std::fs::metadata(file).is_ok())
            {
                return Ok(());
            }
            if start.elapsed() > DEVICE_START {
                return Err(format!(
                    "the device did not start within {} s: {}",
                    DEVICE_START.as_secs(),
                    last_line(&dir.join("device.log"))
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Asks the device process to learn the volume's new size (SIGHUP) and
    /// waits until its file has it.
    fn refresh_device(&self, pid: u32, file: &Path, want: u64) -> Result<(), String> {
        signal(pid, libc::SIGHUP);
        let start = Instant::now();
        let mut last_signal = Instant::now();
        loop {
            if file_size(file)? >= want {
                return Ok(());
            }
            if start.elapsed() > DEVICE_START {
                return Err(format!(
                    "the device did not grow to {} GiB within {} s",
                    want >> 30,
                    DEVICE_START.as_secs()
                ));
            }
            // The export may not have its new size yet: ask again.
            if last_signal.elapsed() > Duration::from_secs(2) {
                signal(pid, libc::SIGHUP);
                last_signal = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn device_running(&self, rec: &Record, dir: &Path) -> bool {
        rec.device_pid
            .is_some_and(|pid| is_device_process(pid, dir))
            && (fuse_mounted(dir) || kernel_device(dir).is_some())
    }

    /// SIGTERM, then after 10 s SIGKILL; a FUSE mount left behind is
    /// detached lazily.
    fn stop_device(&mut self, pid: u32, dir: &Path) {
        if is_device_process(pid, dir) {
            signal(pid, libc::SIGTERM);
            let start = Instant::now();
            while is_device_process(pid, dir) && start.elapsed() < Duration::from_secs(10) {
                self.reap_children();
                std::thread::sleep(Duration::from_millis(50));
            }
            if is_device_process(pid, dir) {
                signal(pid, libc::SIGKILL);
            }
        }
        if let Some(mut child) = self.children.remove(&pid) {
            let _ = child.wait();
        }
        if fuse_mounted(dir) {
            let _ = hd::unmount_lazy(&fuse_dir(dir));
        }
    }

    fn reap_children(&mut self) {
        self.children
            .retain(|_, child| matches!(child.try_wait(), Ok(None)));
    }

    /// Device directories without a live record: an agent died between
    /// starting a device and recording it, or its record was lost.
    fn remove_orphan_devices(&mut self) {
        let root = self.config.state_dir.join("devices");
        let Ok(entries) = std::fs::read_dir(&root) else {
            return;
        };
        for entry in entries.flatten() {
            let dir = entry.path();
            let key = entry.file_name().to_string_lossy().into_owned();
            if self
                .records
                .get(&key)
                .is_some_and(|r| r.device_pid.is_some())
            {
                continue;
            }
            tracing::warn!(dir = %dir.display(), "removing a device without a record");
            let file = fuse_dir(&dir).join(FILE_NAME);
            if let Ok(loops) = hd::loop_devices_of(&file) {
                for lo in loops {
                    let _ = hd::loop_detach(&lo);
                }
            }
            for pid in device_processes(&dir) {
                self.stop_device(pid, &dir);
            }
            if fuse_mounted(&dir) {
                let _ = hd::unmount_lazy(&fuse_dir(&dir));
            }
            let _ = remove_device_dir(&dir);
            if self.records.contains_key(&key) {
                self.forget(&key);
            }
        }
    }
}

/// The volume size (GiB) the filesystem on `device` fills: `size` when it
/// fills it (or cannot be read: as before, the service made it to fill),
/// else its whole GiB.
fn filled_gib(device: &Path, size: u64) -> u64 {
    match svs_hostdev::device_filesystem_size(device) {
        Ok(Some((_, bytes))) if bytes < size << 30 => bytes >> 30,
        Ok(_) => size,
        Err(e) => {
            tracing::warn!(device = %device.display(), error = %e, "filesystem size not read");
            size
        }
    }
}

/// The block device a filesystem of the attachment is mounted from.
fn block_device(rec: &Record, dir: &Path) -> Option<PathBuf> {
    rec.loop_device.clone().or_else(|| kernel_device(dir))
}

/// The `/dev/nbdN` a kernel-mode device process connected.
fn kernel_device(dir: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(kernel_device_file(dir)).ok()?;
    let path = text.trim();
    path.starts_with("/dev/nbd").then(|| PathBuf::from(path))
}

fn file_size(file: &Path) -> Result<u64, String> {
    std::fs::metadata(file)
        .map(|m| m.len())
        .map_err(|e| format!("cannot stat {}: {e}", file.display()))
}

fn fuse_mounted(dir: &Path) -> bool {
    hd::mounts_on(&fuse_dir(dir))
        .map(|ms| !ms.is_empty())
        .unwrap_or(false)
}

/// Removes a device directory whose FUSE file is no longer mounted
/// (never recursing into a live mount).
fn remove_device_dir(dir: &Path) -> Result<(), String> {
    if fuse_mounted(dir) {
        return Err(format!("{} is still mounted", fuse_dir(dir).display()));
    }
    let _ = std::fs::remove_dir(fuse_dir(dir));
    let _ = std::fs::remove_file(dir.join("device.log"));
    let _ = std::fs::remove_file(kernel_device_file(dir));
    let _ = std::fs::remove_file(address_file(dir));
    let _ = std::fs::remove_file(dir.join("address.tmp"));
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot remove {}: {e}", dir.display())),
    }
}

mod processes;
use processes::{device_processes, is_device_process, last_line, signal};
#[cfg(test)]
mod tests;
