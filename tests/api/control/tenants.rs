use crate::harness::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

fn message(body: &str) -> Value {
    json!({ "message": body })
}

/// The admin (tenant "default") with policy "gold" and a Ready 10 GiB
/// volume "data"; another tenant's signed-in user. Returns (app, volume id,
/// create job id, other user's IdToken).
async fn two_tenants() -> (TestApp, String, String, String) {
    let app = TestApp::start().await;
    app.create_policy("gold", 1, 1, 1).await;
    let (volume_id, job) = app.create_volume("data", 10, "gold").await;
    assert_eq!(job["state"], "Done", "{job}");
    let job_id = job["id"].to_string();
    let other = app.user_in_tenant("acme", "eve@acme.example").await;
    (app, volume_id, job_id, other)
}

#[tokio::test]
async fn another_tenants_volume_answers_404_exactly_like_a_missing_one() {
    let (app, volume_id, _, other) = two_tenants().await;
    let (status, missing) = app
        .as_user(&other, Method::GET, "/volumes/nothing", None)
        .await;
    assert_eq!(
        (status, missing),
        (StatusCode::NOT_FOUND, message("volume 'nothing' not found"))
    );

    for name in ["data", volume_id.as_str()] {
        let expected = message(&format!("volume '{name}' not found"));
        let calls = [
            (Method::GET, format!("/volumes/{name}"), None),
            (Method::GET, format!("/volumes/{name}/slices"), None),
            (
                Method::PATCH,
                format!("/volumes/{name}"),
                Some(json!({"size": 20})),
            ),
            (
                Method::PATCH,
                format!("/volumes/{name}"),
                Some(json!({"size": 20, "allowdatamovement": true})),
            ),
            (Method::DELETE, format!("/volumes/{name}"), None),
        ];
        for (method, path, body) in calls {
            let (status, answer) = app.as_user(&other, method.clone(), &path, body).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {answer}");
            assert_eq!(answer, expected, "{method} {path}");
        }
    }

    // The owner sees it unchanged, with no new job.
    let (status, volume) = app.get("/volumes/data").await;
    assert_eq!(status, StatusCode::OK, "{volume}");
    assert_eq!(volume["size"], 10);
    assert_eq!(volume["state"], "Ready");
    assert_eq!(volume["volumeid"], volume_id.as_str());
    let (status, jobs) = app.get(&format!("/jobs?object={volume_id}")).await;
    assert_eq!(status, StatusCode::OK, "{jobs}");
    assert_eq!(jobs.as_array().map(Vec::len), Some(1), "{jobs}");
    assert_eq!(
        app.slices("data").await.len(),
        app.slices(&volume_id).await.len()
    );
}

#[tokio::test]
async fn another_tenants_policy_answers_404_and_is_not_changed() {
    let (app, _, _, other) = two_tenants().await;
    app.create_policy("spare", 0, 0, 0).await;
    let (_, before) = app.get("/policies/spare").await;

    for name in ["gold", "spare"] {
        let expected = message(&format!("policy '{name}' not found"));
        let calls = [
            (Method::GET, None),
            (
                Method::PATCH,
                Some(json!({"iopsread": 5, "resiliencymedia": 2})),
            ),
            (Method::PATCH, Some(json!({"name": "stolen"}))),
            (Method::DELETE, None),
        ];
        for (method, body) in calls {
            let path = format!("/policies/{name}");
            let (status, answer) = app.as_user(&other, method.clone(), &path, body).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {answer}");
            assert_eq!(answer, expected, "{method} {path}");
        }
    }
    let (status, missing) = app
        .as_user(&other, Method::DELETE, "/policies/nothing", None)
        .await;
    assert_eq!(
        (status, missing),
        (StatusCode::NOT_FOUND, message("policy 'nothing' not found"))
    );

    let (status, after) = app.get("/policies/spare").await;
    assert_eq!(status, StatusCode::OK, "{after}");
    assert_eq!(after, before);
    assert_eq!(after["updatebyusername"], "");
    let (_, stolen) = app.get("/policies/stolen").await;
    assert_eq!(stolen, message("policy 'stolen' not found"));
}

#[tokio::test]
async fn another_tenants_job_answers_404_like_a_missing_one() {
    let (app, volume_id, job_id, other) = two_tenants().await;
    let (status, own) = app.get(&format!("/jobs/{job_id}")).await;
    assert_eq!(status, StatusCode::OK, "{own}");
    assert_eq!(own["object"], volume_id.as_str());

    let (status, answer) = app
        .as_user(&other, Method::GET, &format!("/jobs/{job_id}"), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert_eq!(answer, message(&format!("job '{job_id}' not found")));
    let (status, answer) = app.as_user(&other, Method::GET, "/jobs/999999", None).await;
    assert_eq!(
        (status, answer),
        (StatusCode::NOT_FOUND, message("job '999999' not found"))
    );

    for query in [
        String::new(),
        format!("?object={volume_id}"),
        "?type=volume_create".to_string(),
        "?state=Done".to_string(),
    ] {
        let (status, jobs) = app
            .as_user(&other, Method::GET, &format!("/jobs{query}"), None)
            .await;
        assert_eq!((status, jobs), (StatusCode::OK, json!([])), "/jobs{query}");
    }
}

#[tokio::test]
async fn lists_show_only_the_callers_own_objects() {
    let (app, _, _, other) = two_tenants().await;
    for path in ["/volumes", "/policies", "/jobs"] {
        let (status, list) = app.as_user(&other, Method::GET, path, None).await;
        assert_eq!((status, list), (StatusCode::OK, json!([])), "{path}");
    }

    // The other tenant makes its own objects.
    let (status, body) = app.as_user(&other,
        Method::POST,
        "/policies",
        Some(json!({"name": "bronze", "resiliencymedia": 1, "resiliencynode": 1, "resiliencyzone": 1})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = app
        .as_user(
            &other,
            Method::POST,
            "/volumes",
            Some(json!({"name": "logs", "type": "block", "size": 5, "policy": "bronze"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job = app
        .wait_job_as(&other, body["JobID"].as_str().unwrap())
        .await;
    assert_eq!(job["state"], "Done", "{job}");

    let names = |list: &Value| -> Vec<String> {
        list.as_array()
            .unwrap_or_else(|| panic!("not a list: {list}"))
            .iter()
            .map(|v| v["name"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let (_, theirs) = app.as_user(&other, Method::GET, "/volumes", None).await;
    assert_eq!(names(&theirs), ["logs"]);
    let (_, theirs) = app.as_user(&other, Method::GET, "/policies", None).await;
    assert_eq!(names(&theirs), ["bronze"]);
    let (_, their_jobs) = app.as_user(&other, Method::GET, "/jobs", None).await;
    let their_jobs = their_jobs.as_array().cloned().unwrap_or_default();
    assert_eq!(their_jobs.len(), 1, "{their_jobs:?}");
    assert_eq!(their_jobs[0]["useremail"], "eve@acme.example");

    let (_, ours) = app.get("/volumes").await;
    assert_eq!(names(&ours), ["data"]);
    let (_, ours) = app.get("/policies").await;
    assert_eq!(names(&ours), ["gold"]);
    let (_, our_jobs) = app.get("/jobs").await;
    let our_jobs = our_jobs.as_array().cloned().unwrap_or_default();
    assert_eq!(our_jobs.len(), 1, "{our_jobs:?}");
    assert_eq!(our_jobs[0]["useremail"], ADMIN_EMAIL);

    // And the admin cannot reach them either.
    let (status, answer) = app.get("/volumes/logs").await;
    assert_eq!(
        (status, answer),
        (StatusCode::NOT_FOUND, message("volume 'logs' not found"))
    );
    let (status, answer) = app.get("/policies/bronze").await;
    assert_eq!(
        (status, answer),
        (StatusCode::NOT_FOUND, message("policy 'bronze' not found"))
    );
    let their_job = job["id"].to_string();
    let (status, answer) = app.get(&format!("/jobs/{their_job}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
}

#[tokio::test]
async fn tenants_use_the_same_names_independently() {
    let (app, volume_id, _, other) = two_tenants().await;
    // "gold" and "data" exist in the admin's tenant; that must not show here.
    let (status, body) = app.as_user(&other,
        Method::POST,
        "/policies",
        Some(
            json!({"name": "gold", "resiliencymedia": 0, "resiliencynode": 0, "resiliencyzone": 0}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = app
        .as_user(
            &other,
            Method::POST,
            "/volumes",
            Some(json!({"name": "data", "type": "block", "size": 3, "policy": "gold"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let their_id = body["ObjectID"].as_str().unwrap().to_string();
    assert_ne!(their_id, volume_id);
    let job = app
        .wait_job_as(&other, body["JobID"].as_str().unwrap())
        .await;
    assert_eq!(job["state"], "Done", "{job}");

    let (_, theirs) = app
        .as_user(&other, Method::GET, "/volumes/data", None)
        .await;
    assert_eq!(theirs["volumeid"], their_id.as_str());
    assert_eq!(theirs["size"], 3);
    let (_, ours) = app.get("/volumes/data").await;
    assert_eq!(ours["volumeid"], volume_id.as_str());
    assert_eq!(ours["size"], 10);
    let (_, their_policy) = app
        .as_user(&other, Method::GET, "/policies/gold", None)
        .await;
    assert_eq!(their_policy["resiliencymedia"], 0);
    let (_, our_policy) = app.get("/policies/gold").await;
    assert_eq!(our_policy["resiliencymedia"], 1);

    // Deleting theirs leaves ours alone.
    let (status, body) = app
        .as_user(&other, Method::DELETE, "/volumes/data", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job = app
        .wait_job_as(&other, body["JobID"].as_str().unwrap())
        .await;
    assert_eq!(job["state"], "Done", "{job}");
    let (status, body) = app
        .as_user(&other, Method::DELETE, "/policies/gold", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, ours) = app.get("/volumes/data").await;
    assert_eq!(status, StatusCode::OK, "{ours}");
    let (status, ours) = app.get("/policies/gold").await;
    assert_eq!(status, StatusCode::OK, "{ours}");
}

#[tokio::test]
async fn a_volume_cannot_use_another_tenants_policy() {
    let (app, _, _, other) = two_tenants().await;
    let (status, body) = app
        .as_user(
            &other,
            Method::POST,
            "/volumes",
            Some(json!({"name": "sneaky", "type": "block", "size": 5, "policy": "gold"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body, message("policy 'gold' does not exist"));
    let (_, volumes) = app.as_user(&other, Method::GET, "/volumes", None).await;
    assert_eq!(volumes, json!([]));
}

#[tokio::test]
async fn media_and_nodes_are_shared_by_all_tenants() {
    let (app, _, _, other) = two_tenants().await;
    for path in ["/media", "/nodes", "/media/node-a-m1", "/nodes/node-b"] {
        let (status, ours) = app.get(path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {ours}");
        let (status, theirs) = app.as_user(&other, Method::GET, path, None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {theirs}");
        assert_eq!(ours, theirs, "{path}");
    }
    let (_, media) = app.as_user(&other, Method::GET, "/media", None).await;
    assert_eq!(media.as_array().map(Vec::len), Some(6), "{media}");
    // The admin's volume uses shared capacity, visible to everyone.
    let used: Vec<&Value> = media
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["freesize"] != m["size"])
        .collect();
    assert!(!used.is_empty(), "the admin's volume takes space: {media}");
    let (status, answer) = app
        .as_user(&other, Method::GET, "/media/nothing", None)
        .await;
    assert_eq!(
        (status, answer),
        (StatusCode::NOT_FOUND, message("media 'nothing' not found"))
    );
    let (status, answer) = app
        .as_user(&other, Method::GET, "/nodes/nothing", None)
        .await;
    assert_eq!(
        (status, answer),
        (StatusCode::NOT_FOUND, message("node 'nothing' not found"))
    );
}

#[tokio::test]
async fn users_of_the_same_tenant_share_its_objects() {
    let (app, volume_id, job_id, _) = two_tenants().await;
    let colleague = app.user_in_tenant("default", "bob@example.com").await;
    let (_, claims) = jwt_parts(&colleague);
    assert_eq!(claims["tenant"], "default");
    for path in [
        "/volumes/data".to_string(),
        format!("/volumes/{volume_id}"),
        "/volumes/data/slices".to_string(),
        "/policies/gold".to_string(),
        format!("/jobs/{job_id}"),
    ] {
        let (status, body) = app.as_user(&colleague, Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
    let (_, volumes) = app.as_user(&colleague, Method::GET, "/volumes", None).await;
    assert_eq!(volumes.as_array().map(Vec::len), Some(1), "{volumes}");
    // Changes by the colleague are recorded as theirs.
    let (status, body) = app
        .as_user(
            &colleague,
            Method::PATCH,
            "/policies/gold",
            Some(json!({"iopsread": 7})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, policy) = app.get("/policies/gold").await;
    assert_eq!(policy["iopsread"], 7);
    assert_eq!(policy["updatebyUseremail"], "bob@example.com");
    assert_eq!(policy["updatebyusername"], "bob");
    assert_eq!(policy["createdbyuseremail"], ADMIN_EMAIL);
}

#[tokio::test]
async fn the_id_token_carries_the_users_tenant() {
    let app = TestApp::start().await;
    let other = app.user_in_tenant("acme", "eve@acme.example").await;
    let (_, admin) = jwt_parts(&app.token);
    let (_, eve) = jwt_parts(&other);
    assert_eq!(admin["tenant"], "default");
    assert_eq!(eve["tenant"], "acme");
    assert_eq!(eve["email"], "eve@acme.example");
    assert_ne!(admin["sub"], eve["sub"]);
}
