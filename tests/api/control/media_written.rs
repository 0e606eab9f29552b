//! `writtenbytes` of media: what their disks really hold, beside what is
//! allocated on them (issue 27: the console's "used" meant allocated).

use crate::harness::*;
use reqwest::StatusCode;
use serde_json::json;

const MIB: u64 = 1024 * 1024;

async fn written(app: &TestApp, medium: &str) -> Option<u64> {
    let (status, body) = app.get(&format!("/media/{medium}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["writtenbytes"].as_u64()
}

#[tokio::test]
async fn media_show_the_bytes_written_on_them_beside_what_is_allocated() {
    let app = TestApp::start_with(TestConfig {
        media: vec![medium("m1", "n1", "z1", 20), medium("m2", "n2", "z2", 20)],
        ..TestConfig::default()
    })
    .await;
    app.create_policy("none", 0, 0, 0).await;
    let (id, job) = app.create_volume("v", 4, "none").await;
    assert_eq!(job["state"], "Done", "{job}");
    let slice = app.slices("v").await.remove(0);
    let on = slice["media"].as_str().expect("media").to_string();
    let other = if on == "m1" { "m2" } else { "m1" };

    // A new volume is allocated in full but its sparse slice holds nothing.
    let (_, media) = app.get("/media").await;
    let m = media
        .as_array()
        .and_then(|list| list.iter().find(|m| m["mediaid"] == on.as_str()))
        .expect("the volume's medium");
    assert_eq!(
        (&m["size"], &m["freesize"]),
        (&json!(20), &json!(16)),
        "{m}"
    );
    assert!(written(&app, &on).await.expect("measured") < MIB);

    // 8 MiB written into the slice: the medium holds them, the other none.
    write_at(
        &app.slice_file(&id, &slice),
        0,
        &pattern(7, 8 * MIB as usize),
    );
    let bytes = written(&app, &on).await.expect("measured");
    assert!((8 * MIB..9 * MIB).contains(&bytes), "{bytes}");
    assert_eq!(written(&app, other).await, Some(0));
    // The list says the same as the medium's own answer.
    let (_, media) = app.get("/media").await;
    assert!(media
        .as_array()
        .expect("list")
        .iter()
        .any(|m| m["mediaid"] == on.as_str() && m["writtenbytes"] == bytes));

    // A failed medium is not read: no figure rather than a stale one.
    let (status, body) = app
        .patch(&format!("/media/{on}"), json!({"state": "Failed"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.get("writtenbytes").is_none(), "{body}");
    assert_eq!(written(&app, &on).await, None);
}

/// The WRITTEN cell of `medium`'s row in `svs media list`'s table (the
/// text under the header, up to the next column).
fn written_cell(table: &str, medium: &str) -> String {
    let mut lines = table.lines();
    let header = lines.next().expect("header line");
    let from = header.find("WRITTEN").expect("WRITTEN column");
    let to = header.find("VOLUMES").expect("VOLUMES column");
    let row = lines
        .find(|l| l.split_whitespace().next() == Some(medium))
        .unwrap_or_else(|| panic!("no row of {medium}:\n{table}"));
    row.chars()
        .skip(from)
        .take(to - from)
        .collect::<String>()
        .trim()
        .to_string()
}

/// A storage node's medium shows what is written on it too (issue 49:
/// the walk-through's `svs media list` had an empty WRITTEN column for
/// them): the service asks the node, over the slice protocol, for its
/// count of each slice's bytes.
#[tokio::test]
async fn a_storage_node_s_medium_shows_the_bytes_written_on_it() {
    use crate::harness::storage_nodes::{
        node_with_credential, start_for_storage_nodes, wait_served, StorageNodeProcess,
    };
    let app = start_for_storage_nodes().await;
    let credential = node_with_credential(&app, "sn-w", "127.0.0.2", "z1", "storage").await;
    let mut node = StorageNodeProcess::new(&app, "sn-w", "127.0.0.2", &[("w1", 4)], &credential);
    node.start();
    wait_served(&app, &["w1"]).await;
    // Too large for the service's own 1 GiB medium: the node's holds it.
    app.create_policy("none", 0, 0, 0).await;
    let (_, job) = app.create_volume("v", 2, "none").await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(app.slices("v").await[0]["media"], "w1");
    assert!(written(&app, "w1").await.expect("measured") < MIB);

    let (status, body) = app
        .patch("/nodes/host-0", json!({"address": "127.0.0.1"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let a = crate::harness::attach::attach(&app, "v", "host-0", false).await;
    crate::harness::attach::qemu_io(
        &crate::harness::attach::uri(&a),
        &["write -P 0x5a 0 4M".into(), "flush".into()],
    )
    .expect("write");

    let bytes = written(&app, "w1").await.expect("measured");
    assert!((4 * MIB..5 * MIB).contains(&bytes), "{bytes}");
    let (_, media) = app.get("/media").await;
    let listed = media
        .as_array()
        .and_then(|list| list.iter().find(|m| m["mediaid"] == "w1"))
        .unwrap_or_else(|| panic!("w1 listed: {media}"));
    assert_eq!(
        (&listed["managedby"], &listed["writtenbytes"]),
        (&json!("node"), &json!(bytes)),
        "{listed}"
    );
    assert_eq!(written(&app, "m1").await, Some(0));

    let home = crate::harness::cli::Home::new(false);
    home.login(&app);
    let table = home.ok(&["media", "list"]);
    assert_eq!(
        written_cell(&table, "w1"),
        svs_domain::units::human_bytes(bytes),
        "{table}"
    );
    assert_eq!(written_cell(&table, "m1"), "0 B", "{table}");
}
