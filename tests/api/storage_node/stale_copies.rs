//! Copies that fall behind (issue 21), with the real `svs serve`, real
//! `svs storage-node` processes on 127.0.0.2 and 127.0.0.3 and qemu-io over
//! NBD: a node that stops answering (SIGSTOP) while a writer writes leaves
//! a stale copy that records the generation it missed and is rebuilt when
//! the node returns; a stale copy is never read; and a node refuses slice
//! requests with a wrong credential or a stale front epoch, its disk
//! untouched.

use crate::harness::cli::Home;
use crate::harness::storage_nodes::{
    eventually, node, node_with_credential, register, start_for_storage_nodes, wait_served,
    StorageNodeProcess, MARGIN, TIMEOUT,
};
use crate::harness::{read_at, TestApp};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use svs_sliceproto::{remote_error, SliceClient, SliceName, Status};

/// How long one qemu-io command may take: a write to a node that stopped
/// answering waits for the front's request timeout (5 s) first, and CI is
/// loaded.
const COMMAND_TIME: Duration = Duration::from_secs(120);

/// One storage node of the test: its name, credential, media and process.
struct Node {
    name: &'static str,
    credential: String,
    media: Vec<&'static str>,
    process: StorageNodeProcess,
}

/// A 2 GiB volume "data" mirrored over two storage nodes (the service's
/// own medium is too small for it), attached read-write to host-0.
struct Mirror {
    app: TestApp,
    nodes: Vec<Node>,
    id: String,
    uri: String,
}

impl Mirror {
    /// `media`: each node's media (4 GiB each); sn-1 on 127.0.0.2 (zone
    /// z1), sn-2 on 127.0.0.3 (zone z2).
    async fn start(media: [&[&'static str]; 2]) -> Mirror {
        let app = start_for_storage_nodes().await;
        let mut nodes = Vec::new();
        for (i, (name, ip)) in [("sn-1", "127.0.0.2"), ("sn-2", "127.0.0.3")]
            .into_iter()
            .enumerate()
        {
            let credential =
                node_with_credential(&app, name, ip, &format!("z{}", i + 1), "storage").await;
            let sized: Vec<(&str, u64)> = media[i].iter().map(|m| (*m, 4)).collect();
            let mut process = StorageNodeProcess::new(&app, name, ip, &sized, &credential);
            process.start();
            nodes.push(Node {
                name,
                credential,
                media: media[i].to_vec(),
                process,
            });
        }
        let all: Vec<&str> = media.iter().flat_map(|m| m.iter().copied()).collect();
        wait_served(&app, &all).await;
        app.create_policy("mirror", 1, 1, 0).await;
        let (id, _) = app.create_volume("data", 2, "mirror").await;
        let (status, body) = app
            .patch("/nodes/host-0", json!({"address": "127.0.0.1"}))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let a = crate::harness::attach::attach(&app, "data", "host-0", false).await;
        let uri = crate::harness::attach::uri(&a);
        Mirror {
            app,
            nodes,
            id,
            uri,
        }
    }

    async fn slices(&self) -> Vec<Value> {
        self.app.slices("data").await
    }

    /// The node holding copy `copy` now.
    async fn node_of(&self, copy: usize) -> &Node {
        let slices = self.slices().await;
        let medium = slices[copy]["media"].as_str().unwrap_or_default();
        self.nodes
            .iter()
            .find(|n| n.media.contains(&medium))
            .unwrap_or_else(|| panic!("no node holds {medium}: {slices:?}"))
    }

    /// The file of copy `copy` (column 0) on `medium`.
    fn file_of(&self, medium: &str, copy: u64) -> PathBuf {
        let node = self
            .nodes
            .iter()
            .find(|n| n.media.contains(&medium))
            .unwrap_or_else(|| panic!("no node holds {medium}"));
        node.process
            .medium_dir(medium)
            .join(&self.id)
            .join(format!("c{copy}-k0.slice"))
    }

    /// The highest front epoch `node` accepted for the volume, from the
    /// node's own state file (`epochs/<volume>`: magic, then the epoch as
    /// u64 little-endian).
    fn node_epoch(&self, node: &Node) -> u64 {
        let path = node.process.dir.path().join("state/epochs").join(&self.id);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let epoch: [u8; 8] = bytes
            .get(8..16)
            .and_then(|b| b.try_into().ok())
            .unwrap_or_else(|| panic!("{}: {} bytes", path.display(), bytes.len()));
        u64::from_le_bytes(epoch)
    }

    async fn state(&self) -> Value {
        self.app.get("/volumes/data").await.1["state"].clone()
    }

    async fn wait_state(&self, state: &str, within: Duration) {
        let reached = eventually(within, || async { self.state().await == state }).await;
        assert!(
            reached,
            "volume not {state}: {}\n{:?}",
            self.app.get("/volumes/data").await.1,
            self.slices().await
        );
    }

    /// The volume's `volume_recovery` jobs.
    async fn recoveries(&self) -> Vec<Value> {
        let (status, jobs) = self.app.get("/jobs?type=volume_recovery").await;
        assert_eq!(status, StatusCode::OK, "{jobs}");
        jobs.as_array().cloned().unwrap_or_default()
    }
}

/// An interactive qemu-io on one NBD connection: commands are sent one at
/// a time, each when the previous one is done (qemu-io prompts again), so
/// that a node can be stopped between two writes of the same writer.
/// Killed when dropped.
struct QemuIo {
    child: Child,
    stdin: ChildStdin,
    output: mpsc::Receiver<Vec<u8>>,
}

/// What qemu-io prints when it waits for the next command.
const PROMPT: &str = "qemu-io> ";

impl QemuIo {
    fn open(uri: &str) -> QemuIo {
        // One stream (stderr into stdout), so that an error comes before
        // the prompt that follows it.
        let mut child = Command::new("sh")
            .args(["-c", "exec qemu-io -f raw \"$0\" 2>&1", uri])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("qemu-io runs (install qemu-utils)");
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = child.stdout.take().expect("stdout");
        let (tx, output) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = stdout.read(&mut buf) {
                if tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        let mut io = QemuIo {
            child,
            stdin,
            output,
        };
        let started = io.until_prompt("start");
        assert!(!started.contains("can't open"), "{started}");
        io
    }

    /// What qemu-io prints until it prompts again; panics when it does not
    /// within `COMMAND_TIME`.
    fn until_prompt(&mut self, what: &str) -> String {
        let mut out = String::new();
        while !out.ends_with(PROMPT) {
            let chunk = self
                .output
                .recv_timeout(COMMAND_TIME)
                .unwrap_or_else(|e| panic!("qemu-io `{what}`: {e}; so far: {out}"));
            out.push_str(&String::from_utf8_lossy(&chunk));
        }
        out
    }

    /// Runs `command`: Ok(output), or Err(output) when it failed (an error,
    /// a pattern that did not verify).
    fn run(&mut self, command: &str) -> Result<String, String> {
        writeln!(self.stdin, "{command}").expect("qemu-io takes a command");
        self.stdin.flush().expect("qemu-io takes a command");
        let out = self.until_prompt(command);
        if out.contains("failed") || out.contains("error") {
            Err(out)
        } else {
            Ok(out)
        }
    }

    /// A write of `len` bytes of `pattern` at `offset`, then a flush.
    fn write(&mut self, pattern: u8, offset: &str, len: &str) -> Result<String, String> {
        let mut out = self.run(&format!("write -P {pattern:#x} {offset} {len}"))?;
        out.push_str(&self.run("flush")?);
        Ok(out)
    }
}

impl Drop for QemuIo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A node's slice credential, as its registration answers it (the same
/// registration the node itself sends).
async fn slice_credential(app: &TestApp, n: &Node) -> String {
    let media: Vec<Value> = n
        .media
        .iter()
        .map(|m| {
            json!({
                "name": m,
                "size": 4 * crate::harness::GIB,
                "directory": n.process.medium_dir(m).display().to_string(),
            })
        })
        .collect();
    let body = json!({"sliceaddress": n.process.slice_address, "media": media});
    let (status, answer) = register(app, &n.credential, n.name, body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["slicecredential"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// qemu-io with these commands, one connection: Ok(output) when every one
/// succeeded.
fn io(uri: &str, commands: &[&str]) -> Result<String, String> {
    let commands: Vec<String> = commands.iter().map(|c| c.to_string()).collect();
    crate::harness::attach::qemu_io(uri, &commands)
}

/// Whether two (sparse) files hold the same bytes, read 1 MiB at a time.
fn same_bytes(a: &Path, b: &Path) -> bool {
    let open = |p: &Path| std::fs::File::open(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let (mut fa, mut fb) = (open(a), open(b));
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let na = read_full(&mut fa, &mut ba);
        let nb = read_full(&mut fb, &mut bb);
        if na != nb || ba[..na] != bb[..nb] {
            return false;
        }
        if na == 0 {
            return true;
        }
    }
}

fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]).expect("read") {
            0 => break,
            k => n += k,
        }
    }
    n
}

fn all(bytes: &[u8], value: u8) -> bool {
    bytes.iter().all(|b| *b == value)
}

/// SIGSTOP the node of one copy between two writes of one writer: the
/// writer goes on, the volume is Degraded within the node timeout, the
/// copy is Lost with the generation it missed (the front epoch both nodes
/// accepted) in the API and the CLI; SIGCONT: a volume_recovery job (user
/// svs) rebuilds it on the same node, the volume is Ready and both nodes'
/// files are byte-identical.
#[tokio::test]
async fn a_node_stopped_under_a_writer_leaves_a_stale_copy_rebuilt_when_it_returns() {
    let mirror = Mirror::start([&["a1", "a2"], &["b1", "b2"]]).await;
    let app = &mirror.app;
    let mut writer = QemuIo::open(&mirror.uri);
    writer.write(0x11, "0", "8M").expect("first write");

    let stopped = mirror.node_of(0).await;
    let healthy = mirror.node_of(1).await;
    let epoch = mirror.node_epoch(healthy);
    assert!(epoch >= 1, "{epoch}");
    assert_eq!(mirror.node_epoch(stopped), epoch);
    stopped.process.pause(true);
    // The same writer, on the same connection: its write waits for the
    // front to give the node up, then goes on with the other copy.
    writer
        .write(0x22, "4M", "8M")
        .expect("writes go on with one copy");
    mirror.wait_state("Degraded", TIMEOUT + MARGIN).await;
    let slices = mirror.slices().await;
    assert_eq!(
        (&slices[0]["health"], &slices[0]["stalegeneration"]),
        (&json!("Lost"), &json!(epoch)),
        "{slices:?}"
    );
    assert_eq!(
        (&slices[1]["health"], &slices[1]["stalegeneration"]),
        (&json!("Healthy"), &Value::Null),
        "{slices:?}"
    );
    let (status, copies) = app.get(&format!("/nodes/{}/copies", stopped.name)).await;
    assert_eq!(status, StatusCode::OK, "{copies}");
    assert_eq!(
        (&copies[0]["state"], &copies[0]["stalegeneration"]),
        (&json!("Lost"), &json!(epoch)),
        "{copies}"
    );
    let home = Home::new(false);
    home.login(app);
    let shown = home.ok(&["volume", "get", "data"]);
    let zone = if stopped.name == "sn-1" { "z1" } else { "z2" };
    assert!(
        shown.contains(&format!(
            "(node {}, zone {zone}): Lost, stale (missed generation {epoch}; not read until rebuilt)",
            stopped.name
        )),
        "{shown}"
    );
    let out = writer
        .run("read -P 0x11 0 4M")
        .expect("the first write reads back");
    assert!(!out.contains("Pattern verification failed"), "{out}");

    // Stopped past storage_node_timeout: the node is Offline (the front
    // may have given it up first, on its request timeout).
    let offline = eventually(TIMEOUT + MARGIN, || async {
        app.get(&format!("/nodes/{}", stopped.name)).await.1["state"] == "Offline"
    })
    .await;
    assert!(
        offline,
        "{}",
        app.get(&format!("/nodes/{}", stopped.name)).await.1
    );
    stopped.process.pause(false);
    let rebuilt = eventually(Duration::from_secs(120), || async {
        mirror
            .recoveries()
            .await
            .iter()
            .any(|j| j["state"] == "Done" && j["username"] == "svs")
    })
    .await;
    assert!(
        rebuilt,
        "{:?}\n{}\n{}",
        mirror.recoveries().await,
        app.log(),
        stopped.process.log()
    );
    mirror.wait_state("Ready", Duration::from_secs(30)).await;
    let slices = mirror.slices().await;
    for s in &slices {
        assert_eq!(
            (&s["health"], &s["stalegeneration"]),
            (&json!("Healthy"), &Value::Null),
            "{slices:?}"
        );
    }
    // Node resiliency: the copy is rebuilt on the node that came back.
    assert_eq!(mirror.node_of(0).await.name, stopped.name, "{slices:?}");
    let on = |copy: usize| {
        slices[copy]["media"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let (first, second) = (mirror.file_of(&on(0), 0), mirror.file_of(&on(1), 1));
    assert!(
        same_bytes(&first, &second),
        "{} and {} differ after the rebuild",
        first.display(),
        second.display()
    );
    assert!(all(&read_at(&first, 4 << 20, 4096), 0x22));
    let out = writer
        .run("read -P 0x22 4M 8M")
        .expect("the second write reads back");
    assert!(!out.contains("Pattern verification failed"), "{out}");
}

/// Node B is SIGKILLed under a writer, new bytes go to A alone, and B
/// comes back: the recovery its return starts resyncs B's stale copy on
/// B's own medium in place (with node resiliency and two nodes there is
/// nowhere else), rewriting only what differs: far less than the slice.
#[tokio::test]
async fn a_killed_node_that_returns_has_its_stale_copy_resynced_in_place() {
    let mut mirror = Mirror::start([&["a1"], &["b1"]]).await;
    let mut writer = QemuIo::open(&mirror.uri);
    writer.write(0x11, "0", "32M").expect("first write");
    let b = mirror.node_of(1).await.name;
    let b_medium = mirror.slices().await[1]["media"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let b_index = mirror
        .nodes
        .iter()
        .position(|n| n.name == b)
        .expect("node b");
    mirror.nodes[b_index].process.kill();
    writer
        .write(0x22, "4M", "2M")
        .expect("writes go on with one copy");
    mirror.wait_state("Degraded", TIMEOUT + MARGIN).await;
    let stale = mirror.slices().await[1]["stalegeneration"].clone();
    assert!(stale.as_u64().is_some(), "{:?}", mirror.slices().await);
    let app = &mirror.app;
    let offline = eventually(TIMEOUT + MARGIN, || async {
        node(app, b).await["state"] == "Offline"
    })
    .await;
    assert!(offline, "{}", node(app, b).await);

    mirror.nodes[b_index].process.start();
    let done = eventually(Duration::from_secs(180), || async {
        mirror
            .recoveries()
            .await
            .iter()
            .any(|j| j["state"] == "Done" && j["username"] == "svs")
    })
    .await;
    assert!(
        done,
        "{:?}\n{}\n{}",
        mirror.recoveries().await,
        mirror.app.log(),
        mirror.nodes[b_index].process.log()
    );
    let job = mirror
        .recoveries()
        .await
        .into_iter()
        .find(|j| j["state"] == "Done")
        .unwrap_or_default();
    let details: Vec<String> = job["details"]
        .as_array()
        .map(|d| {
            d.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let prefix =
        format!("Resynced slice c1-k0 on {b_medium} in place (stale since generation {stale}): ");
    let resynced = details
        .iter()
        .find(|d| d.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no resync detail: {details:?}"));
    // "... rewritten (X of Y bytes compared)"
    let counts = resynced
        .rsplit_once('(')
        .and_then(|(_, c)| c.strip_suffix(" bytes compared)"))
        .and_then(|c| c.split_once(" of "))
        .and_then(|(x, y)| Some((x.parse::<u64>().ok()?, y.parse::<u64>().ok()?)))
        .unwrap_or_else(|| panic!("no byte counts: {resynced}"));
    let (rewritten, compared) = counts;
    assert_eq!(compared, 2 << 30, "the whole slice is compared: {resynced}");
    assert!(
        (2 << 20..compared / 16).contains(&rewritten),
        "at least the 2 MiB written meanwhile, far less than the slice: {resynced}"
    );
    assert!(
        details.iter().any(|d| d.starts_with("Recovery plan:")
            && d.contains(&format!("c1-k0 resynced in place on {b_medium}"))),
        "{details:?}"
    );

    mirror.wait_state("Ready", Duration::from_secs(30)).await;
    let slices = mirror.slices().await;
    for s in &slices {
        assert_eq!(
            (&s["health"], &s["stalegeneration"]),
            (&json!("Healthy"), &Value::Null),
            "{slices:?}"
        );
    }
    assert_eq!(slices[1]["media"], json!(b_medium), "{slices:?}");
    let on = |copy: usize| {
        slices[copy]["media"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let (first, second) = (mirror.file_of(&on(0), 0), mirror.file_of(&on(1), 1));
    assert!(
        same_bytes(&first, &second),
        "{} and {} differ after the resync",
        first.display(),
        second.display()
    );
    let out = writer
        .run("read -P 0x22 4M 2M")
        .expect("the new bytes read back");
    assert!(!out.contains("Pattern verification failed"), "{out}");
    let out = writer
        .run("read -P 0x11 6M 26M")
        .expect("the old bytes around them too");
    assert!(!out.contains("Pattern verification failed"), "{out}");
    // Only B's copy left: it serves the new bytes.
    let a = mirror.node_of(0).await.name;
    let a_index = mirror
        .nodes
        .iter()
        .position(|n| n.name == a)
        .expect("node a");
    mirror.nodes[a_index].process.kill();
    let out = writer
        .run("read -P 0x22 4M 2M")
        .expect("B's resynced copy has the new bytes");
    assert!(!out.contains("Pattern verification failed"), "{out}");
}

/// Node A stops; new bytes go to B alone, A's disk keeps the old ones. B
/// stops too, then A comes back: A's copy is stale, so the volume is
/// Failed and reads answer EIO, never A's old bytes, although A answers.
#[tokio::test]
async fn a_stale_copy_is_never_read_even_when_its_node_is_the_only_one_answering() {
    let mut mirror = Mirror::start([&["a1"], &["b1"]]).await;
    let app = &mirror.app;
    io(&mirror.uri, &["write -P 0x11 0 8M", "flush"]).expect("first write");
    let a = mirror.node_of(0).await;
    let b = mirror.node_of(1).await;
    let slices = mirror.slices().await;
    let on = |copy: usize| {
        slices[copy]["media"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let (a_file, b_file) = (mirror.file_of(&on(0), 0), mirror.file_of(&on(1), 1));

    a.process.pause(true);
    // The missed heartbeats alone make A's copy stale; no I/O waits.
    mirror.wait_state("Degraded", TIMEOUT + MARGIN).await;
    io(&mirror.uri, &["write -P 0x22 0 8M", "flush"]).expect("writes go on with B");
    assert!(all(&read_at(&a_file, 4096, 4096), 0x11), "A missed it");
    assert!(all(&read_at(&b_file, 4096, 4096), 0x22), "B has it");

    // B stops before A returns: no healthy copy is left to resync from.
    b.process.pause(true);
    mirror.wait_state("Failed", TIMEOUT + MARGIN).await;
    a.process.pause(false);
    let back = eventually(TIMEOUT + MARGIN, || async {
        node(app, a.name).await["state"] == "Online"
    })
    .await;
    assert!(back, "{}\n{}", node(app, a.name).await, a.process.log());
    // A's return starts a recovery (user svs); it has ended before the
    // reads.
    let settled = eventually(Duration::from_secs(60), || async {
        let recoveries = mirror.recoveries().await;
        !recoveries.is_empty()
            && recoveries
                .iter()
                .all(|j| j["state"] == "Done" || j["state"] == "Error")
    })
    .await;
    assert!(settled, "{:?}\n{}", mirror.recoveries().await, app.log());
    assert_eq!(mirror.state().await, "Failed");
    let slices = mirror.slices().await;
    assert_eq!(slices[0]["health"], "Lost", "{slices:?}");
    assert!(
        slices[0]["stalegeneration"].as_u64().is_some(),
        "{slices:?}"
    );

    // The recovery A's return started had nothing healthy to rebuild from.
    let recoveries = mirror.recoveries().await;
    assert!(
        recoveries.iter().all(|j| j["state"] == "Error"
            && j["details"][0]
                == "Could not recover volume 'data': column 0 has no healthy copy left: \
                    its data is lost and cannot be rebuilt"),
        "{recoveries:?}"
    );
    // Never A's old bytes: the new ones, or EIO.
    match io(&mirror.uri, &["read -P 0x22 0 8M"]) {
        Ok(_) => {}
        Err(out) => assert!(
            out.contains("Input/output error") && !out.contains("Pattern verification failed"),
            "{out}"
        ),
    }
    let old = io(&mirror.uri, &["read -P 0x11 0 8M"]);
    assert!(old.is_err(), "A's old bytes were read: {old:?}");
    // The old bytes were there to be read.
    assert!(all(&read_at(&a_file, 4096, 4096), 0x11));

    // A fresh opening of the volume with A answering: svs serve restarted
    // opens it again for its export (the exports reconciler), and still
    // never reads A's copy.
    let b_name = b.name;
    mirror.app.restart().await;
    let app = &mirror.app;
    let (_, attachment) = app
        .get("/volumes/data/snapshots/top/attachments/host-0")
        .await;
    let uri = crate::harness::attach::uri(&attachment);
    // Exported again once a read reaches the volume: EIO, or A's bytes.
    let eio = |out: &str| out.contains("Input/output error");
    let reopened = eventually(Duration::from_secs(30), || async {
        match io(&uri, &["read 0 4k"]) {
            Ok(_) => true,
            Err(out) => eio(&out),
        }
    })
    .await;
    assert!(reopened, "{}", app.log());
    match io(&uri, &["read -P 0x11 0 8M"]) {
        Ok(out) => panic!("a fresh opening read A's old bytes: {out}"),
        Err(out) => assert!(
            eio(&out) && !out.contains("Pattern verification failed"),
            "{out}"
        ),
    }
    let b = mirror
        .nodes
        .iter()
        .find(|n| n.name == b_name)
        .expect("node B");
    b.process.pause(false);
}

/// Slice requests straight to a node's slice server: a wrong credential
/// (made up, or another node's) is refused at the hello; with the right
/// one, writes, discards and syncs with an epoch below the volume's front
/// epoch are refused as stale, and any request for a slice the node does
/// not hold is ENOENT; the node's files do not change and nothing is made.
#[tokio::test]
async fn a_node_refuses_slice_requests_with_a_wrong_credential_or_a_stale_epoch() {
    let mirror = Mirror::start([&["a1"], &["b1"]]).await;
    let app = &mirror.app;
    crate::harness::attach::qemu_io(&mirror.uri, &["write -P 0x11 0 8M".into(), "flush".into()])
        .expect("write");
    let target = mirror.node_of(0).await;
    let other = mirror.node_of(1).await;
    let epoch = mirror.node_epoch(target);
    assert!(epoch >= 1, "{epoch}");
    let medium = target.media[0];
    let file = mirror.file_of(medium, 0);
    let before = (
        std::fs::metadata(&file).expect("slice file"),
        read_at(&file, 0, 1 << 20),
    );
    assert!(all(&before.1, 0x11));

    let secret = slice_credential(app, target).await;
    let others = slice_credential(app, other).await;
    assert_ne!(secret, others);
    let addr = target.process.slice_address.parse().expect("slice address");
    let timeout = Duration::from_secs(30);

    for wrong in ["not-a-slice-credential", others.as_str(), ""] {
        let refused = SliceClient::connect(addr, wrong, "svs-test", timeout);
        let e = refused
            .err()
            .unwrap_or_else(|| panic!("{wrong:?} was accepted"));
        assert_eq!(
            remote_error(&e).map(|r| r.status),
            Some(Status::Unauthorized),
            "{wrong:?}: {e}"
        );
    }

    let client = SliceClient::connect(addr, &secret, "svs-test", timeout).expect("connect");
    let slice = SliceName::new(medium, &mirror.id, 0, 0);
    // The name and the credential are right: the copy reads.
    let mut buf = vec![0u8; 4096];
    client.read(&slice, 0, &mut buf).expect("read");
    assert!(all(&buf, 0x11));
    let stale = |r: std::io::Result<()>, what: &str| {
        let e = r.err().unwrap_or_else(|| panic!("{what} was applied"));
        assert_eq!(
            remote_error(&e).map(|r| r.status),
            Some(Status::StaleEpoch),
            "{what}: {e}"
        );
    };
    for old in [epoch - 1, 0] {
        stale(
            client.write(&slice, old, 0, &[0x99; 4096]),
            &format!("a write at epoch {old}"),
        );
        stale(
            client.discard(&slice, old, 0, 1 << 20),
            &format!("a discard at epoch {old}"),
        );
        stale(client.sync(&slice, old), &format!("a sync at epoch {old}"));
    }
    // A slice of a volume the node does not hold, and one on a medium that
    // is another node's: refused, at the current epoch too, nothing made.
    let no_volume = SliceName::new(medium, "no-such-volume", 0, 0);
    let not_its_medium = SliceName::new(other.media[0], &mirror.id, 1, 0);
    for name in [&no_volume, &not_its_medium] {
        let refused = |r: std::io::Result<()>, what: &str| {
            let e = r
                .err()
                .unwrap_or_else(|| panic!("{what} of {name:?} was applied"));
            assert_eq!(
                remote_error(&e).map(|r| r.status),
                Some(Status::Errno(libc::ENOENT as u16)),
                "{what} of {name:?}: {e}"
            );
        };
        refused(client.read(name, 0, &mut buf), "a read");
        refused(client.write(name, epoch, 0, &[0x99; 4096]), "a write");
        refused(client.sync(name, epoch), "a sync");
    }
    // (The node's own health check writes and removes a probe file there
    // now and then.)
    let made: Vec<PathBuf> = walk(&target.process.medium_dir(medium))
        .into_iter()
        .filter(|p| !p.ends_with(".svs-storage-node-probe"))
        .collect();
    assert!(
        made.iter()
            .all(|p| p.starts_with(target.process.medium_dir(medium).join(&mirror.id))),
        "{made:?}"
    );
    assert!(!target.process.medium_dir(other.media[0]).exists());
    assert!(!target
        .process
        .medium_dir(medium)
        .join("no-such-volume")
        .exists());
    drop(client);

    let after = (
        std::fs::metadata(&file).expect("slice file"),
        read_at(&file, 0, 1 << 20),
    );
    assert_eq!(before.0.len(), after.0.len());
    assert_eq!(
        before.0.modified().expect("mtime"),
        after.0.modified().expect("mtime")
    );
    assert!(before.1 == after.1, "the node's file changed");
    assert_eq!(mirror.node_epoch(target), epoch);
    assert_eq!(mirror.state().await, "Ready");
    let out = crate::harness::attach::qemu_io(&mirror.uri, &["read -P 0x11 0 8M".into()])
        .expect("the volume reads as before");
    assert!(!out.contains("Pattern verification failed"), "{out}");
}

/// Every file below `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}
