//! Draining a medium (`PATCH /media/{m}` `{"state": "Draining"}`) and
//! rebalancing media (`POST /media/rebalance`): one job moving slices of
//! many volumes with the data mover, under live writers, steerable and
//! cancellable like any data movement.

use crate::harness::attach::{attach, expected, qemu_io, read_back_commands, spread_writes, uri};
use crate::harness::cancel::wait_until;
use crate::harness::drain::*;
use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// The volumes with a slice on `medium`, by name.
async fn volumes_on(app: &TestApp, names: &[String], medium: &str) -> Vec<String> {
    let mut on = Vec::new();
    for name in names {
        let slices = app.slices(name).await;
        if slices.iter().any(|s| s["media"] == medium) {
            on.push(name.clone());
        }
    }
    on
}

/// The slice files of `volume_id` in a medium's directory.
fn slice_files_of(app: &TestApp, medium: &str, volume_id: &str) -> Vec<String> {
    std::fs::read_dir(app.medium_dir(medium).join(volume_id))
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".slice"))
                .collect()
        })
        .unwrap_or_default()
}

/// Drains `medium`: the job's id.
async fn drain(app: &TestApp, medium: &str) -> String {
    let (status, body) = app
        .patch(&format!("/media/{medium}"), json!({"state": "Draining"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let job = body["JobID"].as_str().expect("job id").to_string();
    assert_eq!(
        body["Message"],
        format!("Medium '{medium}' is draining: follow job {job} with GET /jobs/{job}")
    );
    assert_eq!(body["ObjectID"], medium);
    job
}

#[tokio::test]
async fn a_drain_of_a_medium_holding_ten_volumes_under_live_writers_empties_it_and_keeps_every_write(
) {
    let app = TestApp::start_with(moving_config(
        vec![
            medium("m1", "n1", "z1", 200),
            medium("m2", "n2", "z2", 60),
            medium("m3", "n3", "z3", 60),
            medium("m4", "n4", "z4", 60),
        ],
        "8 MiB",
    ))
    .await;
    app.create_policy("mirror", 1, 1, 0).await;
    let names: Vec<String> = (0..10).map(|i| format!("v{i}")).collect();
    let mut ids = Vec::new();
    for name in &names {
        let (id, job) = app.create_volume(name, 2, "mirror").await;
        assert_eq!(job["state"], "Done", "{job}");
        ids.push(id);
    }
    // m1, the most free, holds a copy of every volume.
    assert_eq!(volumes_on(&app, &names, "m1").await, names);

    let mut uris = Vec::new();
    for name in &names {
        let a = attach(&app, name, "host-1", false).await;
        qemu_io(&uri(&a), &["write -P 0x5a 64M 4M".into(), "flush".into()]).expect("prefill");
        uris.push(uri(&a));
    }
    let (commands, written) = spread_writes(30, 60);
    let writers: Vec<_> = uris
        .iter()
        .map(|u| {
            let (u, commands) = (u.clone(), commands.clone());
            std::thread::spawn(move || qemu_io(&u, &commands))
        })
        .collect();

    let job = drain(&app, "m1").await;
    let (_, m1) = app.get("/media/m1").await;
    assert_eq!(m1["status"], "Draining", "{m1}");
    // Nothing new lands on a draining medium.
    let (late, _) = app.create_volume("late", 2, "mirror").await;
    assert!(
        app.slices(&late).await.iter().all(|s| s["media"] != "m1"),
        "a new volume went on the draining medium"
    );

    let done = app.wait_job(&job).await;
    assert_eq!(done["state"], "Done", "{done}");
    assert_eq!(done["type"], "media_drain");
    assert_eq!(
        last_detail(&done),
        "Medium 'm1' drained: 10 slice(s) moved off it (20 GiB); it takes no new slice until it is set Ready"
    );
    let slices = done["slices"].as_array().cloned().unwrap_or_default();
    assert_eq!(slices.len(), 10, "{done}");
    assert!(slices.iter().all(|s| s["outcome"] == "moved"), "{done}");

    for w in writers {
        w.join()
            .expect("writer thread")
            .expect("every write acknowledged");
    }
    // Empty: no slice recorded on it, no slice file left in it.
    assert!(volumes_on(&app, &names, "m1").await.is_empty());
    let (_, m1) = app.get("/media/m1").await;
    assert_eq!(m1["volumescount"], 0, "{m1}");
    for id in &ids {
        assert!(
            slice_files_of(&app, "m1", id).is_empty(),
            "files of {id} left on m1"
        );
    }
    // Every acknowledged write reads back, the prefill too.
    let want = expected(&written);
    for u in &uris {
        qemu_io(u, &read_back_commands(&want)).expect("writes kept");
        qemu_io(u, &["read -P 0x5a 64M 4M".into()]).expect("prefill kept");
    }
    // Back in service once set Ready.
    let (status, body) = app.patch("/media/m1", json!({"state": "Ready"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "Ready", "{body}");
}

/// Two mirrored volumes "a" and "b" with a copy on m1 and 24 MiB written,
/// moving at `rate`; with their attachments' URIs.
async fn two_volumes_on_m1(rate: &str) -> (TestApp, Vec<String>) {
    let app = TestApp::start_with(moving_config(
        vec![
            medium("m1", "n1", "z1", 40),
            medium("m2", "n2", "z2", 20),
            medium("m3", "n3", "z3", 20),
        ],
        rate,
    ))
    .await;
    app.create_policy("mirror", 1, 1, 0).await;
    let mut uris = Vec::new();
    for name in ["a", "b"] {
        let (_, job) = app.create_volume(name, 4, "mirror").await;
        assert_eq!(job["state"], "Done", "{job}");
        let a = attach(&app, name, "host-1", false).await;
        qemu_io(&uri(&a), &["write -P 0x33 0 24M".into(), "flush".into()]).expect("prefill");
        uris.push(uri(&a));
    }
    (app, uris)
}

#[tokio::test]
async fn a_drain_plans_dry_blocks_steers_and_cancels_like_a_data_movement() {
    let (app, uris) = two_volumes_on_m1("4 MiB").await;
    let names = vec!["a".to_string(), "b".to_string()];
    assert_eq!(volumes_on(&app, &names, "m1").await, names);

    // The dry run names each move and changes nothing.
    let (status, plan) = app
        .patch("/media/m1?dryrun=true", json!({"state": "Draining"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{plan}");
    assert_eq!(plan["dryrun"], true);
    assert_eq!(plan["scope"], "medium 'm1'");
    let moves = plan["moves"].as_array().cloned().unwrap_or_default();
    assert_eq!(moves.len(), 2, "{plan}");
    assert!(
        moves.iter().all(|m| m["from"] == "m1" && m["size"] == 4),
        "{plan}"
    );
    assert_eq!(plan["gib"], 8);
    assert_eq!(plan["estimatedseconds"], 8 * 1024 / 4, "{plan}");
    let (_, m1) = app.get("/media/m1").await;
    assert_eq!(m1["status"], "Ready", "a dry run changed the medium: {m1}");

    let job = drain(&app, "m1").await;
    wait_until(&app, &job, "copying", crate::harness::cancel::copying).await;
    // Asked again: the same job.
    let (status, again) = app.patch("/media/m1", json!({"state": "Draining"})).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["JobID"], job.as_str());
    assert_eq!(
        again["Message"],
        format!("Medium 'm1' is already draining under job {job}")
    );
    // Ready is refused while the drain runs.
    let (status, body) = app.patch("/media/m1", json!({"state": "Ready"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body["message"],
        format!(
            "medium 'm1' is being drained by job {job}; cancel it first with DELETE /jobs/{job}"
        )
    );
    // The volume being moved refuses the nine blocked operations, naming
    // the drain's job.
    let (_, running) = app.get(&format!("/jobs/{job}")).await;
    let moving = if running["status"]
        .as_str()
        .unwrap_or_default()
        .contains("of volume 'a'")
    {
        "a"
    } else {
        "b"
    };
    let (status, body) = app
        .post(
            &format!("/volumes/{moving}/snapshots"),
            json!({"name": "s1", "consistency": "crash"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let refusal = body["message"].as_str().unwrap_or_default();
    assert!(
        refusal.starts_with(&format!(
            "snapshot create is not allowed on volume '{moving}' while data movement job {job} is in progress"
        )),
        "{refusal}"
    );

    // Paused and resumed as any data movement.
    let (status, paused) = app
        .patch(&format!("/jobs/{job}"), json!({"paused": true}))
        .await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert_eq!(paused["paused"], true);
    let (status, _) = app
        .patch(&format!("/jobs/{job}"), json!({"paused": false}))
        .await;
    assert_eq!(status, StatusCode::OK);

    // Cancelled: the copy in progress stops, its partial copy goes.
    let (status, body) = app.delete(&format!("/jobs/{job}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let ended = app.wait_job(&job).await;
    assert_eq!(ended["state"], "Error", "{ended}");
    assert_eq!(ended["status"], "Cancelled", "{ended}");
    assert!(
        last_detail(&ended).starts_with("Cancelled: "),
        "{}",
        last_detail(&ended)
    );
    // Each volume whole: a slice not moved stays on m1 with no copy
    // elsewhere; what moved stays moved; the data reads back.
    for (name, u) in ["a", "b"].into_iter().zip(&uris) {
        let slices = app.slices(name).await;
        let (_, volume) = app.get(&format!("/volumes/{name}")).await;
        let id = volume["volumeid"].as_str().unwrap_or_default().to_string();
        let media: Vec<&str> = slices.iter().filter_map(|s| s["media"].as_str()).collect();
        for m in ["m1", "m2", "m3"] {
            let files = slice_files_of(&app, m, &id);
            assert_eq!(
                files.len(),
                usize::from(media.contains(&m)),
                "volume {name} on {media:?}: files {files:?} on {m}"
            );
        }
        qemu_io(u, &["read -P 0x33 0 24M".into()]).expect("the data reads back");
    }
    // The medium takes slices again once set Ready.
    let (status, body) = app.patch("/media/m1", json!({"state": "Ready"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "Ready");
}

#[tokio::test]
async fn draining_refuses_bad_input_and_failed_media() {
    let app = TestApp::start_with(movement_topology("0")).await;
    let (status, body) = app.patch("/media/m9", json!({"state": "Draining"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, body) = app.patch("/media/m1", json!({"state": "Gone"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        body["message"],
        "state must be \"Failed\", \"Draining\" or \"Ready\" (a failed medium does not come back)"
    );
    let (status, body) = app
        .patch("/media/m1?dryrun=true", json!({"size": 30}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // An empty medium drains at once.
    let job = drain(&app, "m3").await;
    let done = app.wait_job(&job).await;
    assert_eq!(done["state"], "Done", "{done}");
    assert_eq!(
        last_detail(&done),
        "Medium 'm3' holds no slice; it takes no new slice until it is set Ready"
    );
    let (status, _) = app.patch("/media/m2", json!({"state": "Failed"})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = app.patch("/media/m2", json!({"state": "Draining"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body["message"],
        "medium 'm2' has failed; it holds nothing to drain"
    );
    // Rebalance input.
    let (status, body) = app
        .post("/media/rebalance", json!({"node": "n1", "zone": "z1"}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["message"], "give node or zone, not both");
    let (status, body) = app.post("/media/rebalance", json!({"node": "n9"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["message"], "node 'n9' has no media");
    let (status, body) = app.post("/media/rebalance", json!({"size": 1})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test]
async fn a_rebalance_evens_a_node_s_media_moving_the_fewest_slices() {
    let app = TestApp::start_with(TestConfig {
        media: vec![medium("m1", "n1", "z1", 100)],
        ..TestConfig::default()
    })
    .await;
    app.create_policy("none", 0, 0, 0).await;
    let mut ids = Vec::new();
    for i in 0..4 {
        let (id, job) = app.create_volume(&format!("v{i}"), 10, "none").await;
        assert_eq!(job["state"], "Done", "{job}");
        ids.push(id);
    }
    // Each volume's data, written into its slice file.
    for (i, id) in ids.iter().enumerate() {
        write_at(
            &app.slice_path("m1", id, 0, 0),
            1 << 20,
            &pattern(i as u64, 1 << 20),
        );
    }
    let dir = app.dir.path().join("media").join("m2");
    let (status, body) = app
        .post(
            "/media",
            json!({"mediaid": "m2", "node": "n1", "zone": "z1", "media": dir.display().to_string(), "size": 100}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    let (status, plan) = app
        .post("/media/rebalance?dryrun=true", json!({"node": "n1"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{plan}");
    assert_eq!(plan["scope"], "the media of node 'n1'");
    assert_eq!(plan["moves"].as_array().map(Vec::len), Some(2), "{plan}");
    assert_eq!(plan["gib"], 20);
    let after: Vec<(Value, Value)> = plan["media"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|m| (m["mediaid"].clone(), m["usedafter"].clone()))
        .collect();
    assert_eq!(
        after,
        vec![(json!("m1"), json!(20)), (json!("m2"), json!(20))]
    );

    let (status, started) = app.post("/media/rebalance", json!({"node": "n1"})).await;
    assert_eq!(status, StatusCode::OK, "{started}");
    assert_eq!(started["ObjectID"], "node:n1");
    let job = started["JobID"].as_str().expect("job").to_string();
    let done = app.wait_job(&job).await;
    assert_eq!(done["state"], "Done", "{done}");
    assert_eq!(
        last_detail(&done),
        "The media of node 'n1' rebalanced: 2 slice(s) moved (20 GiB)"
    );
    assert_eq!(app.free("m1").await, 80);
    assert_eq!(app.free("m2").await, 80);
    // Every volume's data where its slice is now.
    for (i, id) in ids.iter().enumerate() {
        let slices = app.slices(&format!("v{i}")).await;
        let on = slices[0]["media"].as_str().expect("medium").to_string();
        let data = read_at(&app.slice_path(&on, id, 0, 0), 1 << 20, 1 << 20);
        assert!(
            data == pattern(i as u64, 1 << 20),
            "v{i} on {on} lost its data"
        );
    }
    // Even now: a second rebalance has nothing to move.
    let (_, again) = app.post("/media/rebalance", json!({"node": "n1"})).await;
    let again = app.wait_job(again["JobID"].as_str().expect("job")).await;
    assert_eq!(again["state"], "Done", "{again}");
    assert_eq!(
        last_detail(&again),
        "The media of node 'n1' are as even as moving whole slices makes them; nothing to move"
    );
}

#[tokio::test]
async fn the_cli_plans_drains_readies_and_rebalances_media() {
    let app = TestApp::start_with(movement_topology("0")).await;
    app.create_policy("none", 0, 0, 0).await;
    let (_, job) = app.create_volume("v", 2, "none").await;
    assert_eq!(job["state"], "Done", "{job}");
    assert_eq!(app.slices("v").await[0]["media"], "m3", "the most free");
    let home = crate::harness::cli::Home::new(true);
    home.login(&app);

    let plan = home.ok(&["media", "drain", "m3", "--dry-run"]);
    assert!(
        plan.starts_with("Plan for medium 'm3': 1 slice(s) move (2 GiB at most)\n  c0-k0 of volume 'v'  m3 -> m1  2 GiB\n"),
        "{plan}"
    );
    let json = home.json(&["media", "drain", "m3", "--dry-run"]);
    assert_eq!(json["moves"][0]["to"], "m1", "{json}");
    home.ok(&["media", "drain", "m3", "--wait"]);
    assert_eq!(app.slices("v").await[0]["media"], "m1");
    let m3 = home.json(&["media", "ready", "m3"]);
    assert_eq!(m3["status"], "Ready", "{m3}");
    let plan = home.ok(&["media", "rebalance", "--dry-run"]);
    assert!(plan.starts_with("Plan for every medium: "), "{plan}");
    let out = home.run(&["media", "rebalance", "--node", "n1", "--zone", "z1"]);
    assert!(!out.status.success(), "node and zone together are refused");
}

/// A tmpfs of its own mounted on a medium's directory for the test's life:
/// unmounted (lazily, as svs may still hold files in it) when the test
/// ends, failed or not.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &std::path::Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).expect("medium directory");
        let status = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size}"),
                "svs-test-drain",
            ])
            .arg(dir)
            .status()
            .expect("mount runs");
        assert!(status.success(), "mount tmpfs on {}", dir.display());
        Tmpfs(dir.to_path_buf())
    }

    fn resize(&self, size: &str) {
        let status = std::process::Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .expect("mount runs");
        assert!(status.success(), "remount {}", self.0.display());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[tokio::test]
async fn a_drain_whose_target_fills_up_reports_the_slice_and_converges_once_there_is_room() {
    let mut app = TestApp::configured(TestConfig {
        media: vec![
            medium("m1", "n1", "z1", 40),
            medium("m2", "n2", "z2", 28),
            medium("m3", "n3", "z3", 30),
        ],
        ..TestConfig::default()
    });
    // m3 says 30 GiB, but its filesystem holds 8 MiB.
    let small = Tmpfs::mount(&app.medium_dir("m3"), "8M");
    app.launch().expect("svs serve starts");
    let tokens = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    app.token = tokens["IdToken"].as_str().expect("IdToken").to_string();
    app.create_policy("none", 0, 0, 0).await;
    let mut ids = Vec::new();
    for (i, name) in ["a", "b"].into_iter().enumerate() {
        let (id, job) = app.create_volume(name, 4, "none").await;
        assert_eq!(job["state"], "Done", "{job}");
        assert_eq!(app.slices(name).await[0]["media"], "m1");
        for mib in 0..24u64 {
            let seed = (i as u64) << 8 | mib;
            write_at(
                &app.slice_path("m1", &id, 0, 0),
                mib << 20,
                &pattern(seed, 1 << 20),
            );
        }
        ids.push(id);
    }

    // One slice goes to m3 (the most free), the other to m2.
    let job = drain(&app, "m1").await;
    let ended = app.wait_job(&job).await;
    assert_eq!(ended["state"], "Error", "{ended}");
    let slices = ended["slices"].as_array().cloned().unwrap_or_default();
    assert_eq!(slices.len(), 2, "{ended}");
    let failed: Vec<&Value> = slices.iter().filter(|s| s["outcome"] == "failed").collect();
    let moved: Vec<&Value> = slices.iter().filter(|s| s["outcome"] == "moved").collect();
    assert_eq!((failed.len(), moved.len()), (1, 1), "{ended}");
    assert_eq!(failed[0]["to"], "m3");
    assert_eq!(failed[0]["cause"], "target full", "{ended}");
    assert_eq!(moved[0]["to"], "m2");
    let stuck = failed[0]["slice"].as_str().unwrap_or_default().to_string();
    let name = if stuck.contains("volume 'a'") {
        "a"
    } else {
        "b"
    };
    let id = &ids[usize::from(name == "b")];
    assert!(
        last_detail(&ended).starts_with(&format!(
            "Medium 'm1' not finished: volume '{name}': slice c0-k0 from m1 to m3: "
        )),
        "{}",
        last_detail(&ended)
    );
    // The failed copy left nothing on m3; the slice is still on m1.
    assert!(slice_files_of(&app, "m3", id).is_empty());
    assert_eq!(app.slices(name).await[0]["media"], "m1");
    let (_, m1) = app.get("/media/m1").await;
    assert_eq!(m1["status"], "Draining", "{m1}");

    // Room on m3: the same request moves only what is left.
    small.resize("256M");
    let again = drain(&app, "m1").await;
    let done = app.wait_job(&again).await;
    assert_eq!(done["state"], "Done", "{done}");
    assert_eq!(
        last_detail(&done),
        "Medium 'm1' drained: 1 slice(s) moved off it (4 GiB); it takes no new slice until it is set Ready"
    );
    for (i, (name, id)) in ["a", "b"].into_iter().zip(&ids).enumerate() {
        let on = app.slices(name).await[0]["media"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert_ne!(on, "m1");
        for mib in 0..24u64 {
            let seed = (i as u64) << 8 | mib;
            let data = read_at(&app.slice_path(&on, id, 0, 0), mib << 20, 1 << 20);
            assert!(
                data == pattern(seed, 1 << 20),
                "{name} on {on}: MiB {mib} differs"
            );
        }
    }
}

#[tokio::test]
async fn a_drain_killed_mid_copy_resumes_after_the_restart_and_loses_nothing() {
    let (mut app, _) = two_volumes_on_m1("8 MiB").await;
    let mut ids = Vec::new();
    for name in ["a", "b"] {
        let (_, v) = app.get(&format!("/volumes/{name}")).await;
        ids.push(v["volumeid"].as_str().unwrap_or_default().to_string());
    }
    let job = drain(&app, "m1").await;
    wait_until(&app, &job, "copying", crate::harness::cancel::copying).await;
    app.kill();
    app.launch().expect("restarts after SIGKILL");
    let done = app.wait_job(&job).await;
    assert_eq!(done["state"], "Done", "{done}");
    let (_, m1) = app.get("/media/m1").await;
    assert_eq!(m1["volumescount"], 0, "{m1}");
    assert_eq!(
        m1["status"], "Draining",
        "a restart keeps the medium draining: {m1}"
    );
    // Every copy of both volumes holds what was written, m1 none.
    for (name, id) in ["a", "b"].into_iter().zip(&ids) {
        assert!(
            slice_files_of(&app, "m1", id).is_empty(),
            "{name} left files on m1"
        );
        for slice in app.slices(name).await {
            let data = read_at(&app.slice_file(id, &slice), 0, 24 << 20);
            assert!(
                data.iter().all(|b| *b == 0x33),
                "{name} on {}: data differs",
                slice["media"]
            );
        }
    }
}

#[tokio::test]
async fn a_drain_waits_for_a_volume_another_job_holds_and_leaves_what_that_job_moved() {
    let app = TestApp::start_with(moving_config(
        vec![
            medium("m1", "n1", "z1", 20),
            medium("m2", "n2", "z2", 16),
            medium("m3", "n3", "z3", 60),
            medium("m4", "n4", "z4", 60),
        ],
        "2 MiB",
    ))
    .await;
    app.create_policy("none", 0, 0, 0).await;
    app.create_policy("mirror", 1, 1, 0).await;
    // Fillers take m3 and m4, so that "data" lands on m1 and m2.
    app.create_volume("filler-1", 50, "none").await;
    app.create_volume("filler-2", 50, "none").await;
    let (_, job) = app.create_volume("data", 15, "mirror").await;
    assert_eq!(job["state"], "Done", "{job}");
    for filler in ["filler-1", "filler-2"] {
        app.delete_volume(filler).await;
    }
    let a = attach(&app, "data", "host-1", false).await;
    qemu_io(&uri(&a), &["write -P 0x44 0 24M".into(), "flush".into()]).expect("prefill");

    // A resize moving both copies off m1 and m2, held paused.
    let resize = app.start_resize("data", 21, true).await;
    wait_until(&app, &resize, "copying", crate::harness::cancel::copying).await;
    let (status, _) = app
        .patch(&format!("/jobs/{resize}"), json!({"paused": true}))
        .await;
    assert_eq!(status, StatusCode::OK);

    // The drain plans "data"'s slice on m1 and waits for the resize.
    let drain_job = drain(&app, "m1").await;
    wait_until(&app, &drain_job, "waiting", |j| {
        j["status"] == "Waiting for other jobs to end on volume(s) 'data'"
    })
    .await;
    // The resize goes on, unthrottled, and moves the slice itself.
    let (status, _) = app
        .patch(
            &format!("/jobs/{resize}"),
            json!({"paused": false, "movementrate": "0"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let resized = app.wait_job(&resize).await;
    assert_eq!(resized["state"], "Done", "{resized}");
    // The drain finds the slice gone from m1 and leaves it where it is.
    let done = app.wait_job(&drain_job).await;
    assert_eq!(done["state"], "Done", "{done}");
    assert!(
        details(&done)
            .iter()
            .any(|d| d.contains("left m1 meanwhile (another job moved it to ")),
        "{done}"
    );
    assert_eq!(
        last_detail(&done),
        "Medium 'm1' drained: 0 slice(s) moved off it (0 GiB); it takes no new slice until it is set Ready"
    );
    assert!(app.slices("data").await.iter().all(|s| s["media"] != "m1"));
    qemu_io(&uri(&a), &["read -P 0x44 0 24M".into()]).expect("the data reads back");
}
