//! Filesystems on a block device: make, mount, grow.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::command::run;
use crate::Result;

/// The filesystems the host side makes and grows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsType {
    Ext4,
    Xfs,
}

impl FsType {
    pub fn name(self) -> &'static str {
        match self {
            FsType::Ext4 => "ext4",
            FsType::Xfs => "xfs",
        }
    }
}

/// Makes a new filesystem on `device` (overwriting whatever is there).
pub fn mkfs(device: &Path, fs: FsType) -> Result<()> {
    let dev = device.as_os_str();
    match fs {
        FsType::Ext4 => run("mkfs.ext4", &["-q".as_ref(), "-F".as_ref(), dev]),
        FsType::Xfs => run("mkfs.xfs", &["-q".as_ref(), "-f".as_ref(), dev]),
    }
    .map(drop)
}

/// Grows an unmounted ext4 filesystem to fill its device. `resize2fs`
/// insists on a fresh check first, so `e2fsck -f` runs before it.
pub fn resize2fs(device: &Path) -> Result<()> {
    run(
        "e2fsck",
        &["-f".as_ref(), "-p".as_ref(), device.as_os_str()],
    )?;
    run("resize2fs", &[device.as_os_str()]).map(drop)
}

/// Grows a mounted XFS filesystem to fill its device.
pub fn xfs_growfs(mountpoint: &Path) -> Result<()> {
    run("xfs_growfs", &[mountpoint.as_os_str()]).map(drop)
}

/// A filesystem this guard mounted; unmounted on drop.
#[derive(Debug)]
pub struct Mount {
    target: PathBuf,
    mounted: bool,
}

impl Mount {
    /// Mounts `device` (a filesystem of type `fs`) on the existing directory
    /// `target`, read-only with `read_only`; a read-write mount of a
    /// read-only device fails.
    pub fn new(device: &Path, target: &Path, fs: FsType, read_only: bool) -> Result<Mount> {
        // `-w`: never fall back to a read-only mount on a write-protected
        // device (mount(8) does so silently without it).
        let mode = if read_only { "-r" } else { "-w" };
        run(
            "mount",
            &[
                "-t".as_ref(),
                fs.name().as_ref(),
                mode.as_ref(),
                device.as_os_str(),
                target.as_os_str(),
            ],
        )?;
        Ok(Mount {
            target: target.to_owned(),
            mounted: true,
        })
    }

    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Leaves the filesystem mounted past this guard.
    pub fn keep(mut self) -> PathBuf {
        self.mounted = false;
        std::mem::take(&mut self.target)
    }

    /// Unmounts (writing back everything first).
    pub fn unmount(mut self) -> Result<()> {
        self.unmount_once()
    }

    fn unmount_once(&mut self) -> Result<()> {
        if !self.mounted {
            return Ok(());
        }
        // A just-closed file can keep the target busy for a moment.
        let mut tries = 0;
        loop {
            match run("umount", &[self.target.as_os_str()]) {
                Ok(_) => break,
                Err(e) if tries >= 20 => {
                    self.mounted = false;
                    return Err(e);
                }
                Err(_) => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        self.mounted = false;
        Ok(())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Err(e) = self.unmount_once() {
            tracing::warn!(target = %self.target.display(), error = %e, "filesystem not unmounted");
        }
    }
}
