//! The path-based helpers of `host` the CSI node plugin uses: bind mounts
//! (read-only ones refuse writes), probing a device for a filesystem, and
//! statvfs. Needs root (mount).

use std::path::Path;
use svs_hostdev::host as hd;
use svs_hostdev::{mkfs, FsType};

/// Unmounts whatever a failed test left on `target`.
struct Unmount<'a>(&'a Path);

impl Drop for Unmount<'_> {
    fn drop(&mut self) {
        while hd::mounts_on(self.0)
            .map(|m| !m.is_empty())
            .unwrap_or(false)
        {
            if hd::unmount(self.0).is_err() {
                let _ = hd::unmount_lazy(self.0);
            }
        }
    }
}

#[test]
fn a_read_only_bind_mount_refuses_writes_and_a_read_write_one_takes_them() {
    let dir = tempfile::tempdir().unwrap();
    let (source, rw, ro) = (
        dir.path().join("source"),
        dir.path().join("rw"),
        dir.path().join("ro"),
    );
    for d in [&source, &rw, &ro] {
        std::fs::create_dir(d).unwrap();
    }
    let _guards = (Unmount(&rw), Unmount(&ro));
    hd::bind_mount(&source, &rw, false).unwrap();
    hd::bind_mount(&source, &ro, true).unwrap();
    std::fs::write(rw.join("a"), b"through rw").unwrap();
    assert_eq!(std::fs::read(ro.join("a")).unwrap(), b"through rw");
    assert_eq!(std::fs::read(source.join("a")).unwrap(), b"through rw");
    let err = std::fs::write(ro.join("b"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");
    assert!(hd::mounts_on(&ro).unwrap()[0].read_only);
    assert!(!hd::mounts_on(&rw).unwrap()[0].read_only);
    hd::unmount(&rw).unwrap();
    hd::unmount(&ro).unwrap();
    // The source directory itself was never made read-only.
    std::fs::write(source.join("c"), b"x").unwrap();
}

#[test]
fn a_blank_device_has_no_filesystem_and_a_made_one_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("image");
    std::fs::File::create(&image)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    assert_eq!(hd::filesystem_type(&image).unwrap(), None);
    mkfs(&image, FsType::Ext4).unwrap();
    assert_eq!(
        hd::filesystem_type(&image).unwrap().as_deref(),
        Some("ext4")
    );
    assert!(hd::filesystem_type(&dir.path().join("missing")).is_err());
}

#[test]
fn statvfs_gives_bytes_and_inodes() {
    let s = hd::filesystem_stats(Path::new("/")).unwrap();
    assert!(s.total_bytes > 0 && s.available_bytes <= s.total_bytes);
    assert_eq!(hd::filesystem_bytes(Path::new("/")).unwrap(), s.total_bytes);
    assert!(s.used_bytes <= s.total_bytes);
    assert_eq!(s.used_inodes + s.free_inodes, s.total_inodes);
    assert!(hd::filesystem_stats(Path::new("/no/such/path")).is_err());
}
