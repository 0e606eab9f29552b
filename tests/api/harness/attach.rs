//! Helpers of the `attach` tests, shared with other test files.

use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::process::Command;

/// Runs qemu-io on an NBD URI; Ok(output) when every command succeeded.
pub(crate) fn qemu_io(uri: &str, commands: &[String]) -> Result<String, String> {
    run_qemu_io(uri, commands, false)
}

/// The same, opening the export read-only (as a read-only attachment needs).
pub(crate) fn qemu_io_ro(uri: &str, commands: &[String]) -> Result<String, String> {
    run_qemu_io(uri, commands, true)
}

pub(crate) fn run_qemu_io(
    uri: &str,
    commands: &[String],
    readonly: bool,
) -> Result<String, String> {
    let mut cmd = Command::new("qemu-io");
    cmd.args(["-f", "raw"]);
    if readonly {
        cmd.arg("-r");
    }
    for c in commands {
        cmd.args(["-c", c]);
    }
    let out = cmd
        .arg(uri)
        .output()
        .map_err(|e| format!("qemu-io: {e} (install qemu-utils)"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let failed = !out.status.success()
        || text.contains("failed")
        || text.contains("Pattern verification")
        || text.contains("can't open");
    if failed {
        Err(text)
    } else {
        Ok(text)
    }
}

pub(crate) fn qemu_img(args: &[&str]) -> Result<String, String> {
    run_tool("qemu-img", args)
}

/// Runs a client tool (qemu-img, nbdcopy, ...): its stdout and stderr, Ok
/// when it succeeded.
pub(crate) fn run_tool(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e} (scripts/test.sh installs it)"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(text)
    }
}

/// Two media nodes and two client hosts: host-1 connects from 127.0.0.1,
/// host-2 from 127.0.0.2.
pub(crate) fn topology(rate: &str) -> TestConfig {
    TestConfig {
        nodes: vec![("host-1", "127.0.0.1"), ("host-2", "127.0.0.2")],
        ..movement_topology(rate)
    }
}

pub(crate) async fn attach(app: &TestApp, volume: &str, node: &str, readonly: bool) -> Value {
    let (status, body) = app
        .post(
            &format!("/volumes/{volume}/snapshots/top/attachments"),
            json!({"node": node, "readonly": readonly, "mountpoint": "/mnt/data"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "attach: {body}");
    assert_eq!(body["Message"], "Attachment creation started");
    let job = app.wait_job_of(&body).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(job["type"], "attachment_create");
    let (status, a) = app
        .get(&format!(
            "/volumes/{volume}/snapshots/top/attachments/{node}"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{a}");
    a
}

pub(crate) fn uri(a: &Value) -> String {
    a["uri"].as_str().unwrap_or_default().to_string()
}

/// Offsets that cross 1 MiB stripe boundaries and slice (column) boundaries.
pub(crate) fn offsets() -> Vec<u64> {
    vec![
        0,
        (1 << 20) - 4096,
        3 << 20,
        (7 << 20) + 512,
        (16 << 20) - 8192,
        100 << 20,
    ]
}

/// The mirrored volume of the resize tests (copy 1 on m2 must move to m3),
/// attached to host-1 and filled with 24 MiB through NBD. Its copies record
/// a checkpoint every MiB (and second).
pub(crate) async fn attached_mirror(rate: &str) -> (TestApp, String, String) {
    let mut config = topology(rate);
    config
        .settings
        .push("movement_checkpoint = \"1 MiB\"".into());
    let app = TestApp::start_with(config).await;
    app.create_policy("none", 0, 0, 0).await;
    app.create_policy("mirror", 1, 1, 0).await;
    app.create_volume("filler", 20, "none").await;
    let (id, _) = app.create_volume("data", 15, "mirror").await;
    let a = attach(&app, "data", "host-1", false).await;
    qemu_io(&uri(&a), &["write -P 0x5a 0 24M".into(), "flush".into()]).expect("prefill");
    let (_, body) = app.delete("/volumes/filler").await;
    app.wait_job_of(&body).await;
    (app, id, uri(&a))
}

/// qemu-io commands that write 4 KiB with distinct patterns at spread
/// offsets, `pause_ms` apart, so they span a throttled move.
pub(crate) fn spread_writes(count: u64, pause_ms: u64) -> (Vec<String>, Vec<(u64, u64)>) {
    let mut commands = Vec::new();
    let mut written = Vec::new();
    for i in 0..count {
        // Before and after the copy cursor, inside and outside the prefill.
        let off = (i * 7_919 * 4096) % (40 << 20);
        let p = 1 + (i % 250);
        commands.push(format!("write -P {p} {off} 4k"));
        commands.push(format!("sleep {pause_ms}"));
        written.push((off, p));
    }
    commands.push("flush".into());
    (commands, written)
}

/// The last pattern written at each offset.
pub(crate) fn expected(written: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut last = std::collections::BTreeMap::new();
    for (off, p) in written {
        last.insert(*off, *p);
    }
    last.into_iter().collect()
}

pub(crate) fn read_back_commands(expected: &[(u64, u64)]) -> Vec<String> {
    expected
        .iter()
        .map(|(off, p)| format!("read -P {p} {off} 4k"))
        .collect()
}
