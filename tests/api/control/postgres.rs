//! `svs serve` on a PostgreSQL store: its data outlives the process in the
//! database, an instance keeping volume bytes is the database's only one,
//! and databases it cannot use are
//! refused at start with a message that names the problem.

use crate::harness::postgres::*;
use crate::harness::*;
use reqwest::StatusCode;
use serde_json::json;
use svs_store::test_postgres::TestDatabase;

/// Volume `v` of policy `p`, made with 2 GiB and grown to 3: its id and
/// the resize's job id.
async fn volume_grown(app: &TestApp) -> (String, String) {
    app.create_policy("p", 1, 0, 0).await;
    let volume = app
        .create_volume_done(json!({"name": "v", "size": 2, "policy": "p"}))
        .await;
    let job = app.start_resize("v", 3, false).await;
    assert_eq!(app.wait_job(&job).await["state"], "Done");
    (volume, job)
}

#[tokio::test]
async fn the_service_keeps_its_users_policies_volumes_and_jobs_in_postgresql() {
    let db = TestDatabase::new().await;
    let mut app = TestApp::start_with(on(&db)).await;
    let (volume, job) = volume_grown(&app).await;
    assert!(
        !app.data_dir().join("svs.db").exists(),
        "no SQLite file beside PostgreSQL"
    );

    app.restart().await;
    let token = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await["IdToken"]
        .as_str()
        .expect("IdToken")
        .to_string();
    app.token = token;
    let (status, body) = app.get("/volumes/v").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["volumeid"], volume.as_str());
    assert_eq!(body["size"], 3);
    assert_eq!(body["state"], "Ready");
    let (status, jobs) = app.get("/jobs?object=v").await;
    assert_eq!(status, StatusCode::OK, "{jobs}");
    let jobs = jobs.as_array().expect("jobs");
    assert!(
        jobs.iter()
            .any(|j| j["id"].to_string().trim_matches('"') == job),
        "{jobs:?}"
    );
}

#[tokio::test]
async fn an_instance_keeping_volume_bytes_is_the_only_one_on_its_database() {
    let db = TestDatabase::new().await;
    // Media of its host: it must be alone.
    let first = TestApp::start_with(on(&db)).await;
    let mut second = TestApp::configured(on(&db));
    let refused = second.launch().expect_err("a second instance");
    assert!(
        refused.contains(
            "the PostgreSQL database is in use by another svs serve; an instance with media of \
             its host or fronts = \"serve\" must be the database's only one (several instances \
             need storage_nodes_only = true and fronts = \"nodes\": see docs/postgresql.md)"
        ),
        "{refused}"
    );
    // Nor may a clustered one start beside it.
    let mut clustered = TestApp::configured(clustered_on(&db));
    let refused = clustered
        .launch()
        .expect_err("beside an instance that is alone");
    assert!(
        refused.contains(
            "the PostgreSQL database is in use by an svs serve that must be its only one (it \
             has media of its host or fronts = \"serve\": see docs/postgresql.md)"
        ),
        "{refused}"
    );
    drop(first);
    // Clustered instances run side by side; one that must be alone cannot
    // join them.
    let mut clustered = TestApp::configured(clustered_on(&db));
    clustered.launch().expect("a clustered instance");
    let mut another = TestApp::configured(clustered_on(&db));
    another.launch().expect("another clustered instance");
    let mut alone = TestApp::configured(on(&db));
    assert!(alone.launch().is_err(), "an instance that must be alone");
}

/// `url` with its password replaced by `password`.
fn with_password(url: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let (credentials, host) = rest.split_once('@').expect("credentials in the URL");
    let user = credentials.split(':').next().unwrap_or(credentials);
    format!("{scheme}://{user}:{password}@{host}")
}

#[tokio::test]
async fn a_wrong_password_is_refused_at_start_naming_the_problem() {
    let db = TestDatabase::new().await;
    let mut app = TestApp::configured(TestConfig {
        settings: vec![format!(
            "store = \"{}\"",
            with_password(&db.url, "not-the-password")
        )],
        ..TestConfig::default()
    });
    let refused = app.launch().expect_err("a wrong password");
    assert!(
        refused.contains("cannot open the PostgreSQL database: database error: ")
            && refused.contains("password authentication failed for user \"svs\""),
        "{refused}"
    );
    assert!(!refused.contains("not-the-password"), "{refused}");
}

#[tokio::test]
async fn an_unreachable_database_is_refused_at_start_naming_the_problem() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let mut app = TestApp::configured(TestConfig {
        settings: vec![
            format!("store = \"postgres://svs:secret-password@127.0.0.1:{port}/svs\""),
            "store_acquire_timeout = \"2s\"".into(),
        ],
        ..TestConfig::default()
    });
    let refused = app.launch().expect_err("nothing listens there");
    assert!(
        refused.contains("cannot open the PostgreSQL database: database error: "),
        "{refused}"
    );
    assert!(!refused.contains("secret-password"), "{refused}");
}

#[tokio::test]
async fn backup_and_restore_send_a_postgresql_store_to_pg_dump() {
    let db = TestDatabase::new().await;
    let app = TestApp::configured(on(&db));
    for args in [
        ["backup", "--out", "out.tar"],
        ["restore", "--from", "out.tar"],
    ] {
        let out = std::process::Command::new(svs_bin())
            .args(args)
            .arg("--config")
            .arg(app.config_path())
            .arg("--data-dir")
            .arg(app.data_dir())
            .current_dir(app.dir.path())
            .output()
            .expect("svs runs");
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(
                "svs backup and svs restore copy the embedded SQLite store; this service keeps \
                 its state in PostgreSQL: back the database up with pg_dump"
            ),
            "{args:?}: {stderr}"
        );
        assert!(!app.dir.path().join("out.tar").exists());
    }
}

#[tokio::test]
async fn readiness_follows_the_database_and_liveness_does_not() {
    let db = TestDatabase::new().await;
    let app = TestApp::start_with(on(&db)).await;
    let probe = |path: &'static str| {
        let app = &app;
        async move { app.request(None, reqwest::Method::GET, path, None).await }
    };
    assert_eq!(
        probe("/healthz").await,
        (StatusCode::OK, json!({"status": "alive"}))
    );
    assert_eq!(
        probe("/readyz").await,
        (StatusCode::OK, json!({"status": "ready"}))
    );

    // The database goes away for this service: no new connection is let in
    // and those it holds are cut.
    db.take_away().await;
    let (status, body) = probe("/readyz").await;
    assert_eq!(
        (status, body),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"message": "not ready: the database does not answer"})
        )
    );
    assert_eq!(probe("/healthz").await.0, StatusCode::OK);
    assert_eq!(
        app.get("/volumes").await,
        (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"message": "the database does not answer for now; try again shortly"})
        )
    );

    // It comes back: ready again without a restart.
    db.give_back().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if probe("/readyz").await.0 == StatusCode::OK {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "not ready again");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (status, body) = app.get("/volumes").await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn a_stopped_sqlite_service_moves_to_postgresql_with_all_its_state() {
    let mut app = TestApp::start().await;
    let (volume, _) = volume_grown(&app).await;
    let (_, before) = app.get("/volumes/v").await;
    let (_, jobs_before) = app.get("/jobs?object=v").await;

    let db = TestDatabase::new().await;
    let data_dir = app.data_dir();
    let migrate = || {
        std::process::Command::new(svs_bin())
            .args(["store", "migrate", "--from"])
            .arg(&data_dir)
            .env("SVS_MIGRATE_TO", &db.url)
            .output()
            .expect("svs runs")
    };
    // Not while the service runs: its data directory is locked.
    let running = migrate();
    assert!(!running.status.success());
    assert!(
        String::from_utf8_lossy(&running.stderr).contains("is in use by another svs serve"),
        "{}",
        String::from_utf8_lossy(&running.stderr)
    );

    app.stop();
    let out = migrate();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "users: 1 rows",
        "volumes: 1 rows",
        "policies: 1 rows",
        "signing_keys: 1 rows",
    ] {
        assert!(stdout.contains(line), "{line}: {stdout}");
    }

    // Started again on PostgreSQL, with the same data directory (its keys):
    // the same users, volumes and jobs; tokens signed before still verify.
    app.restart_with_setting(&format!("store = \"{}\"", db.url));
    let (status, after) = app.get("/volumes/v").await;
    assert_eq!(status, StatusCode::OK, "{after}");
    assert_eq!(after, before);
    assert_eq!(after["volumeid"], volume.as_str());
    let (_, jobs_after) = app.get("/jobs?object=v").await;
    assert_eq!(jobs_after, jobs_before);
    std::fs::remove_file(app.data_dir().join("svs.db")).expect("the SQLite file is not used");
    app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;

    // From a directory without a database: refused, naming it.
    app.stop();
    let again = std::process::Command::new(svs_bin())
        .args(["store", "migrate", "--from"])
        .arg(app.dir.path().join("nowhere"))
        .env("SVS_MIGRATE_TO", &db.url)
        .output()
        .expect("svs runs");
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr)
            .contains("holds no database (svs.db): nothing to migrate"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}

/// The kid a token names.
fn kid_of(token: &str) -> String {
    jwt_parts(token).0["kid"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn a_key_rotation_in_postgresql_reaches_a_running_instance_and_old_tokens_still_verify() {
    let db = TestDatabase::new().await;
    let app = TestApp::start_with(on(&db)).await;
    let old_token = app.token.clone();
    let old_kid = kid_of(&old_token);

    // From another data directory (another machine): the keys are the
    // database's, and the rotation needs no lock of the running instance.
    let elsewhere = tempfile::tempdir().expect("dir");
    let out = std::process::Command::new(svs_bin())
        .args(["keys", "rotate", "--config"])
        .arg(app.config_path())
        .arg("--data-dir")
        .arg(elsewhere.path())
        .output()
        .expect("svs keys rotate runs");
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = svs_store::SqlStore::open_postgres(&db.url, &svs_store::PgSettings::default())
        .await
        .expect("store opens");
    let keys = {
        use svs_store::prelude::*;
        let keys = store.signing_keys().await.expect("keys");
        store.close().await;
        keys
    };
    assert_eq!(keys.len(), 2);
    let new_kid = keys[0].kid.clone();
    assert_eq!(
        (keys[1].kid.as_str(), keys[0].retired_ms),
        (old_kid.as_str(), None)
    );
    assert!(
        said.contains(&format!("new signing key {new_kid}")),
        "{said}"
    );
    assert!(said.contains(&format!("retired key {old_kid}")), "{said}");

    // At once, before the instance looks at its keys again: a token of the
    // new key verifies (an unknown kid reloads them), and so does the old one.
    let fresh = crate::harness::forge::signed_with_key(&keys[0], &old_token, |_| {});
    for token in [&fresh, &old_token] {
        let (status, body) = app
            .request(Some(token), reqwest::Method::GET, "/volumes", None)
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }

    // New sign-ins are signed with the new key, and verify.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(4);
    let signed_in = loop {
        let t = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await["IdToken"]
            .as_str()
            .expect("IdToken")
            .to_string();
        if kid_of(&t) == new_kid {
            break t;
        }
        assert!(std::time::Instant::now() < deadline, "still the old key");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let (status, body) = app
        .request(Some(&signed_in), reqwest::Method::GET, "/volumes", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, jwks) = app
        .request(None, reqwest::Method::GET, "/.well-known/jwks.json", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{jwks}");
    assert_eq!(jwks["keys"][0]["kid"], new_kid.as_str());
    assert_eq!(jwks["keys"][1]["kid"], old_kid.as_str());
    assert_eq!(
        std::fs::read_dir(elsewhere.path()).expect("dir").count(),
        0,
        "nothing written to the other data directory"
    );
}
