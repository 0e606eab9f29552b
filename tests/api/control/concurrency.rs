//! Concurrency, against the real service: many requests on one volume at
//! once are serialized (jobs never overlap, every accepted resize grows the
//! volume from the size it had then), and many creations at once never
//! over-book a medium. They hold today; they are here so that a change of
//! the store (PostgreSQL, several instances) keeps them holding.

use crate::harness::*;
use rand::seq::{IndexedRandom, SliceRandom};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Sends every body to `PATCH /volumes/{volume}` at once; returns, in the
/// order of `bodies`, each answer's status and body.
async fn concurrent_patches(
    app: &TestApp,
    volume: &str,
    bodies: &[Value],
) -> Vec<(StatusCode, Value)> {
    let requests: Vec<_> = bodies
        .iter()
        .map(|body| {
            let request = app
                .client
                .patch(format!("{}/volumes/{volume}", app.base))
                .header("authorization", &app.token)
                .json(body);
            tokio::spawn(async move {
                let response = request.send().await.expect("request sent");
                let status = response.status();
                let body: Value = response.json().await.expect("JSON answer");
                (status, body)
            })
        })
        .collect();
    let mut answers = Vec::new();
    for r in requests {
        answers.push(r.await.expect("request task"));
    }
    answers
}

/// Waits until no job of the tenant is Pending or Running. Pending is
/// asked first: a job only goes Pending → Running → Done/Error, so one
/// that was Pending at the first question is still seen by the second.
async fn wait_until_no_job_runs(app: &TestApp) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, pending) = app.get("/jobs?state=Pending").await;
        let (_, running) = app.get("/jobs?state=Running").await;
        if pending.as_array().is_some_and(Vec::is_empty)
            && running.as_array().is_some_and(Vec::is_empty)
        {
            return;
        }
        assert!(Instant::now() < deadline, "jobs did not end: {running}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn time_of(job: &Value, field: &str) -> OffsetDateTime {
    let text = job[field].as_str().unwrap_or_default();
    OffsetDateTime::parse(text, &Rfc3339).unwrap_or_else(|e| panic!("{field} of {job}: {e}"))
}

fn gib(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a size: {v}"))
}

#[tokio::test]
async fn fifty_concurrent_resizes_of_one_volume_run_one_at_a_time_each_from_the_size_it_had() {
    let app = TestApp::start_with(TestConfig {
        media: vec![medium("big", "n1", "z1", 100)],
        ..TestConfig::default()
    })
    .await;
    app.create_policy("none", 0, 0, 0).await;
    let (id, job) = app.create_volume("v", 10, "none").await;
    assert_eq!(job["state"], "Done", "{job}");

    let mut sizes: Vec<u64> = (11..=60).collect();
    sizes.shuffle(&mut rand::rng());
    let bodies: Vec<Value> = sizes
        .iter()
        .map(|s| json!({"size": s, "allowdatamovement": false}))
        .collect();
    let answers = concurrent_patches(&app, "v", &bodies).await;

    let mut accepted = HashSet::new();
    for ((status, body), size) in answers.iter().zip(&sizes) {
        match *status {
            StatusCode::OK => {
                accepted.insert(body["JobID"].as_str().expect("JobID").to_string());
            }
            StatusCode::CONFLICT | StatusCode::BAD_REQUEST => {
                assert!(body["message"].is_string(), "{size}: {body}");
            }
            other => panic!("resize to {size}: {other} {body}"),
        }
    }
    assert!(!accepted.is_empty(), "no resize was accepted");
    wait_until_no_job_runs(&app).await;

    let (status, jobs) = app
        .get(&format!(
            "/jobs?object={id}&type=volume_modify_extend&count=1000"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{jobs}");
    let mut jobs = jobs.as_array().cloned().unwrap_or_default();
    let ids: HashSet<String> = jobs.iter().map(|j| j["id"].to_string()).collect();
    assert_eq!(ids, accepted, "one job per accepted request, no other");
    jobs.sort_by_key(|j| time_of(j, "starttime"));

    // Each in turn: Done, started after the one before ended, and grew the
    // volume from the size that one left it at.
    let mut size = 10;
    let mut previous_end: Option<OffsetDateTime> = None;
    for job in &jobs {
        assert_eq!(job["state"], "Done", "{job}");
        let (start, end) = (time_of(job, "starttime"), time_of(job, "endtime"));
        assert!(start <= end, "{job}");
        if let Some(previous) = previous_end {
            assert!(previous <= start, "two resizes overlapped: {jobs:?}");
        }
        previous_end = Some(end);
        assert_eq!(gib(&job["args"]["fromsize"]), size, "{job}");
        assert!(gib(&job["args"]["size"]) > size, "{job}");
        size = gib(&job["args"]["size"]);
    }
    // The last accepted request (the last job to finish) decides the size.
    let (_, volume) = app.get("/volumes/v").await;
    assert_eq!(gib(&volume["size"]), size, "{volume}");
    for slice in app.slices("v").await {
        assert_eq!(gib(&slice["size"]), size, "{slice}");
    }
}

#[tokio::test]
async fn while_a_long_data_movement_runs_exactly_one_of_fifty_concurrent_resizes_is_accepted() {
    // "data" (15 GiB, mirrored) on m1 and m2; the filler goes, so m3 has
    // room: any size of 17..=20 moves the copy on m2 to m3. 16 MiB of data
    // at 4 MiB/s make the movement last about 4 s.
    let app = TestApp::start_with(movement_topology("4 MiB")).await;
    let id = app.mirror_with_16_mib_on_m2().await;

    let mut rng = rand::rng();
    let sizes: Vec<u64> = (0..50)
        .map(|_| *[17u64, 18, 19, 20].choose(&mut rng).unwrap_or(&18))
        .collect();
    let bodies: Vec<Value> = sizes
        .iter()
        .map(|s| json!({"size": s, "allowdatamovement": true}))
        .collect();
    let answers = concurrent_patches(&app, "data", &bodies).await;

    let accepted: Vec<(u64, String)> = answers
        .iter()
        .zip(&sizes)
        .filter(|((status, _), _)| *status == StatusCode::OK)
        .map(|((_, body), size)| {
            (
                *size,
                body["JobID"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(accepted.len(), 1, "{answers:?}");
    for (status, body) in &answers {
        assert!(
            *status == StatusCode::OK || *status == StatusCode::CONFLICT,
            "{status} {body}"
        );
    }
    let (size, job_id) = &accepted[0];
    // The movement was still running when every answer was in.
    let (_, job) = app.get(&format!("/jobs/{job_id}")).await;
    assert!(
        job["state"] == "Running" || job["state"] == "Pending",
        "{job}"
    );

    let job = app.wait_job(job_id).await;
    assert_eq!(job["state"], "Done", "{job}");
    let (_, volume) = app.get("/volumes/data").await;
    assert_eq!(gib(&volume["size"]), *size, "{volume}");
    let (_, jobs) = app
        .get(&format!("/jobs?object={id}&type=volume_modify_extend"))
        .await;
    assert_eq!(jobs.as_array().map(Vec::len), Some(1), "{jobs}");
}

#[tokio::test]
async fn fifty_concurrent_creations_beyond_capacity_never_over_book_a_medium() {
    // 4 media, 80 GiB in all; the requests ask for several times that,
    // half of them with two copies.
    let app = TestApp::start_with(TestConfig {
        media: vec![
            medium("a1", "na", "za", 20),
            medium("a2", "na", "za", 15),
            medium("b1", "nb", "zb", 25),
            medium("c1", "nc", "zc", 20),
        ],
        ..TestConfig::default()
    })
    .await;
    app.create_policy("none", 0, 0, 0).await;
    app.create_policy("mirror", 1, 1, 0).await;

    let mut rng = rand::rng();
    let requests: Vec<_> = (0..50)
        .map(|i| {
            let size = *[2u64, 3, 5, 7, 9].choose(&mut rng).unwrap_or(&3);
            let policy = if i % 2 == 0 { "none" } else { "mirror" };
            let request = app
                .client
                .post(format!("{}/volumes", app.base))
                .header("authorization", &app.token)
                .json(&json!({"name": format!("v{i}"), "type": "block", "size": size, "policy": policy}));
            tokio::spawn(async move {
                let response = request.send().await.expect("request sent");
                (response.status(), response.json::<Value>().await.expect("JSON"))
            })
        })
        .collect();
    for r in requests {
        let (status, body) = r.await.expect("request task");
        assert!(
            status == StatusCode::OK || status == StatusCode::CONFLICT,
            "{status} {body}"
        );
    }
    wait_until_no_job_runs(&app).await;

    let (_, volumes) = app.get("/volumes").await;
    let volumes = volumes.as_array().cloned().unwrap_or_default();
    assert!(!volumes.is_empty(), "some volumes fit");
    let mut booked: BTreeMap<String, u64> = BTreeMap::new();
    for v in &volumes {
        let name = v["name"].as_str().unwrap_or_default();
        for slice in app.slices(name).await {
            let medium = slice["media"].as_str().unwrap_or_default().to_string();
            *booked.entry(medium).or_default() += gib(&slice["size"]);
        }
    }
    let (_, media) = app.get("/media").await;
    let media = media.as_array().cloned().unwrap_or_default();
    assert_eq!(media.len(), 4, "{media:?}");
    let mut used_in_all = 0;
    for m in &media {
        let id = m["mediaid"].as_str().unwrap_or_default();
        let (size, free) = (gib(&m["size"]), m["freesize"].as_i64().expect("freesize"));
        assert!(free >= 0, "{m}");
        let used = booked.get(id).copied().unwrap_or(0);
        assert!(used <= size, "{id} over-booked: {used} of {size} GiB");
        assert_eq!(
            size - free as u64,
            used,
            "{id}: slices vs size - freesize: {m}"
        );
        used_in_all += used;
    }
    // The requests asked for far more than there is: the media are nearly full.
    assert!(used_in_all > 80 / 2, "only {used_in_all} GiB placed");
}
