//! `svs backup` while the service runs and writes, `svs restore` into a new
//! data directory, and a second `svs serve` on it that has everything that
//! existed when the backup began.

use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

fn big_media() -> TestConfig {
    TestConfig {
        media: vec![
            medium("a1", "node-a", "zone-a", 200),
            medium("b1", "node-b", "zone-b", 200),
        ],
        ..TestConfig::default()
    }
}

fn svs(args: &[&str], config: &Path, data_dir: &Path) -> Output {
    Command::new(svs_bin())
        .args(args)
        .arg("--config")
        .arg(config)
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .expect("svs runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).trim().to_string()
}

/// A second `svs serve` (without SVS_ADMIN_*: its users come from the backup).
struct Served {
    child: Child,
    base: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(config: &Path, data_dir: &Path, log: &Path) -> Served {
    let log = std::fs::File::create(log).expect("log");
    let mut child = Command::new(svs_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(config)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("SVS_ADMIN_EMAIL")
        .env_remove("SVS_ADMIN_PASSWORD")
        .env("SVS_NBD_LISTEN", "127.0.0.1:0")
        .env("SVS_LOG", "info,tower_http=warn")
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("svs serve starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("listening line");
    let base = line
        .trim()
        .strip_prefix("svs listening on ")
        .unwrap_or_else(|| panic!("not listening: {line}"))
        .to_string();
    Served { child, base }
}

async fn get(client: &reqwest::Client, base: &str, token: &str, path: &str) -> Value {
    let resp = client
        .get(format!("{base}{path}"))
        .header("authorization", token)
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status(), StatusCode::OK, "{path}");
    resp.json().await.expect("JSON")
}

fn names(list: &Value, field: &str) -> Vec<String> {
    let mut names: Vec<String> = list
        .as_array()
        .expect("a list")
        .iter()
        .map(|v| v[field].as_str().unwrap_or_default().to_string())
        .collect();
    names.sort();
    names
}

fn job_ids(list: &Value) -> Vec<String> {
    let mut ids: Vec<String> = list
        .as_array()
        .expect("a list")
        .iter()
        .map(|j| j["id"].to_string())
        .collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_during_writes_restores_everything_that_existed_when_it_began() {
    let mut app = TestApp::start_with(big_media()).await;
    app.add_user("acme", "restored@example.com", "restored-password");
    app.create_policy("none", 0, 0, 0).await;
    app.create_policy("mirror", 1, 1, 0).await;
    for (name, policy) in [("db", "mirror"), ("logs", "none")] {
        let (_, job) = app.create_volume(name, 4, policy).await;
        assert_eq!(job["state"], "Done", "{job}");
    }
    let (status, body) = app.patch("/volumes/logs", json!({"size": 6})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    app.wait_job(body["JobID"].as_str().expect("JobID")).await;

    // Writes go on during the backup: policies and volumes, one after the
    // other, so a consistent copy holds a prefix of them and no gap.
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (client, base, token) = (app.client.clone(), app.base.clone(), app.token.clone());
        let (stop, written) = (Arc::clone(&stop), Arc::clone(&written));
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                for (path, body) in [
                    (
                        "/policies",
                        json!({"name": format!("p{n:04}"), "resiliencymedia": 0, "resiliencynode": 0, "resiliencyzone": 0}),
                    ),
                    (
                        "/volumes",
                        json!({"name": format!("v{n:04}"), "type": "block", "size": 1, "policy": "none"}),
                    ),
                ] {
                    let resp = client
                        .post(format!("{base}{path}"))
                        .header("authorization", &token)
                        .json(&body)
                        .send()
                        .await
                        .expect("write sent");
                    assert_eq!(resp.status(), StatusCode::OK, "{path} {body}");
                }
                n += 1;
                written.store(n, Ordering::SeqCst);
            }
        })
    };
    while written.load(Ordering::SeqCst) < 3 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }

    // What exists when the backup begins.
    let policies_before = names(&app.get("/policies").await.1, "name");
    let volumes_before = names(&app.get("/volumes").await.1, "name");
    let jobs_before = job_ids(&app.get("/jobs?count=1000").await.1);
    let written_before = written.load(Ordering::SeqCst);

    let archive = app.dir.path().join("svs-backup.tar");
    let out = {
        let (archive, config, data_dir) = (archive.clone(), app.config_path(), app.data_dir());
        tokio::task::spawn_blocking(move || {
            svs(
                &["backup", "--out", archive.to_str().expect("UTF-8")],
                &config,
                &data_dir,
            )
        })
        .await
        .expect("backup ran")
    };
    assert!(out.status.success(), "backup: {}", stderr(&out));
    // The writer was running when the backup began and is still running
    // after it (a fast backup may fall between two of its writes, so
    // "during" is shown by both ends, not by a count inside the window).
    let written_after = written.load(Ordering::SeqCst);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while written.load(Ordering::SeqCst) <= written_after {
        assert!(
            std::time::Instant::now() < deadline,
            "the writer stopped during the backup ({written_before} → {written_after})"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::SeqCst);
    writer.await.expect("writer");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.starts_with("backed up "), "{said}");

    // The restore goes into a new directory; the first service stops (a
    // restore replaces a lost service: both would use the same media).
    let restored = app.dir.path().join("restored");
    let out = svs(
        &["restore", "--from", archive.to_str().expect("UTF-8")],
        &app.config_path(),
        &restored,
    );
    assert!(out.status.success(), "restore: {}", stderr(&out));
    let old_token = app.token.clone();
    app.stop();
    let second = serve(
        &app.config_path(),
        &restored,
        &app.dir.path().join("restored.log"),
    );
    let client = reqwest::Client::new();

    // The signing keys came along: a token of the first service works.
    let policies_after = names(
        &get(&client, &second.base, &old_token, "/policies").await,
        "name",
    );
    let volumes_after = names(
        &get(&client, &second.base, &old_token, "/volumes").await,
        "name",
    );
    let jobs_after = job_ids(&get(&client, &second.base, &old_token, "/jobs?count=1000").await);
    for p in &policies_before {
        assert!(policies_after.contains(p), "policy {p} restored");
    }
    for v in &volumes_before {
        assert!(volumes_after.contains(v), "volume {v} restored");
    }
    for j in &jobs_before {
        assert!(jobs_after.contains(j), "job {j} restored");
    }
    // One transaction's view: the writer's policies and volumes form a
    // prefix (each volume's policy was created before it).
    let written_policies: Vec<&String> = policies_after
        .iter()
        .filter(|p| p.starts_with('p'))
        .collect();
    for (i, p) in written_policies.iter().enumerate() {
        assert_eq!(**p, format!("p{i:04}"), "{written_policies:?}");
    }
    let written_volumes = volumes_after.iter().filter(|v| v.starts_with('v')).count();
    assert!(
        written_volumes == written_policies.len() || written_volumes + 1 == written_policies.len(),
        "{written_volumes} volumes, {} policies",
        written_policies.len()
    );
    let db = get(&client, &second.base, &old_token, "/volumes/logs").await;
    assert_eq!(db["size"], 6, "{db}");

    // Users sign in with the passwords they had.
    for (email, password) in [
        (ADMIN_EMAIL, ADMIN_PASSWORD),
        ("restored@example.com", "restored-password"),
    ] {
        let resp = client
            .post(format!("{}/signin", second.base))
            .json(&json!({"email": email, "password": password}))
            .send()
            .await
            .expect("sign in");
        assert_eq!(resp.status(), StatusCode::OK, "{email}");
        let tokens: Value = resp.json().await.expect("tokens");
        let id = tokens["IdToken"].as_str().expect("IdToken");
        get(&client, &second.base, id, "/volumes").await;
    }
    drop(second);
}

#[tokio::test]
async fn restore_refuses_a_used_directory_a_newer_schema_and_backup_a_missing_directory() {
    let app = TestApp::start_with(big_media()).await;
    let archive = app.dir.path().join("b.tar");
    let archive_arg = archive.to_str().expect("UTF-8");
    let out = svs(
        &["backup", "--out", archive_arg],
        &app.config_path(),
        &app.data_dir(),
    );
    assert!(out.status.success(), "backup: {}", stderr(&out));

    // Never over an existing file.
    let out = svs(
        &["backup", "--out", archive_arg],
        &app.config_path(),
        &app.data_dir(),
    );
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        format!(
            "svs: {} already exists; name a new file (a backup never overwrites one)",
            archive.display()
        )
    );

    // A missing data directory.
    let missing = app.dir.path().join("missing");
    let never = app.dir.path().join("never-written.tar");
    let out = svs(
        &["backup", "--out", never.to_str().expect("UTF-8")],
        &app.config_path(),
        &missing,
    );
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        format!("svs: data directory {} does not exist", missing.display())
    );
    assert!(!missing.exists());
    assert!(!never.exists());

    // The running service's data directory, untouched.
    let db_before = std::fs::read(app.data_dir().join("svs.db")).expect("db");
    let out = svs(
        &["restore", "--from", archive_arg],
        &app.config_path(),
        &app.data_dir(),
    );
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        format!(
            "svs: data directory {} is in use by a running svs serve; restore into a new, empty directory",
            app.data_dir().display()
        )
    );
    assert_eq!(
        std::fs::read(app.data_dir().join("svs.db")).expect("db"),
        db_before
    );
    let (status, _) = app.get("/volumes").await;
    assert_eq!(status, StatusCode::OK);

    // A directory with anything in it.
    let used = app.dir.path().join("used");
    std::fs::create_dir(&used).expect("dir");
    std::fs::write(used.join("notes.txt"), "mine").expect("file");
    let out = svs(
        &["restore", "--from", archive_arg],
        &app.config_path(),
        &used,
    );
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        format!(
            "svs: data directory {} is not empty; restore needs an empty or missing directory",
            used.display()
        )
    );
    let left: Vec<_> = std::fs::read_dir(&used).expect("dir").flatten().collect();
    assert_eq!(left.len(), 1, "nothing added");

    // A backup from a newer svs (a later migration).
    let unpacked = app.dir.path().join("unpacked");
    std::fs::create_dir(&unpacked).expect("dir");
    let tar = |args: &[&str], dir: &Path| {
        let status = Command::new("tar")
            .args(args)
            .current_dir(dir)
            .status()
            .expect("tar runs");
        assert!(status.success(), "tar {args:?}");
    };
    tar(&["xf", archive_arg], &unpacked);
    let manifest_path = unpacked.join("manifest.json");
    let mut manifest: Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).expect("manifest")).expect("JSON");
    let schema = manifest["schema_version"].as_i64().expect("schema_version");
    assert!(schema >= 6, "{manifest}");
    manifest["schema_version"] = json!(schema + 1);
    manifest["svs_version"] = json!("9.9.9");
    std::fs::write(&manifest_path, manifest.to_string()).expect("manifest");
    let newer = app.dir.path().join("newer.tar");
    tar(
        &[
            "cf",
            newer.to_str().expect("UTF-8"),
            "manifest.json",
            "svs.db",
        ],
        &unpacked,
    );
    let target = app.dir.path().join("target");
    let out = svs(
        &["restore", "--from", newer.to_str().expect("UTF-8")],
        &app.config_path(),
        &target,
    );
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        format!(
            "svs: {} was taken by svs 9.9.9 with database schema {}, newer than this svs knows ({schema}); restore it with that svs version or newer",
            newer.display(),
            schema + 1
        )
    );
    assert!(!target.exists(), "a refused restore leaves no directory");

    // A damaged file is refused, and nothing is left behind.
    manifest["schema_version"] = json!(schema);
    std::fs::write(&manifest_path, manifest.to_string()).expect("manifest");
    let mut db = std::fs::read(unpacked.join("svs.db")).expect("database");
    let last = db.len() - 1;
    db[last] ^= 0xff;
    std::fs::write(unpacked.join("svs.db"), db).expect("database");
    let damaged = app.dir.path().join("damaged.tar");
    tar(
        &[
            "cf",
            damaged.to_str().expect("UTF-8"),
            "manifest.json",
            "svs.db",
        ],
        &unpacked,
    );
    let out = svs(
        &["restore", "--from", damaged.to_str().expect("UTF-8")],
        &app.config_path(),
        &target,
    );
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        format!(
            "svs: {}: svs.db is damaged (its size or SHA-256 differs from the manifest)",
            damaged.display()
        )
    );
    assert!(!target.exists(), "a refused restore leaves no directory");

    // The real one restores into a missing directory, the database (with
    // the signing keys) owner-only.
    let out = svs(
        &["restore", "--from", archive_arg],
        &app.config_path(),
        &target,
    );
    assert!(out.status.success(), "restore: {}", stderr(&out));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(target.join("svs.db"))
        .expect("database restored")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}
