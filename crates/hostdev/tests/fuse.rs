//! The FUSE file on its own, over an in-memory device: exact bytes, the
//! size, and which device calls each file operation makes; and the guards
//! undoing everything when a test panics half-way.

mod common;

use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use svs_hostdev::{mkfs, BlockDev, FsType, FuseFile, LoopDevice, Mount};

struct MemDev {
    data: Mutex<Vec<u8>>,
    read_only: bool,
    fua_writes: AtomicU64,
    flushes: AtomicU64,
    trims: Mutex<Vec<(u64, u64)>>,
}

impl MemDev {
    fn new(size: usize, read_only: bool) -> Arc<MemDev> {
        Arc::new(MemDev {
            data: Mutex::new((0..size).map(|i| (i % 253) as u8).collect()),
            read_only,
            fua_writes: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            trims: Mutex::new(Vec::new()),
        })
    }
    fn bytes(&self, at: usize, len: usize) -> Vec<u8> {
        self.data.lock().unwrap()[at..at + len].to_vec()
    }
}

impl BlockDev for MemDev {
    fn size(&self) -> u64 {
        self.data.lock().unwrap().len() as u64
    }
    fn read_only(&self) -> bool {
        self.read_only
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let d = self.data.lock().unwrap();
        let at = offset as usize;
        buf.copy_from_slice(&d[at..at + buf.len()]);
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        let mut d = self.data.lock().unwrap();
        let at = offset as usize;
        d[at..at + data.len()].copy_from_slice(data);
        if fua {
            self.fua_writes.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.flushes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.trims.lock().unwrap().push((offset, len));
        Ok(())
    }
}

fn mountpoint(root: &tempfile::TempDir) -> std::path::PathBuf {
    let dir = root.path().join("fuse");
    std::fs::create_dir(&dir).unwrap();
    dir
}

#[test]
fn the_file_reads_and_writes_the_device_bytes_and_maps_file_calls_to_device_calls() {
    let root = tempfile::tempdir().unwrap();
    let dev = MemDev::new(MIB as usize, false);
    {
        let fuse = FuseFile::mount(dev.clone(), &mountpoint(&root), "disk").unwrap();
        assert_eq!(std::fs::metadata(fuse.path()).unwrap().len(), MIB);
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(fuse.path())
            .unwrap();

        // Unaligned write and read at exact offsets.
        f.write_all_at(&[0xab; 5000], 4099).unwrap();
        assert_eq!(dev.bytes(4099, 5000), vec![0xab; 5000]);
        assert_eq!(dev.bytes(4098, 1), vec![(4098 % 253) as u8]);
        assert_eq!(dev.bytes(9099, 1), vec![(9099 % 253) as u8]);
        let mut back = vec![0u8; 5002];
        f.read_exact_at(&mut back, 4098).unwrap();
        assert_eq!(back[0], (4098 % 253) as u8);
        assert_eq!(&back[1..5001], &[0xab; 5000][..]);

        // The end of the device is the end of the file.
        let mut tail = vec![0u8; 100];
        assert_eq!(f.read_at(&mut tail, MIB - 10).unwrap(), 10);
        let err = f.write_all_at(&[1; 20], MIB - 10).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
        let err = f.set_len(2 * MIB).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPERM), "{err}");

        // fsync flushes the device; punching a hole trims it.
        f.sync_all().unwrap();
        assert!(dev.flushes.load(Ordering::SeqCst) >= 1);
        let rc = unsafe {
            libc::fallocate(
                f.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                65536,
                8192,
            )
        };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        assert_eq!(*dev.trims.lock().unwrap(), vec![(65536, 8192)]);

        // O_DSYNC writes ask the device for FUA.
        let sync = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DSYNC)
            .open(fuse.path())
            .unwrap();
        sync.write_all_at(&[7; 4096], 0).unwrap();
        assert_eq!(dev.fua_writes.load(Ordering::SeqCst), 1);

        // Growing: the device first, then the file.
        dev.data.lock().unwrap().resize(2 * MIB as usize, 0x3c);
        fuse.set_size(2 * MIB).unwrap();
        assert_eq!(fuse.size(), 2 * MIB);
        let mut grown = vec![0u8; 4096];
        f.read_exact_at(&mut grown, MIB + 4096).unwrap();
        assert_eq!(grown, vec![0x3c; 4096]);
        f.write_all_at(&[0x77; 4096], 2 * MIB - 4096).unwrap();
        assert_eq!(dev.bytes(2 * MIB as usize - 4096, 4096), vec![0x77; 4096]);
    }
    assert_nothing_left(root.path());
}

#[test]
fn a_read_only_device_gives_a_file_no_writer_can_open() {
    let root = tempfile::tempdir().unwrap();
    let dev = MemDev::new(MIB as usize, true);
    {
        let fuse = FuseFile::mount(dev.clone(), &mountpoint(&root), "disk").unwrap();
        let err = OpenOptions::new()
            .write(true)
            .open(fuse.path())
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");
        let mut buf = [0u8; 3];
        std::fs::File::open(fuse.path())
            .unwrap()
            .read_exact_at(&mut buf, 253)
            .unwrap();
        assert_eq!(buf, [0, 1, 2]);
    }
    assert_nothing_left(root.path());
}

#[test]
fn every_guard_undoes_its_work_when_a_test_panics_half_way() {
    require_tools();
    let root = tempfile::tempdir().unwrap();
    let fuse_dir = mountpoint(&root);
    let mnt_dir = root.path().join("mnt");
    std::fs::create_dir(&mnt_dir).unwrap();
    let dev = MemDev::new(32 * MIB as usize, false);
    let seen = Arc::new(Mutex::new(String::new()));
    let result = std::thread::spawn({
        let seen = Arc::clone(&seen);
        move || {
            let fuse = FuseFile::mount(dev, &fuse_dir, "disk").unwrap();
            let lo = LoopDevice::attach(fuse.path(), false).unwrap();
            mkfs(lo.path(), FsType::Ext4).unwrap();
            let _mnt = Mount::new(lo.path(), &mnt_dir, FsType::Ext4, false).unwrap();
            std::fs::write(mnt_dir.join("f"), b"x").unwrap();
            *seen.lock().unwrap() = std::fs::read_to_string("/proc/mounts").unwrap();
            panic!("a failing assertion");
        }
    })
    .join();
    assert!(result.is_err());
    // Everything was there before the panic...
    let mounts = seen.lock().unwrap().clone();
    assert_eq!(
        mounts
            .lines()
            .filter(|l| l.contains(root.path().to_str().unwrap()))
            .count(),
        2,
        "{mounts}"
    );
    // ...and nothing is after.
    assert_nothing_left(root.path());
}
