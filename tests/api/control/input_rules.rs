//! Input that changes nothing or names things badly (issue 30): a PATCH of
//! an attachment that changes nothing is 400 and starts no job; volume and
//! other resource names that are all dots or start with '-' are refused;
//! e-mails of new users with control or bidi characters are refused.

use crate::harness::attach::{attach, topology};
use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn job_count(app: &TestApp) -> usize {
    let (status, jobs) = app.get("/jobs").await;
    assert_eq!(status, StatusCode::OK, "{jobs}");
    jobs.as_array().map(Vec::len).expect("a job list")
}

async fn done(app: &TestApp, (status, body): (StatusCode, Value)) -> Value {
    assert_eq!(status, StatusCode::OK, "{body}");
    let job = app.wait_job_of(&body).await;
    assert_eq!(job["state"], "Done", "{job}");
    job
}

#[tokio::test]
async fn an_attachment_change_that_changes_nothing_is_refused_without_a_job() {
    let app = TestApp::start_with(topology("0")).await;
    app.create_policy("p", 0, 0, 0).await;
    app.create_volume("v", 1, "p").await;
    attach(&app, "v", "host-1", false).await;
    done(
        &app,
        app.post(
            "/volumes/v/snapshots",
            json!({"name": "s1", "consistency": "crash"}),
        )
        .await,
    )
    .await;
    done(
        &app,
        app.post(
            "/volumes/v/snapshots/s1/attachments",
            json!({"node": "host-1", "mountpoint": "/mnt/s1"}),
        )
        .await,
    )
    .await;
    let jobs = job_count(&app).await;

    let named_nothing = "nothing to change: send readonly or mountpoint (or both)";
    let cases = [
        // Snapshot attachment (read-only, /mnt/s1).
        ("s1", json!({"": null}), named_nothing.to_string()),
        ("s1", json!({}), named_nothing.to_string()),
        (
            "s1",
            json!({"node": "host-1", "volumename": "v", "allocated_resources": 10}),
            named_nothing.to_string(),
        ),
        (
            "s1",
            json!({"readonly": true}),
            "nothing to change: the attachment is already read-only with mountpoint '/mnt/s1'"
                .to_string(),
        ),
        (
            "s1",
            json!({"readonly": true, "mountpoint": "/mnt/s1"}),
            "nothing to change: the attachment is already read-only with mountpoint '/mnt/s1'"
                .to_string(),
        ),
        // The live volume's attachment (read-write, /mnt/data).
        ("top", json!({"": null}), named_nothing.to_string()),
        ("top", json!({}), named_nothing.to_string()),
        (
            "top",
            json!({"mountpoint": "/mnt/data", "readonly": false}),
            "nothing to change: the attachment is already read-write with mountpoint '/mnt/data'"
                .to_string(),
        ),
    ];
    for (snapshot, body, message) in cases {
        let (status, answer) = app
            .patch(
                &format!("/volumes/v/snapshots/{snapshot}/attachments/host-1"),
                body.clone(),
            )
            .await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "{snapshot} {body}: {answer}"
        );
        assert_eq!(answer, json!({ "message": message }), "{snapshot} {body}");
    }
    assert_eq!(job_count(&app).await, jobs, "no job was started");

    // A real change still is one job.
    let job = done(
        &app,
        app.patch(
            "/volumes/v/snapshots/s1/attachments/host-1",
            json!({"mountpoint": "/srv/s1"}),
        )
        .await,
    )
    .await;
    assert_eq!(job["type"], "attachment_modify");
    let (_, a) = app.get("/volumes/v/snapshots/s1/attachments/host-1").await;
    assert_eq!(
        (&a["readonly"], &a["mountpoint"]),
        (&json!(true), &json!("/srv/s1"))
    );
    assert_eq!(job_count(&app).await, jobs + 1);
}

#[tokio::test]
async fn names_that_are_all_dots_or_start_with_a_dash_are_refused() {
    let app = TestApp::start().await;
    app.create_policy("p", 0, 0, 0).await;
    for name in [".", "..", "...", "-", "-rf", "--help"] {
        let (status, body) = app
            .post(
                "/volumes",
                json!({"name": name, "type": "block", "size": 1, "policy": "p"}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {body}");
        let message = if name.starts_with('-') {
            "volume name must not start with '-'"
        } else {
            "volume name must not be only dots"
        };
        assert_eq!(body, json!({ "message": message }), "{name}");
        let (status, body) = app.post("/policies", json!({"name": name})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "policy {name}: {body}");
    }
    let (status, volumes) = app.get("/volumes").await;
    assert_eq!((status, volumes), (StatusCode::OK, json!([])));
    // Dots and dashes inside a name are fine.
    for name in ["a.b", ".hidden", "a-", "x..y", "v-1"] {
        let (status, body) = app
            .post(
                "/volumes",
                json!({"name": name, "type": "block", "size": 1, "policy": "p"}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
    }
    // Snapshots too.
    let (status, body) = app
        .post(
            "/volumes/a.b/snapshots",
            json!({"name": "..", "consistency": "crash"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        body,
        json!({"message": "snapshot name must not be only dots"})
    );
}

#[tokio::test]
async fn new_users_with_control_or_bidi_characters_in_their_e_mail_are_refused() {
    let app = TestApp::start().await;
    for email in [
        "eve\u{1b}[31m@acme.example",
        "eve@acme\u{202e}elpmaxe",
        "eve\u{200b}@acme.example",
        "eve@acme.example\u{7f}",
        "eve\u{2066}@acme.example",
        "\u{feff}eve@acme.example",
    ] {
        let (status, body) = app
            .post(
                "/users",
                json!({"email": email, "password": "eve-password", "tenant": "acme"}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{email:?}: {body}");
        assert_eq!(
            body,
            json!({"message": "the e-mail address must not contain control or bidirectional formatting characters"}),
            "{email:?}"
        );
    }
    let (_, users) = app.get("/users").await;
    assert_eq!(users.as_array().map(Vec::len), Some(1), "{users}");
    // Letters of any script are fine.
    let (status, body) = app
        .post(
            "/users",
            json!({"email": "élodie@exemple.fr", "password": "eve-password", "tenant": "acme"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}
