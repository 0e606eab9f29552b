//! Refusals, bad frames, nodes that stop answering or go away, limits and
//! shutdown. The raw frames here are written from the crate's documented
//! wire format, not from its code.

mod common;

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{hello_reply, node, silent_node, slice, Node, CREDENTIAL};
use svs_sliceproto::{remote_error, ServerConfig, SliceClient, Status, PROTOCOL_VERSION};

fn hello(version: u16, credential: &str, name: &str) -> Vec<u8> {
    let mut b = b"SVSSLICE".to_vec();
    b.extend_from_slice(&version.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&(credential.len() as u16).to_le_bytes());
    b.extend_from_slice(&(name.len() as u16).to_le_bytes());
    b.extend_from_slice(credential.as_bytes());
    b.extend_from_slice(name.as_bytes());
    b
}

/// (status, max payload, message)
fn read_hello_reply(s: &mut TcpStream) -> (u16, u32, String) {
    let mut h = [0u8; 18];
    s.read_exact(&mut h).unwrap();
    assert_eq!(&h[..8], b"SVSSLICE");
    let status = u16::from_le_bytes([h[10], h[11]]);
    let max = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
    let mut message = vec![0u8; u16::from_le_bytes([h[16], h[17]]) as usize];
    s.read_exact(&mut message).unwrap();
    (status, max, String::from_utf8(message).unwrap())
}

fn request(op: u16, id: u64, medium: &str, volume: &str, payload_len: u32) -> Vec<u8> {
    let mut b = b"SVSQ".to_vec();
    b.extend_from_slice(&op.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&id.to_le_bytes());
    b.extend_from_slice(&[0u8; 32]); // epoch and args
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&(medium.len() as u16).to_le_bytes());
    b.extend_from_slice(&(volume.len() as u16).to_le_bytes());
    b.extend_from_slice(&payload_len.to_le_bytes());
    b.extend_from_slice(medium.as_bytes());
    b.extend_from_slice(volume.as_bytes());
    b
}

/// (status, id, message, payload)
fn read_reply(s: &mut TcpStream) -> (u16, u64, String, Vec<u8>) {
    let mut h = [0u8; 24];
    s.read_exact(&mut h).unwrap();
    assert_eq!(&h[..4], b"SVSR");
    let status = u16::from_le_bytes([h[4], h[5]]);
    let message_len = u16::from_le_bytes([h[6], h[7]]) as usize;
    let id = u64::from_le_bytes(h[8..16].try_into().unwrap());
    let payload_len = u32::from_le_bytes(h[16..20].try_into().unwrap()) as usize;
    let mut message = vec![0u8; message_len];
    s.read_exact(&mut message).unwrap();
    let mut payload = vec![0u8; payload_len];
    s.read_exact(&mut payload).unwrap();
    (status, id, String::from_utf8(message).unwrap(), payload)
}

fn raw_client(node: &Node) -> TcpStream {
    let mut s = TcpStream::connect(node.server.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&hello(PROTOCOL_VERSION, CREDENTIAL, "raw"))
        .unwrap();
    assert_eq!(read_hello_reply(&mut s).0, 0);
    s
}

fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.read(&mut b), Ok(0) | Err(_))
}

#[test]
fn a_bad_credential_is_refused_at_hello_with_a_clear_message() {
    let node = node();
    let addr = node.server.local_addr();
    let e = SliceClient::connect(addr, "wrong", "front-1", common::TIMEOUT)
        .err()
        .expect("refused");
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
    let remote = remote_error(&e).expect("the node's answer");
    assert_eq!(remote.status, Status::Unauthorized);
    assert!(remote.message.contains("unknown or revoked"), "{remote}");

    // Another protocol version is refused too, in words.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&hello(99, CREDENTIAL, "future")).unwrap();
    let (status, _, message) = read_hello_reply(&mut s);
    assert_eq!(status, Status::UnsupportedVersion.code());
    assert!(message.contains("version 99"), "{message}");
    assert!(closed(&mut s));
}

#[test]
fn oversized_and_garbled_frames_are_refused_without_a_panic() {
    let node = node();
    let addr = node.server.local_addr();

    // A hello claiming a huge credential: refused before reading it.
    let mut s = TcpStream::connect(addr).unwrap();
    let mut h = hello(PROTOCOL_VERSION, "", "x");
    h[12..14].copy_from_slice(&60000u16.to_le_bytes());
    s.write_all(&h[..16]).unwrap();
    let (status, _, message) = read_hello_reply(&mut s);
    assert_eq!(status, Status::BadRequest.code());
    assert!(message.contains("credential of 60000 bytes"), "{message}");

    // Not a request at all: refused, then the connection closes.
    let mut s = raw_client(&node);
    s.write_all(&[0xAB; 64]).unwrap();
    let (status, _, message, _) = read_reply(&mut s);
    assert_eq!(status, Status::BadRequest.code());
    assert!(message.contains("bad request magic"), "{message}");
    assert!(closed(&mut s));

    // A payload over the max: refused by its header, never read.
    let mut s = raw_client(&node);
    s.write_all(&request(4, 77, "m1", "vol-1", u32::MAX))
        .unwrap();
    let (status, id, message, _) = read_reply(&mut s);
    assert_eq!((status, id), (Status::BadRequest.code(), 77));
    assert!(message.contains("over the max payload"), "{message}");
    assert!(closed(&mut s));

    // Well framed but unknown op, or a payload where none belongs: refused,
    // and the connection goes on.
    let mut s = raw_client(&node);
    s.write_all(&request(999, 1, "m1", "vol-1", 0)).unwrap();
    let (status, id, message, _) = read_reply(&mut s);
    assert_eq!((status, id), (Status::BadRequest.code(), 1));
    assert!(message.contains("unknown op code 999"), "{message}");
    let mut r = request(1, 2, "m1", "vol-1", 3);
    r.extend_from_slice(b"abc");
    s.write_all(&r).unwrap();
    let (status, id, message, _) = read_reply(&mut s);
    assert_eq!((status, id), (Status::BadRequest.code(), 2));
    assert!(message.contains("carries no payload"), "{message}");
    s.write_all(&request(1, 3, "m1", "vol-1", 0)).unwrap();
    let (status, id, _, _) = read_reply(&mut s);
    assert_eq!((status, id), (2, 3), "ENOENT: no such slice, but answered");

    // A frame cut short: the node just sees the client go.
    let mut s = raw_client(&node);
    s.write_all(&request(1, 4, "m1", "vol-1", 0)[..30]).unwrap();
    drop(s);

    // The node still serves.
    let c = node.client();
    c.create_slice(&slice(), 4096).unwrap();
    assert_eq!(c.size(&slice()).unwrap(), 4096);
}

#[test]
fn a_node_that_stops_answering_fails_requests_with_timed_out_within_the_timeout() {
    let (addr, node) = silent_node();
    let timeout = Duration::from_millis(300);
    let c = Arc::new(SliceClient::connect(addr, CREDENTIAL, "front-1", timeout).unwrap());
    let started = Instant::now();
    let waiting: Vec<_> = (0..4)
        .map(|i| {
            let c = Arc::clone(&c);
            std::thread::spawn(move || c.write(&slice(), 1, i * 4096, &[1u8; 4096]))
        })
        .collect();
    for t in waiting {
        let e = t.join().unwrap().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(remote_error(&e).is_none(), "not an error of the slice");
    }
    let elapsed = started.elapsed();
    assert!(elapsed >= timeout, "{elapsed:?}");
    assert!(elapsed < timeout * 4, "{elapsed:?}");
    assert!(c.is_broken());
    // Later requests fail at once.
    let e = c.size(&slice()).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    drop(c);
    node.join().unwrap();

    // Also when the backend hangs behind a live server.
    let node = common::node();
    let c = node.client_with_timeout(timeout);
    c.create_slice(&slice(), 4096).unwrap();
    node.backend.set_stalled(true);
    let started = Instant::now();
    let e = c.size(&slice()).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    assert!(started.elapsed() < timeout * 4);
    node.backend.set_stalled(false);

    // A listener that never says hello: connecting times out.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let e = SliceClient::connect(listener.local_addr().unwrap(), CREDENTIAL, "f", timeout)
        .err()
        .expect("no hello");
    assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
}

#[test]
fn a_dropped_connection_fails_every_pending_request_at_once() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let node = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut h = [0u8; 16];
        s.read_exact(&mut h).unwrap();
        let rest = u16::from_le_bytes([h[12], h[13]]) + u16::from_le_bytes([h[14], h[15]]);
        s.read_exact(&mut vec![0u8; rest as usize]).unwrap();
        s.write_all(&hello_reply(1 << 20)).unwrap();
        // Takes 4 requests (64-byte headers, 2 + 5 name bytes), then goes.
        s.read_exact(&mut vec![0u8; 4 * (64 + 7)]).unwrap();
    });
    let c = Arc::new(
        SliceClient::connect(addr, CREDENTIAL, "front-1", Duration::from_secs(30)).unwrap(),
    );
    let started = Instant::now();
    let waiting: Vec<_> = (0..4)
        .map(|_| {
            let c = Arc::clone(&c);
            std::thread::spawn(move || c.size(&slice()))
        })
        .collect();
    for t in waiting {
        let e = t.join().unwrap().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe, "{e}");
        assert!(remote_error(&e).is_none());
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(c.is_broken());
    node.join().unwrap();
}

#[test]
fn connections_over_the_limit_are_closed_and_shutdown_ends_the_others() {
    let node = Node::start(ServerConfig {
        max_connections: 1,
        ..ServerConfig::default()
    });
    let c = node.client();
    c.create_slice(&slice(), 4096).unwrap();
    let e = SliceClient::connect(
        node.server.local_addr(),
        CREDENTIAL,
        "second",
        common::TIMEOUT,
    )
    .err()
    .expect("over the limit");
    assert_eq!(e.kind(), io::ErrorKind::ConnectionAborted, "{e}");
    assert_eq!(node.server.connection_count(), 1);

    let started = Instant::now();
    node.server.shutdown();
    assert!(started.elapsed() < Duration::from_secs(2));
    let e = c.size(&slice()).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::BrokenPipe, "{e}");
}

/// A node that takes the hello, answers it with `hello`, reads one request
/// and answers it with `reply`.
fn node_answering(hello: Vec<u8>, reply: Vec<u8>) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut h = [0u8; 16];
        s.read_exact(&mut h).unwrap();
        let rest = u16::from_le_bytes([h[12], h[13]]) + u16::from_le_bytes([h[14], h[15]]);
        s.read_exact(&mut vec![0u8; rest as usize]).unwrap();
        s.write_all(&hello).unwrap();
        let mut request = [0u8; 64 + 7];
        if s.read_exact(&mut request).is_ok() {
            let _ = s.write_all(&reply);
        }
        let mut sink = [0u8; 4096];
        while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
    });
    addr
}

fn reply_header(status: u16, message_len: u16, id: u64, payload_len: u32) -> Vec<u8> {
    let mut b = b"SVSR".to_vec();
    b.extend_from_slice(&status.to_le_bytes());
    b.extend_from_slice(&message_len.to_le_bytes());
    b.extend_from_slice(&id.to_le_bytes());
    b.extend_from_slice(&payload_len.to_le_bytes());
    b.extend_from_slice(&[0u8; 4]);
    b
}

#[test]
fn garbled_or_oversized_replies_break_the_connection_without_a_panic() {
    let timeout = Duration::from_secs(5);
    let cases = [
        (vec![0xCD; 24], "bad reply magic"),
        // A payload of 4 GiB claimed: refused before reading it.
        (reply_header(0, 0, 1, u32::MAX), "reply of 4294967295 bytes"),
        (reply_header(0, 5000, 1, 0), "reply message of 5000 bytes"),
        (reply_header(0, 0, 99, 0), "unknown request 99"),
        // A size is 8 bytes.
        (
            [reply_header(0, 0, 1, 3), vec![1, 2, 3]].concat(),
            "not one u64",
        ),
    ];
    for (reply, why) in cases {
        let addr = node_answering(hello_reply(1 << 20), reply);
        let c = SliceClient::connect(addr, CREDENTIAL, "front-1", timeout).unwrap();
        let e = c.size(&slice()).unwrap_err();
        assert!(e.to_string().contains(why), "{why}: {e}");
        assert!(remote_error(&e).is_none());
    }

    // A hello reply announcing an absurd max payload is refused.
    let mut hello = hello_reply(0);
    hello[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    let addr = node_answering(hello, Vec::new());
    let e = SliceClient::connect(addr, CREDENTIAL, "front-1", timeout)
        .err()
        .expect("refused");
    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    assert!(e.to_string().contains("max payload"), "{e}");
}
