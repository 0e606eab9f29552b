//! `cargo test -p svs-sliceproto --release --test bench -- --ignored --nocapture`:
//! 4 KiB writes and reads over loopback, 16 threads in flight on one
//! connection, against the in-memory backend (the protocol's cost alone).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{node, slice};

const THREADS: u64 = 16;
const RUN: Duration = Duration::from_secs(3);

fn run(
    label: &str,
    op: impl Fn(&svs_sliceproto::SliceClient, u64) + Send + Sync + 'static,
    c: &Arc<svs_sliceproto::SliceClient>,
) {
    let op = Arc::new(op);
    let started = Instant::now();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let c = Arc::clone(c);
            let op = Arc::clone(&op);
            std::thread::spawn(move || {
                let mut n = 0u64;
                while started.elapsed() < RUN {
                    op(&c, (t * 1024 + n % 1024) * 4096);
                    n += 1;
                }
                n
            })
        })
        .collect();
    let total: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{label}: {:.0} round trips/s ({total} in {secs:.1} s, {THREADS} threads, one connection)",
        total as f64 / secs
    );
}

#[test]
#[ignore = "benchmark: run with --ignored --nocapture"]
fn four_kib_round_trips_per_second_over_loopback() {
    let node = node();
    let c = Arc::new(node.client());
    c.create_slice(&slice(), THREADS * 1024 * 4096).unwrap();
    let data = [0x5au8; 4096];
    run(
        "4 KiB write",
        move |c, offset| c.write(&slice(), 1, offset, &data).unwrap(),
        &c,
    );
    run(
        "4 KiB read",
        |c, offset| {
            let mut buf = [0u8; 4096];
            c.read(&slice(), offset, &mut buf).unwrap();
        },
        &c,
    );
}
