//! Fronts on storage nodes (`fronts = "nodes"`), the control plane's side:
//! the fronts long poll and the failures report of `svs storage-node`
//! (their authentication and bad bodies), the spec a poll answers for an
//! attached volume, and the attach job waiting for the node's report.
//! The node's side is played by the test itself.

use crate::harness::storage_nodes::{
    free_port, node_with_credential, register, storage_nodes_config, wait_served,
    StorageNodeProcess,
};
use crate::harness::{TestApp, GIB};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::Duration;

/// `POST /nodes/{node}/storage/{what}` as `credential` (a whole
/// `authorization` value).
async fn storage_post(
    app: &TestApp,
    authorization: &str,
    node: &str,
    what: &str,
    body: Value,
) -> (StatusCode, Value) {
    app.request(
        Some(authorization),
        Method::POST,
        &format!("/nodes/{node}/storage/{what}"),
        Some(body),
    )
    .await
}

async fn start() -> TestApp {
    TestApp::start_with(storage_nodes_config(&["fronts = \"nodes\""])).await
}

#[tokio::test]
async fn fronts_routes_take_only_their_own_nodes_storage_credential_and_refuse_bad_bodies() {
    let app = start().await;
    let c1 = node_with_credential(&app, "sn-1", "127.0.0.2", "z1", "storage").await;
    node_with_credential(&app, "sn-2", "127.0.0.3", "z2", "storage").await;
    let agent = node_with_credential(&app, "host-a", "127.0.0.4", "", "agent").await;
    let bearer = |c: &str| format!("Bearer {c}");
    let poll = json!({"version": "", "open": []});
    let failures = json!({"failures": []});

    for (what, body) in [("fronts", &poll), ("failures", &failures)] {
        for (authorization, node, code, message) in [
            (bearer("svsnode.0123456789abcdef.wrong"), "sn-1", StatusCode::UNAUTHORIZED,
             "invalid or revoked node credential"),
            (bearer(&c1), "sn-2", StatusCode::FORBIDDEN,
             "this credential belongs to node 'sn-1', not 'sn-2'"),
            (bearer(&agent), "host-a", StatusCode::FORBIDDEN,
             "only the node's storage node process may use this endpoint; this is an agent credential"),
            (app.token.clone(), "sn-1", StatusCode::FORBIDDEN,
             "only the node's storage node process may use this endpoint"),
        ] {
            let (status, answer) =
                storage_post(&app, &authorization, node, what, body.clone()).await;
            assert_eq!(
                (status, answer["message"].as_str()),
                (code, Some(message)),
                "{what} {node}: {answer}"
            );
        }
        let (status, answer) = app
            .request(
                None,
                Method::POST,
                &format!("/nodes/sn-1/storage/{what}"),
                Some(body.clone()),
            )
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {answer}");
    }

    for (what, bad, message) in [
        (
            "fronts",
            json!({"version": 5}),
            "invalid type: integer `5`, expected a string",
        ),
        (
            "fronts",
            json!({"open": [{"epoch": 1}]}),
            "missing field `volume`",
        ),
        (
            "fronts",
            json!({"open": [{"volume": "v", "epoch": -1}]}),
            "invalid value: integer `-1`, expected u64",
        ),
        (
            "fronts",
            json!({"wait": 3}),
            "unknown field `wait`, expected `version` or `open`",
        ),
        (
            "fronts",
            json!({"open": [{"volume": "", "epoch": 1}]}),
            "each front in open needs its volume",
        ),
        ("failures", json!({}), "missing field `failures`"),
        (
            "failures",
            json!({"failures": [{"medium": "", "volume": "v", "copy": 0, "column": 0, "mediumfailed": false}]}),
            "each failure needs its medium and volume",
        ),
        (
            "failures",
            json!({"failures": [{"medium": "d1", "volume": "v", "copy": 0, "column": 0}]}),
            "missing field `mediumfailed`",
        ),
    ] {
        let (status, answer) = storage_post(&app, &bearer(&c1), "sn-1", what, bad.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{what} {bad}: {answer}");
        assert_eq!(answer["message"], message, "{what} {bad}");
    }

    // A node without fronts: the first poll answers at once, with none.
    let (status, answer) = storage_post(&app, &bearer(&c1), "sn-1", "fronts", poll).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["fronts"], json!([]), "{answer}");
    assert_eq!(
        answer["version"].as_str().map(str::len),
        Some(32),
        "{answer}"
    );
    // A failure of a volume whose front it does not run changes nothing,
    // and is answered refused (the writes waiting for it fail).
    let failure =
        json!({"medium": "m1", "volume": "nope", "copy": 0, "column": 0, "mediumfailed": true});
    let (status, answer) = storage_post(
        &app,
        &bearer(&c1),
        "sn-1",
        "failures",
        json!({"failures": [failure.clone()]}),
    )
    .await;
    assert_eq!(
        (status, answer),
        (StatusCode::OK, json!({"recorded": 0, "refused": [failure]}))
    );
    let (_, m1) = app.get("/media/m1").await;
    assert_ne!(m1["state"], "Failed", "{m1}");
}

/// Attaches `volume` to host-0 (not waiting for the job); the job's id.
async fn start_attach(app: &TestApp, volume: &str) -> String {
    let (status, body) = app
        .post(
            &format!("/volumes/{volume}/snapshots/top/attachments"),
            json!({"node": "host-0", "readonly": false, "mountpoint": "/mnt/data"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "attach: {body}");
    body["JobID"].as_str().unwrap_or_default().to_string()
}

/// Polls as the node until the answer's version differs from `version`
/// (the long poll answers at once when it does, else after 20 s).
async fn poll(app: &TestApp, credential: &str, version: &str, open: Value) -> Value {
    let (status, answer) = storage_post(
        app,
        &format!("Bearer {credential}"),
        "sn-1",
        "fronts",
        json!({"version": version, "open": open}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer
}

/// The node's report reaches the waiting attach job; a volume without
/// attachments is no longer wanted of the node; a node that never reports,
/// or reports an error, fails the attach with the contract's message.
#[tokio::test]
async fn a_poll_answers_the_front_of_an_attached_volume_and_the_attach_waits_for_its_report() {
    let app = start().await;
    let credential = node_with_credential(&app, "sn-1", "127.0.0.2", "z1", "storage").await;
    let mut process = StorageNodeProcess::new(&app, "sn-1", "127.0.0.2", &[("d1", 4)], &credential);
    process.start();
    wait_served(&app, &["d1"]).await;
    app.create_policy("single", 0, 0, 0).await;
    let (id, job) = app.create_volume("data", 2, "single").await;
    assert_eq!(job["state"], "Done", "{job}");
    let (status, body) = app
        .patch("/nodes/host-0", json!({"address": "127.0.0.1"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // The test plays the node from here: the process stops heartbeating,
    // and the test heartbeats for it with a front address.
    process.pause(true);
    let front_address = format!("127.0.0.2:{}", free_port("127.0.0.2"));
    let heartbeat = json!({
        "sliceaddress": process.slice_address,
        "frontaddress": front_address,
        "media": [{"name": "d1", "size": 4 * GIB}],
    });
    let (status, answer) = register(&app, &credential, "sn-1", heartbeat.clone()).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let beating = {
        let (client, base, credential) = (app.client.clone(), app.base.clone(), credential.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let _ = client
                    .put(format!("{base}/nodes/sn-1/storage"))
                    .header("authorization", format!("Bearer {credential}"))
                    .json(&heartbeat)
                    .send()
                    .await;
            }
        })
    };

    let first = poll(&app, &credential, "", json!([])).await;
    assert_eq!(first["fronts"], json!([]), "{first}");
    let job = start_attach(&app, "data").await;
    // Woken by the attach: the volume's front, its one export.
    let answer = poll(
        &app,
        &credential,
        first["version"].as_str().unwrap_or_default(),
        json!([]),
    )
    .await;
    let fronts = answer["fronts"].as_array().cloned().unwrap_or_default();
    assert_eq!(fronts.len(), 1, "{answer}");
    let spec = &fronts[0];
    assert_eq!(spec["volume"], id.as_str(), "{spec}");
    assert_eq!(spec["size"], 2 * GIB, "{spec}");
    assert_eq!(spec["media"], json!([["d1"]]), "{spec}");
    assert_eq!(spec["lostmedia"], json!([]), "{spec}");
    assert_eq!(spec["slicetlsroots"], json!([]), "{spec}");
    assert_eq!(spec["nodes"][0]["node"], "sn-1", "{spec}");
    assert_eq!(
        spec["nodes"][0]["sliceaddress"],
        process.slice_address.as_str(),
        "{spec}"
    );
    assert_eq!(
        spec["nodes"][0]["slicecredential"].as_str().map(str::len),
        Some(64),
        "{spec}"
    );
    assert_eq!(spec["nodes"][0]["media"], json!(["d1"]), "{spec}");
    let export = &spec["exports"][0];
    assert_eq!(
        (
            &export["host"],
            &export["hostaddress"],
            &export["readonly"],
            &export["snapshot"]
        ),
        (
            &json!("host-0"),
            &json!("127.0.0.1"),
            &json!(false),
            &Value::Null
        ),
        "{spec}"
    );
    let epoch = spec["epoch"].as_u64().unwrap_or_default();
    assert!(epoch >= 1, "{spec}");

    // The node reports it open: the attachment is Attached, its URI the
    // node's front address.
    let open = json!([{"volume": id, "epoch": epoch, "error": ""}]);
    let reporting = {
        let (client, base, credential, open, version) = (
            app.client.clone(),
            app.base.clone(),
            credential.clone(),
            open.clone(),
            answer["version"].clone(),
        );
        tokio::spawn(async move {
            // Waits out its long poll: nothing more changes for it.
            let _ = client
                .post(format!("{base}/nodes/sn-1/storage/fronts"))
                .header("authorization", format!("Bearer {credential}"))
                .json(&json!({"version": version, "open": open}))
                .send()
                .await;
        })
    };
    let done = app.wait_job(&job).await;
    assert_eq!(done["state"], "Done", "{done}");
    let (status, a) = app
        .get("/volumes/data/snapshots/top/attachments/host-0")
        .await;
    assert_eq!(status, StatusCode::OK, "{a}");
    let export_name = export["name"].as_str().unwrap_or_default();
    assert_eq!(a["state"], "Attached", "{a}");
    assert_eq!(
        a["uri"],
        format!("nbd://{front_address}/{export_name}").as_str(),
        "{a}"
    );
    reporting.abort();

    // Detached: nothing is wanted of the node any more.
    let (status, body) = app
        .delete("/volumes/data/snapshots/top/attachments/host-0")
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let detached = app.wait_job_of(&body).await;
    assert_eq!(detached["state"], "Done", "{detached}");
    let answer = poll(
        &app,
        &credential,
        answer["version"].as_str().unwrap_or_default(),
        open,
    )
    .await;
    assert_eq!(answer["fronts"], json!([]), "{answer}");

    // A node that reports an error: the attach fails with it.
    let job = start_attach(&app, "data").await;
    let answer = poll(
        &app,
        &credential,
        answer["version"].as_str().unwrap_or_default(),
        json!([]),
    )
    .await;
    let epoch = answer["fronts"][0]["epoch"].as_u64().unwrap_or_default();
    let reporting = {
        let (client, base, credential, id) = (
            app.client.clone(),
            app.base.clone(),
            credential.clone(),
            id.clone(),
        );
        tokio::spawn(async move {
            let _ = client
                .post(format!("{base}/nodes/sn-1/storage/fronts"))
                .header("authorization", format!("Bearer {credential}"))
                .json(&json!({"version": "", "open": [
                    {"volume": id, "epoch": epoch, "error": "no slice server answers"}
                ]}))
                .send()
                .await;
        })
    };
    let failed = app.wait_job(&job).await;
    assert_eq!(failed["state"], "Error", "{failed}");
    assert_eq!(
        failed["details"].as_array().and_then(|d| d.last()).cloned(),
        Some::<Value>(
            "Could not attach volume 'data' to node 'host-0': the front on storage node 'sn-1' \
         did not open: no slice server answers"
                .into()
        ),
        "{failed}"
    );
    reporting.abort();
    let (status, _) = app
        .get("/volumes/data/snapshots/top/attachments/host-0")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A node that never reports: the attach gives up after 15 s.
    let job = start_attach(&app, "data").await;
    let failed = app.wait_job(&job).await;
    assert_eq!(failed["state"], "Error", "{failed}");
    assert_eq!(
        failed["details"].as_array().and_then(|d| d.last()).cloned(),
        Some::<Value>(
            "Could not attach volume 'data' to node 'host-0': the front on storage node 'sn-1' \
         did not open: it did not report the volume open within 15 seconds"
                .into()
        ),
        "{failed}"
    );
    let answer = poll(&app, &credential, "", json!([])).await;
    assert_eq!(answer["fronts"], json!([]), "{answer}");
    beating.abort();
}
