//! Requests nobody waits for in a thread: a `Replies` callback run by the
//! reader thread once the last reply is in, over real slice servers on
//! 127.0.0.1 (the front's pipelined writes).

mod common;

use std::io;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{node, silent_node, slice, CREDENTIAL};
use svs_sliceproto::{Replies, SliceClient};

/// Sends a write to every client, registers one callback for all, and
/// returns what the callback reports: the thread it ran on and when.
fn write_everywhere(
    clients: &[&SliceClient],
    data: &[u8],
) -> (String, Instant, Vec<io::Result<()>>) {
    let sent: Vec<_> = clients
        .iter()
        .map(|c| c.send_write(&slice(), 1, 0, data))
        .collect();
    let (tx, rx) = mpsc::channel();
    let replies = Replies::new(move || {
        let name = std::thread::current().name().unwrap_or("").to_string();
        let _ = tx.send((name, Instant::now()));
    });
    for (c, sent) in clients.iter().zip(&sent) {
        c.call_on_replies(sent, &replies);
    }
    replies.arm();
    let (thread, at) = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the callback ran");
    // Collecting after the callback waits for nothing.
    let collected = Instant::now();
    let outcomes = clients
        .iter()
        .zip(sent)
        .map(|(c, sent)| c.collect(sent))
        .collect();
    assert!(
        collected.elapsed() < Duration::from_millis(50),
        "collect waited"
    );
    (thread, at, outcomes)
}

#[test]
fn the_reader_of_the_last_reply_runs_the_callback_once_every_copy_answered() {
    let (a, b, c) = (node(), node(), node());
    for n in [&a, &b, &c] {
        n.client().create_slice(&slice(), 1 << 20).unwrap();
    }
    // Each node holds its replies 50 ms: sent at once, they overlap.
    for n in [&a, &b, &c] {
        n.backend.delay_changes(Duration::from_millis(50));
    }
    let clients = [a.client(), b.client(), c.client()];
    let refs: Vec<&SliceClient> = clients.iter().collect();
    let started = Instant::now();
    let (thread, at, outcomes) = write_everywhere(&refs, &[7u8; 4096]);
    let took = at - started;
    assert!(took >= Duration::from_millis(50), "{took:?}");
    assert!(
        took < Duration::from_millis(100),
        "not in parallel: {took:?}"
    );
    assert_eq!(thread, "slice-client-reader");
    for outcome in outcomes {
        outcome.unwrap();
    }
    for n in [&a, &b, &c] {
        assert_eq!(
            &n.backend.bytes(&slice()).unwrap()[..4096],
            &[7u8; 4096][..]
        );
    }
}

#[test]
fn a_callback_whose_replies_are_all_in_already_runs_when_armed() {
    let a = node();
    let client = a.client();
    client.create_slice(&slice(), 1 << 20).unwrap();
    let sent = client.send_write(&slice(), 1, 0, &[1u8; 512]);
    // The reply arrives meanwhile (the slot is done, nothing registered).
    std::thread::sleep(Duration::from_millis(100));
    let (tx, rx) = mpsc::channel();
    let replies = Replies::new(move || {
        let _ = tx.send(std::thread::current().name().unwrap_or("").to_string());
    });
    client.call_on_replies(&sent, &replies);
    assert!(rx.try_recv().is_err(), "ran before arm");
    replies.arm();
    assert_eq!(
        rx.try_recv().unwrap(),
        std::thread::current().name().unwrap_or("")
    );
    client.collect(sent).unwrap();
}

#[test]
fn a_node_that_never_answers_a_called_request_is_cut_off_at_its_deadline() {
    let (addr, silent) = silent_node();
    let timeout = Duration::from_millis(300);
    let client = SliceClient::connect(addr, CREDENTIAL, "front-1", timeout).unwrap();
    let started = Instant::now();
    let (thread, at, outcomes) = write_everywhere(&[&client], &[1u8; 4096]);
    let took = at - started;
    // The reader wakes once a timeout to look: cut off within two.
    assert!(took >= timeout, "{took:?}");
    assert!(took < timeout * 3, "{took:?}");
    assert_eq!(thread, "slice-client-reader");
    let e = outcomes.into_iter().next().unwrap().unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
    assert!(client.is_broken());
    drop(client);
    silent.join().unwrap();
}
