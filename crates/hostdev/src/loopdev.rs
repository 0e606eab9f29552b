//! Loop devices over a file, through util-linux's `losetup` (the `loopdev`
//! crate is unmaintained; `losetup --find --show` also picks a free device
//! and attaches it without a race with other users).

use std::path::{Path, PathBuf};

use crate::command::run;
use crate::{HostDevError, Result};

/// A loop device this guard attached; detached on drop.
#[derive(Debug)]
pub struct LoopDevice {
    path: PathBuf,
    read_only: bool,
    attached: bool,
}

impl LoopDevice {
    /// Attaches `file` to a free loop device (read-only with `read_only`:
    /// the block device then refuses every write).
    pub fn attach(file: &Path, read_only: bool) -> Result<LoopDevice> {
        let mut args = vec!["--find".as_ref(), "--show".as_ref()];
        if read_only {
            args.push("--read-only".as_ref());
        }
        args.push(file.as_os_str());
        let out = run("losetup", &args)?;
        let path = out.trim();
        if !path.starts_with("/dev/loop") {
            return Err(HostDevError::Output {
                command: "losetup --find --show".into(),
                output: out,
            });
        }
        Ok(LoopDevice {
            path: PathBuf::from(path),
            read_only,
            attached: true,
        })
    }

    /// The block device, e.g. `/dev/loop3`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// Re-reads the backing file's size (`losetup -c`), after the file grew.
    pub fn refresh_capacity(&self) -> Result<()> {
        run("losetup", &["-c".as_ref(), self.path.as_os_str()]).map(drop)
    }

    /// The device's size in bytes as the kernel sees it.
    pub fn size(&self) -> Result<u64> {
        let out = run("blockdev", &["--getsize64".as_ref(), self.path.as_os_str()])?;
        out.trim().parse().map_err(|_| HostDevError::Output {
            command: "blockdev --getsize64".into(),
            output: out,
        })
    }

    /// Leaves the device attached past this guard (the agent's devices
    /// outlive the agent process); returns its path.
    pub fn keep(mut self) -> PathBuf {
        self.attached = false;
        std::mem::take(&mut self.path)
    }

    /// Detaches the device.
    pub fn detach(mut self) -> Result<()> {
        self.detach_once()
    }

    fn detach_once(&mut self) -> Result<()> {
        if !self.attached {
            return Ok(());
        }
        self.attached = false;
        run("losetup", &["-d".as_ref(), self.path.as_os_str()]).map(drop)
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        if let Err(e) = self.detach_once() {
            tracing::warn!(device = %self.path.display(), error = %e, "loop device not detached");
        }
    }
}
