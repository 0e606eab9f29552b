//! Issue 49: a volume names every zone its copies are in (`zones`) and the
//! bytes of data written to it (`writtenbytes`); media and nodes give what
//! their snapshots hold in bytes (`snapshotbytes`), the sum of the
//! snapshots' `used`, so every page shows one figure for it.

use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::io::{Seek, SeekFrom, Write};

const MIB: u64 = 1024 * 1024;

async fn get(app: &TestApp, path: &str) -> Value {
    let (status, body) = app.get(path).await;
    assert_eq!(status, StatusCode::OK, "{path}: {body}");
    body
}

fn two_zones() -> TestConfig {
    TestConfig {
        media: vec![medium("m1", "n1", "z1", 40), medium("m2", "n2", "z2", 40)],
        ..TestConfig::default()
    }
}

#[tokio::test]
async fn a_mirrored_volume_names_both_zones_and_the_data_written_to_it() {
    let app = TestApp::start_with(two_zones()).await;
    app.create_policy("mirror", 1, 1, 0).await;
    let (id, job) = app.create_volume("mir", 4, "mirror").await;
    assert_eq!(job["state"], "Done", "{job}");
    let v = get(&app, "/volumes/mir").await;
    assert_eq!(v["zones"], json!(["z1", "z2"]), "{v}");
    assert_eq!(v["writtenbytes"], 0, "{v}");
    // The API's `zone` stays the first slice's.
    let first = app.slices("mir").await.remove(0);
    assert_eq!(v["zone"], first["zone"], "{v}");

    // 3 MiB of data in copy 0 (as a write through NBD would leave it): the
    // volume holds 3 MiB, once, whatever its other copy holds.
    let path = app.slice_path(first["media"].as_str().expect("media"), &id, 0, 0);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("slice file");
    file.seek(SeekFrom::Start(8 * MIB)).expect("seek");
    file.write_all(&vec![0xab; 3 * MIB as usize])
        .expect("write");
    drop(file);
    assert_eq!(get(&app, "/volumes/mir").await["writtenbytes"], 3 * MIB);
    let listed = get(&app, "/volumes").await;
    assert_eq!(listed[0]["zones"], json!(["z1", "z2"]), "{listed}");
    assert_eq!(listed[0]["writtenbytes"], 3 * MIB, "{listed}");
}

#[tokio::test]
async fn media_and_nodes_hold_exactly_the_bytes_of_their_snapshots() {
    let app = TestApp::start_with(two_zones()).await;
    app.create_policy("mirror", 1, 1, 0).await;
    let (_, job) = app.create_volume("v", 4, "mirror").await;
    assert_eq!(job["state"], "Done", "{job}");
    let (status, started) = app
        .post(
            "/volumes/v/snapshots",
            json!({"name": "s1", "consistency": "crash"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let done = app
        .wait_job(started["JobID"].as_str().expect("JobID"))
        .await;
    assert_eq!(done["state"], "Done", "{done}");
    let used = get(&app, "/volumes/v/snapshots/s1").await["used"]
        .as_u64()
        .expect("used");
    assert!(used > 0, "an empty snapshot still holds its maps");
    let (m1, m2) = (get(&app, "/media/m1").await, get(&app, "/media/m2").await);
    let bytes = |x: &Value| x["snapshotbytes"].as_u64().expect("snapshotbytes");
    // Each copy's half on its medium; together the snapshot's `used`.
    assert_eq!(bytes(&m1) + bytes(&m2), used, "{m1} {m2}");
    assert_eq!(
        (&m1["snapshotsize"], &m1["allocatedsize"]),
        (&json!(1), &json!(4)),
        "{m1}"
    );
    assert_eq!(bytes(&get(&app, "/nodes/n1").await), bytes(&m1));
    assert_eq!(bytes(&get(&app, "/nodes/n2").await), bytes(&m2));
}
