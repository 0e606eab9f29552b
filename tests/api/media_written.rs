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
