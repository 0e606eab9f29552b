//! The host agent end to end: the real `svs serve` and `svs agent` (node
//! host-1), real FUSE files, loop devices and XFS/ext4 mounts. Files are
//! written through the mount while the volume is resized in place and with
//! data movement, while the agent and the service are killed and
//! restarted; `df` and the files' checksums are checked after each step,
//! and at the end nothing is left mounted, looped or FUSE-mounted.

use crate::harness::attach::topology;
use crate::harness::host_agent::*;
use crate::harness::host_side::{device_processes, HostSide};
use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use svs_hostdev::host as hd;

const GIB: u64 = 1 << 30;

/// The mounts on `target`, as (source, fstype).
fn mounts_on(target: &Path) -> Vec<(String, String)> {
    hd::mounts_on(target)
        .unwrap()
        .into_iter()
        .map(|m| (m.source, m.fstype))
        .collect()
}

/// Waits for the job, while `writer` keeps writing; returns it.
async fn resize_while_writing(
    app: &TestApp,
    volume: &str,
    size: u64,
    movement: bool,
    writer: &Writer,
) -> Value {
    // The writer is under way when the resize starts, and still writing
    // (each file fsynced) after it.
    let start = Instant::now();
    while writer.count() == 0 && start.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let job_id = app.start_resize(volume, size, movement).await;
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    let after = writer.count();
    let start = Instant::now();
    while writer.count() < after + 3 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the writer stopped at {after} files"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    job
}

#[tokio::test]
async fn the_agent_mounts_a_file_volume_and_grows_it_through_resizes_and_restarts() {
    let mut app = TestApp::start_with(TestConfig {
        settings: vec!["agent_wait_secs = 60".into()],
        ..topology("0")
    })
    .await;
    app.pin_ports();
    let mut host = HostSide::new();
    app.create_policy("none", 0, 0, 0).await;
    app.create_policy("mirror", 1, 1, 0).await;
    // m3 is taken first so the mirror lands on m1 and m2; without the
    // filler, growing past m2's room moves a copy to m3.
    app.create_volume("filler", 20, "none").await;
    app.create_volume_done(json!({"name": "files", "type": "file", "filesystem": "xfs", "size": 12, "policy": "mirror"})).await;
    app.delete_volume("filler").await;

    issue_credential(&app, &host).await;
    host.start_agent(&app);
    let (target, a) = attach_mounted(&app, &host, "files").await;
    let device = a["hostdevice"].as_str().expect("device").to_string();
    assert_eq!(
        mounts_on(&target),
        vec![(device.clone(), "xfs".to_string())]
    );
    let df_12 = hd::filesystem_bytes(&target).unwrap();
    assert!(df_12 > 11 * GIB && df_12 <= 12 * GIB, "{df_12}");

    // Files written before any resize.
    let mut files = BTreeMap::new();
    for i in 0..8u64 {
        let path = target.join(format!("before-{i}"));
        let data = pattern(i, 1 << 20);
        std::fs::write(&path, &data).unwrap();
        files.insert(path, sha(&data));
    }

    // In place, while writing: the agent grows the mounted XFS online.
    let writer = Writer::start(&target, "inplace");
    let job = resize_while_writing(&app, "files", 14, false, &writer).await;
    assert!(
        last_detail(&job).ends_with("Filesystem grown from 12 GiB to 14 GiB on node 'host-1'"),
        "{job}"
    );
    let df_14 = hd::filesystem_bytes(&target).unwrap();
    assert!(
        df_14 > df_12 + GIB && df_14 <= 14 * GIB,
        "df {df_12} -> {df_14}"
    );
    files.extend(writer.finish());
    check_files(&files);

    // The agent is killed mid-way: the mount stays, writes go on, and the
    // restarted agent takes it over without a second mount.
    let writer = Writer::start(&target, "agentkill");
    host.kill_agent();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        mounts_on(&target),
        vec![(device.clone(), "xfs".to_string())]
    );
    host.start_agent(&app);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let a = wait_host(&app, &host, "files", |a| a["hoststate"] == "Mounted").await;
    assert_eq!(a["hostdevice"], device.as_str(), "{a}");
    assert_eq!(
        mounts_on(&target),
        vec![(device.clone(), "xfs".to_string())]
    );
    assert_eq!(
        device_processes(host.path()).len(),
        1,
        "{:?}",
        host.leftovers()
    );

    // With data movement (a copy moves to m3), still writing.
    let job = resize_while_writing(&app, "files", 18, true, &writer).await;
    let detail = last_detail(&job);
    assert!(detail.contains("after moving 1 slice(s)"), "{job}");
    assert!(
        detail.ends_with("Filesystem grown from 14 GiB to 18 GiB on node 'host-1'"),
        "{job}"
    );
    let df_18 = hd::filesystem_bytes(&target).unwrap();
    assert!(
        df_18 > df_14 + 3 * GIB && df_18 <= 18 * GIB,
        "df {df_14} -> {df_18}"
    );
    files.extend(writer.finish());
    check_files(&files);

    // The service is killed and restarted while files are written: their
    // I/O waits for it and goes on; the agent finds it again.
    let writer = Writer::start(&target, "servicekill");
    tokio::time::sleep(Duration::from_millis(300)).await;
    app.kill();
    tokio::time::sleep(Duration::from_secs(2)).await;
    app.launch().expect("svs serve restarts");
    let job = resize_while_writing(&app, "files", 19, false, &writer).await;
    assert!(
        last_detail(&job).ends_with("Filesystem grown from 18 GiB to 19 GiB on node 'host-1'"),
        "{job}"
    );
    files.extend(writer.finish());
    check_files(&files);
    assert_eq!(
        mounts_on(&target),
        vec![(device.clone(), "xfs".to_string())]
    );

    // Detach: unmounted, disconnected, nothing left.
    let job = app
        .delete_and_wait("/volumes/files/snapshots/top/attachments/host-1")
        .await;
    assert_eq!(job["state"], "Done", "{job}\nagent log:\n{}", host.log());
    let left = host.leftovers();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(
        !target.exists(),
        "the agent removes the mount directory it made"
    );
}

/// ext4 grows online on a normal host (`resize2fs` on the mounted device);
/// this sandbox lacks CAP_SYS_RESOURCE, and the kernel refuses. Either way
/// the job says what happened, and the files stay intact; a refusal is
/// printed. Then: a snapshot attached read-only is mounted read-only, and a
/// busy mount is not detached.
#[tokio::test]
async fn ext4_grows_online_or_says_why_snapshots_mount_read_only_and_busy_mounts_stay() {
    let (app, host) =
        service_and_agent(&[json!({"name": "e", "type": "file", "size": 2, "policy": "mirror"})])
            .await;
    // No mountpoint: the agent mounts it under its mount root.
    let (status, body) = app
        .post(
            "/volumes/e/snapshots/top/attachments",
            json!({"node": "host-1"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let a = wait_host(&app, &host, "e", |a| a["hoststate"] == "Mounted").await;
    let target = host.mountpoint("e");
    assert_eq!(a["hostmountpath"], target.to_string_lossy().as_ref(), "{a}");
    let data = pattern(7, 3 << 20);
    std::fs::write(target.join("kept"), &data).unwrap();
    let before = hd::filesystem_bytes(&target).unwrap();

    let job_id = app.start_resize("e", 3, false).await;
    let job = app.wait_job(&job_id).await;
    let after = hd::filesystem_bytes(&target).unwrap();
    if job["state"] == "Done" {
        assert!(
            last_detail(&job).ends_with("Filesystem grown from 2 GiB to 3 GiB on node 'host-1'"),
            "{job}"
        );
        assert!(after > before + GIB / 2, "df {before} -> {after}");
    } else {
        assert_eq!(job["state"], "Error", "{job}");
        let detail = last_detail(&job);
        assert!(
            detail.starts_with("Could not grow the ext4 filesystem on node 'host-1': ")
                && detail.contains("Permission denied to resize filesystem"),
            "{job}"
        );
        assert_eq!(after, before);
        println!("the kernel refused online ext4 growth here (no CAP_SYS_RESOURCE): {detail}");
    }
    assert_eq!(std::fs::read(target.join("kept")).unwrap(), data);

    // A snapshot, taken with the filesystem frozen (clean, journal
    // flushed), attached read-only: mounted read-only beside the volume.
    let frozen = Frozen::new(&target);
    let job = app
        .post_and_wait(
            "/volumes/e/snapshots",
            json!({"name": "s1", "consistency": "crash"}),
        )
        .await;
    drop(frozen);
    assert_eq!(job["state"], "Done", "{job}");
    let (status, body) = app
        .post(
            "/volumes/e/snapshots/s1/attachments",
            json!({"node": "host-1"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let snap_path = "/volumes/e/snapshots/s1/attachments/host-1";
    let start = Instant::now();
    let a = loop {
        let (_, a) = app.get(snap_path).await;
        if a["hoststate"] == "Mounted" {
            break a;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{a}\n{}",
            host.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let snap_target = host.mountpoint("e@s1");
    assert_eq!(
        a["hostmountpath"],
        snap_target.to_string_lossy().as_ref(),
        "{a}"
    );
    let m = hd::mounts_on(&snap_target).unwrap();
    assert!(m.len() == 1 && m[0].read_only, "{m:?}");
    assert_eq!(std::fs::read(snap_target.join("kept")).unwrap(), data);
    let err = std::fs::write(snap_target.join("new"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");
    let job = app.delete_and_wait(snap_path).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert!(hd::mounts_on(&snap_target).unwrap().is_empty());

    // A file held open keeps the mount busy: the detach fails, saying so,
    // and the volume stays attached and mounted (nothing is forced).
    let busy = std::fs::File::open(target.join("kept")).unwrap();
    let job = app
        .delete_and_wait("/volumes/e/snapshots/top/attachments/host-1")
        .await;
    assert_eq!(job["state"], "Error", "{job}");
    let detail = last_detail(&job);
    assert!(
        detail.starts_with(&format!(
            "Detach failed on node 'host-1': unmount of {} failed: ",
            target.display()
        )) && detail.contains("busy"),
        "{job}"
    );
    let a = wait_host(&app, &host, "e", |a| a["hoststate"] == "Mounted").await;
    assert_eq!(a["state"], "Attached", "{a}");
    assert_eq!(hd::mounts_on(&target).unwrap().len(), 1);
    drop(busy);

    let job = app
        .delete_and_wait("/volumes/e/snapshots/top/attachments/host-1")
        .await;
    assert_eq!(job["state"], "Done", "{job}\nagent log:\n{}", host.log());
    let left = host.leftovers();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The kernel NBD mode needs the `nbd` module; these machines have none,
/// and the agent says so instead of starting.
#[test]
fn the_kernel_nbd_mode_is_refused_where_the_module_is_missing() {
    if svs_hostdev::KernelNbd::available() {
        println!("this host has the nbd module: nothing to refuse");
        return;
    }
    let host = HostSide::new();
    std::fs::write(host.credential_file(), "svsnode.x.y").unwrap();
    let out = Command::new(svs_bin())
        .args(["agent", "--url", "http://127.0.0.1:9", "--node", "n"])
        .arg("--credential-file")
        .arg(host.credential_file())
        .arg("--state-dir")
        .arg(host.path().join("state"))
        .args(["--block-device", "kernel-nbd"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "svs: --block-device kernel-nbd needs the kernel's nbd module (modprobe nbd)"
    );
}

/// A block volume becomes a block device on the host, never formatted or
/// mounted; a resize shows on the device without reconnecting it.
#[tokio::test]
async fn a_block_volume_is_connected_as_a_device_that_grows_with_the_volume() {
    let (app, host) =
        service_and_agent(&[json!({"name": "b", "type": "block", "size": 1, "policy": "mirror"})])
            .await;
    let (status, body) = app
        .post(
            "/volumes/b/snapshots/top/attachments",
            json!({"node": "host-1"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let a = wait_host(&app, &host, "b", |a| a["hoststate"] == "Connected").await;
    let device = PathBuf::from(a["hostdevice"].as_str().expect("device"));
    assert!(device.to_string_lossy().starts_with("/dev/loop"), "{a}");
    assert_eq!(a["hostmountpath"], Value::Null, "{a}");
    assert_eq!(hd::block_size(&device).unwrap(), GIB);

    // Bytes written to the device are the volume's.
    let data = pattern(3, 1 << 20);
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&device)
            .unwrap();
        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(512 << 10)).unwrap();
        f.write_all(&data).unwrap();
        f.sync_all().unwrap();
    }
    let job_id = app.start_resize("b", 2, false).await;
    assert_eq!(app.wait_job(&job_id).await["state"], "Done");
    let start = Instant::now();
    while hd::block_size(&device).unwrap() != 2 * GIB {
        assert!(start.elapsed() < Duration::from_secs(30), "{}", host.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut back = vec![0u8; data.len()];
    {
        let mut f = std::fs::File::open(&device).unwrap();
        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(512 << 10)).unwrap();
        std::io::Read::read_exact(&mut f, &mut back).unwrap();
    }
    assert!(back == data, "the bytes survive the resize");

    let job = app
        .delete_and_wait("/volumes/b/snapshots/top/attachments/host-1")
        .await;
    assert_eq!(job["state"], "Done", "{job}\nagent log:\n{}", host.log());
    let left = host.leftovers();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A `"manager": "csi"` attachment is the CSI node plugin's: a running
/// agent makes no device for it and reports nothing, and its resize and
/// detach jobs do not wait for any agent.
#[tokio::test]
async fn the_agent_leaves_csi_attachments_alone_and_their_jobs_do_not_wait_for_it() {
    let (app, host) = service_and_agent(&[
        json!({"name": "c", "type": "file", "size": 1, "policy": "mirror"}),
        json!({"name": "a", "type": "block", "size": 1, "policy": "mirror"}),
    ])
    .await;
    let job = app
        .post_and_wait(
            "/volumes/c/snapshots/top/attachments",
            json!({"node": "host-1", "manager": "csi"}),
        )
        .await;
    assert_eq!(job["state"], "Done", "{job}");
    // An agent attachment made after it: once the agent reports this one,
    // it has acted on a desired state that held both.
    let (status, body) = app
        .post(
            "/volumes/a/snapshots/top/attachments",
            json!({"node": "host-1"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_host(&app, &host, "a", |a| a["hoststate"] == "Connected").await;
    let c = attachment(&app, "c").await;
    assert_eq!(c["manager"], "csi", "{c}");
    assert_eq!(c["hoststate"], Value::Null, "{c}");
    assert_eq!(
        device_processes(host.path()).len(),
        1,
        "only a's device: {:?}",
        host.leftovers()
    );
    let devices: Vec<String> = std::fs::read_dir(host.path().join("state/devices"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(devices.len(), 1, "{devices:?}");
    assert!(!devices[0].starts_with(c["volumeid"].as_str().unwrap()));

    // Its resize is done without waiting (its host grows the filesystem),
    // and so is its detach.
    let started = Instant::now();
    let job_id = app.start_resize("c", 2, false).await;
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert!(
        last_detail(&job)
            .ends_with("Filesystem ext4 not grown: the volume is attached, its host grows it"),
        "{job}"
    );
    let job = app
        .delete_and_wait("/volumes/c/snapshots/top/attachments/host-1")
        .await;
    assert_eq!(job["state"], "Done", "{job}");
    assert!(started.elapsed() < Duration::from_secs(30));
}
