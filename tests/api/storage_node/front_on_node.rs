//! A volume's front on a storage node (issue 21, `fronts = "nodes"`): the
//! real `svs serve`, `svs storage-node` processes on 127.0.0.2.., and real
//! clients (qemu-io; the host agent with a mounted filesystem). The
//! attachment's NBD address is a storage node's; the volume's bytes never
//! pass through `svs serve`, which can die without stopping the I/O; when
//! the front's node dies, the front opens on another node holding a copy
//! and the host's device follows it.

use crate::harness::attach::{attach, qemu_io, uri};
use crate::harness::front_on_node::*;
use crate::harness::host_agent::{
    assert_copies_identical, attach_mounted, check_files, issue_credential, Writer,
};
use crate::harness::host_side::HostSide;
use crate::harness::snapshots::{rollback_done, snapshot};
use crate::harness::storage_nodes::{
    assert_jobs_on_node_fronts, copies, eventually, snapshot_files, start_node, volume_state,
    wait_served, wait_written, JOB_ON_NODE_FRONT, MARGIN, TIMEOUT,
};
use reqwest::StatusCode;
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

/// A mirrored volume attached to host-1 is exported by a storage node
/// holding one of its copies, not by `svs serve`: qemu-io writes through
/// the node's address, every copy's file on the nodes' disks has the
/// bytes, and with `svs serve` killed the volume still takes writes and
/// reads them back. The control plane restarted, the front stays where it
/// is (same address, still serving); detached, the export is gone.
#[tokio::test]
async fn an_attached_mirror_is_served_by_a_storage_node_not_by_svs_serve() {
    let (mut app, nodes) = three_nodes(&[]).await;
    let id = app
        .create_volume_done(json!({"name": "v", "size": 1, "policy": "three"}))
        .await;
    let a = attach(&app, "v", "host-1", false).await;
    let uri = uri(&a);
    let front = front_node(&nodes, &uri);
    let holds: Vec<String> = copies(&app, "v").await.into_iter().map(|c| c.1).collect();
    assert!(holds.contains(&front.medium.to_string()), "{holds:?} {uri}");

    let out = qemu_io(
        &uri,
        &["write -P 0xab 0 4M".into(), "read -P 0xab 0 4M".into()],
    );
    assert!(out.is_ok(), "{out:?}\n{}", front.process.log());

    // The control plane is not on the data path. (Restarted on the same
    // ports, for the nodes to find it again.)
    app.pin_ports();
    app.kill();
    let out = qemu_io(
        &uri,
        &[
            "write -P 0xcd 1M 64k".into(),
            "read -P 0xab 0 1M".into(),
            "read -P 0xcd 1M 64k".into(),
            "flush".into(),
        ],
    );
    assert!(
        out.is_ok(),
        "svs serve down: {out:?}\n{}",
        front.process.log()
    );
    for (copy, medium, health) in {
        app.launch().expect("svs serve restarts");
        copies(&app, "v").await
    } {
        assert_eq!(health, "Healthy");
        let file = copy_file(&nodes, &medium, &id, copy);
        assert_eq!(bytes_at(&file, 0, 4096), vec![0xab; 4096], "{medium}");
        assert_eq!(bytes_at(&file, 1 << 20, 4096), vec![0xcd; 4096], "{medium}");
    }

    // Restarted, the control plane leaves the front where it is.
    let (status, a) = app.get("/volumes/v/snapshots/top/attachments/host-1").await;
    assert_eq!(status, StatusCode::OK, "{a}");
    assert_eq!(crate::harness::attach::uri(&a), uri);
    let out = qemu_io(&uri, &["read -P 0xcd 1M 64k".into()]);
    assert!(out.is_ok(), "{out:?}\n{}", front.process.log());

    let job = app
        .delete_and_wait("/volumes/v/snapshots/top/attachments/host-1")
        .await;
    assert_eq!(job["state"], "Done", "{job}");
    let gone = eventually(Duration::from_secs(10), || async {
        qemu_io(&uri, &["read 0 4k".into()]).is_err()
    })
    .await;
    assert!(gone, "the export outlived its attachment");
}

/// A file volume (ext4) with three copies on three storage nodes, mounted
/// by host-1's agent through its front on one of them. The front's node is
/// SIGKILLed while files are written and fsynced: the writer sees no error,
/// the front opens on another node holding a copy (the attachment's URI
/// names it) and the agent's device follows it; the volume is Degraded.
/// A fourth node joins and a recovery rebuilds the lost copy there: the
/// job runs on the front's node (the volume stays attached, its front
/// where it is); the volume is Ready, every file reads back and the three
/// copies are identical.
#[tokio::test]
async fn the_front_moves_to_another_node_when_its_node_dies() {
    let (app, mut nodes) = three_nodes(&[]).await;
    let id = app
        .create_volume_done(json!({"name": "files", "type": "file", "size": 2, "policy": "three"}))
        .await;
    let mut host = HostSide::new();
    issue_credential(&app, &host).await;
    host.start_agent(&app);
    let (target, a) = attach_mounted(&app, &host, "files").await;
    let first_uri = uri(&a);
    let victim = front_node(&nodes, &first_uri).name;

    let writer = Writer::start(&target, "w");
    wait_written(&writer, 0, 5, &host, &app).await;
    nodes
        .iter_mut()
        .find(|n| n.name == victim)
        .expect("the front's node")
        .process
        .kill();
    let at_kill = writer.count();
    wait_written(&writer, at_kill, 20, &host, &app).await;
    let degraded = eventually(TIMEOUT + MARGIN, || async {
        volume_state(&app, "files").await == "Degraded"
    })
    .await;
    assert!(degraded, "{}", app.get("/volumes/files").await.1);
    let (_, a) = app
        .get("/volumes/files/snapshots/top/attachments/host-1")
        .await;
    let moved_uri = uri(&a);
    let moved_to = front_node(&nodes, &moved_uri).name;
    assert_ne!(moved_to, victim, "{a}");
    let files = writer.finish();
    assert!(files.len() >= at_kill + 20, "{}", files.len());
    check_files(&files);

    // A fourth node joins; the recovery rebuilds the lost copy there.
    let spare = start_node(&app, "sn-4", "127.0.0.5", "z4", "d1").await;
    wait_served(&app, &["d1"]).await;
    let (status, body) = app.post("/volumes/files/recover", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job = app.wait_job_of(&body).await;
    assert_eq!(job["state"], "Done", "{job}\n{}", app.log());
    nodes.push(spare);
    let ready = eventually(Duration::from_secs(30), || async {
        volume_state(&app, "files").await == "Ready"
    })
    .await;
    assert!(ready, "{}", app.get("/volumes/files").await.1);
    // The recovery ran on the front's node (the rebuild copied from its
    // copy to the new node's, not through svs serve): the front stayed
    // where it was, at the same address.
    let (_, a) = app
        .get("/volumes/files/snapshots/top/attachments/host-1")
        .await;
    assert_eq!(uri(&a), moved_uri, "{}", app.log());
    assert_jobs_on_node_fronts(
        &app.log(),
        &[
            "the volume's front moves: its storage node can no longer run it",
            JOB_ON_NODE_FRONT,
        ],
    );
    check_files(&files);

    let now = copies(&app, "files").await;
    assert!(now.iter().all(|c| c.2 == "Healthy"), "{now:?}");
    let files_of: Vec<PathBuf> = now
        .iter()
        .map(|(copy, m, _)| copy_file(&nodes, m, &id, *copy))
        .collect();
    assert_copies_identical(&target, &files_of);
    let job = app
        .delete_and_wait("/volumes/files/snapshots/top/attachments/host-1")
        .await;
    assert_eq!(job["state"], "Done", "{job}\nagent log:\n{}", host.log());
    let left = host.leftovers();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A write that skips a copy is answered only once the control plane has
/// recorded the copy lost: with `svs serve` down, a copy's node killed, a
/// write through the front on another node waits (it is not answered on
/// the one copy left, which a later opening could not know is the only
/// one written); `svs serve` back, the node's report is taken, the write
/// is answered, the dead copy is recorded lost and the written bytes are on
/// the copies left.
#[tokio::test]
async fn a_write_that_skips_a_dead_copy_waits_until_the_control_plane_records_it() {
    let (mut app, mut nodes) = three_nodes(&[]).await;
    let id = app
        .create_volume_done(json!({"name": "v", "size": 1, "policy": "three"}))
        .await;
    let a = attach(&app, "v", "host-1", false).await;
    let uri = uri(&a);
    let front = front_node(&nodes, &uri).name;
    let out = qemu_io(&uri, &["write -P 0x11 0 1M".into()]);
    assert!(out.is_ok(), "{out:?}");
    let held = copies(&app, "v").await;
    let (dead_copy, dead_medium, _) = held
        .iter()
        .find(|(_, medium, _)| {
            nodes
                .iter()
                .any(|n| n.name != front && n.medium == medium.as_str())
        })
        .cloned()
        .expect("a copy on a node that is not the front's");

    app.pin_ports();
    app.kill();
    let dead = nodes
        .iter_mut()
        .find(|n| n.medium == dead_medium)
        .expect("the copy's node");
    dead.process.kill();
    let writer = {
        let uri = uri.clone();
        tokio::task::spawn_blocking(move || {
            qemu_io(
                &uri,
                &["write -P 0x22 0 64k".into(), "read -P 0x22 0 64k".into()],
            )
        })
    };
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        !writer.is_finished(),
        "a write that skipped a dead copy was answered while the control plane could not record \
         the loss: {:?}",
        writer.await
    );

    app.launch().expect("svs serve restarts");
    let out = tokio::time::timeout(Duration::from_secs(60), writer)
        .await
        .expect("the write is answered once the loss is recorded")
        .expect("qemu-io thread");
    let front_log = nodes
        .iter()
        .find(|n| n.name == front)
        .map(|n| n.process.log())
        .unwrap_or_default();
    assert!(out.is_ok(), "{out:?}\n{front_log}");
    let now = copies(&app, "v").await;
    for (copy, medium, health) in &now {
        if *medium == dead_medium {
            assert_ne!(health, "Healthy", "{now:?}");
            assert_eq!(*copy, dead_copy);
        } else {
            assert_eq!(health, "Healthy", "{now:?}");
            let file = copy_file(&nodes, medium, &id, *copy);
            assert_eq!(bytes_at(&file, 0, 65536), vec![0x22; 65536], "{medium}");
        }
    }
    assert_eq!(volume_state(&app, "v").await, "Degraded");
}

/// Snapshots, a rollback and a snapshot's deletion of a volume whose front
/// runs on a storage node run there (steered by `svs serve`, whose own I/O
/// never opens the volume): the front stays where it is for every job, the
/// snapshots hold what was written before them, and the rollback brings
/// every copy back to the first one's content.
#[tokio::test]
async fn snapshots_and_a_rollback_run_on_the_front_s_node() {
    let (app, nodes) = three_nodes(&[]).await;
    let id = app
        .create_volume_done(json!({"name": "v", "size": 1, "policy": "three"}))
        .await;
    let a = attach(&app, "v", "host-1", false).await;
    let live = uri(&a);
    let front = front_node(&nodes, &live);
    let write = |pattern: u8| {
        let out = qemu_io(&live, &[format!("write -P {pattern} 0 1M"), "flush".into()]);
        assert!(out.is_ok(), "{out:?}\n{}", front.process.log());
    };
    write(0x11);
    snapshot(&app, "v", "s1").await;
    write(0x22);
    snapshot(&app, "v", "s2").await;
    write(0x33);
    let (_, a) = app.get("/volumes/v/snapshots/top/attachments/host-1").await;
    assert_eq!(uri(&a), live, "the snapshots moved the front");

    // Read-only, for the rollback; the front opens on a node again.
    let job = app
        .delete_and_wait("/volumes/v/snapshots/top/attachments/host-1")
        .await;
    assert_eq!(job["state"], "Done", "{job}");
    let a = attach(&app, "v", "host-1", true).await;
    let readonly = uri(&a);
    front_node(&nodes, &readonly);
    let job = rollback_done(&app, "v", "s1").await;
    assert_eq!(
        crate::harness::last_detail(&job),
        "Volume 'v' rolled back to snapshot 's1'"
    );
    let out = crate::harness::attach::qemu_io_ro(&readonly, &["read -P 0x11 0 1M".into()]);
    assert!(out.is_ok(), "{out:?}");
    let job = app.delete_and_wait("/volumes/v/snapshots/s2").await;
    assert_eq!(job["state"], "Done", "{job}\n{}", app.log());
    let (_, a) = app.get("/volumes/v/snapshots/top/attachments/host-1").await;
    assert_eq!(uri(&a), readonly, "a job moved the front");

    let log = app.log();
    let steered = log.matches(JOB_ON_NODE_FRONT).count();
    assert!(steered >= 4, "{steered} jobs steered on the node:\n{log}");
    assert_jobs_on_node_fronts(&log, &[]);
    for (copy, medium, health) in copies(&app, "v").await {
        assert_eq!(health, "Healthy");
        let file = copy_file(&nodes, &medium, &id, copy);
        assert_eq!(bytes_at(&file, 0, 4096), vec![0x11; 4096], "{medium}");
        assert_eq!(bytes_at(&file, (1 << 20) - 4096, 4096), vec![0x11; 4096]);
    }
}

/// What `svs serve` logs when a clone's copy runs on a storage node.
const CLONE_ON_NODE: &str = "the clone's copy runs on the source's front on its storage node";

/// Clones of a volume whose copies are all on storage nodes copy node to
/// node: the copy runs on the source's front (on its node while attached;
/// a front opened for the job while not), into a front of the new volume
/// opened on the same node; `svs serve` never opens either volume. The
/// clone's copies hold the snapshot's bytes (not the source's later ones)
/// on the nodes' disks, the clone reads back through qemu-io, and the
/// fronts opened for the jobs close afterwards.
#[tokio::test]
async fn a_clone_copies_node_to_node_on_the_source_s_front() {
    let (app, nodes) = three_nodes(&[]).await;
    app.create_volume_done(json!({"name": "v", "size": 1, "policy": "three"}))
        .await;
    let a = attach(&app, "v", "host-1", false).await;
    let live = uri(&a);
    let out = qemu_io(
        &live,
        &[
            "write -P 0x11 0 1M".into(),
            "write -P 0x12 512M 1M".into(),
            "flush".into(),
        ],
    );
    assert!(out.is_ok(), "{out:?}");
    snapshot(&app, "v", "s1").await;
    let out = qemu_io(&live, &["write -P 0x22 0 1M".into(), "flush".into()]);
    assert!(out.is_ok(), "{out:?}");

    let clone = |name: &'static str| {
        app.create_volume_from(json!({"name": name, "size": 1, "policy": "three",
                                      "contentvolume": "v", "contentsnapshot": "s1"}))
    };
    let check = |id: String, name: &'static str| {
        let app = &app;
        let nodes = &nodes;
        async move {
            for (copy, medium, health) in copies(app, name).await {
                assert_eq!(health, "Healthy");
                let file = copy_file(nodes, &medium, &id, copy);
                assert_eq!(bytes_at(&file, 0, 4096), vec![0x11; 4096], "{medium}");
                assert_eq!(bytes_at(&file, 512 << 20, 4096), vec![0x12; 4096]);
            }
        }
    };
    let copied = "(2097152 bytes of data copied)";

    // The source attached: its front stays where it is.
    let (id, job) = clone("c1").await;
    assert_eq!(job["state"], "Done", "{job}\n{}", app.log());
    assert!(crate::harness::last_detail(&job).ends_with(copied), "{job}");
    let (_, a) = app.get("/volumes/v/snapshots/top/attachments/host-1").await;
    assert_eq!(uri(&a), live, "the clone moved the source's front");
    check(id, "c1").await;

    // The source detached: a front opens for the job.
    let job = app
        .delete_and_wait("/volumes/v/snapshots/top/attachments/host-1")
        .await;
    assert_eq!(job["state"], "Done", "{job}");
    let (id, job) = clone("c2").await;
    assert_eq!(job["state"], "Done", "{job}\n{}", app.log());
    assert!(crate::harness::last_detail(&job).ends_with(copied), "{job}");
    check(id, "c2").await;

    let log = app.log();
    assert_eq!(log.matches(CLONE_ON_NODE).count(), 2, "{log}");
    assert_jobs_on_node_fronts(&log, &[]);
    let closed = eventually(Duration::from_secs(20), || async {
        app.log()
            .matches("the volume's front on a storage node closes: no job works on it")
            .count()
            >= 3
    })
    .await;
    assert!(closed, "the job fronts stay open:\n{}", app.log());

    let a = attach(&app, "c2", "host-1", false).await;
    let out = qemu_io(
        &uri(&a),
        &[
            "read -P 0x11 0 1M".into(),
            "read -P 0x12 512M 1M".into(),
            "read -P 0 1M 1M".into(),
        ],
    );
    assert!(out.is_ok(), "{out:?}");
}

/// A mirrored volume with a snapshot, its copies on storage nodes: a node
/// is SIGKILLed, and the recovery rebuilds its copy on a fourth node, live,
/// on the volume's front, snapshot files and all (before, a slice with
/// snapshots could not be copied to a node). The rebuilt copy's snapshot
/// files equal a healthy copy's; a rollback to the snapshot afterwards
/// brings every copy back to the snapshot's bytes, the rebuilt one from
/// its own copied snapshot.
#[tokio::test]
async fn a_copy_with_snapshots_is_rebuilt_on_another_node_with_them() {
    let (app, mut nodes) = three_nodes(&[]).await;
    let id = app
        .create_volume_done(json!({"name": "v", "size": 1, "policy": "three"}))
        .await;
    let a = attach(&app, "v", "host-1", false).await;
    let live = uri(&a);
    let out = qemu_io(&live, &["write -P 0x11 0 2M".into(), "flush".into()]);
    assert!(out.is_ok(), "{out:?}");
    snapshot(&app, "v", "s1").await;
    // Saved into the snapshot on every copy.
    let out = qemu_io(&live, &["write -P 0x22 0 1M".into(), "flush".into()]);
    assert!(out.is_ok(), "{out:?}");

    let front = front_node(&nodes, &live).name;
    let victim = nodes
        .iter_mut()
        .find(|n| n.name != front)
        .expect("a node that is not the front's");
    let lost_medium = victim.medium;
    victim.process.kill();
    let out = qemu_io(&live, &["write -P 0x33 1M 64k".into(), "flush".into()]);
    assert!(out.is_ok(), "{out:?}");
    let degraded = eventually(TIMEOUT + MARGIN, || async {
        volume_state(&app, "v").await == "Degraded"
    })
    .await;
    assert!(degraded, "{}", app.get("/volumes/v").await.1);

    let spare = start_node(&app, "sn-4", "127.0.0.5", "z4", "d1").await;
    wait_served(&app, &["d1"]).await;
    let (status, body) = app.post("/volumes/v/recover", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job = app.wait_job_of(&body).await;
    nodes.push(spare);
    assert_eq!(job["state"], "Done", "{job}\n{}", app.log());
    let ready = eventually(Duration::from_secs(30), || async {
        volume_state(&app, "v").await == "Ready"
    })
    .await;
    assert!(ready, "{}", app.get("/volumes/v").await.1);
    assert_jobs_on_node_fronts(&app.log(), &[JOB_ON_NODE_FRONT]);

    let now = copies(&app, "v").await;
    assert!(!now.iter().any(|c| c.1 == lost_medium), "{now:?}");
    let dir_of = |medium: &str| {
        copy_file(&nodes, medium, &id, 0)
            .parent()
            .expect("the volume's directory")
            .to_path_buf()
    };
    let (rebuilt_copy, _, _) = now.iter().find(|c| c.1 == "d1").expect("a copy on d1");
    let rebuilt = snapshot_files(&dir_of("d1"), *rebuilt_copy);
    assert_eq!(
        rebuilt.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(),
        ["delta", "map"],
        "the rebuilt copy's snapshot files"
    );
    for (copy, medium, health) in &now {
        assert_eq!(health, "Healthy", "{now:?}");
        if medium != "d1" {
            assert_eq!(snapshot_files(&dir_of(medium), *copy), rebuilt, "{medium}");
        }
    }

    // Rolled back (detached), every copy holds the snapshot's bytes again.
    let job = app
        .delete_and_wait("/volumes/v/snapshots/top/attachments/host-1")
        .await;
    assert_eq!(job["state"], "Done", "{job}");
    rollback_done(&app, "v", "s1").await;
    for (copy, medium, _) in copies(&app, "v").await {
        let file = copy_file(&nodes, &medium, &id, copy);
        for at in [0, 1 << 20, (2 << 20) - 4096] {
            assert_eq!(
                bytes_at(&file, at, 4096),
                vec![0x11; 4096],
                "{medium} at {at}"
            );
        }
    }
}
