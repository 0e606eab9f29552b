//! A write (or flush) that skipped a lost copy is answered only once the
//! service has recorded the loss (see `crate::loss_record`).

use super::io::LocalVolumeIo;
use super::*;
use crate::{CopyFailure, DataPlane, LocalMedia, LossRecord, SliceKey};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::Duration;

const MIB: u64 = 1 << 20;
const LONG: Duration = Duration::from_secs(10);
/// Long enough for a write that does not wait to be answered.
const SHORT: Duration = Duration::from_millis(300);

/// A volume of two copies of one 4 MiB column (m0, m1) whose failures'
/// records are handed to the test instead of being made.
fn mirrored() -> (
    tempfile::TempDir,
    Arc<LocalVolumeIo>,
    mpsc::Receiver<(CopyFailure, LossRecord)>,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    let media =
        LocalMedia::new((0..2).map(|i| (format!("m{i}"), dir.path().join(format!("m{i}")))));
    for copy in 0..2u32 {
        let key = SliceKey {
            volume_id: "v".into(),
            copy,
            column: 0,
        };
        media
            .create_slice(&format!("m{copy}"), &key, 4 * MIB)
            .expect("slice");
    }
    let (tx, rx) = mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    media.on_copy_failure(Arc::new(move |f: &CopyFailure, r: &LossRecord| {
        tx.lock()
            .expect("lock")
            .send((f.clone(), r.clone()))
            .expect("test listens");
    }));
    let layout = VolumeLayout {
        volume_id: "v".into(),
        size: 4 * MIB,
        media: vec![vec!["m0".into()], vec!["m1".into()]],
        epoch: 0,
    };
    let io = LocalVolumeIo::open(&media, &layout).expect("open");
    (dir, Arc::new(io), rx)
}

/// Writes `byte` over the first 4 KiB on another thread; its outcome.
fn write_on_thread(io: &Arc<LocalVolumeIo>, byte: u8) -> mpsc::Receiver<std::io::Result<()>> {
    let (tx, rx) = mpsc::channel();
    let io = Arc::clone(io);
    std::thread::spawn(move || {
        let _ = tx.send(io.write(0, &[byte; 4096], false));
    });
    rx
}

#[test]
fn a_write_that_skips_a_lost_copy_is_answered_only_once_the_loss_is_recorded() {
    let (_dir, io, failures) = mirrored();
    io.write(0, &[1u8; 4096], false).expect("both copies");
    assert!(io.is_near(), "two local copies");
    io.slices[0][1].hooks.broken.store(true, Ordering::Release);

    let first = write_on_thread(&io, 2);
    let (failure, record) = failures.recv_timeout(LONG).expect("the failure is told");
    assert_eq!((failure.medium.as_str(), failure.slice.copy), ("m1", 1));
    assert!(
        first.recv_timeout(SHORT).is_err(),
        "answered before the loss was recorded"
    );
    // Another write, which finds the copy lost already, waits as well.
    let second = write_on_thread(&io, 3);
    assert!(second.recv_timeout(SHORT).is_err());
    // So does a flush.
    let flushed = {
        let (tx, rx) = mpsc::channel();
        let io = Arc::clone(&io);
        std::thread::spawn(move || {
            let _ = tx.send(io.flush());
        });
        rx
    };
    assert!(flushed.recv_timeout(SHORT).is_err());

    // Writes wait for the record: not near (an NBD server does not run
    // them inline on the connection's task).
    assert!(!io.is_near());
    record.recorded();
    assert!(io.is_near(), "the copy's loss is recorded: near again");
    first
        .recv_timeout(LONG)
        .expect("answered")
        .expect("written");
    second
        .recv_timeout(LONG)
        .expect("answered")
        .expect("written");
    flushed
        .recv_timeout(LONG)
        .expect("answered")
        .expect("flushed");
    // Once recorded, writes skipping the copy are answered at once, and the
    // failure is not told again.
    io.write(4096, &[4u8; 4096], true).expect("written");
    assert!(failures.try_recv().is_err());
    assert_eq!(io.lost_slices(), vec![(1, 0)]);
}

#[test]
fn a_refused_record_fails_the_waiting_write_as_fenced_and_every_later_one() {
    let (_dir, io, failures) = mirrored();
    io.slices[0][0].hooks.broken.store(true, Ordering::Release);
    let write = write_on_thread(&io, 5);
    let (_, record) = failures.recv_timeout(LONG).expect("the failure is told");
    record.refused();
    let e = write
        .recv_timeout(LONG)
        .expect("answered")
        .expect_err("refused");
    assert!(is_front_fenced(&e), "{e}");
    assert!(io.is_fenced());
    let later = io.write(8192, &[6u8; 4096], false).expect_err("fenced");
    assert!(is_front_fenced(&later), "{later}");
}

#[test]
fn a_copy_that_cannot_be_opened_holds_writes_until_its_loss_is_recorded() {
    let dir = tempfile::tempdir().expect("temp dir");
    let media =
        LocalMedia::new((0..2).map(|i| (format!("m{i}"), dir.path().join(format!("m{i}")))));
    let key = SliceKey {
        volume_id: "v".into(),
        copy: 0,
        column: 0,
    };
    media.create_slice("m0", &key, 4 * MIB).expect("slice");
    // m1 holds no file of copy 1: its opening fails and reports it.
    std::fs::create_dir_all(dir.path().join("m1")).expect("m1");
    media.check_medium("m1").expect("m1 reads");
    let (tx, failures) = mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    media.on_copy_failure(Arc::new(move |_: &CopyFailure, r: &LossRecord| {
        let _ = tx.lock().expect("lock").send(r.clone());
    }));
    let layout = VolumeLayout {
        volume_id: "v".into(),
        size: 4 * MIB,
        media: vec![vec!["m0".into()], vec!["m1".into()]],
        epoch: 0,
    };
    let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
    let record = failures.recv_timeout(LONG).expect("told at open");
    let write = write_on_thread(&io, 7);
    assert!(write.recv_timeout(SHORT).is_err());
    record.recorded();
    write
        .recv_timeout(LONG)
        .expect("answered")
        .expect("written");
}
