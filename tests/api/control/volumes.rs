use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::os::unix::fs::MetadataExt;

// ---- helpers local to these tests ----

fn topology(media: Vec<TestMedium>) -> TestConfig {
    TestConfig {
        media,
        ..TestConfig::default()
    }
}

const NAME_RULE: &str =
    "volume name must be 1 to 63 characters of letters, digits, '.', '_' or '-'";

/// POSTs a volume and waits for its job; returns (volume id, job). The call must be accepted.
async fn start_volume(app: &TestApp, body: Value) -> (String, Value) {
    let (status, started) = app.post("/volumes", body).await;
    assert_eq!(status, StatusCode::OK, "create volume: {started}");
    let job = app
        .wait_job(started["JobID"].as_str().expect("JobID"))
        .await;
    (
        started["ObjectID"].as_str().expect("ObjectID").to_string(),
        job,
    )
}

/// Creates a volume whose job must end Done; returns its id.
async fn ready_volume(app: &TestApp, name: &str, size: u64, policy: &str) -> String {
    let (id, job) = app.create_volume(name, size, policy).await;
    assert_eq!(job["state"], "Done", "{job}");
    id
}

async fn delete_volume(app: &TestApp, volume: &str) -> Value {
    let (status, started) = app.delete(&format!("/volumes/{volume}")).await;
    assert_eq!(status, StatusCode::OK, "delete volume: {started}");
    app.wait_job(started["JobID"].as_str().expect("JobID"))
        .await
}

async fn list(app: &TestApp, path: &str) -> Vec<Value> {
    let (status, body) = app.get(path).await;
    assert_eq!(status, StatusCode::OK, "{path}: {body}");
    body.as_array().cloned().expect("a JSON array")
}

/// A slice as `GET /volumes/{volume}/slices` shows it, without its id.
fn sl(copy: u64, column: u64, media: &str, node: &str, zone: &str, size: u64) -> Value {
    json!({"copy": copy, "column": column, "media": media, "node": node, "zone": zone, "size": size})
}

async fn placement(app: &TestApp, volume: &str) -> Vec<Value> {
    app.slices(volume)
        .await
        .into_iter()
        .map(|mut s| {
            let obj = s.as_object_mut().expect("slice object");
            assert!(
                obj.remove("sliceid").is_some_and(|v| v.is_i64()),
                "sliceid is an integer"
            );
            // Named as jobs name it: c<copy>-k<column>.
            let name = format!("c{}-k{}", obj["copy"], obj["column"]);
            assert_eq!(obj.remove("name"), Some(Value::String(name)));
            let health = obj.remove("health");
            assert!(
                health
                    .as_ref()
                    .is_some_and(|h| h == "Healthy" || h == "Lost"),
                "health: {health:?}"
            );
            // Null, or the generation a stale (Lost) copy missed.
            let stale = obj.remove("stalegeneration");
            assert!(
                stale.as_ref().is_some_and(|g| g.is_null() || g.is_u64()),
                "stalegeneration: {stale:?}"
            );
            s
        })
        .collect()
}

/// The slice file exists, has the slice's logical size and allocates (almost) nothing.
fn assert_sparse_slice(app: &TestApp, volume_id: &str, slice: &Value) {
    let path = app.slice_path(
        slice["media"].as_str().expect("media"),
        volume_id,
        slice["copy"].as_u64().expect("copy"),
        slice["column"].as_u64().expect("column"),
    );
    let meta = std::fs::metadata(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        meta.len(),
        slice["size"].as_u64().expect("size") * GIB,
        "{}",
        path.display()
    );
    assert!(
        meta.blocks() * 512 <= 1024 * 1024,
        "{} is not sparse: {} blocks",
        path.display(),
        meta.blocks()
    );
}

/// (mediaid, freesize, volumescount) of every medium.
async fn usage(app: &TestApp) -> Vec<(String, u64, u64)> {
    list(app, "/media")
        .await
        .iter()
        .map(|m| {
            (
                m["mediaid"].as_str().expect("mediaid").to_string(),
                m["freesize"].as_u64().expect("freesize"),
                m["volumescount"].as_u64().expect("volumescount"),
            )
        })
        .collect()
}

fn u(id: &str, free: u64, count: u64) -> (String, u64, u64) {
    (id.to_string(), free, count)
}

/// Entries of a medium directory (volume directories live there).
fn medium_entries(app: &TestApp, medium: &str) -> Vec<String> {
    match std::fs::read_dir(app.medium_dir(medium)) {
        Ok(dir) => dir
            .map(|e| {
                e.expect("dir entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|n| !n.starts_with(".svs-probe"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

async fn raw_post(
    app: &TestApp,
    path: &str,
    content_type: Option<&str>,
    body: String,
) -> (StatusCode, Value) {
    let mut req = app
        .client
        .post(format!("{}{}", app.base, path))
        .header("authorization", &app.token)
        .body(body);
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    let resp = req.send().await.expect("request sent");
    let status = resp.status();
    let text = resp.text().await.expect("body read");
    let value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("body is not JSON: {text}"));
    (status, value)
}

fn two_media_two_nodes() -> TestConfig {
    topology(vec![
        medium("m1", "n1", "z1", 100),
        medium("m2", "n2", "z2", 100),
    ])
}

// ---- creation ----

#[tokio::test]
async fn creating_a_volume_starts_a_volume_create_job_that_places_sparse_slice_files() {
    let app = TestApp::start_with(two_media_two_nodes()).await;
    app.create_policy("mirror", 1, 0, 0).await;

    let (status, started) = app
        .post(
            "/volumes",
            json!({"name": "v1", "type": "block", "size": 10, "policy": "mirror"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    assert_eq!(started["Message"], "Volume creation started");
    let job_id = started["JobID"].as_str().expect("JobID is a string");
    assert!(
        job_id.parse::<u64>().is_ok(),
        "JobID is a number in a string: {job_id}"
    );
    let id = started["ObjectID"]
        .as_str()
        .expect("ObjectID is a string")
        .to_string();
    assert_eq!(started.as_object().unwrap().len(), 3, "{started}");

    let job = app.wait_job(job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(job["type"], "volume_create");
    assert_eq!(job["object"], id.as_str());
    assert_eq!(
        job["args"],
        json!({"name": "v1", "size": 10, "policy": "mirror", "type": "block"})
    );
    assert_eq!(job["progress"], 100);
    assert_eq!(
        job["details"],
        json!(["Volume 'v1' created: 10 GiB in 2 slice(s)"])
    );

    let slices = placement(&app, "v1").await;
    assert_eq!(
        slices,
        vec![
            sl(0, 0, "m1", "n1", "z1", 10),
            sl(1, 0, "m2", "n2", "z2", 10)
        ]
    );
    for s in &slices {
        assert_sparse_slice(&app, &id, s);
    }
    assert_eq!(usage(&app).await, vec![u("m1", 90, 1), u("m2", 90, 1)]);
}

#[tokio::test]
async fn a_volume_is_read_by_name_or_by_id_with_every_reference_field() {
    let app = TestApp::start_with(topology(vec![medium("m1", "n1", "z1", 100)])).await;
    app.create_policy("plain", 0, 0, 0).await;
    let (id, job) = start_volume(
        &app,
        json!({
            "name": "full", "type": "block", "size": 10, "policy": "plain",
            "consistencygroup": "cg1", "zonereplica": "zr", "volumegroupname": "vg",
            "replicationnode": "rn", "replicationvolumegroupname": "rvg",
            "capacitygroup": "cap", "throttlingscheme": "ts", "flavor": "filedirect",
            "allowdatamovement": true
        }),
    )
    .await;
    assert_eq!(job["state"], "Done", "{job}");
    let expected = json!({
        "name": "full", "volumeid": id, "type": "block", "contentvolume": "", "contentsnapshot": "",
        "size": 10, "maxsize": 100, "policy": "plain", "consistencygroup": "cg1",
        "node": "n1", "zone": "z1", "zones": ["z1"], "writtenbytes": 0, "zonereplica": "zr", "volumegroupname": "vg",
        "volumegroupid": id, "replicationnode": "rn", "replicationvolumegroupname": "rvg",
        "state": "Ready",
        "status": "Online", "progress": 100, "capacitygroup": "cap", "throttlingscheme": "ts",
        "allowdatamovement": false, "flavor": "filedirect", "filesystemprovisioned": false
    });
    let (status, by_name) = app.get("/volumes/full").await;
    assert_eq!(status, StatusCode::OK, "{by_name}");
    assert_eq!(by_name, expected);
    let (status, by_id) = app.get(&format!("/volumes/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{by_id}");
    assert_eq!(by_id, expected);
}

#[tokio::test]
async fn unset_optional_volume_fields_are_empty_or_omitted_and_the_flavor_is_regular() {
    let app = TestApp::start_with(topology(vec![medium("m1", "n1", "z1", 100)])).await;
    app.create_policy("plain", 0, 0, 0).await;
    // No type either: a block volume.
    let (id, job) = start_volume(&app, json!({"name": "bare", "size": 3, "policy": "plain"})).await;
    assert_eq!(job["state"], "Done", "{job}");
    let (status, v) = app.get("/volumes/bare").await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(
        v,
        json!({
            "name": "bare", "volumeid": id, "type": "block", "contentvolume": "", "contentsnapshot": "",
            "size": 3, "maxsize": 30, "policy": "plain", "consistencygroup": "", "node": "n1",
            "zone": "z1", "zones": ["z1"], "writtenbytes": 0, "zonereplica": "", "volumegroupid": id,
            "replicationnode": "", "state": "Ready", "status": "Online", "progress": 100,
            "allowdatamovement": false, "flavor": "regular", "filesystemprovisioned": false
        })
    );
    // Fields the reference requires non-empty (minLength 1) are left out
    // rather than sent as "" (found by fuzzing against the reference).
    for key in [
        "volumegroupname",
        "replicationvolumegroupname",
        "replicationvolumegroupid",
        "volumerecoveryjob",
        "capacitygroup",
        "throttlingscheme",
    ] {
        assert!(v.get(key).is_none(), "{key}: {v}");
    }
    // The same when set to "" explicitly.
    let (_, job) = start_volume(
        &app,
        json!({"name": "blank", "size": 1, "policy": "plain", "capacitygroup": "", "volumegroupname": ""}),
    )
    .await;
    assert_eq!(job["state"], "Done", "{job}");
    let (_, v) = app.get("/volumes/blank").await;
    assert!(
        v.get("capacitygroup").is_none() && v.get("volumegroupname").is_none(),
        "{v}"
    );
}

#[tokio::test]
async fn null_or_mistyped_optional_volume_fields_are_refused() {
    let app = TestApp::start_with(topology(vec![medium("m1", "n1", "z1", 100)])).await;
    app.create_policy("plain", 0, 0, 0).await;
    let cases = [
        ("zone", json!(null), "zone must be a string"),
        ("type", json!(null), "type must be a string"),
        (
            "capacitygroup",
            json!(null),
            "capacitygroup must be a string",
        ),
        (
            "allowdatamovement",
            json!("yes"),
            "allowdatamovement must be true or false",
        ),
        (
            "allowdatamovement",
            json!(null),
            "allowdatamovement must be true or false",
        ),
    ];
    for (key, value, message) in cases {
        let mut body = json!({"name": "v", "size": 1, "policy": "plain"});
        body[key] = value;
        let (status, reply) = app.post("/volumes", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {reply}");
        assert_eq!(reply, json!({"message": message}), "{body}");
    }
    assert_eq!(list(&app, "/volumes").await, Vec::<Value>::new());
    assert_eq!(list(&app, "/jobs").await, Vec::<Value>::new());
}

#[tokio::test]
async fn the_capacity_query_of_the_volume_list_must_be_a_boolean() {
    let app = TestApp::start().await;
    for query in ["capacity=true", "capacity=false", ""] {
        let (status, body) = app.get(&format!("/volumes?{query}")).await;
        assert_eq!(status, StatusCode::OK, "{query}: {body}");
        assert_eq!(body, json!([]));
    }
    for query in ["capacity=null", "capacity=", "capacity=1"] {
        let (status, body) = app.get(&format!("/volumes?{query}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(body, json!({"message": "capacity must be true or false"}));
    }
    let (status, body) = app.get("/jobs?internal=maybe").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body, json!({"message": "internal must be true or false"}));
}

#[tokio::test]
async fn listing_volumes_returns_the_tenants_volumes_sorted_by_name() {
    let app = TestApp::start_with(topology(vec![medium("m1", "n1", "z1", 100)])).await;
    app.create_policy("plain", 0, 0, 0).await;
    assert_eq!(list(&app, "/volumes").await, Vec::<Value>::new());
    let b = ready_volume(&app, "beta", 2, "plain").await;
    let a = ready_volume(&app, "alpha", 1, "plain").await;
    let volumes = list(&app, "/volumes").await;
    assert_eq!(volumes.len(), 2);
    assert_eq!(volumes[0]["name"], "alpha");
    assert_eq!(volumes[0]["volumeid"], a.as_str());
    assert_eq!(volumes[0]["size"], 1);
    assert_eq!(volumes[1]["name"], "beta");
    assert_eq!(volumes[1]["volumeid"], b.as_str());
    assert_eq!(volumes[1]["maxsize"], 20);
    for v in &volumes {
        let (_, single) = app
            .get(&format!("/volumes/{}", v["name"].as_str().unwrap()))
            .await;
        assert_eq!(&single, v, "the list shows what GET shows");
    }
}

#[tokio::test]
async fn the_volume_list_is_whole_by_default_and_paged_with_page_and_count() {
    let app = TestApp::start_with(topology(vec![medium("m1", "n1", "z1", 100)])).await;
    app.create_policy("plain", 0, 0, 0).await;
    for name in ["v3", "v1", "v5", "v2", "v4"] {
        ready_volume(&app, name, 1, "plain").await;
    }
    let names = |volumes: Vec<Value>| -> Vec<String> {
        volumes
            .iter()
            .map(|v| v["name"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let all = names(list(&app, "/volumes").await);
    assert_eq!(all, ["v1", "v2", "v3", "v4", "v5"]);
    assert_eq!(names(list(&app, "/volumes?count=2").await), all[0..2]);
    assert_eq!(
        names(list(&app, "/volumes?page=2&count=2").await),
        all[2..4]
    );
    assert_eq!(
        names(list(&app, "/volumes?count=2&page=3").await),
        all[4..5]
    );
    assert!(list(&app, "/volumes?page=4&count=2").await.is_empty());
    // page alone: pages of 100.
    assert_eq!(names(list(&app, "/volumes?page=1").await), all);
    assert!(list(&app, "/volumes?page=2").await.is_empty());
    assert!(list(&app, "/volumes?page=4294967&count=1000&capacity=true")
        .await
        .is_empty());
    // A page shows each volume as GET shows it.
    let page = list(&app, "/volumes?page=2&count=1").await;
    let (_, single) = app.get("/volumes/v2").await;
    assert_eq!(page, vec![single]);
    for (query, message) in [
        ("page=0", "page must be a whole number from 1 to 4294967"),
        (
            "page=4294968",
            "page must be a whole number from 1 to 4294967",
        ),
        (
            "page=x&count=2",
            "page must be a whole number from 1 to 4294967",
        ),
        ("count=0", "count must be a whole number from 1 to 1000"),
        ("count=1001", "count must be a whole number from 1 to 1000"),
        (
            "page=1&count=-1",
            "count must be a whole number from 1 to 1000",
        ),
        ("count=", "count must be a whole number from 1 to 1000"),
    ] {
        let (status, body) = app.get(&format!("/volumes?{query}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(body, json!({"message": message}), "{query}");
    }
}

#[tokio::test]
async fn a_file_volume_keeps_its_type() {
    let app = TestApp::start_with(topology(vec![medium("m1", "n1", "z1", 100)])).await;
    app.create_policy("plain", 0, 0, 0).await;
    let (id, job) = start_volume(
        &app,
        json!({"name": "fs", "type": "file", "size": 5, "policy": "plain"}),
    )
    .await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(job["args"]["type"], "file");
    let (_, v) = app.get("/volumes/fs").await;
    assert_eq!(v["type"], "file");
    let (_, v) = app.get(&format!("/volumes/{id}")).await;
    assert_eq!(v["type"], "file");
    assert_eq!(list(&app, "/volumes").await[0]["type"], "file");
}

#[tokio::test]
async fn the_smallest_size_and_a_whole_number_written_as_a_float_are_accepted() {
    let app = TestApp::start_with(topology(vec![medium("m1", "n1", "z1", 100)])).await;
    app.create_policy("plain", 0, 0, 0).await;
    let (id, job) = start_volume(
        &app,
        json!({"name": "one", "type": "block", "size": 1, "policy": "plain"}),
    )
    .await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_sparse_slice(&app, &id, &sl(0, 0, "m1", "n1", "z1", 1));
    let (_, job) = start_volume(
        &app,
        json!({"name": "two", "type": "block", "size": 2.0, "policy": "plain"}),
    )
    .await;
    assert_eq!(job["state"], "Done", "{job}");
    let (_, v) = app.get("/volumes/two").await;
    assert_eq!(v["size"], 2);
}

// ---- placement ----
//
// The placement rules themselves (columns, distinct media, nodes and zones,
// the most free space, the copies a resiliency keeps, the refusals) are
// tables of the planner's unit tests (crates/domain/src/planner/table_tests.rs).
// Here, what only the whole service shows: a policy's levels and a
// creation's zone reaching the planner, the slice files made, the space
// booked, the job's details and the API's answers.

#[tokio::test]
async fn a_volume_spans_two_media_when_no_single_medium_has_room() {
    let app = TestApp::start_with(topology(vec![
        medium("m1", "n1", "z1", 60),
        medium("m2", "n2", "z1", 60),
    ]))
    .await;
    app.create_policy("plain", 0, 0, 0).await;
    let (id, job) = app.create_volume("big", 99, "plain").await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(
        job["details"],
        json!(["Volume 'big' created: 99 GiB in 2 slice(s)"])
    );
    // Two equal columns, the size rounded up.
    let slices = placement(&app, "big").await;
    assert_eq!(
        slices,
        vec![
            sl(0, 0, "m1", "n1", "z1", 50),
            sl(0, 1, "m2", "n2", "z1", 50)
        ]
    );
    for s in &slices {
        assert_sparse_slice(&app, &id, s);
    }
    let (_, v) = app.get("/volumes/big").await;
    assert_eq!(v["size"], 99);
    assert_eq!(v["maxsize"], 990);
    assert_eq!(v["node"], "n1");
    assert_eq!(usage(&app).await, vec![u("m1", 10, 1), u("m2", 10, 1)]);
}

#[tokio::test]
async fn zone_resiliency_puts_the_copies_of_a_slice_in_distinct_zones() {
    let app = TestApp::start_with(topology(vec![
        medium("m1", "n1", "z1", 100),
        medium("m2", "n2", "z1", 90),
        medium("m3", "n3", "z2", 50),
    ]))
    .await;
    app.create_policy("zone1", 0, 0, 1).await;
    app.create_policy("node1", 0, 1, 0).await;
    ready_volume(&app, "a", 10, "zone1").await;
    assert_eq!(
        placement(&app, "a").await,
        vec![
            sl(0, 0, "m1", "n1", "z1", 10),
            sl(1, 0, "m3", "n3", "z2", 10)
        ]
    );
    // Node resiliency alone accepts another node in the same zone.
    ready_volume(&app, "b", 10, "node1").await;
    assert_eq!(
        placement(&app, "b").await,
        vec![
            sl(0, 0, "m1", "n1", "z1", 10),
            sl(1, 0, "m2", "n2", "z1", 10)
        ]
    );
}

#[tokio::test]
async fn a_resiliency_of_two_keeps_three_copies() {
    let app = TestApp::start_with(topology(vec![
        medium("m1", "n1", "z1", 100),
        medium("m2", "n1", "z1", 90),
        medium("m3", "n2", "z1", 80),
        medium("m4", "n3", "z1", 70),
    ]))
    .await;
    // copies = 1 + max(2, 1, 0) = 3, on distinct nodes.
    app.create_policy("triple", 2, 1, 0).await;
    let (id, job) = app.create_volume("v", 10, "triple").await;
    assert_eq!(
        job["details"],
        json!(["Volume 'v' created: 10 GiB in 3 slice(s)"]),
        "{job}"
    );
    let slices = placement(&app, "v").await;
    assert_eq!(
        slices,
        vec![
            sl(0, 0, "m1", "n1", "z1", 10),
            sl(1, 0, "m3", "n2", "z1", 10),
            sl(2, 0, "m4", "n3", "z1", 10)
        ]
    );
    for s in &slices {
        assert_sparse_slice(&app, &id, s);
    }
}

#[tokio::test]
async fn a_zone_given_at_creation_places_every_column_of_copy_zero_in_that_zone() {
    let app = TestApp::start_with(topology(vec![
        medium("m1", "n1", "z1", 100),
        medium("m2", "n2", "z2", 30),
        medium("m3", "n3", "z2", 30),
    ]))
    .await;
    app.create_policy("mirror", 1, 0, 0).await;
    app.create_policy("plain", 0, 0, 0).await;
    let (_, job) = start_volume(
        &app,
        json!({"name": "near", "type": "block", "size": 10, "policy": "mirror", "zone": "z2"}),
    )
    .await;
    assert_eq!(job["state"], "Done", "{job}");
    // Without the zone, copy 0 would go to m1 (most free space).
    assert_eq!(
        placement(&app, "near").await,
        vec![
            sl(0, 0, "m2", "n2", "z2", 10),
            sl(1, 0, "m1", "n1", "z1", 10)
        ]
    );
    let (_, v) = app.get("/volumes/near").await;
    assert_eq!(v["zone"], "z2");
    assert_eq!(v["node"], "n2");

    // 40 GiB fit in z2 only as two columns (m3 has 30 free, m2 20).
    let (_, job) = start_volume(
        &app,
        json!({"name": "spread", "type": "block", "size": 40, "policy": "plain", "zone": "z2"}),
    )
    .await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(
        placement(&app, "spread").await,
        vec![
            sl(0, 0, "m3", "n3", "z2", 20),
            sl(0, 1, "m2", "n2", "z2", 20)
        ]
    );
    assert_eq!(
        usage(&app).await,
        vec![u("m1", 90, 1), u("m2", 0, 2), u("m3", 10, 1)]
    );
}

#[tokio::test]
async fn an_unknown_zone_is_refused_and_nothing_is_created() {
    let app = TestApp::start_with(two_media_two_nodes()).await;
    app.create_policy("plain", 0, 0, 0).await;
    let (status, body) = app
        .post(
            "/volumes",
            json!({"name": "v", "type": "block", "size": 10, "policy": "plain", "zone": "z9"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body, json!({"message": "zone 'z9' has no media"}));
    assert_eq!(list(&app, "/volumes").await, Vec::<Value>::new());
    assert_eq!(list(&app, "/jobs").await, Vec::<Value>::new());
    assert_eq!(usage(&app).await, vec![u("m1", 100, 0), u("m2", 100, 0)]);
}

#[tokio::test]
async fn without_a_placement_the_create_job_ends_in_error_and_leaves_nothing_behind() {
    // Both media on one node: node resiliency cannot be met.
    let app = TestApp::start_with(topology(vec![
        medium("m1", "n1", "z1", 50),
        medium("m2", "n1", "z1", 50),
    ]))
    .await;
    app.create_policy("node1", 0, 1, 0).await;
    let (id, job) = app.create_volume("v", 10, "node1").await;
    assert_eq!(job["state"], "Error", "{job}");
    assert_eq!(job["status"], "Error");
    assert_eq!(
        job["details"],
        json!(["Could not create volume 'v': no placement found for a volume of 10 GiB with 2 copies: not enough free space on media that satisfy the policy's resiliency"])
    );
    assert_ne!(job["endtime"], "");

    let (status, body) = app.get("/volumes/v").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({"message": "volume 'v' not found"}));
    let (status, _) = app.get(&format!("/volumes/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app.get("/volumes/v/slices").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(list(&app, "/volumes").await, Vec::<Value>::new());
    assert_eq!(usage(&app).await, vec![u("m1", 50, 0), u("m2", 50, 0)]);
    assert_eq!(medium_entries(&app, "m1"), Vec::<String>::new());
    assert_eq!(medium_entries(&app, "m2"), Vec::<String>::new());
}

#[tokio::test]
async fn a_volume_larger_than_any_placement_fails_and_its_name_can_be_used_again() {
    let app = TestApp::start_with(topology(vec![
        medium("m1", "n1", "z1", 50),
        medium("m2", "n2", "z1", 50),
    ]))
    .await;
    app.create_policy("plain", 0, 0, 0).await;
    let (_, job) = app.create_volume("v", 101, "plain").await;
    assert_eq!(job["state"], "Error", "{job}");
    assert_eq!(
        job["details"],
        json!(["Could not create volume 'v': no placement found for a volume of 101 GiB with 1 copies: not enough free space on media that satisfy the policy's resiliency"])
    );
    assert_eq!(usage(&app).await, vec![u("m1", 50, 0), u("m2", 50, 0)]);

    let id = ready_volume(&app, "v", 100, "plain").await;
    assert_eq!(
        placement(&app, "v").await,
        vec![
            sl(0, 0, "m1", "n1", "z1", 50),
            sl(0, 1, "m2", "n2", "z1", 50)
        ]
    );
    let (_, v) = app.get("/volumes/v").await;
    assert_eq!(v["volumeid"], id.as_str());
}

#[tokio::test]
async fn the_largest_size_is_accepted_and_fails_only_for_lack_of_space() {
    let app = TestApp::start_with(topology(vec![medium("m1", "n1", "z1", 100)])).await;
    app.create_policy("plain", 0, 0, 0).await;
    let (_, job) = app.create_volume("huge", 1_048_576, "plain").await;
    assert_eq!(job["state"], "Error", "{job}");
    assert_eq!(
        job["details"],
        json!(["Could not create volume 'huge': no placement found for a volume of 1048576 GiB with 1 copies: not enough free space on media that satisfy the policy's resiliency"])
    );
    assert_eq!(usage(&app).await, vec![u("m1", 100, 0)]);
}

// ---- deletion ----

#[tokio::test]
async fn deleting_a_volume_removes_its_slice_files_and_frees_its_space() {
    let app = TestApp::start_with(two_media_two_nodes()).await;
    app.create_policy("mirror", 1, 0, 0).await;
    let id = ready_volume(&app, "v", 10, "mirror").await;
    let slices = placement(&app, "v").await;
    assert_eq!(usage(&app).await, vec![u("m1", 90, 1), u("m2", 90, 1)]);

    let (status, started) = app.delete("/volumes/v").await;
    assert_eq!(status, StatusCode::OK, "{started}");
    assert_eq!(started["Message"], "Volume deletion started");
    assert_eq!(started["ObjectID"], id.as_str());
    let job = app
        .wait_job(started["JobID"].as_str().expect("JobID"))
        .await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(job["type"], "volume_delete");
    assert_eq!(job["object"], id.as_str());
    assert_eq!(job["args"], json!({"name": "v", "force": false}));
    assert_eq!(job["progress"], 100);
    assert_eq!(job["details"], json!(["Volume 'v' deleted"]));

    for s in &slices {
        let path = app.slice_path(
            s["media"].as_str().unwrap(),
            &id,
            s["copy"].as_u64().unwrap(),
            s["column"].as_u64().unwrap(),
        );
        assert!(!path.exists(), "{} is gone", path.display());
    }
    assert_eq!(medium_entries(&app, "m1"), Vec::<String>::new());
    assert_eq!(medium_entries(&app, "m2"), Vec::<String>::new());
    assert_eq!(usage(&app).await, vec![u("m1", 100, 0), u("m2", 100, 0)]);
    let nodes = list(&app, "/nodes").await;
    assert_eq!(nodes[0]["freesize"], 100);
    assert_eq!(nodes[1]["freesize"], 100);

    let (status, body) = app.get("/volumes/v").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({"message": "volume 'v' not found"}));
    assert_eq!(list(&app, "/volumes").await, Vec::<Value>::new());
    let (status, body) = app.delete("/volumes/v").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({"message": "volume 'v' not found"}));
}

#[tokio::test]
async fn a_volume_spread_over_several_media_is_deleted_by_its_id() {
    let app = TestApp::start_with(topology(vec![
        medium("m1", "n1", "z1", 60),
        medium("m2", "n2", "z1", 60),
    ]))
    .await;
    app.create_policy("plain", 0, 0, 0).await;
    let id = ready_volume(&app, "wide", 100, "plain").await;
    let slices = app.slices(&id).await;
    assert_eq!(slices.len(), 2, "slices by id");
    let job = delete_volume(&app, &id).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(job["details"], json!(["Volume 'wide' deleted"]));
    for s in &slices {
        let path = app.slice_path(
            s["media"].as_str().unwrap(),
            &id,
            s["copy"].as_u64().unwrap(),
            s["column"].as_u64().unwrap(),
        );
        assert!(!path.exists(), "{} is gone", path.display());
    }
    assert_eq!(usage(&app).await, vec![u("m1", 60, 0), u("m2", 60, 0)]);
    // The space is really free again: the same volume fits once more.
    ready_volume(&app, "wide", 100, "plain").await;
}

#[tokio::test]
async fn unknown_volumes_are_not_found() {
    let app = TestApp::start_with(topology(vec![medium("m1", "n1", "z1", 100)])).await;
    for (method, path) in [
        (reqwest::Method::GET, "/volumes/nope"),
        (reqwest::Method::GET, "/volumes/nope/slices"),
        (reqwest::Method::DELETE, "/volumes/nope"),
    ] {
        let (status, body) = app.request(Some(&app.token), method, path, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(
            body,
            json!({"message": "volume 'nope' not found"}),
            "{path}"
        );
    }
}

// ---- names and tenants ----

#[tokio::test]
async fn volume_names_are_1_to_63_letters_digits_dots_underscores_or_dashes() {
    let app = TestApp::start_with(topology(vec![medium("m1", "n1", "z1", 1000)])).await;
    app.create_policy("plain", 0, 0, 0).await;
    let longest = "a".repeat(63);
    for good in [longest.as_str(), "db-01.data_x", "A", "9.9_Z-z"] {
        let (status, body) = app
            .post(
                "/volumes",
                json!({"name": good, "type": "block", "size": 1, "policy": "plain"}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{good}: {body}");
        let job = app.wait_job(body["JobID"].as_str().unwrap()).await;
        assert_eq!(job["state"], "Done", "{job}");
        let (status, v) = app.get(&format!("/volumes/{good}")).await;
        assert_eq!(status, StatusCode::OK, "{good}: {v}");
        assert_eq!(v["name"], good);
    }
    let too_long = "a".repeat(64);
    for bad in [
        too_long.as_str(),
        "a b",
        "a/b",
        "é",
        "x!",
        "semi;colon",
        " lead",
        "tab\t",
    ] {
        let (status, body) = app
            .post(
                "/volumes",
                json!({"name": bad, "type": "block", "size": 1, "policy": "plain"}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad:?}");
        assert_eq!(body, json!({"message": NAME_RULE}), "{bad:?}");
    }
    assert_eq!(list(&app, "/volumes").await.len(), 4);
    assert_eq!(list(&app, "/jobs").await.len(), 4);
}

#[tokio::test]
async fn a_duplicate_volume_name_in_the_same_tenant_is_a_conflict_that_starts_nothing() {
    let app = TestApp::start_with(two_media_two_nodes()).await;
    app.create_policy("plain", 0, 0, 0).await;
    let id = ready_volume(&app, "v", 10, "plain").await;
    let (status, body) = app
        .post(
            "/volumes",
            json!({"name": "v", "type": "file", "size": 20, "policy": "plain"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        body,
        json!({"message": "a volume named 'v' already exists"})
    );
    let volumes = list(&app, "/volumes").await;
    assert_eq!(volumes.len(), 1);
    assert_eq!(volumes[0]["volumeid"], id.as_str());
    assert_eq!(volumes[0]["size"], 10);
    assert_eq!(list(&app, "/jobs").await.len(), 1);
    assert_eq!(usage(&app).await, vec![u("m1", 90, 1), u("m2", 100, 0)]);
}

#[tokio::test]
async fn the_same_volume_name_in_another_tenant_is_fine_and_tenants_never_see_each_others_volumes()
{
    let app = TestApp::start_with(two_media_two_nodes()).await;
    app.create_policy("plain", 0, 0, 0).await;
    let mine = ready_volume(&app, "v", 10, "plain").await;

    let other = app.user_in_tenant("other", "o@example.com").await;
    // Policies are per tenant too.
    let (status, body) = app
        .request(
            Some(&other),
            reqwest::Method::POST,
            "/volumes",
            Some(json!({"name": "v", "type": "block", "size": 10, "policy": "plain"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body, json!({"message": "policy 'plain' does not exist"}));
    let (status, body) = app
        .request(Some(&other), reqwest::Method::POST, "/policies", Some(json!({"name": "plain", "resiliencymedia": 0, "resiliencynode": 0, "resiliencyzone": 0})))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, started) = app
        .request(
            Some(&other),
            reqwest::Method::POST,
            "/volumes",
            Some(json!({"name": "v", "type": "block", "size": 20, "policy": "plain"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let theirs = started["ObjectID"].as_str().unwrap().to_string();
    let job = app
        .wait_job_as(&other, started["JobID"].as_str().unwrap())
        .await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_ne!(mine, theirs);

    // Each tenant sees its own "v".
    let (_, v) = app.get("/volumes/v").await;
    assert_eq!(v["volumeid"], mine.as_str());
    assert_eq!(v["size"], 10);
    let (_, v) = app
        .request(Some(&other), reqwest::Method::GET, "/volumes/v", None)
        .await;
    assert_eq!(v["volumeid"], theirs.as_str());
    assert_eq!(v["size"], 20);
    let mine_listed = list(&app, "/volumes").await;
    assert_eq!(mine_listed.len(), 1);
    assert_eq!(mine_listed[0]["volumeid"], mine.as_str());

    // The other tenant's volume answers 404, exactly like a missing one.
    for (method, path) in [
        (reqwest::Method::GET, format!("/volumes/{mine}")),
        (reqwest::Method::GET, format!("/volumes/{mine}/slices")),
        (reqwest::Method::DELETE, format!("/volumes/{mine}")),
    ] {
        let (status, body) = app.request(Some(&other), method, &path, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(
            body,
            json!({"message": format!("volume '{mine}' not found")}),
            "{path}"
        );
    }
    let (status, _) = app.get(&format!("/volumes/{theirs}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Both volumes are still there.
    assert_eq!(usage(&app).await, vec![u("m1", 90, 1), u("m2", 80, 1)]);
}

// ---- bad input ----

#[tokio::test]
async fn bad_create_requests_are_refused_with_a_message_and_create_nothing() {
    let app = TestApp::start_with(two_media_two_nodes()).await;
    app.create_policy("plain", 0, 0, 0).await;
    let whole = "size must be a whole number from 1 to 1048576";
    let cases: Vec<(&str, Value, &str)> = vec![
        ("size", json!(0), whole),
        ("size", json!(1_048_577), whole),
        ("size", json!(2.5), whole),
        ("size", json!(-1), whole),
        ("size", json!(1e300), whole),
        ("size", json!("10"), "size must be a number"),
        ("size", json!(true), "size must be a number"),
        ("size", json!([10]), "size must be a number"),
        ("size", Value::Null, "size is required"),
        ("name", Value::Null, "name is required"),
        ("name", json!(""), "name is required"),
        ("name", json!(7), "name must be a string"),
        ("name", json!("bad name"), NAME_RULE),
        ("policy", Value::Null, "policy is required"),
        ("policy", json!(""), "policy is required"),
        ("policy", json!("nope"), "policy 'nope' does not exist"),
        ("policy", json!(3), "policy must be a string"),
        (
            "type",
            json!("object"),
            "type must be \"block\" or \"file\"",
        ),
        ("type", json!("Block"), "type must be \"block\" or \"file\""),
        ("type", json!(1), "type must be a string"),
        ("zone", json!(5), "zone must be a string"),
        ("zone", json!("z9"), "zone 'z9' has no media"),
        (
            "contentvolume",
            json!("other"),
            "contentvolume: creating a volume from a whole volume is not supported; name one of \
             its snapshots in contentsnapshot",
        ),
        (
            "contentsnapshot",
            json!("snap"),
            "contentsnapshot: name the snapshot's volume in contentvolume",
        ),
        (
            "flavor",
            json!("turbo"),
            "flavor must be \"regular\" or \"filedirect\"",
        ),
        ("capacitygroup", json!(5), "capacitygroup must be a string"),
    ];
    for (key, value, message) in cases {
        let mut body = json!({"name": "v", "type": "block", "size": 10, "policy": "plain"});
        body[key] = value.clone();
        let (status, reply) = app.post("/volumes", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {reply}");
        assert_eq!(reply, json!({"message": message}), "{body}");
        // Leaving the field out is the same as null.
        if value.is_null() {
            body.as_object_mut().unwrap().remove(key);
            let (status, reply) = app.post("/volumes", body.clone()).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {reply}");
            assert_eq!(reply, json!({"message": message}), "{body}");
        }
    }
    assert_eq!(list(&app, "/volumes").await, Vec::<Value>::new());
    assert_eq!(list(&app, "/jobs").await, Vec::<Value>::new());
    assert_eq!(usage(&app).await, vec![u("m1", 100, 0), u("m2", 100, 0)]);
    assert_eq!(medium_entries(&app, "m1"), Vec::<String>::new());
}

#[tokio::test]
async fn malformed_create_bodies_are_refused_with_a_json_message() {
    let app = TestApp::start_with(two_media_two_nodes()).await;
    app.create_policy("plain", 0, 0, 0).await;
    let json_ct = Some("application/json");
    for body in ["[]", "null", "10", "\"v\""] {
        let (status, reply) = raw_post(&app, "/volumes", json_ct, body.to_string()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(
            reply,
            json!({"message": "request body must be a JSON object"}),
            "{body}"
        );
    }
    for body in ["{\"name\":", "", "{name: 'v'}"] {
        let (status, reply) = raw_post(&app, "/volumes", json_ct, body.to_string()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body:?}");
        let message = reply["message"].as_str().expect("message");
        assert!(
            message.starts_with("invalid JSON body: "),
            "{body:?}: {message}"
        );
    }
    let valid = json!({"name": "v", "type": "block", "size": 10, "policy": "plain"}).to_string();
    let (status, reply) = raw_post(&app, "/volumes", None, valid.clone()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        reply,
        json!({"message": "request body must be JSON with content-type: application/json"})
    );
    let (status, reply) = raw_post(&app, "/volumes", Some("text/plain"), valid).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        reply,
        json!({"message": "request body must be JSON with content-type: application/json"})
    );
    let padding = "x".repeat(1024 * 1024);
    let huge = json!({"name": "v", "type": "block", "size": 10, "policy": "plain", "consistencygroup": padding}).to_string();
    let (status, reply) = raw_post(&app, "/volumes", json_ct, huge).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        reply,
        json!({"message": "request body is larger than 1048576 bytes"})
    );

    assert_eq!(list(&app, "/volumes").await, Vec::<Value>::new());
    assert_eq!(list(&app, "/jobs").await, Vec::<Value>::new());
}

#[tokio::test]
async fn odd_volume_paths_and_methods_get_json_errors_never_a_500() {
    let app = TestApp::start_with(topology(vec![medium("m1", "n1", "z1", 100)])).await;
    app.create_policy("plain", 0, 0, 0).await;
    ready_volume(&app, "v", 1, "plain").await;
    let long = "x".repeat(2000);
    let cases: Vec<(reqwest::Method, String, StatusCode, String)> = vec![
        (
            reqwest::Method::GET,
            "/volumes/a%2Fb".into(),
            StatusCode::NOT_FOUND,
            "volume 'a/b' not found".into(),
        ),
        (
            reqwest::Method::GET,
            "/volumes/%25".into(),
            StatusCode::NOT_FOUND,
            "volume '%' not found".into(),
        ),
        (
            reqwest::Method::GET,
            "/volumes/%20".into(),
            StatusCode::NOT_FOUND,
            "volume ' ' not found".into(),
        ),
        (
            reqwest::Method::GET,
            format!("/volumes/{long}"),
            StatusCode::NOT_FOUND,
            format!("volume '{long}' not found"),
        ),
        (
            reqwest::Method::DELETE,
            "/volumes/a'b".into(),
            StatusCode::NOT_FOUND,
            "volume 'a'b' not found".into(),
        ),
        (
            reqwest::Method::GET,
            "/volumes/v/slices/0".into(),
            StatusCode::NOT_FOUND,
            "no such route".into(),
        ),
        (
            reqwest::Method::PUT,
            "/volumes/v".into(),
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed on this route".into(),
        ),
        (
            reqwest::Method::POST,
            "/volumes/v/slices".into(),
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed on this route".into(),
        ),
        (
            reqwest::Method::DELETE,
            "/volumes".into(),
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed on this route".into(),
        ),
        (
            reqwest::Method::PUT,
            "/media".into(),
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed on this route".into(),
        ),
    ];
    for (method, path, status, message) in cases {
        let (got, body) = app
            .request(Some(&app.token), method.clone(), &path, None)
            .await;
        assert_eq!(got, status, "{method} {path}: {body}");
        assert_eq!(body, json!({"message": message}), "{method} {path}");
    }
    // Path segments that are not UTF-8: a 400 with a JSON message.
    for path in [
        "/volumes/%FF",
        "/volumes/%FF/slices",
        "/media/%FF",
        "/nodes/%FF",
        "/jobs/%FF",
    ] {
        let (status, body) = app.get(path).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.contains("UTF-8"), "{path}: {body}");
    }
    // The volume is untouched by all that.
    let (status, v) = app.get("/volumes/v").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["state"], "Ready");
}

// ---- media and nodes ----

#[tokio::test]
async fn media_and_nodes_report_size_free_space_and_volume_counts_true_to_allocations() {
    let app = TestApp::start_with(topology(vec![
        medium("m1", "n1", "z1", 100),
        medium("m2", "n1", "z1", 50),
        medium("m3", "n2", "z2", 80),
    ]))
    .await;
    app.create_policy("mirror", 1, 0, 0).await;
    app.create_policy("plain", 0, 0, 0).await;

    let media = list(&app, "/media").await;
    let shape: Vec<Value> = media
        .iter()
        .map(|m| {
            json!({"mediaid": m["mediaid"], "node": m["node"], "zone": m["zone"], "size": m["size"],
                   "freesize": m["freesize"], "volumescount": m["volumescount"], "state": m["state"]})
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            json!({"mediaid": "m1", "node": "n1", "zone": "z1", "size": 100, "freesize": 100, "volumescount": 0, "state": "Online"}),
            json!({"mediaid": "m2", "node": "n1", "zone": "z1", "size": 50, "freesize": 50, "volumescount": 0, "state": "Online"}),
            json!({"mediaid": "m3", "node": "n2", "zone": "z2", "size": 80, "freesize": 80, "volumescount": 0, "state": "Online"}),
        ]
    );
    for m in &media {
        let (status, one) = app
            .get(&format!("/media/{}", m["mediaid"].as_str().unwrap()))
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(&one, m, "GET /media/{{id}} shows what the list shows");
    }
    let nodes = |free1: u64, free2: u64| {
        vec![
            json!({"name": "n1", "zone": "z1", "size": 150, "freesize": free1, "mediacount": 2, "state": "Online"}),
            json!({"name": "n2", "zone": "z2", "size": 80, "freesize": free2, "mediacount": 1, "state": "Online"}),
        ]
    };
    async fn node_shape(app: &TestApp) -> Vec<Value> {
        let nodes = list(app, "/nodes").await;
        for n in &nodes {
            let (status, one) = app
                .get(&format!("/nodes/{}", n["name"].as_str().unwrap()))
                .await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(&one, n, "GET /nodes/{{name}} shows what the list shows");
        }
        nodes
            .iter()
            .map(|n| {
                json!({"name": n["name"], "zone": n["zone"], "size": n["size"], "freesize": n["freesize"],
                       "mediacount": n["mediacount"], "state": n["state"]})
            })
            .collect()
    }
    assert_eq!(node_shape(&app).await, nodes(150, 80));

    // a: copy 0 on m1, copy 1 on m3 (most free space).
    ready_volume(&app, "a", 10, "mirror").await;
    assert_eq!(
        usage(&app).await,
        vec![u("m1", 90, 1), u("m2", 50, 0), u("m3", 70, 1)]
    );
    assert_eq!(node_shape(&app).await, nodes(140, 70));
    // b: on m1 again.
    ready_volume(&app, "b", 20, "plain").await;
    assert_eq!(
        usage(&app).await,
        vec![u("m1", 70, 2), u("m2", 50, 0), u("m3", 70, 1)]
    );
    assert_eq!(node_shape(&app).await, nodes(120, 70));

    // Resize a in place: each of its slices grows by 20.
    let (status, started) = app.patch("/volumes/a", json!({"size": 30})).await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let job = app.wait_job(started["JobID"].as_str().unwrap()).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(
        usage(&app).await,
        vec![u("m1", 50, 2), u("m2", 50, 0), u("m3", 50, 1)]
    );
    assert_eq!(node_shape(&app).await, nodes(100, 50));

    assert_eq!(delete_volume(&app, "a").await["state"], "Done");
    assert_eq!(
        usage(&app).await,
        vec![u("m1", 80, 1), u("m2", 50, 0), u("m3", 80, 0)]
    );
    assert_eq!(node_shape(&app).await, nodes(130, 80));
    assert_eq!(delete_volume(&app, "b").await["state"], "Done");
    assert_eq!(
        usage(&app).await,
        vec![u("m1", 100, 0), u("m2", 50, 0), u("m3", 80, 0)]
    );
    assert_eq!(node_shape(&app).await, nodes(150, 80));
}

#[tokio::test]
async fn media_and_nodes_stay_true_across_a_restart() {
    let mut app = TestApp::start_with(two_media_two_nodes()).await;
    app.create_policy("mirror", 1, 0, 0).await;
    ready_volume(&app, "v", 10, "mirror").await;
    app.restart().await;
    assert_eq!(usage(&app).await, vec![u("m1", 90, 1), u("m2", 90, 1)]);
    let (_, v) = app.get("/volumes/v").await;
    assert_eq!(v["state"], "Ready");
    assert_eq!(
        placement(&app, "v").await,
        vec![
            sl(0, 0, "m1", "n1", "z1", 10),
            sl(1, 0, "m2", "n2", "z2", 10)
        ]
    );
}

#[tokio::test]
async fn unknown_media_and_nodes_are_not_found() {
    let app = TestApp::start_with(two_media_two_nodes()).await;
    let (status, body) = app.get("/media/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({"message": "media 'nope' not found"}));
    let (status, body) = app.get("/nodes/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({"message": "node 'nope' not found"}));
    // A medium id is not a node name and the other way round.
    let (status, _) = app.get("/nodes/m1").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app.get("/media/n1").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

// ---- failures and concurrency ----

#[tokio::test]
async fn a_creation_that_fails_on_disk_removes_what_it_created_and_frees_the_space() {
    let app = TestApp::start_with(topology(vec![
        medium("m1", "n1", "z1", 100),
        medium("m2", "n2", "z2", 50),
    ]))
    .await;
    app.create_policy("mirror", 1, 0, 0).await;
    // Copy 0 goes to m1 and is created; copy 1 cannot be created on m2.
    let m2 = app.medium_dir("m2");
    std::fs::remove_dir_all(&m2).expect("m2 removed");
    std::fs::write(&m2, b"not a directory").expect("m2 replaced by a file");

    let (id, job) = app.create_volume("v", 10, "mirror").await;
    assert_eq!(job["state"], "Error", "{job}");
    let detail = job["details"]
        .as_array()
        .and_then(|d| d.last())
        .and_then(Value::as_str)
        .unwrap_or_default();
    assert!(
        detail.starts_with("Could not create volume 'v': slice "),
        "{detail}"
    );
    assert!(detail.contains("on medium 'm2'"), "{detail}");
    let (status, _) = app.get("/volumes/v").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(!app.slice_path("m1", &id, 0, 0).exists(), "copy 0 removed");
    assert_eq!(medium_entries(&app, "m1"), Vec::<String>::new());
    assert_eq!(usage(&app).await, vec![u("m1", 100, 0), u("m2", 50, 0)]);

    // With m2 usable again the same volume is created.
    std::fs::remove_file(&m2).expect("file removed");
    std::fs::create_dir(&m2).expect("m2 back");
    let id = ready_volume(&app, "v", 10, "mirror").await;
    for s in &placement(&app, "v").await {
        assert_sparse_slice(&app, &id, s);
    }
}

#[tokio::test]
async fn concurrent_creations_never_book_the_same_free_space() {
    let app = TestApp::start_with(topology(vec![medium("m1", "n1", "z1", 100)])).await;
    app.create_policy("plain", 0, 0, 0).await;
    let body = |name: &str| json!({"name": name, "type": "block", "size": 30, "policy": "plain"});
    let (r1, r2, r3, r4, r5) = tokio::join!(
        app.post("/volumes", body("v1")),
        app.post("/volumes", body("v2")),
        app.post("/volumes", body("v3")),
        app.post("/volumes", body("v4")),
        app.post("/volumes", body("v5")),
    );
    let mut done = 0;
    let mut failed = 0;
    for (status, started) in [r1, r2, r3, r4, r5] {
        assert_eq!(status, StatusCode::OK, "{started}");
        let job = app.wait_job(started["JobID"].as_str().unwrap()).await;
        match job["state"].as_str() {
            Some("Done") => done += 1,
            Some("Error") => failed += 1,
            _ => panic!("{job}"),
        }
    }
    // 3 × 30 GiB fit in 100 GiB; a fourth does not.
    assert_eq!((done, failed), (3, 2));
    assert_eq!(list(&app, "/volumes").await.len(), 3);
    assert_eq!(usage(&app).await, vec![u("m1", 10, 3)]);
}

#[tokio::test]
async fn concurrent_creations_with_one_name_make_one_volume() {
    let app = TestApp::start_with(topology(vec![medium("m1", "n1", "z1", 100)])).await;
    app.create_policy("plain", 0, 0, 0).await;
    let body = json!({"name": "same", "type": "block", "size": 1, "policy": "plain"});
    let (r1, r2, r3, r4) = tokio::join!(
        app.post("/volumes", body.clone()),
        app.post("/volumes", body.clone()),
        app.post("/volumes", body.clone()),
        app.post("/volumes", body.clone()),
    );
    let mut accepted = Vec::new();
    for (status, reply) in [r1, r2, r3, r4] {
        if status == StatusCode::OK {
            accepted.push(reply);
        } else {
            assert_eq!(status, StatusCode::CONFLICT, "{reply}");
            assert_eq!(
                reply,
                json!({"message": "a volume named 'same' already exists"})
            );
        }
    }
    assert_eq!(accepted.len(), 1);
    let job = app.wait_job(accepted[0]["JobID"].as_str().unwrap()).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(list(&app, "/jobs").await.len(), 1);
    assert_eq!(usage(&app).await, vec![u("m1", 99, 1)]);
}

#[tokio::test]
async fn nodes_report_how_many_distinct_volumes_use_them() {
    let app = TestApp::start_with(topology(vec![
        medium("m1", "n1", "z1", 100),
        medium("m2", "n1", "z1", 100),
        medium("m3", "n2", "z1", 50),
    ]))
    .await;
    app.create_policy("mirror", 1, 0, 0).await;
    app.create_policy("plain", 0, 0, 0).await;
    // Both copies of a on n1 (m1 and m2): n1 counts it once.
    ready_volume(&app, "a", 10, "mirror").await;
    assert_eq!(
        placement(&app, "a").await,
        vec![
            sl(0, 0, "m1", "n1", "z1", 10),
            sl(1, 0, "m2", "n1", "z1", 10)
        ]
    );
    let nodes = list(&app, "/nodes").await;
    assert_eq!(nodes[0]["volumescount"], 1, "{nodes:?}");
    assert_eq!(nodes[1]["volumescount"], 0, "{nodes:?}");
    let (_, n1) = app.get("/nodes/n1").await;
    assert_eq!(n1["volumescount"], 1, "{n1}");
    assert_eq!(delete_volume(&app, "a").await["state"], "Done");
    let (_, n1) = app.get("/nodes/n1").await;
    assert_eq!(n1["volumescount"], 0, "{n1}");
}
