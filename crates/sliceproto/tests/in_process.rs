//! The in-process client of a node's own slice server: the same answers
//! and the same epoch fence as a client over TCP, shared with it.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::{node, slice, Node, TIMEOUT};
use svs_sliceproto::{remote_error, EpochStore, ServerConfig, SliceName, Status};

#[test]
fn an_in_process_client_answers_as_a_remote_one_and_shares_the_fence() {
    let node = node();
    let local = Arc::new(node.server.in_process_client(TIMEOUT));
    let remote = node.client();
    let s = slice();
    local.create_slice(&s, 1 << 20).expect("create");
    local.write(&s, 3, 4096, &[7u8; 8192]).expect("write");
    local.sync(&s, 3).expect("sync");
    let mut buf = vec![0u8; 3 * 4096];
    remote.read(&s, 0, &mut buf).expect("read over TCP");
    assert!(buf[..4096].iter().all(|&b| b == 0));
    assert!(buf[4096..].iter().all(|&b| b == 7));
    local.read(&s, 0, &mut buf).expect("read in process");
    assert!(buf[4096..].iter().all(|&b| b == 7));
    assert_eq!(node.epochs.highest("vol-1").expect("epoch"), 3);

    // A newer front over TCP fences the in-process one, and the other way.
    remote.write(&s, 4, 0, &[1u8; 4096]).expect("epoch 4");
    let changes = node.backend.changes.load(Ordering::SeqCst);
    let e = local.write(&s, 3, 0, &[2u8; 4096]).expect_err("stale");
    assert_eq!(remote_error(&e).map(|r| r.status), Some(Status::StaleEpoch));
    assert_eq!(node.backend.changes.load(Ordering::SeqCst), changes);
    local.write(&s, 5, 0, &[3u8; 4096]).expect("epoch 5");
    let e = remote.write(&s, 4, 0, &[4u8; 4096]).expect_err("stale");
    assert_eq!(remote_error(&e).map(|r| r.status), Some(Status::StaleEpoch));
    assert_eq!(node.backend.bytes(&s).expect("slice")[..4096], [3u8; 4096]);
    // A digested write runs at once in process, fenced as any write.
    let mut writes = local.write_digests(s.clone(), 5);
    writes.send(8192, &[6u8; 4096], 11);
    let digests = writes.finish().expect("digested write");
    assert_eq!(
        digests,
        vec![remote.range_digest(&s, 8192, 4096, 11).expect("digest")]
    );
    let mut writes = local.write_digests(s.clone(), 4);
    writes.send(8192, &[8u8; 4096], 11);
    let e = writes.finish().expect_err("stale");
    assert_eq!(remote_error(&e).map(|r| r.status), Some(Status::StaleEpoch));
    assert_eq!(
        node.backend.bytes(&s).expect("slice")[8192..12288],
        [6u8; 4096]
    );

    // An error of the slice comes back as the node's answer.
    let missing = SliceName::new("m1", "vol-9", 0, 0);
    let e = local.size(&missing).expect_err("no such slice");
    assert_eq!(
        remote_error(&e).map(|r| r.status),
        Some(Status::Errno(libc::ENOENT as u16)),
        "{e}"
    );
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
}

#[test]
fn reads_beyond_the_max_payload_come_in_parts_and_a_stopped_server_fails_every_request() {
    let node = Node::start(ServerConfig {
        max_payload: 64 * 1024,
        ..ServerConfig::default()
    });
    let local = node.server.in_process_client(TIMEOUT);
    let s = slice();
    local.create_slice(&s, 1 << 20).expect("create");
    let data: Vec<u8> = (0..200 * 1024).map(|i| (i % 251) as u8).collect();
    local
        .write(&s, 1, 0, &data)
        .expect("write over the max payload");
    local.create_snapshot(&s, 1, 9).expect("snapshot");
    let mut back = vec![0u8; data.len()];
    local.read(&s, 0, &mut back).expect("read");
    assert_eq!(back, data);
    local
        .read_snapshot(&s, 9, 0, &mut back)
        .expect("snapshot read in parts");
    assert_eq!(back, data);
    // A copy reads a snapshot's saved chunks in process too.
    let mut chunk = vec![0u8; 4096];
    local
        .read_snapshot_chunk(&s, 9, 2, &mut chunk)
        .expect("snapshot chunk");
    assert_eq!(chunk, data[2 * 4096..3 * 4096]);

    assert!(!local.is_broken());
    node.server.shutdown();
    assert!(local.is_broken());
    let e = local.read(&s, 0, &mut back).expect_err("stopped");
    assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
}
