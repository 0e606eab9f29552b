//! The pipelined fan-out (issue 51): a write to a volume's copies on other
//! nodes is sent to every node at once. A node SIGKILLed with 16 writes in
//! flight loses its copy alone: the writer (qemu-img bench at depth 16)
//! sees no error and every acknowledged write reads back, from the front
//! and from the files of the copies left.

use crate::harness::attach::{attach, qemu_img, qemu_io, uri};
use crate::harness::front_on_node::*;
use crate::harness::storage_nodes::{copies, eventually, volume_state, MARGIN, TIMEOUT};
use serde_json::json;
use std::time::Duration;

/// 4 KiB writes at depth 16 over the first 64 MiB, pattern 0x5e.
const WRITES: u64 = 16384;

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
        std::thread::spawn(move || {
            let count = WRITES.to_string();
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
                "0x5e",
                "-c",
                &count,
                &uri,
            ])
        })
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
