//! Moves, copies and rebuilds of slices with snapshots, and degraded I/O.

use super::*;
use crate::DataPlane;
use crate::{CopyOptions, DataPlaneError, LocalMedia, SliceKey};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

const MIB: u64 = 1 << 20;

struct Fixture {
    _dir: tempfile::TempDir,
    media: LocalMedia,
    layout: VolumeLayout,
}

/// Media m0..m5; volume `v` with `copies` × `columns` slices of `slice_mib`
/// MiB, copy c column k on medium m(c * columns + k).
fn fixture(copies: usize, columns: usize, slice_mib: u64) -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let media =
        LocalMedia::new((0..6).map(|i| (format!("m{i}"), dir.path().join(format!("m{i}")))));
    let mut layout = VolumeLayout {
        volume_id: "v".into(),
        size: columns as u64 * slice_mib * MIB,
        media: Vec::new(),
        epoch: 0,
    };
    for copy in 0..copies {
        let mut row = Vec::new();
        for column in 0..columns {
            let medium = format!("m{}", copy * columns + column);
            media.check_medium(&medium).expect("medium");
            media
                .create_slice(&medium, &key(copy as u32, column as u32), slice_mib * MIB)
                .expect("slice");
            row.push(medium);
        }
        layout.media.push(row);
    }
    Fixture {
        _dir: dir,
        media,
        layout,
    }
}

fn key(copy: u32, column: u32) -> SliceKey {
    SliceKey {
        volume_id: "v".into(),
        copy,
        column,
    }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(31).wrapping_add(seed.wrapping_mul(7)) as u8) | 1)
        .collect()
}

fn read_all(io: &dyn VolumeIo) -> Vec<u8> {
    let mut buf = vec![0u8; io.size() as usize];
    io.read(0, &mut buf).expect("read");
    buf
}

/// Files in the volume's directory on a medium (none if it is gone).
fn files_on(media: &LocalMedia, medium: &str) -> Vec<String> {
    let dir = media.medium_dir(medium).expect("dir").join("v");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A volume's content kept alongside it: every write goes to both.
struct Model {
    io: Arc<LocalVolumeIo>,
    bytes: Vec<u8>,
    seed: u64,
}

impl Model {
    fn new(io: &Arc<LocalVolumeIo>) -> Model {
        Model {
            io: Arc::clone(io),
            bytes: vec![0u8; io.size() as usize],
            seed: 1,
        }
    }

    fn write(&mut self, offset: u64, len: usize) {
        self.seed += 1;
        let data = pattern(self.seed, len);
        self.io.write(offset, &data, false).expect("write");
        self.bytes[offset as usize..offset as usize + len].copy_from_slice(&data);
    }

    fn discard(&mut self, offset: u64, len: usize) {
        self.io.discard(offset, len as u64, false).expect("discard");
        self.bytes[offset as usize..offset as usize + len].fill(0);
    }

    /// Scattered writes (and some discards) of 4 KiB to 96 KiB.
    fn scatter(&mut self, n: usize) {
        let size = self.bytes.len() as u64;
        for _ in 0..n {
            self.seed += 1;
            let r = self
                .seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = (((r >> 20) % 24 + 1) * 4096) as usize;
            let offset = (r >> 33) % (size - len as u64) / 4096 * 4096;
            if r.is_multiple_of(7) {
                self.discard(offset, len);
            } else {
                self.write(offset, len);
            }
        }
    }
}

/// Writes scattered over the volume on another thread until stopped.
struct Writer {
    stop: Arc<AtomicBool>,
    handle: thread::JoinHandle<Model>,
}

impl Writer {
    fn start(mut model: Model) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let handle = {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    model.scatter(1);
                    thread::sleep(std::time::Duration::from_millis(1));
                }
                model
            })
        };
        Writer { stop, handle }
    }

    fn stop(self) -> Model {
        self.stop.store(true, Ordering::Release);
        self.handle.join().expect("writer")
    }
}

/// Snapshots 1..=3 with writes before each and after the last; returns
/// each snapshot's expected content.
fn three_snapshots(model: &mut Model) -> Vec<(u64, Vec<u8>)> {
    let size = model.bytes.len();
    model.write(0, size * 3 / 4);
    let mut expected = Vec::new();
    for id in 1..=3u64 {
        model.io.snapshot(id).expect("snapshot");
        expected.push((id, model.bytes.clone()));
        model.scatter(40);
    }
    expected
}

fn assert_snapshots(io: &Arc<LocalVolumeIo>, expected: &[(u64, Vec<u8>)]) {
    for (id, bytes) in expected {
        let view = Arc::clone(io)
            .snapshot_view(*id, bytes.len() as u64)
            .expect("view");
        assert!(read_all(view.as_ref()) == *bytes, "snapshot {id} differs");
    }
}

fn throttled(rate_mib: u64) -> CopyOptions {
    CopyOptions {
        rate_limit: Some(rate_mib * MIB),
        ..CopyOptions::default()
    }
}

/// Checkpoints a copy recorded, in order (0: forgotten).
#[derive(Clone, Default)]
struct Recorded(Arc<std::sync::Mutex<Vec<u64>>>);

impl Recorded {
    /// Resumes at `from`, with a checkpoint after every MiB.
    fn resume(&self, from: u64) -> crate::CopyResume {
        let list = Arc::clone(&self.0);
        crate::CopyResume {
            from,
            record: Some(Arc::new(move |offset| {
                list.lock().map_err(|e| e.to_string())?.push(offset);
                Ok(())
            })),
            every_bytes: MIB,
            min_interval: Duration::ZERO,
        }
    }

    fn last(&self) -> u64 {
        self.0.lock().expect("lock").last().copied().unwrap_or(0)
    }
}

#[test]
fn a_live_move_resumed_from_its_checkpoint_copies_what_was_left_and_what_was_written_since() {
    let f = fixture(2, 1, 16);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open"));
    let mut model = Model::new(&io);
    model.write(0, 12 * MIB as usize);

    // Stopped once 6 MiB are copied (the service stopping, or a crash
    // right after that checkpoint).
    let recorded = Recorded::default();
    let cancel = crate::CancellationToken::new();
    let options = CopyOptions {
        cancel: cancel.clone(),
        resume: recorded.resume(0),
        ..CopyOptions::default()
    };
    let err = io
        .move_slice(
            0,
            0,
            "m4",
            &options,
            &mut |done, _| {
                if done >= 6 * MIB {
                    cancel.cancel();
                }
            },
            &mut || Err("no switch".into()),
        )
        .expect_err("stopped");
    assert!(matches!(err, DataPlaneError::Cancelled), "{err:?}");
    assert_eq!(recorded.last(), 6 * MIB);
    assert_eq!(files_on(&f.media, "m4"), vec!["c0-k0.slice.partial"]);

    // The service starts again: the volume is opened anew and written
    // before the copy resumes, below its checkpoint and past it.
    drop(io);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open again"));
    let bytes = std::mem::take(&mut model.bytes);
    let mut model = Model::new(&io);
    model.bytes = bytes;
    model.write(MIB + 4096, 4096);
    model.write(13 * MIB, 4096);

    let stats = crate::CopyStats::default();
    let options = CopyOptions {
        resume: recorded.resume(6 * MIB),
        stats: stats.clone(),
        ..CopyOptions::default()
    };
    io.move_slice(0, 0, "m4", &options, &mut |_, _| {}, &mut || Ok(()))
        .expect("resumed move");
    assert_eq!(stats.resumed_at(), 6 * MIB);
    // The MiB written since the restart below the checkpoint, the rest of
    // the data, and the new block past it.
    assert_eq!(stats.copied(), MIB + 6 * MIB + 4096);
    assert_eq!(stats.catch_up(), MIB);
    assert!(read_all(io.as_ref()) == model.bytes);
    let moved = f.media.slice_path("m4", &key(0, 0)).expect("path");
    assert!(std::fs::read(moved).expect("moved slice") == model.bytes);
    assert_eq!(files_on(&f.media, "m4"), vec!["c0-k0.slice"]);
}

#[test]
fn data_written_ahead_of_a_live_copy_grows_its_total_as_catch_up() {
    let f = fixture(2, 1, 16);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open"));
    let mut model = Model::new(&io);
    model.write(0, 8 * MIB as usize);
    let stats = crate::CopyStats::default();
    let options = CopyOptions {
        stats: stats.clone(),
        ..throttled(4)
    };
    let mut reported = Vec::new();
    let mut written = false;
    io.move_slice(
        0,
        0,
        "m4",
        &options,
        &mut |done, total| {
            reported.push((done, total));
            // Into a hole ahead of the copy: 2 MiB more to copy.
            if done >= MIB && !written {
                written = true;
                model.write(12 * MIB, 2 * MIB as usize);
            }
        },
        &mut || Ok(()),
    )
    .expect("move");
    assert_eq!(stats.catch_up(), 2 * MIB);
    assert_eq!(stats.copied(), 10 * MIB);
    assert_eq!(reported.first(), Some(&(0, 8 * MIB)));
    assert_eq!(reported.last(), Some(&(10 * MIB, 10 * MIB)));
    assert!(
        reported
            .iter()
            .any(|&(done, total)| total == 10 * MIB && done < 9 * MIB),
        "the total grew before the copy reached it: {reported:?}"
    );
    assert!(read_all(io.as_ref()) == model.bytes);
}

#[test]
fn a_live_move_takes_the_snapshots_along_exactly_while_writes_go_on() {
    let mut f = fixture(2, 1, 16);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open"));
    let mut model = Model::new(&io);
    let expected = three_snapshots(&mut model);
    let writer = Writer::start(model);
    let mut committed = false;
    io.move_slice(0, 0, "m4", &throttled(24), &mut |_, _| {}, &mut || {
        committed = true;
        Ok(())
    })
    .expect("move");
    let model = writer.stop();
    io.flush().expect("flush");
    assert!(committed);
    f.media
        .delete_slice("m0", &key(0, 0))
        .expect("delete source");
    f.layout.media[0][0] = "m4".into();
    assert_eq!(files_on(&f.media, "m0"), Vec::<String>::new());
    assert_eq!(
        files_on(&f.media, "m4"),
        [
            "c0-k0.s1.delta",
            "c0-k0.s1.map",
            "c0-k0.s2.delta",
            "c0-k0.s2.map",
            "c0-k0.s3.delta",
            "c0-k0.s3.map",
            "c0-k0.slice"
        ]
    );

    // Only the moved copy serves from now on.
    io.fail_medium("m1");
    assert_eq!(io.lost_slices(), vec![(1, 0)]);
    assert!(read_all(io.as_ref()) == model.bytes, "live data differs");
    assert_snapshots(&io, &expected);
    // Copy-on-write keeps working on the moved slice.
    let mut model = Model {
        io: Arc::clone(&io),
        ..model
    };
    model.scatter(20);
    assert_snapshots(&io, &expected);
    io.delete_snapshot(2).expect("delete the middle snapshot");
    let kept = [expected[0].clone(), expected[2].clone()];
    assert_snapshots(&io, &kept);
    assert!(read_all(io.as_ref()) == model.bytes);

    // Reopened from the moved files alone.
    drop(io);
    f.media.set_medium_failed("m1", true);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("reopen"));
    assert_eq!(io.lost_slices(), vec![(1, 0)]);
    assert!(read_all(io.as_ref()) == model.bytes);
    assert_snapshots(&io, &kept);
}

#[test]
fn an_offline_copy_takes_the_snapshots_along_verified() {
    let mut f = fixture(1, 1, 8);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open"));
    let mut model = Model::new(&io);
    let expected = three_snapshots(&mut model);
    let live = model.bytes.clone();
    drop(model);
    drop(io);
    let mut last = (0, 0);
    let digest = f
        .media
        .copy_slice("m0", "m4", &key(0, 0), &throttled(64), &mut |d, t| {
            last = (d, t)
        })
        .expect("copy");
    assert_eq!(last.0, last.1, "progress ends at the total");
    assert!(last.1 > 8 * MIB * 3 / 4, "snapshot data counts: {last:?}");
    let target = f.media.slice_path("m4", &key(0, 0)).expect("path");
    assert_eq!(crate::digest_file(&target).expect("digest"), digest);
    assert_eq!(files_on(&f.media, "m4"), files_on(&f.media, "m0"));
    f.media
        .delete_slice("m0", &key(0, 0))
        .expect("delete source");
    assert_eq!(files_on(&f.media, "m0"), Vec::<String>::new());
    f.layout.media[0][0] = "m4".into();
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("reopen"));
    assert!(read_all(io.as_ref()) == live);
    assert_snapshots(&io, &expected);
    io.delete_snapshot(2).expect("delete the middle snapshot");
    assert_snapshots(&io, &[expected[0].clone(), expected[2].clone()]);
}

#[test]
fn a_cancelled_offline_copy_leaves_no_files_on_the_target() {
    let f = fixture(1, 1, 4);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open"));
    let mut model = Model::new(&io);
    three_snapshots(&mut model);
    drop(model);
    drop(io);
    let before = files_on(&f.media, "m0");
    // Cancelled once the slice's data is copied: in the snapshot files.
    let options = CopyOptions::default();
    let err = f
        .media
        .copy_slice("m0", "m4", &key(0, 0), &options, &mut |done, _| {
            if done > 3 * MIB {
                options.cancel.cancel();
            }
        })
        .unwrap_err();
    assert!(matches!(err, DataPlaneError::Cancelled), "{err}");
    assert_eq!(files_on(&f.media, "m4"), Vec::<String>::new());
    assert_eq!(files_on(&f.media, "m0"), before);
    // Leftovers of a copy that died between placing snapshot files and the
    // slice file are cleaned up by delete_partial_copy.
    let dir = f.media.medium_dir("m4").expect("dir").join("v");
    std::fs::write(dir.join("c0-k0.s1.map"), b"x").expect("orphan");
    std::fs::write(dir.join("c0-k0.s1.delta.partial"), b"x").expect("orphan");
    f.media
        .delete_partial_copy("m4", &key(0, 0))
        .expect("delete partial");
    assert_eq!(files_on(&f.media, "m4"), Vec::<String>::new());
}

#[test]
fn a_failed_live_move_leaves_no_files_on_the_target_and_the_snapshots_exact() {
    let f = fixture(1, 1, 8);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open"));
    let mut model = Model::new(&io);
    let expected = three_snapshots(&mut model);
    // Cancelled while the snapshot files are copied.
    let options = CopyOptions::default();
    let err = io
        .move_slice(
            0,
            0,
            "m4",
            &options,
            &mut |done, _| {
                if done > 7 * MIB {
                    options.cancel.cancel();
                }
            },
            &mut || Ok(()),
        )
        .unwrap_err();
    assert!(matches!(err, DataPlaneError::Cancelled), "{err}");
    assert_eq!(files_on(&f.media, "m4"), Vec::<String>::new());
    // Refused at the commit: everything placed goes again.
    let err = io
        .move_slice(
            0,
            0,
            "m4",
            &CopyOptions::default(),
            &mut |_, _| {},
            &mut || Err("store down".into()),
        )
        .unwrap_err();
    assert!(err.to_string().contains("store down"), "{err}");
    assert_eq!(files_on(&f.media, "m4"), Vec::<String>::new());
    model.scatter(10);
    assert!(read_all(io.as_ref()) == model.bytes);
    assert_snapshots(&io, &expected);
}

#[test]
fn a_degraded_volume_keeps_serving_and_a_rebuild_restores_the_copy_with_its_snapshots() {
    let f = fixture(2, 2, 8);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open"));
    let mut model = Model::new(&io);
    let expected = three_snapshots(&mut model);
    io.fail_medium("m0");
    io.fail_medium("m0");
    assert_eq!(io.lost_slices(), vec![(0, 0)]);
    assert!(read_all(io.as_ref()) == model.bytes);
    model.scatter(30);
    io.flush().expect("flush");
    assert!(read_all(io.as_ref()) == model.bytes);

    // Rebuild copy 0 of column 0 on m4 while writes go on.
    let writer = Writer::start(model);
    let mut progress = (0, 0);
    let mut committed = false;
    io.copy_in_phases(
        SliceCopyKind::Rebuild,
        (0, 0, "m4"),
        &throttled(24),
        &mut |d, t| progress = (d, t),
        &mut || {
            committed = true;
            Ok(())
        },
    )
    .expect("rebuild");
    let model = writer.stop();
    io.flush().expect("flush");
    assert!(committed && progress.0 > 4 * MIB, "{progress:?}");
    assert_eq!(io.lost_slices(), Vec::<(u32, u32)>::new());
    assert_eq!(
        files_on(&f.media, "m4"),
        [
            "c0-k0.s1.delta",
            "c0-k0.s1.map",
            "c0-k0.s2.delta",
            "c0-k0.s2.map",
            "c0-k0.s3.delta",
            "c0-k0.s3.map",
            "c0-k0.slice"
        ]
    );
    // The other copy of column 0 fails: everything is read from the rebuilt one.
    io.fail_medium("m2");
    assert_eq!(io.lost_slices(), vec![(1, 0)]);
    assert!(read_all(io.as_ref()) == model.bytes);
    assert_snapshots(&io, &expected);
    // A repeated call finds it done.
    io.copy_in_phases(
        SliceCopyKind::Rebuild,
        (0, 0, "m4"),
        &CopyOptions::default(),
        &mut |_, _| {},
        &mut || panic!("nothing to commit"),
    )
    .expect("repeat");
}

#[test]
fn io_errors_lose_the_copy_and_report_the_medium() {
    let f = fixture(2, 1, 4);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open"));
    let mut model = Model::new(&io);
    model.write(0, (4 * MIB) as usize);
    assert_eq!(f.media.failed_media(), Vec::<String>::new());
    io.slices[0][0].hooks.broken.store(true, Ordering::Release);
    // The read fails on copy 0 and is served by copy 1.
    assert!(read_all(io.as_ref()) == model.bytes);
    assert_eq!(io.lost_slices(), vec![(0, 0)]);
    assert_eq!(f.media.failed_media(), vec!["m0".to_string()]);
    model.scatter(10);
    io.flush().expect("flush");
    // A write that fails on the last copy answers EIO.
    io.slices[0][1].hooks.broken.store(true, Ordering::Release);
    let err = io.write(0, &[1u8; 4096], false).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO));
    let mut buf = vec![0u8; 4096];
    assert_eq!(io.read(0, &mut buf).unwrap_err().raw_os_error(), Some(5));
    assert_eq!(io.lost_slices(), vec![(0, 0), (1, 0)]);
    assert_eq!(
        f.media.failed_media(),
        vec!["m0".to_string(), "m1".to_string()]
    );
    f.media.set_medium_failed("m0", false);
    assert_eq!(f.media.failed_media(), vec!["m1".to_string()]);
}

#[test]
fn a_medium_whose_directory_disappears_is_noticed() {
    let f = fixture(2, 1, 4);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open"));
    let mut model = Model::new(&io);
    model.write(0, (2 * MIB) as usize);
    std::fs::remove_dir_all(f.media.medium_dir("m0").expect("dir")).expect("remove");
    assert_eq!(f.media.failed_media(), vec!["m0".to_string()]);
    model.scatter(10);
    io.flush().expect("flush");
    assert_eq!(io.lost_slices(), vec![(0, 0)]);
    assert!(read_all(io.as_ref()) == model.bytes);
    // Reopened, the missing slice is lost, not an error; a rebuild onto a
    // fresh medium brings the copy back.
    drop(model);
    drop(io);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("reopen"));
    assert_eq!(io.lost_slices(), vec![(0, 0)]);
    io.copy_in_phases(
        SliceCopyKind::Rebuild,
        (0, 0, "m5"),
        &CopyOptions::default(),
        &mut |_, _| {},
        &mut || Ok(()),
    )
    .expect("rebuild");
    io.fail_medium("m1");
    let mut back = vec![0u8; (2 * MIB) as usize];
    io.read(0, &mut back).expect("read the rebuilt copy");
    let mut from_m1_before = vec![0u8; back.len()];
    let path = f.media.slice_path("m1", &key(1, 0)).expect("path");
    File::open(path)
        .expect("copy 1")
        .read_exact_at(&mut from_m1_before, 0)
        .expect("read copy 1");
    assert!(back == from_m1_before);
}

#[test]
fn a_column_without_a_healthy_copy_answers_eio_and_cannot_be_rebuilt() {
    let f = fixture(1, 2, 2);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open"));
    let mut model = Model::new(&io);
    model.write(0, (4 * MIB) as usize);
    io.flush().expect("flush");
    drop(model);
    drop(io);
    f.media.set_medium_failed("m0", true);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open with a failed medium"));
    assert_eq!(io.lost_slices(), vec![(0, 0)]);
    // Stripe 0 is column 0 (lost), stripe 1 column 1.
    let mut buf = vec![0u8; 4096];
    assert_eq!(io.read(0, &mut buf).unwrap_err().raw_os_error(), Some(5));
    assert_eq!(
        io.read(MIB - 1, &mut buf).unwrap_err().raw_os_error(),
        Some(5)
    );
    io.read(MIB, &mut buf).expect("column 1 reads");
    assert_eq!(buf, pattern(2, (4 * MIB) as usize)[MIB as usize..][..4096]);
    assert_eq!(
        io.write(0, &buf, false).unwrap_err().raw_os_error(),
        Some(5)
    );
    io.write(MIB, &buf, true).expect("column 1 writes");
    assert_eq!(io.flush().unwrap_err().raw_os_error(), Some(5));
    let err = io
        .copy_in_phases(
            SliceCopyKind::Rebuild,
            (0, 0, "m4"),
            &CopyOptions::default(),
            &mut |_, _| {},
            &mut || Ok(()),
        )
        .unwrap_err();
    assert!(!err.is_transient());
    assert!(err.to_string().contains("no healthy copy"), "{err}");
    assert_eq!(files_on(&f.media, "m4"), Vec::<String>::new());
}

#[test]
fn a_failed_rebuild_leaves_no_target_and_the_slice_lost() {
    let f = fixture(2, 1, 4);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open"));
    let mut model = Model::new(&io);
    three_snapshots(&mut model);
    io.fail_medium("m0");
    let err = io
        .copy_in_phases(
            SliceCopyKind::Rebuild,
            (0, 0, "m4"),
            &CopyOptions::default(),
            &mut |_, _| {},
            &mut || Err("store down".into()),
        )
        .unwrap_err();
    assert!(err.to_string().contains("store down"), "{err}");
    assert_eq!(files_on(&f.media, "m4"), Vec::<String>::new());
    assert_eq!(io.lost_slices(), vec![(0, 0)]);
    model.scatter(5);
    assert!(read_all(io.as_ref()) == model.bytes);
    // A snapshot now skips the lost copy.
    io.snapshot(4).expect("snapshot");
}

#[test]
fn a_deleted_slice_file_is_lost_without_blaming_its_medium() {
    let f = fixture(2, 1, 4);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open"));
    let mut model = Model::new(&io);
    model.write(0, (2 * MIB) as usize);
    let path = f.media.slice_path("m0", &key(0, 0)).expect("path");
    std::fs::remove_file(path).expect("remove");
    io.flush().expect("flush");
    assert_eq!(io.lost_slices(), vec![(0, 0)]);
    assert_eq!(f.media.failed_media(), Vec::<String>::new());
    // Reported as that copy alone.
    assert_eq!(f.media.failed_copies(), vec![("m0".to_string(), key(0, 0))]);
    assert!(read_all(io.as_ref()) == model.bytes);
}

#[test]
fn a_slice_is_read_or_filled_by_one_copy_at_a_time() {
    let f = fixture(2, 1, 4);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open"));
    let mut model = Model::new(&io);
    model.write(0, (4 * MIB) as usize);
    io.fail_medium("m0");
    // Moving copy 1 (the only healthy one) while rebuilding copy 0 from it.
    let mut refused = None;
    io.move_slice(
        1,
        0,
        "m4",
        &CopyOptions::default(),
        &mut |_, _| {
            if refused.is_none() {
                refused = Some(
                    io.copy_in_phases(
                        SliceCopyKind::Rebuild,
                        (0, 0, "m5"),
                        &CopyOptions::default(),
                        &mut |_, _| {},
                        &mut || Ok(()),
                    )
                    .unwrap_err(),
                );
            }
        },
        &mut || Ok(()),
    )
    .expect("move");
    let refused = refused.expect("rebuild tried");
    assert!(
        refused.to_string().contains("already being copied"),
        "{refused}"
    );
    assert_eq!(files_on(&f.media, "m5"), Vec::<String>::new());
    io.copy_in_phases(
        SliceCopyKind::Rebuild,
        (0, 0, "m5"),
        &CopyOptions::default(),
        &mut |_, _| {},
        &mut || Ok(()),
    )
    .expect("rebuild after the move");
    io.fail_medium("m4");
    assert!(read_all(io.as_ref()) == model.bytes);
}

/// Writes to its own quarter of the volume as fast as it can until
/// stopped; `model` is that quarter as it was, returned as it is left.
fn hammer(
    io: Arc<LocalVolumeIo>,
    quarter: u64,
    stop: Arc<AtomicBool>,
    mut model: Vec<u8>,
) -> Vec<u8> {
    let len = model.len() as u64;
    let base = quarter * len;
    let mut seed = quarter * 1_000_003 + model.iter().map(|&b| u64::from(b)).sum::<u64>();
    while !stop.load(Ordering::Acquire) {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let n = (((seed >> 20) % 16 + 1) * 4096) as usize;
        let at = (seed >> 33) % (len - n as u64) / 4096 * 4096;
        let data = pattern(seed, n);
        io.write(base + at, &data, false).expect("write");
        model[at as usize..at as usize + n].copy_from_slice(&data);
    }
    model
}

/// Runs `op` while four threads write to the volume, then checks that
/// each listed slice file (one column) holds exactly what was written.
fn under_writes(io: &Arc<LocalVolumeIo>, model: &mut [u8], op: impl FnOnce(), check: &[PathBuf]) {
    let quarter = model.len() / 4;
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4u64)
        .map(|q| {
            let (io, stop) = (Arc::clone(io), Arc::clone(&stop));
            let part = model[q as usize * quarter..(q as usize + 1) * quarter].to_vec();
            thread::spawn(move || hammer(io, q, stop, part))
        })
        .collect();
    op();
    stop.store(true, Ordering::Release);
    for (q, w) in writers.into_iter().enumerate() {
        let part = w.join().expect("writer");
        model[q * quarter..(q + 1) * quarter].copy_from_slice(&part);
    }
    // Writes held after a snapshot reach the files at a flush.
    io.flush().expect("flush");
    for path in check {
        let mut got = vec![0u8; model.len()];
        File::open(path)
            .expect("slice")
            .read_exact_at(&mut got, 0)
            .expect("read slice");
        let first_bad = got.iter().zip(model.iter()).position(|(g, m)| g != m);
        assert_eq!(first_bad, None, "{} lost a write", path.display());
    }
}

#[test]
fn back_and_forth_moves_and_rebuilds_under_heavy_writes_lose_nothing() {
    let f = fixture(2, 1, 4);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open"));
    let mut model = Model::new(&io);
    let expected = three_snapshots(&mut model);
    let mut bytes = model.bytes.clone();
    drop(model);
    io.hooks.phase_gap_us.store(300, Ordering::Relaxed);
    let path = |medium: &str, copy: u32| f.media.slice_path(medium, &key(copy, 0)).expect("path");
    // Copy 0 moves m0 → m4 → m0 → ..., copy 1 is lost and rebuilt m1 ↔ m2.
    let (mut here, mut there) = ("m0".to_string(), "m4".to_string());
    for round in 0..6 {
        under_writes(
            &io,
            &mut bytes,
            || {
                io.move_slice(
                    0,
                    0,
                    &there,
                    &CopyOptions::default(),
                    &mut |_, _| {},
                    &mut || Ok(()),
                )
                .expect("move");
            },
            &[path(&there, 0)],
        );
        f.media
            .delete_slice(&here, &key(0, 0))
            .expect("delete source");
        std::mem::swap(&mut here, &mut there);
        let (from, to) = if round % 2 == 0 {
            ("m1", "m2")
        } else {
            ("m2", "m1")
        };
        io.fail_medium(from);
        under_writes(
            &io,
            &mut bytes,
            || {
                io.copy_in_phases(
                    SliceCopyKind::Rebuild,
                    (1, 0, to),
                    &CopyOptions::default(),
                    &mut |_, _| {},
                    &mut || Ok(()),
                )
                .expect("rebuild");
            },
            &[path(&here, 0), path(to, 1)],
        );
        f.media
            .delete_slice(from, &key(1, 0))
            .expect("delete lost copy");
    }
    assert!(read_all(io.as_ref()) == bytes);
    io.fail_medium(&here);
    assert!(read_all(io.as_ref()) == bytes);
    assert_snapshots(&io, &expected);
}

#[test]
fn a_copy_whose_target_or_source_fails_midway_leaves_no_target() {
    let f = fixture(2, 1, 8);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open"));
    let mut model = Model::new(&io);
    let expected = three_snapshots(&mut model);
    // The target's medium fails during a move: the move fails, I/O stays.
    let mut failed = false;
    let err = io
        .move_slice(
            0,
            0,
            "m4",
            &CopyOptions::default(),
            &mut |_, _| {
                if !failed {
                    io.fail_medium("m4");
                    failed = true;
                }
            },
            &mut || panic!("must not commit"),
        )
        .unwrap_err();
    assert!(err.to_string().contains("target failed"), "{err}");
    assert_eq!(files_on(&f.media, "m4"), Vec::<String>::new());
    assert_eq!(io.lost_slices(), Vec::<(u32, u32)>::new());
    model.scatter(10);
    // The copy a rebuild reads from breaks midway: no target, that copy lost.
    io.fail_medium("m0");
    let mut broke = false;
    let err = io
        .copy_in_phases(
            SliceCopyKind::Rebuild,
            (0, 0, "m5"),
            &CopyOptions::default(),
            &mut |_, _| {
                if !broke {
                    io.slices[0][1].hooks.broken.store(true, Ordering::Release);
                    broke = true;
                }
            },
            &mut || panic!("must not commit"),
        )
        .unwrap_err();
    assert!(
        matches!(&err, DataPlaneError::Io { op: "read", .. }),
        "{err}"
    );
    assert_eq!(files_on(&f.media, "m5"), Vec::<String>::new());
    assert_eq!(io.lost_slices(), vec![(0, 0), (1, 0)]);
    assert_eq!(f.media.failed_media(), vec!["m1".to_string()]);
    let mut buf = vec![0u8; 4096];
    assert_eq!(io.read(0, &mut buf).unwrap_err().raw_os_error(), Some(5));
    // Healthy again (say a loose cable): a reopened volume reads it all.
    io.slices[0][1].hooks.broken.store(false, Ordering::Release);
    f.media.set_medium_failed("m0", true);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("reopen"));
    assert!(read_all(io.as_ref()) == model.bytes);
    assert_snapshots(&io, &expected);
}

/// Begins a live copy of slice (copy, column) to `to` and takes it through
/// fill and switch.
fn switched(
    io: &Arc<LocalVolumeIo>,
    kind: SliceCopyKind,
    (copy, column): (u32, u32),
    to: &str,
) -> Box<dyn SliceMove> {
    let mut moving = Arc::clone(io)
        .begin_slice_copy(kind, copy, column, to, 0)
        .expect("begin");
    assert!(!moving.in_place());
    assert_eq!(moving.starts_at(), 0);
    moving
        .fill(&CopyOptions::default(), &mut |_, _| {})
        .expect("fill");
    moving.switch().expect("switch");
    moving
}

fn slice_bytes(f: &Fixture, medium: &str, copy: u32, column: u32) -> Vec<u8> {
    std::fs::read(
        f.media
            .slice_path(medium, &key(copy, column))
            .expect("path"),
    )
    .expect("read")
}

#[test]
fn an_abort_after_the_switch_goes_back_to_the_old_place_with_every_write_made_meanwhile() {
    let f = fixture(1, 1, 8);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open"));
    let mut model = Model::new(&io);
    let expected = three_snapshots(&mut model);
    let moving = switched(&io, SliceCopyKind::Move, (0, 0), "m4");
    // Between the switch and the store's commit: reads come from the
    // target, writes and discards reach both places (the old one through
    // its snapshots), and snapshot operations wait.
    model.scatter(60);
    io.flush().expect("flush");
    assert!(read_all(io.as_ref()) == model.bytes);
    assert!(slice_bytes(&f, "m4", 0, 0) == model.bytes);
    let busy = io.snapshot(4).expect_err("refused during the move");
    assert_eq!(busy.kind(), std::io::ErrorKind::ResourceBusy);

    // The commit failed: back to the old place, which has every write.
    moving.abort().expect("abort");
    assert_eq!(files_on(&f.media, "m4"), Vec::<String>::new());
    assert!(slice_bytes(&f, "m0", 0, 0) == model.bytes);
    assert!(read_all(io.as_ref()) == model.bytes);
    assert_snapshots(&io, &expected);
    model.scatter(20);
    io.flush().expect("flush");
    assert!(
        slice_bytes(&f, "m0", 0, 0) == model.bytes,
        "I/O is on m0 again"
    );
    io.snapshot(4).expect("snapshots again after the abort");

    // And the move can be made again.
    io.move_slice(
        0,
        0,
        "m4",
        &CopyOptions::default(),
        &mut |_, _| {},
        &mut || Ok(()),
    )
    .expect("move again");
    model.scatter(20);
    assert!(read_all(io.as_ref()) == model.bytes);
    assert_snapshots(&io, &expected);
}

#[test]
fn a_move_dropped_between_switch_and_finish_keeps_every_write_on_both_places() {
    let f = fixture(2, 1, 8);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open"));
    let mut model = Model::new(&io);
    model.write(0, 6 * MIB as usize);
    let moving = switched(&io, SliceCopyKind::Move, (0, 0), "m4");
    model.scatter(30);
    // As if the process died before the store answered: neither finish
    // nor abort. I/O goes on, and the old place still takes every write.
    drop(moving);
    model.scatter(30);
    io.flush().expect("flush");
    assert!(slice_bytes(&f, "m0", 0, 0) == model.bytes);
    assert!(slice_bytes(&f, "m4", 0, 0) == model.bytes);
    // After a crash the store names either place: both read the same.
    for medium in ["m0", "m4"] {
        let mut layout = f.layout.clone();
        layout.media[0][0] = medium.to_string();
        layout.media[1][0] = "m5".to_string(); // only copy 0 answers
        let reopened = LocalVolumeIo::open(&f.media, &layout).expect("reopen");
        assert!(read_all(&reopened) == model.bytes, "{medium} differs");
    }
    // The step runs again: the slice is on m4, so the move is in place;
    // committed, it finishes and the old place is let go.
    let again = Arc::clone(&io)
        .begin_slice_copy(SliceCopyKind::Move, 0, 0, "m4", 0)
        .expect("begin again");
    assert!(again.in_place());
    again.finish().expect("finish");
    let old = slice_bytes(&f, "m0", 0, 0);
    model.scatter(20);
    io.flush().expect("flush");
    assert!(slice_bytes(&f, "m0", 0, 0) == old, "m0 no longer written");
    assert!(slice_bytes(&f, "m4", 0, 0) == model.bytes);
    io.snapshot(1).expect("snapshots again once finished");
}

#[test]
fn a_rebuild_undone_after_its_switch_leaves_the_slice_lost_and_no_target() {
    let f = fixture(2, 1, 4);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open"));
    let mut model = Model::new(&io);
    model.write(0, 4 * MIB as usize);
    io.fail_medium("m0");
    assert_eq!(io.lost_slices(), vec![(0, 0)]);
    let rebuilding = switched(&io, SliceCopyKind::Rebuild, (0, 0), "m4");
    assert_eq!(io.lost_slices(), Vec::<(u32, u32)>::new());
    model.scatter(20);
    rebuilding.abort().expect("abort");
    assert_eq!(io.lost_slices(), vec![(0, 0)]);
    assert_eq!(files_on(&f.media, "m4"), Vec::<String>::new());
    model.scatter(20);
    assert!(read_all(io.as_ref()) == model.bytes);
}

#[test]
fn a_begin_without_its_partial_file_starts_again_and_creates_nothing_before_the_fill() {
    let f = fixture(2, 1, 8);
    let io = Arc::new(LocalVolumeIo::open(&f.media, &f.layout).expect("open"));
    let mut model = Model::new(&io);
    model.write(0, 4 * MIB as usize);
    // A checkpoint whose partial file is gone: the copy starts again, and
    // until the caller has forgotten the checkpoint (then fills) no file
    // exists that the old checkpoint could be taken to describe.
    let mut moving = Arc::clone(&io)
        .begin_slice_copy(SliceCopyKind::Move, 0, 0, "m4", 3 * MIB)
        .expect("begin");
    assert_eq!(moving.starts_at(), 0);
    assert_eq!(files_on(&f.media, "m4"), Vec::<String>::new());
    drop(moving);
    assert_eq!(files_on(&f.media, "m4"), Vec::<String>::new());

    moving = Arc::clone(&io)
        .begin_slice_copy(SliceCopyKind::Move, 0, 0, "m4", 3 * MIB)
        .expect("begin again");
    let stats = crate::CopyStats::default();
    let options = CopyOptions {
        stats: stats.clone(),
        ..CopyOptions::default()
    };
    moving.fill(&options, &mut |_, _| {}).expect("fill");
    assert_eq!(stats.resumed_at(), 0);
    assert_eq!(stats.copied(), 4 * MIB);
    moving.switch().expect("switch");
    moving.finish().expect("finish");
    assert!(slice_bytes(&f, "m4", 0, 0) == model.bytes);
}
