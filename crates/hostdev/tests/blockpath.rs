//! The whole host-side path on real devices: NBD server → NbdClient → FUSE
//! file → loop device → mkfs → mount, then growing the volume.

mod common;

use std::sync::Arc;

use common::*;
use svs_hostdev::{mkfs, resize2fs, xfs_growfs, BlockDev, FsType, FuseFile, LoopDevice, Mount};
use svs_nbd::NbdClient;

const FILES: usize = 5;
const FILE_LEN: usize = 3 * MIB as usize + 17;

fn write_files(dir: &std::path::Path) {
    for i in 0..FILES {
        std::fs::write(dir.join(format!("f{i}")), content(i, FILE_LEN)).unwrap();
    }
}

fn check_files(dir: &std::path::Path) {
    for i in 0..FILES {
        let back = std::fs::read(dir.join(format!("f{i}"))).unwrap();
        assert!(back == content(i, FILE_LEN), "file f{i} differs");
    }
}

/// Directories of one test: the sparse device file, the FUSE mountpoint and
/// the filesystem's mountpoint.
struct Dirs {
    root: tempfile::TempDir,
}

impl Dirs {
    fn new() -> Dirs {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("fuse")).unwrap();
        std::fs::create_dir(root.path().join("mnt")).unwrap();
        Dirs { root }
    }
    fn path(&self, name: &str) -> std::path::PathBuf {
        self.root.path().join(name)
    }
}

fn grow_and_check(fs: FsType, size: u64, grown: u64) {
    require_tools();
    let dirs = Dirs::new();
    {
        let device = sparse_device(&dirs.path("device"), size);
        let server = Server::start(&[("vol", device.clone())]);
        let client: Arc<dyn BlockDev> = Arc::new(NbdClient::connect(server.addr, "vol").unwrap());
        let fuse = FuseFile::mount(client, &dirs.path("fuse"), "disk").unwrap();
        assert_eq!(std::fs::metadata(fuse.path()).unwrap().len(), size);
        let lo = LoopDevice::attach(fuse.path(), false).unwrap();
        assert_eq!(lo.size().unwrap(), size);
        mkfs(lo.path(), fs).unwrap();

        let mnt = Mount::new(lo.path(), &dirs.path("mnt"), fs, false).unwrap();
        write_files(mnt.target());
        let before = fs_size(mnt.target());
        assert!(before < size, "{before}");

        device.grow(grown).expect("device grows");
        fuse.set_size(grown).unwrap();
        assert_eq!(std::fs::metadata(fuse.path()).unwrap().len(), grown);
        let mnt = match fs {
            FsType::Ext4 => {
                mnt.unmount().unwrap();
                lo.refresh_capacity().unwrap();
                assert_eq!(lo.size().unwrap(), grown);
                resize2fs(lo.path()).unwrap();
                Mount::new(lo.path(), &dirs.path("mnt"), fs, false).unwrap()
            }
            FsType::Xfs => {
                lo.refresh_capacity().unwrap();
                assert_eq!(lo.size().unwrap(), grown);
                xfs_growfs(mnt.target()).unwrap();
                mnt
            }
        };
        let after = fs_size(mnt.target());
        // The filesystem took (nearly) all the new space.
        assert!(
            after >= before + (grown - size) * 9 / 10,
            "df size {before} → {after} after growing {size} → {grown}"
        );
        check_files(mnt.target());
        // Data reached the device through every layer: remount and read.
        drop(mnt);
        let mnt = Mount::new(lo.path(), &dirs.path("mnt"), fs, true).unwrap();
        check_files(mnt.target());
        assert_eq!(fs_size(mnt.target()), after);
    }
    assert_nothing_left(dirs.root.path());
}

#[test]
fn ext4_grows_offline_with_resize2fs_and_keeps_its_files() {
    grow_and_check(FsType::Ext4, 64 * MIB, 160 * MIB);
}

#[test]
fn xfs_grows_online_with_xfs_growfs_and_keeps_its_files() {
    // mkfs.xfs refuses filesystems under 300 MiB.
    grow_and_check(FsType::Xfs, 320 * MIB, 512 * MIB);
}

#[test]
fn read_only_attaches_refuse_writes() {
    require_tools();
    let dirs = Dirs::new();
    {
        let device = sparse_device(&dirs.path("device"), 64 * MIB);
        let server = Server::start(&[
            ("vol", device.clone()),
            ("ro", device.read_only_view().expect("view")),
        ]);

        // A filesystem with files, made read-write.
        {
            let client: Arc<dyn BlockDev> =
                Arc::new(NbdClient::connect(server.addr, "vol").unwrap());
            let fuse = FuseFile::mount(client, &dirs.path("fuse"), "disk").unwrap();
            let lo = LoopDevice::attach(fuse.path(), false).unwrap();
            mkfs(lo.path(), FsType::Ext4).unwrap();
            let mnt = Mount::new(lo.path(), &dirs.path("mnt"), FsType::Ext4, false).unwrap();
            write_files(mnt.target());
        }

        // A read-only loop device over a writable file.
        let client: Arc<dyn BlockDev> = Arc::new(NbdClient::connect(server.addr, "vol").unwrap());
        let fuse = FuseFile::mount(client, &dirs.path("fuse"), "disk").unwrap();
        let lo = LoopDevice::attach(fuse.path(), true).unwrap();
        assert!(lo.read_only());
        let err = std::fs::OpenOptions::new()
            .write(true)
            .open(lo.path())
            .and_then(|f| std::os::unix::fs::FileExt::write_all_at(&f, &[0xff; 4096], 0))
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPERM), "{err}");
        assert!(Mount::new(lo.path(), &dirs.path("mnt"), FsType::Ext4, false).is_err());
        let mnt = Mount::new(lo.path(), &dirs.path("mnt"), FsType::Ext4, true).unwrap();
        check_files(mnt.target());
        let err = std::fs::write(mnt.target().join("new"), b"x").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");
        drop(mnt);
        drop(lo);
        drop(fuse);

        // A read-only NBD export: the FUSE file itself refuses writers.
        let client: Arc<dyn BlockDev> = Arc::new(NbdClient::connect(server.addr, "ro").unwrap());
        assert!(client.read_only());
        let fuse = FuseFile::mount(client, &dirs.path("fuse"), "disk").unwrap();
        let err = std::fs::OpenOptions::new()
            .write(true)
            .open(fuse.path())
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");
        let lo = LoopDevice::attach(fuse.path(), true).unwrap();
        let mnt = Mount::new(lo.path(), &dirs.path("mnt"), FsType::Ext4, true).unwrap();
        check_files(mnt.target());
    }
    assert_nothing_left(dirs.root.path());
}
