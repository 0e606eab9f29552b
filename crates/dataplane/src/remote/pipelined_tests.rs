//! Pipelined writes (`VolumeIo::start_write`) against real slice servers
//! on 127.0.0.1: answered by the thread that reads the last reply, refused
//! (nothing done) where they would wait, and every guarantee of a blocking
//! write kept: a lost copy is recorded before the answer, a fenced front
//! changes nothing, a live move's target gets the write.

use super::tests::{
    layout, local_bytes, node_media, node_medium, open, pattern, read_all, setup, write, MIB, SIZE,
    TIMEOUT,
};
use crate::{CopyOptions, DataPlane, SliceCopyKind, VolumeIo};
use std::io;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a pipelined write's `done` saw.
struct Ended {
    result: io::Result<()>,
    data: Vec<u8>,
    thread: String,
    at: Instant,
}

/// Starts a pipelined write of `data` at `offset`: `Err(data)` when
/// refused, else a receiver of its end.
fn start(
    io: &Arc<dyn VolumeIo>,
    offset: u64,
    data: Vec<u8>,
) -> Result<mpsc::Receiver<Ended>, Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    let done: crate::WriteDone = Box::new(move |result, data| {
        let thread = std::thread::current().name().unwrap_or("").to_string();
        let _ = tx.send(Ended {
            result,
            data,
            thread,
            at: Instant::now(),
        });
    });
    Arc::clone(io)
        .start_write(offset, data, done)
        .map(|()| rx)
        .map_err(|(data, _)| data)
}

fn ended(rx: &mpsc::Receiver<Ended>) -> Ended {
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the write ended")
}

#[test]
fn a_pipelined_write_to_three_copies_ends_on_the_last_reply_after_one_round_trip() {
    const DELAY: Duration = Duration::from_millis(50);
    let s = setup();
    let nodes = node_media(&s, &["n0", "n1"]);
    let io = open(&s, &layout(&["m0", "n0", "n1"], 1));
    let mut model = vec![0u8; SIZE as usize];
    // Before the nodes are known to have no snapshots: refused, untouched.
    let refused = start(&io, 0, pattern(1, 4096)).expect_err("refused");
    assert_eq!(refused, pattern(1, 4096));
    assert_eq!(local_bytes(&s, "m0", 0), model);
    // A blocking write learns it.
    write(io.as_ref(), &mut model, 0, &pattern(1, 4096));
    for node in &nodes {
        node.backend.delay_changes(DELAY);
    }
    let data = pattern(2, 64 << 10);
    let began = Instant::now();
    let rx = start(&io, MIB, data.clone()).expect("started");
    // Started at once: the local copy is written, the nodes' are on their way.
    assert!(began.elapsed() < DELAY, "{:?}", began.elapsed());
    let end = ended(&rx);
    end.result.expect("written");
    assert_eq!(end.data, data, "the buffer comes back");
    let took = end.at - began;
    assert!(took >= DELAY && took < 2 * DELAY, "{took:?}");
    assert_eq!(end.thread, "slice-client-reader");
    model[MIB as usize..MIB as usize + data.len()].copy_from_slice(&data);
    assert_eq!(local_bytes(&s, "m0", 0), model);
    for (copy, (node, medium)) in nodes.iter().zip(["n0", "n1"]).enumerate() {
        assert_eq!(
            node.bytes(medium, copy as u32 + 1),
            model,
            "copy {}",
            copy + 1
        );
    }
    // A flush makes it durable like any acknowledged write.
    io.flush().expect("flush");
    assert_eq!(read_all(io.as_ref()), model);
}

#[test]
fn a_node_that_stops_answering_a_pipelined_write_is_lost_and_recorded_before_the_answer() {
    let s = setup();
    let nodes = node_media(&s, &["n0", "n1"]);
    let io = open(&s, &layout(&["m0", "n0", "n1"], 1));
    let mut model = vec![0u8; SIZE as usize];
    write(io.as_ref(), &mut model, 0, &pattern(1, 4096));
    nodes[1].backend.set_stalled(true);
    let began = Instant::now();
    let rx = start(&io, 8192, pattern(3, 4096)).expect("started");
    let end = ended(&rx);
    end.result.expect("the other copies took it");
    let took = end.at - began;
    // The reader looks at deadlines once a timeout: cut off within two.
    assert!(took >= TIMEOUT && took < TIMEOUT * 3, "{took:?}");
    // Its end waited for the loss's record, on a thread of its own.
    assert_eq!(end.thread, "svs-write-end");
    assert_eq!(io.lost_slices(), [(2, 0)]);
    assert_eq!(s.heard.lock().expect("lock").len(), 1);
    model[8192..12288].copy_from_slice(&pattern(3, 4096));
    assert_eq!(local_bytes(&s, "m0", 0), model);
    assert_eq!(nodes[0].bytes("n0", 1), model);
    // With a copy lost (recorded) the next ones pipeline over the others.
    let rx = start(&io, 16384, pattern(4, 4096)).expect("started");
    ended(&rx).result.expect("written");
    nodes[1].backend.set_stalled(false);
}

#[test]
fn a_pipelined_write_of_a_fenced_front_changes_no_copy() {
    let s = setup();
    let nodes = node_media(&s, &["n0", "n1", "n2"]);
    let media = ["n0", "n1", "n2"];
    let old = open(&s, &layout(&media, 1));
    let mut model = vec![0u8; SIZE as usize];
    write(old.as_ref(), &mut model, 0, &pattern(1, 4096));
    let new = s.media.open_volume(&layout(&media, 2)).expect("open");
    write(new.as_ref(), &mut model, MIB, &pattern(2, 4096));
    let rx = start(&old, 2 * MIB, pattern(9, 4096)).expect("started");
    let e = ended(&rx).result.expect_err("fenced");
    assert!(crate::is_front_fenced(&e), "{e}");
    assert!(old.is_fenced());
    // Fenced now: refused before anything is sent.
    start(&old, 0, pattern(9, 4096)).expect_err("refused");
    for (copy, (n, m)) in nodes.iter().zip(media).enumerate() {
        assert_eq!(n.bytes(m, copy as u32), model, "copy {copy}");
    }
    assert_eq!(old.lost_slices(), []);
}

#[test]
fn writes_are_not_pipelined_during_a_live_move_and_the_moved_copy_has_them_all() {
    let s = setup();
    let node = node_medium(&s, "n0", "node-a");
    let target = node_medium(&s, "n1", "node-b");
    let io = open(&s, &layout(&["m0", "n0"], 1));
    let mut model = vec![0u8; SIZE as usize];
    write(io.as_ref(), &mut model, 0, &pattern(1, 4096));
    let rx = start(&io, 4096, pattern(2, 4096)).expect("started");
    ended(&rx).result.expect("written");
    model[4096..8192].copy_from_slice(&pattern(2, 4096));

    let mut copying = Arc::clone(&io)
        .begin_slice_copy(SliceCopyKind::Move, 1, 0, "n1", 0)
        .expect("begin");
    // A target being filled takes writes the blocking way only.
    start(&io, 8192, pattern(3, 4096)).expect_err("refused during the move");
    write(io.as_ref(), &mut model, 8192, &pattern(3, 4096));
    copying
        .fill(&CopyOptions::default(), &mut |_, _| {})
        .expect("fill");
    copying.switch().expect("switch");
    // Switched, the old place kept until finish: the blocking way too.
    start(&io, 12288, pattern(4, 4096)).expect_err("refused while retiring");
    copying.finish().expect("finish");
    // Moved: the new place's snapshots are learnt by a blocking write,
    // then writes pipeline again, to the new place.
    write(io.as_ref(), &mut model, 16384, &pattern(5, 4096));
    let rx = start(&io, 12288, pattern(4, 4096)).expect("started");
    ended(&rx).result.expect("written");
    model[12288..16384].copy_from_slice(&pattern(4, 4096));
    assert_eq!(target.bytes("n1", 1), model);
    assert_eq!(local_bytes(&s, "m0", 0), model);
    assert_eq!(read_all(io.as_ref()), model);
    // The old place kept what it had when the move finished.
    assert_eq!(&node.bytes("n0", 1)[..12288], &model[..12288]);
}
