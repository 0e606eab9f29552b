//! The test harness, in one place. This file: `TestApp`, the real `svs
//! serve` binary on a random port with its own temporary data directory,
//! and a signed-in HTTP client. Beside it, one file per area holds what the
//! tests of that area share with the others (NBD clients and attachments in
//! `attach.rs`, storage-node processes in `storage_nodes.rs`, hosts and
//! agents in `host_side.rs` and `host_agent.rs`, the CSI plugins in
//! `csi_controller.rs`, forged tokens in `forge.rs`, live moves in
//! `node_moves.rs` and `cancel.rs`, PostgreSQL and several instances in
//! `postgres.rs` and `instances.rs`, ...); a test file keeps only its tests
//! and what no other file uses.

pub mod attach;
pub mod cancel;
pub mod cli;
pub mod csi_controller;
pub mod drain;
pub mod filesystem;
pub mod forge;
pub mod front_on_node;
pub mod host_agent;
pub mod host_side;
pub mod instances;
pub mod node_moves;
pub mod postgres;
pub mod snapshots;
pub mod storage_nodes;
pub mod workers;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

pub const ADMIN_EMAIL: &str = "admin@example.com";
pub const ADMIN_PASSWORD: &str = "admin-password";
pub const GIB: u64 = 1024 * 1024 * 1024;

/// One medium of a test topology.
#[derive(Clone, Debug)]
pub struct TestMedium {
    pub id: &'static str,
    pub node: &'static str,
    pub zone: &'static str,
    pub size_gib: u64,
}

pub fn medium(
    id: &'static str,
    node: &'static str,
    zone: &'static str,
    size_gib: u64,
) -> TestMedium {
    TestMedium {
        id,
        node,
        zone,
        size_gib,
    }
}

/// The seed's example topology: a1 = 10 GiB, b1 = 12 GiB, so a 16 GiB
/// volume with no resiliency spreads over both media (2 columns of 8 GiB),
/// leaving 2 GiB free on a1 and 4 GiB on b1.
pub fn spread_topology() -> TestConfig {
    TestConfig {
        media: vec![
            medium("a1", "node-a", "zone-a", 10),
            medium("b1", "node-b", "zone-b", 12),
        ],
        ..TestConfig::default()
    }
}

/// The data movement topology: m1 (20 GiB), m2 (16 GiB) and m3 (30 GiB),
/// each on a node and zone of its own, moving data at `rate`.
pub fn movement_topology(rate: &str) -> TestConfig {
    TestConfig {
        media: vec![
            medium("m1", "n1", "z1", 20),
            medium("m2", "n2", "z2", 16),
            medium("m3", "n3", "z3", 30),
        ],
        movement_rate: rate.into(),
        ..TestConfig::default()
    }
}

#[derive(Clone, Debug)]
pub struct TestConfig {
    /// Empty: the embedded demo topology.
    pub media: Vec<TestMedium>,
    pub movement_rate: String,
    pub token_lifetime: String,
    pub refresh_token_lifetime: String,
    /// Client nodes (name, address) that may attach volumes.
    pub nodes: Vec<(&'static str, &'static str)>,
    /// More top-level TOML lines, e.g. `signin_max_lockout = "2s"`.
    pub settings: Vec<String>,
    /// `SVS_LOG` of the service (default: info, without request traces).
    pub log: Option<String>,
    /// The CA the test client trusts when the service serves HTTPS
    /// (default: `<data_dir>/tls/ca.pem`, made by `tls = "auto"`).
    pub tls_ca: Option<PathBuf>,
}

impl Default for TestConfig {
    fn default() -> TestConfig {
        TestConfig {
            media: Vec::new(),
            movement_rate: "0".into(),
            token_lifetime: "1h".into(),
            refresh_token_lifetime: "30days".into(),
            nodes: Vec::new(),
            settings: Vec::new(),
            log: None,
            tls_ca: None,
        }
    }
}

pub struct TestApp {
    pub base: String,
    /// `nbd://127.0.0.1:PORT` of the service's NBD server.
    pub nbd_base: String,
    pub dir: TempDir,
    pub config: TestConfig,
    pub client: reqwest::Client,
    /// The admin's IdToken.
    pub token: String,
    child: Option<Child>,
    /// HTTP and NBD addresses a relaunch listens on again (`pin_ports`).
    pinned: Option<(String, String)>,
}

/// The test's HTTP client. Pooled connections are dropped well before the
/// service's keep-alive timeout (60 s) closes them: a request sent on a
/// connection the server is closing at that instant fails with
/// IncompleteMessage (seen after a long CLI step).
fn plain_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_idle_timeout(Duration::from_secs(20))
        .build()
        .expect("HTTP client")
}

pub fn svs_bin() -> &'static str {
    env!("CARGO_BIN_EXE_svs")
}

impl TestApp {
    pub async fn start() -> TestApp {
        TestApp::start_with(TestConfig::default()).await
    }

    pub async fn start_with(config: TestConfig) -> TestApp {
        let mut app = TestApp::configured(config);
        app.launch().expect("svs serve starts");
        let tokens = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
        app.token = tokens["IdToken"].as_str().expect("IdToken").to_string();
        app
    }

    /// A service with its directory and configuration written, not started
    /// yet (`launch` starts it).
    pub fn configured(config: TestConfig) -> TestApp {
        let dir = tempfile::tempdir().expect("temp dir");
        write_config(dir.path(), &config);
        TestApp {
            base: String::new(),
            nbd_base: String::new(),
            dir,
            config,
            client: plain_client(),
            token: String::new(),
            child: None,
            pinned: None,
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("svs.toml")
    }

    /// Starts `svs serve`; Err carries its stderr when it exits instead.
    pub fn launch(&mut self) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("svs.log"))
            .map_err(|e| e.to_string())?;
        let (listen, nbd_listen) = self
            .pinned
            .clone()
            .unwrap_or_else(|| ("127.0.0.1:0".into(), "127.0.0.1:0".into()));
        let mut child = Command::new(svs_bin())
            .args(["serve", "--listen", &listen, "--config"])
            .arg(self.config_path())
            .arg("--data-dir")
            .arg(self.data_dir())
            .env("SVS_ADMIN_EMAIL", ADMIN_EMAIL)
            .env("SVS_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .env(
                "SVS_LOG",
                self.config.log.as_deref().unwrap_or("info,tower_http=warn"),
            )
            .env("SVS_NBD_LISTEN", &nbd_listen)
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| e.to_string())?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout);
        let (mut http, mut nbd) = (String::new(), String::new());
        let read = lines
            .read_line(&mut http)
            .and_then(|_| lines.read_line(&mut nbd));
        if read.is_err()
            || !http.starts_with("svs listening on ")
            || !nbd.starts_with("svs nbd listening on ")
        {
            let _ = child.wait();
            return Err(self.log());
        }
        self.base = http["svs listening on ".len()..].trim().to_string();
        self.nbd_base = nbd["svs nbd listening on ".len()..].trim().to_string();
        self.child = Some(child);
        // A new client: none of its pooled connections is to a process
        // that was killed (a request on one fails with IncompleteMessage).
        self.client = if self.base.starts_with("https://") {
            self.https_client()?
        } else {
            plain_client()
        };
        Ok(())
    }

    /// The CA certificate of an HTTPS service (see `TestConfig::tls_ca`).
    pub fn ca_cert(&self) -> PathBuf {
        self.config
            .tls_ca
            .clone()
            .unwrap_or_else(|| self.data_dir().join("tls/ca.pem"))
    }

    /// A client trusting the service's CA (and nothing else).
    fn https_client(&self) -> Result<reqwest::Client, String> {
        let pem = std::fs::read(self.ca_cert()).map_err(|e| format!("CA certificate: {e}"))?;
        let ca = reqwest::Certificate::from_pem(&pem).map_err(|e| e.to_string())?;
        reqwest::Client::builder()
            .pool_idle_timeout(Duration::from_secs(20))
            .tls_built_in_root_certs(false)
            .add_root_certificate(ca)
            .build()
            .map_err(|e| e.to_string())
    }

    /// Later launches listen on the same HTTP and NBD addresses as now, as
    /// a service with configured addresses does (its agents keep them).
    pub fn pin_ports(&mut self) {
        let http = self
            .base
            .trim_start_matches("http://")
            .trim_start_matches("https://")
            .to_string();
        let nbd = self.nbd_base.trim_start_matches("nbd://").to_string();
        self.pinned = Some((http, nbd));
    }

    /// What the service wrote to stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("svs.log")).unwrap_or_default()
    }

    /// SIGKILL: no chance to clean up, like a crash or power loss.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait: a clean stop.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            let _ = child.wait();
        }
    }

    /// Restarts the service with `setting` (a top-level TOML line) added to
    /// its configuration.
    pub fn restart_with_setting(&mut self, setting: &str) {
        self.stop();
        let config = std::fs::read_to_string(self.config_path()).expect("config read");
        // Top-level keys go before the [[media]] tables.
        std::fs::write(self.config_path(), format!("{setting}\n{config}")).expect("config written");
        self.launch().expect("restarts");
    }

    pub async fn restart(&mut self) {
        self.kill();
        self.launch().expect("svs serve restarts");
    }

    pub fn medium_dir(&self, id: &str) -> PathBuf {
        if self.config.media.is_empty() {
            self.data_dir().join("media").join(id)
        } else {
            self.dir.path().join("media").join(id)
        }
    }

    pub fn slice_path(&self, medium: &str, volume_id: &str, copy: u64, column: u64) -> PathBuf {
        self.medium_dir(medium)
            .join(volume_id)
            .join(format!("c{copy}-k{column}.slice"))
    }

    /// The file of a slice as `GET /volumes/{v}/slices` lists it.
    pub fn slice_file(&self, volume_id: &str, slice: &Value) -> PathBuf {
        self.slice_path(
            slice["media"].as_str().unwrap_or_default(),
            volume_id,
            slice["copy"].as_u64().unwrap_or(0),
            slice["column"].as_u64().unwrap_or(0),
        )
    }

    pub async fn request(
        &self,
        token: Option<&str>,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self
            .client
            .request(method, format!("{}{}", self.base, path));
        if let Some(t) = token {
            req = req.header("authorization", t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request sent");
        let status = resp.status();
        let text = resp.text().await.expect("body read");
        let value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)
                .unwrap_or_else(|_| panic!("{path}: body is not JSON: {text}"))
        };
        (status, value)
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.request(Some(&self.token), Method::GET, path, None)
            .await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.request(Some(&self.token), Method::POST, path, Some(body))
            .await
    }

    pub async fn patch(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.request(Some(&self.token), Method::PATCH, path, Some(body))
            .await
    }

    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.request(Some(&self.token), Method::DELETE, path, None)
            .await
    }

    /// Posts a request that starts a job, checks it is accepted (200) and
    /// waits for the job to end.
    pub async fn post_and_wait(&self, path: &str, body: Value) -> Value {
        let (status, body) = self.post(path, body).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        self.wait_job_of(&body).await
    }

    /// Deletes through a job: checks the request is accepted (200) and waits
    /// for the job to end.
    pub async fn delete_and_wait(&self, path: &str) -> Value {
        let (status, body) = self.delete(path).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        self.wait_job_of(&body).await
    }

    /// A request with `token` (another user's than the admin's).
    pub async fn as_user(
        &self,
        token: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        self.request(Some(token), method, path, body).await
    }

    /// A sign-in attempt, whatever its answer.
    pub async fn sign_in_status(&self, email: &str, password: &str) -> (StatusCode, Value) {
        self.request(
            None,
            Method::POST,
            "/signin",
            Some(json!({"email": email, "password": password})),
        )
        .await
    }

    pub async fn sign_in(&self, email: &str, password: &str) -> Value {
        let (status, body) = self.sign_in_status(email, password).await;
        assert_eq!(status, StatusCode::OK, "sign in {email}: {body}");
        body
    }

    /// Adds a user with `svs user add` against the running service's data directory.
    pub fn add_user(&self, tenant: &str, email: &str, password: &str) {
        self.add_user_as(tenant, email, password, false);
    }

    /// Adds a user, an administrator if `admin` (`svs user add --admin`).
    pub fn add_user_as(&self, tenant: &str, email: &str, password: &str, admin: bool) {
        let mut command = Command::new(svs_bin());
        command.args(["user", "add", "--email", email, "--tenant", tenant]);
        if admin {
            command.arg("--admin");
        }
        command
            .arg("--config")
            .arg(self.config_path())
            .arg("--data-dir")
            .arg(self.data_dir());
        let out = user_add_output(&mut command, password);
        assert!(
            out.status.success(),
            "user add: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A second user in their own tenant, signed in; returns the IdToken.
    pub async fn user_in_tenant(&self, tenant: &str, email: &str) -> String {
        self.add_user(tenant, email, "other-password");
        let tokens = self.sign_in(email, "other-password").await;
        tokens["IdToken"].as_str().expect("IdToken").to_string()
    }

    /// Polls a job until it is Done or Error.
    pub async fn wait_job(&self, job_id: &str) -> Value {
        self.wait_job_as(&self.token, job_id).await
    }

    /// Polls the job an accepted request answered with (its `JobID`) until
    /// it is Done or Error.
    pub async fn wait_job_of(&self, accepted: &Value) -> Value {
        self.wait_job(accepted["JobID"].as_str().unwrap_or_default())
            .await
    }

    pub async fn wait_job_as(&self, token: &str, job_id: &str) -> Value {
        // Generous: a clone's or a movement's copy shares the 2 cores with
        // every other test of the run; a job that never ends still fails.
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let (status, job) = self
                .request(Some(token), Method::GET, &format!("/jobs/{job_id}"), None)
                .await;
            assert_eq!(status, StatusCode::OK, "job {job_id}: {job}");
            if job["state"] == "Done" || job["state"] == "Error" {
                return job;
            }
            assert!(Instant::now() < deadline, "job {job_id} did not end: {job}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn create_policy(&self, name: &str, media: u8, node: u8, zone: u8) {
        let (status, body) = self
            .post(
                "/policies",
                json!({"name": name, "resiliencymedia": media, "resiliencynode": node, "resiliencyzone": zone}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "create policy: {body}");
    }

    /// Creates a volume and waits for its job; returns (volume id, job).
    pub async fn create_volume(&self, name: &str, size: u64, policy: &str) -> (String, Value) {
        self.create_volume_from(
            json!({"name": name, "type": "block", "size": size, "policy": policy}),
        )
        .await
    }

    /// `POST /volumes` with `body` and waits for its job; returns the
    /// volume's id and the job.
    pub async fn create_volume_from(&self, body: Value) -> (String, Value) {
        let (status, body) = self.post("/volumes", body).await;
        assert_eq!(status, StatusCode::OK, "create volume: {body}");
        let job = self.wait_job(body["JobID"].as_str().expect("JobID")).await;
        (
            body["ObjectID"].as_str().expect("ObjectID").to_string(),
            job,
        )
    }

    /// Creates a volume from `body` whose job must end Done; its id.
    pub async fn create_volume_done(&self, body: Value) -> String {
        let (id, job) = self.create_volume_from(body).await;
        assert_eq!(job["state"], "Done", "{job}");
        id
    }

    /// Starts a resize of `volume` to `size` GiB; returns its job id.
    pub async fn start_resize(&self, volume: &str, size: u64, movement: bool) -> String {
        let (status, body) = self
            .patch(
                &format!("/volumes/{volume}"),
                json!({"size": size, "allowdatamovement": movement}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["JobID"].as_str().unwrap_or_default().to_string()
    }

    /// Deletes a volume and waits for its job; returns the job.
    pub async fn delete_volume(&self, name: &str) -> Value {
        let (status, body) = self.delete(&format!("/volumes/{name}")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        self.wait_job_of(&body).await
    }

    /// Policies "none" and "mirror" (one copy on another medium and node),
    /// a 20 GiB "filler" and a 15 GiB mirrored "data", both created; returns
    /// the id of "data". On `movement_topology` the filler takes m3 so that
    /// "data" is placed on m1 and m2.
    pub async fn mirror_beside_filler(&self) -> String {
        self.create_policy("none", 0, 0, 0).await;
        self.create_policy("mirror", 1, 1, 0).await;
        let (_, job) = self.create_volume("filler", 20, "none").await;
        assert_eq!(job["state"], "Done", "{job}");
        let (id, job) = self.create_volume("data", 15, "mirror").await;
        assert_eq!(job["state"], "Done", "{job}");
        id
    }

    /// `mirror_beside_filler` with the filler deleted (so m3 has room) and
    /// 16 MiB written to the copy on m2: a movement of that copy has data
    /// to carry. Returns the id of "data".
    pub async fn mirror_with_16_mib_on_m2(&self) -> String {
        let id = self.mirror_beside_filler().await;
        self.delete_volume("filler").await;
        for i in 0..16u64 {
            write_at(
                &self.slice_path("m2", &id, 1, 0),
                i << 20,
                &pattern(i, 1 << 20),
            );
        }
        id
    }

    pub async fn slices(&self, volume: &str) -> Vec<Value> {
        let (status, body) = self.get(&format!("/volumes/{volume}/slices")).await;
        assert_eq!(status, StatusCode::OK, "slices: {body}");
        body.as_array().cloned().unwrap_or_default()
    }

    pub async fn free(&self, medium: &str) -> u64 {
        let (status, body) = self.get(&format!("/media/{medium}")).await;
        assert_eq!(status, StatusCode::OK, "media: {body}");
        body["freesize"].as_u64().expect("freesize")
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("---- svs log ----\n{}", self.log());
        }
    }
}

fn write_config(dir: &Path, config: &TestConfig) {
    let mut toml = format!(
        "movement_rate = \"{}\"\ntoken_lifetime = \"{}\"\nrefresh_token_lifetime = \"{}\"\n",
        config.movement_rate, config.token_lifetime, config.refresh_token_lifetime
    );
    for setting in &config.settings {
        toml.push_str(setting);
        toml.push('\n');
    }
    let nodes_only = config
        .settings
        .iter()
        .any(|s| s.starts_with("storage_nodes_only"));
    if config.media.is_empty() && !nodes_only {
        // With a configuration file the demo topology is asked for.
        toml.push_str("demo = true\n");
    }
    for m in &config.media {
        let path = dir.join("media").join(m.id);
        toml.push_str(&format!(
            "\n[[media]]\nid = \"{}\"\nnode = \"{}\"\nzone = \"{}\"\ndirectory = \"{}\"\nsize_gib = {}\n",
            m.id,
            m.node,
            m.zone,
            path.display(),
            m.size_gib
        ));
    }
    for (name, address) in &config.nodes {
        toml.push_str(&format!(
            "\n[[nodes]]\nname = \"{name}\"\naddress = \"{address}\"\n"
        ));
    }
    std::fs::write(dir.join("svs.toml"), toml).expect("config written");
}

/// Writes `data` at `offset` into a file (a slice, in movement tests).
pub fn write_at(path: &Path, offset: u64, data: &[u8]) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("slice opens");
    file.write_all_at(data, offset).expect("pattern written");
    file.sync_all().expect("fsync");
}

pub fn read_at(path: &Path, offset: u64, len: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).expect("slice opens");
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset).expect("pattern read");
    buf
}

/// A deterministic, position-dependent byte pattern.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x & 0xff) as u8
        })
        .collect()
}

/// Runs `command` (an `svs user add`) with `password` typed on stdin; its
/// output.
pub fn user_add_output(command: &mut Command, password: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("svs user add runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(format!("{password}\n").as_bytes())
        .expect("password written");
    child.wait_with_output().expect("svs user add ends")
}

/// The last of a job's details ("" when it has none).
pub fn last_detail(job: &Value) -> String {
    job["details"]
        .as_array()
        .and_then(|d| d.last())
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The decoded header and claims of a JWT (signature not checked).
pub fn jwt_parts(token: &str) -> (Value, Value) {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3, "a JWT has three parts: {token}");
    let decode = |part: &str| -> Value {
        let bytes = URL_SAFE_NO_PAD.decode(part).expect("base64url JWT part");
        serde_json::from_slice(&bytes).expect("JSON JWT part")
    };
    (decode(parts[0]), decode(parts[1]))
}

impl TestApp {
    /// Sends raw bytes with an optional content type; returns the status,
    /// the content-type of the answer and its body text.
    pub async fn send_raw(
        &self,
        token: Option<&str>,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> (StatusCode, String, String) {
        let mut req = self
            .client
            .request(method, format!("{}{}", self.base, path));
        if let Some(t) = token {
            req = req.header("authorization", t);
        }
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        let resp = req.body(body).send().await.expect("request sent");
        let status = resp.status();
        let ct = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        (status, ct, resp.text().await.expect("body read"))
    }
}

/// A job's details as text.
pub fn details(job: &Value) -> Vec<String> {
    job["details"]
        .as_array()
        .map(|d| {
            d.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// A 409 for an operation blocked by a data movement: exactly `refusal`
/// (`<operation> is not allowed on volume '<v>' while data movement job
/// <id> is in progress`), followed, once the job's pace says how long it
/// still takes, by `; about <time> left`.
pub fn assert_blocked(message: &Value, refusal: &str) {
    let text = message.as_str().unwrap_or_default();
    let Some(rest) = text.strip_prefix(refusal) else {
        panic!("{text:?} is not {refusal:?}");
    };
    let time = is_time_left(rest);
    assert!(rest.is_empty() || time, "{text:?}: not a time left");
}

/// `; about 3 s left`, `; about 2 min 10 s left`, `; about 1 h 5 min left`.
fn is_time_left(rest: &str) -> bool {
    let Some(time) = rest
        .strip_prefix("; about ")
        .and_then(|r| r.strip_suffix(" left"))
    else {
        return false;
    };
    let words: Vec<&str> = time.split(' ').collect();
    words.len().is_multiple_of(2)
        && words
            .chunks(2)
            .all(|w| w[0].parse::<u64>().is_ok() && ["s", "min", "h"].contains(&w[1]))
}
