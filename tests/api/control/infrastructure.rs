//! Media and nodes added, changed and removed through the API, and who
//! manages what: the configuration file for what it lists, the API (and the
//! database) for the rest.

use crate::harness::attach::attach;
use crate::harness::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const CONFIG_MEDIUM: &str =
    "medium 'm1' is defined in the configuration file; change it there and restart svs";

/// One configured medium m1 (4 GiB, node n1, zone z1) and a client host
/// host-1; volumes bigger than 4 GiB cannot go on m1.
fn small_config() -> TestConfig {
    TestConfig {
        media: vec![medium("m1", "n1", "z1", 4)],
        nodes: vec![("host-1", "127.0.0.1")],
        ..TestConfig::default()
    }
}

/// Where the tests put the directories of media added through the API.
fn api_dir(app: &TestApp, id: &str) -> PathBuf {
    app.dir.path().join("api-media").join(id)
}

fn medium_body(app: &TestApp, id: &str, node: &str, zone: &str, size: u64) -> Value {
    json!({
        "mediaid": id, "node": node, "zone": zone,
        "media": api_dir(app, id).display().to_string(), "size": size,
    })
}

/// Adds m2 (20 GiB, node n2, zone z2) through the API.
async fn add_m2(app: &TestApp) -> Value {
    let (status, body) = app
        .post("/media", medium_body(app, "m2", "n2", "z2", 20))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

fn message(body: &Value) -> &str {
    body["message"].as_str().unwrap_or_default()
}

/// (id, managedby) of every medium.
async fn media_sources(app: &TestApp) -> Vec<(String, String)> {
    let (status, media) = app.get("/media").await;
    assert_eq!(status, StatusCode::OK, "{media}");
    media
        .as_array()
        .map(|list| {
            list.iter()
                .map(|m| {
                    (
                        m["mediaid"].as_str().unwrap_or_default().to_string(),
                        m["managedby"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn canonical(path: &Path) -> String {
    std::fs::canonicalize(path)
        .expect("directory exists")
        .display()
        .to_string()
}

#[tokio::test]
async fn an_added_medium_takes_a_new_volume_at_once_and_says_it_is_managed_through_the_api() {
    let app = TestApp::start_with(small_config()).await;
    let medium = add_m2(&app).await;
    assert_eq!(medium["mediaid"], "m2");
    assert_eq!(medium["media"], canonical(&api_dir(&app, "m2")));
    assert_eq!(
        (
            &medium["size"],
            &medium["freesize"],
            &medium["volumescount"]
        ),
        (&json!(20), &json!(20), &json!(0))
    );
    assert_eq!(medium["managedby"], "api");
    assert_eq!(
        media_sources(&app).await,
        [("m1".into(), "config".into()), ("m2".into(), "api".into())]
    );
    // Its node was added with it, in its zone; configured nodes say so.
    let (status, node) = app.get("/nodes/n2").await;
    assert_eq!(status, StatusCode::OK, "{node}");
    assert_eq!(
        (&node["zone"], &node["managedby"], &node["mediacount"]),
        (&json!("z2"), &json!("api"), &json!(1))
    );
    for configured in ["n1", "host-1"] {
        let (_, node) = app.get(&format!("/nodes/{configured}")).await;
        assert_eq!(node["managedby"], "config", "{node}");
    }

    // 10 GiB fit only on m2: the planner sees it without a restart.
    app.create_policy("none", 0, 0, 0).await;
    let (id, job) = app.create_volume("v", 10, "none").await;
    assert_eq!(job["state"], "Done", "{job}");
    let slices = app.slices("v").await;
    assert!(!slices.is_empty());
    for slice in &slices {
        assert_eq!(slice["media"], "m2", "{slice}");
        let file = api_dir(&app, "m2")
            .join(&id)
            .join(format!("c{}-k{}.slice", slice["copy"], slice["column"]));
        assert!(file.is_file(), "{} missing", file.display());
    }
    assert_eq!(app.free("m2").await, 10);
}

#[tokio::test]
async fn an_api_medium_grows_and_shrinks_only_down_to_what_is_in_use() {
    let app = TestApp::start_with(small_config()).await;
    add_m2(&app).await;
    app.create_policy("none", 0, 0, 0).await;
    let (_, job) = app.create_volume("v", 10, "none").await;
    assert_eq!(job["state"], "Done", "{job}");

    let (status, body) = app.patch("/media/m2", json!({"size": 9})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        message(&body),
        "medium 'm2' cannot shrink to 9 GiB: 10 GiB of it is in use (slices, snapshots and \
         running jobs' bookings)"
    );
    let (status, body) = app.patch("/media/m2", json!({"size": 10})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!((&body["size"], &body["freesize"]), (&json!(10), &json!(0)));
    let (status, body) = app.patch("/media/m2", json!({"size": 30})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!((&body["size"], &body["freesize"]), (&json!(30), &json!(20)));

    for (bad, expected) in [
        (json!({}), "state or size is required"),
        (
            json!({"size": 5, "state": "Failed"}),
            "give either state or size, not both",
        ),
        (
            json!({"size": 0}),
            "size must be a whole number from 1 to 1073741824",
        ),
        (
            json!({"name": "x"}),
            "unknown field 'name' (accepted: state, size)",
        ),
    ] {
        let (status, body) = app.patch("/media/m2", bad.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(message(&body), expected, "{bad}");
    }
    // The configuration file owns its media's sizes.
    let (status, body) = app.patch("/media/m1", json!({"size": 8})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(message(&body), CONFIG_MEDIUM);
    let (status, _) = app.patch("/media/nope", json!({"size": 8})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(app.free("m1").await, 4, "nothing changed");
}

#[tokio::test]
async fn a_medium_or_node_holding_slices_is_removed_only_once_its_volumes_are_gone() {
    let app = TestApp::start_with(small_config()).await;
    add_m2(&app).await;
    app.create_policy("none", 0, 0, 0).await;
    for name in ["v", "w"] {
        let (_, job) = app.create_volume(name, 8, "none").await;
        assert_eq!(job["state"], "Done", "{job}");
    }
    let foreign = api_dir(&app, "m2").join("README.admin");
    std::fs::write(&foreign, b"not svs's").expect("foreign file");

    let (status, body) = app.delete("/media/m2").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        message(&body),
        "medium 'm2' holds slices of volume(s) 'v', 'w'; delete those volumes first"
    );
    let (status, body) = app.delete("/nodes/n2").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        message(&body),
        "node 'n2' has media holding slices of volume(s) 'v', 'w'; delete those volumes, \
         then remove the node's media"
    );
    app.delete_volume("v").await;
    let (status, body) = app.delete("/media/m2").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        message(&body),
        "medium 'm2' holds slices of volume(s) 'w'; delete those volumes first"
    );
    let (status, body) = app.delete("/nodes/n2").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");

    app.delete_volume("w").await;
    let (status, body) = app.delete("/nodes/n2").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        message(&body),
        "node 'n2' has media 'm2'; remove them first"
    );
    let (status, body) = app.delete("/media/m2").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"Message": "Medium removed", "ObjectID": "m2"}));
    let (status, _) = app.get("/media/m2").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // The directory and what svs did not make stay.
    assert_eq!(std::fs::read(&foreign).expect("kept"), b"not svs's");
    let left: Vec<_> = std::fs::read_dir(api_dir(&app, "m2"))
        .expect("directory kept")
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    assert_eq!(left, ["README.admin"]);

    let (status, body) = app.delete("/nodes/n2").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"Message": "Node removed", "ObjectID": "n2"}));
    let (status, _) = app.get("/nodes/n2").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app.delete("/nodes/n2").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // What the configuration file lists is changed there.
    let (status, body) = app.delete("/media/m1").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(message(&body), CONFIG_MEDIUM);
    for node in ["n1", "host-1"] {
        let (status, body) = app.delete(&format!("/nodes/{node}")).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert_eq!(
            message(&body),
            format!(
                "node '{node}' is defined in the configuration file; change it there and \
                 restart svs"
            )
        );
    }
}

#[tokio::test]
async fn a_node_with_attachments_is_removed_after_the_detach_with_its_credential() {
    let app = TestApp::start_with(small_config()).await;
    let (status, body) = app
        .post("/nodes", json!({"name": "host-7", "address": "127.0.0.7"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["managedby"], "api");
    let (status, issued) = app.post("/nodes/host-7/credentials", json!({})).await;
    assert_eq!(status, StatusCode::CREATED, "{issued}");
    let credential = issued["credential"]
        .as_str()
        .expect("credential")
        .to_string();
    app.create_policy("none", 0, 0, 0).await;
    app.create_volume("v", 2, "none").await;
    attach(&app, "v", "host-7", false).await;

    let (status, body) = app.delete("/nodes/host-7").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        message(&body),
        "node 'host-7' has attachments of volume(s) 'v'; detach them first"
    );
    let job = app
        .delete_and_wait("/volumes/v/snapshots/top/attachments/host-7")
        .await;
    assert_eq!(job["state"], "Done", "{job}");

    let (status, body) = app.delete("/nodes/host-7").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Its agent is refused from now on.
    let (status, _) = app
        .request(
            Some(&format!("Bearer {credential}")),
            Method::GET,
            "/nodes/host-7/agent/attachments",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn bad_media_are_refused_with_clear_messages_and_nothing_changes() {
    let app = TestApp::start_with(small_config()).await;
    let blocker = app.dir.path().join("a-file");
    std::fs::write(&blocker, b"x").expect("file");
    let m1_dir = app.medium_dir("m1").display().to_string();
    let with = |field: &str, value: Value| {
        let mut body = medium_body(&app, "m3", "n3", "z3", 5);
        body[field] = value;
        body
    };
    let cases = [
        (
            with("media", json!("relative/m3")),
            StatusCode::BAD_REQUEST,
            "media must be an absolute directory path without '..' (got 'relative/m3')".to_string(),
        ),
        (
            with("media", json!("/srv/../m3")),
            StatusCode::BAD_REQUEST,
            "media must be an absolute directory path without '..' (got '/srv/../m3')".to_string(),
        ),
        (
            with("size", json!(0)),
            StatusCode::BAD_REQUEST,
            "size must be a whole number from 1 to 1073741824".to_string(),
        ),
        (
            with("mediaid", json!("no spaces")),
            StatusCode::BAD_REQUEST,
            "medium name must be 1 to 63 characters of letters, digits, '.', '_' or '-'"
                .to_string(),
        ),
        (
            with("extra", json!(1)),
            StatusCode::BAD_REQUEST,
            "unknown field 'extra' (accepted: mediaid, node, zone, media, size)".to_string(),
        ),
        (
            with("mediaid", json!("m1")),
            StatusCode::CONFLICT,
            "medium 'm1' already exists".to_string(),
        ),
        (
            with("media", json!(m1_dir)),
            StatusCode::CONFLICT,
            format!(
                "medium 'm1' already uses directory {}; each medium needs its own",
                canonical(&app.medium_dir("m1"))
            ),
        ),
        (
            with("media", json!(format!("{}/./", m1_dir))),
            StatusCode::CONFLICT,
            format!(
                "medium 'm1' already uses directory {}; each medium needs its own",
                canonical(&app.medium_dir("m1"))
            ),
        ),
        (
            with("node", json!("n1")),
            StatusCode::CONFLICT,
            "node 'n1' is in zone 'z1', not 'z3'".to_string(),
        ),
    ];
    for (body, status, expected) in cases {
        let (got, answer) = app.post("/media", body.clone()).await;
        assert_eq!(got, status, "{body}: {answer}");
        assert_eq!(message(&answer), expected, "{body}");
    }
    let (status, answer) = app
        .post(
            "/media",
            with("media", json!(blocker.join("m3").display().to_string())),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(
        message(&answer).starts_with(&format!(
            "medium 'm3': directory {} cannot be created or written: ",
            blocker.join("m3").display()
        )),
        "{answer}"
    );
    assert_eq!(media_sources(&app).await, [("m1".into(), "config".into())]);
    let (_, nodes) = app.get("/nodes").await;
    assert_eq!(nodes.as_array().map(Vec::len), Some(2), "{nodes}");
}

#[tokio::test]
async fn only_administrators_change_media_and_nodes() {
    let app = TestApp::start_with(small_config()).await;
    add_m2(&app).await;
    let user = app.user_in_tenant("t2", "user@example.com").await;
    let body = medium_body(&app, "m3", "n3", "z3", 5);
    for (method, path, body) in [
        (Method::POST, "/media", Some(body)),
        (Method::PATCH, "/media/m2", Some(json!({"size": 40}))),
        (Method::DELETE, "/media/m2", None),
        (Method::DELETE, "/nodes/n2", None),
    ] {
        let (status, answer) = app.request(Some(&user), method.clone(), path, body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {answer}");
        assert_eq!(message(&answer), "this operation requires an administrator");
    }
    let (status, _) = app.request(Some(&user), Method::GET, "/media", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        media_sources(&app).await,
        [("m1".into(), "config".into()), ("m2".into(), "api".into())]
    );
    assert_eq!(app.free("m2").await, 20);
}

/// The configuration file without its `[[media]]` (and no demo).
fn config_without_media(app: &TestApp) {
    let config = std::fs::read_to_string(app.config_path()).expect("config");
    let kept: Vec<&str> = config
        .split("\n\n")
        .filter(|table| !table.trim_start().starts_with("[[media]]"))
        .collect();
    std::fs::write(app.config_path(), kept.join("\n\n")).expect("config written");
}

#[tokio::test]
async fn a_restart_keeps_api_media_and_nodes_and_the_file_takes_over_what_it_lists() {
    let mut app = TestApp::start_with(small_config()).await;
    add_m2(&app).await;
    let (status, body) = app
        .post("/nodes", json!({"name": "host-7", "address": "127.0.0.7"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    app.create_policy("none", 0, 0, 0).await;
    let (id, _) = app.create_volume("v", 10, "none").await;
    let slice = app.slice_file(&id, &app.slices("v").await[0]);
    let slice = api_dir(&app, "m2").join(slice.strip_prefix(app.medium_dir("m2")).expect("on m2"));
    write_at(&slice, 4096, b"kept across restarts");

    app.restart().await;
    assert_eq!(
        media_sources(&app).await,
        [("m1".into(), "config".into()), ("m2".into(), "api".into())]
    );
    let (_, node) = app.get("/nodes/host-7").await;
    assert_eq!(node["managedby"], "api", "{node}");
    let (_, volume) = app.get("/volumes/v").await;
    assert_eq!(volume["state"], "Ready", "{volume}");
    assert_eq!(read_at(&slice, 4096, 20), b"kept across restarts");

    // A file without media still starts: the API's media are in the
    // database. m1 held nothing, so it is simply gone.
    app.stop();
    config_without_media(&app);
    app.launch().expect("starts with the API's media only");
    assert_eq!(media_sources(&app).await, [("m2".into(), "api".into())]);
    assert_eq!(app.free("m2").await, 10);

    // Listed in the file, m2 is the file's from now on, size included.
    app.stop();
    let config = std::fs::read_to_string(app.config_path()).expect("config");
    std::fs::write(
        app.config_path(),
        format!(
            "{config}\n[[media]]\nid = \"m2\"\nnode = \"n2\"\nzone = \"z2\"\ndirectory = \"{}\"\n\
             size_gib = 25\n",
            api_dir(&app, "m2").display()
        ),
    )
    .expect("config written");
    app.launch().expect("starts");
    assert_eq!(media_sources(&app).await, [("m2".into(), "config".into())]);
    assert_eq!(app.free("m2").await, 15);
    let (status, body) = app.delete("/media/m2").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        message(&body),
        "medium 'm2' is defined in the configuration file; change it there and restart svs"
    );
}

#[tokio::test]
async fn a_configured_node_removed_from_the_file_while_attached_stops_start_up() {
    let mut app = TestApp::start_with(small_config()).await;
    app.create_policy("none", 0, 0, 0).await;
    app.create_volume("v", 2, "none").await;
    attach(&app, "v", "host-1", false).await;
    app.stop();
    let config = std::fs::read_to_string(app.config_path()).expect("config");
    let without_host: Vec<&str> = config
        .split("\n\n")
        .filter(|table| !table.contains("host-1"))
        .collect();
    std::fs::write(app.config_path(), without_host.join("\n\n")).expect("config written");
    let err = app.launch().expect_err("refused");
    assert!(
        err.contains(
            "svs: nodes configuration: node 'host-1' is no longer in the configuration file, \
             but node 'host-1' has attachments of volume(s) 'v'; detach them first"
        ),
        "{err}"
    );
    // Put back, it starts as before.
    std::fs::write(app.config_path(), config).expect("config written");
    app.launch().expect("starts");
    let (_, node) = app.get("/nodes/host-1").await;
    assert_eq!(node["managedby"], "config", "{node}");
}
