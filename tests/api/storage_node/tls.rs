//! TLS of the slice protocol: `svs serve` with `tls = "auto"` issues the
//! real `svs storage-node` a slice certificate from its CA, the node's
//! slice server speaks only TLS, and the service's data plane reaches the
//! node's copy over it.

use crate::harness::storage_nodes::{
    node, node_with_credential, wait_served, StorageNodeProcess, TIMEOUT,
};
use crate::harness::{medium, read_at, TestApp, TestConfig};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

#[tokio::test]
async fn with_tls_auto_a_storage_node_serves_its_slices_over_tls_only() {
    let app = TestApp::start_with(TestConfig {
        // Too small for the volume: its copy goes to the storage node.
        media: vec![medium("m1", "host-0", "z0", 1)],
        settings: vec![
            "tls = \"auto\"".into(),
            // NBD in plain text, for qemu-io: the slice protocol is what
            // this test is about.
            "nbd_tls = \"off\"".into(),
            format!("storage_node_timeout = \"{}s\"", TIMEOUT.as_secs()),
            "media_check_period = \"1h\"".into(),
        ],
        ..TestConfig::default()
    })
    .await;
    assert!(app.base.starts_with("https://"), "{}", app.base);
    let credential = node_with_credential(&app, "sn-1", "127.0.0.2", "z1", "storage").await;
    let mut sn1 = StorageNodeProcess::new(&app, "sn-1", "127.0.0.2", &[("a1", 4)], &credential);
    let ca = app.ca_cert().display().to_string();
    sn1.start_with(&["--ca-cert", &ca]);
    wait_served(&app, &["a1"]).await;
    assert_eq!(node(&app, "sn-1").await["state"], "Online");

    // The node made its key (0600, never sent) and holds a certificate of
    // the service's CA; its slice server speaks TLS.
    let state = sn1.state_dir();
    let mode = std::fs::metadata(state.join("slice-key.pem"))
        .expect("the node's slice key")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let issued = std::fs::read_to_string(state.join("slice-cert.pem")).expect("certificate");
    assert!(
        issued.starts_with("-----BEGIN CERTIFICATE-----"),
        "{issued}"
    );
    assert!(
        !app.log().contains("BEGIN PRIVATE KEY") && !sn1.log().contains("BEGIN PRIVATE KEY"),
        "a private key in a log"
    );
    let log = sn1.log();
    assert!(
        log.lines()
            .any(|l| l.contains("slice server started") && l.contains("tls=true")),
        "{log}"
    );
    assert!(
        log.contains("slice certificate issued by the control plane's CA"),
        "{log}"
    );
    assert!(
        app.log().contains("issued a slice certificate"),
        "{}",
        app.log()
    );

    // A volume whose one copy is on the node, written through the service.
    app.create_policy("single", 0, 0, 0).await;
    let (id, _) = app.create_volume("data", 2, "single").await;
    let slices = app.slices("data").await;
    assert_eq!(slices.len(), 1, "{slices:?}");
    assert_eq!(slices[0]["media"], "a1", "{slices:?}");
    let (status, body) = app
        .patch("/nodes/host-0", serde_json::json!({"address": "127.0.0.1"}))
        .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    let a = crate::harness::attach::attach(&app, "data", "host-0", false).await;
    let uri = crate::harness::attach::uri(&a);
    assert!(uri.starts_with("nbd://"), "{uri}");
    crate::harness::attach::qemu_io(&uri, &["write -P 0x5a 1M 2M".into(), "flush".into()])
        .expect("written through the service");
    // The bytes are on the node's disk.
    let file = sn1.medium_dir("a1").join(&id).join("c0-k0.slice");
    let bytes = read_at(&file, 1 << 20, 2 << 20);
    assert!(bytes.iter().all(|b| *b == 0x5a), "{}", file.display());
    let out =
        crate::harness::attach::qemu_io(&uri, &["read -P 0x5a 1M 2M".into()]).expect("read back");
    assert!(!out.contains("Pattern verification failed"), "{out}");

    // A plain-text client is refused by the node's slice server (it does
    // not even get to the hello, whatever credential it has).
    let address = node(&app, "sn-1").await["sliceaddress"]
        .as_str()
        .unwrap_or_default()
        .parse()
        .expect("slice address");
    let plain = svs_sliceproto::SliceClient::connect(
        address,
        "any credential",
        "plain-text test",
        Duration::from_secs(10),
    );
    match plain {
        Ok(_) => panic!("a plain-text client was served by the TLS slice server"),
        Err(e) => assert!(
            e.to_string()
                .contains("closed the connection during the hello"),
            "{e}"
        ),
    }
    // The service still serves the volume after that.
    let out =
        crate::harness::attach::qemu_io(&uri, &["read -P 0x5a 1M 2M".into()]).expect("read again");
    assert!(!out.contains("Pattern verification failed"), "{out}");
}

/// With `tls = "auto"` a node gets a slice certificate only for its own
/// address: a storage credential asking for another address's is refused
/// with 409 and nothing is registered.
#[tokio::test]
async fn a_slice_certificate_is_issued_only_for_the_nodes_own_address() {
    let app = TestApp::start_with(TestConfig {
        settings: vec!["tls = \"auto\"".into()],
        ..TestConfig::default()
    })
    .await;
    let credential = node_with_credential(&app, "sn-1", "127.0.0.2", "z1", "storage").await;
    let key = rcgen::KeyPair::generate().expect("key pair");
    let register = |address: &str| {
        serde_json::json!({
            "sliceaddress": address,
            "media": [],
            "slicepublickey": key.public_key_pem(),
        })
    };
    let (status, answer) = app
        .request(
            Some(&format!("Bearer {credential}")),
            reqwest::Method::PUT,
            "/nodes/sn-1/storage",
            Some(register("127.0.0.9:7450")),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::CONFLICT, "{answer}");
    assert_eq!(
        answer["message"],
        "node 'sn-1' asks for a slice certificate for 127.0.0.9, but its address is 127.0.0.2: \
         svs issues slice certificates only for a node's own address (set it with \
         PATCH /nodes/sn-1 {\"address\": \"127.0.0.9\"}, or listen on it)"
    );
    let sn1 = node(&app, "sn-1").await;
    assert_eq!(
        (&sn1["sliceaddress"], &sn1["lastheartbeat"]),
        (&serde_json::json!(""), &serde_json::Value::Null),
        "{sn1}"
    );
    // Its own address gets one.
    let (status, answer) = app
        .request(
            Some(&format!("Bearer {credential}")),
            reqwest::Method::PUT,
            "/nodes/sn-1/storage",
            Some(register("127.0.0.2:7450")),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{answer}");
    assert!(
        answer["slicecertificate"]
            .as_str()
            .is_some_and(|c| c.starts_with("-----BEGIN CERTIFICATE-----")),
        "{answer}"
    );
}
