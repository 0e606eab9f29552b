//! A node's fronts carrying out answers against a real slice server (the
//! node's own, `svs_dataplane::start_slice_server`), without the control
//! plane: opened, written through, reopened at a new epoch, closed.

use super::*;
use crate::fronts_wire::FrontNode;
use svs_dataplane::{start_slice_server, SharedSecret, SliceKey};

const SECRET: &str = "slice-secret";
const SIZE: u64 = 8 << 20;

struct Node {
    _dir: tempfile::TempDir,
    server: svs_sliceproto::SliceServer,
}

/// A slice server on 127.0.0.1 with media `d1` and `d2`.
fn node() -> Node {
    let dir = tempfile::tempdir().expect("dir");
    let media = ["d1", "d2"]
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
    let body = crate::fronts_wire::FailuresBody {
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
