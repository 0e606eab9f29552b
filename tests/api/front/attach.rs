//! Attachments and volume I/O through real NBD clients (`qemu-io`,
//! `qemu-img` from Debian's qemu-utils) against the real `svs serve`.

use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::harness::attach::*;
use std::time::{Duration, Instant};

/// A 4 GiB mirrored volume "v" attached read-write to host-1.
async fn attached_v() -> (TestApp, Value) {
    let app = TestApp::start_with(topology("0")).await;
    app.create_policy("mirror", 1, 1, 0).await;
    app.create_volume("v", 4, "mirror").await;
    let a = attach(&app, "v", "host-1", false).await;
    (app, a)
}

#[tokio::test]
async fn an_attached_volume_serves_its_bytes_over_nbd_on_every_copy() {
    let app = TestApp::start_with(TestConfig {
        media: vec![
            medium("a1", "n1", "z1", 1),
            medium("a2", "n1", "z1", 1),
            medium("b1", "n2", "z2", 1),
            medium("b2", "n2", "z2", 1),
        ],
        nodes: vec![("host-1", "127.0.0.1")],
        ..TestConfig::default()
    })
    .await;
    app.create_policy("mirror", 1, 1, 0).await;
    // 2 GiB with two copies: no medium has room, so 2 columns × 2 copies.
    let (id, job) = app.create_volume("striped", 2, "mirror").await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(app.slices("striped").await.len(), 4);
    let a = attach(&app, "striped", "host-1", false).await;
    assert_eq!(a["state"], "Attached");
    assert_eq!(a["readonly"], false);
    assert_eq!(a["mountpoint"], "/mnt/data");
    assert_eq!(a["snapshotname"], "top");
    let export = a["exportname"].as_str().unwrap_or_default();
    assert_eq!(export.len(), 32, "an unguessable export name: {a}");
    assert_eq!(uri(&a), format!("{}/{export}", app.nbd_base));

    // Write patterns through NBD, and the same into a reference file.
    let reference = app.dir.path().join("reference.img");
    let file = std::fs::File::create(&reference).expect("reference");
    file.set_len(2 * GIB).expect("reference size");
    let mut commands = Vec::new();
    for (i, off) in offsets().into_iter().enumerate() {
        let p = 0x11 + i as u64;
        commands.push(format!("write -P {p} {off} 64k"));
        write_at(&reference, off, &vec![p as u8; 64 * 1024]);
    }
    commands.push("flush".into());
    for (i, off) in offsets().into_iter().enumerate() {
        commands.push(format!("read -P {} {off} 64k", 0x11 + i as u64));
    }
    qemu_io(&uri(&a), &commands).expect("writes and reads back");
    let compare = qemu_img(&[
        "compare",
        "-f",
        "raw",
        "-F",
        "raw",
        &uri(&a),
        &reference.display().to_string(),
    ]);
    assert!(compare.is_ok(), "{compare:?}");

    // Both copies of a column hold the bytes: stripe 1 is column 1.
    let slices = app.slices("striped").await;
    for copy in 0..2u64 {
        let row = slices
            .iter()
            .find(|s| s["copy"] == copy && s["column"] == 1)
            .expect("column 1");
        let path = app.slice_path(row["media"].as_str().unwrap_or_default(), &id, copy, 1);
        // Logical [1 MiB, 1 MiB + 60 KiB) is at the start of column 1.
        assert_eq!(read_at(&path, 0, 1024), vec![0x12u8; 1024], "copy {copy}");
    }
    let info = qemu_img(&["info", "-f", "raw", &uri(&a)]).expect("info");
    assert!(info.contains("2 GiB"), "{info}");
}

#[tokio::test]
async fn a_read_only_attachment_refuses_writes_and_only_its_node_may_connect() {
    let (app, rw) = attached_v().await;
    qemu_io(&uri(&rw), &["write -P 7 0 4k".into()]).expect("host-1 writes");

    // host-2 connects from 127.0.0.2, not from here: its export is refused.
    let other = attach(&app, "v", "host-2", true).await;
    let err = qemu_io(&uri(&other), &["read 0 4k".into()]).unwrap_err();
    assert!(
        err.contains("not available") || err.contains("can't open"),
        "{err}"
    );

    // A read-only attachment for host-1 itself.
    let (status, body) = app
        .delete("/volumes/v/snapshots/top/attachments/host-1")
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    app.wait_job_of(&body).await;
    let ro = attach(&app, "v", "host-1", true).await;
    assert_ne!(
        ro["exportname"], rw["exportname"],
        "a new attachment gets a new export"
    );
    let err = qemu_io(&uri(&ro), &["write -P 8 0 4k".into()]).unwrap_err();
    assert!(
        err.contains("Permission denied") || err.contains("read-only"),
        "{err}"
    );
    qemu_io_ro(&uri(&ro), &["read -P 7 0 4k".into()]).expect("reads still work");
    // The old export is gone.
    assert!(qemu_io(&uri(&rw), &["read 0 4k".into()]).is_err());
}

#[tokio::test]
async fn attachments_are_listed_and_modified_and_deleting_an_attached_volume_needs_force() {
    let app = TestApp::start_with(topology("0")).await;
    app.create_policy("mirror", 1, 1, 0).await;
    let (id, _) = app.create_volume("v", 4, "mirror").await;
    attach(&app, "v", "host-1", false).await;
    for path in [
        "/attachments",
        "/volumes/v/attachments",
        "/volumes/v/snapshots/top/attachments",
    ] {
        let (status, list) = app.get(path).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(list.as_array().map(Vec::len), Some(1), "{path}: {list}");
        assert_eq!(list[0]["volumeid"], id.as_str());
    }
    let (status, _) = app.get("/volumes/v/snapshots/snap1/attachments").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, err) = app
        .post(
            "/volumes/v/snapshots/top/attachments",
            json!({"node": "host-1"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{err}");
    let (status, err) = app
        .post(
            "/volumes/v/snapshots/top/attachments",
            json!({"node": "nobody"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(err["message"], "node 'nobody' does not exist");

    let (status, body) = app
        .patch(
            "/volumes/v/snapshots/top/attachments/host-1",
            json!({"readonly": true, "mountpoint": "/srv"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job = app.wait_job_of(&body).await;
    assert_eq!(
        (job["state"].clone(), job["type"].clone()),
        (json!("Done"), json!("attachment_modify"))
    );
    let (_, a) = app.get("/volumes/v/snapshots/top/attachments/host-1").await;
    assert_eq!(
        (a["readonly"].clone(), a["mountpoint"].clone()),
        (json!(true), json!("/srv"))
    );

    let (status, err) = app.delete("/volumes/v").await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        err["message"],
        "volume 'v' is attached to node(s) host-1; detach it first or delete with force=true"
    );
    // Found by fuzzing: an empty or bare `force` is not `true` (400, and
    // the volume stays).
    for query in ["?force=", "?force", "?force=yes"] {
        let (status, err) = app.delete(&format!("/volumes/v{query}")).await;
        assert_eq!(
            (status, err),
            (
                StatusCode::BAD_REQUEST,
                json!({"message": "force must be true or false"})
            ),
            "{query}"
        );
    }
    let (status, _) = app.get("/volumes/v").await;
    assert_eq!(status, StatusCode::OK);
    let job = app.delete_and_wait("/volumes/v?force=true").await;
    assert_eq!(job["state"], "Done", "{job}");
    let (_, list) = app.get("/attachments").await;
    assert_eq!(list, json!([]));
}

#[tokio::test]
async fn node_addresses_are_set_through_the_api() {
    let app = TestApp::start_with(topology("0")).await;
    let (status, body) = app
        .patch("/nodes/n1", json!({"address": "127.0.0.1"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, node) = app.get("/nodes/n1").await;
    assert_eq!(node["address"], "127.0.0.1");
    let (status, err) = app
        .patch("/nodes/n1", json!({"address": "not-an-ip"}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(err["message"], "address 'not-an-ip' is not an IP address");
    let (status, _) = app
        .patch("/nodes/nope", json!({"address": "127.0.0.1"}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // A media node without an address cannot attach until it gets one.
    app.create_policy("p", 0, 0, 0).await;
    app.create_volume("v", 1, "p").await;
    let (status, err) = app
        .post(
            "/volumes/v/snapshots/top/attachments",
            json!({"node": "n2"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        err["message"],
        "node 'n2' has no address: set one with PATCH /nodes/n2"
    );
    let a = attach(&app, "v", "n1", false).await;
    qemu_io(
        &uri(&a),
        &["write -P 3 0 4k".into(), "read -P 3 0 4k".into()],
    )
    .expect("n1 attaches");
}

#[tokio::test]
async fn after_a_resize_a_new_connection_sees_the_new_size() {
    let (app, a) = attached_v().await;
    qemu_io(&uri(&a), &["write -P 9 4095M 1M".into()]).expect("write at the end");
    let (status, body) = app.patch("/volumes/v", json!({"size": 6})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job = app.wait_job_of(&body).await;
    assert_eq!(job["state"], "Done", "{job}");
    let info = qemu_img(&["info", "-f", "raw", &uri(&a)]).expect("info");
    assert!(info.contains("6 GiB"), "{info}");
    qemu_io(
        &uri(&a),
        &[
            "read -P 9 4095M 1M".into(),
            "write -P 10 6143M 1M".into(),
            "read -P 10 6143M 1M".into(),
        ],
    )
    .expect("old bytes stay, new space is usable");
}

#[tokio::test]
async fn writes_during_a_live_data_movement_are_all_kept() {
    // 24 MiB at 4 MiB/s: about 6 s of copying while a client writes.
    let (app, id, uri) = attached_mirror("4 MiB").await;
    let (commands, written) = spread_writes(60, 100);
    let writer = std::thread::spawn({
        let uri = uri.clone();
        move || qemu_io(&uri, &commands)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let job_id = app.start_resize("data", 18, true).await;

    // Attachment changes are refused while the data moves (the shared guard).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, job) = app.get(&format!("/jobs/{job_id}")).await;
        if job["state"] == "Running" && job["progress"].as_u64().unwrap_or(0) > 0 {
            break;
        }
        assert!(
            job["state"] != "Done" && job["state"] != "Error",
            "ended too soon: {job}"
        );
        assert!(Instant::now() < deadline, "no progress: {job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let blocked =
        format!("is not allowed on volume 'data' while data movement job {job_id} is in progress");
    let (status, err) = app
        .post(
            "/volumes/data/snapshots/top/attachments",
            json!({"node": "host-2"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{err}");
    assert_blocked(&err["message"], &format!("attachment create {blocked}"));
    let (status, err) = app
        .delete("/volumes/data/snapshots/top/attachments/host-1")
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{err}");
    assert_blocked(&err["message"], &format!("attachment delete {blocked}"));
    let (status, err) = app
        .patch(
            "/volumes/data/snapshots/top/attachments/host-1",
            json!({"readonly": true}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{err}");
    assert_blocked(&err["message"], &format!("attachment modify {blocked}"));

    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    writer
        .join()
        .expect("writer thread")
        .expect("every write acknowledged");

    let slices = app.slices("data").await;
    let on = |copy: u64| {
        slices
            .iter()
            .find(|s| s["copy"] == copy)
            .and_then(|s| s["media"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!((on(0), on(1)), ("m1".to_string(), "m3".to_string()));
    let expected = expected(&written);
    qemu_io(&uri, &read_back_commands(&expected)).expect("every acknowledged write reads back");
    // And both copies hold them on disk, the moved one included.
    for (copy, medium) in [(0, "m1"), (1, "m3")] {
        let path = app.slice_path(medium, &id, copy, 0);
        for (off, p) in &expected {
            assert_eq!(
                read_at(&path, *off, 4096),
                vec![*p as u8; 4096],
                "copy {copy} at {off}"
            );
        }
    }
    assert!(!app.slice_path("m2", &id, 1, 0).exists());
    let (_, job) = app.get(&format!("/jobs/{job_id}")).await;
    let details = job["details"].to_string();
    assert!(details.contains("while in use"), "{details}");
    // Writes into the holes ahead of the copy (past the 24 MiB prefill)
    // added to what it had to copy, and the copy said so.
    assert!(
        details.contains("of them catching up with writes made during the move"),
        "{details}"
    );
}

/// Offsets of the writes a qemu-io run reported as done (`wrote 4096/4096
/// bytes at offset N`), in order.
fn acknowledged(output: &str) -> Vec<u64> {
    output
        .lines()
        .filter_map(|l| l.strip_prefix("wrote 4096/4096 bytes at offset "))
        .filter_map(|n| n.trim().parse().ok())
        .collect()
}

#[tokio::test]
async fn flushed_writes_survive_sigkill_while_a_client_writes_during_a_live_movement() {
    let (mut app, id, uri) = attached_mirror("4 MiB").await;
    let job_id = app.start_resize("data", 18, true).await;
    // write, flush, pause, ... at distinct offsets: each write but the last
    // acknowledged one is covered by a flush that completed.
    let mut commands = Vec::new();
    let mut pattern_at = std::collections::HashMap::new();
    for i in 0..400u64 {
        let off = (i * 7_919 * 4096) % (40 << 20);
        let p = 1 + (i % 250);
        pattern_at.insert(off, p);
        commands.push(format!("write -P {p} {off} 4k"));
        commands.push("flush".into());
        commands.push("sleep 10".into());
    }
    let writer = std::thread::spawn({
        let uri = uri.clone();
        move || match qemu_io(&uri, &commands) {
            Ok(out) | Err(out) => out,
        }
    });
    // A third of the copy (about 2 s at 4 MiB/s): past a checkpoint.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, job) = app.get(&format!("/jobs/{job_id}")).await;
        assert!(
            job["state"] == "Running" || job["state"] == "Pending",
            "still moving when killed: {job}"
        );
        if job["progress"].as_u64().unwrap_or(0) >= 30 {
            break;
        }
        assert!(Instant::now() < deadline, "no progress: {job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    app.kill();
    let output = writer.join().expect("writer thread");
    let acked = acknowledged(&output);
    assert!(
        acked.len() > 5,
        "the client wrote before the crash: {output}"
    );
    let flushed = &acked[..acked.len() - 1];

    app.launch().expect("restarts after SIGKILL");
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    // The copy went on from its last checkpoint, not from zero.
    let details = job["details"].to_string();
    assert!(
        details.contains("Resuming the copy of slice c1-k0 from m2 to m3 from its checkpoint"),
        "{details}"
    );
    assert!(
        details.contains("by this run, resumed from the checkpoint at byte"),
        "{details}"
    );
    // The attachment is exported again after the restart, same export name.
    let (_, a) = app
        .get("/volumes/data/snapshots/top/attachments/host-1")
        .await;
    let export = a["exportname"].as_str().unwrap_or_default();
    assert!(uri.ends_with(export), "{uri} vs {export}");
    let now = a["uri"].as_str().unwrap_or_default().to_string();
    let expected: Vec<(u64, u64)> = flushed.iter().map(|off| (*off, pattern_at[off])).collect();
    qemu_io(&now, &read_back_commands(&expected)).expect("every flushed write reads back");
    let moved = app.slice_path("m3", &id, 1, 0);
    for (off, p) in &expected {
        assert_eq!(
            read_at(&moved, *off, 4096),
            vec![*p as u8; 4096],
            "moved copy at {off}"
        );
    }
    assert!(!app.slice_path("m2", &id, 1, 0).exists());
}

#[tokio::test]
async fn deleting_an_attachment_closes_its_open_connections() {
    let (app, a) = attached_v().await;
    let client = std::thread::spawn({
        let uri = uri(&a);
        move || {
            qemu_io(
                &uri,
                &[
                    "write -P 1 0 4k".into(),
                    "sleep 3000".into(),
                    "read -P 1 0 4k".into(),
                ],
            )
        }
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    let job = app
        .delete_and_wait("/volumes/v/snapshots/top/attachments/host-1")
        .await;
    assert_eq!(job["state"], "Done", "{job}");
    let result = client.join().expect("client thread");
    let output = result.expect_err("the read after the detach fails");
    assert!(
        output.contains("wrote 4096/4096"),
        "the first write worked: {output}"
    );
}

#[tokio::test]
async fn an_open_connection_keeps_working_across_a_resize() {
    let (app, a) = attached_v().await;
    let client = std::thread::spawn({
        let uri = uri(&a);
        move || {
            qemu_io(
                &uri,
                &[
                    "write -P 4 1M 64k".into(),
                    "sleep 2000".into(),
                    "read -P 4 1M 64k".into(),
                    "write -P 5 2M 64k".into(),
                    "read -P 5 2M 64k".into(),
                ],
            )
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, body) = app.patch("/volumes/v", json!({"size": 8})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job = app.wait_job_of(&body).await;
    assert_eq!(job["state"], "Done", "{job}");
    client
        .join()
        .expect("client thread")
        .expect("the open connection kept working");
    let info = qemu_img(&["info", "-f", "raw", &uri(&a)]).expect("info");
    assert!(info.contains("8 GiB"), "{info}");
}

#[tokio::test]
async fn a_detach_checks_its_force_query_and_accepts_it() {
    let (app, _) = attached_v().await;
    let path = "/volumes/v/snapshots/top/attachments/host-1";
    // Found by fuzzing against the reference: any value was accepted.
    let (status, body) = app.delete(&format!("{path}?force=-58800")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body, json!({"message": "force must be true or false"}));
    let (_, attachment) = app.get(path).await;
    assert_eq!(attachment["state"], "Attached", "{attachment}");
    let job = app.delete_and_wait(&format!("{path}?force=true")).await;
    assert_eq!(job["state"], "Done", "{job}");
}

#[tokio::test]
async fn reference_attachment_fields_svs_ignores_must_still_be_of_their_type() {
    let (app, _) = attached_v().await;
    // Found by fuzzing against the reference: `allocated_resources: {}` was
    // accepted and silently dropped.
    let path = "/volumes/v/snapshots/top/attachments";
    for (body, message) in [
        (
            json!({"node": "host-1", "allocated_resources": {}}),
            "allocated_resources must be a number",
        ),
        (
            json!({"node": "host-1", "allocated_resources": 101}),
            "allocated_resources must be a whole number from 1 to 100",
        ),
        (
            json!({"node": "host-1", "volumename": 7}),
            "volumename must be a string",
        ),
    ] {
        let (status, reply) = app.post(path, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {reply}");
        assert_eq!(reply, json!({"message": message}), "{body}");
        let (status, reply) = app.patch(&format!("{path}/host-1"), body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {reply}");
        assert_eq!(reply, json!({"message": message}), "{body}");
    }
    // Of the right type they are accepted and change nothing: alone, the
    // body has nothing to change (400, no job: issue 30); beside a real
    // change, they are ignored.
    let ignored = json!({"node": "host-1", "volumename": "v", "snapshotname": "top", "allocated_resources": 50});
    let (status, reply) = app.patch(&format!("{path}/host-1"), ignored.clone()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{reply}");
    assert_eq!(
        reply,
        json!({"message": "nothing to change: send readonly or mountpoint (or both)"})
    );
    let mut with_change = ignored;
    with_change["mountpoint"] = json!("/mnt/other");
    let (status, reply) = app.patch(&format!("{path}/host-1"), with_change).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let job = app.wait_job_of(&reply).await;
    assert_eq!(job["state"], "Done", "{job}");
    let (_, a) = app.get(&format!("{path}/host-1")).await;
    assert_eq!(
        (
            a["state"].clone(),
            a["readonly"].clone(),
            a["mountpoint"].clone()
        ),
        (json!("Attached"), json!(false), json!("/mnt/other"))
    );
}

#[tokio::test]
async fn an_attachment_names_its_manager_agent_by_default_or_csi_and_nothing_else() {
    let (app, a) = attached_v().await;
    assert_eq!(a["manager"], "agent", "{a}");
    app.create_volume("w", 1, "mirror").await;
    let path = "/volumes/w/snapshots/top/attachments";
    for bad in [json!("CSI"), json!(""), json!(7)] {
        let (status, reply) = app
            .post(path, json!({"node": "host-1", "manager": bad}))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {reply}");
        let message = if bad.is_string() {
            "manager must be 'agent' or 'csi'"
        } else {
            "manager must be a string"
        };
        assert_eq!(reply, json!({"message": message}), "{bad}");
    }
    let (status, reply) = app.get(&format!("{path}/host-1")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nothing made: {reply}");
    let job = app
        .post_and_wait(path, json!({"node": "host-1", "manager": "csi"}))
        .await;
    assert_eq!(job["state"], "Done", "{job}");
    let (_, csi) = app.get(&format!("{path}/host-1")).await;
    assert_eq!(csi["manager"], "csi", "{csi}");
    assert_eq!(csi["state"], "Attached", "{csi}");
    // A detach does not wait for an agent that never holds it.
    let job = app.delete_and_wait(&format!("{path}/host-1")).await;
    assert_eq!(job["state"], "Done", "{job}");
}
