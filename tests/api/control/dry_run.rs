//! Dry runs of a resize and of a creation (`?dryrun=true`): the plan the
//! request would carry out, answered after the same checks and changing
//! nothing; the real request given the plan back (`?plan=<token>`) does
//! what the dry run said, or is refused with 409 naming what changed.

use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

const NO_IN_PLACE: &str = "GetModificationPlan: Could not find an in-place modification plan";
const NO_TARGET: &str =
    "GetModificationPlan: Failed to get modificationPlan for resizing volumeGroup";
const MOVEMENT_FOUND: &str = "GetMovementModificationPlan: Found movement plan. Data Movement is enabled. The operation is now being attempted";
const NO_RESILIENCY: &str =
    "GetModificationPlan: Data movement is not supported for volumes with no resiliency";
const MIB: u64 = 1 << 20;

async fn dry_resize(app: &TestApp, size: u64, movement: bool) -> Value {
    let (status, plan) = app
        .patch(
            "/volumes/data?dryrun=true",
            json!({"size": size, "allowdatamovement": movement}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{plan}");
    assert_eq!(plan["dryrun"], true, "{plan}");
    plan
}

/// The real resize, given the dry run's plan: its answer.
async fn resize_as_planned(
    app: &TestApp,
    size: u64,
    movement: bool,
    plan: &Value,
) -> (StatusCode, Value) {
    let token = plan["plan"].as_str().expect("a plan token");
    app.patch(
        &format!("/volumes/data?plan={token}"),
        json!({"size": size, "allowdatamovement": movement}),
    )
    .await
}

/// What a dry run must leave as it was: the media's free space, the jobs,
/// the volume.
async fn state(app: &TestApp) -> (Vec<u64>, usize, Value) {
    let mut free = Vec::new();
    for m in ["m1", "m2", "m3"] {
        free.push(app.free(m).await);
    }
    let (_, jobs) = app.get("/jobs").await;
    let (_, volume) = app.get("/volumes/data").await;
    let volume = json!({"size": volume["size"], "state": volume["state"]});
    (free, jobs.as_array().map_or(0, Vec::len), volume)
}

/// Each plan kind and refusal of a resize, dry run first, then the real
/// request with its plan: the refusals end the job with the dry run's
/// message; the movement plan moves the slice the dry run named (its bytes
/// of data measured, its time at `movement_rate` estimated) after a change
/// in between was refused with 409 naming it; nothing changes on a dry run.
#[tokio::test]
async fn a_resize_does_what_its_dry_run_said_or_is_refused_naming_what_changed() {
    let app = TestApp::start_with(movement_topology("4 MiB")).await;
    let id = app.mirror_beside_filler().await;

    // m2 (1 GiB free) cannot grow its copy by 3 GiB; m3 (10 free) cannot
    // take an 18 GiB copy.
    for (movement, refusal) in [(false, NO_IN_PLACE), (true, NO_TARGET)] {
        let before = state(&app).await;
        let plan = dry_resize(&app, 18, movement).await;
        assert_eq!(
            (&plan["outcome"], &plan["message"]),
            (&json!("refused"), &json!(refusal)),
            "{plan}"
        );
        assert_eq!(plan["moves"], json!([]));
        assert_eq!(state(&app).await, before, "a dry run changes nothing");
        let (status, started) = resize_as_planned(&app, 18, movement, &plan).await;
        assert_eq!(status, StatusCode::OK, "{started}");
        let job = app.wait_job_of(&started).await;
        assert_eq!(job["state"], "Error", "{job}");
        assert_eq!(details(&job).last().map(String::as_str), Some(refusal));
    }

    // Room on m3: the copy on m2 (16 MiB of data) would move there.
    app.delete_volume("filler").await;
    for i in 0..16u64 {
        write_at(
            &app.slice_path("m2", &id, 1, 0),
            i * MIB,
            &pattern(i, MIB as usize),
        );
    }
    let before = state(&app).await;
    let plan = dry_resize(&app, 18, true).await;
    assert_eq!(state(&app).await, before, "a dry run changes nothing");
    assert_eq!(plan["outcome"], "movement", "{plan}");
    assert_eq!(plan["message"], MOVEMENT_FOUND);
    assert_eq!(
        (plan["fromsize"].as_u64(), plan["size"].as_u64()),
        (Some(15), Some(18))
    );
    let bytes = plan["moves"][0]["bytes"].as_u64().expect("bytes");
    assert!((16 * MIB..=17 * MIB).contains(&bytes), "{plan}");
    assert_eq!(
        plan["moves"],
        json!([{"slice": "c1-k0", "from": "m2", "fromnode": "n2", "to": "m3", "tonode": "n3",
            "size": 18, "bytes": bytes, "measured": true}])
    );
    assert_eq!(
        plan["growths"],
        json!([{"slice": "c0-k0", "medium": "m1", "from": 15, "to": 18}])
    );
    assert_eq!(plan["bytestocopy"], bytes);
    assert_eq!(plan["movementrate"], 4 * MIB);
    assert_eq!(plan["estimatedseconds"], bytes.div_ceil(4 * MIB));

    // m3 taken meanwhile: the real request is refused, naming the change,
    // and starts nothing.
    let (_, job) = app.create_volume("taker", 20, "none").await;
    assert_eq!(job["state"], "Done", "{job}");
    let taken = state(&app).await;
    let (status, refused) = resize_as_planned(&app, 18, true, &plan).await;
    assert_eq!(
        (status, refused),
        (
            StatusCode::CONFLICT,
            json!({"message": format!(
                "The plan changed since its dry run: it was planned with movement of 1 \
                 slice(s), it is now planned refused ({NO_TARGET}). Nothing was changed; run \
                 the dry run again"
            )})
        )
    );
    assert_eq!(state(&app).await, taken);

    // Room again: the plan holds, and the resize carries it out.
    app.delete_volume("taker").await;
    let (status, started) = resize_as_planned(&app, 18, true, &plan).await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let job = app.wait_job_of(&started).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert!(details(&job).iter().any(|d| d == MOVEMENT_FOUND), "{job}");
    let slices = app.slices("data").await;
    let on = |copy: u64| {
        slices
            .iter()
            .find(|s| s["copy"] == copy)
            .map(|s| s["media"].clone())
    };
    assert_eq!((on(0), on(1)), (Some(json!("m1")), Some(json!("m3"))));

    // In place now (m1 and m3 have room for 2 GiB more each).
    let plan = dry_resize(&app, 20, false).await;
    assert_eq!(
        (
            &plan["outcome"],
            &plan["moves"],
            plan["estimatedseconds"].is_null()
        ),
        (&json!("inplace"), &json!([]), true),
        "{plan}"
    );
    let (status, started) = resize_as_planned(&app, 20, false, &plan).await;
    assert_eq!(status, StatusCode::OK, "{started}");
    assert_eq!(app.wait_job_of(&started).await["state"], "Done");
}

/// A dry run is refused as the request is (the same status and message),
/// and a plan that is not a dry run's token is a 400; movement for a
/// volume without resiliency is refused by the dry run as by its job.
#[tokio::test]
async fn a_dry_run_is_refused_as_its_request_is_and_a_bad_plan_token_is_a_400() {
    let app = TestApp::start_with(movement_topology("0")).await;
    app.mirror_beside_filler().await;
    for (path, body) in [
        (
            "/volumes/data",
            json!({"size": 10, "allowdatamovement": true}),
        ),
        (
            "/volumes/data",
            json!({"size": 200, "allowdatamovement": true}),
        ),
        (
            "/volumes/nope",
            json!({"size": 20, "allowdatamovement": true}),
        ),
        ("/volumes/data", json!({"size": "x"})),
    ] {
        let real = app.patch(path, body.clone()).await;
        assert_ne!(real.0, StatusCode::OK, "{real:?}");
        let dry = app.patch(&format!("{path}?dryrun=true"), body).await;
        assert_eq!(dry, real);
    }
    let body = json!({"size": 16, "allowdatamovement": false});
    for (query, message) in [
        ("plan=zz", "plan must be the plan token a dry run answered"),
        ("plan=", "plan must be the plan token a dry run answered"),
        ("dryrun=yes", "dryrun must be true or false"),
        (
            "dryrun=true&plan=7b7d",
            "plan is given with a real request, not with a dry run",
        ),
    ] {
        assert_eq!(
            app.patch(&format!("/volumes/data?{query}"), body.clone())
                .await,
            (StatusCode::BAD_REQUEST, json!({"message": message})),
            "{query}"
        );
    }
    assert_eq!(app.get("/volumes/data").await.1["size"], 15);

    // A volume without resiliency: movement refused by the dry run, and by
    // the job its plan then starts.
    let body = json!({"size": 25, "allowdatamovement": true});
    let (status, plan) = app.patch("/volumes/filler?dryrun=true", body.clone()).await;
    assert_eq!(status, StatusCode::OK, "{plan}");
    assert_eq!(
        (&plan["outcome"], &plan["message"]),
        (&json!("refused"), &json!(NO_RESILIENCY))
    );
    let token = plan["plan"].as_str().expect("token");
    let (status, started) = app
        .patch(&format!("/volumes/filler?plan={token}"), body)
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let job = app.wait_job_of(&started).await;
    assert_eq!(
        details(&job).last().map(String::as_str),
        Some(NO_RESILIENCY)
    );
}

/// A creation's dry run names where each slice would go; the creation
/// given the plan places them so; a name in use is refused as the request
/// is; a placement that changed since is a 409 naming the change.
#[tokio::test]
async fn a_creation_does_what_its_dry_run_said_or_is_refused_naming_what_changed() {
    let app = TestApp::start_with(movement_topology("0")).await;
    app.mirror_beside_filler().await;
    let (_, jobs) = app.get("/jobs").await;
    let body = json!({"name": "x", "type": "block", "size": 8, "policy": "none"});
    let (status, plan) = app.post("/volumes?dryrun=true", body.clone()).await;
    assert_eq!(status, StatusCode::OK, "{plan}");
    let token = plan["plan"].as_str().expect("token").to_string();
    assert_eq!(
        plan,
        json!({"dryrun": true, "volume": "x", "size": 8, "outcome": "placed", "message": "",
            "slices": [{"slice": "c0-k0", "medium": "m3", "node": "n3", "size": 8}],
            "plan": token})
    );
    assert_eq!(app.get("/volumes/x").await.0, StatusCode::NOT_FOUND);
    assert_eq!(app.get("/jobs").await.1, jobs, "a dry run starts no job");
    let taken = json!({"name": "data", "type": "block", "size": 1, "policy": "none"});
    assert_eq!(
        app.post("/volumes?dryrun=true", taken).await,
        (
            StatusCode::CONFLICT,
            json!({"message": "a volume named 'data' already exists"})
        )
    );

    // m3 taken meanwhile (only it had room for 9 GiB): refused, naming it.
    let (_, job) = app.create_volume("y", 9, "none").await;
    assert_eq!(job["state"], "Done", "{job}");
    let (status, refused) = app
        .post(&format!("/volumes?plan={token}"), body.clone())
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(
        refused["message"],
        "The plan changed since its dry run: it was planned a placement of 1 slice(s), it is \
         now planned refused (no placement found for a volume of 8 GiB with 1 copies: not \
         enough free space on media that satisfy the policy's resiliency). Nothing was \
         changed; run the dry run again"
    );
    assert_eq!(app.get("/volumes/x").await.0, StatusCode::NOT_FOUND);
    app.delete_volume("y").await;
    let (status, started) = app.post(&format!("/volumes?plan={token}"), body).await;
    assert_eq!(status, StatusCode::OK, "{started}");
    assert_eq!(app.wait_job_of(&started).await["state"], "Done");
    let slices = app.slices("x").await;
    assert_eq!(slices.len(), 1);
    assert_eq!(slices[0]["media"], "m3");
}
