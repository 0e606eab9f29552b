//! Helpers of the `host_side` tests, shared with other test files.

use std::path::Path;
use std::process::{Child, Command};
use svs_hostdev::host as hd;

/// One test's host side: a unique directory holding the state and mounts
/// of a host agent or a CSI node plugin, and that process. Dropping it
/// (also when the test fails) kills the process and takes down every
/// mount, loop device and device process under that directory, and
/// nothing else.
pub(crate) struct HostSide {
    pub(crate) root: tempfile::TempDir,
    /// The agent or node plugin.
    pub(crate) process: Option<Child>,
}

impl HostSide {
    pub(crate) fn new() -> HostSide {
        HostSide {
            root: tempfile::Builder::new()
                .prefix("svs-host-test-")
                .tempdir()
                .expect("temp dir"),
            process: None,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        self.root.path()
    }

    /// SIGKILL, like a crash.
    pub(crate) fn kill_process(&mut self) {
        if let Some(mut child) = self.process.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Mounts (filesystems and FUSE files), loop devices and device
    /// processes under this test's directory.
    pub(crate) fn leftovers(&self) -> Vec<String> {
        let root = self.path();
        let mut left: Vec<String> = hd::mounts()
            .unwrap()
            .into_iter()
            .filter(|m| m.target.starts_with(root))
            .map(|m| format!("mount {} ({})", m.target.display(), m.fstype))
            .collect();
        left.extend(
            hd::loop_devices()
                .unwrap()
                .into_iter()
                .filter(|(_, back)| back.starts_with(root))
                .map(|(dev, back)| format!("loop {} over {}", dev.display(), back.display())),
        );
        left.extend(
            device_processes(root)
                .into_iter()
                .map(|pid| format!("device process {pid}")),
        );
        left
    }
}

impl Drop for HostSide {
    fn drop(&mut self) {
        self.kill_process();
        let root = self.path().to_path_buf();
        // Filesystems first (deepest first), then the loop devices under
        // them, then the device processes and their FUSE files.
        let mut mounts: Vec<_> = hd::mounts()
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m.target.starts_with(&root))
            .collect();
        mounts.sort_by_key(|m| std::cmp::Reverse(m.target.components().count()));
        for m in mounts.iter().filter(|m| !m.fstype.starts_with("fuse")) {
            let _ = hd::unmount_lazy(&m.target);
        }
        for (dev, back) in hd::loop_devices().unwrap_or_default() {
            if back.starts_with(&root) {
                let _ = hd::loop_detach(&dev);
            }
        }
        for pid in device_processes(&root) {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        for m in mounts.iter().filter(|m| m.fstype.starts_with("fuse")) {
            let _ = hd::unmount_lazy(&m.target);
        }
    }
}

/// `svs agent-device` processes whose directory is under `root`.
pub(crate) fn device_processes(root: &Path) -> Vec<u32> {
    let root = root.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter(|pid| {
                    let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                        return false;
                    };
                    let args: Vec<String> = raw
                        .split(|b| *b == 0)
                        .map(|a| String::from_utf8_lossy(a).into_owned())
                        .collect();
                    args.iter().any(|a| a == "agent-device")
                        && args.iter().any(|a| a.starts_with(&root))
                })
                .collect()
        })
        .unwrap_or_default()
}
