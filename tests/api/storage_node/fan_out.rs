//! The pipelined fan-out (issue 51): a write to a volume's copies on other
//! nodes is sent to every node at once. A node SIGKILLed with 16 writes in
//! flight loses its copy alone: the writer (qemu-img bench at depth 16)
//! sees no error and every acknowledged write reads back, from the front
//! and from the files of the copies left. A move, and a rebuild that takes
//! it over, run under the same writer: the copy they fill takes every
//! write in order, and both copies end exact.

use crate::harness::attach::{attach, qemu_img, qemu_io, uri};
use crate::harness::details;
use crate::harness::front_on_node::*;
use crate::harness::node_moves::{wait_mid_copy, Front, Moving, MIB, REBUILT};
use crate::harness::storage_nodes::{copies, eventually, volume_state, MARGIN, TIMEOUT};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// 4 KiB writes at depth 16 over the first 64 MiB, pattern 0x5e.
const WRITES: u64 = 16384;

/// `count` 4 KiB writes of `pattern` from offset 0 on, 16 in flight
/// (`qemu-img bench`, no host cache): Ok when every one was acknowledged.
fn bench_writes(uri: &str, pattern: u8, count: u64) -> Result<String, String> {
    let (pattern, count) = (format!("{pattern:#x}"), count.to_string());
    qemu_img(&[
        "bench",
        "-f",
        "raw",
        "-w",
        "-t",
        "none",
        "-d",
        "16",
        "-s",
        "4K",
        "-S",
        "4K",
        "--pattern",
        &pattern,
        "-c",
        &count,
        uri,
    ])
}

#[tokio::test]
async fn a_node_killed_with_sixteen_writes_in_flight_loses_its_copy_and_no_acknowledged_write() {
    let (app, mut nodes) = three_nodes(&[]).await;
    let id = app
        .create_volume_done(json!({"name": "v", "size": 1, "policy": "three"}))
        .await;
    let a = attach(&app, "v", "host-1", false).await;
    let uri = uri(&a);
    let front = front_node(&nodes, &uri).name;
    // The writer's range and 1 MiB past it, which it must leave alone.
    let out = qemu_io(&uri, &["write -P 0x11 0 65M".into()]);
    assert!(out.is_ok(), "{out:?}");

    let writer = {
        let uri = uri.clone();
        std::thread::spawn(move || bench_writes(&uri, 0x5e, WRITES))
    };
    // Mid-run: the writes to the victim's copy are in flight.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(!writer.is_finished(), "the writer ended before the kill");
    let victim = nodes
        .iter_mut()
        .find(|n| n.name != front)
        .expect("a node that is not the front's");
    let dead_medium = victim.medium.to_string();
    victim.process.kill();
    let out = tokio::task::spawn_blocking(move || writer.join().expect("writer thread"))
        .await
        .expect("join");
    assert!(
        out.is_ok(),
        "the writer saw an error: {out:?}\n{}",
        app.log()
    );

    // Every write was acknowledged: every one reads back.
    let written = format!("read -P 0x5e 0 {}", WRITES * 4096);
    let out = qemu_io(&uri, &[written]);
    assert!(out.is_ok(), "{out:?}");
    let degraded = eventually(TIMEOUT + MARGIN, || async {
        volume_state(&app, "v").await == "Degraded"
    })
    .await;
    assert!(degraded, "{}", app.get("/volumes/v").await.1);
    let now = copies(&app, "v").await;
    for (copy, medium, health) in &now {
        if *medium == dead_medium {
            assert_ne!(health, "Healthy", "{now:?}");
            continue;
        }
        assert_eq!(health, "Healthy", "{now:?}");
        let file = copy_file(&nodes, medium, &id, *copy);
        let len = (WRITES * 4096) as usize;
        assert!(
            bytes_at(&file, 0, len).iter().all(|&b| b == 0x5e),
            "{medium}: a copy left misses acknowledged writes"
        );
        assert!(
            bytes_at(&file, WRITES * 4096, 1 << 20)
                .iter()
                .all(|&b| b == 0x11),
            "{medium}: bytes past the writer's range changed"
        );
    }
}

/// The range the depth-16 writer rewrites pass after pass: inside the
/// prefill, so the move's copy carries it while the writer changes it.
const PASS_MIB: u64 = 16;

/// A qemu-img bench writer at depth 16 on its own thread: pass after pass
/// over the first [`PASS_MIB`] MiB, each pass with a pattern of its own,
/// until `stop` is set. Joined: the first error, or the passes done (the
/// last one's pattern is what the range must hold).
struct PassWriter {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Result<u8, String>>,
}

fn pattern(pass: u8) -> u8 {
    0x60 + pass
}

impl PassWriter {
    fn start(uri: &str) -> PassWriter {
        let stop = Arc::new(AtomicBool::new(false));
        let uri = uri.to_string();
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut passes = 0u8;
            while !stopped.load(Ordering::SeqCst) && passes < 100 {
                bench_writes(&uri, pattern(passes), PASS_MIB * MIB / 4096)?;
                passes += 1;
            }
            Ok(passes)
        });
        PassWriter { stop, thread }
    }

    /// Stops after the pass running; the reference then holds the last
    /// pass's pattern over the range.
    fn finish(self, moving: &Moving) {
        self.stop.store(true, Ordering::SeqCst);
        let passes = self.thread.join().expect("writer thread");
        let passes = passes.unwrap_or_else(|e| {
            panic!(
                "a write was not acknowledged: {e}\n{}\n{}",
                moving.node_logs(),
                moving.app.log()
            )
        });
        // At least the pass the move was checked to run beside (a loaded
        // machine may run no other).
        assert!(passes >= 1, "the writer ran no pass");
        moving
            .reference
            .write(0, PASS_MIB * MIB, pattern(passes - 1));
    }
}

/// What happens to the move's source node mid-copy.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Nothing: the copy moves.
    Stays,
    /// SIGKILLed: the job rebuilds the copy on the move's target instead.
    Killed,
}

/// A move of a copy under a depth-16 writer, the front on the node that
/// keeps its copy (the copy runs node to node): the job is Done, and the
/// volume and both copies' files hold exactly what was acknowledged.
#[tokio::test]
async fn a_move_under_a_depth_16_writer_ends_with_both_copies_exact() {
    under_writer(Front::Node, Source::Stays).await;
}

/// The same with the front in `svs serve`.
#[tokio::test]
async fn a_move_in_svs_serve_under_a_depth_16_writer_ends_with_both_copies_exact() {
    under_writer(Front::Serve, Source::Stays).await;
}

/// The same with the move's source node SIGKILLed mid-copy: the job
/// rebuilds the copy on the move's target from the front's healthy copy,
/// still under the writer, which sees no error (nor does it when the
/// rebuilt copy joins: the front stays open); both copies end exact.
#[tokio::test]
async fn a_rebuild_under_a_depth_16_writer_ends_with_both_copies_exact() {
    under_writer(Front::Node, Source::Killed).await;
}

/// The same with the front in `svs serve`.
#[tokio::test]
async fn a_rebuild_in_svs_serve_under_a_depth_16_writer_ends_with_both_copies_exact() {
    under_writer(Front::Serve, Source::Killed).await;
}

async fn under_writer(front: Front, source: Source) {
    let mut moving = Moving::start(front).await;
    let writer = PassWriter::start(&moving.uri);
    let job_id = moving.start_resize().await;
    wait_mid_copy(&moving.app, &job_id, 20..70).await;
    assert!(!writer.thread.is_finished(), "the writer stopped mid-move");
    if source == Source::Killed {
        moving.sn2.kill();
    }
    let job = moving.app.wait_job(&job_id).await;
    writer.finish(&moving);
    assert_eq!(job["state"], "Done", "{job}\n{}", moving.app.log());
    match source {
        Source::Stays => {
            assert_eq!(job["slices"][0]["outcome"], "moved", "{job}");
            moving.assert_moved().await;
        }
        Source::Killed => {
            assert!(details(&job).iter().any(|d| d == REBUILT), "{job}");
            moving.assert_resized().await;
        }
    }
    if front == Front::Node {
        moving.assert_front_stayed().await;
    }
}
