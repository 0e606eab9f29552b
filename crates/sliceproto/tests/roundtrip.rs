//! Every op over real TCP against the in-memory backend, many in flight
//! at once on one connection, and the epoch fence.

mod common;

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{node, slice, Node};
use svs_sliceproto::{
    remote_error, EpochStore, MapTail, ServerConfig, SliceName, SnapshotInfo, Status, StoredSlice,
};

const MIB: u64 = 1024 * 1024;

#[test]
fn every_op_round_trips() {
    let node = node();
    let c = node.client();
    let s = slice();
    c.create_slice(&s, MIB).unwrap();
    assert_eq!(c.size(&s).unwrap(), MIB);
    c.grow_slice(&s, 2 * MIB).unwrap();
    assert_eq!(c.size(&s).unwrap(), 2 * MIB);
    c.check_present(&s).unwrap();

    c.prepare_write(&s, 1, 4096, 4096).unwrap();
    c.write(&s, 1, 4096, &[7u8; 4096]).unwrap();
    let mut buf = vec![0u8; 8192];
    c.read(&s, 0, &mut buf).unwrap();
    assert!(buf[..4096].iter().all(|&b| b == 0));
    assert!(buf[4096..].iter().all(|&b| b == 7));
    c.sync(&s, 1).unwrap();
    assert_eq!(
        c.allocation(&s, 0, 3 * 4096).unwrap(),
        vec![(4096, true), (4096, false), (4096, true)]
    );
    assert_eq!(c.next_data(&s, 0, 2 * MIB).unwrap(), Some((4096, 8192)));
    assert_eq!(c.next_data(&s, 8192, 2 * MIB).unwrap(), None);
    assert_eq!(c.data_bytes(&s, 0, 2 * MIB).unwrap(), 4096);
    c.will_need(&s, 0, 4096);

    c.create_snapshot(&s, 1, 10).unwrap();
    c.discard(&s, 1, 4096, 4096).unwrap();
    assert_eq!(c.data_bytes(&s, 0, 2 * MIB).unwrap(), 0);
    assert_eq!(
        c.snapshots(&s).unwrap(),
        vec![SnapshotInfo {
            id: 10,
            size: 2 * MIB,
            used_bytes: 2 * MIB
        }]
    );
    assert_eq!(c.snapshot_ids(&s).unwrap(), vec![10]);
    let mut snap = vec![0u8; 4096];
    c.read_snapshot(&s, 10, 4096, &mut snap).unwrap();
    assert!(snap.iter().all(|&b| b == 7));
    c.read_snapshot_chunk(&s, 10, 1, &mut snap).unwrap();
    assert!(snap.iter().all(|&b| b == 7));
    assert_eq!(
        c.snapshot_allocation(&s, 10, 0, 8192).unwrap(),
        vec![(4096, true), (4096, false)]
    );
    assert_eq!(
        c.snapshot_map_since(&s, 10, 0).unwrap(),
        MapTail {
            bytes: 10u64.to_le_bytes().to_vec(),
            end: 8
        }
    );
    let before = c.digest(&s).unwrap();
    c.rollback(&s, 1, 10).unwrap();
    assert_eq!(c.data_bytes(&s, 0, 2 * MIB).unwrap(), 4096);
    assert_ne!(c.digest(&s).unwrap(), before);
    c.delete_snapshot(&s, 1, 10).unwrap();
    assert!(c.snapshot_ids(&s).unwrap().is_empty());

    let other = SliceName::new("m1", "vol-2", 1, 0);
    c.create_slice(&other, 4096).unwrap();
    c.create_slice(&SliceName::new("m2", "vol-3", 0, 0), 4096)
        .unwrap();
    assert_eq!(
        c.stored_slices("m1").unwrap(),
        vec![
            StoredSlice {
                volume: "vol-1".into(),
                copy: 0,
                column: 1,
                partial: false
            },
            StoredSlice {
                volume: "vol-2".into(),
                copy: 1,
                column: 0,
                partial: false
            },
        ]
    );
    c.delete_slice(&other).unwrap();

    // An error of the slice comes back with its errno and the node's words,
    // and the connection goes on.
    let e = c.check_present(&other).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
    let remote = remote_error(&e).expect("the node's answer");
    assert_eq!(remote.errno(), Some(libc_enoent()));
    assert!(remote.message.contains("vol-2"), "{remote}");
    let e = c.read(&s, 2 * MIB, &mut [0u8; 1]).unwrap_err();
    assert_eq!(remote_error(&e).and_then(|r| r.errno()), Some(22));
    assert!(!c.is_broken());
    assert!(node.backend.hints.load(Ordering::SeqCst) <= 1);
}

fn libc_enoent() -> i32 {
    2
}

#[test]
fn reads_and_writes_over_the_max_payload_are_split() {
    let node = Node::start(ServerConfig {
        max_payload: 64 * 1024,
        ..ServerConfig::default()
    });
    let c = node.client();
    assert_eq!(c.max_payload(), 64 * 1024);
    let s = slice();
    c.create_slice(&s, MIB).unwrap();
    let data: Vec<u8> = (0..300 * 1024).map(|i| (i % 251) as u8).collect();
    c.write(&s, 1, 5000, &data).unwrap();
    let mut back = vec![0u8; data.len()];
    c.read(&s, 5000, &mut back).unwrap();
    assert_eq!(back, data);
    // A chunk read over the max payload is refused before it is sent.
    let mut chunk = vec![0u8; 128 * 1024];
    let e = c.read_snapshot_chunk(&s, 1, 0, &mut chunk).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    assert!(!c.is_broken());
}

#[test]
fn a_reply_over_the_max_payload_is_refused_by_the_node() {
    let node = Node::start(ServerConfig {
        max_payload: 1024,
        ..ServerConfig::default()
    });
    let c = node.client();
    let s = slice();
    c.create_slice(&s, MIB).unwrap();
    // 200 runs of 9 bytes: over 1024 bytes.
    for block in (0..200u64).step_by(2) {
        c.write(&s, 1, block * 4096, &[1u8; 512]).unwrap();
    }
    let e = c.allocation(&s, 0, 200 * 4096).unwrap_err();
    let remote = remote_error(&e).expect("the node's answer");
    assert_eq!(remote.status, Status::TooLarge);
    assert!(remote.message.contains("smaller range"), "{remote}");
    assert_eq!(c.allocation(&s, 0, 8 * 4096).unwrap().len(), 8);
}

#[test]
fn many_threads_keep_many_requests_in_flight_and_replies_come_out_of_order() {
    let node = node();
    let c = Arc::new(node.client());
    let s = slice();
    c.create_slice(&s, 16 * MIB).unwrap();
    // The read at 0 is slow: the ones sent after it are answered first.
    node.backend.slow_read_at(0, Duration::from_millis(500));
    let slow = {
        let c = Arc::clone(&c);
        let s = s.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            c.read(&s, 0, &mut buf).unwrap();
            Instant::now()
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    let threads: Vec<_> = (0..16u64)
        .map(|t| {
            let c = Arc::clone(&c);
            let s = s.clone();
            std::thread::spawn(move || {
                let mut first_done = None;
                for i in 0..50u64 {
                    let offset = (1 + t * 50 + i) * 4096;
                    let data = [(t as u8) ^ (i as u8) | 1; 4096];
                    c.write(&s, 1, offset, &data).unwrap();
                    let mut back = [0u8; 4096];
                    c.read(&s, offset, &mut back).unwrap();
                    assert_eq!(back, data);
                    first_done.get_or_insert_with(Instant::now);
                }
                first_done
            })
        })
        .collect();
    let fast_done: Vec<Instant> = threads
        .into_iter()
        .filter_map(|t| t.join().unwrap())
        .collect();
    let slow_done = slow.join().unwrap();
    assert!(
        fast_done.iter().any(|&t| t < slow_done),
        "requests sent after the slow read were answered before it"
    );
    assert_eq!(c.data_bytes(&s, 0, 16 * MIB).unwrap(), 16 * 50 * 4096);
}

/// Threads sending at once share the connection's writes (small messages
/// queued behind a write under way go out together, large payloads from
/// where they are): every request arrives whole, and every reply.
#[test]
fn small_and_large_writes_from_many_threads_at_once_all_land_whole() {
    let node = node();
    let c = Arc::new(node.client());
    let s = slice();
    c.create_slice(&s, 128 * MIB).unwrap();
    let threads: Vec<_> = (0..12u64)
        .map(|t| {
            let c = Arc::clone(&c);
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..40u64 {
                    // Every fourth write is over what is copied into a write.
                    let len = if i % 4 == 0 { 192 * 1024 } else { 4096 };
                    let offset = (t * 40 + i) * 256 * 1024;
                    let data = vec![(t as u8) << 4 | (i as u8 & 0xf) | 1; len];
                    c.write(&s, 1, offset, &data).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for t in 0..12u64 {
        for i in 0..40u64 {
            let len = if i % 4 == 0 { 192 * 1024 } else { 4096 };
            let offset = (t * 40 + i) * 256 * 1024;
            let mut back = vec![0u8; len + 4096];
            c.read(&s, offset, &mut back).unwrap();
            let want = (t as u8) << 4 | (i as u8 & 0xf) | 1;
            assert!(
                back[..len].iter().all(|&b| b == want),
                "thread {t} write {i}"
            );
            assert!(
                back[len..].iter().all(|&b| b == 0),
                "past thread {t} write {i}"
            );
        }
    }
}

#[test]
fn a_stale_epoch_is_refused_and_nothing_applied_and_a_higher_one_raises() {
    let node = node();
    let c = Arc::new(node.client());
    let s = slice();
    c.create_slice(&s, MIB).unwrap();
    c.write(&s, 5, 0, &[1u8; 4096]).unwrap();
    assert_eq!(node.epochs.highest("vol-1").unwrap(), 5);
    let changes = node.backend.changes.load(Ordering::SeqCst);

    // The old front (epoch 4) is fenced off on every changing op.
    let stale: Vec<io::Result<()>> = vec![
        c.write(&s, 4, 0, &[2u8; 4096]),
        c.prepare_write(&s, 4, 0, 4096),
        c.discard(&s, 4, 0, 4096),
        c.sync(&s, 4),
        c.create_snapshot(&s, 4, 1),
        c.delete_snapshot(&s, 4, 1),
        c.rollback(&s, 4, 1),
    ];
    for result in stale {
        let e = result.unwrap_err();
        let remote = remote_error(&e).expect("the node's answer");
        assert_eq!(remote.status, Status::StaleEpoch, "{remote}");
        assert!(remote.message.contains("epoch 4 is stale"), "{remote}");
    }
    assert_eq!(node.backend.changes.load(Ordering::SeqCst), changes);
    assert_eq!(node.backend.bytes(&s).unwrap()[..4096], [1u8; 4096]);
    // Reads are not fenced.
    let mut buf = [0u8; 4096];
    c.read(&s, 0, &mut buf).unwrap();

    // A new front raises the epoch (durably, once); the old one stays out.
    c.write(&s, 6, 0, &[3u8; 4096]).unwrap();
    c.sync(&s, 6).unwrap();
    assert_eq!(node.epochs.highest("vol-1").unwrap(), 6);
    assert_eq!(node.epochs.raises.load(Ordering::SeqCst), 2);
    let e = c.write(&s, 5, 0, &[4u8; 4096]).unwrap_err();
    assert_eq!(remote_error(&e).map(|r| r.status), Some(Status::StaleEpoch));
    assert_eq!(node.backend.bytes(&s).unwrap()[..4096], [3u8; 4096]);
    // A digested write is fenced too.
    let mut writes = c.write_digests(s.clone(), 5);
    writes.send(0, &[4u8; 4096], 7);
    let e = writes.finish().unwrap_err();
    assert_eq!(remote_error(&e).map(|r| r.status), Some(Status::StaleEpoch));
    assert_eq!(node.backend.bytes(&s).unwrap()[..4096], [3u8; 4096]);
    // Another volume's epoch is its own.
    let other = SliceName::new("m1", "vol-2", 0, 0);
    c.create_slice(&other, 4096).unwrap();
    c.write(&other, 1, 0, &[5u8; 4096]).unwrap();
}

#[test]
fn digested_writes_in_flight_at_once_each_answer_the_digest_of_what_the_node_holds() {
    let node = Node::start(ServerConfig {
        max_payload: 64 * 1024,
        ..ServerConfig::default()
    });
    let c = Arc::new(node.client());
    let s = slice();
    c.create_slice(&s, MIB).unwrap();
    let pieces: Vec<(u64, Vec<u8>)> = (0..8u8)
        .map(|i| (u64::from(i) * 64 * 1024, vec![i + 1; 64 * 1024]))
        .collect();
    let mut writes = c.write_digests(s.clone(), 1);
    for (i, (at, data)) in pieces.iter().enumerate() {
        writes.send(*at, data, 100 + i as u64);
    }
    let digests = writes.finish().unwrap();
    // In the order sent, each the node's digest of its range with its seed.
    assert_eq!(digests.len(), pieces.len());
    for (i, ((at, data), digest)) in pieces.iter().zip(&digests).enumerate() {
        let len = data.len() as u64;
        assert_eq!(
            *digest,
            c.range_digest(&s, *at, len, 100 + i as u64).unwrap()
        );
        let mut held = vec![0u8; data.len()];
        c.read(&s, *at, &mut held).unwrap();
        assert_eq!(held, *data);
    }
    assert_ne!(digests[0], digests[1]);

    // A piece over the max payload is refused before it is sent; the
    // others are written, and the connection goes on.
    let mut writes = c.write_digests(s.clone(), 1);
    writes.send(0, &vec![9u8; 64 * 1024 + 4096], 1);
    writes.send(MIB - 4096, &[9u8; 4096], 1);
    let e = writes.finish().unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    assert_eq!(node.backend.bytes(&s).unwrap()[..4096], [1u8; 4096]);
    assert_eq!(
        node.backend.bytes(&s).unwrap()[MIB as usize - 4096..],
        [9u8; 4096]
    );
    // A slice the node does not hold: ENOENT; nothing made.
    let missing = SliceName::new("m1", "vol-9", 0, 0);
    let mut writes = c.write_digests(missing.clone(), 1);
    writes.send(0, &[1u8; 4096], 1);
    assert_eq!(writes.finish().unwrap_err().kind(), io::ErrorKind::NotFound);
    assert!(node.backend.bytes(&missing).is_none());
    // Dropped unfinished, the writes are still waited for: no reply is
    // left behind, and the next request is answered.
    let mut writes = c.write_digests(s.clone(), 1);
    writes.send(0, &[2u8; 4096], 1);
    drop(writes);
    assert_eq!(node.backend.bytes(&s).unwrap()[..4096], [2u8; 4096]);
    assert!(!c.is_broken());
    c.start_writeback(&s, 0, MIB);
    assert_eq!(c.size(&s).unwrap(), MIB);
}

#[test]
fn writes_of_every_size_one_after_another_land_whole_and_nothing_else() {
    // The node reuses its payload buffers: a short write after a long one
    // must carry its own bytes only, and a long one after a short one all
    // of its own.
    let node = node();
    let c = node.client();
    let s = slice();
    c.create_slice(&s, 8 * MIB).unwrap();
    let sizes = [
        MIB as usize,
        4096,
        3,
        MIB as usize,
        65536,
        1,
        MIB as usize - 512,
        2 * MIB as usize,
    ];
    let mut expected = vec![0u8; 8 * MIB as usize];
    for round in 0..3u8 {
        for (i, &len) in sizes.iter().enumerate() {
            let at = (i as u64 * 512 * 1024 + u64::from(round) * 4096) % (6 * MIB);
            let fill = round * 16 + i as u8 + 1;
            let data = vec![fill; len];
            c.write(&s, 1, at, &data).unwrap();
            expected[at as usize..at as usize + len].copy_from_slice(&data);
        }
    }
    assert!(
        node.backend.bytes(&s).unwrap() == expected,
        "the slice differs from what was written"
    );
}

#[test]
fn a_range_digest_is_computed_on_the_node_and_follows_the_bytes_the_seed_and_the_bounds() {
    let node = Node::start(ServerConfig {
        max_payload: 64 * 1024,
        ..ServerConfig::default()
    });
    let c = node.client();
    let s = slice();
    c.create_slice(&s, MIB).unwrap();
    c.write(&s, 1, 8192, &[9u8; 4096]).unwrap();
    let written = c.range_digest(&s, 0, 64 * 1024, 7).unwrap();
    // The same bytes, the same seed: the same digest; the wire carries
    // only the 16 bytes of it, not the range.
    assert_eq!(c.range_digest(&s, 0, 64 * 1024, 7).unwrap(), written);
    assert_ne!(c.range_digest(&s, 0, 64 * 1024, 8).unwrap(), written);
    // A range the write did not touch digests as zeros do, wherever it is.
    let zeros = c.range_digest(&s, 64 * 1024, 64 * 1024, 7).unwrap();
    assert_ne!(zeros, written);
    c.write(&s, 1, 8192, &[0u8; 4096]).unwrap();
    assert_eq!(c.range_digest(&s, 0, 64 * 1024, 7).unwrap(), zeros);
    // One byte changed: another digest.
    c.write(&s, 1, 0, &[1u8; 512]).unwrap();
    assert_ne!(c.range_digest(&s, 0, 64 * 1024, 7).unwrap(), zeros);
    // A range longer than a read may be is refused by the node, and the
    // connection goes on.
    let e = c.range_digest(&s, 0, 64 * 1024 + 1, 7).unwrap_err();
    let remote = remote_error(&e).expect("the node's answer");
    assert_eq!(remote.status, Status::TooLarge);
    assert!(!c.is_broken());
    // A slice the node does not hold: ENOENT.
    let e = c
        .range_digest(&SliceName::new("m1", "vol-9", 0, 0), 0, 4096, 7)
        .unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
}
