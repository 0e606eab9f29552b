//! What is on the host now, by path: the mount table, the loop devices and
//! their backing files, unmounting and detaching without a guard. The agent
//! uses these because its mounts and loop devices must outlive the agent
//! process (a restart of the agent must not take a mounted filesystem away),
//! so it finds them again instead of holding guards.

use std::path::{Path, PathBuf};

use crate::command::run;
use crate::{FsType, HostDevError, Result};

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    pub target: PathBuf,
    pub fstype: String,
    pub source: String,
    pub read_only: bool,
}

/// `\040` and friends: mountinfo escapes space, tab, newline and backslash.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            if let Some(v) = field
                .get(i + 1..i + 4)
                .and_then(|oct| u8::from_str_radix(oct, 8).ok())
            {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses mountinfo text (see proc(5)): `id parent major:minor root target
/// options [optional...] - fstype source superoptions`.
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    let mut entries = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(sep) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        if fields.len() < 6 || fields.len() < sep + 3 {
            continue;
        }
        let options = fields[5];
        entries.push(MountEntry {
            target: PathBuf::from(unescape(fields[4])),
            fstype: fields[sep + 1].to_string(),
            source: unescape(fields[sep + 2]),
            read_only: options.split(',').any(|o| o == "ro"),
        });
    }
    entries
}

/// Every mount this process sees.
pub fn mounts() -> Result<Vec<MountEntry>> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| HostDevError::io("reading /proc/self/mountinfo", e))?;
    Ok(parse_mountinfo(&text))
}

/// The mounts on `target` (the last one is the one in use).
pub fn mounts_on(target: &Path) -> Result<Vec<MountEntry>> {
    Ok(mounts()?
        .into_iter()
        .filter(|m| m.target == target)
        .collect())
}

/// Mounts `device` on `target` and leaves it mounted (no guard).
///
/// XFS is mounted with `nouuid`: a clone or a snapshot carries its
/// source's filesystem UUID, and XFS refuses a second mount of a UUID the
/// host already has mounted.
///
/// A read-only mount does not replay the journal (`noload` for ext4,
/// `norecovery` for XFS): a read-only device, such as a snapshot taken while
/// the filesystem was mounted, cannot be written, and replaying would need
/// to. What the journal held and had not reached the filesystem is not seen,
/// as after a crash without recovery.
pub fn mount_kept(device: &Path, target: &Path, fs: FsType, read_only: bool) -> Result<()> {
    let options = match (fs, read_only) {
        // `rw`: never fall back to a read-only mount on a write-protected
        // device (mount(8) does so silently otherwise).
        (FsType::Ext4, false) => "rw",
        (FsType::Xfs, false) => "rw,nouuid",
        (FsType::Ext4, true) => "ro,noload",
        (FsType::Xfs, true) => "ro,norecovery,nouuid",
    };
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "-t".as_ref(),
        fs.name().as_ref(),
        "-o".as_ref(),
        options.as_ref(),
    ];
    if !read_only {
        args.push("-w".as_ref());
    }
    args.push(device.as_os_str());
    args.push(target.as_os_str());
    run("mount", &args).map(drop)
}

/// One `umount` attempt: a busy filesystem is an error (with umount's own
/// "target is busy"), never forced.
pub fn unmount(target: &Path) -> Result<()> {
    run("umount", &[target.as_os_str()]).map(drop)
}

/// Detaches a filesystem lazily: it goes once its last user closes it.
/// Only for a filesystem whose device is already gone.
pub fn unmount_lazy(target: &Path) -> Result<()> {
    run("umount", &["-l".as_ref(), target.as_os_str()]).map(drop)
}

/// Loop devices and their backing files (`losetup --list`).
pub fn loop_devices() -> Result<Vec<(PathBuf, PathBuf)>> {
    let out = run(
        "losetup",
        &[
            "--list",
            "--noheadings",
            "--raw",
            "--output",
            "NAME,BACK-FILE",
        ],
    )?;
    Ok(out
        .lines()
        .filter_map(|line| {
            let (name, back) = line.split_once(' ')?;
            // --raw escapes spaces as \x20.
            let back = back.trim().replace("\\x20", " ");
            Some((PathBuf::from(name), PathBuf::from(back)))
        })
        .collect())
}

/// The loop devices over `file`.
pub fn loop_devices_of(file: &Path) -> Result<Vec<PathBuf>> {
    Ok(loop_devices()?
        .into_iter()
        .filter(|(_, back)| back == file)
        .map(|(dev, _)| dev)
        .collect())
}

/// Attaches `file` to a free loop device and leaves it attached.
pub fn loop_attach_kept(file: &Path, read_only: bool) -> Result<PathBuf> {
    Ok(crate::LoopDevice::attach(file, read_only)?.keep())
}

/// Detaches a loop device (deferred by the kernel until its last user
/// closes it).
pub fn loop_detach(device: &Path) -> Result<()> {
    run("losetup", &["-d".as_ref(), device.as_os_str()]).map(drop)
}

/// Re-reads the backing file's size (`losetup -c`).
pub fn loop_refresh(device: &Path) -> Result<()> {
    run("losetup", &["-c".as_ref(), device.as_os_str()]).map(drop)
}

/// A block device's size in bytes as the kernel sees it.
pub fn block_size(device: &Path) -> Result<u64> {
    let out = run("blockdev", &["--getsize64".as_ref(), device.as_os_str()])?;
    out.trim().parse().map_err(|_| HostDevError::Output {
        command: "blockdev --getsize64".into(),
        output: out,
    })
}

/// Total bytes of the filesystem mounted on `path` (what `df` shows as its
/// size).
pub fn filesystem_bytes(path: &Path) -> Result<u64> {
    Ok(filesystem_stats(path)?.total_bytes)
}

/// What `df` and `df -i` show for the filesystem holding `path`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsStats {
    pub total_bytes: u64,
    /// Free for unprivileged users.
    pub available_bytes: u64,
    pub used_bytes: u64,
    pub total_inodes: u64,
    pub free_inodes: u64,
    pub used_inodes: u64,
}

/// statvfs(3) of the filesystem holding `path`.
pub fn filesystem_stats(path: &Path) -> Result<FsStats> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        HostDevError::io(
            format!("statvfs {}", path.display()),
            std::io::Error::from(std::io::ErrorKind::InvalidInput),
        )
    })?;
    // SAFETY: statvfs writes only into the zeroed struct we pass, and `c`
    // is a valid NUL-terminated string for the call's duration.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(HostDevError::io(
            format!("statvfs {}", path.display()),
            std::io::Error::last_os_error(),
        ));
    }
    let unit = st.f_frsize;
    #[allow(clippy::useless_conversion)] // fsfilcnt_t is u32 on some targets
    let (files, ffree) = (u64::from(st.f_files), u64::from(st.f_ffree));
    Ok(FsStats {
        total_bytes: st.f_blocks.saturating_mul(unit),
        available_bytes: st.f_bavail.saturating_mul(unit),
        used_bytes: st.f_blocks.saturating_sub(st.f_bfree).saturating_mul(unit),
        total_inodes: files,
        free_inodes: ffree,
        used_inodes: files.saturating_sub(ffree),
    })
}

/// Bind-mounts `source` (a directory, or a device node onto a file) on
/// `target` and leaves it mounted; read-only with `read_only` (a bind mount
/// takes `ro` only from a remount, so that is a second step; when it fails
/// the bind mount is undone).
pub fn bind_mount(source: &Path, target: &Path, read_only: bool) -> Result<()> {
    run(
        "mount",
        &["--bind".as_ref(), source.as_os_str(), target.as_os_str()],
    )?;
    if read_only {
        if let Err(e) = remount_read_only(target) {
            let _ = unmount(target);
            return Err(e);
        }
    }
    Ok(())
}

/// Makes the bind mount on `target` read-only (the filesystem under it
/// stays as it is elsewhere).
pub fn remount_read_only(target: &Path) -> Result<()> {
    run(
        "mount",
        &[
            "-o".as_ref(),
            "remount,bind,ro".as_ref(),
            target.as_os_str(),
        ],
    )
    .map(drop)
}

/// The filesystem type on `device` as blkid(8) probes it (`ext4`, `xfs`,
/// ...); None for a blank device (blkid exits 2 when it finds nothing).
pub fn filesystem_type(device: &Path) -> Result<Option<String>> {
    // blkid also exits 2 for a device that does not exist.
    std::fs::metadata(device)
        .map_err(|e| HostDevError::io(format!("probing {}", device.display()), e))?;
    let out = std::process::Command::new("blkid")
        .args(["-p", "-o", "value", "-s", "TYPE"])
        .arg(device)
        .output()
        .map_err(|e| HostDevError::io(format!("running `blkid {}`", device.display()), e))?;
    match out.status.code() {
        Some(0) => {
            let kind = String::from_utf8_lossy(&out.stdout).trim().to_string();
            Ok((!kind.is_empty()).then_some(kind))
        }
        Some(2) => Ok(None),
        _ => Err(HostDevError::Command {
            command: format!("blkid -p -o value -s TYPE {}", device.display()),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        }),
    }
}

/// Grows a mounted filesystem to fill its device, online: `xfs_growfs` on
/// the mountpoint, `resize2fs` on the device for ext4 (the kernel does the
/// work; it needs CAP_SYS_RESOURCE, and says "Permission denied to resize
/// filesystem" without it).
pub fn grow_mounted(fs: FsType, device: &Path, mountpoint: &Path) -> Result<()> {
    match fs {
        FsType::Xfs => crate::xfs_growfs(mountpoint),
        FsType::Ext4 => run("resize2fs", &[device.as_os_str()]).map(drop),
    }
}

impl FsType {
    /// `ext4` / `xfs`.
    pub fn parse(name: &str) -> Option<FsType> {
        match name {
            "ext4" => Some(FsType::Ext4),
            "xfs" => Some(FsType::Xfs),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_give_target_type_source_and_mode() {
        let text = "36 35 98:0 / /mnt/my\\040data rw,noatime master:1 - xfs /dev/loop3 rw,attr2\n\
                    37 35 0:50 / /var/lib/svs-agent/devices/v1/fuse ro,nosuid - fuse.svs svs-hostdev:v1 ro\n\
                    garbage line\n";
        let got = parse_mountinfo(text);
        assert_eq!(
            got,
            vec![
                MountEntry {
                    target: PathBuf::from("/mnt/my data"),
                    fstype: "xfs".into(),
                    source: "/dev/loop3".into(),
                    read_only: false,
                },
                MountEntry {
                    target: PathBuf::from("/var/lib/svs-agent/devices/v1/fuse"),
                    fstype: "fuse.svs".into(),
                    source: "svs-hostdev:v1".into(),
                    read_only: true,
                },
            ]
        );
    }

    #[test]
    fn the_root_mount_is_seen() {
        let all = mounts().unwrap();
        assert!(all.iter().any(|m| m.target == Path::new("/")), "{all:?}");
    }
}
