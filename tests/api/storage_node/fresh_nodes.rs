//! A medium that `GET /media` lists is usable by the next job, on every
//! instance: storage nodes are started and a mirrored volume is created
//! on them the moment their media are listed, twenty times, with the
//! embedded store and with two instances on PostgreSQL (nodes registering
//! with one, volumes created through the other).

use crate::harness::instances::cluster_config;
use crate::harness::storage_nodes::{
    node_with_credential, storage_nodes_config, StorageNodeProcess,
};
use crate::harness::{TestApp, TestConfig};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use svs_store::test_postgres::TestDatabase;

/// Heartbeats every 10 s: a medium a first registration listed is not
/// reached by a later heartbeat before the volume's job runs.
const SLOW_HEARTBEATS: &str = "storage_node_timeout = \"30s\"";

/// `config` with [`SLOW_HEARTBEATS`] for its nodes' timeout.
fn slow_heartbeats(mut config: TestConfig) -> TestConfig {
    config
        .settings
        .retain(|s| !s.starts_with("storage_node_timeout"));
    config.settings.push(SLOW_HEARTBEATS.into());
    config
}

/// Waits until `GET /media/{id}` knows each of `media` (polling every
/// 10 ms, as a script would).
async fn listed(app: &TestApp, media: &[String]) {
    let start = Instant::now();
    for m in media {
        loop {
            let (status, body) = app.get(&format!("/media/{m}")).await;
            if status == StatusCode::OK {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "medium {m} never listed: {body}\n{}",
                app.log()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Twenty rounds: two new storage nodes (zone `z<i>`, media larger than
/// any before so that the volume goes on them) registered through
/// `register`, then at once a mirrored volume created through `create`.
async fn twenty_rounds(register: &TestApp, create: &TestApp) {
    create.create_policy("mirror", 1, 1, 0).await;
    let mut nodes = Vec::new();
    for i in 0..20u64 {
        let zone = format!("z{i}");
        let mut media = Vec::new();
        for (side, ip) in [("a", "127.0.0.2"), ("b", "127.0.0.3")] {
            let name = format!("fresh{i}{side}");
            let medium = format!("{name}-d0");
            let credential = node_with_credential(register, &name, ip, &zone, "storage").await;
            let mut node =
                StorageNodeProcess::new(register, &name, ip, &[(&medium, 4 + i)], &credential);
            node.start();
            nodes.push(node);
            media.push(medium);
        }
        listed(register, &media).await;
        let (_, job) = create
            .create_volume_from(json!({
                "name": format!("bvol{i}"), "type": "block", "size": 1,
                "policy": "mirror", "zone": zone,
            }))
            .await;
        assert_eq!(
            job["state"],
            "Done",
            "round {i}: {job}\ncreate's log:\n{}",
            create.log()
        );
        let mut on: Vec<String> = create
            .slices(&format!("bvol{i}"))
            .await
            .iter()
            .map(|s: &Value| s["media"].as_str().unwrap_or_default().to_string())
            .collect();
        on.sort();
        assert_eq!(on, media, "round {i}");
    }
}

#[tokio::test]
async fn a_volume_created_the_moment_new_storage_nodes_media_are_listed_is_created() {
    let app = TestApp::start_with(slow_heartbeats(storage_nodes_config(&[]))).await;
    twenty_rounds(&app, &app).await;
}

#[tokio::test]
async fn on_two_instances_a_volume_created_through_one_the_moment_nodes_registered_with_the_other_is_created(
) {
    let db = TestDatabase::new().await;
    let registering = TestApp::start_with(slow_heartbeats(cluster_config(&db.url))).await;
    let creating = TestApp::start_with(slow_heartbeats(cluster_config(&db.url))).await;
    twenty_rounds(&registering, &creating).await;
}
