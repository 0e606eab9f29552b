//! TLS (issue 13, "Transport security") against the real `svs serve`:
//! HTTPS with svs's own CA (`tls = "auto"`) or the operator's files, the
//! clients' `--ca-cert`, the plain-text warnings and refusals, the TLS
//! files in backups, and NBD over TLS with qemu.

use crate::harness::attach::{attach, topology, uri};
use crate::harness::*;
use reqwest::StatusCode;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

const TLS_FILES: [&str; 4] = ["ca.pem", "ca-key.pem", "server.pem", "server-key.pem"];

fn auto_tls() -> TestConfig {
    TestConfig {
        settings: vec!["tls = \"auto\"".into()],
        ..TestConfig::default()
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// The text of an error and of every error under it.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The SHA-256 fingerprint (`AB:CD:...`) of a PEM certificate file.
fn fingerprint_of(pem: &Path) -> String {
    let chain = svs_common::tls::load_chain(pem, "certificate").expect("a PEM certificate");
    svs_common::tls::fingerprint(&chain[0])
}

/// Runs the `svs` CLI with its own HOME.
fn svs_cli(home: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut child = Command::new(svs_bin())
        .args(args)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("SVS_PROFILE")
        .env_remove("SVS_URL")
        .env_remove("SVS_CA_CERT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("svs runs");
    let mut input = child.stdin.take().expect("stdin");
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).expect("stdin written");
    }
    drop(input);
    child.wait_with_output().expect("svs ends")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test]
async fn tls_auto_makes_a_private_ca_serves_https_and_keeps_the_ca_across_restarts() {
    let mut app = TestApp::start_with(auto_tls()).await;
    assert!(app.base.starts_with("https://127.0.0.1:"), "{}", app.base);
    let dir = app.data_dir().join("tls");
    assert_eq!(mode(&dir), 0o700);
    for name in TLS_FILES {
        assert_eq!(mode(&dir.join(name)), 0o600, "{name}");
    }
    let ca = std::fs::read(dir.join("ca.pem")).expect("CA certificate");
    let fingerprint = fingerprint_of(&dir.join("ca.pem"));
    assert!(
        app.log().contains("made a private CA for TLS"),
        "{}",
        app.log()
    );

    // The harness's client trusts only the CA: HTTPS works.
    let (status, body) = app.get("/volumes").await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // A client without the CA refuses the certificate.
    let err = reqwest::Client::new()
        .get(format!("{}/volumes", app.base))
        .send()
        .await
        .expect_err("an unknown issuer is refused");
    let chain = error_chain(&err);
    assert!(
        chain.contains("invalid peer certificate: UnknownIssuer"),
        "{chain}"
    );
    // Plain HTTP on the HTTPS port is told to use HTTPS.
    let plain = app.base.replacen("https://", "http://", 1);
    let answer = reqwest::Client::new()
        .get(format!("{plain}/volumes"))
        .send()
        .await
        .expect("answered");
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    let body: serde_json::Value = answer.json().await.expect("JSON");
    assert_eq!(
        body["message"],
        "this port speaks HTTPS: use an https:// URL instead"
    );

    // A restart reuses the CA (and so its fingerprint) and the server
    // certificate: clients that trust it keep working.
    let server = std::fs::read(dir.join("server.pem")).expect("server certificate");
    app.restart().await;
    assert!(app.base.starts_with("https://"), "{}", app.base);
    assert_eq!(std::fs::read(dir.join("ca.pem")).expect("CA"), ca);
    assert_eq!(fingerprint_of(&dir.join("ca.pem")), fingerprint);
    assert_eq!(std::fs::read(dir.join("server.pem")).expect("cert"), server);
    let (status, body) = app.get("/volumes").await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn the_cli_trusts_the_service_with_ca_cert_and_refuses_it_without() {
    let app = TestApp::start_with(auto_tls()).await;
    let home = tempfile::tempdir().expect("home");
    let ca = app.ca_cert();
    let ca = ca.to_str().expect("UTF-8 path");
    let password = format!("{ADMIN_PASSWORD}\n");

    let out = svs_cli(
        home.path(),
        &["login", "--url", &app.base, "--email", ADMIN_EMAIL],
        Some(&password),
    );
    assert!(
        !out.status.success(),
        "login without the CA: {}",
        text(&out)
    );
    assert!(
        text(&out).contains("certificate"),
        "the refusal names the certificate: {}",
        text(&out)
    );

    let out = svs_cli(
        home.path(),
        &[
            "login",
            "--url",
            &app.base,
            "--email",
            ADMIN_EMAIL,
            "--ca-cert",
            ca,
        ],
        Some(&password),
    );
    assert!(out.status.success(), "login: {}", text(&out));
    let out = svs_cli(
        home.path(),
        &["policy", "list", "--ca-cert", ca, "--output", "json"],
        None,
    );
    assert!(out.status.success(), "policy list: {}", text(&out));

    // SVS_CA_CERT does the same.
    let out = Command::new(svs_bin())
        .args(["policy", "list", "--output", "json"])
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("SVS_PROFILE")
        .env("SVS_CA_CERT", ca)
        .output()
        .expect("svs runs");
    assert!(out.status.success(), "policy list: {}", text(&out));

    // A CA file that is not one stops the command before any request.
    let bogus = home.path().join("bogus.pem");
    std::fs::write(&bogus, "not a certificate\n").expect("written");
    let out = svs_cli(
        home.path(),
        &[
            "policy",
            "list",
            "--ca-cert",
            bogus.to_str().expect("UTF-8"),
        ],
        None,
    );
    assert!(!out.status.success());
    assert!(
        text(&out).contains(&format!(
            "--ca-cert {}: no certificate in it",
            bogus.display()
        )),
        "{}",
        text(&out)
    );
}

/// A CA and a server certificate for 127.0.0.1 and localhost, made the
/// way an operator's own PKI would: (CA certificate, server chain, key).
fn own_certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "operator CA");
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().expect("server key");
    let params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .expect("server params");
    let cert = params.signed_by(&key, &issuer).expect("server certificate");
    let paths = (
        dir.join("operator-ca.pem"),
        dir.join("server-chain.pem"),
        dir.join("server.key"),
    );
    std::fs::write(&paths.0, ca_cert.pem()).expect("written");
    std::fs::write(&paths.1, cert.pem()).expect("written");
    std::fs::write(&paths.2, key.serialize_pem()).expect("written");
    (paths.0, paths.1, paths.2)
}

#[tokio::test]
async fn explicit_certificate_and_key_files_serve_https() {
    let certs = tempfile::tempdir().expect("temp dir");
    let (ca, cert, key) = own_certificates(certs.path());
    let app = TestApp::start_with(TestConfig {
        settings: vec![
            format!("tls_cert = {:?}", cert.display().to_string()),
            format!("tls_key = {:?}", key.display().to_string()),
        ],
        tls_ca: Some(ca),
        ..TestConfig::default()
    })
    .await;
    assert!(app.base.starts_with("https://"), "{}", app.base);
    let (status, body) = app.get("/volumes").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // svs made no certificates of its own.
    assert!(!app.data_dir().join("tls").exists());
}

/// Starts `svs serve` by hand with `config` (TOML) and `listen`: Ok(the
/// process and its first stdout lines), or Err(stdout and stderr) when it
/// exits.
fn serve_by_hand(
    dir: &Path,
    config: &str,
    listen: &str,
) -> Result<(Killed, Vec<String>, PathBuf), String> {
    let config_path = dir.join("svs.toml");
    std::fs::write(&config_path, config).expect("config written");
    let stderr_path = dir.join("stderr.log");
    let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
    let mut child = Killed(
        Command::new(svs_bin())
            .args(["serve", "--listen", listen, "--config"])
            .arg(&config_path)
            .arg("--data-dir")
            .arg(dir.join("data"))
            .env("SVS_NBD_LISTEN", "127.0.0.1:0")
            .env("SVS_LOG", "info")
            .env_remove("SVS_ADMIN_EMAIL")
            .env_remove("SVS_ADMIN_PASSWORD")
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("svs serve runs"),
    );
    let mut stdout = BufReader::new(child.0.stdout.take().expect("stdout"));
    let mut lines = Vec::new();
    // The start-up lines come in one write: up to the console line, and
    // whatever follows it (media, TLS, warnings) ends with the user hint.
    loop {
        let mut line = String::new();
        let n = stdout.read_line(&mut line).unwrap_or(0);
        if n == 0 {
            let _ = child.0.wait();
            let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            return Err(format!("{}\n{stderr}", lines.join("\n")));
        }
        let done = line.starts_with("svs: no users yet");
        lines.push(line.trim_end().to_string());
        if done {
            return Ok((child, lines, stderr_path));
        }
    }
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn beyond_loopback_tls_is_on_unless_tls_off_is_written_which_warns_on_stdout_and_in_the_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (_child, lines, stderr) =
        serve_by_hand(dir.path(), "demo = true\ntls = \"off\"\n", "0.0.0.0:0").expect("starts");
    let warning = "warning: the API listens on 0.0.0.0:0 without TLS, so passwords and tokens \
                   cross the network in plain text: set tls = \"auto\"";
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("svs: {warning}"))),
        "{lines:#?}"
    );
    let log = std::fs::read_to_string(stderr).expect("stderr");
    assert!(log.contains(warning), "{log}");

    // Without `tls` written, TLS is on beyond loopback (as with tls =
    // "auto"): no warning, and the start-up lines name the CA.
    let dir = tempfile::tempdir().expect("temp dir");
    let (_child, lines, stderr) =
        serve_by_hand(dir.path(), "demo = true\n", "0.0.0.0:0").expect("starts");
    assert!(
        lines[0].starts_with("svs listening on https://0.0.0.0:"),
        "{lines:#?}"
    );
    let ca = dir.path().join("data/tls/ca.pem");
    let ca = std::fs::canonicalize(&ca).expect("CA made");
    let tls_line = format!(
        "svs tls: svs's private CA {} (SHA-256 {}); clients trust it with --ca-cert {}; nbd tls \
         optional",
        ca.display(),
        fingerprint_of(&ca),
        ca.display()
    );
    assert!(lines.contains(&tls_line), "{tls_line}\n{lines:#?}");
    let log = std::fs::read_to_string(stderr).expect("stderr");
    assert!(!log.contains("without TLS"), "{log}");
}

#[test]
fn bad_or_missing_certificate_files_stop_start_up_with_a_clear_message() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (_, cert, key) = own_certificates(dir.path());
    let missing = dir.path().join("missing.pem");
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "hello\n").expect("written");
    let (_, other_cert, _) = {
        let other = dir.path().join("other");
        std::fs::create_dir(&other).expect("dir");
        own_certificates(&other)
    };
    let cases = [
        (
            &missing,
            &key,
            format!(
                "svs: tls_cert {}: cannot read it: No such file or directory",
                missing.display()
            ),
        ),
        (
            &garbage,
            &key,
            format!("svs: tls_cert {}: no certificate in it", garbage.display()),
        ),
        (
            &cert,
            &garbage,
            format!("svs: tls_key {}: no private key in it", garbage.display()),
        ),
        (
            &other_cert,
            &key,
            "svs: TLS: the certificate and key cannot be used together".to_string(),
        ),
    ];
    for (cert, key, expected) in cases {
        let config = format!(
            "demo = true\ntls_cert = {:?}\ntls_key = {:?}\n",
            cert.display().to_string(),
            key.display().to_string()
        );
        let err = serve_by_hand(dir.path(), &config, "127.0.0.1:0")
            .map(|(_, lines, _)| lines)
            .expect_err("refused");
        assert!(err.contains(&expected), "{expected}\n{err}");
        assert!(!err.contains("svs listening on"), "{err}");
    }
    // Only one of the two settings.
    let config = format!("demo = true\ntls_cert = {:?}\n", cert.display().to_string());
    let err = serve_by_hand(dir.path(), &config, "127.0.0.1:0")
        .map(|(_, lines, _)| lines)
        .expect_err("refused");
    assert!(
        err.contains("tls_cert and tls_key go together: set both (PEM files) or neither"),
        "{err}"
    );
}

#[tokio::test]
async fn backup_and_restore_carry_the_tls_files() {
    let mut app = TestApp::start_with(auto_tls()).await;
    app.stop();
    let archive = app.dir.path().join("backup.tar");
    let out = Command::new(svs_bin())
        .args(["backup", "--out"])
        .arg(&archive)
        .arg("--config")
        .arg(app.config_path())
        .arg("--data-dir")
        .arg(app.data_dir())
        .output()
        .expect("svs backup runs");
    assert!(out.status.success(), "{}", text(&out));
    for name in TLS_FILES {
        assert!(
            text(&out).contains(&format!("tls/{name}")),
            "{name}: {}",
            text(&out)
        );
    }
    let restored = app.dir.path().join("restored");
    let out = Command::new(svs_bin())
        .args(["restore", "--from"])
        .arg(&archive)
        .arg("--config")
        .arg(app.config_path())
        .arg("--data-dir")
        .arg(&restored)
        .output()
        .expect("svs restore runs");
    assert!(out.status.success(), "{}", text(&out));
    for name in TLS_FILES {
        let original = std::fs::read(app.data_dir().join("tls").join(name)).expect("original");
        let path = restored.join("tls").join(name);
        assert_eq!(std::fs::read(&path).expect("restored"), original, "{name}");
        assert_eq!(mode(&path), 0o600, "{name}");
    }
}

/// qemu-io through TLS: `dir` holds `ca-cert.pem` (qemu's layout for a
/// client's `tls-creds-x509`).
fn qemu_io_tls(dir: &Path, host: &str, port: &str, export: &str, commands: &[&str]) -> Output {
    let mut cmd = Command::new("qemu-io");
    cmd.args([
        "--object",
        &format!(
            "tls-creds-x509,id=tls0,dir={},endpoint=client",
            dir.display()
        ),
        "--image-opts",
        &format!("driver=nbd,host={host},port={port},export={export},tls-creds=tls0"),
    ]);
    for c in commands {
        cmd.args(["-c", c]);
    }
    cmd.output().expect("qemu-io runs (install qemu-utils)")
}

#[tokio::test]
async fn nbd_tls_require_serves_qemu_over_tls_and_refuses_plain_text() {
    let mut config = topology("0");
    config.settings = vec!["tls = \"auto\"".into(), "nbd_tls = \"require\"".into()];
    let app = TestApp::start_with(config).await;
    app.create_policy("none", 0, 0, 0).await;
    app.create_volume("v", 1, "none").await;
    let a = attach(&app, "v", "host-1", false).await;
    let uri = uri(&a);
    assert!(uri.starts_with("nbds://127.0.0.1:"), "{uri}");
    let export = a["exportname"].as_str().expect("exportname");
    let port = app.nbd_base.rsplit(':').next().expect("a port").to_string();

    let creds = tempfile::tempdir().expect("temp dir");
    std::fs::copy(app.ca_cert(), creds.path().join("ca-cert.pem")).expect("CA copied");
    let out = qemu_io_tls(
        creds.path(),
        "127.0.0.1",
        &port,
        export,
        &["write -P 0xab 0 1M", "read -P 0xab 0 1M"],
    );
    let output = text(&out);
    assert!(out.status.success(), "{output}");
    assert!(
        output.contains("wrote 1048576/1048576 bytes") && output.contains("read 1048576/1048576"),
        "{output}"
    );
    assert!(!output.contains("Pattern verification failed"), "{output}");

    // The same export in plain text: refused, for want of TLS.
    let plain = format!("nbd://127.0.0.1:{port}/{export}");
    let err = crate::harness::attach::qemu_io(&plain, &["read 0 4k".into()]).expect_err("refused");
    assert!(
        err.contains("TLS negotiation required before option 7 (go)")
            && err.contains(
                "server reported: this server requires TLS: negotiate NBD_OPT_STARTTLS first"
            ),
        "{err}"
    );

    // A CA qemu does not know: the handshake fails on the certificate.
    let other = tempfile::tempdir().expect("temp dir");
    let (other_ca, _, _) = own_certificates(other.path());
    std::fs::copy(&other_ca, other.path().join("ca-cert.pem")).expect("copied");
    let out = qemu_io_tls(other.path(), "127.0.0.1", &port, export, &["read 0 4k"]);
    assert!(
        !out.status.success() || text(&out).contains("failed"),
        "{}",
        text(&out)
    );
    assert!(
        text(&out).to_lowercase().contains("certificate"),
        "{}",
        text(&out)
    );

    // The written bytes are on the volume: read back over TLS by svs's
    // own NBD client, trusting the CA.
    let config = {
        let pem = std::fs::read(app.ca_cert()).expect("CA");
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem) {
            roots.add(cert.expect("PEM")).expect("a root");
        }
        std::sync::Arc::new(
            rustls::ClientConfig::builder_with_provider(svs_common::tls::crypto_provider())
                .with_safe_default_protocol_versions()
                .expect("TLS versions")
                .with_root_certificates(roots)
                .with_no_client_auth(),
        )
    };
    let tls = svs_nbd::ClientTls::new(config, "127.0.0.1").expect("server name");
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
    let export = export.to_string();
    let bytes = tokio::task::spawn_blocking(move || {
        let client = svs_nbd::NbdClient::connect_timeout_tls(
            &addr,
            &export,
            std::time::Duration::from_secs(10),
            Some(&tls),
        )
        .expect("TLS connection");
        let mut buf = vec![0u8; 1 << 20];
        client.read(0, &mut buf).expect("read");
        buf
    })
    .await
    .expect("joined");
    assert!(bytes.iter().all(|b| *b == 0xab));
}

/// `svs agent --ca-cert` against a service that requires TLS everywhere:
/// the agent reaches the API over HTTPS, and its device process opens the
/// `nbds://` attachment with STARTTLS; bytes written to the block device
/// are the volume's (read back by qemu over TLS).
#[tokio::test]
async fn the_agent_with_ca_cert_connects_a_volume_of_a_service_requiring_tls() {
    use crate::harness::host_agent::{issue_credential, wait_host};
    use crate::harness::host_side::HostSide;
    use serde_json::json;
    use std::io::{Seek, SeekFrom, Write};

    let mut config = topology("0");
    config.settings = vec![
        "tls = \"auto\"".into(),
        "nbd_tls = \"require\"".into(),
        "agent_wait_secs = 60".into(),
    ];
    let app = TestApp::start_with(config).await;
    app.create_policy("none", 0, 0, 0).await;
    app.create_volume("b", 1, "none").await;
    let mut host = HostSide::new();
    issue_credential(&app, &host).await;
    host.start_agent(&app);

    let (status, body) = app
        .post(
            "/volumes/b/snapshots/top/attachments",
            json!({"node": "host-1"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let a = wait_host(&app, &host, "b", |a| a["hoststate"] == "Connected").await;
    assert!(uri(&a).starts_with("nbds://"), "{a}");
    let device = PathBuf::from(a["hostdevice"].as_str().expect("device"));
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&device)
            .expect("device opens");
        f.seek(SeekFrom::Start(1 << 20)).expect("seek");
        f.write_all(&[0x5c; 65536]).expect("written");
        f.sync_all().expect("synced");
    }
    let creds = tempfile::tempdir().expect("temp dir");
    std::fs::copy(app.ca_cert(), creds.path().join("ca-cert.pem")).expect("CA copied");
    let port = app.nbd_base.rsplit(':').next().expect("a port").to_string();
    let out = qemu_io_tls(
        creds.path(),
        "127.0.0.1",
        &port,
        a["exportname"].as_str().expect("exportname"),
        &["read -P 0x5c 1M 64k"],
    );
    assert!(
        out.status.success() && !text(&out).contains("failed"),
        "{}",
        text(&out)
    );

    let job = app
        .delete_and_wait("/volumes/b/snapshots/top/attachments/host-1")
        .await;
    assert_eq!(job["state"], "Done", "{job}\nagent log:\n{}", host.log());
    let left = host.leftovers();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The CSI controller plugin with `--ca-cert` works against an HTTPS
/// service: it signs in and creates a volume.
#[tokio::test]
async fn the_csi_controller_with_ca_cert_creates_a_volume_over_https() {
    use svs_csi::proto::volume_capability::access_mode::Mode;
    use svs_csi::proto::volume_capability::{AccessMode, AccessType, MountVolume};
    use svs_csi::proto::{CapacityRange, CreateVolumeRequest, VolumeCapability};

    let app = TestApp::start_with(auto_tls()).await;
    app.create_policy("none", 0, 0, 0).await;
    let plugin = crate::harness::csi_controller::Plugin::start(&app).await;
    let created = plugin
        .controller()
        .create_volume(CreateVolumeRequest {
            name: "pvc-tls".into(),
            capacity_range: Some(CapacityRange {
                required_bytes: GIB as i64,
                limit_bytes: 0,
            }),
            volume_capabilities: vec![VolumeCapability {
                access_mode: Some(AccessMode {
                    mode: Mode::SingleNodeWriter as i32,
                }),
                access_type: Some(AccessType::Mount(MountVolume::default())),
            }],
            parameters: [("policy".to_string(), "none".to_string())].into(),
            ..CreateVolumeRequest::default()
        })
        .await
        .expect("CreateVolume over HTTPS")
        .into_inner();
    let volume = created.volume.expect("a volume");
    assert_eq!(volume.capacity_bytes, GIB as i64);
    let (status, body) = app.get("/volumes").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body.as_array().map(Vec::len), Some(1), "{body}");
}
