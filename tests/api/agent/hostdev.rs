//! The host-side block path against the real `svs serve`: an attached
//! volume through svs's own NBD client, a FUSE file and a loop device, with
//! a real filesystem on it that grows when the volume does.

use crate::harness::attach::{attach, topology, uri};
use crate::harness::*;
use reqwest::StatusCode;
use serde_json::json;

use std::path::Path;
use std::sync::Arc;
use svs_hostdev::{mkfs, resize2fs, xfs_growfs, BlockDev, FsType, FuseFile, LoopDevice, Mount};
use svs_nbd::NbdClient;

const GIB: u64 = 1 << 30;

/// `nbd://host:port/name` → (`host:port`, `name`).
fn split_uri(uri: &str) -> (String, String) {
    let rest = uri.strip_prefix("nbd://").expect("nbd URI");
    let (addr, name) = rest.split_once('/').expect("export name");
    (addr.to_string(), name.to_string())
}

fn df_size(dir: &Path) -> u64 {
    let out = std::process::Command::new("df")
        .args(["-B1", "--output=size"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines().nth(1).unwrap().trim().parse().unwrap()
}

fn nothing_left_under(dir: &Path) -> bool {
    let dir = dir.to_str().unwrap();
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    let loops = std::process::Command::new("losetup")
        .arg("-a")
        .output()
        .unwrap();
    !mounts.contains(dir) && !String::from_utf8_lossy(&loops.stdout).contains(dir)
}

#[tokio::test]
async fn an_attached_volume_carries_xfs_through_fuse_and_a_loop_device_and_grows_online() {
    grow_a_filesystem_on_an_attached_volume(FsType::Xfs).await;
}

#[tokio::test]
async fn an_attached_volume_carries_ext4_and_grows_offline_with_resize2fs() {
    grow_a_filesystem_on_an_attached_volume(FsType::Ext4).await;
}

/// Volume → NBD client → FUSE file → loop → `fs` → files; then the volume
/// grows by 2 GiB and so does the filesystem (XFS online, ext4 offline),
/// its files intact.
async fn grow_a_filesystem_on_an_attached_volume(fs: FsType) {
    let app = TestApp::start_with(topology("0")).await;
    app.create_policy("mirror", 1, 1, 0).await;
    app.create_volume("v", 4, "mirror").await;
    let a = attach(&app, "v", "host-1", false).await;
    let (addr, name) = split_uri(&uri(&a));

    let dirs = tempfile::tempdir().unwrap();
    let (fuse_dir, mnt_dir) = (dirs.path().join("fuse"), dirs.path().join("mnt"));
    std::fs::create_dir(&fuse_dir).unwrap();
    std::fs::create_dir(&mnt_dir).unwrap();
    let files: Vec<Vec<u8>> = (0..4).map(|i| pattern(i, 2 << 20)).collect();
    {
        let client: Arc<dyn BlockDev> = Arc::new(NbdClient::connect(addr.as_str(), &name).unwrap());
        assert_eq!(client.size(), 4 * GIB);
        let fuse = FuseFile::mount(client, &fuse_dir, "v").unwrap();
        let lo = LoopDevice::attach(fuse.path(), false).unwrap();
        mkfs(lo.path(), fs).unwrap();
        let mnt = Mount::new(lo.path(), &mnt_dir, fs, false).unwrap();
        for (i, f) in files.iter().enumerate() {
            std::fs::write(mnt_dir.join(format!("f{i}")), f).unwrap();
        }
        let before = df_size(&mnt_dir);

        // Grow the volume (XFS while mounted, ext4 unmounted); the open NBD
        // connection sees the new size at once.
        let mnt = match fs {
            FsType::Xfs => Some(mnt),
            FsType::Ext4 => {
                mnt.unmount().unwrap();
                None
            }
        };
        let (status, body) = app.patch("/volumes/v", json!({"size": 6})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let job = app.wait_job_of(&body).await;
        assert_eq!(job["state"], "Done", "{job}");
        fuse.set_size(6 * GIB).unwrap();
        lo.refresh_capacity().unwrap();
        assert_eq!(lo.size().unwrap(), 6 * GIB);
        let mnt = match mnt {
            Some(mnt) => {
                xfs_growfs(&mnt_dir).unwrap();
                mnt
            }
            None => {
                resize2fs(lo.path()).unwrap();
                Mount::new(lo.path(), &mnt_dir, fs, false).unwrap()
            }
        };
        let after = df_size(&mnt_dir);
        assert!(after >= before + 2 * GIB * 9 / 10, "df {before} → {after}");
        for (i, f) in files.iter().enumerate() {
            assert!(std::fs::read(mnt_dir.join(format!("f{i}"))).unwrap() == *f);
        }

        // Everything reached the volume: a fresh mount reads it all back.
        mnt.unmount().unwrap();
        let mnt = Mount::new(lo.path(), &mnt_dir, fs, true).unwrap();
        for (i, f) in files.iter().enumerate() {
            assert!(std::fs::read(mnt_dir.join(format!("f{i}"))).unwrap() == *f);
        }
        assert_eq!(df_size(&mnt_dir), after);
        drop(mnt);
    }
    assert!(nothing_left_under(dirs.path()));
}
