//! The filesystem of a `type: file` volume: made by `volume_create` as its
//! last step, grown by `volume_modify_extend` as its last step when the
//! volume is not attached (an attached one is the host agent's to grow).
//!
//! The volume's shared I/O is exposed as one file on a private FUSE mount
//! in a temporary directory; `mkfs` and `resize2fs` work on that file
//! directly, XFS growth (which needs a mounted filesystem) goes through a
//! loop device and a private mount. Guards undo each step, also on error.

use super::{JobContext, JobError};
use crate::attributes::Filesystem;
use std::io;
use std::sync::Arc;
use svs_dataplane::VolumeIo;
use svs_hostdev::{mkfs, resize2fs, xfs_growfs, BlockDev, FsType, FuseFile, LoopDevice, Mount};

/// A volume's I/O as a host block device.
struct VolumeDev(Arc<dyn VolumeIo>);

impl BlockDev for VolumeDev {
    fn size(&self) -> u64 {
        self.0.size()
    }

    fn read_only(&self) -> bool {
        false
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.0.read(offset, buf)
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        self.0.write(offset, data, fua)
    }

    fn flush(&self) -> io::Result<()> {
        self.0.flush()
    }

    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.0.discard(offset, len, false)
    }
}

fn fs_type(fs: Filesystem) -> FsType {
    match fs {
        Filesystem::Ext4 => FsType::Ext4,
        Filesystem::Xfs => FsType::Xfs,
    }
}

/// A private directory holding the FUSE mount (and, for XFS growth, the
/// filesystem's mount); removed on drop, after the mounts' guards.
struct WorkDir {
    root: tempfile::TempDir,
}

impl WorkDir {
    fn new() -> Result<WorkDir, String> {
        let root = tempfile::Builder::new()
            .prefix("svs-fs-")
            .tempdir()
            .map_err(|e| format!("cannot make a work directory: {e}"))?;
        for sub in ["dev", "mnt"] {
            std::fs::create_dir(root.path().join(sub))
                .map_err(|e| format!("cannot make a work directory: {e}"))?;
        }
        Ok(WorkDir { root })
    }

    /// The volume as a file named after its id (so /proc/mounts and
    /// `losetup -a` say which volume a mount or loop device serves).
    fn expose(&self, io: Arc<dyn VolumeIo>) -> Result<FuseFile, String> {
        let name = io.volume_id().to_string();
        FuseFile::mount(
            Arc::new(VolumeDev(io)),
            &self.root.path().join("dev"),
            &name,
        )
        .map_err(|e| e.to_string())
    }
}

/// Makes `fs` fill the volume (blocking).
fn make(io: Arc<dyn VolumeIo>, fs: Filesystem) -> Result<(), String> {
    let dir = WorkDir::new()?;
    let file = dir.expose(io)?;
    mkfs(file.path(), fs_type(fs)).map_err(|e| e.to_string())?;
    file.unmount().map_err(|e| e.to_string())
}

/// Grows `fs` to fill the volume (blocking); the volume must not be in use.
fn grow(io: Arc<dyn VolumeIo>, fs: Filesystem) -> Result<(), String> {
    let dir = WorkDir::new()?;
    let file = dir.expose(io)?;
    match fs {
        Filesystem::Ext4 => resize2fs(file.path()).map_err(|e| e.to_string())?,
        Filesystem::Xfs => {
            let lo = LoopDevice::attach(file.path(), false).map_err(|e| e.to_string())?;
            let target = dir.root.path().join("mnt");
            let mount =
                Mount::new(lo.path(), &target, FsType::Xfs, false).map_err(|e| e.to_string())?;
            xfs_growfs(&target).map_err(|e| e.to_string())?;
            mount.unmount().map_err(|e| e.to_string())?;
            lo.detach().map_err(|e| e.to_string())?;
        }
    }
    file.unmount().map_err(|e| e.to_string())
}

impl JobContext {
    /// Makes the filesystem on a new volume through its shared I/O.
    pub(super) async fn make_filesystem(
        &self,
        io: Arc<dyn VolumeIo>,
        fs: Filesystem,
    ) -> Result<(), JobError> {
        run_blocking(move || make(io, fs)).await.map_err(|e| {
            JobError::Failed(format!(
                "Could not create the {} filesystem: {e}",
                fs.as_str()
            ))
        })
    }

    /// Grows the filesystem of a volume that is not attached.
    pub(super) async fn grow_filesystem(
        &self,
        io: Arc<dyn VolumeIo>,
        fs: Filesystem,
    ) -> Result<(), JobError> {
        run_blocking(move || grow(io, fs)).await.map_err(|e| {
            JobError::Failed(format!(
                "Could not grow the {} filesystem: {e}",
                fs.as_str()
            ))
        })
    }
}

async fn run_blocking(
    f: impl FnOnce() -> Result<(), String> + Send + 'static,
) -> Result<(), String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("filesystem task failed: {e}"))?
}
