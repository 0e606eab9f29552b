//! Issue 24: `GET /metrics`, scraped by a real Prometheus while `qemu-io`
//! writes to a volume, checked by `promtool`, guarded like the rest of the
//! API, and bounded whatever clients send.

use crate::harness::attach::{attach, qemu_io, topology, uri};
use crate::harness::storage_nodes::free_port;
use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SCRAPE_TOKEN: &str = "scrape-token-0123456789abcdef";

fn metrics_config(settings: &[String]) -> TestConfig {
    let mut config = topology("0");
    config
        .settings
        .push(format!("metrics_token = \"{SCRAPE_TOKEN}\""));
    config.settings.extend(settings.iter().cloned());
    config
}

/// `GET /metrics` with `authorization`: its status, content type and text.
async fn scrape_at(base: &str, authorization: Option<&str>) -> (StatusCode, String, String) {
    let mut request = reqwest::Client::new().get(format!("{base}/metrics"));
    if let Some(a) = authorization {
        request = request.header("authorization", a);
    }
    let response = request.send().await.expect("scrape sent");
    let status = response.status();
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (status, kind, response.text().await.expect("scrape read"))
}

async fn scrape(app: &TestApp) -> String {
    let (status, _, text) = scrape_at(&app.base, Some(&format!("Bearer {SCRAPE_TOKEN}"))).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    text
}

/// Every sample of the text format: (name, labels) → value.
fn samples(text: &str) -> BTreeMap<(String, BTreeMap<String, String>), f64> {
    let mut found = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, value) = line.rsplit_once(' ').expect("a sample line");
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        let labels: BTreeMap<String, String> = labels
            .split("\",")
            .filter(|l| !l.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once('=').expect("label=value");
                (k.to_string(), v.trim_matches('"').to_string())
            })
            .collect();
        let value = value.parse::<f64>().expect("a number");
        found.insert((name.to_string(), labels), value);
    }
    found
}

/// The value of `name` with (at least) `labels`, summed over the rest.
fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let matching: Vec<f64> = samples(text)
        .into_iter()
        .filter(|((n, l), _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, v)| v)
        .collect();
    (!matching.is_empty()).then(|| matching.iter().sum())
}

/// `promtool check metrics` on `text`: Ok, or what it said.
fn promtool_check(text: &str) -> Result<(), String> {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs (scripts/test.sh installs Debian's prometheus)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("scrape written to promtool");
    let out = child.wait_with_output().expect("promtool ends");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The scrape token or an administrator's IdToken; anyone else gets the
/// API's JSON errors. `metrics_listen` serves the metrics without a token
/// and nothing else. The scrape passes `promtool check metrics`. A scrape
/// token too short to be one stops the start.
#[tokio::test]
async fn metrics_take_an_administrator_or_the_scrape_token_and_pass_promtool() {
    let listen = format!("127.0.0.1:{}", free_port("127.0.0.1"));
    let app =
        TestApp::start_with(metrics_config(&[format!("metrics_listen = \"{listen}\"")])).await;
    let (status, kind, text) = scrape_at(&app.base, Some(&app.token)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(kind, "text/plain; version=0.0.4; charset=utf-8");
    promtool_check(&text).unwrap_or_else(|e| panic!("promtool check metrics: {e}\n{text}"));
    for name in [
        "svs_medium_size_bytes",
        "svs_medium_free_bytes",
        "svs_node_size_bytes",
        "svs_volumes",
        "svs_http_requests_total",
        "process_resident_memory_bytes",
    ] {
        assert!(value(&text, name, &[]).is_some(), "{name} in\n{text}");
    }

    let user = app.user_in_tenant("other", "reader@example.com").await;
    for (authorization, expected, message) in [
        (None, StatusCode::UNAUTHORIZED, None),
        (
            Some("Bearer not-the-scrape-token-at-all"),
            StatusCode::UNAUTHORIZED,
            None,
        ),
        (Some(user.as_str()), StatusCode::FORBIDDEN, None),
        (
            Some(&*format!("Bearer {SCRAPE_TOKEN}")),
            StatusCode::OK,
            None::<&str>,
        ),
    ] {
        let (status, kind, body) = scrape_at(&app.base, authorization).await;
        assert_eq!(status, expected, "{authorization:?}: {body}");
        if expected != StatusCode::OK {
            assert_eq!(kind, "application/json", "{body}");
            let body: Value = serde_json::from_str(&body).expect("a JSON error");
            assert!(body["message"].is_string(), "{body}");
            if let Some(message) = message {
                assert_eq!(body["message"], message);
            }
        }
    }

    let base = format!("http://{listen}");
    let (status, _, text) = scrape_at(&base, None).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    promtool_check(&text).unwrap_or_else(|e| panic!("promtool check metrics: {e}"));
    let other = reqwest::get(format!("{base}/volumes")).await.expect("sent");
    assert_eq!(other.status(), StatusCode::NOT_FOUND);
    let body: Value = other.json().await.expect("JSON");
    assert_eq!(body, json!({"message": "no such route"}));

    let mut short = TestApp::configured(TestConfig {
        settings: vec!["metrics_token = \"short\"".into()],
        ..topology("0")
    });
    let refused = short.launch().expect_err("a short scrape token is refused");
    assert!(
        refused.contains("configuration: metrics_token must be at least 16 characters"),
        "{refused}"
    );
}

/// `prometheus` from Debian, scraping `target` every second with the
/// scrape token; killed (and its directory removed) when dropped.
struct Prometheus {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: &str) -> Prometheus {
        let dir = tempfile::tempdir().expect("temp dir");
        let token = dir.path().join("token");
        std::fs::write(&token, SCRAPE_TOKEN).expect("token written");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: svs\n    metrics_path: /metrics\n\
                 \x20   authorization:\n      type: Bearer\n      credentials_file: {}\n\
                 \x20   static_configs:\n      - targets: ['{target}']\n",
                token.display()
            ),
        )
        .expect("config written");
        let listen = format!("127.0.0.1:{}", free_port("127.0.0.1"));
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={listen}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus starts (scripts/test.sh installs Debian's prometheus)");
        Prometheus {
            child,
            base: format!("http://{listen}"),
            _dir: dir,
        }
    }

    /// The value of an instant query with one series, once Prometheus has
    /// one.
    async fn query(&self, query: &str) -> Option<f64> {
        let response = reqwest::Client::new()
            .get(format!("{}/api/v1/query", self.base))
            .query(&[("query", query)])
            .send()
            .await
            .ok()?;
        let body: Value = response.json().await.ok()?;
        let result = body["data"]["result"].as_array()?;
        let [series] = result.as_slice() else {
            return None;
        };
        series["value"][1].as_str()?.parse().ok()
    }

    /// Waits until `query` answers `expected`; panics with the last
    /// answer after 60 s.
    async fn wait_for(&self, query: &str, expected: f64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let got = self.query(query).await;
            if got == Some(expected) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "Prometheus answers {got:?} to {query}, not {expected}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes per qemu-io run, their size, and the runs.
const WRITES: u64 = 50;
const WRITE_SIZE: u64 = 64 * 1024;
const RUNS: u64 = 4;

/// A real Prometheus scrapes svs (with the scrape token) every second
/// while `qemu-io` writes to a volume over NBD: it finds the volume's
/// write operations and bytes as written (once the next scrape has them),
/// the jobs that ran, and the media's sizes and allocations as the API
/// shows them.
#[tokio::test]
async fn a_real_prometheus_scrapes_volume_io_jobs_and_media() {
    let app = TestApp::start_with(metrics_config(&[])).await;
    let prometheus = Prometheus::start(app.base.trim_start_matches("http://"));
    app.create_policy("mirror", 1, 1, 0).await;
    let (_, job) = app.create_volume("v", 4, "mirror").await;
    assert_eq!(job["state"], "Done", "{job}");
    let a = attach(&app, "v", "host-1", false).await;
    let nbd = uri(&a);

    // qemu-io in runs a second apart, so that scrapes fall between them.
    let writer = std::thread::spawn(move || {
        for run in 0..RUNS {
            let commands: Vec<String> = (0..WRITES)
                .map(|i| {
                    let offset = (run * WRITES + i) * WRITE_SIZE;
                    format!("write -P 0x5a {offset} {WRITE_SIZE}")
                })
                .collect();
            qemu_io(&nbd, &commands)?;
            std::thread::sleep(Duration::from_secs(1));
        }
        Ok::<(), String>(())
    });
    let up = "up{job=\"svs\"}";
    prometheus.wait_for(up, 1.0).await;
    writer
        .join()
        .expect("writer thread")
        .expect("every write acknowledged");

    let writes = (RUNS * WRITES) as f64;
    prometheus
        .wait_for("svs_volume_write_operations_total{volume=\"v\"}", writes)
        .await;
    prometheus
        .wait_for(
            "svs_volume_written_bytes_total{volume=\"v\"}",
            writes * WRITE_SIZE as f64,
        )
        .await;
    // Each qemu-io run flushes as it closes the export.
    let flushes = prometheus
        .query("svs_volume_flush_operations_total{volume=\"v\"}")
        .await;
    assert!(flushes.is_some_and(|f| f >= RUNS as f64), "{flushes:?}");
    let latency = prometheus
        .query("svs_volume_io_duration_seconds_count{volume=\"v\",op=\"write\"}")
        .await;
    assert_eq!(latency, Some(writes));
    prometheus
        .wait_for(
            "sum(svs_jobs_finished_total{kind=\"volume_create\",outcome=\"done\"})",
            1.0,
        )
        .await;
    prometheus
        .wait_for(
            "sum(svs_jobs_finished_total{kind=\"attachment_create\",outcome=\"done\"})",
            1.0,
        )
        .await;

    // The media as the API shows them, in bytes.
    let (status, media) = app.get("/media").await;
    assert_eq!(status, StatusCode::OK, "{media}");
    let media = media.as_array().cloned().unwrap_or_default();
    assert!(!media.is_empty());
    for m in &media {
        let id = m["mediaid"].as_str().expect("mediaid");
        let gib = |field: &str| m[field].as_u64().expect(field) as f64 * (1u64 << 30) as f64;
        prometheus
            .wait_for(
                &format!("svs_medium_size_bytes{{medium=\"{id}\"}}"),
                gib("size"),
            )
            .await;
        prometheus
            .wait_for(
                &format!("svs_medium_allocated_bytes{{medium=\"{id}\"}}"),
                gib("allocatedsize"),
            )
            .await;
        prometheus
            .wait_for(
                &format!("svs_medium_free_bytes{{medium=\"{id}\"}}"),
                gib("freesize"),
            )
            .await;
    }
    // Two copies of a 4 GiB volume are placed somewhere.
    prometheus
        .wait_for("sum(svs_medium_allocated_bytes)", 8.0 * (1u64 << 30) as f64)
        .await;
    // And the console's samples saw the writes too (every 5 s).
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (status, samples) = app.get("/volumes/v/iostats").await;
        assert_eq!(status, StatusCode::OK, "{samples}");
        let written: f64 = samples
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|s| s["writeiops"].as_f64().unwrap_or(0.0))
            .sum();
        if written > 0.0 {
            // Each period with writes has their mean latency, one without none.
            for s in samples.as_array().cloned().unwrap_or_default() {
                let writes = s["writeiops"].as_f64().unwrap_or(0.0);
                let latency = s["writelatencyus"].as_f64();
                assert_eq!(writes > 0.0, latency.is_some_and(|us| us > 0.0), "{s}");
            }
            break;
        }
        assert!(Instant::now() < deadline, "no I/O in {samples}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let (status, body) = app.get("/volumes/nope/iostats").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}

/// A volume whose front runs on a storage node (`fronts = "nodes"`): the
/// node counts its NBD I/O and reports it in its heartbeat, and `svs
/// serve`'s scrape has it under the volume's name.
#[tokio::test]
async fn a_front_on_a_storage_node_reports_its_volume_s_io() {
    let (app, nodes) = crate::harness::front_on_node::three_nodes(&[&format!(
        "metrics_token = \"{SCRAPE_TOKEN}\""
    )])
    .await;
    app.create_volume_done(json!({"name": "v", "size": 1, "policy": "three"}))
        .await;
    let a = attach(&app, "v", "host-1", false).await;
    let nbd = uri(&a);
    assert!(
        !nbd.contains(app.nbd_base.trim_start_matches("nbd://")),
        "the front is on a storage node: {nbd}"
    );
    let commands: Vec<String> = (0..WRITES)
        .map(|i| format!("write -P 0x5a {} {WRITE_SIZE}", i * WRITE_SIZE))
        .collect();
    let written = qemu_io(&nbd, &commands);
    assert!(written.is_ok(), "{written:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = scrape(&app).await;
        let writes = value(
            &text,
            "svs_volume_write_operations_total",
            &[("volume", "v")],
        );
        let bytes = value(&text, "svs_volume_written_bytes_total", &[("volume", "v")]);
        if writes == Some(WRITES as f64) {
            assert_eq!(bytes, Some((WRITES * WRITE_SIZE) as f64), "{text}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the node's report never came: {writes:?}\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    drop(nodes);
}

/// The series of a scrape: names and label sets, without values.
fn series(text: &str) -> BTreeSet<(String, BTreeMap<String, String>)> {
    samples(text).into_keys().collect()
}

/// The bound: 10,000 distinct paths no route matches and 1,000 more
/// volumes (with no I/O served) add no series at all to the scrape (the
/// paths all count under `route="unmatched"`, volumes without I/O are only
/// counted in `svs_volumes`), so it only grows by the digits of its
/// counters: under 2 KiB here.
#[tokio::test]
async fn bad_paths_and_a_thousand_volumes_do_not_grow_the_scrape() {
    let app = TestApp::start_with(TestConfig {
        media: vec![medium("big", "node-a", "zone-a", 2000)],
        ..metrics_config(&[])
    })
    .await;
    app.create_policy("single", 0, 0, 0).await;
    // Every route and status the flood uses, once, before the baseline.
    let (_, job) = app.create_volume("w-0", 1, "single").await;
    assert_eq!(job["state"], "Done", "{job}");
    let (status, _) = app.get("/bad-path-warm-up").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    scrape(&app).await;
    let before = scrape(&app).await;

    let bad = bad_paths(&app.base, 10_000).await;
    assert_eq!(bad, 10_000, "every bad path answered 404");
    let mut jobs = Vec::new();
    for batch in 0..100 {
        let posts: Vec<_> = (1..=10)
            .map(|i| {
                let (client, base, token) =
                    (app.client.clone(), app.base.clone(), app.token.clone());
                let name = format!("w-{}", batch * 10 + i);
                tokio::spawn(async move {
                    let response = client
                        .post(format!("{base}/volumes"))
                        .header("authorization", token)
                        .json(&json!({"name": name, "size": 1, "policy": "single"}))
                        .send()
                        .await
                        .expect("sent");
                    assert_eq!(response.status(), StatusCode::OK);
                    response.json::<Value>().await.expect("JSON")
                })
            })
            .collect();
        for post in posts {
            jobs.push(post.await.expect("creation task"));
        }
    }
    for accepted in &jobs {
        let job = app.wait_job_of(accepted).await;
        assert_eq!(job["state"], "Done", "{job}");
    }
    let after = scrape(&app).await;
    assert_eq!(
        value(&after, "svs_volumes", &[("state", "healthy")]),
        Some(1001.0)
    );
    let (old, new) = (series(&before), series(&after));
    let added: Vec<_> = new.difference(&old).collect();
    assert!(added.is_empty(), "new series: {added:?}");
    assert!(
        after.len() < before.len() + 2048,
        "{} bytes after, {} before",
        after.len(),
        before.len()
    );
    assert!(!after.contains("bad-path"), "a raw path in the scrape");
    let unmatched = value(
        &after,
        "svs_http_requests_total",
        &[("route", "unmatched"), ("status", "404")],
    );
    assert_eq!(unmatched, Some(10_001.0));
}

/// Sends `count` GET requests to distinct paths no route matches, 32 at a
/// time; how many answered 404.
async fn bad_paths(base: &str, count: usize) -> usize {
    let client = reqwest::Client::new();
    let mut answered = 0;
    for chunk in (0..count).collect::<Vec<_>>().chunks(32) {
        let requests: Vec<_> = chunk
            .iter()
            .map(|i| {
                let request = client.get(format!("{base}/bad-path-{i}/{}", i * 7919 % 104_729));
                tokio::spawn(async move { request.send().await.map(|r| r.status()) })
            })
            .collect();
        for request in requests {
            if request
                .await
                .expect("request task")
                .is_ok_and(|s| s == StatusCode::NOT_FOUND)
            {
                answered += 1;
            }
        }
    }
    answered
}
