//! Helpers of the `storage_nodes` tests, shared with other test files.

use crate::harness::{medium, svs_bin, TestApp, TestConfig};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// The service's `storage_node_timeout` in these tests.
/// Long enough that a node heartbeating every second is not judged Offline on a
/// loaded machine (CI runs suites side by side); a node that must go Offline is
/// killed or stopped.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(5);

/// How long past the timeout a change may take to show (the liveness
/// pass runs four times per timeout; a loaded machine is slower).
pub(crate) const MARGIN: Duration = Duration::from_secs(8);

/// A free port on `ip` (a loopback alias: binding it proves it works).
pub(crate) fn free_port(ip: &str) -> u16 {
    let [port] = free_ports(ip);
    port
}

/// `N` distinct free ports on `ip`: each listener is held until all are
/// picked (a port freed at once may be handed out again).
pub(crate) fn free_ports<const N: usize>(ip: &str) -> [u16; N] {
    let listeners: Vec<std::net::TcpListener> = (0..N)
        .map(|_| {
            std::net::TcpListener::bind((ip, 0))
                .unwrap_or_else(|e| panic!("loopback address {ip} cannot be bound: {e}"))
        })
        .collect();
    std::array::from_fn(|i| listeners[i].local_addr().map(|a| a.port()).unwrap_or(0))
}

/// One `svs storage-node` process with its own directory, configuration,
/// credential file and media; killed when dropped.
pub(crate) struct StorageNodeProcess {
    pub(crate) dir: TempDir,
    pub(crate) child: Option<Child>,
    pub(crate) slice_address: String,
    /// Where its NBD server of volumes' fronts listens.
    pub(crate) front_address: String,
}

impl StorageNodeProcess {
    /// Writes the node's configuration (media `(name, GiB)` in
    /// directories of its own) and its credential file.
    pub(crate) fn new(
        app: &TestApp,
        node: &str,
        ip: &str,
        media: &[(&str, u64)],
        credential: &str,
    ) -> Self {
        let dir = tempfile::tempdir().expect("node dir");
        // Two ports of their own (nodes of parallel tests share IPs), both
        // bound while the second is picked so that they differ.
        let [slice_port, front_port] = free_ports(ip);
        let slice_address = format!("{ip}:{slice_port}");
        let front_address = format!("{ip}:{front_port}");
        let credential_file = dir.path().join("node.credential");
        std::fs::write(&credential_file, credential).expect("credential written");
        let mut toml = format!(
            "api = \"{}\"\nnode = \"{node}\"\ncredential_file = \"{}\"\n\
             slice_listen = \"{slice_address}\"\nstate_dir = \"{}\"\n\
             front_listen = \"{front_address}\"\n",
            app.base,
            credential_file.display(),
            dir.path().join("state").display(),
        );
        for (name, gib) in media {
            let path = dir.path().join("media").join(name);
            std::fs::create_dir_all(&path).expect("medium dir");
            toml.push_str(&format!(
                "\n[[media]]\nname = \"{name}\"\ndirectory = \"{}\"\nsize = \"{gib} GiB\"\n",
                path.display()
            ));
        }
        std::fs::write(dir.path().join("node.toml"), toml).expect("config written");
        StorageNodeProcess {
            dir,
            child: None,
            slice_address,
            front_address,
        }
    }

    /// The node's `state_dir`.
    pub(crate) fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub(crate) fn medium_dir(&self, name: &str) -> PathBuf {
        self.dir.path().join("media").join(name)
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("node.log")).unwrap_or_default()
    }

    pub(crate) fn start(&mut self) {
        self.start_with(&[]);
    }

    /// Starts it with more arguments (`--ca-cert FILE`).
    pub(crate) fn start_with(&mut self, extra: &[&str]) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("node.log"))
            .expect("log file");
        let child = Command::new(svs_bin())
            .args(["storage-node", "--config"])
            .arg(self.dir.path().join("node.toml"))
            .args(extra)
            .env("SVS_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("svs storage-node starts");
        self.child = Some(child);
    }

    /// SIGSTOP (`true`) or SIGCONT: the node stops answering anything,
    /// its connections left open, as a hung host does; then it goes on
    /// where it stopped. A stopped node still dies when dropped (SIGKILL).
    pub(crate) fn pause(&self, stopped: bool) {
        let child = self.child.as_ref().expect("the node runs");
        let signal = if stopped { "-STOP" } else { "-CONT" };
        let status = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} failed");
    }

    /// SIGKILL: the node vanishes without a word.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM; true when it exited cleanly (status 0).
    pub(crate) fn stop(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        let _ = Command::new("kill").arg(child.id().to_string()).status();
        child.wait().map(|s| s.success()).unwrap_or(false)
    }
}

impl Drop for StorageNodeProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One storage node of a multi-node test: its name, its one medium and its
/// process.
pub(crate) struct Node {
    pub(crate) name: &'static str,
    pub(crate) medium: &'static str,
    pub(crate) process: StorageNodeProcess,
}

/// Starts a storage node with one 4 GiB medium.
pub(crate) async fn start_node(
    app: &TestApp,
    name: &'static str,
    ip: &str,
    zone: &str,
    medium: &'static str,
) -> Node {
    let credential = node_with_credential(app, name, ip, zone, "storage").await;
    let mut process = StorageNodeProcess::new(app, name, ip, &[(medium, 4)], &credential);
    process.start();
    Node {
        name,
        medium,
        process,
    }
}

/// The volume's state.
pub(crate) async fn volume_state(app: &TestApp, volume: &str) -> Value {
    let (status, v) = app.get(&format!("/volumes/{volume}")).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    v["state"].clone()
}

/// The volume's copies as (copy, medium, health), copy 0 first.
pub(crate) async fn copies(app: &TestApp, volume: &str) -> Vec<(u64, String, String)> {
    let mut copies: Vec<(u64, String, String)> = app
        .slices(volume)
        .await
        .iter()
        .map(|s| {
            (
                s["copy"].as_u64().unwrap_or(u64::MAX),
                s["media"].as_str().unwrap_or_default().to_string(),
                s["health"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    copies.sort();
    copies
}

/// Waits until `writer` has `count` more files than `from`.
pub(crate) async fn wait_written(
    writer: &crate::harness::host_agent::Writer,
    from: usize,
    count: usize,
    host: &crate::harness::host_side::HostSide,
    app: &TestApp,
) {
    let start = Instant::now();
    while writer.count() < from + count {
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "the writer stopped at {} files\nagent log:\n{}\nserve log:\n{}",
            writer.count(),
            host.log(),
            app.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `check` until it holds or `within` has passed; the last value.
pub(crate) async fn eventually<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub(crate) async fn node(app: &TestApp, name: &str) -> Value {
    let (status, body) = app.get(&format!("/nodes/{name}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// `svs serve` whose one local medium (1 GiB) is too small for the tests'
/// volumes, so their copies go to the storage nodes; the nodes' timeout is
/// [`TIMEOUT`] and the periodic media check is out of the way.
pub(crate) async fn start_for_storage_nodes() -> TestApp {
    TestApp::start_with(storage_nodes_config(&[])).await
}

/// The configuration of [`start_for_storage_nodes`], with `more` top-level
/// settings.
/// What a job steered on a volume's front on a storage node logs.
pub(crate) const JOB_ON_NODE_FRONT: &str = "the job runs on the volume's front on its storage node";

/// `svs serve`'s log says each of `steps`, and never that a job brought a
/// volume's front into `svs serve`.
pub(crate) fn assert_jobs_on_node_fronts(log: &str, steps: &[&str]) {
    for step in steps {
        assert!(log.contains(step), "{step}:\n{log}");
    }
    assert!(
        !log.contains("the volume's front is in svs serve"),
        "a job brought the front into svs serve:\n{log}"
    );
}

pub(crate) fn storage_nodes_config(more: &[&str]) -> TestConfig {
    let mut settings = vec![
        format!("storage_node_timeout = \"{}s\"", TIMEOUT.as_secs()),
        "media_check_period = \"1h\"".into(),
    ];
    // These tests pin where fronts run: `svs serve` unless they say
    // otherwise (the default, "nodes", has its own tests: front_on_node.rs
    // and node_moves.rs).
    if !more.iter().any(|s| s.trim_start().starts_with("fronts")) {
        settings.push("fronts = \"serve\"".into());
    }
    settings.extend(more.iter().map(|s| s.to_string()));
    TestConfig {
        media: vec![medium("m1", "host-0", "z0", 1)],
        settings,
        ..TestConfig::default()
    }
}

/// Adds a node and issues its credential of `role`.
pub(crate) async fn node_with_credential(
    app: &TestApp,
    name: &str,
    address: &str,
    zone: &str,
    role: &str,
) -> String {
    let (status, body) = app
        .post(
            "/nodes",
            json!({"name": name, "address": address, "zone": zone}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, issued) = app
        .post(&format!("/nodes/{name}/credentials"), json!({"role": role}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{issued}");
    assert_eq!(issued["role"], role, "{issued}");
    issued["credential"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// `PUT /nodes/{node}/storage` as `credential`.
pub(crate) async fn register(
    app: &TestApp,
    credential: &str,
    node: &str,
    body: Value,
) -> (StatusCode, Value) {
    app.request(
        Some(&format!("Bearer {credential}")),
        Method::PUT,
        &format!("/nodes/{node}/storage"),
        Some(body),
    )
    .await
}

/// Waits until the service's data plane serves `media` (the nodes' slice
/// servers start after their first registration).
pub(crate) async fn wait_served(app: &TestApp, media: &[&str]) {
    let served = eventually(Duration::from_secs(30), || async {
        let log = app.log();
        media.iter().all(|m| {
            log.lines()
                .any(|l| l.contains("serving a storage node's medium") && l.contains(m))
        })
    })
    .await;
    assert!(served, "{}", app.log());
}

/// The snapshot files of copy `copy` of a one-column volume in `dir`, by
/// kind (`map` / `delta`), with their bytes (a delta's trailing zeros cut:
/// a hole at its end reads the same).
pub(crate) fn snapshot_files(dir: &std::path::Path, copy: u64) -> Vec<(String, Vec<u8>)> {
    let prefix = format!("c{copy}-k0.s");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| {
            let name = e.ok()?.file_name().to_string_lossy().into_owned();
            let kind = name.strip_prefix(&prefix)?.split_once('.')?.1.to_string();
            let mut bytes = std::fs::read(dir.join(&name)).ok()?;
            if kind == "delta" {
                let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
                bytes.truncate(end);
            }
            Some((kind, bytes))
        })
        .collect();
    files.sort();
    files
}
