//! Filesystems svs provisions on `type: file` volumes and grows with them,
//! against the real `svs serve`; checked over NBD through svs's own client,
//! a FUSE file, a loop device and a mount.

use crate::harness::attach::{attach, topology, uri};
use crate::harness::filesystem::*;
use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::sync::Arc;
use svs_hostdev::{mkfs, BlockDev, FsType, FuseFile, LoopDevice, Mount};
use svs_nbd::NbdClient;

const GIB: u64 = 1 << 30;

/// An NBD client on the volume's attachment to host-1.
fn client(attachment: &Value) -> Arc<dyn BlockDev> {
    let uri = uri(attachment);
    let rest = uri.strip_prefix("nbd://").unwrap();
    let (addr, name) = rest.split_once('/').unwrap();
    Arc::new(NbdClient::connect(addr, name).unwrap())
}

/// The filesystem's size in bytes, read from its superblock.
fn superblock_bytes(dev: &dyn BlockDev, fs: FsType) -> u64 {
    let mut sb = vec![0u8; 4096];
    dev.read(0, &mut sb).unwrap();
    match fs {
        FsType::Ext4 => {
            assert_eq!(&sb[1024 + 56..1024 + 58], &[0x53, 0xEF], "ext4 magic");
            let blocks = u32::from_le_bytes(sb[1028..1032].try_into().unwrap()) as u64;
            let log = u32::from_le_bytes(sb[1048..1052].try_into().unwrap());
            blocks * (1024 << log)
        }
        FsType::Xfs => {
            assert_eq!(&sb[0..4], b"XFSB", "xfs magic");
            let block = u32::from_be_bytes(sb[4..8].try_into().unwrap()) as u64;
            let blocks = u64::from_be_bytes(sb[8..16].try_into().unwrap());
            blocks * block
        }
    }
}

async fn detach(app: &TestApp, volume: &str) {
    let (status, body) = app
        .delete(&format!(
            "/volumes/{volume}/snapshots/top/attachments/host-1"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "detach: {body}");
    let job = app.wait_job_of(&body).await;
    assert_eq!(job["state"], "Done", "{job}");
}

async fn resize(app: &TestApp, volume: &str, size: u64) -> Value {
    let (status, body) = app
        .patch(&format!("/volumes/{volume}"), json!({"size": size}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job = app.wait_job_of(&body).await;
    assert_eq!(job["state"], "Done", "{job}");
    job
}

/// No mount or loop device names `needle` (a test's directory, or a
/// volume id: svs's own FUSE file is named after the volume).
fn nothing_left_of(needle: &str) -> bool {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    let loops = std::process::Command::new("losetup")
        .arg("-a")
        .output()
        .unwrap();
    !mounts.contains(needle) && !String::from_utf8_lossy(&loops.stdout).contains(needle)
}

#[tokio::test]
async fn a_file_volume_gets_ext4_that_grows_offline_with_its_files_intact() {
    file_volume_filesystem_grows(FsType::Ext4, None).await;
}

#[tokio::test]
async fn a_file_volume_gets_the_xfs_it_asked_for_grown_by_svs() {
    file_volume_filesystem_grows(FsType::Xfs, Some("xfs")).await;
}

async fn file_volume_filesystem_grows(fs: FsType, requested: Option<&str>) {
    let app = TestApp::start_with(topology("0")).await;
    app.create_policy("mirror", 1, 1, 0).await;
    let mut body = json!({"name": "f", "type": "file", "size": 4, "policy": "mirror"});
    if let Some(r) = requested {
        body["filesystem"] = json!(r);
    }
    let (status, created) = app.post("/volumes", body).await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let job = app.wait_job_of(&created).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(
        last_detail(&job),
        format!(
            "Volume 'f' created: 4 GiB in 2 slice(s); Filesystem {} created",
            fs.name()
        )
    );
    let (_, volume) = app.get("/volumes/f").await;
    assert_eq!(volume["filesystem"], fs.name(), "{volume}");
    assert_eq!(volume["filesystemprovisioned"], true, "{volume}");

    let dirs = tempfile::tempdir().unwrap();
    let (fuse_dir, mnt_dir) = (dirs.path().join("fuse"), dirs.path().join("mnt"));
    std::fs::create_dir(&fuse_dir).unwrap();
    std::fs::create_dir(&mnt_dir).unwrap();
    let files: Vec<Vec<u8>> = (0..3).map(|i| pattern(i + 7, 1 << 20)).collect();

    // svs's filesystem fills the volume; write files into it.
    let a = attach(&app, "f", "host-1", false).await;
    {
        let dev = client(&a);
        assert_eq!(superblock_bytes(dev.as_ref(), fs), 4 * GIB);
        let fuse = FuseFile::mount(dev, &fuse_dir, "v").unwrap();
        let lo = LoopDevice::attach(fuse.path(), false).unwrap();
        let mnt = Mount::new(lo.path(), &mnt_dir, fs, false).unwrap();
        for (i, f) in files.iter().enumerate() {
            std::fs::write(mnt_dir.join(format!("f{i}")), f).unwrap();
        }
        mnt.unmount().unwrap();
        lo.detach().unwrap();
        fuse.unmount().unwrap();
    }
    detach(&app, "f").await;

    // Not attached: svs grows the filesystem itself.
    let job = resize(&app, "f", 6).await;
    assert_eq!(
        last_detail(&job),
        "Volume 'f' resized from 4 GiB to 6 GiB in place; Filesystem grown from 4 GiB to 6 GiB"
    );

    let a = attach(&app, "f", "host-1", true).await;
    {
        let dev = client(&a);
        assert_eq!(superblock_bytes(dev.as_ref(), fs), 6 * GIB);
        let fuse = FuseFile::mount(dev, &fuse_dir, "v").unwrap();
        let lo = LoopDevice::attach(fuse.path(), true).unwrap();
        let mnt = Mount::new(lo.path(), &mnt_dir, fs, true).unwrap();
        for (i, f) in files.iter().enumerate() {
            assert!(std::fs::read(mnt_dir.join(format!("f{i}"))).unwrap() == *f);
        }
        drop(mnt);
        drop(lo);
        drop(fuse);
    }

    // Attached: left for the host.
    let job = resize(&app, "f", 7).await;
    assert_eq!(
        last_detail(&job),
        format!(
            "Volume 'f' resized from 6 GiB to 7 GiB in place; Filesystem {} not grown: \
             the volume is attached, its host grows it",
            fs.name()
        )
    );
    assert!(superblock_bytes(client(&a).as_ref(), fs) == 6 * GIB);
    detach(&app, "f").await;
    assert!(nothing_left_of(dirs.path().to_str().unwrap()));
    assert!(nothing_left_of(created["ObjectID"].as_str().unwrap()));
    fuse_library_stayed_quiet(&app.log());
}

#[tokio::test]
async fn a_block_volume_with_ext4_written_by_a_client_is_not_grown_by_a_resize() {
    let app = TestApp::start_with(topology("0")).await;
    app.create_policy("mirror", 1, 1, 0).await;
    app.create_volume("b", 4, "mirror").await;
    let (_, volume) = app.get("/volumes/b").await;
    assert_eq!(volume.get("filesystem"), None, "{volume}");
    assert_eq!(volume["filesystemprovisioned"], false, "{volume}");

    let dirs = tempfile::tempdir().unwrap();
    let a = attach(&app, "b", "host-1", false).await;
    {
        let fuse = FuseFile::mount(client(&a), dirs.path(), "b").unwrap();
        mkfs(fuse.path(), FsType::Ext4).unwrap();
        fuse.unmount().unwrap();
    }
    detach(&app, "b").await;
    let job = resize(&app, "b", 6).await;
    assert_eq!(
        last_detail(&job),
        "Volume 'b' resized from 4 GiB to 6 GiB in place"
    );
    let a = attach(&app, "b", "host-1", true).await;
    let dev = client(&a);
    assert_eq!(dev.size(), 6 * GIB);
    assert_eq!(superblock_bytes(dev.as_ref(), FsType::Ext4), 4 * GIB);
}

#[tokio::test]
async fn a_filesystem_is_refused_for_a_block_volume_and_must_be_ext4_or_xfs() {
    let app = TestApp::start_with(topology("0")).await;
    app.create_policy("mirror", 1, 1, 0).await;
    let (status, body) = app
        .post(
            "/volumes",
            json!({"name": "b", "size": 1, "policy": "mirror", "filesystem": "ext4"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = app
        .post(
            "/volumes",
            json!({"name": "f", "type": "file", "size": 1, "policy": "mirror", "filesystem": "btrfs"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test]
async fn a_failed_filesystem_growth_keeps_the_old_size_and_a_second_resize_completes_it() {
    let app = TestApp::start_with(topology("0")).await;
    app.create_policy("mirror", 1, 1, 0).await;
    let created_id = app
        .create_volume_done(json!({"name": "f", "type": "file", "size": 4, "policy": "mirror"}))
        .await;

    // Break the primary superblock: e2fsck refuses the filesystem.
    let a = attach(&app, "f", "host-1", false).await;
    let mut saved = vec![0u8; 4096];
    {
        let dev = client(&a);
        dev.read(0, &mut saved).unwrap();
        dev.write(0, &[0u8; 4096], true).unwrap();
    }
    detach(&app, "f").await;
    let (status, body) = app.patch("/volumes/f", json!({"size": 6})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job = app.wait_job_of(&body).await;
    assert_eq!(job["state"], "Error", "{job}");
    assert!(nothing_left_of(&created_id));
    assert!(
        last_detail(&job).starts_with("Could not grow the ext4 filesystem: "),
        "{job}"
    );
    let (_, volume) = app.get("/volumes/f").await;
    assert_eq!(volume["size"], 4, "{volume}");
    assert_eq!(volume["state"], "Ready", "{volume}");

    // Repaired, the same resize again grows it.
    let a = attach(&app, "f", "host-1", false).await;
    client(&a).write(0, &saved, true).unwrap();
    detach(&app, "f").await;
    let job = resize(&app, "f", 6).await;
    assert_eq!(
        last_detail(&job),
        "Volume 'f' resized from 4 GiB to 6 GiB in place; Filesystem grown from 4 GiB to 6 GiB"
    );
    let a = attach(&app, "f", "host-1", true).await;
    assert_eq!(superblock_bytes(client(&a).as_ref(), FsType::Ext4), 6 * GIB);
}

#[tokio::test]
async fn a_resize_with_data_movement_grows_the_filesystem_too() {
    // m3 is filled first, so the mirror's copies land on m1 and m2; once
    // the filler is gone, growing to 18 GiB moves the copy on m2 to m3.
    let app = TestApp::start_with(topology("0")).await;
    app.create_policy("none", 0, 0, 0).await;
    app.create_policy("mirror", 1, 1, 0).await;
    app.create_volume("filler", 20, "none").await;
    app.create_volume_done(json!({"name": "f", "type": "file", "size": 15, "policy": "mirror"}))
        .await;
    app.delete_volume("filler").await;

    let (status, body) = app
        .patch("/volumes/f", json!({"size": 18, "allowdatamovement": true}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job = app.wait_job_of(&body).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(
        last_detail(&job),
        "Volume 'f' resized from 15 GiB to 18 GiB after moving 1 slice(s); \
         Filesystem grown from 15 GiB to 18 GiB"
    );
    let a = attach(&app, "f", "host-1", true).await;
    assert_eq!(
        superblock_bytes(client(&a).as_ref(), FsType::Ext4),
        18 * GIB
    );
}
