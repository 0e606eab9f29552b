use crate::harness::forge::stored_signing_keys;
use crate::harness::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// One `svs` process started by hand, killed when dropped.
struct Proc {
    child: Child,
    base: String,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// SIGTERM, then wait: the lock is released.
    fn stop(mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }

    async fn request(
        &self,
        token: Option<&str>,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = reqwest::Client::new().request(method, format!("{}{}", self.base, path));
        if let Some(t) = token {
            req = req.header("authorization", t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request sent");
        let status = resp.status();
        let text = resp.text().await.expect("body read");
        (
            status,
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("{path}: not JSON: {text}")),
        )
    }

    async fn sign_in(&self, email: &str, password: &str) -> (StatusCode, Value) {
        self.request(
            None,
            Method::POST,
            "/signin",
            Some(json!({"email": email, "password": password})),
        )
        .await
    }

    /// Signs in and returns the IdToken.
    async fn id_token(&self, email: &str, password: &str) -> String {
        let (status, body) = self.sign_in(email, password).await;
        assert_eq!(status, StatusCode::OK, "sign in {email}: {body}");
        body["IdToken"].as_str().expect("IdToken").to_string()
    }
}

/// How a start attempt ended.
enum Started {
    Running(Proc),
    Exited {
        success: bool,
        stdout: String,
        stderr: String,
    },
}

impl Started {
    fn running(self) -> Proc {
        match self {
            Started::Running(p) => p,
            Started::Exited { stderr, .. } => panic!("svs serve did not start: {stderr}"),
        }
    }

    /// (stdout, stderr) of a start-up that failed with a non-zero exit.
    fn failed(self) -> (String, String) {
        match self {
            Started::Running(p) => {
                panic!("svs serve started on {} but should have refused", p.base)
            }
            Started::Exited {
                success,
                stdout,
                stderr,
            } => {
                assert!(!success, "svs serve exited with success: {stderr}");
                (stdout, stderr)
            }
        }
    }
}

/// Builds an `svs` command in `cwd` with no SVS_* variables from our own
/// environment, plus `env`.
fn svs(cwd: &Path, args: &[OsString], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(svs_bin());
    cmd.current_dir(cwd).args(args);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("SVS_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("SVS_LOG", "warn");
    // Parallel tests: the NBD server on any free port too.
    cmd.env("SVS_NBD_LISTEN", "127.0.0.1:0");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(items: I) -> Vec<OsString> {
    items.into_iter().map(Into::into).collect()
}

/// Runs `svs serve …` and waits for its "listening" line or its exit.
fn serve(cwd: &Path, serve_args: &[OsString], env: &[(&str, &str)]) -> Started {
    let stderr_path = cwd.join(format!("stderr-{}.log", rand_suffix()));
    let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
    let mut all = args(["serve"]);
    all.extend_from_slice(serve_args);
    let mut child = svs(cwd, &all, env)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("svs serve runs");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    let _ = stdout.read_line(&mut line);
    if let Some(base) = line.strip_prefix("svs listening on ") {
        return Started::Running(Proc {
            child,
            base: base.trim().to_string(),
        });
    }
    let status = child.wait().expect("svs serve ends");
    let mut rest = String::new();
    let _ = stdout.read_to_string(&mut rest);
    Started::Exited {
        success: status.success(),
        stdout: line + &rest,
        stderr: std::fs::read_to_string(&stderr_path).unwrap_or_default(),
    }
}

fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Runs `svs user add` with `password` on stdin: (success, stdout, stderr).
fn user_add(cwd: &Path, extra: &[OsString], password: &str) -> (bool, String, String) {
    let mut all = args(["user", "add"]);
    all.extend_from_slice(extra);
    let out = user_add_output(&mut svs(cwd, &all, &[]), password);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const ADMIN_ENV: [(&str, &str); 2] = [
    ("SVS_ADMIN_EMAIL", ADMIN_EMAIL),
    ("SVS_ADMIN_PASSWORD", ADMIN_PASSWORD),
];

fn listen_any() -> Vec<OsString> {
    args(["--listen", "127.0.0.1:0"])
}

fn with(mut a: Vec<OsString>, more: Vec<OsString>) -> Vec<OsString> {
    a.extend(more);
    a
}

fn path_args(flag: &str, path: &Path) -> Vec<OsString> {
    vec![flag.into(), path.as_os_str().to_owned()]
}

#[tokio::test]
async fn serve_with_no_configuration_keeps_its_data_in_svs_data_of_the_current_directory() {
    let cwd = tempfile::tempdir().unwrap();
    let proc = serve(cwd.path(), &listen_any(), &ADMIN_ENV).running();
    assert!(proc.base.starts_with("http://127.0.0.1:"), "{}", proc.base);

    let data = cwd.path().join("svs-data");
    for file in ["svs.db", "svs.lock"] {
        assert!(data.join(file).is_file(), "{file} in ./svs-data");
    }
    // The signing keys are in the database.
    assert!(!data.join("token-signing.key").exists());
    let (status, signin) = proc.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    assert_eq!(status, StatusCode::OK, "{signin}");
    assert_eq!(signin["ExpiresIn"], 3600);
    let token = signin["IdToken"].as_str().unwrap();

    let (status, media) = proc.request(Some(token), Method::GET, "/media", None).await;
    assert_eq!(status, StatusCode::OK, "{media}");
    let media = media.as_array().expect("list").clone();
    assert_eq!(media.len(), 6, "{media:?}");
    let zones: BTreeSet<&str> = media.iter().map(|m| m["zone"].as_str().unwrap()).collect();
    assert_eq!(zones, BTreeSet::from(["zone-a", "zone-b", "zone-c"]));
    for zone in &zones {
        let in_zone: Vec<&Value> = media.iter().filter(|m| m["zone"] == *zone).collect();
        assert_eq!(in_zone.len(), 2, "{zone}: {in_zone:?}");
    }
    for m in &media {
        assert_eq!(m["size"], 200, "{m}");
        assert_eq!(m["freesize"], 200, "{m}");
        let id = m["mediaid"].as_str().unwrap();
        assert!(
            data.join("media").join(id).is_dir(),
            "demo medium {id} under ./svs-data/media"
        );
    }
    let (status, nodes) = proc.request(Some(token), Method::GET, "/nodes", None).await;
    assert_eq!(status, StatusCode::OK, "{nodes}");
    assert_eq!(nodes.as_array().map(Vec::len), Some(3), "{nodes}");
}

#[tokio::test]
async fn the_data_dir_flag_and_env_choose_where_the_data_goes() {
    let cwd = tempfile::tempdir().unwrap();
    let flag_dir = cwd.path().join("by-flag");
    let env_dir = cwd.path().join("by-env");
    let env_dir_s = env_dir.to_str().unwrap().to_string();

    let proc = serve(
        cwd.path(),
        &with(listen_any(), path_args("--data-dir", &flag_dir)),
        &ADMIN_ENV,
    )
    .running();
    proc.id_token(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    proc.stop();
    assert!(flag_dir.join("svs.db").is_file());
    assert!(flag_dir.join("media/node-a-m1").is_dir());
    assert!(!cwd.path().join("svs-data").exists());

    let mut env = ADMIN_ENV.to_vec();
    env.push(("SVS_DATA_DIR", &env_dir_s));
    let proc = serve(cwd.path(), &listen_any(), &env).running();
    proc.id_token(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    proc.stop();
    assert!(env_dir.join("svs.db").is_file());

    // The flag wins over the environment.
    let third = cwd.path().join("flag-beats-env");
    let proc = serve(
        cwd.path(),
        &with(listen_any(), path_args("--data-dir", &third)),
        &env,
    )
    .running();
    proc.stop();
    assert!(third.join("svs.db").is_file());
    assert!(!cwd.path().join("svs-data").exists());
}

#[tokio::test]
async fn a_config_file_is_read_and_svs_env_variables_override_it() {
    let cwd = tempfile::tempdir().unwrap();
    let data = cwd.path().join("data-from-file");
    let file = cwd.path().join("svs.toml");
    std::fs::write(
        &file,
        format!(
            "data_dir = \"{}\"\ntoken_lifetime = \"10m\"\nadmin_tenant = \"ops\"\n\n\
             [[media]]\nid = \"solo\"\nnode = \"n1\"\nzone = \"z1\"\ndirectory = \"disks/solo\"\nsize_gib = 50\n",
            data.display()
        ),
    )
    .unwrap();

    let proc = serve(
        cwd.path(),
        &with(listen_any(), path_args("--config", &file)),
        &ADMIN_ENV,
    )
    .running();
    let (status, signin) = proc.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    assert_eq!(status, StatusCode::OK, "{signin}");
    assert_eq!(signin["ExpiresIn"], 600);
    let token = signin["IdToken"].as_str().unwrap();
    let (_, claims) = jwt_parts(token);
    assert_eq!(claims["tenant"], "ops");
    let (status, media) = proc.request(Some(token), Method::GET, "/media", None).await;
    assert_eq!(status, StatusCode::OK, "{media}");
    let media = media.as_array().unwrap();
    assert_eq!(media.len(), 1, "{media:?}");
    assert_eq!(media[0]["mediaid"], "solo");
    assert_eq!(media[0]["node"], "n1");
    assert_eq!(media[0]["zone"], "z1");
    assert_eq!(media[0]["size"], 50);
    proc.stop();
    assert!(data.join("svs.db").is_file(), "data_dir from the file");
    assert!(
        data.join("disks/solo").is_dir(),
        "relative medium directory resolved against data_dir"
    );
    assert!(!cwd.path().join("svs-data").exists());

    // SVS_* beats the file; SVS_CONFIG names the file.
    let file_s = file.to_str().unwrap().to_string();
    let mut env = ADMIN_ENV.to_vec();
    env.push(("SVS_TOKEN_LIFETIME", "5m"));
    env.push(("SVS_CONFIG", &file_s));
    let proc = serve(cwd.path(), &listen_any(), &env).running();
    let (status, signin) = proc.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    assert_eq!(status, StatusCode::OK, "{signin}");
    assert_eq!(signin["ExpiresIn"], 300);
}

#[tokio::test]
async fn the_listen_address_comes_from_the_flag_then_the_env_then_the_file() {
    let cwd = tempfile::tempdir().unwrap();
    // A port that is certainly taken.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_addr = taken.local_addr().unwrap().to_string();
    let file = cwd.path().join("svs.toml");
    std::fs::write(&file, format!("listen = \"{taken_addr}\"\ndemo = true\n")).unwrap();
    let config = path_args("--config", &file);

    let (stdout, stderr) = serve(cwd.path(), &config, &[]).failed();
    assert!(!stdout.contains("svs listening on"), "{stdout}");
    assert!(
        stderr.contains(&format!("cannot listen on {taken_addr}")),
        "{stderr}"
    );

    let proc = serve(cwd.path(), &config, &[("SVS_LISTEN", "127.0.0.1:0")]).running();
    assert!(!proc.base.ends_with(&taken_addr), "{}", proc.base);
    proc.stop();

    let proc = serve(
        cwd.path(),
        &with(config.clone(), listen_any()),
        &[("SVS_LISTEN", &taken_addr)],
    )
    .running();
    let (status, version) = proc.request(None, Method::GET, "/version", None).await;
    assert_eq!(status, StatusCode::OK, "{version}");
}

#[tokio::test]
async fn a_missing_or_invalid_config_file_stops_start_up_with_a_clear_message() {
    let cwd = tempfile::tempdir().unwrap();
    let missing = cwd.path().join("missing.toml");
    let (_, stderr) = serve(
        cwd.path(),
        &with(listen_any(), path_args("--config", &missing)),
        &[],
    )
    .failed();
    assert_eq!(
        stderr.trim(),
        format!(
            "svs: configuration file {} does not exist",
            missing.display()
        )
    );

    for (content, expected) in [
        ("lisen = \"127.0.0.1:1\"\n", "lisen"),
        (
            "token_lifetime = \"0s\"\n",
            "configuration: token_lifetime must be at least 1s",
        ),
        ("token_lifetime = \"soon\"\n", "token_lifetime"),
        ("movement_rate = \"fast\"\n", "movement_rate"),
        ("this is not toml\n", "configuration"),
        (
            "[[media]]\nid = \"m\"\nnode = \"n\"\nzone = \"z\"\ndirectory = \"m\"\nsize_gib = 0\n",
            "configuration: medium 'm' has size_gib 0",
        ),
        (
            "[[media]]\nid = \"m\"\nnode = \"n\"\nzone = \"z\"\ndirectory = \"a\"\nsize_gib = 1\n\
             [[media]]\nid = \"m\"\nnode = \"n\"\nzone = \"z\"\ndirectory = \"b\"\nsize_gib = 1\n",
            "configuration: medium id 'm' appears twice",
        ),
    ] {
        let file = cwd.path().join("bad.toml");
        std::fs::write(&file, content).unwrap();
        let (stdout, stderr) = serve(
            cwd.path(),
            &with(listen_any(), path_args("--config", &file)),
            &[],
        )
        .failed();
        assert!(!stdout.contains("svs listening on"), "{content}: {stdout}");
        assert!(stderr.starts_with("svs: "), "{content}: {stderr}");
        assert!(stderr.contains(expected), "{content}: {stderr}");
    }
    assert!(!cwd.path().join("svs-data").join("svs.db").exists());
}

#[tokio::test]
async fn an_unusable_medium_directory_stops_start_up_naming_the_medium() {
    let cwd = tempfile::tempdir().unwrap();
    let plain_file = cwd.path().join("not-a-directory");
    std::fs::write(&plain_file, b"just a file").unwrap();
    let good = cwd.path().join("good");
    for (bad_dir, what) in [
        (plain_file.join("m2"), "directory under a regular file"),
        (plain_file.clone(), "directory that is a regular file"),
    ] {
        let file = cwd.path().join("svs.toml");
        std::fs::write(
            &file,
            format!(
                "[[media]]\nid = \"good-medium\"\nnode = \"n1\"\nzone = \"z1\"\ndirectory = \"{}\"\nsize_gib = 10\n\
                 [[media]]\nid = \"broken-medium\"\nnode = \"n2\"\nzone = \"z2\"\ndirectory = \"{}\"\nsize_gib = 10\n",
                good.display(),
                bad_dir.display()
            ),
        )
        .unwrap();
        let started = serve(
            cwd.path(),
            &with(
                with(listen_any(), path_args("--config", &file)),
                path_args("--data-dir", &cwd.path().join("data")),
            ),
            &ADMIN_ENV,
        );
        let (stdout, stderr) = started.failed();
        assert!(!stdout.contains("svs listening on"), "{what}: {stdout}");
        assert!(
            stderr.contains(&format!(
                "medium 'broken-medium': directory {} cannot be created or written",
                bad_dir.display()
            )),
            "{what}: {stderr}"
        );
        assert!(!stderr.contains("good-medium"), "{what}: {stderr}");
    }
    // The regular file was left alone.
    assert_eq!(std::fs::read(&plain_file).unwrap(), b"just a file");
}

#[tokio::test]
async fn two_media_in_one_directory_stop_start_up_naming_both() {
    let cwd = tempfile::tempdir().expect("temp dir");
    let shared = cwd.path().join("disk");
    std::fs::create_dir_all(&shared).expect("dir");
    let file = cwd.path().join("svs.toml");
    // The same directory, spelled two ways.
    std::fs::write(
        &file,
        format!(
            "[[media]]\nid = \"first\"\nnode = \"n1\"\nzone = \"z1\"\ndirectory = \"{}\"\nsize_gib = 10\n\
             [[media]]\nid = \"second\"\nnode = \"n2\"\nzone = \"z2\"\ndirectory = \"{}/../disk\"\nsize_gib = 10\n",
            shared.display(),
            shared.display()
        ),
    )
    .expect("config");
    let started = serve(
        cwd.path(),
        &with(
            with(listen_any(), path_args("--config", &file)),
            path_args("--data-dir", &cwd.path().join("data")),
        ),
        &ADMIN_ENV,
    );
    let (stdout, stderr) = started.failed();
    assert!(!stdout.contains("svs listening on"), "{stdout}");
    assert!(
        stderr.contains("media 'first' and 'second' use the same directory"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_second_serve_on_the_same_data_directory_refuses_to_start_and_the_first_keeps_working() {
    let mut app = TestApp::start().await;
    app.create_policy("gold", 1, 1, 1).await;
    let second = serve(
        app.dir.path(),
        &with(
            with(listen_any(), path_args("--config", &app.config_path())),
            path_args("--data-dir", &app.data_dir()),
        ),
        &ADMIN_ENV,
    );
    let (stdout, stderr) = second.failed();
    assert!(!stdout.contains("svs listening on"), "{stdout}");
    assert!(
        stderr.contains(&format!(
            "data directory {} is in use by another svs serve",
            app.data_dir().display()
        )),
        "{stderr}"
    );

    // The first is unharmed: it reads, writes and runs jobs.
    let (status, body) = app.get("/policies/gold").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, job) = app.create_volume("data", 5, "gold").await;
    assert_eq!(job["state"], "Done", "{job}");
    app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;

    // Once the first has stopped, the directory is free again.
    app.stop();
    app.launch().expect("starts once the first has stopped");
    let (status, body) = app.get("/volumes/data").await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn the_admin_env_creates_the_first_user_only_when_the_store_has_none() {
    let cwd = tempfile::tempdir().unwrap();
    let data = path_args("--data-dir", &cwd.path().join("data"));
    let run =
        |env: &[(&str, &str)]| serve(cwd.path(), &with(listen_any(), data.clone()), env).running();

    // No admin variables and no users: nobody can sign in.
    let proc = run(&[]);
    let (status, body) = proc.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    proc.stop();

    // Only the e-mail, no password: still nobody.
    let proc = run(&[("SVS_ADMIN_EMAIL", ADMIN_EMAIL)]);
    let (status, body) = proc.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    proc.stop();

    let proc = run(&[
        ("SVS_ADMIN_EMAIL", ADMIN_EMAIL),
        ("SVS_ADMIN_PASSWORD", ADMIN_PASSWORD),
        ("SVS_ADMIN_TENANT", "ops"),
    ]);
    let token = proc.id_token(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    assert_eq!(jwt_parts(&token).1["tenant"], "ops");
    proc.stop();

    // The store has a user now: other admin variables change nothing.
    let proc = run(&[
        ("SVS_ADMIN_EMAIL", "second@example.com"),
        ("SVS_ADMIN_PASSWORD", "second-password"),
    ]);
    let (status, body) = proc.sign_in("second@example.com", "second-password").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    proc.id_token(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    proc.stop();

    let proc = run(&[
        ("SVS_ADMIN_EMAIL", ADMIN_EMAIL),
        ("SVS_ADMIN_PASSWORD", "a-new-password"),
    ]);
    let (status, body) = proc.sign_in(ADMIN_EMAIL, "a-new-password").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    proc.id_token(ADMIN_EMAIL, ADMIN_PASSWORD).await;
}

#[tokio::test]
async fn a_short_admin_password_stops_start_up() {
    let cwd = tempfile::tempdir().unwrap();
    let (_, stderr) = serve(
        cwd.path(),
        &listen_any(),
        &[
            ("SVS_ADMIN_EMAIL", ADMIN_EMAIL),
            ("SVS_ADMIN_PASSWORD", "short"),
        ],
    )
    .failed();
    assert!(
        stderr.contains("password must be at least 8 characters"),
        "{stderr}"
    );
}

fn user_add_args(app: &TestApp, email: &str, tenant: &str) -> Vec<OsString> {
    with(
        with(
            args(["--email", email, "--tenant", tenant]),
            path_args("--config", &app.config_path()),
        ),
        path_args("--data-dir", &app.data_dir()),
    )
}

#[tokio::test]
async fn user_add_reads_the_password_from_stdin_and_the_user_can_sign_in() {
    let app = TestApp::start().await;
    let (ok, stdout, stderr) = user_add(
        app.dir.path(),
        &user_add_args(&app, "carol@acme.example", "acme"),
        "12345678",
    );
    assert!(ok, "{stderr}");
    assert_eq!(
        stdout.trim(),
        "added user carol@acme.example to tenant acme"
    );
    let tokens = app.sign_in("carol@acme.example", "12345678").await;
    let (_, claims) = jwt_parts(tokens["IdToken"].as_str().unwrap());
    assert_eq!(claims["tenant"], "acme");
    assert_eq!(claims["email"], "carol@acme.example");
    assert_eq!(claims["name"], "carol");

    // --name sets the display name that the API records.
    let mut extra = user_add_args(&app, "dave@acme.example", "acme");
    extra.extend(args(["--name", "Dave D"]));
    let (ok, _, stderr) = user_add(app.dir.path(), &extra, "dave-password");
    assert!(ok, "{stderr}");
    let tokens = app.sign_in("dave@acme.example", "dave-password").await;
    let dave = tokens["IdToken"].as_str().unwrap();
    let (status, body) = app
        .request(
            Some(dave),
            Method::POST,
            "/policies",
            Some(json!({"name": "p"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, policy) = app
        .request(Some(dave), Method::GET, "/policies/p", None)
        .await;
    assert_eq!(policy["createdbyuserName"], "Dave D");
    assert_eq!(policy["createdbyuseremail"], "dave@acme.example");
    // Carol and Dave share tenant acme.
    let carol = app.sign_in("carol@acme.example", "12345678").await;
    let (status, _) = app
        .request(carol["IdToken"].as_str(), Method::GET, "/policies/p", None)
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn user_add_refuses_a_short_password_a_bad_email_and_a_duplicate() {
    let app = TestApp::start().await;
    for password in ["1234567", ""] {
        let (ok, _, stderr) = user_add(
            app.dir.path(),
            &user_add_args(&app, "short@example.com", "t"),
            password,
        );
        assert!(!ok, "password {password:?} accepted");
        assert_eq!(
            stderr.trim(),
            "svs: password must be at least 8 characters",
            "{password:?}"
        );
    }
    let (status, body) = app
        .request(
            None,
            Method::POST,
            "/signin",
            Some(json!({"email": "short@example.com", "password": "1234567"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");

    let (ok, _, stderr) = user_add(
        app.dir.path(),
        &user_add_args(&app, "nope", "t"),
        "long-enough",
    );
    assert!(!ok);
    assert_eq!(stderr.trim(), "svs: 'nope' is not an e-mail address");

    let (ok, _, stderr) = user_add(
        app.dir.path(),
        &user_add_args(&app, "x@example.com", " "),
        "long-enough",
    );
    assert!(!ok);
    assert_eq!(stderr.trim(), "svs: tenant must not be empty");

    for email in [ADMIN_EMAIL, "ADMIN@example.com"] {
        let (ok, _, stderr) = user_add(
            app.dir.path(),
            &user_add_args(&app, email, "elsewhere"),
            "long-enough",
        );
        assert!(!ok, "{email} added twice");
        assert!(stderr.contains("already exists"), "{email}: {stderr}");
    }
    // The original admin is untouched.
    app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let (status, body) = app
        .request(
            None,
            Method::POST,
            "/signin",
            Some(json!({"email": ADMIN_EMAIL, "password": "long-enough"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
}

#[tokio::test]
async fn passwords_are_stored_only_as_argon2id_hashes() {
    let mut app = TestApp::start().await;
    app.add_user("acme", "carol@acme.example", "carols-secret-pw");
    app.stop();
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(app.data_dir()).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name().to_string_lossy().starts_with("svs.db") {
            bytes.extend(std::fs::read(entry.path()).unwrap());
        }
    }
    let contains = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    assert!(
        contains(b"$argon2id$"),
        "argon2id PHC strings in the database"
    );
    assert!(
        !contains(ADMIN_PASSWORD.as_bytes()),
        "plain admin password in the database"
    );
    assert!(
        !contains(b"carols-secret-pw"),
        "plain user password in the database"
    );
}

fn key_path(app: &TestApp) -> PathBuf {
    app.data_dir().join("token-signing.key")
}

/// The JWKS of the service.
async fn jwks(app: &TestApp) -> Value {
    let (status, jwks) = app
        .request(None, Method::GET, "/.well-known/jwks.json", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{jwks}");
    jwks
}

#[tokio::test]
async fn the_signing_key_is_kept_in_the_database_and_the_same_after_a_restart() {
    let mut app = TestApp::start().await;
    // In svs.db (owner-only, see below), not in a file of its own; never
    // served.
    assert!(!key_path(&app).exists());
    let keys = stored_signing_keys(&app).await;
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].seed.len(), 32);
    let jwks_before = jwks(&app).await;
    assert_eq!(jwks_before["keys"][0]["kid"], keys[0].kid.as_str());
    let served = jwks_before.to_string();
    assert!(!served.contains("\"d\""), "{served}");
    let tokens = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let old_id = app.token.clone();

    // A crash, then a clean stop: the same key both times.
    app.restart().await;
    app.stop();
    app.launch().expect("relaunch");

    assert_eq!(stored_signing_keys(&app).await, keys);
    assert!(!key_path(&app).exists());
    let jwks_after = jwks(&app).await;
    assert_eq!(jwks_after, jwks_before);
    let (_, claims) = jwt_parts(&old_id);
    let (header, _) = jwt_parts(&old_id);
    assert_eq!(header["kid"], jwks_after["keys"][0]["kid"], "{claims}");

    // Tokens issued before the restarts still work.
    let (status, body) = app.get("/volumes").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = app
        .request(
            None,
            Method::POST,
            "/refresh",
            Some(json!({"RefreshToken": tokens["RefreshToken"]})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = app
        .request(
            None,
            Method::POST,
            "/signout",
            Some(json!({"AccessToken": tokens["AccessToken"]})),
        )
        .await;
    assert_eq!((status, body), (StatusCode::OK, json!({})));
    // And sign-out is remembered across a restart.
    app.restart().await;
    let (status, body) = app
        .request(
            None,
            Method::POST,
            "/refresh",
            Some(json!({"RefreshToken": tokens["RefreshToken"]})),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
}

#[tokio::test]
async fn each_data_directory_gets_its_own_signing_key() {
    let a = TestApp::start().await;
    let b = TestApp::start().await;
    assert_ne!(
        stored_signing_keys(&a).await[0].seed,
        stored_signing_keys(&b).await[0].seed
    );
    assert_ne!(
        jwks(&a).await["keys"][0]["kid"],
        jwks(&b).await["keys"][0]["kid"]
    );
}

/// A key file of an svs from before the keys moved into the database,
/// from the seed `seed`, with `mode`; returns the key's kid.
fn old_key_file(app: &TestApp, seed: [u8; 32], mode: u32) -> String {
    std::fs::create_dir_all(app.data_dir()).unwrap();
    std::fs::write(key_path(app), seed).unwrap();
    std::fs::set_permissions(key_path(app), std::fs::Permissions::from_mode(mode)).unwrap();
    let public = ed25519_dalek::SigningKey::from_bytes(&seed)
        .verifying_key()
        .to_bytes();
    hex::encode(&<sha2::Sha256 as sha2::Digest>::digest(public)[..8])
}

#[tokio::test]
async fn the_key_file_of_an_older_svs_is_imported_into_the_database_then_removed() {
    let mut app = TestApp::configured(TestConfig::default());
    let kid = old_key_file(&app, [42; 32], 0o600);
    app.launch().expect("starts");
    let keys = stored_signing_keys(&app).await;
    assert_eq!(keys.len(), 1);
    assert_eq!(
        (keys[0].kid.as_str(), keys[0].seed.as_slice()),
        (kid.as_str(), &[42u8; 32][..])
    );
    assert_eq!(jwks(&app).await["keys"][0]["kid"], kid.as_str());
    assert!(!key_path(&app).exists());
    assert!(app
        .log()
        .contains("the token signing keys of the data directory are in the store"));
}

#[tokio::test]
async fn a_signing_key_file_readable_by_others_stops_start_up() {
    let mut app = TestApp::configured(TestConfig::default());
    let kid = old_key_file(&app, [43; 32], 0o644);
    let err = app.launch().expect_err("a world-readable key is refused");
    assert!(
        err.contains(&format!(
            "{} must be readable by its owner only (mode 0600), found 644",
            key_path(&app).display()
        )),
        "{err}"
    );
    std::fs::set_permissions(key_path(&app), std::fs::Permissions::from_mode(0o600)).unwrap();
    app.launch().expect("starts again with mode 0600");
    assert_eq!(jwks(&app).await["keys"][0]["kid"], kid.as_str());
    let tokens = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    app.token = tokens["IdToken"].as_str().expect("IdToken").to_string();
    let (status, body) = app.get("/volumes").await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn the_database_and_slice_files_are_readable_by_their_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let app = TestApp::start().await;
    app.create_policy("p", 0, 0, 0).await;
    let (id, _) = app.create_volume("v", 1, "p").await;
    let slice = app.slices("v").await[0]["media"]
        .as_str()
        .map(|m| app.slice_path(m, &id, 0, 0))
        .expect("slice path");
    for path in [app.data_dir().join("svs.db"), slice.clone(), app.data_dir()] {
        let mode = std::fs::metadata(&path)
            .expect("exists")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode & 0o077, 0, "{} has mode {mode:o}", path.display());
    }
}

#[tokio::test]
async fn the_clis_own_variables_are_ignored_and_unknown_ones_only_warned_about() {
    let cwd = tempfile::tempdir().expect("temp dir");
    let data = cwd.path().join("data");
    let mut env = ADMIN_ENV.to_vec();
    // A shell that used the CLI (SVS_PROFILE, SVS_URL), and a typo.
    env.extend([
        ("SVS_PROFILE", "prod"),
        ("SVS_URL", "http://example.com"),
        ("SVS_FOO", "1"),
    ]);
    let proc = serve(
        cwd.path(),
        &with(listen_any(), path_args("--data-dir", &data)),
        &env,
    )
    .running();
    let (status, body) = proc.request(None, Method::GET, "/version", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    proc.id_token(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let log: String = std::fs::read_dir(cwd.path())
        .expect("cwd listed")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("stderr-"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("unknown SVS_* environment variables"))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning: {log}");
    assert!(warnings[0].contains("SVS_FOO"), "{log}");
    for quiet in [
        "SVS_PROFILE",
        "SVS_URL",
        "SVS_ADMIN",
        "SVS_LOG",
        "SVS_NBD_LISTEN",
    ] {
        assert!(!warnings[0].contains(quiet), "{quiet} named: {log}");
    }
    proc.stop();
}

#[tokio::test]
async fn an_unknown_key_in_the_configuration_file_still_stops_start_up() {
    let cwd = tempfile::tempdir().expect("temp dir");
    let file = cwd.path().join("svs.toml");
    std::fs::write(&file, "profile = \"prod\"\n").expect("config written");
    let (_, stderr) = serve(
        cwd.path(),
        &with(listen_any(), path_args("--config", &file)),
        &ADMIN_ENV,
    )
    .failed();
    assert!(stderr.contains("profile"), "{stderr}");
}

/// `svs serve` with its stdout kept, so that every line it printed can be
/// read once it stopped.
struct Watched {
    proc: Proc,
    stdout: BufReader<std::process::ChildStdout>,
    first_line: String,
    stderr_path: PathBuf,
}

impl Watched {
    fn start(cwd: &Path, serve_args: &[OsString], env: &[(&str, &str)]) -> Watched {
        let stderr_path = cwd.join(format!("stderr-{}.log", rand_suffix()));
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut all = args(["serve"]);
        all.extend_from_slice(serve_args);
        let mut child = svs(cwd, &all, env)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("svs serve runs");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut first_line = String::new();
        let _ = stdout.read_line(&mut first_line);
        let Some(base) = first_line.strip_prefix("svs listening on ") else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "svs serve did not start: {first_line}{}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        };
        Watched {
            proc: Proc {
                base: base.trim().to_string(),
                child,
            },
            stdout,
            first_line,
            stderr_path,
        }
    }

    /// SIGTERM; then everything it wrote: (stdout lines, stderr).
    fn stop(self) -> (Vec<String>, String) {
        let Watched {
            proc,
            mut stdout,
            first_line,
            stderr_path,
        } = self;
        proc.stop();
        let mut rest = String::new();
        let _ = stdout.read_to_string(&mut rest);
        let lines = std::iter::once(first_line.trim_end().to_string())
            .chain(rest.lines().map(str::to_string))
            .collect();
        (
            lines,
            std::fs::read_to_string(&stderr_path).unwrap_or_default(),
        )
    }
}

#[tokio::test]
async fn start_up_prints_the_data_directory_the_console_and_the_demo_topology_then_how_to_add_the_first_user(
) {
    let cwd = tempfile::tempdir().expect("temp dir");
    let served = Watched::start(cwd.path(), &listen_any(), &[("SVS_LOG", "info")]);
    let base = served.proc.base.clone();
    let data = std::fs::canonicalize(cwd.path().join("svs-data")).expect("data dir");

    // The hint works: the first administrator, added while svs runs.
    let (added, _, stderr) = user_add(
        cwd.path(),
        &with(
            args([
                "--admin",
                "--email",
                ADMIN_EMAIL,
                "--tenant",
                "ops",
                "--data-dir",
            ]),
            vec![data.clone().into_os_string()],
        ),
        ADMIN_PASSWORD,
    );
    assert!(added, "{stderr}");
    served.proc.id_token(ADMIN_EMAIL, ADMIN_PASSWORD).await;

    let (lines, stderr) = served.stop();
    let hint = format!(
        "svs: no users yet, so nobody can sign in: add the first administrator with \
         `svs user add --admin --email EMAIL --tenant TENANT --data-dir {}` (password from \
         stdin; works while svs runs), or restart svs with SVS_ADMIN_EMAIL and \
         SVS_ADMIN_PASSWORD set",
        data.display()
    );
    assert_eq!(
        lines,
        [
            format!("svs listening on {base}"),
            lines[1].clone(),
            format!("svs data directory: {}", data.display()),
            format!("svs console: {base}/ui/"),
            format!(
                "svs media: demo topology, 6 media under {} (for trying svs; list real media \
                 as [[media]] in a configuration file)",
                data.join("media").display()
            ),
            hint,
        ]
    );
    assert!(
        lines[1].starts_with("svs nbd listening on nbd://127.0.0.1:"),
        "{lines:?}"
    );
    // The same advice in the log, for a service whose stdout nobody reads.
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("no users yet, so nobody can sign in"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");

    // With a user, no hint.
    let served = Watched::start(cwd.path(), &listen_any(), &[]);
    let (lines, stderr) = served.stop();
    assert_eq!(lines.len(), 5, "{lines:?}");
    assert!(!stderr.contains("no users yet"), "{stderr}");
}

#[tokio::test]
async fn configured_media_are_announced_and_no_demo_topology_is_made() {
    let cwd = tempfile::tempdir().expect("temp dir");
    let data = cwd.path().join("data");
    let file = cwd.path().join("svs.toml");
    std::fs::write(
        &file,
        format!(
            "[[media]]\nid = \"solo\"\nnode = \"n1\"\nzone = \"z1\"\ndirectory = \"{}\"\nsize_gib = 5\n",
            cwd.path().join("disk").display()
        ),
    )
    .expect("config written");
    let served = Watched::start(
        cwd.path(),
        &with(
            with(listen_any(), path_args("--config", &file)),
            path_args("--data-dir", &data),
        ),
        &ADMIN_ENV,
    );
    served.proc.id_token(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let (lines, _) = served.stop();
    assert_eq!(lines.len(), 5, "{lines:?}");
    assert_eq!(
        lines[4],
        "svs media: 1 from the configuration (no demo topology)"
    );
    assert!(!data.join("media").exists(), "no demo media");
}

#[tokio::test]
async fn a_configuration_file_without_media_is_refused_saying_what_to_add() {
    let cwd = tempfile::tempdir().expect("temp dir");
    let data = cwd.path().join("data");
    let file = cwd.path().join("svs.toml");
    std::fs::write(&file, "listen = \"127.0.0.1:0\"\n").expect("config written");
    let config_args = with(path_args("--config", &file), path_args("--data-dir", &data));
    let (stdout, stderr) = serve(cwd.path(), &config_args, &ADMIN_ENV).failed();
    assert!(!stdout.contains("svs listening on"), "{stdout}");
    assert!(
        stderr.contains(&format!(
            "svs: no media configured: add a [[media]] table to the configuration file for each \
             directory svs may keep volume data in (id, node, zone, directory, size_gib; see \
             docs/configuration.md), or set demo = true to try svs with the demo topology (6 \
             media of 200 GiB under {})",
            data.join("media").display()
        )),
        "{stderr}"
    );
    assert!(!data.exists(), "nothing made: {}", data.display());

    // The demo, asked for (SVS_DEMO like every setting).
    let served = Watched::start(cwd.path(), &config_args, &[("SVS_DEMO", "true")]);
    let (lines, _) = served.stop();
    assert!(
        lines[4].starts_with("svs media: demo topology, 6 media"),
        "{lines:?}"
    );

    // demo and [[media]] together are a contradiction.
    std::fs::write(
        &file,
        "demo = true\n[[media]]\nid = \"m1\"\nnode = \"n1\"\nzone = \"z1\"\ndirectory = \"m1\"\nsize_gib = 5\n",
    )
    .expect("config written");
    let (_, stderr) = serve(cwd.path(), &with(listen_any(), config_args), &ADMIN_ENV).failed();
    assert!(
        stderr.contains("configuration: demo = true and [[media]] exclude each other; remove one"),
        "{stderr}"
    );
}

#[tokio::test]
async fn logs_written_to_a_file_have_no_colour_codes() {
    let mut app = TestApp::start().await;
    let (status, body) = app.get("/volumes").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    app.stop();
    let log = app.log();
    // INFO lines at least: the first user, stopping.
    assert!(log.contains("created the first user"), "{log}");
    assert!(log.contains("stopping"), "{log}");
    assert!(!log.contains("\x1b["), "colour codes in {log:?}");
}

/// Every line of `log` is a JSON object with a level and a message.
fn json_lines(log: &str) -> Vec<Value> {
    assert!(!log.trim().is_empty(), "no log lines");
    log.lines()
        .map(|line| {
            let value: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
            assert!(value["level"].is_string(), "no level: {line}");
            assert!(value["message"].is_string(), "no message: {line}");
            assert!(value["timestamp"].is_string(), "no timestamp: {line}");
            value
        })
        .collect()
}

#[tokio::test]
async fn log_format_json_writes_one_json_object_per_line() {
    let mut app = TestApp::start_with(TestConfig {
        settings: vec!["log_format = \"json\"".into()],
        ..TestConfig::default()
    })
    .await;
    let (status, body) = app.get("/volumes").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    app.stop();
    let events = json_lines(&app.log());
    let created = events
        .iter()
        .find(|e| e["message"] == "created the first user")
        .expect("the first user's event");
    assert_eq!(created["level"], "INFO", "{created}");
    assert_eq!(created["email"], ADMIN_EMAIL, "{created}");
    assert!(
        events.iter().any(|e| e["message"] == "stopping"),
        "{events:?}"
    );

    // SVS_LOG_FORMAT too; the error that stops start-up comes out as JSON.
    let mut app = TestApp::start().await;
    let (_, stderr) = serve(
        app.dir.path(),
        &with(
            with(listen_any(), path_args("--config", &app.config_path())),
            path_args("--data-dir", &app.data_dir()),
        ),
        &[("SVS_LOG_FORMAT", "json"), ("SVS_FOO", "1")],
    )
    .failed();
    let events = json_lines(&stderr);
    assert!(
        events.iter().any(|e| e["level"] == "WARN"
            && e["message"]
                .as_str()
                .is_some_and(|m| m.contains("unknown SVS_* environment variables"))),
        "{stderr}"
    );
    let last = events.last().expect("an event");
    assert_eq!(last["level"], "ERROR", "{stderr}");
    assert!(
        last["message"]
            .as_str()
            .is_some_and(|m| m.contains("is in use by another svs serve")),
        "{stderr}"
    );
    app.stop();
}

#[tokio::test]
async fn the_embedded_service_is_alive_and_ready_without_a_token() {
    let app = TestApp::start().await;
    for (path, status) in [("/healthz", "alive"), ("/readyz", "ready")] {
        let (code, body) = app.request(None, Method::GET, path, None).await;
        assert_eq!((code, body), (StatusCode::OK, json!({ "status": status })));
    }
}
