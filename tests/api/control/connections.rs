//! Connections under attack, against the real `svs serve`: slow HTTP
//! clients are cut at the header timeout, the connection cap makes new
//! clients wait rather than fail, and idle NBD connections from one peer (or
//! from a stranger) cannot lock attached hosts out.

use crate::harness::attach::{attach, run_qemu_io};
use crate::harness::*;
use reqwest::StatusCode;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn http_addr(app: &TestApp) -> SocketAddr {
    app.base
        .trim_start_matches("http://")
        .parse()
        .expect("http address")
}

fn nbd_addr(app: &TestApp) -> SocketAddr {
    app.nbd_base
        .trim_start_matches("nbd://")
        .parse()
        .expect("nbd address")
}

/// Reads until the server closes the connection (EOF or reset); returns
/// how long that took, or `None` if it is still open after `limit`.
async fn closed_within(s: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        let left = limit.checked_sub(started.elapsed())?;
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

/// One `GET /version` on a connection of its own, answered in full.
async fn raw_version(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).await.expect("connects");
    s.write_all(b"GET /version HTTP/1.1\r\nhost: svs\r\nconnection: close\r\n\r\n")
        .await
        .expect("request sent");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut answer))
        .await
        .expect("answered within 10 s")
        .expect("answer read");
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn a_slow_header_connection_is_closed_within_the_header_timeout_while_version_answers() {
    let mut app = TestApp::start().await;
    app.restart_with_setting("http_header_read_timeout = \"1s\"");
    let addr = http_addr(&app);

    // A slowloris: the request line, then a header a byte every 100 ms.
    let mut slow = TcpStream::connect(addr).await.expect("connects");
    let started = Instant::now();
    slow.write_all(b"GET /version HTTP/1.1\r\nhost: svs\r\nx-slow: ")
        .await
        .expect("sent");
    let trickle = tokio::spawn(async move {
        let mut buf = [0u8; 256];
        loop {
            if slow.write_all(b"a").await.is_err() {
                return started.elapsed();
            }
            match tokio::time::timeout(Duration::from_millis(100), slow.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return started.elapsed(),
                _ if started.elapsed() > Duration::from_secs(10) => return started.elapsed(),
                _ => {}
            }
        }
    });

    // Meanwhile the API answers at once.
    while !trickle.is_finished() {
        let asked = Instant::now();
        let (status, body) = app
            .request(None, reqwest::Method::GET, "/version", None)
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(asked.elapsed() < Duration::from_millis(500));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let closed_after = trickle.await.expect("trickle task");
    assert!(
        closed_after >= Duration::from_millis(900) && closed_after < Duration::from_secs(3),
        "the slow connection was closed after {closed_after:?}"
    );

    // A connection that says nothing at all is closed the same way.
    let mut silent = TcpStream::connect(addr).await.expect("connects");
    let waited = closed_within(&mut silent, Duration::from_secs(5)).await;
    assert!(
        waited.is_some_and(|w| w >= Duration::from_millis(900)),
        "{waited:?}"
    );
}

#[tokio::test]
async fn beyond_the_connection_cap_a_new_client_waits_for_a_free_slot() {
    let mut app = TestApp::start().await;
    app.restart_with_setting("http_max_connections = 2\nhttp_header_read_timeout = \"1s\"");
    let addr = http_addr(&app);
    // Give the harness's pooled connections (to the previous process) time
    // to go; then two silent connections take both slots.
    let _a = TcpStream::connect(addr).await.expect("connects");
    let _b = TcpStream::connect(addr).await.expect("connects");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let answer = raw_version(addr).await;
    let waited = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // Not refused: it waited in the listen queue until the header timeout
    // closed a silent connection.
    assert!(
        waited >= Duration::from_millis(700) && waited < Duration::from_secs(5),
        "answered after {waited:?}"
    );
}

/// `n` NBD connections from `local` (a loopback alias) that say nothing.
async fn idle_from(local: &str, addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut all = Vec::with_capacity(n);
    for _ in 0..n {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(SocketAddr::new(local.parse().expect("ip"), 0))
            .expect("bind");
        all.push(socket.connect(addr).await.expect("connects"));
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hundred_idle_nbd_connections_do_not_lock_an_attached_host_out() {
    // host-1 attaches from 127.0.0.1, host-2 from 127.0.0.2; 127.0.0.3 is
    // no node at all.
    let app = TestApp::start_with(TestConfig {
        nodes: vec![("host-1", "127.0.0.1"), ("host-2", "127.0.0.2")],
        ..movement_topology("0")
    })
    .await;
    app.create_policy("none", 0, 0, 0).await;
    app.create_volume("v", 1, "none").await;
    let a = attach(&app, "v", "host-1", false).await;
    let uri = a["uri"].as_str().unwrap_or_default().to_string();
    attach(&app, "v", "host-2", true).await;
    let nbd = nbd_addr(&app);

    // 300 from a stranger: each closed at once, before any greeting.
    let mut strangers = idle_from("127.0.0.3", nbd, 300).await;
    for s in strangers.iter_mut() {
        let closed = closed_within(s, Duration::from_secs(5)).await;
        assert!(closed.is_some(), "a stranger's connection stays open");
    }
    // 300 from an attached host: it keeps at most its per-peer share.
    let _hogs = idle_from("127.0.0.2", nbd, 300).await;

    let started = Instant::now();
    let commands = ["write -P 0x5a 0 64k", "read -P 0x5a 0 64k", "flush"].map(String::from);
    let out = run_qemu_io(&uri, &commands, false);
    assert!(out.is_ok(), "{out:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}
