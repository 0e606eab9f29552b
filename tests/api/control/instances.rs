//! Several `svs serve` instances on one PostgreSQL database (issue 22),
//! each a real process with a data directory of its own, every copy on real
//! `svs storage-node` processes (127.0.0.2-4): what one instance does, the
//! others see at their next request; the instance running a data movement
//! is SIGKILLed and another finishes it under a live qemu-io writer; two
//! hundred requests spread over three instances never over-book a medium.

use crate::harness::instances::*;
use crate::harness::node_moves::{wait_mid_copy, Front, Moving, MOVED, MOVEMENT_FOUND};
use crate::harness::storage_nodes::{node_with_credential, wait_served, StorageNodeProcess};
use crate::harness::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use svs_store::test_postgres::{TestDatabase, TestServer};

const ACCOUNT_DISABLED: &str = "This account is disabled; ask an administrator to enable it";
const BOB: &str = "bob@example.com";
const BOB_PASSWORD: &str = "bob-password";

/// `count` more instances on `db` configured by `config`, each signed in
/// as the administrator.
async fn more_instances_with(count: usize, config: impl Fn() -> TestConfig) -> Vec<TestApp> {
    let mut instances = Vec::new();
    for _ in 0..count {
        instances.push(TestApp::start_with(config()).await);
    }
    instances
}

async fn more_instances(db: &str, count: usize) -> Vec<TestApp> {
    more_instances_with(count, || cluster_config(db)).await
}

/// As [`cluster_config`], copies throttled to 4 MiB/s (a kill lands
/// mid-copy), as `Moving` runs its first instance.
fn throttled(db: &str) -> TestConfig {
    TestConfig {
        movement_rate: "4 MiB".into(),
        ..cluster_config(db)
    }
}

fn message(body: &Value) -> &str {
    body["message"].as_str().unwrap_or_default()
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

async fn refresh(app: &TestApp, token: &str) -> (StatusCode, Value) {
    app.request(
        None,
        Method::POST,
        "/refresh",
        Some(json!({"RefreshToken": token})),
    )
    .await
}

#[tokio::test]
async fn what_one_instance_does_to_a_user_or_the_keys_every_instance_applies_at_once() {
    let db = TestDatabase::new().await;
    let all = more_instances(&db.url, 3).await;
    let (status, body) = all[0]
        .post("/users", json!({"email": BOB, "password": BOB_PASSWORD}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let on_2 = all[1].sign_in(BOB, BOB_PASSWORD).await;
    let on_3 = all[2].sign_in(BOB, BOB_PASSWORD).await;
    // A token issued by one instance is good on every instance.
    for app in &all {
        let (status, body) = app
            .as_user(&text(&on_2["IdToken"]), Method::GET, "/volumes", None)
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }

    // Signed out on instance 2: every refresh token of bob fails on 1 and 3.
    let (status, body) = all[1]
        .request(
            None,
            Method::POST,
            "/signout",
            Some(json!({"AccessToken": on_2["AccessToken"]})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for (app, tokens) in [(&all[0], &on_2), (&all[2], &on_3)] {
        let (status, body) = refresh(app, &text(&tokens["RefreshToken"])).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    }

    // An administrator on instance 1, at bob's next request on 2 and 3.
    let (status, body) = all[0]
        .patch(&format!("/users/{BOB}"), json!({"admin": true}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let bob = text(&all[2].sign_in(BOB, BOB_PASSWORD).await["IdToken"]);
    for app in &all[1..] {
        let (status, body) = app.as_user(&bob, Method::GET, "/users", None).await;
        assert_eq!(status, StatusCode::OK, "an administrator now: {body}");
    }
    // Disabled on instance 1: refused on 2 and 3 at the very next request.
    let (status, body) = all[0]
        .patch(&format!("/users/{BOB}"), json!({"disabled": true}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for app in &all[1..] {
        let (status, body) = app.as_user(&bob, Method::GET, "/volumes", None).await;
        assert_eq!(
            (status, message(&body)),
            (StatusCode::UNAUTHORIZED, ACCOUNT_DISABLED)
        );
    }

    // Keys rotated (from any machine, on the database): the tokens signed
    // before still verify on every instance, and so does a token of the new
    // key from the first instance that signs with it.
    let elsewhere = tempfile::tempdir().expect("dir");
    let out = std::process::Command::new(svs_bin())
        .args(["keys", "rotate", "--config"])
        .arg(all[0].config_path())
        .arg("--data-dir")
        .arg(elsewhere.path())
        .output()
        .expect("svs keys rotate runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let old_kid = kid_of(&all[0].token);
    let deadline = Instant::now() + Duration::from_secs(10);
    let fresh = loop {
        let token = text(&all[2].sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await["IdToken"]);
        if kid_of(&token) != old_kid {
            break token;
        }
        assert!(
            Instant::now() < deadline,
            "instance 3 signs with the old key"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for app in &all {
        for token in [&app.token, &fresh] {
            let (status, body) = app.as_user(token, Method::GET, "/volumes", None).await;
            assert_eq!(status, StatusCode::OK, "{body}");
        }
    }
}

/// The kid a token names.
fn kid_of(token: &str) -> String {
    jwt_parts(token).0["kid"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The instance (an index of `instances`) whose job runner holds `job_id`
/// now, as each instance's `GET /workers` shows its own; waited for (a job
/// is between owners while a dead owner's lease runs out).
async fn running_instance(job_id: &str, instances: &[&TestApp]) -> usize {
    let id: i64 = job_id.parse().expect("job id");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for (i, app) in instances.iter().enumerate() {
            let (status, workers) = app.get("/workers").await;
            assert_eq!(status, StatusCode::OK, "{workers}");
            let held = workers
                .as_array()
                .into_iter()
                .flatten()
                .find(|w| w["name"] == "jobs")
                .map(|w| w["jobs_held"].clone())
                .unwrap_or_default();
            if held
                .as_array()
                .is_some_and(|ids| ids.iter().any(|j| j.as_i64() == Some(id)))
            {
                return i;
            }
        }
        assert!(Instant::now() < deadline, "no instance holds job {job_id}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A resize moving a mirrored copy from node to node (the copy throttled
/// so that kills land mid-copy), submitted to instance 2 of three, with a
/// qemu-io writer on the volume all along: the instance running the job is
/// SIGKILLed twice; each time another instance takes it over once its lease
/// ran out and resumes the copy from its checkpoint. The job ends Done with
/// its one move made once, every acknowledged write on the volume and on
/// both copies.
#[tokio::test]
async fn the_instance_running_a_data_movement_is_killed_twice_and_another_finishes_it() {
    let db = TestDatabase::new().await;
    let mut moving = Moving::start_with(Front::Node, cluster_config(&db.url)).await;
    moving.app.pin_ports();
    let mut others = more_instances_with(2, || throttled(&db.url)).await;
    for app in &mut others {
        app.pin_ports();
        wait_served(app, &["sn1-d0", "sn2-d0", "sn3-d0"]).await;
    }
    let writer = moving.writer(0, 120, 100);
    let job_id = others[0].start_resize("data", 3, true).await;
    let mut killed = Vec::new();
    // The first kill lands after the copy's first checkpoint (1 MiB and
    // 1 s in, recorded within 250 ms): a kill before it leaves nothing to
    // resume from, and the copy, starting over, may end before the second.
    for percent in [25..45, 50..85] {
        // After a kill: the instance that took the job over copies again
        // (from its checkpoint) before the next kill.
        let resumed = format!("Resuming the copy of {MOVED} from its checkpoint");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (_, job) = moving.app.get(&format!("/jobs/{job_id}")).await;
            let seen = details(&job)
                .iter()
                .filter(|d| d.starts_with(&resumed))
                .count();
            if seen >= killed.len() {
                break;
            }
            assert!(Instant::now() < deadline, "the copy did not resume: {job}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        wait_mid_copy(&moving.app, &job_id, percent).await;
        let running = running_instance(&job_id, &[&moving.app, &others[0], &others[1]]).await;
        killed.push(running);
        match running {
            0 => {
                moving.app.kill();
                moving.app.launch().expect("instance 1 restarts");
            }
            i => {
                others[i - 1].kill();
                others[i - 1].launch().expect("the instance restarts");
            }
        }
    }
    let job = moving.app.wait_job(&job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    let details = details(&job);
    assert!(details.iter().any(|d| d == MOVEMENT_FOUND), "{job}");
    let count = |prefix: &str| details.iter().filter(|d| d.starts_with(prefix)).count();
    assert_eq!(
        count("Taken over by instance "),
        2,
        "instances killed: {killed:?}: {job}"
    );
    assert_eq!(
        count(&format!("Resuming the copy of {MOVED} from its checkpoint")),
        2,
        "{job}"
    );
    // The move was made once.
    assert_eq!(count(&format!("Moved {MOVED} while in use")), 1, "{job}");
    let (result, written) = writer.join().expect("writer thread");
    result.expect("every write acknowledged while instances died");
    moving.acknowledged(&written);
    moving.assert_moved().await;
}

/// A data movement steered on the storage nodes, running on one instance,
/// is cancelled through another: the instance holding the job sees the
/// cancel in the database, stops the copy and removes the partial copy on
/// the target node; the job ends cancelled with every acknowledged write
/// kept and the volume as it was.
#[tokio::test]
async fn a_movement_cancelled_through_another_instance_is_undone_by_the_one_running_it() {
    let db = TestDatabase::new().await;
    let moving = Moving::start_with(Front::Node, cluster_config(&db.url)).await;
    let others = more_instances_with(1, || throttled(&db.url)).await;
    wait_served(&others[0], &["sn1-d0", "sn2-d0", "sn3-d0"]).await;
    let writer = moving.writer(0, 60, 100);
    let job_id = moving.start_resize().await;
    wait_mid_copy(&moving.app, &job_id, 10..60).await;
    let instances = [&moving.app, &others[0]];
    let running = running_instance(&job_id, &instances).await;
    let other = instances[1 - running];
    let (status, body) = other.delete(&format!("/jobs/{job_id}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job = other.wait_job(&job_id).await;
    assert_eq!(
        (&job["state"], &job["status"]),
        (&json!("Error"), &json!("Cancelled")),
        "{job}\n{}",
        moving.node_logs()
    );
    let (result, written) = writer.join().expect("writer thread");
    result.expect("every write acknowledged during the cancel");
    moving.acknowledged(&written);
    moving.assert_left_as_it_was().await;
}

/// GiB of a size in a JSON answer.
fn gib(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// 100 creations (far beyond capacity, half of them mirrored) and 100
/// resizes of 20 existing volumes, all at once, spread over three
/// instances: no medium is ever booked beyond its size, every volume's
/// slices add up to what its medium says is used, and the jobs of one
/// volume never overlap in time.
#[tokio::test]
async fn two_hundred_creations_and_resizes_over_three_instances_never_over_book_or_overlap() {
    let db = TestDatabase::new().await;
    let mut all = more_instances(&db.url, 1).await;
    let mut nodes = Vec::new();
    for (name, ip, zone, media) in [
        ("sn-1", "127.0.0.2", "z1", vec![("a1", 20), ("a2", 15)]),
        ("sn-2", "127.0.0.3", "z2", vec![("b1", 25)]),
        ("sn-3", "127.0.0.4", "z3", vec![("c1", 20)]),
    ] {
        let credential = node_with_credential(&all[0], name, ip, zone, "storage").await;
        let mut node = StorageNodeProcess::new(&all[0], name, ip, &media, &credential);
        node.start();
        nodes.push(node);
    }
    all.extend(more_instances(&db.url, 2).await);
    for app in &all {
        wait_served(app, &["a1", "a2", "b1", "c1"]).await;
    }
    all[0].create_policy("none", 0, 0, 0).await;
    all[0].create_policy("mirror", 1, 1, 0).await;
    for i in 0..20 {
        let app = &all[i % 3];
        app.create_volume_done(json!({"name": format!("r{i}"), "size": 1, "policy": "none"}))
            .await;
    }

    let mut requests = Vec::new();
    for i in 0..200usize {
        let app = &all[i % 3];
        let request = if i % 2 == 0 {
            let size = [2u64, 3, 5][i % 3];
            let policy = if i % 4 == 0 { "none" } else { "mirror" };
            app.client.post(format!("{}/volumes", app.base)).json(
                &json!({"name": format!("v{i}"), "type": "block", "size": size, "policy": policy}),
            )
        } else {
            let size = 2 + (i as u64 % 5);
            app.client
                .patch(format!("{}/volumes/r{}", app.base, i % 20))
                .json(&json!({"size": size, "allowdatamovement": true}))
        };
        let request = request.header("authorization", &app.token);
        requests.push(tokio::spawn(async move {
            let response = request.send().await.expect("request sent");
            (
                response.status(),
                response.json::<Value>().await.expect("JSON"),
            )
        }));
    }
    let mut answers: BTreeMap<u16, usize> = BTreeMap::new();
    for r in requests {
        let (status, body) = r.await.expect("request task");
        assert!(
            status == StatusCode::OK || status == StatusCode::CONFLICT,
            "{status} {body}"
        );
        *answers.entry(status.as_u16()).or_default() += 1;
    }
    eprintln!("answers by status: {answers:?}");
    assert!(answers.get(&200).copied().unwrap_or(0) > 20, "{answers:?}");

    // Every job ends (on whichever instance claimed it).
    let deadline = Instant::now() + Duration::from_secs(120);
    let jobs = loop {
        let (status, jobs) = all[1].get("/jobs?count=1000").await;
        assert_eq!(status, StatusCode::OK, "{jobs}");
        let jobs = jobs.as_array().cloned().unwrap_or_default();
        if jobs
            .iter()
            .all(|j| j["state"] == "Done" || j["state"] == "Error")
        {
            break jobs;
        }
        assert!(Instant::now() < deadline, "jobs still run: {jobs:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };

    // No medium is booked beyond its size, and what is used is what the
    // slices hold.
    let (_, volumes) = all[2].get("/volumes").await;
    let mut booked: BTreeMap<String, u64> = BTreeMap::new();
    for v in volumes.as_array().cloned().unwrap_or_default() {
        for slice in all[2].slices(&text(&v["name"])).await {
            *booked.entry(text(&slice["media"])).or_default() += gib(&slice["size"]);
        }
    }
    let (_, media) = all[0].get("/media").await;
    let media = media.as_array().cloned().unwrap_or_default();
    assert_eq!(media.len(), 4, "{media:?}");
    for m in &media {
        let id = text(&m["mediaid"]);
        let (size, free) = (gib(&m["size"]), m["freesize"].as_i64().expect("freesize"));
        assert!(free >= 0, "{m}");
        let used = booked.get(&id).copied().unwrap_or(0);
        assert!(used <= size, "{id} over-booked: {used} of {size} GiB");
        assert_eq!(size - free as u64, used, "{id}: {m}");
    }

    // One job at a time on a volume: each volume's jobs, by start, each
    // began after the one before had ended.
    let mut by_volume: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    for j in &jobs {
        let (Some(start), Some(end)) = (time_of(&j["starttime"]), time_of(&j["endtime"])) else {
            continue;
        };
        by_volume
            .entry(text(&j["object"]))
            .or_default()
            .push((start, end));
    }
    for (volume, mut spans) in by_volume {
        spans.sort_unstable();
        for pair in spans.windows(2) {
            assert!(
                pair[1].0 >= pair[0].1,
                "two jobs at once on {volume}: {spans:?}"
            );
        }
    }
    drop(nodes);
}

/// Milliseconds of a job's time field (RFC 3339; empty when unset).
fn time_of(v: &Value) -> Option<i64> {
    let t =
        time::OffsetDateTime::parse(v.as_str()?, &time::format_description::well_known::Rfc3339)
            .ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

/// The database server stops for 20 s (every connection of the services
/// cut, none taken meanwhile) in the middle of a data movement run by one of
/// two instances, under a live qemu-io writer. The job's lease (2 s) runs
/// out during the outage: its instance stops the job (and the copy on the
/// storage node) before that, and once the server is back either instance
/// claims it again and goes on from its checkpoint, its claim fencing the
/// older one's calls on the node. Meanwhile both instances answer requests
/// at once with 503 and the message, and are alive but not ready; once the
/// server is back they are ready again by themselves, and the movement
/// ends Done, its move made once, every acknowledged write on the volume
/// and both copies.
#[tokio::test]
async fn a_database_away_for_twenty_seconds_stops_nothing_for_good_and_doubles_nothing() {
    let db = TestServer::new().await;
    let moving = Moving::start_with(Front::Node, cluster_config(&db.url)).await;
    let other = more_instances_with(1, || throttled(&db.url))
        .await
        .remove(0);
    wait_served(&other, &["sn1-d0", "sn2-d0", "sn3-d0"]).await;
    let writer = moving.writer(0, 250, 100);
    let job_id = other.start_resize("data", 3, true).await;
    wait_mid_copy(&moving.app, &job_id, 10..60).await;

    db.stop();
    let away = Instant::now();
    while away.elapsed() < Duration::from_secs(20) {
        for app in [&moving.app, &other] {
            let asked = Instant::now();
            let answer = app.get("/volumes/data").await;
            assert_eq!(
                answer,
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    json!({"message": "the database does not answer for now; try again shortly"})
                )
            );
            // Answered, not left hanging (the pool's acquire timeout, 5 s).
            assert!(
                asked.elapsed() < Duration::from_secs(8),
                "{:?}",
                asked.elapsed()
            );
            let ready = app.request(None, Method::GET, "/readyz", None).await;
            assert_eq!(ready.0, StatusCode::SERVICE_UNAVAILABLE, "{ready:?}");
            let alive = app.request(None, Method::GET, "/healthz", None).await;
            assert_eq!(alive.0, StatusCode::OK, "{alive:?}");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    db.start().await;

    let back = Instant::now();
    for app in [&moving.app, &other] {
        while app.request(None, Method::GET, "/readyz", None).await.0 != StatusCode::OK {
            assert!(back.elapsed() < Duration::from_secs(30), "not ready again");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let job = moving.app.wait_job(&job_id).await;
    assert_eq!(
        job["state"],
        "Done",
        "{job}\n--- instance 1:\n{}\n--- instance 2:\n{}\n{}",
        moving.app.log(),
        other.log(),
        moving.node_logs()
    );
    let details = details(&job);
    let count = |prefix: &str| details.iter().filter(|d| d.starts_with(prefix)).count();
    assert_eq!(count(&format!("Moved {MOVED} while in use")), 1, "{job}");
    assert_eq!(count(MOVEMENT_FOUND), 1, "{job}");
    let (result, written) = writer.join().expect("writer thread");
    result.expect("every write acknowledged while the database was away");
    moving.acknowledged(&written);
    moving.assert_moved().await;
}

/// `haproxy` running the repository's `deploy/haproxy/svs.cfg`, listening
/// on `listen` in front of `instances`; stopped when dropped.
struct Balancer {
    child: std::process::Child,
    base: String,
}

impl Balancer {
    fn start(listen: &str, instances: [&TestApp; 2]) -> Balancer {
        let config =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/haproxy/svs.cfg");
        let address = |app: &TestApp| app.base.trim_start_matches("http://").to_string();
        let haproxy = ["/usr/sbin/haproxy", "haproxy"]
            .into_iter()
            .find(|p| std::process::Command::new(p).arg("-v").output().is_ok())
            .expect("haproxy is installed (scripts/test.sh installs it)");
        let child = std::process::Command::new(haproxy)
            .arg("-db")
            .arg("-f")
            .arg(&config)
            .env("SVS_LB_LISTEN", listen)
            .env("SVS_INSTANCE_1", address(instances[0]))
            .env("SVS_INSTANCE_2", address(instances[1]))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("haproxy starts");
        Balancer {
            child,
            base: format!("http://{listen}"),
        }
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two instances behind HAProxy with the repository's configuration, as the
/// README shows: requests through the one address reach both; one instance
/// SIGKILLed, every request still gets its answer from the other, and the
/// killed one, started again, takes requests again.
#[tokio::test]
async fn two_instances_behind_the_repository_s_haproxy_serve_as_one() {
    let db = TestDatabase::new().await;
    let mut all = more_instances(&db.url, 2).await;
    let listen = format!(
        "127.0.0.1:{}",
        crate::harness::storage_nodes::free_port("127.0.0.1")
    );
    let balancer = Balancer::start(&listen, [&all[0], &all[1]]);
    let client = reqwest::Client::new();
    let token = all[0].token.clone();
    let ask = |path: &str| {
        let request = client
            .get(format!("{}{path}", balancer.base))
            .header("authorization", &token);
        async move {
            match request.send().await {
                Ok(r) => r.status(),
                Err(_) => StatusCode::BAD_GATEWAY,
            }
        }
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while ask("/readyz").await != StatusCode::OK {
        assert!(Instant::now() < deadline, "the balancer never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Round robin: a token signed on one instance is good on the other.
    for _ in 0..10 {
        assert_eq!(ask("/volumes").await, StatusCode::OK);
    }

    all[0].pin_ports();
    all[0].kill();
    for _ in 0..40 {
        assert_eq!(
            ask("/volumes").await,
            StatusCode::OK,
            "with one instance dead"
        );
    }
    // The first one back (its checks pass again), the second one dies: the
    // first takes every request.
    all[0].launch().expect("the instance restarts");
    tokio::time::sleep(Duration::from_secs(3)).await;
    all[1].kill();
    for _ in 0..40 {
        assert_eq!(
            ask("/volumes").await,
            StatusCode::OK,
            "with the other instance dead"
        );
    }
    drop(balancer);
}
