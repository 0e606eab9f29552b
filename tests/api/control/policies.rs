use crate::harness::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

fn message(body: &str) -> Value {
    json!({ "message": body })
}

/// A policy with every reference field set to a non-default value.
fn full_policy(name: &str) -> Value {
    json!({
        "name": name,
        "resiliencymedia": 1,
        "resiliencynode": 2,
        "resiliencyzone": 0,
        "iopswrite": 1000,
        "iopsread": 2000,
        "bandwidthwrite": 300,
        "bandwidthread": 400,
        "latencywrite": 5,
        "latencyread": 6,
        "localzoneread": true,
        "failureperformance": true,
        "capacityoptimization": "balanced",
        "capacityreservation": 50,
        "encryption": true,
        "sed": true,
        "integrity": true,
        "snapshotkeep": 7,
        "snapshotfrequency": "daily",
        "snapshotday": 3,
        "snapshothour": 4,
        "snapshotminute": 5,
    })
}

fn is_rfc3339_utc(s: &Value) -> bool {
    let s = s.as_str().unwrap_or_default();
    s.len() >= 20 && s.as_bytes()[4] == b'-' && s.as_bytes()[10] == b'T' && s.ends_with('Z')
}

#[tokio::test]
async fn a_policy_stores_and_returns_every_reference_field() {
    let app = TestApp::start().await;
    let sent = full_policy("gold");
    let (status, body) = app.post("/policies", sent.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"Message": "Policy created", "ObjectID": "gold"})
    );

    let (status, got) = app.get("/policies/gold").await;
    assert_eq!(status, StatusCode::OK, "{got}");
    for (key, value) in sent.as_object().unwrap() {
        assert_eq!(&got[key], value, "{key}: {got}");
    }
    assert_eq!(got["createdbyuserName"], "admin");
    assert_eq!(got["createdbyuseremail"], ADMIN_EMAIL);
    assert!(is_rfc3339_utc(&got["createdtime"]), "{got}");
    assert_eq!(got["updatebyusername"], "");
    assert_eq!(got["updatebyUseremail"], "");
    assert_eq!(got["updatetime"], "");

    let (status, list) = app.get("/policies").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list, json!([got]));
}

#[tokio::test]
async fn policy_fields_survive_a_restart() {
    let mut app = TestApp::start().await;
    let (status, body) = app.post("/policies", full_policy("gold")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, before) = app.get("/policies/gold").await;
    app.restart().await;
    let (status, after) = app.get("/policies/gold").await;
    assert_eq!(status, StatusCode::OK, "{after}");
    assert_eq!(after, before);
}

#[tokio::test]
async fn omitted_fields_take_the_reference_defaults() {
    let app = TestApp::start().await;
    let (status, body) = app.post("/policies", json!({"name": "plain"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, got) = app.get("/policies/plain").await;
    assert_eq!(got["resiliencymedia"], 2, "{got}");
    assert_eq!(got["resiliencynode"], 1, "{got}");
    assert_eq!(got["resiliencyzone"], 1, "{got}");
    assert_eq!(got["capacityoptimization"], "performance", "{got}");
    // Settings never given are left out, not null.
    assert!(got.get("encryption").is_none(), "{got}");
}

#[tokio::test]
async fn null_policy_fields_are_refused_like_any_other_wrong_type() {
    let app = TestApp::start().await;
    for (key, message) in [
        ("resiliencymedia", "resiliencymedia must be a number"),
        ("encryption", "encryption must be true or false"),
        (
            "capacityoptimization",
            "capacityoptimization must be a string",
        ),
    ] {
        let mut body = json!({"name": "nulls"});
        body[key] = Value::Null;
        let (status, reply) = app.post("/policies", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {reply}");
        assert_eq!(reply, json!({"message": message}), "{body}");
    }
    // A whole Policy object may come back with its authorship: strings,
    // ignored (found by fuzzing: any type was accepted).
    let (status, reply) = app
        .post("/policies", json!({"name": "p", "updatetime": 5}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(reply, json!({"message": "updatetime must be a string"}));
    let (status, reply) = app
        .post(
            "/policies",
            json!({"name": "echo", "createdbyuserName": "someone", "createdtime": "2020-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let (_, echo) = app.get("/policies/echo").await;
    assert_eq!(echo["createdbyuserName"], "admin", "{echo}");
    let (_, reply) = app.delete("/policies/echo").await;
    assert_eq!(reply["Message"], "Policy deleted");
    let (status, reply) = app.post("/policies", json!({"name": null})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(reply, json!({"message": "name is required"}));
    let (_, list) = app.get("/policies").await;
    assert_eq!(list, json!([]));
}

#[tokio::test]
async fn policies_are_listed_by_name() {
    let app = TestApp::start().await;
    let (status, list) = app.get("/policies").await;
    assert_eq!((status, list), (StatusCode::OK, json!([])));
    for name in ["silver", "bronze", "gold"] {
        app.create_policy(name, 1, 1, 1).await;
    }
    let (status, list) = app.get("/policies").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bronze", "gold", "silver"]);
}

#[tokio::test]
async fn resiliency_levels_outside_zero_to_two_are_a_400() {
    let app = TestApp::start().await;
    app.create_policy("gold", 1, 1, 1).await;
    for key in ["resiliencymedia", "resiliencynode", "resiliencyzone"] {
        let range = format!("{key} must be a whole number from 0 to 2");
        for (value, expected) in [
            (json!(3), range.clone()),
            (json!(255), range.clone()),
            (json!(256), range.clone()),
            (json!(-1), range.clone()),
            (json!(1.5), range.clone()),
            (json!(u64::MAX), range.clone()),
            (json!(1e300), range.clone()),
            (json!("1"), format!("{key} must be a number")),
            (json!(true), format!("{key} must be a number")),
            (json!([1]), format!("{key} must be a number")),
        ] {
            let (status, body) = app
                .post("/policies", json!({"name": "bad", key: value}))
                .await;
            assert_eq!(
                status,
                StatusCode::BAD_REQUEST,
                "POST {key}={value}: {body}"
            );
            assert_eq!(body, message(&expected), "POST {key}={value}");
            let (status, body) = app.patch("/policies/gold", json!({key: value})).await;
            assert_eq!(
                status,
                StatusCode::BAD_REQUEST,
                "PATCH {key}={value}: {body}"
            );
            assert_eq!(body, message(&expected), "PATCH {key}={value}");
        }
    }
    let (status, body) = app.get("/policies/bad").await;
    assert_eq!(
        (status, body),
        (StatusCode::NOT_FOUND, message("policy 'bad' not found"))
    );
    let (_, gold) = app.get("/policies/gold").await;
    assert_eq!(
        (
            &gold["resiliencymedia"],
            &gold["resiliencynode"],
            &gold["resiliencyzone"]
        ),
        (&json!(1), &json!(1), &json!(1))
    );
    assert_eq!(gold["updatetime"], "", "refused PATCHes change nothing");

    // The edges 0 and 2 are allowed, also written as 2.0.
    for (name, level) in [
        ("zero", json!(0)),
        ("two", json!(2)),
        ("two-float", json!(2.0)),
    ] {
        let (status, body) = app
            .post(
                "/policies",
                json!({"name": name, "resiliencymedia": level, "resiliencynode": level, "resiliencyzone": level}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
    }
    let (_, two) = app.get("/policies/two-float").await;
    assert_eq!(two["resiliencyzone"], 2);
}

#[tokio::test]
async fn other_policy_fields_are_validated() {
    let app = TestApp::start().await;
    let name_rule = "policy name must be 1 to 63 characters of letters, digits, '.', '_' or '-'";
    let cases = [
        (json!({}), "name is required".to_string()),
        (json!({"name": ""}), name_rule.to_string()),
        (json!({"name": 5}), "name must be a string".to_string()),
        (json!({"name": "bad name"}), name_rule.to_string()),
        (json!({"name": "a/b"}), name_rule.to_string()),
        (json!({"name": "é"}), name_rule.to_string()),
        (json!({"name": "x".repeat(64)}), name_rule.to_string()),
        (
            json!({"name": "p", "encryption": "yes"}),
            "encryption must be true or false".to_string(),
        ),
        (
            json!({"name": "p", "sed": 1}),
            "sed must be true or false".to_string(),
        ),
        (
            json!({"name": "p", "capacityoptimization": "fast"}),
            "capacityoptimization must be one of capacity, balanced, performance".to_string(),
        ),
        (
            json!({"name": "p", "capacityoptimization": 1}),
            "capacityoptimization must be a string".to_string(),
        ),
        (
            json!({"name": "p", "snapshotfrequency": 1}),
            "snapshotfrequency must be a string".to_string(),
        ),
        (
            json!({"name": "p", "snapshothour": 24}),
            "snapshothour must be a whole number from 0 to 23".to_string(),
        ),
        (
            json!({"name": "p", "snapshotminute": 60}),
            "snapshotminute must be a whole number from 0 to 59".to_string(),
        ),
        (
            json!({"name": "p", "snapshotday": 32}),
            "snapshotday must be a whole number from 0 to 31".to_string(),
        ),
        (
            json!({"name": "p", "capacityreservation": 501}),
            "capacityreservation must be a whole number from 0 to 500".to_string(),
        ),
        (
            json!({"name": "p", "iopswrite": 4_294_967_296u64}),
            "iopswrite must be a whole number from 0 to 4294967295".to_string(),
        ),
        (
            json!({"name": "p", "latencyread": "fast"}),
            "latencyread must be a number".to_string(),
        ),
    ];
    for (body, expected) in cases {
        let (status, answer) = app.post("/policies", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer, message(&expected), "{body}");
    }
    let (status, list) = app.get("/policies").await;
    assert_eq!((status, list), (StatusCode::OK, json!([])));
    // The longest allowed name and the whole alphabet are fine.
    for name in ["x".repeat(63), "Gold-1.fast_ok".to_string()] {
        let (status, body) = app.post("/policies", json!({"name": name})).await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
    }
}

#[tokio::test]
async fn a_duplicate_policy_name_is_a_409() {
    let app = TestApp::start().await;
    app.create_policy("gold", 1, 1, 1).await;
    let (status, body) = app
        .post(
            "/policies",
            json!({"name": "gold", "resiliencymedia": 0, "iopsread": 9}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body, message("a policy named 'gold' already exists"));
    let (_, gold) = app.get("/policies/gold").await;
    assert_eq!(gold["resiliencymedia"], 1);
    assert!(gold.get("iopsread").is_none(), "{gold}");
    let (_, list) = app.get("/policies").await;
    assert_eq!(list.as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn patch_changes_only_the_given_fields_and_records_who_and_when() {
    let app = TestApp::start().await;
    let (status, body) = app.post("/policies", full_policy("gold")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, before) = app.get("/policies/gold").await;

    let (status, body) = app
        .patch(
            "/policies/gold",
            json!({"iopsread": 5, "encryption": false, "resiliencyzone": 2}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"Message": "Policy updated", "ObjectID": "gold"})
    );

    let (_, after) = app.get("/policies/gold").await;
    let mut expected = before.clone();
    expected["iopsread"] = json!(5);
    expected["encryption"] = json!(false);
    expected["resiliencyzone"] = json!(2);
    expected["updatebyusername"] = json!("admin");
    expected["updatebyUseremail"] = json!(ADMIN_EMAIL);
    assert!(is_rfc3339_utc(&after["updatetime"]), "{after}");
    expected["updatetime"] = after["updatetime"].clone();
    assert_eq!(after, expected);
    assert_eq!(after["createdtime"], before["createdtime"]);

    // An empty PATCH changes no field.
    let (status, body) = app.patch("/policies/gold", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, again) = app.get("/policies/gold").await;
    for key in full_policy("gold").as_object().unwrap().keys() {
        assert_eq!(again[key], after[key], "{key}");
    }
}

#[tokio::test]
async fn patch_can_rename_a_policy_but_not_onto_another() {
    let app = TestApp::start().await;
    app.create_policy("gold", 1, 1, 1).await;
    app.create_policy("silver", 0, 0, 0).await;
    let (status, body) = app.patch("/policies/gold", json!({"name": "silver"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body, message("a policy named 'silver' already exists"));
    let (_, gold) = app.get("/policies/gold").await;
    assert_eq!(gold["updatetime"], "");

    let (status, body) = app
        .patch("/policies/gold", json!({"name": "platinum"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"Message": "Policy updated", "ObjectID": "platinum"})
    );
    let (status, body) = app.get("/policies/gold").await;
    assert_eq!(
        (status, body),
        (StatusCode::NOT_FOUND, message("policy 'gold' not found"))
    );
    let (status, platinum) = app.get("/policies/platinum").await;
    assert_eq!(status, StatusCode::OK, "{platinum}");
    assert_eq!(platinum["resiliencymedia"], 1);

    let (status, body) = app
        .patch("/policies/platinum", json!({"name": "no good"}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test]
async fn unknown_policies_are_a_404() {
    let app = TestApp::start().await;
    let expected = message("policy 'nope' not found");
    let (status, body) = app.get("/policies/nope").await;
    assert_eq!((status, body), (StatusCode::NOT_FOUND, expected.clone()));
    let (status, body) = app.patch("/policies/nope", json!({"iopsread": 1})).await;
    assert_eq!((status, body), (StatusCode::NOT_FOUND, expected.clone()));
    let (status, body) = app.delete("/policies/nope").await;
    assert_eq!((status, body), (StatusCode::NOT_FOUND, expected));
    // A PATCH of a missing policy creates nothing.
    let (_, list) = app.get("/policies").await;
    assert_eq!(list, json!([]));
}

#[tokio::test]
async fn deleting_a_policy_removes_it() {
    let app = TestApp::start().await;
    app.create_policy("gold", 1, 1, 1).await;
    let (status, body) = app.delete("/policies/gold").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"Message": "Policy deleted", "ObjectID": "gold"})
    );
    let (status, body) = app.get("/policies/gold").await;
    assert_eq!(
        (status, body),
        (StatusCode::NOT_FOUND, message("policy 'gold' not found"))
    );
    let (status, body) = app.delete("/policies/gold").await;
    assert_eq!(
        (status, body),
        (StatusCode::NOT_FOUND, message("policy 'gold' not found"))
    );
    // The name is free again.
    app.create_policy("gold", 0, 0, 0).await;
}

#[tokio::test]
async fn deleting_a_policy_that_volumes_use_is_a_409() {
    let app = TestApp::start().await;
    app.create_policy("gold", 1, 1, 1).await;
    let (_, job) = app.create_volume("data", 10, "gold").await;
    assert_eq!(job["state"], "Done", "{job}");

    let (status, body) = app.delete("/policies/gold").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body, message("policy 'gold' is used by 1 volume(s)"));
    let (status, body) = app.get("/policies/gold").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, volume) = app.get("/volumes/data").await;
    assert_eq!(volume["policy"], "gold");

    let job = app.delete_volume("data").await;
    assert_eq!(job["state"], "Done", "{job}");
    let (status, body) = app.delete("/policies/gold").await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn the_resiliency_of_a_policy_in_use_cannot_change_but_other_fields_can() {
    let app = TestApp::start().await;
    app.create_policy("gold", 1, 1, 1).await;
    app.create_volume("data", 10, "gold").await;
    for change in [
        json!({"resiliencymedia": 2}),
        json!({"resiliencynode": 0}),
        json!({"resiliencyzone": 2}),
    ] {
        let (status, body) = app.patch("/policies/gold", change.clone()).await;
        assert_eq!(status, StatusCode::CONFLICT, "{change}: {body}");
        assert_eq!(
            body,
            message("policy 'gold' is used by 1 volume(s); its resiliency cannot change")
        );
    }
    // Repeating the current levels is not a change.
    let (status, body) = app
        .patch(
            "/policies/gold",
            json!({"resiliencymedia": 1, "resiliencynode": 1, "resiliencyzone": 1, "iopsread": 9}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, gold) = app.get("/policies/gold").await;
    assert_eq!(gold["iopsread"], 9);
    assert_eq!(gold["resiliencymedia"], 1);
}

#[tokio::test]
async fn request_bodies_over_one_mib_are_a_413() {
    let app = TestApp::start().await;
    let mut big = full_policy("big");
    big["snapshotfrequency"] = json!("x".repeat(1024 * 1024));
    let (status, body) = app.post("/policies", big.clone()).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body, message("request body is larger than 1048576 bytes"));
    app.create_policy("gold", 1, 1, 1).await;
    let (status, body) = app.patch("/policies/gold", big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    let (_, list) = app.get("/policies").await;
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");

    // Just under the limit is read (and then judged on its content).
    let mut near = json!({"name": "near", "snapshotfrequency": ""});
    let overhead = near.to_string().len();
    near["snapshotfrequency"] = json!("y".repeat(1024 * 1024 - overhead));
    assert_eq!(near.to_string().len(), 1024 * 1024);
    let (status, body) = app.post("/policies", near).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn unknown_routes_and_methods_get_json_errors() {
    let app = TestApp::start().await;
    for (method, path) in [
        (Method::GET, "/nothing"),
        (Method::GET, "/policies/gold/extra"),
        (Method::POST, "/signin/again"),
        // `/` itself leads to the console (tests/api/control/console.rs).
        (Method::GET, "/index.html"),
    ] {
        for token in [None, Some(app.token.as_str())] {
            let (status, body) = app.request(token, method.clone(), path, None).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {body}");
            assert_eq!(body, message("no such route"), "{method} {path}");
        }
    }
    for (method, path) in [
        (Method::PUT, "/policies"),
        (Method::DELETE, "/policies"),
        (Method::POST, "/policies/gold"),
        (Method::GET, "/signin"),
        (Method::PUT, "/volumes/data"),
    ] {
        let (status, body) = app
            .request(Some(&app.token), method.clone(), path, None)
            .await;
        assert_eq!(
            status,
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} {path}: {body}"
        );
        assert_eq!(
            body,
            message("method not allowed on this route"),
            "{method} {path}"
        );
    }
}

#[tokio::test]
async fn malformed_policy_bodies_are_json_400s() {
    let app = TestApp::start().await;
    app.create_policy("gold", 1, 1, 1).await;
    let not_object = message("request body must be a JSON object");
    for body in [json!([]), json!(null), json!(1), json!("gold")] {
        let (status, answer) = app.post("/policies", body.clone()).await;
        assert_eq!(
            (status, answer),
            (StatusCode::BAD_REQUEST, not_object.clone()),
            "{body}"
        );
        let (status, answer) = app.patch("/policies/gold", body.clone()).await;
        assert_eq!(
            (status, answer),
            (StatusCode::BAD_REQUEST, not_object.clone()),
            "{body}"
        );
    }
    let token = Some(app.token.as_str());
    for (ct, raw, prefix) in [
        (
            Some("application/json"),
            &b"{\"name\": "[..],
            "invalid JSON body: ",
        ),
        (Some("application/json"), &b""[..], "invalid JSON body: "),
        (
            Some("application/json"),
            &b"\xff\xfe"[..],
            "invalid JSON body: ",
        ),
        (
            Some("application/json"),
            &b"{\"name\": \"a\"} trailing"[..],
            "invalid JSON body: ",
        ),
        (
            None,
            &b"{\"name\": \"a\"}"[..],
            "request body must be JSON with content-type: application/json",
        ),
        (
            Some("text/plain"),
            &b"{\"name\": \"a\"}"[..],
            "request body must be JSON with content-type: application/json",
        ),
    ] {
        for (method, path) in [
            (Method::POST, "/policies"),
            (Method::PATCH, "/policies/gold"),
        ] {
            let (status, content_type, text) = app
                .send_raw(token, method.clone(), path, ct, raw.to_vec())
                .await;
            assert_eq!(
                status,
                StatusCode::BAD_REQUEST,
                "{method} {path} {ct:?}: {text}"
            );
            assert!(
                content_type.starts_with("application/json"),
                "{content_type}"
            );
            let answer: Value = serde_json::from_str(&text).expect("JSON error body");
            let m = answer["message"].as_str().unwrap_or_default();
            assert!(m.starts_with(prefix), "{method} {path}: {m}");
        }
    }
    // Deep nesting is refused, not a crash.
    let deep = format!(
        "{{\"name\": \"deep\", \"x\": {}{}}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let (status, _, text) = app
        .send_raw(
            token,
            Method::POST,
            "/policies",
            Some("application/json"),
            deep.into_bytes(),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    let (_, gold) = app.get("/policies/gold").await;
    assert_eq!(gold["updatetime"], "");
}

#[tokio::test]
async fn odd_input_never_produces_a_500() {
    let app = TestApp::start().await;
    app.create_policy("gold", 1, 1, 1).await;
    let odd_values = [
        json!(null),
        json!(-1),
        json!(1e308),
        json!(-0.0),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(""),
        json!("\u{0}"),
        json!("ünïcødé"),
        json!({"nested": {"deeper": [1, 2, 3]}}),
        json!([null]),
        json!(true),
    ];
    let keys = full_policy("x")
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect::<Vec<_>>();
    for key in keys.iter().chain(["unknownfield".to_string()].iter()) {
        for value in &odd_values {
            let mut body = json!({"name": "odd"});
            body[key.as_str()] = value.clone();
            let (status, answer) = app.post("/policies", body.clone()).await;
            assert!(
                status.is_success() || status.is_client_error(),
                "POST {body}: {status} {answer}"
            );
            assert!(
                status.is_success() || answer["message"].is_string(),
                "POST {body}: {answer}"
            );
            if status.is_success() {
                let (status, _) = app.delete("/policies/odd").await;
                assert_eq!(status, StatusCode::OK);
            }
            let (status, answer) = app
                .patch("/policies/gold", json!({key.as_str(): value.clone()}))
                .await;
            assert!(
                status.is_success() || status.is_client_error(),
                "PATCH {key}={value}: {status} {answer}"
            );
            if status.is_success() && key == "name" {
                // Renamed: put it back.
                let new_name = value.as_str().unwrap_or("gold").to_string();
                if new_name != "gold" && !new_name.is_empty() {
                    let (status, _) = app
                        .patch(&format!("/policies/{new_name}"), json!({"name": "gold"}))
                        .await;
                    assert_eq!(status, StatusCode::OK);
                }
            }
        }
    }
    // Odd policy names in the path.
    for path in [
        "/policies/%00",
        "/policies/%FF",
        "/policies/a%20b",
        // Not "/policies/..": clients resolve it to `/`, the console's redirect.
        "/policies/%2e%2e%2fetc",
        "/policies/'%20OR%201=1--",
    ] {
        let (status, _, text) = app
            .send_raw(Some(&app.token), Method::GET, path, None, Vec::new())
            .await;
        assert!(status.is_client_error(), "GET {path}: {status} {text}");
        let answer: Value =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("GET {path}: not JSON: {text}"));
        assert!(answer["message"].is_string(), "GET {path}: {answer}");
        let (status, _, text) = app
            .send_raw(Some(&app.token), Method::DELETE, path, None, Vec::new())
            .await;
        assert!(status.is_client_error(), "DELETE {path}: {status} {text}");
    }
    let (status, gold) = app.get("/policies/gold").await;
    assert_eq!(status, StatusCode::OK, "{gold}");
}
