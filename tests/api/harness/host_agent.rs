//! Helpers of the `host_agent` tests, shared with other test files.

use crate::harness::attach::topology;
use crate::harness::host_side::HostSide;
use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A filesystem frozen (`fsfreeze`) until dropped, also when a test fails.
pub(crate) struct Frozen(pub(crate) PathBuf);

impl Frozen {
    pub(crate) fn new(target: &Path) -> Frozen {
        let ok = Command::new("fsfreeze")
            .arg("--freeze")
            .arg(target)
            .status()
            .expect("fsfreeze");
        assert!(ok.success(), "fsfreeze {}", target.display());
        Frozen(target.to_path_buf())
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = Command::new("fsfreeze")
            .arg("--unfreeze")
            .arg(&self.0)
            .status();
    }
}

/// The service (jobs wait up to 60 s for agents) with a "mirror" policy,
/// the volumes `bodies` create, and host-1's agent running.
pub(crate) async fn service_and_agent(bodies: &[Value]) -> (TestApp, HostSide) {
    let (app, mut host) = service_and_credential(bodies).await;
    host.start_agent(&app);
    (app, host)
}

/// `service_and_agent` up to the agent's start: host-1's credential issued.
pub(crate) async fn service_and_credential(bodies: &[Value]) -> (TestApp, HostSide) {
    let app = TestApp::start_with(TestConfig {
        settings: vec!["agent_wait_secs = 60".into()],
        ..topology("0")
    })
    .await;
    let host = HostSide::new();
    app.create_policy("mirror", 1, 1, 0).await;
    for body in bodies {
        app.create_volume_done(body.clone()).await;
    }
    issue_credential(&app, &host).await;
    (app, host)
}

/// Issues host-1's agent credential into the host side's credential file.
pub(crate) async fn issue_credential(app: &TestApp, host: &HostSide) {
    let (status, body) = app.post("/nodes/host-1/credentials", json!({})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let credential = body["credential"].as_str().expect("credential");
    std::fs::write(host.credential_file(), credential).expect("credential file");
}

pub(crate) async fn attachment(app: &TestApp, volume: &str) -> Value {
    let (status, a) = app
        .get(&format!(
            "/volumes/{volume}/snapshots/top/attachments/host-1"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{a}");
    a
}

/// Waits until the attachment's host state satisfies `done`.
pub(crate) async fn wait_host(
    app: &TestApp,
    host: &HostSide,
    volume: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let start = Instant::now();
    loop {
        let a = attachment(app, volume).await;
        if done(&a) {
            return a;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "host state not reached: {a}\nagent log:\n{}",
            host.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Attaches `volume` to host-1 with a mount point under the host's mount
/// root and waits until its agent mounted it: the mount point and the
/// attachment then.
pub(crate) async fn attach_mounted(
    app: &TestApp,
    host: &HostSide,
    volume: &str,
) -> (std::path::PathBuf, Value) {
    let target = host.mountpoint(volume);
    let (status, body) = app
        .post(
            &format!("/volumes/{volume}/snapshots/top/attachments"),
            json!({"node": "host-1", "mountpoint": target.to_string_lossy()}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let a = wait_host(app, host, volume, |a| a["hoststate"] == "Mounted").await;
    assert_eq!(a["hostmountpath"], target.to_string_lossy().as_ref(), "{a}");
    (target, a)
}

/// The copies' files hold the same bytes (`qemu-img compare`), compared
/// with the filesystem mounted at `target` frozen (flushed, no write in
/// flight).
pub(crate) fn assert_copies_identical(target: &Path, files: &[PathBuf]) {
    let _frozen = Frozen::new(target);
    for other in &files[1..] {
        let (a, b) = (files[0].display().to_string(), other.display().to_string());
        let out = crate::harness::attach::qemu_img(&["compare", "-f", "raw", "-F", "raw", &a, &b]);
        assert!(
            out.as_deref()
                .is_ok_and(|o| o.contains("Images are identical")),
            "{a} and {b}: {out:?}"
        );
    }
}

pub(crate) fn sha(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Files written through the mount by a thread, each fsynced before it
/// counts; what it wrote, and when it stopped, is checked by checksums.
pub(crate) struct Writer {
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) written: Arc<Mutex<BTreeMap<PathBuf, String>>>,
    pub(crate) thread: Option<std::thread::JoinHandle<Result<(), String>>>,
}

impl Writer {
    pub(crate) fn start(dir: &Path, prefix: &str) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let written = Arc::new(Mutex::new(BTreeMap::new()));
        let (s, w, dir, prefix) = (
            stop.clone(),
            written.clone(),
            dir.to_path_buf(),
            prefix.to_string(),
        );
        let thread = std::thread::spawn(move || {
            let mut i = 0u64;
            while !s.load(Ordering::SeqCst) {
                let path = dir.join(format!("{prefix}-{i:05}"));
                let data = pattern(i + 1000, 192 * 1024 + (i as usize % 7) * 4096);
                let mut f =
                    std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                f.write_all(&data)
                    .and_then(|()| f.sync_all())
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                w.lock().unwrap().insert(path, sha(&data));
                i += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(())
        });
        Writer {
            stop,
            written,
            thread: Some(thread),
        }
    }

    pub(crate) fn count(&self) -> usize {
        self.written.lock().unwrap().len()
    }

    pub(crate) fn finish(mut self) -> BTreeMap<PathBuf, String> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join()
                .expect("writer thread")
                .expect("writes through the mount succeed");
        }
        self.written.lock().unwrap().clone()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Every file has the bytes it was written with.
pub(crate) fn check_files(files: &BTreeMap<PathBuf, String>) {
    for (path, want) in files {
        let got = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(&sha(&got), want, "{}", path.display());
    }
}

/// The agent's side of a host: its credential, mounts and process.
impl HostSide {
    pub(crate) fn credential_file(&self) -> PathBuf {
        self.path().join("credential")
    }

    pub(crate) fn mountpoint(&self, name: &str) -> PathBuf {
        self.path().join("mnt").join(name)
    }

    /// Starts host-1's agent; against a service with its own CA
    /// (`tls = "auto"`), with `--ca-cert`.
    pub(crate) fn start_agent(&mut self, app: &TestApp) {
        let child = self.agent_command(app).spawn().expect("svs agent starts");
        self.process = Some(child);
    }

    /// The command that runs host-1's agent, logging to `agent.log`.
    pub(crate) fn agent_command(&self, app: &TestApp) -> Command {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path().join("agent.log"))
            .expect("agent log");
        let mut command = Command::new(svs_bin());
        command.args(["agent", "--url", &app.base, "--node", "host-1"]);
        if app.base.starts_with("https://") {
            command.arg("--ca-cert").arg(app.ca_cert());
        }
        command
            .arg("--credential-file")
            .arg(self.credential_file())
            .arg("--state-dir")
            .arg(self.path().join("state"))
            .arg("--mount-root")
            .arg(self.path().join("mnt"))
            .env("SVS_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log.try_clone().expect("log"));
        command
    }

    /// SIGKILL, like a crash.
    pub(crate) fn kill_agent(&mut self) {
        self.kill_process();
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.path().join("agent.log")).unwrap_or_default()
    }
}
