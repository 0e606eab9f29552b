//! The README's quick start, run as written: every fenced `sh` block of
//! README.md, then every `sh run` block of the pages in `DOCS` (in that
//! order), concatenated into one bash script (`set -euo pipefail`) and run
//! against a fresh `svs serve` on the demo topology, on a random port with a
//! temporary data directory. The blocks find the service through `SVS`
//! (`SVS=${SVS:-http://127.0.0.1:8080}` in the README) and the CLI on `PATH`
//! (this build's `svs`). Blocks that cannot run here (starting the service,
//! root, systemd, Kubernetes, a second host) are fenced `sh no-run`; the
//! README may use no other shell fence, so nothing escapes the test by
//! spelling (`bash`, `shell`, `console`).
//!
//! Client tools the blocks use: curl, jq and qemu-io (scripts/test.sh
//! installs jq and qemu-utils when missing).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Docs pages whose `sh run` blocks continue the quick start, in order.
const DOCS: &[&str] = &["docs/cli.md"];

/// The whole script's time limit (it takes seconds on the demo).
const TIMEOUT: Duration = Duration::from_secs(300);

const ADMIN_EMAIL: &str = "admin@example.com";
const ADMIN_PASSWORD: &str = "change-me-now";

/// One fenced code block: where it starts (1-based line of the fence), its
/// info string and its text.
#[derive(Debug)]
struct Block {
    line: usize,
    info: String,
    text: String,
}

fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (n, line) in markdown.lines().enumerate() {
        let fence = line.trim_start();
        match open.take() {
            None => {
                if let Some(info) = fence.strip_prefix("```") {
                    open = Some(Block {
                        line: n + 1,
                        info: info.trim().to_string(),
                        text: String::new(),
                    });
                }
            }
            Some(mut block) => {
                if fence.starts_with("```") {
                    out.push(block);
                } else {
                    block.text.push_str(line);
                    block.text.push('\n');
                    open = Some(block);
                }
            }
        }
    }
    assert!(open.is_none(), "a code block is never closed");
    out
}

fn is_shell(info: &str) -> bool {
    let lang = info.split_whitespace().next().unwrap_or("");
    matches!(lang, "sh" | "bash" | "shell" | "console" | "zsh")
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The script: the README's `sh` blocks, then the docs' `sh run` blocks,
/// each announced by a line naming where it comes from.
fn script() -> String {
    let mut script = String::new();
    let mut add = |file: &str, block: &Block| {
        script.push_str(&format!(
            "echo '=== {file}:{} ==='\n{}\n",
            block.line, block.text
        ));
    };
    let readme = read("README.md");
    let mut runnable = 0;
    for block in blocks(&readme) {
        if !is_shell(&block.info) {
            continue;
        }
        match block.info.as_str() {
            "sh" => {
                add("README.md", &block);
                runnable += 1;
            }
            "sh no-run" => {}
            other => panic!(
                "README.md:{}: a shell block is fenced `{other}`; use `sh` (run by this test) \
                 or `sh no-run` (cannot run here)",
                block.line
            ),
        }
    }
    assert!(
        runnable >= 5,
        "README.md has only {runnable} runnable blocks"
    );
    for doc in DOCS {
        let text = read(doc);
        let mut found = false;
        for block in blocks(&text).iter().filter(|b| b.info == "sh run") {
            add(doc, block);
            found = true;
        }
        assert!(found, "{doc} has no `sh run` block; remove it from DOCS");
    }
    script
}

/// `svs serve` on the demo topology, killed on drop.
struct Service {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
    log: PathBuf,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_service() -> Service {
    let dir = tempfile::tempdir().expect("temporary directory");
    let log = dir.path().join("svs.log");
    let log_file = std::fs::File::create(&log).expect("log file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_svs"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .env("SVS_ADMIN_EMAIL", ADMIN_EMAIL)
        .env("SVS_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .env("SVS_NBD_LISTEN", "127.0.0.1:0")
        .env("SVS_LOG", "info,tower_http=warn")
        .env_remove("SVS_CONFIG")
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(log_file)
        .spawn()
        .expect("svs serve starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout);
    let mut http = String::new();
    let _ = lines.read_line(&mut http);
    let Some(base) = http.trim().strip_prefix("svs listening on ") else {
        let _ = child.kill();
        panic!(
            "svs serve did not start: {http:?}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    };
    let base = base.to_string();
    // Keep reading stdout so the service never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = lines.read_to_end(&mut sink);
    });
    Service {
        child,
        base,
        _dir: dir,
        log,
    }
}

fn require_tools() {
    for tool in ["bash", "curl", "jq", "qemu-io"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            found,
            "the README's blocks need `{tool}` (scripts/test.sh installs curl, jq and qemu-utils)"
        );
    }
}

/// Runs the script with bash, in a directory of its own, as a user with
/// no CLI profile yet; returns (success, stdout, stderr).
fn run(script: &str, service: &Service) -> (bool, String, String) {
    let work = tempfile::tempdir().expect("temporary directory");
    let path = work.path().join("readme.sh");
    std::fs::write(&path, script).expect("script written");
    run_bash(
        &path,
        work.path(),
        &[("SVS", service.base.clone())],
        TIMEOUT,
    )
}

/// Runs the bash script `path` (`set -euo pipefail`) in `home` (also its
/// HOME, with no CLI profile yet), this build's `svs` first on PATH, with
/// `env` set, killed after `timeout`; returns (success, stdout, stderr).
fn run_bash(
    path: &Path,
    home: &Path,
    env: &[(&str, String)],
    timeout: Duration,
) -> (bool, String, String) {
    let bin = Path::new(env!("CARGO_BIN_EXE_svs"))
        .parent()
        .expect("the binary's directory");
    let path_var = std::env::join_paths(
        std::iter::once(bin.to_path_buf()).chain(
            std::env::var_os("PATH")
                .iter()
                .flat_map(std::env::split_paths),
        ),
    )
    .expect("PATH");
    let mut child = Command::new("bash")
        .args(["-euo", "pipefail"])
        .arg(path)
        .current_dir(home)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("PATH", path_var)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env_remove("SVS_PROFILE")
        .env_remove("SVS_URL")
        .env_remove("SVS_CA_CERT")
        .env_remove("SVS_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bash runs");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for bash") {
            break Some(status);
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    (status.is_some_and(|s| s.success()), stdout, stderr)
}

#[test]
fn the_quick_start_runs_top_to_bottom_on_a_fresh_demo() {
    require_tools();
    let script = script();
    let service = start_service();
    let (ok, stdout, stderr) = run(&script, &service);
    let report = format!(
        "--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- svs serve log\n{}",
        std::fs::read_to_string(&service.log).unwrap_or_default()
    );
    assert!(
        ok,
        "the quick start failed (the last === line is the block)\n{report}"
    );
    for expected in [
        // Step 3: the volume is made and grows in place.
        "Volume creation started",
        // Step 5: without data movement the resize fails, with it a slice moves.
        "GetModificationPlan: Could not find an in-place modification plan",
        "GetMovementModificationPlan: Found movement plan. Data Movement is enabled. \
         The operation is now being attempted",
        r#"{"copy":0,"column":0,"media":"node-c-m1","node":"node-c","size":40}"#,
        // Step 6: the CLI follows the job the resize printed.
        "Volume resize started: job ",
    ] {
        assert!(
            stdout.contains(expected) || stderr.contains(expected),
            "the quick start's output lacks {expected:?}\n{report}"
        );
    }
    // The data written in step 4 read back after the move (qemu-io checks
    // the pattern).
    assert_eq!(
        stdout.matches("read 1048576/1048576 bytes").count(),
        2,
        "{report}"
    );
    assert!(!stdout.contains("Pattern verification failed"), "{report}");
}

#[test]
fn readme_shell_blocks_are_fenced_sh_or_sh_no_run() {
    // script() panics on any other shell fence; the docs' runnable blocks
    // are collected too.
    let script = script();
    assert!(script.contains("SVS=${SVS:-http://127.0.0.1:8080}"));
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces
/// to dashes.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown file's headings (outside code blocks).
fn anchors(markdown: &str) -> Vec<String> {
    let mut fence = false;
    let mut out = Vec::new();
    for line in markdown.lines() {
        if line.starts_with("```") {
            fence = !fence;
        } else if !fence && line.starts_with('#') {
            out.push(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn links_between_the_readme_and_the_docs_pages_resolve() {
    let mut files = vec![root().join("README.md")];
    let docs = std::fs::read_dir(root().join("docs")).expect("docs/");
    files.extend(
        docs.flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "md")),
    );
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("markdown");
        let dir = file.parent().expect("a directory");
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let link = &rest[..end];
            if link.contains("://") || link.contains(' ') {
                continue;
            }
            let (path, fragment) = link.split_once('#').unwrap_or((link, ""));
            let target = if path.is_empty() {
                file.clone()
            } else {
                dir.join(path)
            };
            let Ok(target_text) = std::fs::read_to_string(&target) else {
                if !target.exists() {
                    broken.push(format!("{}: {link} (no such file)", file.display()));
                }
                continue;
            };
            if !fragment.is_empty()
                && target.extension().is_some_and(|e| e == "md")
                && !anchors(&target_text).iter().any(|a| a == fragment)
            {
                broken.push(format!("{}: {link} (no such heading)", file.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The docs page whose multi-host walk-through runs as written.
const WALK_THROUGH: &str = "docs/storage-nodes.md";

/// The walk-through's time limit (two 15 s waits for a node to go
/// Offline, a resync and a rebuild: about a minute).
const WALK_THROUGH_TIMEOUT: Duration = Duration::from_secs(300);

/// What the walk-through's text has the reader do, in order.
#[derive(Debug)]
enum Step {
    /// A block of the main terminal (`sh`).
    Main(Block),
    /// A block another terminal runs (`sh terminal=N`): a process that
    /// keeps running (the service, a storage node).
    Terminal(u32, Block),
    /// "Ctrl+C in terminal N" (`<!-- walk-through: stop terminal N -->`).
    Stop(u32),
}

/// The steps of the section `## Walk-through…` of `markdown`. Every shell
/// block there must run: `sh` or `sh terminal=N`, nothing left out.
fn walk_through(markdown: &str) -> Vec<Step> {
    let lines: Vec<&str> = markdown.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("## Walk-through"))
        .expect("a ## Walk-through section");
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.starts_with("## "))
        .map_or(lines.len(), |i| start + 1 + i);
    // (line, step) of the directives, then of the blocks, merged by line.
    let mut steps: Vec<(usize, Step)> = Vec::new();
    for (i, line) in lines.iter().enumerate().take(end).skip(start) {
        if let Some(rest) = line
            .trim()
            .strip_prefix("<!-- walk-through: stop terminal ")
        {
            let n = rest.trim_end_matches("-->").trim();
            steps.push((i + 1, Step::Stop(n.parse().expect("a terminal number"))));
        }
    }
    for block in blocks(markdown) {
        if block.line <= start || block.line > end || !is_shell(&block.info) {
            continue;
        }
        let line = block.line;
        let step = match block.info.strip_prefix("sh terminal=") {
            Some(n) => Step::Terminal(n.parse().expect("a terminal number"), block),
            None if block.info == "sh" => Step::Main(block),
            None => panic!(
                "{WALK_THROUGH}:{line}: the walk-through's shell blocks run in CI: fence them \
                 `sh` (the main terminal) or `sh terminal=N` (another terminal), not `{}`",
                block.info
            ),
        };
        steps.push((line, step));
    }
    steps.sort_by_key(|(line, _)| *line);
    steps.into_iter().map(|(_, step)| step).collect()
}

/// The walk-through as one bash script: the main terminal's blocks in
/// order, the other terminals' blocks written to files in `dir` and started
/// there in a session of their own (so Ctrl+C reaches the process group),
/// each awaited until it says it is up.
fn walk_through_script(dir: &Path) -> String {
    let mut script = String::from(
        r#"start_terminal() {  # N FILE READY-LINE
  local log="$TERMINALS/terminal-$1.log"
  echo "--- terminal $1: $(tail -n 1 "$2")" >>"$log"
  setsid bash -euo pipefail "$2" >>"$log" 2>&1 </dev/null &
  echo $! >"$TERMINALS/terminal-$1.pid"
  for _ in $(seq 600); do
    grep -q "$3" "$log" && return 0
    kill -0 $! 2>/dev/null || { echo "terminal $1 exited:"; cat "$log"; return 1; }
    sleep 0.1
  done
  echo "terminal $1 never said '$3':"; cat "$log"; return 1
}
stop_terminal() {  # N: Ctrl+C, then wait for it to end
  local pid; pid=$(cat "$TERMINALS/terminal-$1.pid")
  kill -INT -- -"$pid"
  for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  echo "terminal $1 did not stop on Ctrl+C"; return 1
}
"#,
    );
    for (i, step) in walk_through(&read(WALK_THROUGH)).into_iter().enumerate() {
        match step {
            Step::Main(block) => script.push_str(&format!(
                "echo '=== {WALK_THROUGH}:{} ==='\n{}\n",
                block.line, block.text
            )),
            Step::Terminal(n, block) => {
                let file = dir.join(format!("step-{i}-terminal-{n}.sh"));
                std::fs::write(&file, &block.text).expect("terminal script written");
                let (env, ready) = if block.text.contains("svs serve") {
                    // Where this test's service listens (SVS), not 8080.
                    (
                        "SVS_LISTEN=${SVS#http://} SVS_NBD_LISTEN=$SVS_NBD ",
                        "svs listening on",
                    )
                } else if block.text.contains("svs storage-node") {
                    ("", "slice server started")
                } else {
                    panic!("{WALK_THROUGH}:{}: what does terminal {n} run?", block.line)
                };
                script.push_str(&format!(
                    "echo '=== {WALK_THROUGH}:{} (terminal {n}) ==='\n{env}start_terminal {n} {} '{ready}'\n",
                    block.line,
                    file.display()
                ));
            }
            Step::Stop(n) => script.push_str(&format!(
                "echo '=== Ctrl+C in terminal {n} ==='\nstop_terminal {n}\n"
            )),
        }
    }
    script
}

/// Kills what the walk-through's terminals still run, whatever happened.
struct Terminals(PathBuf);

impl Drop for Terminals {
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir(&self.0) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if !name.to_string_lossy().ends_with(".pid") {
                continue;
            }
            if let Ok(pid) = std::fs::read_to_string(entry.path()) {
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{}", pid.trim())])
                    .status();
            }
        }
    }
}

/// The terminals' logs, for a failure report.
fn terminal_logs(dir: &Path) -> String {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    logs.retain(|p| p.extension().is_some_and(|e| e == "log"));
    logs.sort();
    logs.iter()
        .map(|p| {
            format!(
                "--- {}\n{}",
                p.display(),
                std::fs::read_to_string(p).unwrap_or_default()
            )
        })
        .collect()
}

fn free_local_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[test]
fn the_storage_node_walk_through_runs_as_written_with_its_terminals() {
    require_tools();
    let home = tempfile::tempdir().expect("temporary directory");
    let terminals = home.path().join("terminals");
    std::fs::create_dir(&terminals).expect("terminals directory");
    let _guard = Terminals(terminals.clone());
    let script = walk_through_script(&terminals);
    let path = terminals.join("walk-through.sh");
    std::fs::write(&path, &script).expect("script written");
    let env = [
        ("SVS", format!("http://127.0.0.1:{}", free_local_port())),
        ("SVS_NBD", format!("127.0.0.1:{}", free_local_port())),
        ("TERMINALS", terminals.display().to_string()),
    ];
    let (ok, stdout, stderr) = run_bash(&path, home.path(), &env, WALK_THROUGH_TIMEOUT);
    let report = format!(
        "--- stdout\n{stdout}\n--- stderr\n{stderr}\n{}",
        terminal_logs(&terminals)
    );
    assert!(
        ok,
        "the walk-through failed (the last === line is the step)\n{report}"
    );
    for expected in [
        // Step 6: the copy that missed a write is resynced in place.
        "Resynced slice c1-k0 on sn2-d0 in place",
        // Step 7: the recovery rebuilds the lost copy on the third node.
        "sn3-d0",
    ] {
        assert!(
            stdout.contains(expected),
            "the walk-through's output lacks {expected:?}\n{report}"
        );
    }
    // Every read of step 5, 6 and 7 checked its pattern.
    assert_eq!(
        stdout.matches("read 4194304/4194304 bytes").count(),
        2,
        "{report}"
    );
    assert_eq!(
        stdout.matches("read 1048576/1048576 bytes").count(),
        3,
        "{report}"
    );
    assert_eq!(
        stdout.matches("read 2097152/2097152 bytes").count(),
        1,
        "{report}"
    );
    assert!(!stdout.contains("Pattern verification failed"), "{report}");
}
