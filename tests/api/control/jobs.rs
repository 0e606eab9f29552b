use crate::harness::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

// ---- helpers local to these tests ----

fn one_medium() -> TestConfig {
    TestConfig {
        media: vec![medium("m1", "n1", "z1", 100)],
        ..TestConfig::default()
    }
}

async fn jobs(app: &TestApp, query: &str) -> Vec<Value> {
    jobs_as(app, &app.token, query).await
}

async fn jobs_as(app: &TestApp, token: &str, query: &str) -> Vec<Value> {
    let path = format!("/jobs{query}");
    let (status, body) = app.request(Some(token), Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::OK, "{path}: {body}");
    body.as_array().cloned().expect("a JSON array")
}

fn ids(jobs: &[Value]) -> Vec<i64> {
    jobs.iter()
        .map(|j| j["id"].as_i64().expect("integer id"))
        .collect()
}

/// Starts a volume creation; returns (volume id, job id).
async fn create(app: &TestApp, name: &str, size: u64, policy: &str) -> (String, i64) {
    let (status, started) = app
        .post(
            "/volumes",
            json!({"name": name, "type": "block", "size": size, "policy": policy}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let job_id = started["JobID"].as_str().expect("JobID");
    app.wait_job(job_id).await;
    (
        started["ObjectID"].as_str().unwrap().to_string(),
        job_id.parse().expect("numeric JobID"),
    )
}

async fn delete(app: &TestApp, volume: &str) -> i64 {
    let (status, started) = app.delete(&format!("/volumes/{volume}")).await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let job_id = started["JobID"].as_str().expect("JobID");
    app.wait_job(job_id).await;
    job_id.parse().expect("numeric JobID")
}

fn now_ms() -> i64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(d.as_millis()).unwrap()
}

/// Milliseconds since the epoch of an RFC 3339 date-time
/// (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`); None when it is not one.
fn rfc3339_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let digits = |from: usize, len: usize| -> Option<i64> {
        let part = s.get(from..from + len)?;
        if part.bytes().all(|c| c.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    let (hour, minute, second) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut i = 19;
    let mut millis = 0;
    if b[i] == b'.' {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
        let frac = &s[start..i];
        millis = format!("{frac:0<3}")[..3].parse::<i64>().ok()?;
    }
    let offset_min = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
            let m = digits(i + 1, 2)? * 60 + digits(i + 4, 2)?;
            if *sign == b'+' {
                m
            } else {
                -m
            }
        }
        _ => return None,
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_min * 60;
    Some(secs * 1000 + millis)
}

#[test]
fn the_rfc3339_helper_reads_the_formats_it_should() {
    assert_eq!(rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
    assert_eq!(rfc3339_ms("2000-03-01T00:00:01.5Z"), Some(951_868_801_500));
    assert_eq!(
        rfc3339_ms("2000-03-01T02:00:01.5+02:00"),
        Some(951_868_801_500)
    );
    assert_eq!(rfc3339_ms("2000-03-01 00:00:01Z"), None);
    assert_eq!(rfc3339_ms("2000-03-01T00:00:01"), None);
    assert_eq!(rfc3339_ms(""), None);
}

/// The reference's fields, and svs's `objectname`.
/// The reference's fields and svs's extensions (`cancelrequested`,
/// `paused`, `movementrate`; `slices` only on movements and recoveries).
const JOB_KEYS: [&str; 16] = [
    "id",
    "type",
    "object",
    "objectname",
    "args",
    "state",
    "status",
    "progress",
    "starttime",
    "endtime",
    "username",
    "useremail",
    "details",
    "cancelrequested",
    "paused",
    "movementrate",
];

// ---- one job ----

#[tokio::test]
async fn a_finished_job_reports_every_reference_field() {
    let app = TestApp::start_with(one_medium()).await;
    app.create_policy("plain", 0, 0, 0).await;
    let before = now_ms();
    let (volume, job_id) = create(&app, "v", 10, "plain").await;
    let after = now_ms();

    let (status, job) = app.get(&format!("/jobs/{job_id}")).await;
    assert_eq!(status, StatusCode::OK, "{job}");
    let mut keys: Vec<&str> = job
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    let mut expected_keys = JOB_KEYS.to_vec();
    expected_keys.sort_unstable();
    assert_eq!(keys, expected_keys);

    assert!(job["id"].is_i64(), "id is an integer: {job}");
    assert_eq!(job["id"], job_id);
    assert_eq!(job["type"], "volume_create");
    assert_eq!(job["object"], volume.as_str());
    assert_eq!(
        job["args"],
        json!({"name": "v", "size": 10, "policy": "plain", "type": "block"})
    );
    assert_eq!(job["state"], "Done");
    assert_eq!(job["status"], "Done");
    assert_eq!(job["progress"], 100);
    assert_eq!(job["username"], "admin");
    assert_eq!(job["useremail"], ADMIN_EMAIL);
    assert_eq!(
        job["details"],
        json!(["Volume 'v' created: 10 GiB in 1 slice(s)"])
    );

    let start =
        rfc3339_ms(job["starttime"].as_str().expect("starttime")).expect("starttime is RFC 3339");
    let end = rfc3339_ms(job["endtime"].as_str().expect("endtime")).expect("endtime is RFC 3339");
    assert!(
        before - 1000 <= start && start <= end && end <= after + 1000,
        "{before} {start} {end} {after}"
    );
}

#[tokio::test]
async fn a_failed_job_ends_in_error_with_its_reason_as_the_last_detail() {
    let app = TestApp::start_with(one_medium()).await;
    app.create_policy("mirror", 1, 0, 0).await;
    let (volume, job_id) = create(&app, "v", 10, "mirror").await;
    let (status, job) = app.get(&format!("/jobs/{job_id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(job["state"], "Error");
    assert_eq!(job["status"], "Error");
    assert_eq!(job["object"], volume.as_str());
    let progress = job["progress"].as_u64().expect("progress");
    assert!(progress <= 100, "{job}");
    let details = job["details"].as_array().expect("details");
    assert!(details.iter().all(Value::is_string), "{job}");
    assert_eq!(
        details.last().unwrap(),
        "Could not create volume 'v': no placement found for a volume of 10 GiB with 2 copies: not enough free space on media that satisfy the policy's resiliency"
    );
    let start = rfc3339_ms(job["starttime"].as_str().unwrap()).expect("starttime");
    let end = rfc3339_ms(job["endtime"].as_str().unwrap()).expect("endtime");
    assert!(start <= end);
}

#[tokio::test]
async fn delete_and_resize_jobs_report_their_type_args_and_details() {
    let app = TestApp::start_with(one_medium()).await;
    app.create_policy("plain", 0, 0, 0).await;
    let (volume, _) = create(&app, "v", 10, "plain").await;
    let (status, started) = app.patch("/volumes/v", json!({"size": 20})).await;
    assert_eq!(status, StatusCode::OK, "{started}");
    assert_eq!(started["Message"], "Volume resize started");
    let resize = app.wait_job(started["JobID"].as_str().unwrap()).await;
    assert_eq!(resize["type"], "volume_modify_extend");
    assert_eq!(resize["object"], volume.as_str());
    assert_eq!(
        resize["args"],
        json!({"size": 20, "allowdatamovement": false, "fromsize": 10})
    );
    assert_eq!(resize["state"], "Done");
    assert_eq!(resize["progress"], 100);
    assert_eq!(
        resize["details"],
        json!(["Volume 'v' resized from 10 GiB to 20 GiB in place"])
    );

    let delete_id = delete(&app, "v").await;
    let (_, deleted) = app.get(&format!("/jobs/{delete_id}")).await;
    assert_eq!(deleted["type"], "volume_delete");
    assert_eq!(deleted["object"], volume.as_str());
    assert_eq!(deleted["args"], json!({"name": "v", "force": false}));
    assert_eq!(deleted["state"], "Done");
    assert_eq!(deleted["status"], "Done");
    assert_eq!(deleted["progress"], 100);
    assert_eq!(deleted["details"], json!(["Volume 'v' deleted"]));
    assert_eq!(deleted["username"], "admin");
    // The jobs of a deleted volume stay listed.
    assert_eq!(jobs(&app, &format!("?object={volume}")).await.len(), 3);
}

#[tokio::test]
async fn an_unknown_or_malformed_job_id_is_not_found() {
    let app = TestApp::start_with(one_medium()).await;
    app.create_policy("plain", 0, 0, 0).await;
    let (_, job_id) = create(&app, "v", 1, "plain").await;
    let missing = job_id + 1000;
    for id in [
        missing.to_string(),
        "0".to_string(),
        "-1".to_string(),
        "abc".to_string(),
        "1.5".to_string(),
        "1e3".to_string(),
        "99999999999999999999999".to_string(),
        format!("{job_id}x"),
    ] {
        let (status, body) = app.get(&format!("/jobs/{id}")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{id}: {body}");
        assert_eq!(
            body,
            json!({"message": format!("job '{id}' not found")}),
            "{id}"
        );
    }
    let (status, body) = app.get("/jobs/%20").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({"message": "job ' ' not found"}));
}

// ---- lists ----

#[tokio::test]
async fn jobs_are_listed_newest_first() {
    let app = TestApp::start_with(one_medium()).await;
    app.create_policy("plain", 0, 0, 0).await;
    assert_eq!(jobs(&app, "").await, Vec::<Value>::new());
    let (a, ja) = create(&app, "a", 1, "plain").await;
    let (b, jb) = create(&app, "b", 1, "plain").await;
    let (c, jc) = create(&app, "c", 1, "plain").await;
    let jd = delete(&app, "b").await;

    let listed = jobs(&app, "").await;
    assert_eq!(ids(&listed), vec![jd, jc, jb, ja]);
    let types: Vec<&str> = listed.iter().map(|j| j["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "volume_delete",
            "volume_create",
            "volume_create",
            "volume_create"
        ]
    );
    let objects: Vec<&str> = listed
        .iter()
        .map(|j| j["object"].as_str().unwrap())
        .collect();
    assert_eq!(objects, [b.as_str(), c.as_str(), b.as_str(), a.as_str()]);
    for job in &listed {
        let (status, one) = app.get(&format!("/jobs/{}", job["id"])).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(&one, job, "the list shows what GET /jobs/{{id}} shows");
    }
}

#[tokio::test]
async fn jobs_are_paged_with_page_and_count() {
    let app = TestApp::start_with(one_medium()).await;
    app.create_policy("plain", 0, 0, 0).await;
    let mut all = Vec::new();
    for name in ["a", "b", "c", "d", "e"] {
        all.push(create(&app, name, 1, "plain").await.1);
    }
    all.reverse(); // newest first
    assert_eq!(ids(&jobs(&app, "?count=2").await), all[0..2]);
    assert_eq!(ids(&jobs(&app, "?count=2&page=1").await), all[0..2]);
    assert_eq!(ids(&jobs(&app, "?count=2&page=2").await), all[2..4]);
    assert_eq!(ids(&jobs(&app, "?page=3&count=2").await), all[4..5]);
    assert_eq!(ids(&jobs(&app, "?count=2&page=4").await), Vec::<i64>::new());
    assert_eq!(ids(&jobs(&app, "?count=1000").await), all);
    assert_eq!(ids(&jobs(&app, "?page=1").await), all);
    // The default page holds 100 jobs, so page 2 is empty here.
    assert_eq!(ids(&jobs(&app, "?page=2").await), Vec::<i64>::new());
    // The last page allowed, with the largest count: empty, not an overflow.
    assert_eq!(
        ids(&jobs(&app, "?page=4294967&count=1000").await),
        Vec::<i64>::new()
    );
}

#[tokio::test]
async fn jobs_are_filtered_by_type_object_and_state() {
    let app = TestApp::start_with(one_medium()).await;
    app.create_policy("plain", 0, 0, 0).await;
    let (a, create_a) = create(&app, "a", 1, "plain").await;
    let (b, create_b) = create(&app, "b", 1, "plain").await;
    let (big, create_big) = create(&app, "big", 500, "plain").await; // no room: Error
    let delete_a = delete(&app, "a").await;

    assert_eq!(
        ids(&jobs(&app, "?type=volume_create").await),
        vec![create_big, create_b, create_a]
    );
    assert_eq!(
        ids(&jobs(&app, "?type=volume_delete").await),
        vec![delete_a]
    );
    assert_eq!(
        ids(&jobs(&app, "?type=volume_modify_extend").await),
        Vec::<i64>::new()
    );
    assert_eq!(ids(&jobs(&app, "?type=nonsense").await), Vec::<i64>::new());
    assert_eq!(
        ids(&jobs(&app, &format!("?object={a}")).await),
        vec![delete_a, create_a]
    );
    assert_eq!(
        ids(&jobs(&app, &format!("?object={b}")).await),
        vec![create_b]
    );
    assert_eq!(
        ids(&jobs(&app, &format!("?object={big}")).await),
        vec![create_big]
    );
    assert_eq!(ids(&jobs(&app, "?object=unknown").await), Vec::<i64>::new());
    assert_eq!(ids(&jobs(&app, "?state=Error").await), vec![create_big]);
    assert_eq!(
        ids(&jobs(&app, "?state=Done").await),
        vec![delete_a, create_b, create_a]
    );
    assert_eq!(ids(&jobs(&app, "?state=Running").await), Vec::<i64>::new());
    assert_eq!(ids(&jobs(&app, "?state=Pending").await), Vec::<i64>::new());
    assert_eq!(
        ids(&jobs(&app, "?type=volume_create&state=Done").await),
        vec![create_b, create_a]
    );
    assert_eq!(
        ids(&jobs(&app, &format!("?object={a}&type=volume_create")).await),
        vec![create_a]
    );
    assert_eq!(
        ids(&jobs(&app, &format!("?object={a}&state=Error")).await),
        Vec::<i64>::new()
    );
    assert_eq!(
        ids(&jobs(&app, "?type=volume_create&count=1&page=2").await),
        vec![create_b]
    );
    assert_eq!(
        ids(&jobs(&app, "?state=Done&count=2&page=2").await),
        vec![create_a]
    );
}

#[tokio::test]
async fn bad_job_list_parameters_are_refused_with_a_message() {
    let app = TestApp::start_with(one_medium()).await;
    let count = "count must be a whole number from 1 to 1000";
    let page = "page must be a whole number from 1 to 4294967";
    let state = "state must be one of Pending, Running, Done, Error";
    let cases = [
        ("count=0", count),
        ("count=1001", count),
        ("count=abc", count),
        ("count=-1", count),
        ("count=2.5", count),
        ("count=", count),
        ("count=99999999999999999999", count),
        ("page=0", page),
        ("page=abc", page),
        ("page=-1", page),
        ("page=4294968", page),
        ("page=", page),
        ("state=Bogus", state),
        ("state=done", state),
        ("page=1&count=0", count),
        ("count=5&page=0", page),
    ];
    for (query, message) in cases {
        let (status, body) = app.get(&format!("/jobs?{query}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(body, json!({"message": message}), "{query}");
    }
    // Empty filters filter nothing.
    let (_, all) = app.get("/jobs").await;
    let (status, filtered) = app.get("/jobs?state=&type=&object=").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(filtered, all);
}

// ---- tenants ----

#[tokio::test]
async fn another_tenants_jobs_are_invisible() {
    let app = TestApp::start_with(one_medium()).await;
    app.create_policy("plain", 0, 0, 0).await;
    let (mine_volume, mine) = create(&app, "v", 1, "plain").await;

    let other = app.user_in_tenant("other", "o@example.com").await;
    let (status, body) = app
        .request(Some(&other), Method::GET, &format!("/jobs/{mine}"), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({"message": format!("job '{mine}' not found")}));
    assert_eq!(jobs_as(&app, &other, "").await, Vec::<Value>::new());
    assert_eq!(
        jobs_as(&app, &other, &format!("?object={mine_volume}")).await,
        Vec::<Value>::new()
    );

    let (status, body) = app
        .request(
            Some(&other),
            Method::POST,
            "/policies",
            Some(json!({"name": "plain", "resiliencymedia": 0, "resiliencynode": 0, "resiliencyzone": 0})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, started) = app
        .request(
            Some(&other),
            Method::POST,
            "/volumes",
            Some(json!({"name": "w", "type": "block", "size": 1, "policy": "plain"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let theirs_id = started["JobID"].as_str().unwrap();
    let theirs = app.wait_job_as(&other, theirs_id).await;
    assert_eq!(theirs["state"], "Done", "{theirs}");
    assert_eq!(theirs["username"], "o");
    assert_eq!(theirs["useremail"], "o@example.com");
    let theirs_id: i64 = theirs_id.parse().unwrap();

    assert_eq!(ids(&jobs_as(&app, &other, "").await), vec![theirs_id]);
    assert_eq!(ids(&jobs(&app, "").await), vec![mine]);
    let (status, body) = app.get(&format!("/jobs/{theirs_id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body,
        json!({"message": format!("job '{theirs_id}' not found")})
    );
}

#[tokio::test]
async fn jobs_need_a_signed_in_caller() {
    let app = TestApp::start_with(one_medium()).await;
    for path in ["/jobs", "/jobs/1"] {
        let (status, body) = app.request(None, Method::GET, path, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}: {body}");
        assert!(body["message"].is_string(), "{path}: {body}");
    }
}

#[tokio::test]
async fn jobs_are_kept_across_a_restart() {
    let mut app = TestApp::start_with(one_medium()).await;
    app.create_policy("plain", 0, 0, 0).await;
    create(&app, "a", 1, "plain").await;
    create(&app, "big", 500, "plain").await;
    let before = jobs(&app, "").await;
    assert_eq!(before.len(), 2);
    app.restart().await;
    assert_eq!(jobs(&app, "").await, before);
}

/// `objectname` names the job's volume, also once the volume is deleted,
/// and `?object=` takes the name as well as the id. A new volume of the same
/// name is found by its name too (its id tells them apart).
#[tokio::test]
async fn jobs_name_their_volume_and_are_found_by_it_after_the_delete() {
    let app = TestApp::start_with(one_medium()).await;
    app.create_policy("p", 0, 0, 0).await;
    let (old_id, created) = create(&app, "v", 1, "p").await;
    let (other_id, other) = create(&app, "w", 1, "p").await;
    let deleted = delete(&app, "v").await;

    let (status, job) = app.get(&format!("/jobs/{created}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(job["objectname"], "v");
    assert_eq!(job["object"], old_id.as_str());
    assert_eq!(ids(&jobs(&app, "?object=v").await), [deleted, created]);
    assert_eq!(
        ids(&jobs(&app, &format!("?object={old_id}")).await),
        [deleted, created]
    );
    let by_name = jobs(&app, "?object=w").await;
    assert_eq!(ids(&by_name), [other]);
    assert_eq!(by_name[0]["objectname"], "w");
    assert_eq!(by_name[0]["object"], other_id.as_str());

    let (new_id, recreated) = create(&app, "v", 1, "p").await;
    assert_ne!(new_id, old_id);
    assert_eq!(
        ids(&jobs(&app, "?object=v").await),
        [recreated, deleted, created]
    );
    assert_eq!(
        ids(&jobs(&app, &format!("?object={new_id}")).await),
        [recreated]
    );
    assert!(jobs(&app, "?object=nope").await.is_empty());
}
