//! Copies to storage nodes that survive a restart (issue 21): a rebuild
//! onto a node's medium, throttled by `movement_rate`, is interrupted by a
//! SIGKILL of `svs serve` after a checkpoint was recorded; started again
//! on the same data directory, the job resumes from its checkpoint on the
//! node's slice (kept, not made again) and the copies end identical. Real
//! `svs serve`, real `svs storage-node` processes on 127.0.0.2-4, qemu-io
//! over NBD.

use crate::harness::storage_nodes::{
    eventually, node_with_credential, storage_nodes_config, wait_served, StorageNodeProcess,
};
use crate::harness::{details, TestApp, TestConfig};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_rebuild_onto_a_node_resumes_from_its_checkpoint_after_svs_is_killed() {
    // 32 MiB to rebuild at 4 MiB/s, a checkpoint every 4 MiB: about 8 s.
    let mut app = TestApp::start_with(TestConfig {
        movement_rate: "4 MiB".into(),
        ..storage_nodes_config(&["movement_checkpoint = \"4 MiB\""])
    })
    .await;
    // The nodes heartbeat to this address: the restarted service keeps it.
    app.pin_ports();
    let mut nodes: Vec<(&str, StorageNodeProcess)> = Vec::new();
    for (i, (name, ip, medium)) in [
        ("sn-1", "127.0.0.2", "a1"),
        ("sn-2", "127.0.0.3", "b1"),
        ("sn-3", "127.0.0.4", "c1"),
    ]
    .into_iter()
    .enumerate()
    {
        let credential =
            node_with_credential(&app, name, ip, &format!("z{}", i + 1), "storage").await;
        let mut process = StorageNodeProcess::new(&app, name, ip, &[(medium, 4)], &credential);
        process.start();
        nodes.push((medium, process));
    }
    wait_served(&app, &["a1", "b1", "c1"]).await;
    app.create_policy("mirror", 1, 1, 0).await;
    let (id, _) = app.create_volume("data", 2, "mirror").await;
    let media_of = |slices: &[Value]| -> Vec<String> {
        slices
            .iter()
            .map(|s| s["media"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let on = media_of(&app.slices("data").await);
    let dirs: Vec<(&str, PathBuf)> = nodes.iter().map(|(m, p)| (*m, p.medium_dir(m))).collect();
    let file_of = |medium: &str, copy: u64| {
        let (_, dir) = dirs
            .iter()
            .find(|(m, _)| *m == medium)
            .expect("node of medium");
        dir.join(&id).join(format!("c{copy}-k0.slice"))
    };
    let (status, body) = app
        .patch("/nodes/host-0", json!({"address": "127.0.0.1"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let a = crate::harness::attach::attach(&app, "data", "host-0", false).await;
    let uri = crate::harness::attach::uri(&a);
    crate::harness::attach::qemu_io(&uri, &["write -P 0x11 0 32M".into(), "flush".into()])
        .expect("write");

    // The node of copy 0 dies for good: its copy is rebuilt on the third.
    let lost = on[0].clone();
    nodes
        .iter_mut()
        .find(|(m, _)| *m == lost)
        .expect("node")
        .1
        .kill();
    crate::harness::attach::qemu_io(&uri, &["write -P 0x22 4M 2M".into(), "flush".into()])
        .expect("writes go on with one copy");
    let degraded = eventually(Duration::from_secs(30), || async {
        app.get("/volumes/data").await.1["state"] == "Degraded"
    })
    .await;
    assert!(degraded, "{}", app.get("/volumes/data").await.1);
    let (status, body) = app.post("/volumes/data/recover", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job_id = body["JobID"].as_str().unwrap_or_default().to_string();

    // Past the first checkpoints (progress counts 0..90 over the copy).
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (_, job) = app.get(&format!("/jobs/{job_id}")).await;
        if job["progress"].as_u64().unwrap_or(0) >= 40 {
            break;
        }
        assert!(
            job["state"] == "Running" || job["state"] == "Pending",
            "{job}\n{}",
            app.log()
        );
        assert!(Instant::now() < deadline, "no progress: {job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A write while the copy runs, behind its cursor.
    crate::harness::attach::qemu_io(&uri, &["write -P 0x33 1M 1M".into(), "flush".into()])
        .expect("a write during the rebuild");
    app.kill();
    app.launch().expect("svs serve restarts after SIGKILL");
    // The pooled connections went with the killed process.
    app.client = reqwest::Client::builder()
        .pool_idle_timeout(Duration::from_secs(20))
        .build()
        .expect("HTTP client");
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}\n{}", app.log());
    let details = details(&job);
    let resumed = details
        .iter()
        .find(|d| d.starts_with("Resuming the copy of slice c0-k0 on "))
        .unwrap_or_else(|| panic!("no resume: {details:?}\n{}", app.log()));
    let at: u64 = resumed
        .split_once("from its checkpoint at byte ")
        .and_then(|(_, rest)| rest.split_once(' '))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no checkpoint in: {resumed}"));
    assert!(at > 0, "{resumed}");
    assert!(
        details
            .iter()
            .any(|d| d.contains(&format!("resumed from the checkpoint at byte {at}"))),
        "{details:?}"
    );

    // Generous: under load a node may miss a heartbeat of the restarted
    // service and come back through a recovery of its own.
    let ready = eventually(Duration::from_secs(120), || async {
        app.get("/volumes/data").await.1["state"] == "Ready"
    })
    .await;
    assert!(
        ready,
        "{}\n{:?}\n{}",
        app.get("/volumes/data").await.1,
        app.slices("data").await,
        app.log()
    );
    let now = media_of(&app.slices("data").await);
    assert!(!now.contains(&lost), "{now:?}");
    let first = std::fs::read(file_of(&now[0], 0)).expect("copy 0");
    let second = std::fs::read(file_of(&now[1], 1)).expect("copy 1");
    assert_eq!(first.len(), second.len());
    assert!(
        first == second,
        "the copies differ after the resumed rebuild"
    );
    let (_, a) = app
        .get("/volumes/data/snapshots/top/attachments/host-0")
        .await;
    let uri = crate::harness::attach::uri(&a);
    let out = crate::harness::attach::qemu_io(
        &uri,
        &[
            "read -P 0x11 0 1M".into(),
            "read -P 0x33 1M 1M".into(),
            "read -P 0x11 2M 2M".into(),
            "read -P 0x22 4M 2M".into(),
            "read -P 0x11 6M 26M".into(),
        ],
    )
    .expect("every acknowledged write reads back");
    assert!(!out.contains("Pattern verification failed"), "{out}");
}
