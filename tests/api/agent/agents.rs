//! Nodes' host agents against the real `svs serve`: nodes and node
//! credentials, the agent's long-polled desired state and host reports, and
//! the jobs that wait for the agent. The agent is played by plain HTTP.

use crate::harness::attach::{attach, topology};
use crate::harness::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// host-1 (127.0.0.1) and host-2 (127.0.0.2) may attach; jobs wait for an
/// agent at most 3 s.
async fn agent_app() -> TestApp {
    let mut config = topology("0");
    config.settings.push("agent_wait_secs = 3".into());
    TestApp::start_with(config).await
}

/// Issues `node`'s credential (no body); returns its bearer header value.
async fn issue(app: &TestApp, node: &str) -> String {
    let (status, body) = app
        .request(
            Some(&app.token),
            Method::POST,
            &format!("/nodes/{node}/credentials"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    format!("Bearer {}", body["credential"].as_str().unwrap_or_default())
}

async fn desired(app: &TestApp, credential: &str, node: &str, query: &str) -> (StatusCode, Value) {
    app.request(
        Some(credential),
        Method::GET,
        &format!("/nodes/{node}/agent/attachments{query}"),
        None,
    )
    .await
}

async fn report(
    app: &TestApp,
    credential: &str,
    node: &str,
    volume_id: &str,
    body: Value,
) -> (StatusCode, Value) {
    app.request(
        Some(credential),
        Method::PUT,
        &format!("/nodes/{node}/agent/attachments/{volume_id}/top"),
        Some(body),
    )
    .await
}

/// host-1's agent (with `credential`) reports the volume's attachment in
/// host state `state`.
async fn report_state(
    app: &TestApp,
    credential: &str,
    volume_id: &str,
    state: &str,
) -> (StatusCode, Value) {
    report(
        app,
        credential,
        "host-1",
        volume_id,
        json!({ "hoststate": state }),
    )
    .await
}

/// Polls a job until its status is `status` (it is still running).
async fn wait_status(app: &TestApp, job_id: &str, status: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, job) = app.get(&format!("/jobs/{job_id}")).await;
        if job["status"] == status {
            assert_eq!(job["state"], "Running", "{job}");
            return;
        }
        assert!(
            job["state"] != "Done" && job["state"] != "Error",
            "job ended before '{status}': {job}"
        );
        assert!(Instant::now() < deadline, "no '{status}': {job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// host-1's long poll with `revision` (wait 10 s), in the background: when
/// it answered, and what.
fn long_poll(
    app: &TestApp,
    agent: &str,
    revision: &str,
) -> tokio::task::JoinHandle<(Instant, Value)> {
    let url = format!(
        "{}/nodes/host-1/agent/attachments?revision={revision}&wait=10",
        app.base
    );
    let (client, agent) = (app.client.clone(), agent.to_string());
    tokio::spawn(async move {
        let body: Value = client
            .get(url)
            .header("authorization", agent)
            .send()
            .await
            .expect("poll sent")
            .json()
            .await
            .expect("JSON");
        (Instant::now(), body)
    })
}

#[tokio::test]
async fn nodes_and_credentials_are_for_administrators_and_agents_only_for_their_node() {
    let app = agent_app().await;
    let (status, node) = app
        .post(
            "/nodes",
            json!({"name": "host-7", "address": "10.0.0.7", "zone": "zone-a"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{node}");
    assert_eq!(node["name"], "host-7");
    assert_eq!(node["zone"], "zone-a");
    assert_eq!(node["address"], "10.0.0.7");
    assert_eq!(node["agentcredential"], false);
    assert_eq!(node["agentseen"], Value::Null);
    let (status, body) = app
        .post("/nodes", json!({"name": "host-7", "address": "10.0.0.8"}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["message"], "node 'host-7' already exists");
    for (bad, message) in [
        (
            json!({"name": "host 8", "address": "10.0.0.8"}),
            "node name must be 1 to 63 characters of letters, digits, '.', '_' or '-'",
        ),
        (
            json!({"name": "host-8", "address": "ten"}),
            "address 'ten' is not an IP address",
        ),
        (json!({"name": "host-8"}), "address is required"),
        (
            json!({"name": "host-8", "address": "10.0.0.8", "os": "linux"}),
            "unknown field 'os' (accepted: name, address, zone)",
        ),
    ] {
        let (status, body) = app.post("/nodes", bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(body["message"], message);
    }
    let (status, _) = app.get("/nodes/host-8").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Administrators only.
    let user = app.user_in_tenant("other", "user@example.com").await;
    for (method, path, body) in [
        (
            Method::POST,
            "/nodes",
            Some(json!({"name": "host-9", "address": "10.0.0.9"})),
        ),
        (Method::POST, "/nodes/host-1/credentials", None),
        (Method::DELETE, "/nodes/host-1/credentials", None),
    ] {
        let (status, body) = app.request(Some(&user), method, path, body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {body}");
        assert_eq!(body["message"], "this operation requires an administrator");
    }
    let (status, body) = app.post("/nodes/nope/credentials", json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["message"], "node 'nope' not found");
    let (status, body) = app.post("/nodes/host-1/credentials", json!({"x": 1})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // A credential opens the node's agent routes, and only them.
    let (status, issued) = app.post("/nodes/host-1/credentials", json!({})).await;
    assert_eq!(status, StatusCode::CREATED, "{issued}");
    assert_eq!(issued["node"], "host-1");
    let id = issued["credentialid"].as_str().unwrap_or_default();
    assert_eq!(id.len(), 16);
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    let credential = issued["credential"].as_str().unwrap_or_default();
    assert!(
        credential.starts_with(&format!("svsnode.{id}.")),
        "{credential}"
    );
    assert!(issued["created"].as_str().is_some(), "{issued}");
    let old = format!("Bearer {credential}");
    let (status, state) = desired(&app, &old, "host-1", "").await;
    assert_eq!(status, StatusCode::OK, "{state}");
    assert_eq!(state["node"], "host-1");
    assert_eq!(state["attachments"], json!([]));
    assert_eq!(state["revision"].as_str().unwrap_or_default().len(), 64);
    // Raw, without "Bearer", as IdTokens may be sent.
    let (status, _) = desired(&app, credential, "host-1", "").await;
    assert_eq!(status, StatusCode::OK);
    let (_, node) = app.get("/nodes/host-1").await;
    assert_eq!(node["agentcredential"], true, "{node}");
    assert!(node["agentseen"].as_str().is_some(), "{node}");

    let (status, body) = desired(&app, &old, "host-2", "").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body["message"],
        "this credential belongs to node 'host-1', not 'host-2'"
    );
    let (status, body) = desired(&app, &app.token, "host-1", "").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body["message"],
        "only the node's agent may use this endpoint"
    );
    let (status, body) = report(
        &app,
        &app.token,
        "host-1",
        "v",
        json!({"hoststate": "Mounted"}),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body["message"],
        "only the node's agent may use this endpoint"
    );
    // A node credential is no IdToken: the same 401 as any bad token.
    let (status, garbage) = app
        .request(Some("Bearer garbage"), Method::GET, "/volumes", None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    for path in ["/volumes", "/nodes", "/attachments"] {
        let (status, body) = app.request(Some(&old), Method::GET, path, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(body, garbage, "{path}");
    }
    let (status, body) = desired(&app, &old, "host-1", "?wait=61").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["message"],
        "wait must be a whole number of seconds from 0 to 60"
    );
    let (status, _) = desired(&app, &old, "host-1", "?wait=soon").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // Issuing again revokes the previous credential.
    let new = issue(&app, "host-1").await;
    let (status, body) = desired(&app, &old, "host-1", "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["message"], "invalid or revoked node credential");
    let (status, _) = desired(&app, &new, "host-1", "").await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = app.delete("/nodes/host-1/credentials").await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (status, body) = desired(&app, &new, "host-1", "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["message"], "invalid or revoked node credential");
    let (status, body) = app.delete("/nodes/host-1/credentials").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["message"], "node 'host-1' has no agent credential");
    let (_, node) = app.get("/nodes/host-1").await;
    assert_eq!(node["agentcredential"], false, "{node}");
    let forged = "Bearer svsnode.0123456789abcdef.00";
    let (status, body) = desired(&app, forged, "host-1", "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["message"], "invalid or revoked node credential");
}

#[tokio::test]
async fn the_long_poll_wakes_on_a_change_and_host_reports_show_in_attachments() {
    let app = agent_app().await;
    app.create_policy("mirror", 1, 1, 0).await;
    let (volume_id, _) = app.create_volume("v", 4, "mirror").await;
    let agent = issue(&app, "host-1").await;
    let (_, state) = desired(&app, &agent, "host-1", "").await;
    let empty = state["revision"].as_str().unwrap_or_default().to_string();

    // Nothing changes: the same revision, after `wait`.
    let started = Instant::now();
    let (status, same) =
        desired(&app, &agent, "host-1", &format!("?revision={empty}&wait=2")).await;
    assert_eq!(status, StatusCode::OK, "{same}");
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(same["revision"], empty.as_str());

    // An attachment wakes a waiting poll at once.
    let poll = long_poll(&app, &agent, &empty);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, body) = app
        .post(
            "/volumes/v/snapshots/top/attachments",
            json!({"node": "host-1", "mountpoint": "/mnt/data"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let requested = Instant::now();
    let (woken, changed) = poll.await.expect("poll");
    let latency = woken.saturating_duration_since(requested);
    assert!(latency < Duration::from_secs(1), "woken after {latency:?}");
    assert_ne!(changed["revision"], empty.as_str(), "{changed}");
    assert_eq!(changed["attachments"][0]["volumeid"], volume_id.as_str());
    app.wait_job_of(&body).await;

    let (_, state) = desired(&app, &agent, "host-1", "").await;
    let (_, a) = app.get("/volumes/v/snapshots/top/attachments/host-1").await;
    assert_eq!(
        state["attachments"],
        json!([{
            "volumeid": volume_id, "volumename": "v", "snapshotid": "top", "snapshotname": "top",
            "state": "Attached", "readonly": false, "mountpoint": "/mnt/data",
            "exportname": a["exportname"], "uri": a["uri"], "type": "block",
            "filesystem": null, "filesystemprovisioned": false, "size": 4, "manager": "agent",
            "growjob": null,
        }])
    );
    let revision = state["revision"].as_str().unwrap_or_default().to_string();
    assert_eq!(a["hoststate"], Value::Null, "{a}");
    // host-2's agent sees none of host-1's attachments.
    let other = issue(&app, "host-2").await;
    let (_, state2) = desired(&app, &other, "host-2", "").await;
    assert_eq!(state2["attachments"], json!([]));

    // The agent's report shows in the attachment views, and changes no
    // revision.
    let (status, body) = report(
        &app,
        &agent,
        "host-1",
        &volume_id,
        json!({"hoststate": "Mounted", "device": "/dev/loop3", "mountpath": "/var/lib/svs/mounts/v",
               "filesystembytes": 4_000_000_000u64, "filesystemsize": 4, "growerror": null}),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    for path in [
        "/volumes/v/snapshots/top/attachments/host-1".to_string(),
        "/volumes/v/attachments".to_string(),
        "/attachments".to_string(),
    ] {
        let (_, body) = app.get(&path).await;
        let a = if body.is_array() { &body[0] } else { &body };
        assert_eq!(a["hoststate"], "Mounted", "{path}: {a}");
        assert_eq!(a["hostdevice"], "/dev/loop3", "{path}");
        assert_eq!(a["hostmountpath"], "/var/lib/svs/mounts/v", "{path}");
        assert_eq!(a["filesystembytes"], 4_000_000_000u64, "{path}");
        assert_eq!(a["hostdetail"], Value::Null, "{path}");
        assert!(a["hostupdated"].as_str().is_some(), "{path}: {a}");
    }
    let (_, state) = desired(&app, &agent, "host-1", "").await;
    assert_eq!(state["revision"], revision.as_str());

    let (status, body) = report(
        &app,
        &agent,
        "host-1",
        "nope",
        json!({"hoststate": "Mounted"}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body["message"],
        "volume 'nope' is not attached to node 'host-1'"
    );
    let (status, body) = report_state(&app, &other, &volume_id, "Mounted").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body["message"],
        "this credential belongs to node 'host-2', not 'host-1'"
    );
    for (bad, message) in [
        (json!({}), "hoststate is required"),
        (
            json!({"hoststate": "Happy"}),
            "hoststate must be \"Connected\", \"Mounted\", \"Error\" or \"Disconnected\"",
        ),
        (
            json!({"hoststate": "Mounted", "filesystemsize": -1}),
            "filesystemsize must be a whole number from 0 to 1048576",
        ),
        (
            json!({"hoststate": "Mounted", "device": 3}),
            "device must be a string or null",
        ),
    ] {
        let (status, body) = report(&app, &agent, "host-1", &volume_id, bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(body["message"], message);
    }

    // A change of mountpoint (an attachment modify) wakes it too.
    let poll = long_poll(&app, &agent, &revision);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, body) = app
        .patch(
            "/volumes/v/snapshots/top/attachments/host-1",
            json!({"mountpoint": "/mnt/other"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let requested = Instant::now();
    let (woken, changed) = poll.await.expect("poll");
    assert!(
        woken.saturating_duration_since(requested) < Duration::from_secs(2),
        "woken after {:?}",
        woken.saturating_duration_since(requested)
    );
    assert_eq!(
        changed["attachments"][0]["mountpoint"], "/mnt/other",
        "{changed}"
    );
}

#[tokio::test]
async fn a_detach_waits_for_the_agent_to_disconnect_and_an_error_keeps_it_attached() {
    let app = agent_app().await;
    app.create_policy("mirror", 1, 1, 0).await;
    let (volume_id, _) = app.create_volume("v", 4, "mirror").await;
    attach(&app, "v", "host-1", false).await;
    let agent = issue(&app, "host-1").await;
    let (status, _) = report_state(&app, &agent, &volume_id, "Mounted").await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    let detach = || app.delete("/volumes/v/snapshots/top/attachments/host-1");
    let (status, body) = detach().await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job_id = body["JobID"].as_str().unwrap_or_default().to_string();
    wait_status(
        &app,
        &job_id,
        "Waiting for node 'host-1' to unmount and disconnect",
    )
    .await;
    let (_, state) = desired(&app, &agent, "host-1", "").await;
    assert_eq!(state["attachments"][0]["state"], "Detaching", "{state}");
    report(
        &app,
        &agent,
        "host-1",
        &volume_id,
        json!({"hoststate": "Error", "hostdetail": "umount: /mnt/data: target is busy"}),
    )
    .await;
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Error", "{job}");
    assert_eq!(
        last_detail(&job),
        "Detach failed on node 'host-1': umount: /mnt/data: target is busy"
    );
    let (status, a) = app.get("/volumes/v/snapshots/top/attachments/host-1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(a["state"], "Attached", "{a}");
    assert_eq!(a["hoststate"], "Error", "{a}");

    // Held again; this time it lets go.
    report_state(&app, &agent, &volume_id, "Mounted").await;
    let (_, body) = detach().await;
    let job_id = body["JobID"].as_str().unwrap_or_default().to_string();
    wait_status(
        &app,
        &job_id,
        "Waiting for node 'host-1' to unmount and disconnect",
    )
    .await;
    report_state(&app, &agent, &volume_id, "Disconnected").await;
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(last_detail(&job), "Volume 'v' detached from node 'host-1'");
    let (status, _) = app.get("/volumes/v/snapshots/top/attachments/host-1").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // An agent that never answers: the detach ends in Error after
    // agent_wait_secs, still attached.
    attach(&app, "v", "host-1", false).await;
    report_state(&app, &agent, &volume_id, "Connected").await;
    let (_, body) = detach().await;
    let job = app.wait_job_of(&body).await;
    assert_eq!(job["state"], "Error", "{job}");
    assert_eq!(
        last_detail(&job),
        "Detach failed on node 'host-1': node 'host-1' did not report within 3 s"
    );
    let (_, a) = app.get("/volumes/v/snapshots/top/attachments/host-1").await;
    assert_eq!(a["state"], "Attached", "{a}");

    // Not held by an agent (it said Disconnected): detached at once.
    report_state(&app, &agent, &volume_id, "Disconnected").await;
    let (_, body) = detach().await;
    let job = app.wait_job_of(&body).await;
    assert_eq!(job["state"], "Done", "{job}");
}

#[tokio::test]
async fn a_resize_of_a_mounted_file_volume_waits_for_the_agent_to_grow_its_filesystem() {
    let app = agent_app().await;
    app.create_policy("mirror", 1, 1, 0).await;
    let created_id = app
        .create_volume_done(json!({"name": "f", "type": "file", "size": 4, "policy": "mirror"}))
        .await;
    let volume_id = created_id.clone();
    attach(&app, "f", "host-1", false).await;
    let agent = issue(&app, "host-1").await;
    let (_, state) = desired(&app, &agent, "host-1", "").await;
    let a = &state["attachments"][0];
    assert_eq!(
        (
            a["type"].clone(),
            a["filesystem"].clone(),
            a["filesystemprovisioned"].clone(),
            a["size"].clone()
        ),
        (json!("file"), json!("ext4"), json!(true), json!(4)),
        "{state}"
    );
    let mounted =
        |size: u64| json!({"hoststate": "Mounted", "filesystemsize": size, "growerror": null});
    report(&app, &agent, "host-1", &volume_id, mounted(4)).await;

    // Grown by the agent.
    let job_id = app.start_resize("f", 6, false).await;
    wait_status(
        &app,
        &job_id,
        "Waiting for node 'host-1' to grow the filesystem",
    )
    .await;
    let (_, state) = desired(&app, &agent, "host-1", "").await;
    assert_eq!(state["attachments"][0]["size"], 6, "{state}");
    report(&app, &agent, "host-1", &volume_id, mounted(6)).await;
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(
        last_detail(&job),
        "Volume 'f' resized from 4 GiB to 6 GiB in place; Filesystem grown from 4 GiB to 6 GiB on node 'host-1'"
    );
    let (_, volume) = app.get("/volumes/f").await;
    assert_eq!(volume["size"], 6, "{volume}");

    // The agent could not grow it.
    let job_id = app.start_resize("f", 8, false).await;
    wait_status(
        &app,
        &job_id,
        "Waiting for node 'host-1' to grow the filesystem",
    )
    .await;
    report(
        &app,
        &agent,
        "host-1",
        &volume_id,
        json!({"hoststate": "Mounted", "filesystemsize": 6, "growerror": "resize2fs: No space left on device"}),
    )
    .await;
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Error", "{job}");
    assert_eq!(
        last_detail(&job),
        "Could not grow the ext4 filesystem on node 'host-1': resize2fs: No space left on device"
    );

    // The agent does not answer.
    report(&app, &agent, "host-1", &volume_id, mounted(8)).await;
    let job_id = app.start_resize("f", 10, false).await;
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Error", "{job}");
    assert_eq!(
        last_detail(&job),
        "Filesystem not grown: node 'host-1' did not report within 3 s"
    );

    // No agent holds it (it said Disconnected): the note of old.
    report_state(&app, &agent, &volume_id, "Disconnected").await;
    let job_id = app.start_resize("f", 12, false).await;
    let job = app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert!(
        last_detail(&job)
            .ends_with("Filesystem ext4 not grown: the volume is attached, its host grows it"),
        "{job}"
    );
}
