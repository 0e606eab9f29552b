//! A filesystem mounted by the host agent on a volume whose three copies
//! are on three storage nodes (issue 21): the real `svs serve`, `svs
//! agent` (host-1, FUSE file, loop device, ext4 mount) and `svs
//! storage-node` processes on 127.0.0.2..127.0.0.5. One node is SIGKILLed
//! while files are written through the mount.

use crate::harness::host_agent::{
    assert_copies_identical, attach_mounted, check_files, issue_credential, wait_host, Writer,
};
use crate::harness::host_side::HostSide;
use crate::harness::storage_nodes::{
    copies, eventually, start_node, volume_state, wait_served, wait_written, MARGIN, TIMEOUT,
};
use crate::harness::{medium, TestApp, TestConfig};
use reqwest::StatusCode;
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

/// A file volume (ext4) with three copies, one on each of three storage
/// nodes (one medium each), mounted by host-1's agent. Files are written
/// and fsynced one after the other; one node is SIGKILLed meanwhile: the
/// writer sees no error, the volume is Degraded with that copy Lost, and
/// every file reads back. A fourth node joins and a recovery rebuilds the
/// copy there: the volume is Ready and the three copies' files are
/// identical (the filesystem frozen while they are compared). Remounted
/// (detach, attach: nothing left in the page cache), every file still
/// reads back; detached, nothing is left mounted.
#[tokio::test]
async fn a_mounted_filesystem_on_three_storage_nodes_survives_the_loss_of_one() {
    let app = TestApp::start_with(TestConfig {
        // Too small for the volume: its copies go to the storage nodes.
        media: vec![medium("m1", "host-0", "z0", 1)],
        settings: vec![
            format!("storage_node_timeout = \"{}s\"", TIMEOUT.as_secs()),
            "media_check_period = \"1h\"".into(),
            "agent_wait_secs = 60".into(),
        ],
        ..TestConfig::default()
    })
    .await;
    let mut nodes = vec![
        start_node(&app, "sn-1", "127.0.0.2", "z1", "a1").await,
        start_node(&app, "sn-2", "127.0.0.3", "z2", "b1").await,
        start_node(&app, "sn-3", "127.0.0.4", "z3", "c1").await,
    ];
    wait_served(&app, &["a1", "b1", "c1"]).await;
    // Three copies (1 + the media resiliency), on three distinct nodes.
    app.create_policy("three", 2, 1, 0).await;
    let id = app
        .create_volume_done(json!({"name": "files", "type": "file", "size": 2, "policy": "three"}))
        .await;
    let placed: Vec<String> = copies(&app, "files")
        .await
        .into_iter()
        .map(|(_, m, _)| m)
        .collect();
    let mut sorted = placed.clone();
    sorted.sort();
    assert_eq!(sorted, ["a1", "b1", "c1"], "{placed:?}");

    let (status, body) = app
        .post(
            "/nodes",
            json!({"name": "host-1", "address": "127.0.0.1", "zone": "z0"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let mut host = HostSide::new();
    issue_credential(&app, &host).await;
    host.start_agent(&app);
    let (target, _) = attach_mounted(&app, &host, "files").await;

    // SIGKILL the node of copy 1 while files are written and fsynced.
    let writer = Writer::start(&target, "w");
    wait_written(&writer, 0, 5, &host, &app).await;
    let lost = placed[1].clone();
    let victim = nodes
        .iter_mut()
        .find(|n| n.medium == lost)
        .expect("the node of copy 1");
    victim.process.kill();
    let victim = victim.name;
    let at_kill = writer.count();
    wait_written(&writer, at_kill, 20, &host, &app).await;
    let degraded = eventually(TIMEOUT + MARGIN, || async {
        volume_state(&app, "files").await == "Degraded"
    })
    .await;
    assert!(degraded, "{}", app.get("/volumes/files").await.1);
    let now = copies(&app, "files").await;
    assert_eq!(
        now.iter().map(|(_, _, h)| h.as_str()).collect::<Vec<_>>(),
        ["Healthy", "Lost", "Healthy"],
        "{now:?}"
    );
    let files = writer.finish();
    assert!(files.len() >= at_kill + 20, "{}", files.len());
    check_files(&files);

    // A fourth node joins; the recovery rebuilds the lost copy there.
    let spare = start_node(&app, "sn-4", "127.0.0.5", "z4", "d1").await;
    wait_served(&app, &["d1"]).await;
    let (status, body) = app.post("/volumes/files/recover", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["Message"], "Volume recovery started", "{body}");
    let job = app.wait_job_of(&body).await;
    assert_eq!(job["state"], "Done", "{job}\n{}", app.log());
    let ready = eventually(Duration::from_secs(30), || async {
        volume_state(&app, "files").await == "Ready"
    })
    .await;
    assert!(ready, "{}", app.get("/volumes/files").await.1);
    let now = copies(&app, "files").await;
    let expected: Vec<(u64, String, String)> = placed
        .iter()
        .enumerate()
        .map(|(copy, m)| {
            let m = if *m == lost { "d1" } else { m.as_str() };
            (copy as u64, m.to_string(), "Healthy".to_string())
        })
        .collect();
    assert_eq!(now, expected, "copy {lost} of {victim} rebuilt on d1");
    nodes.push(spare);

    // The three copies hold the same bytes: compared with the filesystem
    // frozen (flushed, no write in flight).
    let files_of: Vec<PathBuf> = now
        .iter()
        .map(|(copy, m, _)| {
            let node = nodes
                .iter()
                .find(|n| n.medium == m.as_str())
                .expect("the node of a copy");
            node.process
                .medium_dir(m)
                .join(&id)
                .join(format!("c{copy}-k0.slice"))
        })
        .collect();
    assert_copies_identical(&target, &files_of);

    // Remounted, the files are read from the volume again, not from the
    // page cache of the first mount.
    let job = app
        .delete_and_wait("/volumes/files/snapshots/top/attachments/host-1")
        .await;
    assert_eq!(job["state"], "Done", "{job}\nagent log:\n{}", host.log());
    assert!(host.leftovers().is_empty(), "{:?}", host.leftovers());
    let (status, body) = app
        .post(
            "/volumes/files/snapshots/top/attachments",
            json!({"node": "host-1", "mountpoint": target.to_string_lossy()}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_host(&app, &host, "files", |a| a["hoststate"] == "Mounted").await;
    check_files(&files);
    let job = app
        .delete_and_wait("/volumes/files/snapshots/top/attachments/host-1")
        .await;
    assert_eq!(job["state"], "Done", "{job}\nagent log:\n{}", host.log());
    let left = host.leftovers();
    assert!(left.is_empty(), "left behind: {left:?}");
}
