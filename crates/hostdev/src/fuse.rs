//! One block device as one file in a FUSE mount: `<mountpoint>/<name>`.
//!
//! The file is opened with `FOPEN_DIRECT_IO`: every read and write goes to
//! the device, so the kernel keeps no second cache of the volume's bytes
//! (the loop device and the filesystem above it have their own) and a
//! flush reaches the device. Attributes are never cached either, so a size
//! set with [`FuseFile::set_size`] is what the next `stat` (and `losetup
//! -c`) sees.

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    AccessFlags, BackgroundSession, Config, Errno, FileAttr, FileHandle, FileType, Filesystem,
    FopenFlags, Generation, INodeNo, IoctlFlags, LockOwner, MountOption, OpenAccMode, OpenFlags,
    ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyOpen,
    ReplyWrite, ReplyXattr, Request, SessionACL, WriteFlags,
};

use crate::{BlockDev, HostDevError, Result};

/// The file's inode (the root directory is 1).
const FILE_INO: INodeNo = INodeNo(2);
/// FUSE threads serving requests: several, so the NBD client has several
/// requests in flight.
const THREADS: usize = 4;
/// Nothing is cached: sizes change under the kernel.
const TTL: Duration = Duration::ZERO;

struct DeviceFs {
    name: String,
    device: Arc<dyn BlockDev>,
    size: Arc<AtomicU64>,
    uid: u32,
    gid: u32,
}

impl DeviceFs {
    fn attr(&self, ino: INodeNo) -> Option<FileAttr> {
        let (kind, perm, size, nlink) = if ino == INodeNo::ROOT {
            (FileType::Directory, 0o755, 0, 2)
        } else if ino == FILE_INO {
            let perm = if self.device.read_only() {
                0o444
            } else {
                0o644
            };
            (
                FileType::RegularFile,
                perm,
                self.size.load(Ordering::SeqCst),
                1,
            )
        } else {
            return None;
        };
        Some(FileAttr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: UNIX_EPOCH,
            mtime: UNIX_EPOCH,
            ctime: UNIX_EPOCH,
            crtime: UNIX_EPOCH,
            kind,
            perm,
            nlink,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            flags: 0,
            blksize: 4096,
        })
    }
}

fn errno(e: io::Error) -> Errno {
    match e.raw_os_error() {
        Some(n) if n > 0 => Errno::from_i32(n),
        _ => Errno::EIO,
    }
}

impl Filesystem for DeviceFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent == INodeNo::ROOT && name.to_str() == Some(self.name.as_str()) {
            if let Some(attr) = self.attr(FILE_INO) {
                return reply.entry(&TTL, &attr, Generation(0));
            }
        }
        reply.error(Errno::ENOENT);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino) {
            Some(attr) => reply.attr(&TTL, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // The device's size is the volume's: only `set_size` changes it.
        // Times and modes are accepted and ignored (tools touch them).
        if size.is_some_and(|s| s != self.size.load(Ordering::SeqCst)) {
            return reply.error(Errno::EPERM);
        }
        match self.attr(ino) {
            Some(attr) => reply.attr(&TTL, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if ino != FILE_INO {
            return reply.error(Errno::EISDIR);
        }
        if self.device.read_only() && !matches!(flags.acc_mode(), OpenAccMode::O_RDONLY) {
            return reply.error(Errno::EROFS);
        }
        reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let end = self.size.load(Ordering::SeqCst);
        let len = end.saturating_sub(offset).min(u64::from(size)) as usize;
        let mut buf = vec![0u8; len];
        match self.device.read(offset, &mut buf) {
            Ok(()) => reply.data(&buf),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if self.device.read_only() {
            return reply.error(Errno::EROFS);
        }
        let end = self.size.load(Ordering::SeqCst);
        if offset
            .checked_add(data.len() as u64)
            .is_none_or(|e| e > end)
        {
            // A block device cannot grow by writing past its end.
            return reply.error(Errno::ENOSPC);
        }
        let fua = flags.0 & (libc::O_SYNC | libc::O_DSYNC) != 0;
        match self.device.write(offset, data, fua) {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2): writes went straight to the device (direct I/O); only
        // fsync asks for durability.
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.device.flush() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let end = self.size.load(Ordering::SeqCst);
        if offset.checked_add(length).is_none_or(|e| e > end) {
            return reply.error(Errno::ENOSPC);
        }
        if mode == 0 || mode == libc::FALLOC_FL_KEEP_SIZE {
            // Allocating within the device: every byte already exists.
            return reply.ok();
        }
        if mode & libc::FALLOC_FL_PUNCH_HOLE != 0 {
            // Loop devices turn discards into punched holes.
            if self.device.read_only() {
                return reply.error(Errno::EROFS);
            }
            return match self.device.trim(offset, length) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(e)),
            };
        }
        reply.error(Errno::EOPNOTSUPP);
    }

    // The calls below are routine: the kernel asks for security xattrs
    // before writes, tools check access and probe ioctls on the file.
    // fuser's defaults answer ENOSYS but log a WARN of several lines for
    // each call; these answer quietly. ENOSYS on an xattr call makes the
    // kernel stop asking on this mount.

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        reply.error(Errno::ENOSYS);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::ENOSYS);
    }

    fn setxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::ENOSYS);
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::ENOSYS);
    }

    /// access(2) (the grow tools check the file exists): only root, the
    /// owner, gets here (`SessionACL::Owner`), so the answer is whether the
    /// inode exists and, for a write, whether the device takes writes.
    fn access(&self, _req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        match self.attr(ino) {
            None => reply.error(Errno::ENOENT),
            Some(_)
                if ino == FILE_INO
                    && mask.contains(AccessFlags::W_OK)
                    && self.device.read_only() =>
            {
                reply.error(Errno::EROFS)
            }
            Some(_) => reply.ok(),
        }
    }

    /// No ioctl is the file's own: "inappropriate ioctl", as for any
    /// regular file without that ioctl.
    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        reply.error(Errno::ENOTTY);
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if ino != INodeNo::ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        let entries = [
            (INodeNo::ROOT, FileType::Directory, "."),
            (INodeNo::ROOT, FileType::Directory, ".."),
            (FILE_INO, FileType::RegularFile, self.name.as_str()),
        ];
        for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(ino, (i + 1) as u64, kind, name) {
                break;
            }
        }
        reply.ok();
    }
}

/// A FUSE mount holding one file backed by a block device; unmounted on
/// drop.
pub struct FuseFile {
    mountpoint: PathBuf,
    file: PathBuf,
    size: Arc<AtomicU64>,
    session: Option<BackgroundSession>,
}

impl FuseFile {
    /// Mounts a FUSE filesystem on the existing empty directory
    /// `mountpoint` with the single file `name`, of `device.size()` bytes.
    pub fn mount(device: Arc<dyn BlockDev>, mountpoint: &Path, name: &str) -> Result<FuseFile> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(HostDevError::io(
                format!("FUSE file name {name:?}"),
                io::Error::from(io::ErrorKind::InvalidInput),
            ));
        }
        let size = Arc::new(AtomicU64::new(device.size()));
        // SAFETY: getuid/getgid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let fs = DeviceFs {
            name: name.to_owned(),
            device,
            size: Arc::clone(&size),
            uid,
            gid,
        };
        let mut config = Config::default();
        config.mount_options = vec![
            // Shows in /proc/mounts which device file this mount serves.
            MountOption::FSName(format!("svs-hostdev:{name}")),
            MountOption::Subtype("svs".into()),
            MountOption::NoExec,
            MountOption::NoSuid,
            MountOption::NoDev,
        ];
        // Only root and the owner (root here) may use it: the loop driver
        // opens the file in the kernel, as root.
        config.acl = SessionACL::Owner;
        config.n_threads = Some(THREADS);
        let session = fuser::spawn_mount(fs, mountpoint, &config)
            .map_err(|e| HostDevError::io(format!("FUSE mount on {}", mountpoint.display()), e))?;
        Ok(FuseFile {
            mountpoint: mountpoint.to_owned(),
            file: mountpoint.join(name),
            size,
            session: Some(session),
        })
    }

    /// The file to attach a loop device to.
    pub fn path(&self) -> &Path {
        &self.file
    }

    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    pub fn size(&self) -> u64 {
        self.size.load(Ordering::SeqCst)
    }

    /// Sets the file's size (after the device grew). The kernel asks for the
    /// size on every `stat` (attributes are never cached); this stats the
    /// file once so its inode carries the new size at once, as `losetup -c`
    /// reads it from there.
    pub fn set_size(&self, size: u64) -> Result<()> {
        self.size.store(size, Ordering::SeqCst);
        let seen = std::fs::metadata(&self.file)
            .map_err(|e| HostDevError::io(format!("stat {}", self.file.display()), e))?
            .len();
        if seen != size {
            return Err(HostDevError::Output {
                command: format!("stat {}", self.file.display()),
                output: format!("size {seen}, expected {size}"),
            });
        }
        Ok(())
    }

    /// Unmounts; fails while something (a loop device) still holds the
    /// file open.
    pub fn unmount(mut self) -> Result<()> {
        self.unmount_once()
    }

    fn unmount_once(&mut self) -> Result<()> {
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        // fuser's own unmount first: unmounted by anything else, the
        // session would try again when dropped and log the EINVAL as a
        // WARN ("Unmount failed: Invalid argument").
        match session.umount_and_join() {
            Ok(()) => return Ok(()),
            // Unmounted, but the session's thread ended with an error:
            // nothing is left of the mount either way.
            Err(_) if !self.still_mounted() => return Ok(()),
            // Busy (the session is gone; its thread serves the mount until
            // it goes): retry from outside.
            Err(_) => {}
        }
        // A loop device detached just now releases the file a moment later
        // (detach is deferred until its last opener closes).
        let mut tries = 0;
        let result = loop {
            match crate::command::run("umount", &[self.mountpoint.as_os_str()]) {
                Ok(_) => break Ok(()),
                Err(e) if tries >= 50 => break Err(e),
                Err(_) => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        };
        if result.is_err() {
            // Still busy: leave the mount lazily detached rather than
            // leaking it, so that it goes once its last user closes it.
            let _ = crate::command::run("umount", &["-l".as_ref(), self.mountpoint.as_os_str()]);
        }
        result
    }

    /// Whether the mount is still there: its file is, while it is served
    /// (a dead connection answers ENOTCONN, also "still mounted"); once
    /// unmounted, the mountpoint is the empty directory under it.
    fn still_mounted(&self) -> bool {
        !matches!(std::fs::symlink_metadata(&self.file),
            Err(e) if e.kind() == io::ErrorKind::NotFound)
    }
}

impl Drop for FuseFile {
    fn drop(&mut self) {
        if let Err(e) = self.unmount_once() {
            tracing::warn!(mountpoint = %self.mountpoint.display(), error = %e, "FUSE file not unmounted");
        }
    }
}
