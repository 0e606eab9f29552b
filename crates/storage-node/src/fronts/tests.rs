//! A node's fronts carrying out answers against a real slice server (the
//! node's own, `svs_dataplane::start_slice_server`), without the control
//! plane: opened, written through, reopened at a new epoch, closed.

use super::*;
use svs_dataplane::{start_slice_server, SharedSecret, SliceKey};
use svs_front::wire::FrontNode;

const SECRET: &str = "slice-secret";
const SIZE: u64 = 8 << 20;

struct Node {
    _dir: tempfile::TempDir,
    server: svs_sliceproto::SliceServer,
}

/// A slice server on 127.0.0.1 with media `d1`, `d2` and `d3` (no volume
/// on `d3`: a move's target).
fn node() -> Node {
    let dir = tempfile::tempdir().expect("dir");
    let media = ["d1", "d2", "d3"]
        .iter()
        .map(|m| {
            let path = dir.path().join(m);
            std::fs::create_dir_all(&path).expect("medium");
            (m.to_string(), path)
        })
        .collect();
    let server = start_slice_server(
        media,
        &dir.path().join("state"),
        "127.0.0.1:0".parse().expect("address"),
        Arc::new(SharedSecret::new(SECRET)),
        None,
    )
    .expect("slice server");
    Node { _dir: dir, server }
}

fn spec(node: &Node, epoch: u64, exports: &[&str]) -> FrontSpec {
    FrontSpec {
        volume: "v1".into(),
        epoch,
        size: SIZE,
        media: vec![vec!["d1".into()], vec!["d2".into()]],
        lostmedia: vec![],
        nodes: vec![FrontNode {
            node: "sn-1".into(),
            sliceaddress: node.server.local_addr().to_string(),
            slicecredential: SECRET.into(),
            media: vec!["d1".into(), "d2".into()],
        }],
        slicetlsroots: vec![],
        exports: exports
            .iter()
            .map(|name| FrontExport {
                name: name.to_string(),
                host: "h1".into(),
                hostaddress: "127.0.0.1".into(),
                readonly: false,
                snapshot: None,
            })
            .collect(),
    }
}

fn answer(fronts: Vec<FrontSpec>) -> FrontsAnswer {
    FrontsAnswer {
        version: "v".into(),
        fronts,
    }
}

/// The volume's slices, made on the node as the control plane would.
async fn create_slices(registry: &Arc<ExportRegistry>, spec: &FrontSpec) {
    let media = Arc::clone(registry.data_plane());
    let spec = spec.clone();
    tokio::task::spawn_blocking(move || {
        add_nodes(
            media.as_ref(),
            &spec.volume,
            &spec.nodes,
            &spec.slicetlsroots,
        );
        for (copy, medium) in ["d1", "d2"].iter().enumerate() {
            let key = SliceKey {
                volume_id: "v1".into(),
                copy: copy as u32,
                column: 0,
            };
            media.create_slice(medium, &key, SIZE).expect("slice");
        }
    })
    .await
    .expect("created");
}

fn open_report(fronts: &Fronts) -> Vec<(String, u64, String)> {
    fronts
        .report()
        .into_iter()
        .map(|o| (o.volume, o.epoch, o.error))
        .collect()
}

async fn write_and_read(registry: &Arc<ExportRegistry>, byte: u8) -> std::io::Result<Vec<u8>> {
    let io = registry.volume_io("v1").expect("open");
    tokio::task::spawn_blocking(move || {
        io.write(4096, &[byte; 4096], true)?;
        let mut back = vec![0; 4096];
        io.read(4096, &mut back)?;
        Ok(back)
    })
    .await
    .expect("joined")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_opens_as_asked_is_written_through_reopens_at_a_new_epoch_and_closes() {
    let node = node();
    let (registry, _media, _failed) = front_registry();
    let mut fronts = Fronts::new(Arc::new(FrontCalls::new(Arc::clone(registry.data_plane()))));
    create_slices(&registry, &spec(&node, 1, &[])).await;

    follow(
        &registry,
        &mut fronts,
        &answer(vec![spec(&node, 1, &["e1"])]),
        None,
    )
    .await;
    assert_eq!(open_report(&fronts), vec![("v1".into(), 1, String::new())]);
    assert!(registry.is_exported("e1"));
    assert_eq!(
        write_and_read(&registry, 7).await.expect("io"),
        vec![7; 4096]
    );

    // A second export, then the first one gone: the volume stays open.
    follow(
        &registry,
        &mut fronts,
        &answer(vec![spec(&node, 1, &["e2"])]),
        None,
    )
    .await;
    assert!(!registry.is_exported("e1"));
    assert!(registry.is_exported("e2"));
    assert!(registry.is_attached("v1"));

    // A new epoch: closed and opened again, the bytes still there.
    follow(
        &registry,
        &mut fronts,
        &answer(vec![spec(&node, 2, &["e2"])]),
        None,
    )
    .await;
    assert_eq!(open_report(&fronts), vec![("v1".into(), 2, String::new())]);
    let io = registry.volume_io("v1").expect("open");
    let back = tokio::task::spawn_blocking(move || {
        let mut back = vec![0; 4096];
        io.read(4096, &mut back).map(|()| back)
    })
    .await
    .expect("joined")
    .expect("read");
    assert_eq!(back, vec![7; 4096]);
    assert_eq!(
        write_and_read(&registry, 9).await.expect("io"),
        vec![9; 4096]
    );

    // No longer wanted: closed.
    follow(&registry, &mut fronts, &answer(vec![]), None).await;
    assert!(open_report(&fronts).is_empty());
    assert!(!registry.is_exported("e2"));
    assert!(registry.volume_io("v1").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_that_cannot_open_says_why_in_the_next_poll_and_opens_once_it_can() {
    let node = node();
    let (registry, _media, _failed) = front_registry();
    let mut fronts = Fronts::new(Arc::new(FrontCalls::new(Arc::clone(registry.data_plane()))));
    create_slices(&registry, &spec(&node, 1, &[])).await;
    let wanted = answer(vec![spec(&node, 1, &["e1"])]);

    follow(&registry, &mut fronts, &wanted, Some("address in use")).await;
    let report = open_report(&fronts);
    assert_eq!(report.len(), 1);
    assert_eq!(report[0].1, 1);
    assert!(report[0].2.contains("address in use"), "{}", report[0].2);
    assert!(!registry.is_exported("e1"));

    let mut bad = spec(&node, 1, &["e1"]);
    bad.exports[0].hostaddress = "h1.example".into();
    follow(&registry, &mut fronts, &answer(vec![bad]), None).await;
    let report = open_report(&fronts);
    assert!(
        report[0]
            .2
            .contains("host address 'h1.example' is no IP address"),
        "{}",
        report[0].2
    );
    assert!(registry.volume_io("v1").is_none());

    follow(&registry, &mut fronts, &wanted, None).await;
    assert_eq!(open_report(&fronts), vec![("v1".into(), 1, String::new())]);
    assert!(registry.is_exported("e1"));
}

#[test]
fn copy_failures_go_on_the_wire_as_the_contract_names_them() {
    let failure = CopyFailure {
        medium: "d1".into(),
        slice: SliceKey {
            volume_id: "v1".into(),
            copy: 1,
            column: 2,
        },
        medium_failed: true,
    };
    let body = svs_front::wire::FailuresBody {
        failures: vec![failures::wire_failure(&failure)],
    };
    assert_eq!(
        serde_json::to_value(&body).expect("json"),
        serde_json::json!({"failures": [
            {"medium": "d1", "volume": "v1", "copy": 1, "column": 2, "mediumfailed": true}
        ]})
    );
}

#[test]
fn slice_tls_roots_are_pem_certificates_and_none_is_plain_tcp() {
    assert!(slice_client_tls(&[]).expect("none").is_none());
    let err = slice_client_tls(&["not a certificate".into()]).unwrap_err();
    assert!(err.contains("no certificate"), "{err}");
}

#[test]
fn a_failure_is_forgotten_once_the_control_plane_has_the_medium_healthy_again() {
    let dir = tempfile::tempdir().expect("temp dir");
    let media = LocalMedia::new(["d1", "d2"].map(|m| (m.to_string(), dir.path().join(m))));
    let key = SliceKey {
        volume_id: "v1".into(),
        copy: 0,
        column: 0,
    };
    for m in ["d1", "d2"] {
        media.check_medium(m).expect("medium");
        media.create_slice(m, &key, 1 << 20).expect("slice");
    }
    // d1 fails (its directory goes): the data plane holds its failure.
    std::fs::remove_dir_all(dir.path().join("d1")).expect("pulled");
    assert!(media.probe_slice("d1", &key, &[]).is_err());
    assert_eq!(media.failed_media(), ["d1"]);
    let spec = |lost: &[&str]| FrontSpec {
        volume: "v1".into(),
        epoch: 2,
        size: 1 << 20,
        media: vec![vec!["d1".into()], vec!["d2".into()]],
        lostmedia: lost.iter().map(|m| m.to_string()).collect(),
        nodes: Vec::new(),
        slicetlsroots: Vec::new(),
        exports: Vec::new(),
    };
    // Still lost for the control plane: kept (not reported again).
    forget_recovered_failures(&media, &[spec(&["d1"])]);
    assert_eq!(media.failed_media(), ["d1"]);
    // A medium no front uses: kept too.
    let mut other = spec(&[]);
    other.media = vec![vec!["d2".into()]];
    forget_recovered_failures(&media, &[other]);
    assert_eq!(media.failed_media(), ["d1"]);
    // Healthy again (its disk back, its copy resynced): still held until
    // forgotten, then forgotten, so a new failure is reported again.
    std::fs::create_dir_all(dir.path().join("d1")).expect("back");
    assert_eq!(media.failed_media(), ["d1"]);
    forget_recovered_failures(&media, &[spec(&[])]);
    assert!(media.failed_media().is_empty());
}

/// One call to the node's fronts as the control plane sends it.
fn front_call(
    calls: &FrontCalls,
    epoch: u64,
    call: &str,
    op: serde_json::Value,
) -> std::io::Result<serde_json::Value> {
    use svs_sliceproto::FrontControl;
    let request = serde_json::json!({"call": call, "epoch": epoch, "op": op});
    let reply = calls.call("v1", request.to_string().as_bytes())?;
    Ok(serde_json::from_slice(&reply).expect("an answer"))
}

/// Runs `f` off the runtime (front calls block).
async fn off<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("joined")
}

/// [`front_call`] off the runtime.
async fn ask(
    calls: &Arc<FrontCalls>,
    epoch: u64,
    call: &str,
    op: serde_json::Value,
) -> std::io::Result<serde_json::Value> {
    let (calls, call) = (Arc::clone(calls), call.to_string());
    off(move || front_call(&calls, epoch, &call, op)).await
}

/// Volume v1's front open on `node` at epoch 3 (export e1), as the node's
/// fronts follow the control plane's answer, with `len` bytes of known data
/// written through it from 0.
struct OpenFrontV1 {
    registry: Arc<ExportRegistry>,
    calls: Arc<FrontCalls>,
    fronts: Fronts,
    spec: FrontSpec,
    io: Arc<dyn svs_dataplane::VolumeIo>,
    data: Vec<u8>,
    _media: svs_dataplane::ClusterMedia,
    _failed: tokio::sync::mpsc::UnboundedReceiver<Failed>,
}

async fn open_front_v1(node: &Node, len: u64) -> OpenFrontV1 {
    let (registry, _media, _failed) = front_registry();
    let calls = Arc::new(FrontCalls::new(Arc::clone(registry.data_plane())));
    let mut fronts = Fronts::new(Arc::clone(&calls));
    let spec = spec(node, 3, &["e1"]);
    create_slices(&registry, &spec).await;
    follow(&registry, &mut fronts, &answer(vec![spec.clone()]), None).await;
    let io = registry.volume_io("v1").expect("open");
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    {
        let (io, data) = (Arc::clone(&io), data.clone());
        off(move || io.write(0, &data, true))
            .await
            .expect("written");
    }
    OpenFrontV1 {
        registry,
        calls,
        fronts,
        spec,
        io,
        data,
        _media,
        _failed,
    }
}

/// The control plane's calls on a front open here: refused at another
/// epoch or when not JSON; a snapshot taken; a move of a slice with
/// snapshots refused (not yet), then, the snapshot gone, a live move of
/// copy 1 to medium d3 in its phases: begun (the node of d3 given), filled
/// within its grant (answered "running" once it used the grant up), switched
/// (the front's layout follows), finished. The node's later answers, which
/// name the old layout and then the new one, do not reopen the front.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_take_a_snapshot_and_move_a_slice_on_the_open_front() {
    let node = node();
    let OpenFrontV1 {
        registry,
        calls,
        mut fronts,
        spec: old,
        io,
        data,
        ..
    } = open_front_v1(&node, 3 << 20).await;
    assert_eq!(open_report(&fronts), vec![("v1".into(), 3, String::new())]);

    let e = ask(
        &calls,
        4,
        "a",
        serde_json::json!({"do": "snapshot", "id": 1}),
    )
    .await
    .expect_err("another epoch");
    assert_eq!(e.kind(), std::io::ErrorKind::NotConnected);
    assert_eq!(
        e.to_string(),
        "the front of volume v1 runs here at epoch 3, not 4"
    );
    let c = Arc::clone(&calls);
    let e = off(move || {
        use svs_sliceproto::FrontControl;
        c.call("v1", b"{")
    })
    .await
    .expect_err("not JSON");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().starts_with("not a front call: "), "{e}");

    let done = ask(
        &calls,
        3,
        "b",
        serde_json::json!({"do": "snapshot", "id": 1}),
    )
    .await
    .expect("snapshot");
    assert_eq!(done["running"], false, "{done}");
    let begin = serde_json::json!({"do": "begincopy", "rebuild": false, "copy": 1, "column": 0,
        "medium": "d3", "resumefrom": 0, "node": {"node": "sn-1",
        "sliceaddress": node.server.local_addr().to_string(), "slicecredential": SECRET,
        "media": ["d3"]}});
    ask(
        &calls,
        3,
        "d",
        serde_json::json!({"do": "deletesnapshot", "id": 1}),
    )
    .await
    .expect("snapshot deleted");

    let began = ask(&calls, 3, "move", begin).await.expect("begun");
    assert_eq!(
        began["began"],
        serde_json::json!({"startsat": 0, "inplace": false})
    );
    let first = ask(
        &calls,
        3,
        "fill",
        serde_json::json!({"do": "fill", "copy": "move",
            "checkpointbytes": 1 << 20, "grant": 1 << 20}),
    )
    .await
    .expect("filling");
    assert_eq!(first["running"], true, "{first}");
    let copied = first["progress"]["copied"].as_u64().expect("copied");
    assert!((1 << 20..3 << 20).contains(&copied), "{first}");
    // Unbounded now: asked again until it is done.
    let answer_now = loop {
        let a = ask(
            &calls,
            3,
            "fill",
            serde_json::json!({"do": "poll", "grant": null}),
        )
        .await
        .expect("filled");
        if a["running"] == false {
            break a;
        }
    };
    assert_eq!(answer_now["progress"]["copied"], 3 << 20, "{answer_now}");
    let e = ask(
        &calls,
        3,
        "x",
        serde_json::json!({"do": "switch", "copy": "nope"}),
    )
    .await
    .expect_err("no such copy");
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    ask(
        &calls,
        3,
        "s",
        serde_json::json!({"do": "switch", "copy": "move"}),
    )
    .await
    .expect("switched");
    let moved = vec![vec!["d1".to_string()], vec!["d3".to_string()]];
    let layout = calls.layout("v1").expect("open");
    assert_eq!((&layout.media, layout.moving), (&moved, true));

    // An answer before the store commits names the old place: the front
    // stays open as it is.
    follow(&registry, &mut fronts, &answer(vec![old.clone()]), None).await;
    let still = registry.volume_io("v1").expect("open");
    assert!(Arc::ptr_eq(&io, &still), "the front was opened again");
    ask(
        &calls,
        3,
        "f",
        serde_json::json!({"do": "finish", "copy": "move"}),
    )
    .await
    .expect("finished");
    let mut new = old.clone();
    new.media = moved.clone();
    new.nodes[0].media.push("d3".into());
    follow(&registry, &mut fronts, &answer(vec![new]), None).await;
    let still = registry.volume_io("v1").expect("open");
    assert!(Arc::ptr_eq(&io, &still), "the front was opened again");
    assert!(!calls.layout("v1").expect("open").moving);
    let back = off(move || {
        let mut back = vec![0; 3 << 20];
        still.read(0, &mut back).map(|()| back)
    })
    .await
    .expect("read");
    assert!(back == data, "the moved copy reads back what was written");
    drop(io);
    follow(&registry, &mut fronts, &answer(vec![]), None).await;
    assert!(calls.layout("v1").is_none(), "closed");
}

/// [`ask`] at epoch 3 under claim `epoch` of job `job`.
async fn ask_as(
    calls: &Arc<FrontCalls>,
    (job, epoch): (i64, u64),
    call: &str,
    op: serde_json::Value,
) -> std::io::Result<serde_json::Value> {
    let calls = Arc::clone(calls);
    let request = serde_json::json!({"call": call, "epoch": 3,
        "claim": {"job": job, "epoch": epoch}, "op": op});
    off(move || {
        use svs_sliceproto::FrontControl;
        let reply = calls.call("v1", request.to_string().as_bytes())?;
        Ok(serde_json::from_slice(&reply).expect("an answer"))
    })
    .await
}

/// A job's copy, taken over by the job's next claim (another instance's):
/// the older claim's fill stops and its calls are refused from then on,
/// its target stays for the newer claim to resume from, and the newer
/// claim's copy ends the move with every byte; an earlier job never begins
/// a copy of the slice over a later job's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_claim_of_a_job_takes_its_copy_over_and_the_older_claim_is_refused() {
    let node = node();
    let front = open_front_v1(&node, SIZE).await;
    let (calls, io, data) = (
        Arc::clone(&front.calls),
        Arc::clone(&front.io),
        front.data.clone(),
    );
    let begin = |resumefrom: u64| {
        serde_json::json!({"do": "begincopy", "rebuild": false, "copy": 1, "column": 0,
        "medium": "d3", "resumefrom": resumefrom, "node": {"node": "sn-1",
        "sliceaddress": node.server.local_addr().to_string(), "slicecredential": SECRET,
        "media": ["d3"]}})
    };
    let fill = |copy: &str| {
        serde_json::json!({"do": "fill", "copy": copy, "checkpointbytes": 1 << 20,
            "grant": null})
    };

    // Claim 1 of job 7 copies the slice to d3 (filled, not switched).
    ask_as(&calls, (7, 1), "c1-begin", begin(0))
        .await
        .expect("begun");
    let filled = loop {
        let a = ask_as(&calls, (7, 1), "c1-fill", fill("c1-begin"))
            .await
            .expect("filled");
        if a["running"] == false {
            break a;
        }
    };
    assert_eq!(filled["progress"]["copied"], SIZE, "{filled}");

    // Claim 2 (the instance that took the job over) begins the slice's
    // copy at a checkpoint: the target claim 1 filled is still there.
    let began = ask_as(&calls, (7, 2), "c2-begin", begin(2 << 20))
        .await
        .expect("begun again");
    assert_eq!(
        began["began"],
        serde_json::json!({"startsat": 2 << 20, "inplace": false})
    );
    // Claim 1 steers nothing any more.
    let e = ask_as(
        &calls,
        (7, 1),
        "c1-switch",
        serde_json::json!({"do": "switch", "copy": "c1-begin"}),
    )
    .await
    .expect_err("an older claim");
    assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
    assert_eq!(
        e.to_string(),
        "job 7's claim 1 was taken over by its claim 2: the instance that made this call \
         no longer runs the job"
    );
    // An earlier job (a stale instance's) never replaces job 9's copy.
    ask_as(&calls, (9, 1), "j9-begin", begin(0))
        .await
        .expect("a later job's copy");
    let e = ask_as(&calls, (7, 2), "c2-again", begin(0))
        .await
        .expect_err("an earlier job");
    assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
    assert_eq!(
        e.to_string(),
        "job 9 copies this slice on this node's front: the instance that made this call no \
         longer runs its job"
    );
    // Job 9's copy (the test's stand-in for a later movement) is aborted;
    // claim 2 of job 7 begins again (from the start: job 9's begin dropped
    // its copy) and ends the move.
    ask_as(
        &calls,
        (9, 1),
        "j9-abort",
        serde_json::json!({"do": "abort", "copy": "j9-begin"}),
    )
    .await
    .expect("aborted");
    ask_as(&calls, (7, 2), "c2-begin-2", begin(0))
        .await
        .expect("begun");
    loop {
        let a = ask_as(&calls, (7, 2), "c2-fill", fill("c2-begin-2"))
            .await
            .expect("filled");
        if a["running"] == false {
            break;
        }
    }
    for (call, op) in [("c2-switch", "switch"), ("c2-finish", "finish")] {
        ask_as(
            &calls,
            (7, 2),
            call,
            serde_json::json!({"do": op, "copy": "c2-begin-2"}),
        )
        .await
        .expect(op);
    }
    let moved = vec![vec!["d1".to_string()], vec!["d3".to_string()]];
    assert_eq!(calls.layout("v1").expect("open").media, moved);
    let back = off(move || {
        let mut back = vec![0; SIZE as usize];
        io.read(0, &mut back).map(|()| back)
    })
    .await
    .expect("read");
    assert!(back == data, "the moved copy reads back what was written");
}
