//! Filesystem growths that fail, against the real `svs serve` and `svs
//! agent` (FUSE, loop devices, ext4 mounts): each failed resize ends at
//! once with the host's real error, even when it reads like the last one;
//! the volume and its attachment show the filesystem smaller than the
//! volume; `grow-filesystem` tries again; a resize after a detach reports
//! the size the filesystem really had.
//!
//! The agent runs without `CAP_SYS_RESOURCE` (dropped from its bounding
//! set before exec), so the kernel refuses online ext4 growth on any host.

use crate::harness::attach::topology;
use crate::harness::cli::Home;
use crate::harness::host_agent::{attachment, service_and_credential, wait_host};
use crate::harness::host_side::HostSide;
use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

/// `CAP_SYS_RESOURCE` (linux/capability.h): online ext4 growth needs it.
const CAP_SYS_RESOURCE: libc::c_ulong = 24;

/// Starts host-1's agent without `CAP_SYS_RESOURCE`.
fn start_agent_without_sys_resource(host: &mut HostSide, app: &TestApp) {
    let mut command = host.agent_command(app);
    // SAFETY: prctl(2) between fork and exec, touching no memory of the
    // parent; the dropped capability stays out of the exec'd agent.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_CAPBSET_DROP, CAP_SYS_RESOURCE, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    host.process = Some(command.spawn().expect("svs agent starts"));
}

/// Starts a job with POST `path` (no body) and waits for its end; the job
/// and how long it took.
async fn run_job(app: &TestApp, method: &str, path: &str, body: Value) -> (Value, Duration) {
    let start = Instant::now();
    let (status, started) = match method {
        "PATCH" => app.patch(path, body).await,
        "DELETE" => app.delete(path).await,
        _ => app.post(path, body).await,
    };
    assert_eq!(status, StatusCode::OK, "{method} {path}: {started}");
    let job = app.wait_job_of(&started).await;
    (job, start.elapsed())
}

/// Well under the service's agent wait (60 s): the job ended on a report,
/// not on the timeout.
const AT_ONCE: Duration = Duration::from_secs(25);

fn assert_refused_growth(job: &Value, took: Duration) {
    assert_eq!(job["state"], "Error", "{job}");
    let detail = last_detail(job);
    assert!(
        detail.starts_with("Could not grow the ext4 filesystem on node 'host-1': ")
            && detail.contains("Permission denied to resize filesystem"),
        "{job}"
    );
    assert!(took < AT_ONCE, "the job took {took:?}: {job}");
}

#[tokio::test]
async fn repeated_growth_failures_end_at_once_show_on_the_volume_and_can_be_retried() {
    let (app, mut host) = service_and_credential(&[
        json!({"name": "g", "type": "file", "size": 2, "policy": "mirror"}),
    ])
    .await;
    start_agent_without_sys_resource(&mut host, &app);
    let (status, body) = app
        .post(
            "/volumes/g/snapshots/top/attachments",
            json!({"node": "host-1"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_host(&app, &host, "g", |a| a["hoststate"] == "Mounted").await;
    let data = vec![7u8; 1 << 20];
    std::fs::write(host.mountpoint("g").join("kept"), &data).unwrap();
    // The agent says at start why ext4 will not grow.
    assert!(
        host.log().contains("lacks CAP_SYS_RESOURCE"),
        "{}",
        host.log()
    );

    // Two failing growths in a row: both end at once with the host's error
    // (the second report reads like the first but for the job it answers).
    let (job, took) = run_job(&app, "PATCH", "/volumes/g", json!({"size": 3})).await;
    assert_refused_growth(&job, took);
    let (job, took) = run_job(&app, "PATCH", "/volumes/g", json!({"size": 4})).await;
    assert_refused_growth(&job, took);

    // The volume and its attachment show the filesystem smaller than the
    // volume, and why.
    let (_, v) = app.get("/volumes/g").await;
    assert_eq!(
        (&v["size"], &v["filesystemsize"]),
        (&json!(4), &json!(2)),
        "{v}"
    );
    let why = v["filesystemerror"].as_str().unwrap_or_default();
    assert!(
        why.contains("Permission denied to resize filesystem"),
        "{v}"
    );
    let a = attachment(&app, "g").await;
    assert_eq!(
        (&a["volumesize"], &a["filesystemsize"]),
        (&json!(4), &json!(2)),
        "{a}"
    );
    assert!(
        a["growerror"]
            .as_str()
            .unwrap_or_default()
            .contains("Permission denied to resize filesystem"),
        "{a}"
    );

    // So does the CLI, with the way out.
    let home = Home::new(false);
    home.login(&app);
    let shown = home.ok(&["volume", "get", "g"]);
    assert!(
        shown.contains(
            "Filesystem  2 GiB, smaller than the volume's 4 GiB (its growth failed: Could not \
             grow the ext4 filesystem on node 'host-1': "
        ) && shown.contains(
            "Permission denied to resize filesystem); grow it with: svs volume grow-filesystem g"
        ),
        "{shown}"
    );
    assert!(
        shown.contains("host Mounted, filesystem 2 GiB of 4 GiB"),
        "{shown}"
    );
    let listed = home.ok(&["attachment", "list", "g"]);
    assert!(
        listed.contains("FS SIZE") && listed.contains(" 2 GiB "),
        "{listed}"
    );

    // A retry at the same size is a new request: the agent tries again at
    // once and the job ends with its error.
    let (job, took) = run_job(&app, "POST", "/volumes/g/grow-filesystem", json!({})).await;
    assert_eq!(job["type"], "volume_grow_filesystem", "{job}");
    assert_refused_growth(&job, took);

    // Detached, the next resize grows the filesystem here, from the size
    // it really had.
    let (job, _) = run_job(
        &app,
        "DELETE",
        "/volumes/g/snapshots/top/attachments/host-1",
        json!({}),
    )
    .await;
    assert_eq!(job["state"], "Done", "{job}\n{}", host.log());
    let (job, _) = run_job(&app, "PATCH", "/volumes/g", json!({"size": 5})).await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(
        last_detail(&job),
        "Volume 'g' resized from 4 GiB to 5 GiB in place; Filesystem grown from 2 GiB to 5 GiB"
    );
    let (_, v) = app.get("/volumes/g").await;
    assert_eq!(v["filesystemsize"], 5, "{v}");
    assert!(v.get("filesystemerror").is_none(), "{v}");
    let out = home.ok(&["volume", "grow-filesystem", "g", "--wait"]);
    assert!(out.starts_with("Filesystem growth started: job "), "{out}");
    let shown = home.ok(&["volume", "get", "g"]);
    assert!(
        shown.contains("Filesystem  fills the volume (5 GiB)"),
        "{shown}"
    );
    let (_, jobs) = app.get("/jobs?type=volume_grow_filesystem").await;
    let job = jobs
        .as_array()
        .and_then(|j| j.iter().find(|j| j["state"] == "Done"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        last_detail(&job),
        "Volume 'g': Filesystem ext4 already fills 5 GiB",
        "{jobs}"
    );
    let left = host.leftovers();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test]
async fn only_a_filesystem_svs_made_can_be_grown_again() {
    let app = TestApp::start_with(topology("0")).await;
    app.create_policy("mirror", 1, 1, 0).await;
    app.create_volume_done(json!({"name": "b", "type": "block", "size": 1, "policy": "mirror"}))
        .await;
    let (status, body) = app.post("/volumes/b/grow-filesystem", json!({})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body,
        json!({"message": "volume 'b' has no filesystem made by svs to grow"})
    );
    let home = Home::new(false);
    home.login(&app);
    home.fails(
        &["volume", "grow-filesystem", "b"],
        "volume 'b' has no filesystem made by svs to grow",
    );
    let (status, body) = app.post("/volumes/nope/grow-filesystem", json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (_, v) = app.get("/volumes/b").await;
    assert!(v.get("filesystemsize").is_none(), "{v}");
}
