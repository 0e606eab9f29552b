//! The `svs` command-line client against the real service: the real
//! binary, with HOME and XDG_CONFIG_HOME in a temporary directory.

use crate::harness::cli::*;
use crate::harness::*;
use serde_json::Value;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const NO_IN_PLACE: &str = "GetModificationPlan: Could not find an in-place modification plan";

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("exists").mode() & 0o777
}

fn names(list: &Value, field: &str) -> Vec<String> {
    list.as_array()
        .expect("a JSON list")
        .iter()
        .map(|v| v[field].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The job id in "…: job N" (what create/resize/delete print).
fn job_id(text: &str) -> String {
    text.lines()
        .find_map(|l| l.rsplit_once(": job ").map(|(_, id)| id.trim().to_string()))
        .unwrap_or_else(|| panic!("no job id in {text}"))
}

#[tokio::test]
async fn login_stores_private_credentials_and_logout_requires_login_again() {
    let app = TestApp::start().await;
    for xdg in [true, false] {
        let home = Home::new(xdg);
        // Not signed in yet: a clear hint.
        let out = home.run(&["volume", "list"]);
        assert!(!out.status.success());
        assert!(stderr(&out).contains("svs login"), "{}", stderr(&out));

        // A wrong password: the server's message, nothing stored.
        let out = home.run_with(
            &["login", "--url", &app.base, "--email", ADMIN_EMAIL],
            Some("wrong-password\n"),
        );
        assert!(!out.status.success());
        assert!(
            stderr(&out).contains("Incorrect email or password"),
            "{}",
            stderr(&out)
        );
        assert!(!home.credentials().exists());

        home.login(&app);
        let path = home.credentials();
        assert_eq!(mode(&path), 0o600, "{}", path.display());
        assert_eq!(mode(path.parent().expect("dir")), 0o700);
        let creds = credentials(&home);
        let profile = &creds["default"];
        assert_eq!(profile["url"], app.base.as_str());
        assert_eq!(profile["email"], ADMIN_EMAIL);
        for token in ["IdToken", "AccessToken", "RefreshToken"] {
            assert!(
                profile[token].as_str().is_some_and(|t| !t.is_empty()),
                "{token}: {creds}"
            );
        }
        assert!(profile["expires_at"].as_u64().is_some(), "{creds}");
        assert_eq!(home.json(&["volume", "list"]), serde_json::json!([]));

        // A second profile beside the first.
        let out = home.run_with(
            &[
                "login",
                "--url",
                &app.base,
                "--email",
                ADMIN_EMAIL,
                "--profile",
                "other",
            ],
            Some(ADMIN_PASSWORD),
        );
        assert!(out.status.success(), "{}", stderr(&out));
        let creds = credentials(&home);
        assert!(creds["default"].is_object() && creds["other"].is_object());
        home.ok(&["media", "list", "--profile", "other"]);

        // Sign out: the tokens are gone and commands say how to sign in.
        home.ok(&["logout"]);
        let creds = credentials(&home);
        assert!(creds.get("default").is_none(), "{creds}");
        let out = home.run(&["volume", "list"]);
        assert!(!out.status.success());
        assert!(stderr(&out).contains("svs login"), "{}", stderr(&out));
        // The server revoked the refresh tokens of the user: the other
        // profile's session ends at its next refresh; signing out of it
        // still forgets it.
        home.ok(&["logout", "--profile", "other"]);
        let out = home.run(&["logout", "--profile", "other"]);
        assert!(!out.status.success());
        assert!(stderr(&out).contains("svs login"), "{}", stderr(&out));
    }
}

#[tokio::test]
async fn volume_create_makes_the_chosen_filesystem_on_a_file_volume() {
    let app = TestApp::start().await;
    let home = Home::new(true);
    home.login(&app);
    home.ok(&["policy", "create", "plain"]);
    home.ok(&[
        "volume",
        "create",
        "files",
        "--size",
        "1",
        "--policy",
        "plain",
        "--type",
        "file",
        "--filesystem",
        "xfs",
        "--wait",
    ]);
    let v = home.json(&["volume", "get", "files"]);
    assert_eq!(v["type"], "file", "{v}");
    assert_eq!(v["filesystem"], "xfs", "{v}");
    assert_eq!(v["filesystemprovisioned"], true, "{v}");
    let out = home.run(&[
        "volume",
        "create",
        "bad",
        "--size",
        "1",
        "--policy",
        "plain",
        "--filesystem",
        "zfs",
    ]);
    assert!(!out.status.success());
}

#[tokio::test]
async fn volume_create_resize_and_delete_with_wait() {
    let app = TestApp::start().await;
    let home = Home::new(true);
    home.login(&app);
    home.ok(&[
        "policy",
        "create",
        "mirror",
        "--resiliency-media",
        "1",
        "--resiliency-node",
        "1",
        "--resiliency-zone",
        "0",
    ]);

    let out = home.ok(&[
        "volume", "create", "db", "--size", "10", "--policy", "mirror", "--wait",
    ]);
    assert!(out.contains("db") && out.contains("10 GiB"), "{out}");
    let list = home.json(&["volume", "list"]);
    assert_eq!(names(&list, "name"), vec!["db"]);
    assert_eq!(list[0]["size"], 10);
    assert_eq!(list[0]["state"], "Ready");
    let table = home.ok(&["volume", "list"]);
    assert!(table.starts_with("NAME "), "{table}");
    assert!(table.contains("db") && table.contains("mirror"), "{table}");

    // In place, followed to the end: the new size is shown.
    let out = home.run(&["volume", "resize", "db", "--size", "20", "--wait"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("20 GiB"), "{}", stdout(&out));
    assert!(stderr(&out).contains("Done"), "{}", stderr(&out));
    assert_eq!(home.json(&["volume", "get", "db"])["size"], 20);

    // `volume get` for people: a summary with each slice's place and the
    // attachments (`volume attach` is `attachment create`).
    let (_, slices) = app.get("/volumes/db/slices").await;
    let slices = slices.as_array().expect("slices").clone();
    let node = slices[0]["node"].as_str().expect("node").to_string();
    home.ok(&["volume", "attach", "db", "--node", &node, "--wait"]);
    let volume = home.json(&["volume", "get", "db"]);
    let id = volume["volumeid"].as_str().expect("volumeid").to_string();
    let (_, attachments) = app.get("/volumes/db/attachments").await;
    let uri = attachments[0]["uri"].as_str().expect("uri").to_string();
    let summary = home.ok(&["volume", "get", "db"]);
    let mut expected = format!(
        "Volume    db (id {id})\n\
         Type      block\n\
         Size      20 GiB (a resize may grow it to 200 GiB)\n\
         Policy    mirror\n"
    );
    if let Some(zone) = volume["zone"].as_str() {
        expected.push_str(&format!("Zone      {zone}\n"));
    }
    expected.push_str("State     Ready\n");
    let columns = slices.len() / 2;
    expected.push_str(&format!(
        "Slices    2 copies of {columns} column{}\n",
        if columns == 1 { "" } else { "s" }
    ));
    for s in &slices {
        let (copy, column) = (&s["copy"], &s["column"]);
        expected.push_str(&format!(
            "          slice c{copy}-k{column} (copy {copy}, column {column}): {} GiB on medium {} (node {}, zone {})\n",
            s["size"],
            s["media"].as_str().unwrap_or_default(),
            s["node"].as_str().unwrap_or_default(),
            s["zone"].as_str().unwrap_or_default()
        ));
    }
    expected.push_str(&format!("Attached  to {node} read-write: Attached {uri}\n"));
    assert_eq!(summary, expected);
    home.ok(&["volume", "detach", "db", "--node", &node, "--wait"]);
    assert!(home
        .ok(&["volume", "get", "db"])
        .ends_with("Attached  no\n"));

    // Refused by the server: its exact message, non-zero exit.
    let out = home.run(&["volume", "resize", "db", "--size", "201"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("size must be at most 10 times the current size (200 GiB)"),
        "{}",
        stderr(&out)
    );
    let out = home.run(&["volume", "get", "nope"]);
    assert!(!out.status.success());
    let (_, body) = app.get("/volumes/nope").await;
    let message = body["message"].as_str().expect("message");
    assert!(stderr(&out).contains(message), "{}", stderr(&out));

    // Without --wait: the job id, then the job to follow.
    let out = home.ok(&["volume", "delete", "db"]);
    let id = job_id(&out);
    let job = app.wait_job(&id).await;
    assert_eq!(job["type"], "volume_delete");
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(home.json(&["volume", "list"]), serde_json::json!([]));

    // --output json answers the server's JSON.
    let answer = home.json(&[
        "volume", "create", "db2", "--size", "1", "--policy", "mirror",
    ]);
    assert_eq!(answer["Message"], "Volume creation started");
    let id = answer["JobID"].as_str().expect("JobID").to_string();
    let job = home.json(&["job", "watch", &id]);
    assert_eq!(job["state"], "Done", "{job}");
    let job = home.json(&["volume", "delete", "db2", "--force", "--wait"]);
    assert_eq!(job["type"], "volume_delete");
    assert_eq!(job["state"], "Done", "{job}");
}

#[tokio::test]
async fn a_resize_whose_job_fails_exits_1_with_the_reason() {
    let app = TestApp::start_with(spread_topology()).await;
    let home = Home::new(true);
    home.login(&app);
    home.ok(&[
        "policy",
        "create",
        "none",
        "--resiliency-media",
        "0",
        "--resiliency-node",
        "0",
        "--resiliency-zone",
        "0",
    ]);
    home.ok(&[
        "volume", "create", "spread", "--size", "16", "--policy", "none", "--wait",
    ]);

    // A dry run says what would happen and changes nothing; its plan,
    // given back, is what the resize carries out.
    let dry = home.ok(&["volume", "resize", "spread", "--size", "22GiB", "--dry-run"]);
    assert!(
        dry.starts_with(&format!(
            "Resize of volume 'spread' from 16 GiB to 22 GiB: refused\n{NO_IN_PLACE}\nPlan: "
        )),
        "{dry}"
    );
    let plan = home.json(&["volume", "resize", "spread", "--size", "22", "--dry-run"]);
    assert_eq!(plan["outcome"], "refused", "{plan}");
    // The creation's job only: a dry run starts none.
    assert_eq!(
        home.json(&["job", "list"]).as_array().map(Vec::len),
        Some(1)
    );
    let token = plan["plan"].as_str().expect("plan").to_string();
    let out = home.run(&[
        "volume",
        "resize",
        "spread",
        "--size",
        "22GiB",
        "--dry-run",
        "--plan",
        &token,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));

    // Sizes take a unit; the failure is printed once, with the way out.
    let out = home.run(&[
        "volume", "resize", "spread", "--size", "22GiB", "--plan", &token, "--wait",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.matches(NO_IN_PLACE).count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "svs: {NO_IN_PLACE}\nhint: run the resize again with --allow-data-movement"
        )),
        "{err}"
    );
    let id = job_id(&stdout(&out));

    // The same job, watched again, and shown.
    let out = home.run(&["job", "watch", &id]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains(NO_IN_PLACE), "{}", stderr(&out));
    let job = home.json(&["job", "get", &id]);
    assert_eq!(job["state"], "Error");
    let text = home.ok(&["job", "get", &id]);
    assert!(
        text.contains("Error") && text.contains(NO_IN_PLACE),
        "{text}"
    );
    assert_eq!(home.json(&["volume", "get", "spread"])["size"], 16);
}

#[tokio::test]
async fn an_expiring_id_token_is_refreshed_and_saved() {
    let app = TestApp::start_with(TestConfig {
        token_lifetime: "2s".into(),
        ..TestConfig::default()
    })
    .await;
    let home = Home::new(false);
    home.login(&app);
    let before = std::fs::read_to_string(home.credentials()).expect("credentials");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let list = home.json(&["media", "list"]);
    assert!(!names(&list, "mediaid").is_empty());
    let after = std::fs::read_to_string(home.credentials()).expect("credentials");
    assert_ne!(before, after, "the refreshed tokens are saved");
    let (b, a) = (
        serde_json::from_str::<Value>(&before).expect("json"),
        serde_json::from_str::<Value>(&after).expect("json"),
    );
    assert_ne!(b["default"]["IdToken"], a["default"]["IdToken"]);
    // The refresh rotated the RefreshToken: the new one is saved.
    assert_ne!(b["default"]["RefreshToken"], a["default"]["RefreshToken"]);
    assert_eq!(mode(&home.credentials()), 0o600);
    // And again, well after the first IdToken expired (with the rotated token).
    tokio::time::sleep(Duration::from_secs(3)).await;
    home.ok(&["volume", "list"]);
}

#[tokio::test]
async fn policies_media_nodes_and_jobs() {
    let app = TestApp::start().await;
    let home = Home::new(true);
    home.login(&app);

    // Policies.
    let out = home.ok(&["policy", "create", "gold", "--resiliency-media", "2"]);
    assert!(out.contains("created"), "{out}");
    let out = home.run(&["policy", "create", "gold"]);
    assert!(!out.status.success());
    let list = home.json(&["policy", "list"]);
    assert_eq!(names(&list, "name"), vec!["gold"]);
    assert_eq!(list[0]["resiliencymedia"], 2);
    assert_eq!(list[0]["resiliencynode"], 1, "server default");
    let table = home.ok(&["policy", "list"]);
    assert!(table.contains("gold"), "{table}");
    assert_eq!(home.json(&["policy", "get", "gold"])["name"], "gold");
    home.ok(&["policy", "delete", "gold"]);
    assert_eq!(home.json(&["policy", "list"]), serde_json::json!([]));
    let out = home.run(&["policy", "delete", "gold"]);
    assert!(!out.status.success());
    assert!(!stderr(&out).trim().is_empty());

    // Media and nodes: every id in the table.
    let (_, media) = app.get("/media").await;
    let table = home.ok(&["media", "list"]);
    for id in names(&media, "mediaid") {
        assert!(table.contains(&id), "{id} missing: {table}");
    }
    assert_eq!(home.json(&["media", "list"]), media);
    let (_, nodes) = app.get("/nodes").await;
    let table = home.ok(&["node", "list"]);
    for name in names(&nodes, "name") {
        assert!(table.contains(&name), "{name} missing: {table}");
    }

    // Jobs.
    home.ok(&["policy", "create", "p"]);
    let out = home.ok(&["volume", "create", "v", "--size", "2", "--policy", "p"]);
    let id = job_id(&out);
    let watch = home.run(&["job", "watch", &id]);
    assert!(watch.status.success(), "{}", stderr(&watch));
    assert!(
        stderr(&watch).contains(&format!("job {id} Done")),
        "{}",
        stderr(&watch)
    );
    let job = home.json(&["job", "get", &id]);
    assert_eq!(job["type"], "volume_create");
    assert_eq!(job["state"], "Done");
    let jobs = home.json(&["job", "list", "--type", "volume_create", "--state", "Done"]);
    assert_eq!(jobs.as_array().map(Vec::len), Some(1), "{jobs}");
    assert_eq!(jobs[0]["id"].to_string(), id);
    let jobs = home.json(&["job", "list", "--state", "Error"]);
    assert_eq!(jobs, serde_json::json!([]));
    let jobs = home.json(&["job", "list", "--page", "2", "--count", "1"]);
    assert_eq!(jobs, serde_json::json!([]));
    let table = home.ok(&["job", "list"]);
    assert!(
        table.starts_with("ID ") && table.contains("volume_create"),
        "{table}"
    );
    let out = home.run(&["job", "get", "999"]);
    assert!(!out.status.success());
}

/// `svs keys rotate` on the service's data directory.
fn rotate_keys(app: &TestApp) -> String {
    let out = Command::new(svs_bin())
        .args(["keys", "rotate", "--config"])
        .arg(app.config_path())
        .arg("--data-dir")
        .arg(app.data_dir())
        .env_remove("SVS_TOKEN_LIFETIME")
        .output()
        .expect("svs keys rotate runs");
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

/// The kids of the JWKS, in its order.
async fn jwks_kids(app: &TestApp) -> Vec<String> {
    let (status, body) = app
        .request(None, reqwest::Method::GET, "/.well-known/jwks.json", None)
        .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    body["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .map(|k| k["kid"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn kid_of(token: &str) -> String {
    jwt_parts(token).0["kid"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn a_key_rotation_while_the_service_runs_keeps_old_tokens_until_they_expire() {
    let app = TestApp::start_with(TestConfig {
        token_lifetime: "4s".into(),
        ..TestConfig::default()
    })
    .await;
    let old_token = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await["IdToken"]
        .as_str()
        .expect("IdToken")
        .to_string();
    let old_kid = kid_of(&old_token);
    assert_eq!(jwks_kids(&app).await, std::slice::from_ref(&old_kid));

    let out = rotate_keys(&app);
    // In the service's database: the new key current, the old one retired;
    // no key files.
    let stored = crate::harness::forge::stored_signing_keys(&app).await;
    let stored: Vec<(&str, bool)> = stored
        .iter()
        .map(|k| (k.kid.as_str(), k.retired_ms.is_some()))
        .collect();
    assert_eq!(stored.len(), 2, "{stored:?}");
    assert_eq!(stored[1], (old_kid.as_str(), true));
    assert!(!stored[0].1);
    assert!(!app.data_dir().join("token-keys").exists());
    assert!(!app.data_dir().join("token-signing.key").exists());

    // The running service signs with the new key within seconds (it looks
    // in the store every 2 s).
    let deadline = std::time::Instant::now() + Duration::from_secs(4);
    let new_token = loop {
        let t = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await["IdToken"]
            .as_str()
            .expect("IdToken")
            .to_string();
        if kid_of(&t) != old_kid {
            break t;
        }
        assert!(std::time::Instant::now() < deadline, "still the old key");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let new_kid = kid_of(&new_token);
    assert!(out.contains(&format!("new signing key {new_kid}")), "{out}");
    assert!(out.contains(&format!("retired key {old_kid}")), "{out}");
    assert_eq!(jwks_kids(&app).await, [new_kid.clone(), old_kid.clone()]);
    for token in [&old_token, &new_token] {
        let (status, body) = app
            .request(Some(token), reqwest::Method::GET, "/volumes", None)
            .await;
        assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    }

    // Once no token of the old key can be live (4 s of token lifetime and
    // 5 s of slack after the rotation), the JWKS drops it.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while jwks_kids(&app).await.len() > 1 {
        assert!(std::time::Instant::now() < deadline, "the old key stays");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(jwks_kids(&app).await, [new_kid]);
    let (status, _) = app
        .request(Some(&old_token), reqwest::Method::GET, "/volumes", None)
        .await;
    assert_eq!(status, reqwest::StatusCode::UNAUTHORIZED);
    // After a restart the service reads the same keys.
    let mut app = app;
    app.restart().await;
    assert_eq!(jwks_kids(&app).await.len(), 1);
}

fn last_line(text: &str) -> String {
    text.lines().last().unwrap_or_default().to_string()
}

/// Detaches through the API and waits for the job.
async fn detach(app: &TestApp, path: &str) {
    let (status, body) = app.delete(path).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    let job = app.wait_job_of(&body).await;
    assert_eq!(job["state"], "Done", "{job}");
}

#[tokio::test]
async fn snapshots_rollback_attach_and_clones_through_the_cli() {
    use crate::harness::attach::{attach, qemu_io, qemu_io_ro, topology, uri};
    let app = TestApp::start_with(topology("0")).await;
    let home = Home::new(true);
    home.login(&app);
    home.ok(&[
        "policy",
        "create",
        "mirror",
        "--resiliency-media",
        "1",
        "--resiliency-node",
        "1",
        "--resiliency-zone",
        "0",
    ]);
    home.ok(&[
        "volume", "create", "v", "--size", "4", "--policy", "mirror", "--wait",
    ]);
    let live = attach(&app, "v", "host-1", false).await;
    let write = |pattern: u8| {
        qemu_io(
            &uri(&live),
            &[format!("write -P {pattern} 1020k 8k"), "flush".into()],
        )
        .expect("write over NBD");
    };
    let read = |pattern: u8| vec![format!("read -P {pattern} 1020k 8k")];

    // Taken and followed: the snapshot's row once Done.
    write(0x11);
    let out = home.run(&["snapshot", "create", "v", "s1", "--wait"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("Snapshot creation started: job "),
        "{text}"
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[1].starts_with("VOLUME  NAME  TIME"), "{text}");
    assert!(lines[2].starts_with("v       s1    "), "{text}");
    assert!(
        lines[2].contains("4 GiB") && lines[2].contains("Ready"),
        "{text}"
    );
    assert!(stderr(&out).contains("Done"), "{}", stderr(&out));

    // Not followed, --output json: the server's answer, then the job.
    write(0x22);
    let answer = home.json(&[
        "snapshot",
        "create",
        "v",
        "s2",
        "--consistency",
        "application",
    ]);
    assert_eq!(answer["Message"], "Snapshot creation started");
    let job = home.json(&["job", "watch", answer["JobID"].as_str().expect("JobID")]);
    assert_eq!(job["type"], "snapshot_create");
    assert_eq!(job["state"], "Done", "{job}");
    write(0x33);

    // Lists (one volume, the tenant) and one snapshot, as the server has them.
    let list = home.json(&["snapshot", "list", "v"]);
    assert_eq!(names(&list, "name"), ["s1", "s2"]);
    let (_, all) = app.get("/snapshots").await;
    assert_eq!(home.json(&["snapshot", "list"]), all);
    let s2 = home.json(&["snapshot", "get", "v", "s2"]);
    assert_eq!(s2["consistency"], "application");
    assert_eq!(s2["snapshotid"], answer["ObjectID"]);
    let text = home.ok(&["snapshot", "get", "v", "s1"]);
    assert!(
        text.contains("consistency") && text.contains("crash"),
        "{text}"
    );

    // Refused calls: the server's message, exit status 1.
    let (status, body) = app
        .post(
            "/volumes/v/snapshots",
            serde_json::json!({"name": "s1", "consistency": "crash"}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::CONFLICT, "{body}");
    let out = home.run(&["snapshot", "create", "v", "s1"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!("svs: {}\n", body["message"].as_str().expect("message"))
    );
    let out = home.run(&["snapshot", "rollback", "v", "s1", "--wait"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "svs: volume 'v' is attached read-write to node(s) host-1; detach it or make the \
         attachment read-only before a rollback\n"
    );

    // Attached read-only: the URI on the last line reads s1's instant.
    let out = home.ok(&[
        "snapshot", "attach", "v", "s1", "--node", "host-1", "--wait",
    ]);
    let s1_uri = last_line(&out);
    assert!(s1_uri.starts_with("nbd://"), "{out}");
    assert!(
        out.starts_with("Attachment creation started: job "),
        "{out}"
    );
    qemu_io_ro(&s1_uri, &read(0x11)).expect("s1 reads its instant");
    assert_eq!(
        home.json(&["snapshot", "get", "v", "s1"])["numberofattachments"],
        1
    );
    let a = home.json(&[
        "snapshot", "attach", "v", "s2", "--node", "host-1", "--wait",
    ]);
    assert_eq!(a["readonly"], true, "{a}");
    assert_eq!(a["snapshotname"], "s2");
    qemu_io_ro(a["uri"].as_str().expect("uri"), &read(0x22)).expect("s2 reads its instant");

    // Rollback once detached: the volume holds s1's bytes again.
    detach(&app, "/volumes/v/snapshots/top/attachments/host-1").await;
    let out = home.run(&["snapshot", "rollback", "v", "s1", "--wait"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("Snapshot rollback started: job "),
        "{}",
        stdout(&out)
    );
    assert!(stderr(&out).contains("Done"), "{}", stderr(&out));
    let live = attach(&app, "v", "host-1", false).await;
    qemu_io(&uri(&live), &read(0x11)).expect("rolled back to s1");

    // An attached snapshot goes only with --force.
    let out = home.run(&["snapshot", "delete", "v", "s1"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "svs: snapshot 's1' is attached to node(s) host-1; detach it first or delete with \
         force=true\n"
    );
    let job = home.json(&["snapshot", "delete", "v", "s1", "--force", "--wait"]);
    assert_eq!(job["type"], "snapshot_delete");
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(
        names(&home.json(&["snapshot", "list", "v"]), "name"),
        ["s2"]
    );
    assert!(
        qemu_io_ro(&s1_uri, &read(0x11)).is_err(),
        "s1's export is gone"
    );

    // A clone of s2, larger than it: its own volume with s2's bytes.
    let out = home.ok(&[
        "volume",
        "create",
        "c",
        "--size",
        "6",
        "--policy",
        "mirror",
        "--from-snapshot",
        "v/s2",
        "--wait",
    ]);
    assert!(out.contains("6 GiB"), "{out}");
    let c = home.json(&["volume", "get", "c"]);
    assert_eq!(c["contentvolume"], "v");
    assert_eq!(c["contentsnapshot"], "s2");
    assert_eq!(c["state"], "Ready");
    // The volume list names a clone's source; other volumes leave it blank.
    let table = home.ok(&["volume", "list"]);
    assert!(
        table
            .lines()
            .next()
            .unwrap_or_default()
            .ends_with("  SOURCE"),
        "{table}"
    );
    assert!(row(&table, "c").ends_with("  100       v@s2"), "{table}");
    assert!(row(&table, "v").ends_with("  100"), "{table}");
    let clone = attach(&app, "c", "host-1", false).await;
    qemu_io(&uri(&clone), &read(0x22)).expect("the clone holds s2's bytes");
    let out = home.run(&[
        "volume",
        "create",
        "d",
        "--size",
        "4",
        "--policy",
        "mirror",
        "--from-snapshot",
        "v",
    ]);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(
        stderr(&out).contains("expected VOLUME/SNAPSHOT"),
        "{}",
        stderr(&out)
    );
}

/// The row of `id` in a table (the line starting with it).
fn row<'a>(table: &'a str, id: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(id))
        .unwrap_or_else(|| panic!("no row {id} in {table}"))
}

#[tokio::test]
async fn media_fail_and_volume_recover_through_the_cli() {
    use crate::harness::attach::{attach, qemu_io, topology, uri};
    use svs_client::output::render_object;
    let app = TestApp::start_with(topology("0")).await;
    let home = Home::new(true);
    home.login(&app);
    home.ok(&[
        "policy",
        "create",
        "mirror",
        "--resiliency-media",
        "1",
        "--resiliency-node",
        "1",
        "--resiliency-zone",
        "0",
    ]);
    home.ok(&[
        "volume", "create", "v", "--size", "4", "--policy", "mirror", "--wait",
    ]);
    let live = attach(&app, "v", "host-1", false).await;
    qemu_io(&uri(&live), &["write -P 0x7e 0 4M".into(), "flush".into()]).expect("written");
    let on_copy = |slices: &[Value], copy: u64| -> String {
        slices
            .iter()
            .find(|s| s["copy"] == copy)
            .and_then(|s| s["media"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let first = on_copy(&app.slices("v").await, 0);
    let second = on_copy(&app.slices("v").await, 1);

    // Every medium Online in the STATE column.
    let table = home.ok(&["media", "list"]);
    assert!(
        table
            .lines()
            .next()
            .unwrap_or_default()
            .ends_with("  STATE"),
        "{table}"
    );
    for id in ["m1", "m2", "m3"] {
        assert!(row(&table, id).ends_with("  Online"), "{table}");
    }

    // Only administrators: a user gets the server's 403 message, exit 1.
    let token = app.user_in_tenant("other", "user@example.com").await;
    let (status, body) = app
        .request(
            Some(&token),
            reqwest::Method::PATCH,
            &format!("/media/{first}"),
            Some(serde_json::json!({"state": "Failed"})),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::FORBIDDEN, "{body}");
    let user = Home::new(true);
    let out = user.run_with(
        &["login", "--url", &app.base, "--email", "user@example.com"],
        Some("other-password\n"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = user.run(&["media", "fail", &first]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!("svs: {}\n", body["message"].as_str().expect("message"))
    );
    assert_eq!(home.json(&["volume", "get", "v"])["state"], "Ready");

    // Failed: the CLI shows the medium the server answers.
    let out = home.ok(&["media", "fail", &first]);
    let (_, medium) = app.get(&format!("/media/{first}")).await;
    assert_eq!(medium["state"], "Failed");
    assert_eq!(out, render_object(&medium));
    assert!(out.lines().any(|l| l == "freesize       0"), "{out}");
    assert!(out.lines().any(|l| l == "state          Failed"), "{out}");
    let table = home.ok(&["media", "list"]);
    assert!(row(&table, &first).ends_with("  Failed"), "{table}");
    assert!(row(&table, &first).contains("  0 GiB  "), "{table}");
    assert!(row(&table, &second).ends_with("  Online"), "{table}");
    let table = home.ok(&["volume", "list"]);
    assert!(row(&table, "v").contains("  Degraded  "), "{table}");

    // Recovered and followed: the job, then the volume Ready on healthy media.
    let out = home.run(&["volume", "recover", "v", "--wait"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let id = job_id(&text);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        format!("Volume recovery started: job {id}"),
        "{text}"
    );
    assert!(lines[1].starts_with("NAME "), "{text}");
    assert!(
        lines[2].starts_with("v ") && lines[2].contains("  Ready  "),
        "{text}"
    );
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        stderr(&out).contains(&format!("job {id} Done")),
        "{}",
        stderr(&out)
    );
    let job = home.json(&["job", "get", &id]);
    assert_eq!(job["type"], "volume_recovery");
    assert_eq!(
        job["details"].as_array().and_then(|d| d.last()).cloned(),
        Some(serde_json::json!(
            "Volume 'v' recovered: 1 slice(s) rebuilt; every copy is healthy again"
        ))
    );
    let slices = app.slices("v").await;
    let rebuilt = on_copy(&slices, 0);
    assert!(rebuilt != first && rebuilt != second, "{slices:?}");
    assert_eq!(on_copy(&slices, 1), second);

    // The other original copy fails too (--output json: the server's
    // medium); the rebuilt copy holds the data.
    let failed = home.json(&["media", "fail", &second]);
    let (_, medium) = app.get(&format!("/media/{second}")).await;
    assert_eq!(failed, medium);
    assert_eq!(home.json(&["volume", "get", "v"])["state"], "Degraded");
    qemu_io(&uri(&live), &["read -P 0x7e 0 4M".into()]).expect("read from the rebuilt copy");

    // No medium is left to take the lost copy: exit 1 with the job's reason.
    let out = home.run(&["volume", "recover", "v", "--wait"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).ends_with(
            "svs: Could not recover volume 'v': no medium can take copy 1 of column 0 (4 GiB): \
             every healthy medium is full, already holds a slice of the volume, or would break \
             the policy's resiliency\n"
        ),
        "{}",
        stderr(&out)
    );
}

/// An agent's request with a node credential: the status and the answer.
async fn as_agent(
    app: &TestApp,
    credential: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (reqwest::StatusCode, Value) {
    app.request(Some(&format!("Bearer {credential}")), method, path, body)
        .await
}

async fn agent_status(app: &TestApp, credential: &str, node: &str) -> reqwest::StatusCode {
    let path = format!("/nodes/{node}/agent/attachments");
    as_agent(app, credential, reqwest::Method::GET, &path, None)
        .await
        .0
}

/// The node's row of `node list --output json`.
fn node_row(home: &Home, name: &str) -> Value {
    home.json(&["node", "list"])
        .as_array()
        .expect("a JSON list")
        .iter()
        .find(|n| n["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no node {name}"))
}

#[tokio::test]
async fn node_add_issues_the_agent_credential_and_revoke_ends_it() {
    use reqwest::StatusCode;
    let app = TestApp::start().await;
    let home = Home::new(true);
    home.login(&app);

    // A new node: the credential once, and the agent's command line.
    let out = home.ok(&[
        "node",
        "add",
        "host-7",
        "--address",
        "10.0.0.7",
        "--zone",
        "zone-b",
    ]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "Node host-7 added (address 10.0.0.7).", "{out}");
    assert_eq!(
        lines[1],
        "Agent credential (shown only this once; issuing another revokes it):"
    );
    let first = lines[2].to_string();
    assert!(first.starts_with("svsnode."), "{out}");
    assert_eq!(
        lines[4].trim(),
        format!(
            "svs agent --url {} --node host-7 --credential-file /etc/svs/agent.credential",
            app.base
        ),
        "{out}"
    );
    assert_eq!(agent_status(&app, &first, "host-7").await, StatusCode::OK);
    let node = node_row(&home, "host-7");
    assert_eq!(node["zone"], "zone-b", "{node}");
    assert_eq!(node["address"], "10.0.0.7", "{node}");
    assert_eq!(node["agentcredential"], true, "{node}");
    assert!(node["agentseen"].is_string(), "{node}");
    let table = home.ok(&["node", "list"]);
    assert!(
        table
            .lines()
            .next()
            .unwrap_or_default()
            .ends_with("AGENT  AGENT SEEN"),
        "{table}"
    );
    let seen = node["agentseen"].as_str().unwrap_or_default();
    assert!(
        row(&table, "host-7").ends_with(&format!("yes    {seen}")),
        "{table}"
    );

    // The node exists: its address changes, the new credential goes to a
    // file (0600, only its path printed) and the first one is revoked.
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("agent.credential");
    let file_arg = file.to_str().expect("utf-8 path");
    let out = home.run(&[
        "node",
        "add",
        "host-7",
        "--address",
        "10.0.0.8",
        "--credential-file",
        file_arg,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), format!("{file_arg}\n"));
    assert!(
        stderr(&out).contains("Node host-7 exists; its address is now 10.0.0.8"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains(&format!(
            "svs agent --url {} --node host-7 --credential-file {file_arg}",
            app.base
        )),
        "{}",
        stderr(&out)
    );
    assert_eq!(mode(&file), 0o600);
    let second = std::fs::read_to_string(&file).expect("credential file");
    let second = second.trim_end().to_string();
    assert!(
        second.starts_with("svsnode.") && second != first,
        "{second}"
    );
    let (status, body) = as_agent(
        &app,
        &first,
        reqwest::Method::GET,
        "/nodes/host-7/agent/attachments",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["message"], "invalid or revoked node credential");
    assert_eq!(agent_status(&app, &second, "host-7").await, StatusCode::OK);
    assert_eq!(home.json(&["node", "get", "host-7"])["address"], "10.0.0.8");

    // An existing file is kept, and nothing is issued, without --force.
    let out = home.run(&[
        "node",
        "add",
        "host-7",
        "--address",
        "10.0.0.8",
        "--credential-file",
        file_arg,
    ]);
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out).trim(),
        format!("svs: {file_arg} exists; pass --force to replace it")
    );
    assert_eq!(agent_status(&app, &second, "host-7").await, StatusCode::OK);
    home.ok(&[
        "node",
        "add",
        "host-7",
        "--address",
        "10.0.0.8",
        "--credential-file",
        file_arg,
        "--force",
    ]);
    let third = std::fs::read_to_string(&file).expect("credential file");
    let third = third.trim_end().to_string();
    assert_ne!(third, second);
    assert_eq!(mode(&file), 0o600);
    assert_eq!(
        agent_status(&app, &second, "host-7").await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(agent_status(&app, &third, "host-7").await, StatusCode::OK);

    // Revoke: the agent is refused; a second revoke is the server's 404.
    let out = home.ok(&["node", "revoke", "host-7"]);
    assert_eq!(
        out,
        "Agent credential of node host-7 revoked; its agent is refused from now on.\n"
    );
    assert_eq!(
        agent_status(&app, &third, "host-7").await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(node_row(&home, "host-7")["agentcredential"], false);
    let table = home.ok(&["node", "list"]);
    assert!(row(&table, "host-7").contains("  no  "), "{table}");
    let out = home.run(&["node", "revoke", "host-7"]);
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out).trim(),
        "svs: node 'host-7' has no agent credential"
    );

    // Refused by the server: its message, and no file left behind.
    let refused = dir.path().join("refused.credential");
    let out = home.run(&[
        "node",
        "add",
        "bad name",
        "--address",
        "10.0.0.9",
        "--credential-file",
        refused.to_str().expect("utf-8 path"),
    ]);
    assert!(!out.status.success());
    assert!(!stderr(&out).trim().is_empty());
    assert!(!refused.exists());

    // Not an administrator: 403, nothing issued.
    app.add_user("other", "user@example.com", "user-password-123");
    let user = Home::new(true);
    let out = user.run_with(
        &["login", "--url", &app.base, "--email", "user@example.com"],
        Some("user-password-123\n"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = user.run(&["node", "add", "host-8", "--address", "10.0.0.9"]);
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out).trim(),
        "svs: this operation requires an administrator"
    );
    let out = user.run(&["node", "revoke", "host-7"]);
    assert_eq!(
        stderr(&out).trim(),
        "svs: this operation requires an administrator"
    );
}

#[tokio::test]
async fn attachment_list_and_get_show_what_the_agent_reports() {
    use crate::harness::attach::topology;
    use reqwest::StatusCode;
    let app = TestApp::start_with(topology("0")).await;
    let home = Home::new(true);
    home.login(&app);
    home.ok(&[
        "policy",
        "create",
        "plain",
        "--resiliency-media",
        "0",
        "--resiliency-node",
        "0",
        "--resiliency-zone",
        "0",
    ]);
    home.ok(&[
        "volume", "create", "db", "--size", "1", "--policy", "plain", "--wait",
    ]);
    let volume_id = home.json(&["volume", "get", "db"])["volumeid"]
        .as_str()
        .expect("volumeid")
        .to_string();
    let out = home.ok(&[
        "attachment",
        "create",
        "db",
        "--node",
        "host-1",
        "--mountpoint",
        "/mnt/data",
        "--wait",
    ]);
    assert!(out.contains("hoststate"), "the attachment is shown: {out}");
    assert!(out.contains("/mnt/data"), "{out}");

    // No agent has reported yet.
    let table = home.ok(&["attachment", "list"]);
    assert!(
        table.starts_with("VOLUME  SNAPSHOT  NODE    STATE     READONLY  HOST  URI"),
        "{table}"
    );
    assert!(
        row(&table, "db").contains("  no        -     nbd://"),
        "{table}"
    );
    assert_eq!(
        home.json(&["attachment", "list", "db"])[0]["hoststate"],
        Value::Null
    );

    // host-1 is configured: `node add` sets its address and issues.
    let out = home.ok(&["node", "add", "host-1", "--address", "127.0.0.1"]);
    assert!(
        out.starts_with("Node host-1 exists; its address is now 127.0.0.1.\n"),
        "{out}"
    );
    let credential = out
        .lines()
        .find(|l| l.starts_with("svsnode."))
        .expect("the credential")
        .to_string();
    let (status, body) = as_agent(
        &app,
        &credential,
        reqwest::Method::PUT,
        &format!("/nodes/host-1/agent/attachments/{volume_id}/top"),
        Some(serde_json::json!({
            "hoststate": "Mounted",
            "hostdetail": "ext4 mounted",
            "device": "/dev/loop3",
            "mountpath": "/mnt/data",
            "filesystembytes": 1_069_547_520u64,
        })),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");

    let table = home.ok(&["attachment", "list", "db"]);
    assert!(
        row(&table, "db").contains("  no        Mounted  nbd://"),
        "{table}"
    );
    let shown = home.ok(&["attachment", "get", "db", "host-1"]);
    let field = |name: &str| -> String {
        shown
            .lines()
            .find_map(|l| l.strip_prefix(name).filter(|rest| rest.starts_with(' ')))
            .map(|rest| rest.trim().to_string())
            .unwrap_or_else(|| panic!("no {name} in {shown}"))
    };
    assert_eq!(field("hoststate"), "Mounted");
    assert_eq!(field("hostdetail"), "ext4 mounted");
    assert_eq!(field("hostdevice"), "/dev/loop3");
    assert_eq!(field("hostmountpath"), "/mnt/data");
    assert_eq!(field("filesystembytes"), "1069547520 (1020.0 MiB)");
    let a = home.json(&["attachment", "get", "db", "host-1"]);
    assert_eq!(a["filesystembytes"], 1_069_547_520u64, "{a}");
    assert_eq!(a["hostdevice"], "/dev/loop3", "{a}");
    let out = home.run(&["attachment", "get", "db", "host-2"]);
    assert!(!out.status.success());

    // The agent that said Mounted must say Disconnected before the detach
    // is done: as the agent, report it once the job waits.
    let out = home.ok(&["attachment", "delete", "db", "host-1"]);
    assert!(
        out.starts_with("Attachment deletion started: job "),
        "{out}"
    );
    let (status, body) = as_agent(
        &app,
        &credential,
        reqwest::Method::PUT,
        &format!("/nodes/host-1/agent/attachments/{volume_id}/top"),
        Some(serde_json::json!({"hoststate": "Disconnected"})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let job = out
        .trim()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_string();
    assert_eq!(app.wait_job(&job).await["state"], "Done");
    assert_eq!(
        home.json(&["attachment", "list", "db"]),
        serde_json::json!([])
    );
}

/// `svs job list --object NAME`: a volume's jobs by its name, still after the
/// volume is deleted; the table shows each job's volume name.
#[tokio::test]
async fn job_list_filters_by_volume_name_and_shows_it() {
    let app = TestApp::start().await;
    let home = Home::new(false);
    home.login(&app);
    home.ok(&["policy", "create", "p"]);
    home.ok(&[
        "volume", "create", "v", "--size", "2", "--policy", "p", "--wait",
    ]);
    home.ok(&[
        "volume", "create", "w", "--size", "1", "--policy", "p", "--wait",
    ]);
    home.ok(&["volume", "delete", "v", "--wait"]);

    let jobs = home.json(&["job", "list", "--object", "v"]);
    let types: Vec<&str> = jobs
        .as_array()
        .expect("a list")
        .iter()
        .map(|j| j["type"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(types, ["volume_delete", "volume_create"], "{jobs}");
    assert!(jobs
        .as_array()
        .expect("a list")
        .iter()
        .all(|j| j["objectname"] == "v"));
    // By id it is the same list.
    let id = jobs[0]["object"].as_str().expect("object").to_string();
    assert_eq!(home.json(&["job", "list", "--object", &id]), jobs);
    assert_eq!(
        home.json(&["job", "list", "--object", "nope"]),
        serde_json::json!([])
    );

    let table = home.ok(&["job", "list"]);
    let header = table.lines().next().unwrap_or_default();
    assert!(header.starts_with("ID  TYPE"), "{table}");
    assert!(
        header.contains(" NAME ") && header.contains(" OBJECT "),
        "{table}"
    );
    let w_row = table
        .lines()
        .find(|l| l.contains("volume_create") && l.contains(" w "))
        .unwrap_or_else(|| panic!("w's create job: {table}"));
    assert!(w_row.contains("Done"), "{w_row}");
    let help = home.ok(&["job", "list", "--help"]);
    assert!(help.contains("--object <NAME>"), "{help}");
}

#[tokio::test]
async fn media_add_set_remove_and_node_remove_through_the_cli() {
    use svs_client::output::render_object;
    let app = TestApp::start_with(TestConfig {
        media: vec![medium("m1", "n1", "z1", 4)],
        ..TestConfig::default()
    })
    .await;
    let home = Home::new(true);
    home.login(&app);
    let dir = app.dir.path().join("api-media").join("m2");
    let dir_arg = dir.display().to_string();
    let out = home.ok(&[
        "media",
        "add",
        "m2",
        "--node",
        "n2",
        "--zone",
        "z2",
        "--directory",
        &dir_arg,
        "--size",
        "20",
    ]);
    let (_, medium) = app.get("/media/m2").await;
    assert_eq!(medium["managedby"], "api", "{medium}");
    assert_eq!(out, render_object(&medium));
    assert!(dir.is_dir());
    let table = home.ok(&["media", "list"]);
    assert!(
        table
            .lines()
            .next()
            .unwrap_or_default()
            .contains("  VOLUMES  MANAGED BY  STATE"),
        "{table}"
    );
    assert!(row(&table, "m1").contains("  config "), "{table}");
    assert!(row(&table, "m2").contains("  api "), "{table}");

    // The server's refusals, as it words them.
    let out = home.run(&["media", "set", "m1", "--size", "8"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "svs: medium 'm1' is defined in the configuration file; change it there and restart svs\n"
    );
    app.create_policy("none", 0, 0, 0).await;
    let (_, job) = app.create_volume("v", 10, "none").await;
    assert_eq!(job["state"], "Done", "{job}");
    let out = home.run(&["media", "set", "m2", "--size", "9"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "svs: medium 'm2' cannot shrink to 9 GiB: 10 GiB of it is in use (slices, snapshots \
         and running jobs' bookings)\n"
    );
    let grown = home.json(&["media", "set", "m2", "--size", "30"]);
    assert_eq!(
        (&grown["size"], &grown["freesize"]),
        (&30.into(), &20.into())
    );
    let out = home.run(&["media", "remove", "m2"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "svs: medium 'm2' holds slices of volume(s) 'v'; delete those volumes first\n"
    );

    app.delete_volume("v").await;
    assert_eq!(home.ok(&["media", "remove", "m2"]), "Medium removed\n");
    let (status, _) = app.get("/media/m2").await;
    assert_eq!(status, reqwest::StatusCode::NOT_FOUND);
    let table = home.ok(&["node", "list"]);
    assert!(row(&table, "n2").contains("  api "), "{table}");
    let answer = home.json(&["node", "remove", "n2"]);
    assert_eq!(answer["Message"], "Node removed");
    let out = home.run(&["node", "remove", "n1"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "svs: node 'n1' is defined in the configuration file; change it there and restart svs\n"
    );
}

/// Waits until the job runs with some progress; fails if it ends first.
async fn wait_copying(app: &TestApp, job_id: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (_, job) = app.get(&format!("/jobs/{job_id}")).await;
        if job["state"] == "Running" && job["progress"].as_u64().unwrap_or(0) > 0 {
            return;
        }
        assert!(
            job["state"] != "Done" && job["state"] != "Error",
            "the movement ended before it copied: {job}"
        );
        assert!(std::time::Instant::now() < deadline, "never copying: {job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The value of field `name` in a job printed as `job get` does ("field
/// value" lines).
fn job_field(text: &str, name: &str) -> String {
    text.lines()
        .find_map(|l| {
            let (key, value) = l.split_once(' ')?;
            (key == name).then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// A signed-in CLI home and a resize of "data" copying 16 MiB at 1 MiB/s
/// (about 16 s of copying): the service, the home and the job's id.
async fn copying_movement() -> (TestApp, Home, String) {
    let app = TestApp::start_with(movement_topology("1 MiB")).await;
    app.mirror_with_16_mib_on_m2().await;
    let home = Home::new(true);
    home.login(&app);
    let id = app.start_resize("data", 18, true).await;
    wait_copying(&app, &id).await;
    (app, home, id)
}

/// `svs job cancel`: a running movement is cancelled and followed until it
/// is undone (exit 0, the job shown Cancelled, the volume at its old size);
/// on the ended job the same command removes its record, then 404.
/// `--no-wait` returns with the server's message.
#[tokio::test]
async fn job_cancel_follows_a_cancelled_movement_then_removes_its_record() {
    let (app, home, id) = copying_movement().await;

    let out = home.run(&["job", "cancel", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let field = |name: &str| job_field(&text, name);
    assert_eq!(
        (field("id"), field("state"), field("status")),
        (id.clone(), "Error".into(), "Cancelled".into()),
        "{text}"
    );
    assert_eq!(field("cancelrequested"), "true", "{text}");
    assert!(
        stderr(&out).contains(&format!("job {id} Cancelled")),
        "{}",
        stderr(&out)
    );
    let (_, volume) = app.get("/volumes/data").await;
    assert_eq!(
        (&volume["size"], &volume["state"]),
        (&serde_json::json!(15), &serde_json::json!("Ready")),
        "{volume}"
    );

    // Ended: the same command removes the record; then there is none.
    assert_eq!(
        home.ok(&["job", "cancel", &id]),
        format!("Job {id} deleted\n")
    );
    let (status, _) = app.get(&format!("/jobs/{id}")).await;
    assert_eq!(status, reqwest::StatusCode::NOT_FOUND);
    home.fails(&["job", "cancel", &id], &format!("job '{id}' not found"));

    // --no-wait: the server's answer, and the job goes on being undone.
    let id = app.start_resize("data", 18, true).await;
    let answer = home.json(&["job", "cancel", &id, "--no-wait"]);
    assert_eq!(
        answer,
        serde_json::json!({
            "Message": format!("Job {id} is being cancelled: follow it with GET /jobs/{id}"),
            "ObjectID": id,
        })
    );
    let job = app.wait_job(&id).await;
    assert_eq!(
        (&job["state"], &job["status"]),
        (&serde_json::json!("Error"), &serde_json::json!("Cancelled")),
        "{job}"
    );
    assert_eq!(app.get("/volumes/data").await.1["size"], 15);
}

/// `svs job pause`, `resume` and `rate` on a running movement: each prints
/// the job; paused, its status says so; resumed and given 64 MiB/s, it
/// ends Done. An ended job is refused with the server's message.
#[tokio::test]
async fn job_pause_resume_and_rate_steer_a_running_movement() {
    let (app, home, id) = copying_movement().await;

    let text = home.ok(&["job", "pause", &id]);
    assert_eq!(
        (
            job_field(&text, "id"),
            job_field(&text, "state"),
            job_field(&text, "paused")
        ),
        (id.clone(), "Running".into(), "true".into()),
        "{text}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, job) = app.get(&format!("/jobs/{id}")).await;
        let status = job["status"].as_str().unwrap_or_default();
        if status.starts_with("Paused:") {
            assert_eq!(
                (&job["state"], &job["paused"]),
                (&serde_json::json!("Running"), &serde_json::json!(true)),
                "{job}"
            );
            break;
        }
        assert!(
            job["state"] == "Running" && std::time::Instant::now() < deadline,
            "never paused: {job}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let job = home.json(&["job", "resume", &id]);
    assert_eq!(
        (&job["id"].to_string(), &job["paused"]),
        (&id, &serde_json::json!(false)),
        "{job}"
    );
    // Back to the service's rate (null), then 64 MiB/s.
    let job = home.json(&["job", "rate", &id, "default"]);
    assert_eq!(job["movementrate"], Value::Null, "{job}");
    let text = home.ok(&["job", "rate", &id, "64 MiB"]);
    assert_eq!(job_field(&text, "movementrate"), "67108864", "{text}");
    assert_eq!(job_field(&text, "paused"), "false", "{text}");
    let job = app.wait_job(&id).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(job["movementrate"], 64u64 << 20, "{job}");
    assert_eq!(app.get("/volumes/data").await.1["size"], 18);

    // Ended: nothing to steer (the server's 409); a rate the client
    // cannot read is refused before any request.
    home.fails(
        &["job", "pause", &id],
        &format!("job {id} has ended (Done): there is nothing to pause, resume or throttle"),
    );
    home.fails(&["job", "rate", &id, "0"], "has ended (Done)");
    home.fails(&["job", "rate", &id, "fast"], "'fast' is not a rate");
}
