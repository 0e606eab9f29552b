//! Storage nodes: the real `svs serve` and real `svs storage-node`
//! processes, each node with its own directory and its own loopback
//! address (127.0.0.2, 127.0.0.3, 127.0.0.4). The last test mirrors a
//! volume over the nodes' slice servers and loses one node under a writer.

use crate::harness::cli::Home;
use crate::harness::storage_nodes::*;
use crate::harness::{medium, TestApp, TestConfig, GIB};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};

async fn medium_state(app: &TestApp, id: &str) -> Option<Value> {
    let (status, body) = app.get(&format!("/media/{id}")).await;
    (status == StatusCode::OK).then_some(body)
}

async fn start_service() -> TestApp {
    TestApp::start_with(TestConfig {
        media: vec![medium("m1", "host-0", "z0", 10)],
        settings: vec![format!("storage_node_timeout = \"{}s\"", TIMEOUT.as_secs())],
        ..TestConfig::default()
    })
    .await
}

#[tokio::test]
async fn storage_nodes_register_heartbeat_go_offline_when_killed_and_come_back() {
    let app = start_service().await;
    let c1 = node_with_credential(&app, "sn-1", "127.0.0.2", "z1", "storage").await;
    let c2 = node_with_credential(&app, "sn-2", "127.0.0.3", "z2", "storage").await;
    let mut sn1 = StorageNodeProcess::new(&app, "sn-1", "127.0.0.2", &[("d1", 4), ("d2", 6)], &c1);
    let mut sn2 = StorageNodeProcess::new(&app, "sn-2", "127.0.0.3", &[("e1", 5)], &c2);
    sn1.start();
    sn2.start();

    // Registration: the media appear, owned by their node, in its zone.
    let registered = eventually(Duration::from_secs(20), || async {
        medium_state(&app, "d2").await.is_some() && medium_state(&app, "e1").await.is_some()
    })
    .await;
    assert!(registered, "sn-1: {}\nsn-2: {}", sn1.log(), sn2.log());
    let d1 = medium_state(&app, "d1").await.expect("d1");
    assert_eq!(d1["node"], "sn-1", "{d1}");
    assert_eq!(d1["zone"], "z1", "{d1}");
    assert_eq!(d1["size"], 4, "{d1}");
    assert_eq!(d1["managedby"], "node", "{d1}");
    assert_eq!(d1["state"], "Online", "{d1}");
    let e1 = medium_state(&app, "e1").await.expect("e1");
    assert_eq!(
        (e1["node"].as_str(), e1["zone"].as_str()),
        (Some("sn-2"), Some("z2"))
    );
    let n1 = node(&app, "sn-1").await;
    assert_eq!(n1["role"], "storage", "{n1}");
    assert_eq!(n1["state"], "Online", "{n1}");
    assert_eq!(n1["sliceaddress"], sn1.slice_address.as_str(), "{n1}");
    assert!(n1["lastheartbeat"].is_string(), "{n1}");
    assert_eq!(n1["mediacount"], 2, "{n1}");
    assert_eq!(n1["size"], 10, "{n1}");
    let host = node(&app, "host-0").await;
    assert_eq!(host["role"], "host", "{host}");
    assert_eq!(host["lastheartbeat"], Value::Null, "{host}");
    assert_eq!(host["sliceaddress"], "", "{host}");

    // Heartbeats keep it Online well past the timeout.
    let first_beat = n1["lastheartbeat"].as_str().unwrap_or_default().to_string();
    tokio::time::sleep(TIMEOUT * 2).await;
    let n1 = node(&app, "sn-1").await;
    assert_eq!(n1["state"], "Online", "{n1}\n{}", sn1.log());
    assert_ne!(
        n1["lastheartbeat"].as_str(),
        Some(first_beat.as_str()),
        "{n1}"
    );

    // The API may not change or remove a node's medium; failing it works.
    let (status, body) = app.patch("/media/d1", json!({"size": 5})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body["message"],
        "medium 'd1' is managed by storage node 'sn-1'; change it in that node's configuration"
    );
    let (status, body) = app.delete("/media/d1").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body["message"],
        "medium 'd1' is managed by storage node 'sn-1'; change it in that node's configuration"
    );

    // SIGKILL sn-1: Offline within the timeout, its media Failed; sn-2
    // is not affected.
    sn1.kill();
    let killed = Instant::now();
    let offline = eventually(TIMEOUT + MARGIN, || async {
        node(&app, "sn-1").await["state"] == "Offline"
    })
    .await;
    assert!(offline, "{}\n{}", node(&app, "sn-1").await, app.log());
    // Judged from its last heartbeat, at most one period (1 s) before.
    assert!(
        killed.elapsed() >= TIMEOUT - Duration::from_secs(1),
        "Offline after {:?}",
        killed.elapsed()
    );
    for id in ["d1", "d2"] {
        let m = medium_state(&app, id).await.expect("medium");
        assert_eq!(m["state"], "Failed", "{m}");
    }
    assert_eq!(node(&app, "sn-2").await["state"], "Online");
    assert_eq!(
        medium_state(&app, "e1").await.expect("e1")["state"],
        "Online"
    );
    assert!(
        app.log().contains("storage node is Offline"),
        "{}",
        app.log()
    );

    // Restarted: Online again, and so are its media.
    sn1.start();
    let back = eventually(Duration::from_secs(15), || async {
        node(&app, "sn-1").await["state"] == "Online"
            && medium_state(&app, "d1")
                .await
                .is_some_and(|m| m["state"] == "Online")
            && medium_state(&app, "d2")
                .await
                .is_some_and(|m| m["state"] == "Online")
    })
    .await;
    assert!(back, "{}\n{}", node(&app, "sn-1").await, sn1.log());
    assert!(
        app.log().contains("storage node is Online again"),
        "{}",
        app.log()
    );

    // A medium whose directory goes away is left out and failed... (it
    // holds nothing, so it is removed instead).
    std::fs::remove_dir_all(sn1.medium_dir("d2")).expect("d2 removed");
    let dropped = eventually(Duration::from_secs(15), || async {
        medium_state(&app, "d2").await.is_none()
    })
    .await;
    assert!(dropped, "{}", sn1.log());
    assert!(
        sn1.log().contains("medium left out: it failed its check"),
        "{}",
        sn1.log()
    );

    // SIGTERM: a clean exit.
    assert!(sn2.stop(), "{}", sn2.log());
    assert!(sn2.log().contains("storage node stopped"), "{}", sn2.log());
}

#[tokio::test]
async fn storage_routes_take_only_their_own_nodes_storage_credential() {
    let app = start_service().await;
    let c1 = node_with_credential(&app, "sn-1", "127.0.0.2", "z1", "storage").await;
    let c2 = node_with_credential(&app, "sn-2", "127.0.0.3", "z2", "storage").await;
    let agent = node_with_credential(&app, "host-a", "127.0.0.4", "", "agent").await;
    let addr = format!("127.0.0.2:{}", free_port("127.0.0.2"));
    let body = |media: Value| json!({"sliceaddress": addr, "media": media});

    let (status, first) = register(
        &app,
        &c1,
        "sn-1",
        body(json!([{"name": "d1", "size": 4 * GIB}])),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let secret = first["slicecredential"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(secret.len(), 64, "{first}");
    assert!(secret.bytes().all(|b| b.is_ascii_hexdigit()), "{first}");
    assert_eq!(first["heartbeatseconds"], 1, "{first}");
    // A heartbeat keeps the slice credential.
    let (status, again) = register(
        &app,
        &c1,
        "sn-1",
        body(json!([{"name": "d1", "size": 4 * GIB}])),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["slicecredential"], secret.as_str());

    for (credential, node, code, message) in [
        ("svsnode.0123456789abcdef.wrong", "sn-1", StatusCode::UNAUTHORIZED,
         "invalid or revoked node credential".to_string()),
        (c1.as_str(), "sn-2", StatusCode::FORBIDDEN,
         "this credential belongs to node 'sn-1', not 'sn-2'".to_string()),
        (agent.as_str(), "host-a", StatusCode::FORBIDDEN,
         "only the node's storage node process may use this endpoint; this is an agent credential".to_string()),
    ] {
        let (status, answer) = register(&app, credential, node, body(json!([]))).await;
        assert_eq!((status, answer["message"].as_str()), (code, Some(message.as_str())), "{node}");
    }
    // A user's IdToken is not a storage credential.
    let (status, answer) = app
        .request(
            Some(&app.token),
            Method::PUT,
            "/nodes/sn-1/storage",
            Some(body(json!([]))),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    assert_eq!(
        answer["message"],
        "only the node's storage node process may use this endpoint"
    );
    // A storage credential on the agent's routes.
    let (status, answer) = app
        .request(
            Some(&format!("Bearer {c1}")),
            Method::GET,
            "/nodes/sn-1/agent/attachments",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    assert_eq!(
        answer["message"],
        "only the node's agent may use this endpoint; this is a storage node credential"
    );

    // Claims of media that are not the node's: 409, nothing changed.
    let (_, before) = app.get("/media").await;
    for (media, message) in [
        (json!([{"name": "e1", "size": GIB}, {"name": "d1", "size": GIB}]),
         "node 'sn-2' cannot claim: medium 'd1' already exists, managed by storage node 'sn-1'"),
        (json!([{"name": "m1", "size": GIB}]),
         "node 'sn-2' cannot claim: medium 'm1' already exists, managed by the configuration file"),
    ] {
        let (status, answer) = register(&app, &c2, "sn-2", body(media)).await;
        assert_eq!(status, StatusCode::CONFLICT, "{answer}");
        assert_eq!(answer["message"], message);
    }
    let (_, after) = app.get("/media").await;
    assert_eq!(before, after);
    assert_eq!(node(&app, "sn-2").await["role"], "host");

    // Bad bodies.
    for (bad, message) in [
        (json!({"media": []}), "sliceaddress is required"),
        (
            json!({"sliceaddress": "nowhere"}),
            "sliceaddress 'nowhere' is not an IP:PORT address",
        ),
        (
            json!({"sliceaddress": addr, "media": [{"name": "x", "size": 5}]}),
            "size of medium 'x' must be a whole number of bytes, at least 1 GiB",
        ),
    ] {
        let (status, answer) = register(&app, &c1, "sn-1", bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
        assert_eq!(answer["message"], message, "{answer}");
    }

    // A new credential: a new slice credential. Revoked: 401.
    let (status, issued) = app
        .post("/nodes/sn-1/credentials", json!({"role": "storage"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{issued}");
    let c1_new = issued["credential"].as_str().unwrap_or_default();
    let (status, _) = register(&app, &c1, "sn-1", body(json!([]))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, renewed) = register(
        &app,
        c1_new,
        "sn-1",
        body(json!([{"name": "d1", "size": 4 * GIB}])),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{renewed}");
    assert_ne!(renewed["slicecredential"], secret.as_str());
    let (status, _) = app.delete("/nodes/sn-1/credentials").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, answer) = register(&app, c1_new, "sn-1", body(json!([]))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{answer}");
    assert_eq!(answer["message"], "invalid or revoked node credential");

    // An unknown role.
    let (status, answer) = app
        .post("/nodes/sn-2/credentials", json!({"role": "root"}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(
        answer["message"],
        "role must be 'agent', 'storage' or 'agent+storage' (got 'root')"
    );
}

#[tokio::test]
async fn the_cli_issues_storage_credentials_and_shows_storage_nodes() {
    let app = start_service().await;
    let home = Home::new(false);
    home.login(&app);
    let out = home.ok(&[
        "node",
        "add",
        "sn-1",
        "--address",
        "127.0.0.2",
        "--zone",
        "z1",
        "--role",
        "storage",
    ]);
    assert!(
        out.contains("Storage node credential (shown only this once"),
        "{out}"
    );
    let credential = out
        .lines()
        .find(|l| l.starts_with("svsnode."))
        .unwrap_or_default()
        .to_string();
    assert!(
        out.contains("svs storage-node --config /etc/svs/storage-node.toml"),
        "{out}"
    );
    let mut sn1 = StorageNodeProcess::new(&app, "sn-1", "127.0.0.2", &[("d1", 4)], &credential);
    sn1.start();
    let registered = eventually(Duration::from_secs(20), || async {
        medium_state(&app, "d1").await.is_some()
    })
    .await;
    assert!(registered, "{}", sn1.log());

    let table = home.ok(&["node", "list"]);
    let header = table.lines().next().unwrap_or_default();
    for column in ["ROLE", "MEDIA", "COPIES", "LAST HEARTBEAT", "STATE"] {
        assert!(header.contains(column), "{table}");
    }
    assert!(header.ends_with("AGENT  AGENT SEEN"), "{table}");
    let row = table
        .lines()
        .find(|l| l.starts_with("sn-1 "))
        .unwrap_or_default();
    assert!(row.contains(" storage "), "{table}");
    assert!(row.contains(" Online "), "{table}");
    let listed = home.json(&["node", "list"]);
    let sn = listed
        .as_array()
        .and_then(|all| all.iter().find(|n| n["name"] == "sn-1"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (
            sn["role"].as_str(),
            sn["mediacount"].as_u64(),
            sn["copiescount"].as_u64()
        ),
        (Some("storage"), Some(1), Some(0)),
        "{sn}"
    );

    let shown = home.ok(&["node", "get", "sn-1"]);
    assert!(shown.contains("Media:"), "{shown}");
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("d1 ") && l.contains(" node ")),
        "{shown}"
    );
    assert!(shown.contains("Copies:"), "{shown}");
    let shown = home.json(&["node", "get", "sn-1"]);
    assert_eq!(shown["media"][0]["mediaid"], "d1", "{shown}");
    assert_eq!(shown["copies"], json!([]), "{shown}");
    let (status, copies) = app.get("/nodes/sn-1/copies").await;
    assert_eq!((status, copies), (StatusCode::OK, json!([])));
    let (status, answer) = app.get("/nodes/nope/copies").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert_eq!(answer["message"], "node 'nope' not found");
}

#[tokio::test]
async fn a_storage_node_registers_over_https_trusting_the_services_ca() {
    let app = TestApp::start_with(TestConfig {
        media: vec![medium("m1", "host-0", "z0", 10)],
        settings: vec![
            "tls = \"auto\"".into(),
            format!("storage_node_timeout = \"{}s\"", TIMEOUT.as_secs()),
        ],
        ..TestConfig::default()
    })
    .await;
    assert!(app.base.starts_with("https://"), "{}", app.base);
    let c1 = node_with_credential(&app, "sn-1", "127.0.0.2", "z1", "storage").await;
    // Without the CA the node cannot trust the service: it keeps retrying.
    let mut untrusting = StorageNodeProcess::new(&app, "sn-1", "127.0.0.2", &[("d1", 4)], &c1);
    untrusting.start();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(medium_state(&app, "d1").await.is_none());
    assert!(
        untrusting
            .log()
            .contains("cannot register with the control plane; retrying"),
        "{}",
        untrusting.log()
    );
    untrusting.kill();
    let ca = app.ca_cert().display().to_string();
    let mut sn1 = StorageNodeProcess::new(&app, "sn-1", "127.0.0.2", &[("d1", 4)], &c1);
    sn1.start_with(&["--ca-cert", &ca]);
    let registered = eventually(Duration::from_secs(20), || async {
        medium_state(&app, "d1").await.is_some()
    })
    .await;
    assert!(registered, "{}", sn1.log());
    assert_eq!(node(&app, "sn-1").await["state"], "Online");
}

/// A mirrored volume over two of three storage nodes, written through
/// NBD by qemu-io: the node of one copy is SIGKILLed between writes; the
/// writer sees no error, every acknowledged write reads back, the volume
/// is Degraded; a recovery rebuilds the copy on the third node, node to
/// node through the front, and both copies' files are then identical.
#[tokio::test]
async fn a_mirror_over_storage_nodes_survives_the_loss_of_a_node() {
    let app = start_for_storage_nodes().await;
    let mut nodes = Vec::new();
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
    let slices = app.slices("data").await;
    let on: Vec<String> = slices
        .iter()
        .map(|s| s["media"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(on.len(), 2, "{slices:?}");
    assert_ne!(on[0], on[1], "{slices:?}");
    assert!(on.iter().all(|m| m != "m1"), "{slices:?}");
    let dirs: Vec<(&str, PathBuf)> = nodes.iter().map(|(m, p)| (*m, p.medium_dir(m))).collect();
    let file_of = |medium: &str, copy: u64| {
        let (_, dir) = dirs
            .iter()
            .find(|(m, _)| *m == medium)
            .expect("node of medium");
        dir.join(&id).join(format!("c{copy}-k0.slice"))
    };
    // Slices really are on the nodes' disks.
    for (copy, medium) in on.iter().enumerate() {
        assert!(file_of(medium, copy as u64).exists(), "{medium}");
    }

    let (status, body) = app
        .patch("/nodes/host-0", json!({"address": "127.0.0.1"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let a = crate::harness::attach::attach(&app, "data", "host-0", false).await;
    let uri = crate::harness::attach::uri(&a);
    crate::harness::attach::qemu_io(&uri, &["write -P 0x11 0 8M".into(), "flush".into()])
        .expect("write");
    // Both copies hold the bytes on their nodes' disks.
    for (copy, medium) in on.iter().enumerate() {
        let bytes = crate::harness::read_at(&file_of(medium, copy as u64), 4096, 4096);
        assert!(bytes.iter().all(|b| *b == 0x11), "{medium}");
    }

    // SIGKILL the node of copy 0; the writer goes on without an error.
    let lost = on[0].clone();
    nodes
        .iter_mut()
        .find(|(m, _)| *m == lost)
        .expect("node")
        .1
        .kill();
    crate::harness::attach::qemu_io(&uri, &["write -P 0x22 4M 8M".into(), "flush".into()])
        .expect("writes go on with one copy");
    let out = crate::harness::attach::qemu_io(
        &uri,
        &["read -P 0x11 0 4M".into(), "read -P 0x22 4M 8M".into()],
    )
    .expect("every acknowledged write reads back");
    assert!(!out.contains("Pattern verification failed"), "{out}");
    let degraded = eventually(Duration::from_secs(15), || async {
        app.get("/volumes/data").await.1["state"] == "Degraded"
    })
    .await;
    assert!(degraded, "{}", app.get("/volumes/data").await.1);

    // Recovery rebuilds the lost copy on the third node.
    let (status, body) = app.post("/volumes/data/recover", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job = app.wait_job_of(&body).await;
    assert_eq!(job["state"], "Done", "{job}\n{}", app.log());
    let healthy = eventually(Duration::from_secs(15), || async {
        app.get("/volumes/data").await.1["state"] == "Ready"
    })
    .await;
    assert!(healthy, "{}", app.get("/volumes/data").await.1);
    let slices = app.slices("data").await;
    let now: Vec<String> = slices
        .iter()
        .map(|s| s["media"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(!now.contains(&lost), "{slices:?}");
    let a_copy = std::fs::read(file_of(&now[0], 0)).expect("copy 0");
    let b_copy = std::fs::read(file_of(&now[1], 1)).expect("copy 1");
    assert_eq!(a_copy.len(), b_copy.len());
    assert!(a_copy == b_copy, "the copies differ after the rebuild");
    let out = crate::harness::attach::qemu_io(
        &uri,
        &["read -P 0x11 0 4M".into(), "read -P 0x22 4M 8M".into()],
    )
    .expect("reads after the rebuild");
    assert!(!out.contains("Pattern verification failed"), "{out}");
}

/// `storage_nodes_only = true`: `svs serve` starts with no media of its
/// own, refuses to add any through the API, and places both copies of a
/// mirror on two storage nodes; NBD I/O (qemu-io) reaches the bytes on
/// the nodes' disks.
#[tokio::test]
async fn serve_with_storage_nodes_only_places_every_copy_on_storage_nodes() {
    let app = TestApp::start_with(TestConfig {
        settings: vec![
            "storage_nodes_only = true".into(),
            format!("storage_node_timeout = \"{}s\"", TIMEOUT.as_secs()),
        ],
        ..TestConfig::default()
    })
    .await;
    let (status, media) = app.get("/media").await;
    assert_eq!((status, media), (StatusCode::OK, json!([])));
    let dir = app.data_dir().join("local");
    let (status, refused) = app
        .post(
            "/media",
            json!({"mediaid": "l1", "node": "host-0", "zone": "z0",
                   "media": dir.display().to_string(), "size": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(
        refused["message"],
        "this service runs with storage_nodes_only = true: every medium is a storage node's; \
         add it to a storage node's configuration (svs storage-node)"
    );
    assert!(!dir.exists(), "nothing made");

    let mut nodes = Vec::new();
    for (name, ip, medium, zone) in [
        ("sn-1", "127.0.0.2", "a1", "z1"),
        ("sn-2", "127.0.0.3", "b1", "z2"),
    ] {
        let credential = node_with_credential(&app, name, ip, zone, "storage").await;
        let mut process = StorageNodeProcess::new(&app, name, ip, &[(medium, 4)], &credential);
        process.start();
        nodes.push(process);
    }
    wait_served(&app, &["a1", "b1"]).await;
    app.create_policy("mirror", 1, 1, 0).await;
    let (id, _) = app.create_volume("data", 2, "mirror").await;
    let mut on: Vec<String> = app
        .slices("data")
        .await
        .iter()
        .map(|s| s["media"].as_str().unwrap_or_default().to_string())
        .collect();
    on.sort();
    assert_eq!(on, ["a1", "b1"]);
    let files: Vec<PathBuf> = ["a1", "b1"]
        .iter()
        .zip(&nodes)
        .map(|(medium, node)| {
            let dir = node.medium_dir(medium).join(&id);
            let copy = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .filter_map(Result::ok)
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|x| x == "slice"));
            copy.unwrap_or_else(|| panic!("no slice file in {}", dir.display()))
        })
        .collect();

    let (status, body) = app
        .post(
            "/nodes",
            json!({"name": "host-1", "address": "127.0.0.1", "zone": "z9"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let a = crate::harness::attach::attach(&app, "data", "host-1", false).await;
    let uri = crate::harness::attach::uri(&a);
    crate::harness::attach::qemu_io(&uri, &["write -P 0x5a 1M 2M".into(), "flush".into()])
        .expect("write through NBD");
    let out =
        crate::harness::attach::qemu_io(&uri, &["read -P 0x5a 1M 2M".into()]).expect("read back");
    assert!(!out.contains("Pattern verification failed"), "{out}");
    // Both copies hold the bytes, on the nodes' disks.
    for file in &files {
        let bytes = crate::harness::read_at(file, 1 << 20, 2 << 20);
        assert!(bytes.iter().all(|b| *b == 0x5a), "{}", file.display());
    }
    let (_, media) = app.get("/media").await;
    let managed: Vec<(&str, &str)> = media
        .as_array()
        .map(|all| {
            all.iter()
                .map(|m| {
                    (
                        m["mediaid"].as_str().unwrap_or_default(),
                        m["managedby"].as_str().unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(managed, [("a1", "node"), ("b1", "node")], "{media}");
}
