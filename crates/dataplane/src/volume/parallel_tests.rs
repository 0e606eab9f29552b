//! Copies synced at once: flushes and FUA writes keep the error semantics of
//! copies written one after another; a benchmark compares the two.

use super::io::LocalVolumeIo;
use super::*;
use crate::{DataPlane, LocalMedia, SliceKey};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

/// A volume `v` of `copies` copies of one `slice_mib` MiB column, copy `i`
/// on medium `m<i>`.
fn volume(copies: usize, slice_mib: u64) -> (tempfile::TempDir, LocalMedia, LocalVolumeIo) {
    let dir = tempfile::tempdir().expect("temp dir");
    let media =
        LocalMedia::new((0..copies).map(|i| (format!("m{i}"), dir.path().join(format!("m{i}")))));
    let layout = VolumeLayout {
        volume_id: "v".into(),
        size: slice_mib * MIB,
        media: (0..copies).map(|i| vec![format!("m{i}")]).collect(),
        epoch: 0,
    };
    for copy in 0..copies {
        let key = SliceKey {
            volume_id: "v".into(),
            copy: copy as u32,
            column: 0,
        };
        media
            .create_slice(&format!("m{copy}"), &key, slice_mib * MIB)
            .expect("slice");
    }
    let io = LocalVolumeIo::open(&media, &layout).expect("open");
    (dir, media, io)
}

fn read_back(io: &LocalVolumeIo, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    io.read(offset, &mut buf).expect("read");
    buf
}

#[test]
fn a_media_failure_in_a_parallel_flush_loses_only_that_copy() {
    let (_d, media, io) = volume(3, 4);
    io.write(0, &[1u8; 8192], false).expect("write");
    io.slices[0][1].hooks.broken.store(true, Ordering::Release);
    io.flush().expect("flush goes on with the other copies");
    assert_eq!(io.lost_slices(), vec![(1, 0)]);
    assert_eq!(media.failed_media(), vec!["m1".to_string()]);
    for copy in [0, 2] {
        assert!(!io.slices[0][copy].dirty.load(Ordering::Acquire));
    }
    // A FUA write whose write (after its save) fails on one copy: the same.
    io.slices[0][2].hooks.breaks_in.store(2, Ordering::Release);
    io.write(4096, &[2u8; 4096], true).expect("FUA write");
    assert_eq!(io.lost_slices(), vec![(1, 0), (2, 0)]);
    assert_eq!(read_back(&io, 0, 8192)[4096..], [2u8; 4096]);
    // The last copy failing too: EIO.
    io.write(0, &[3u8; 4096], false).expect("write");
    io.slices[0][0].hooks.broken.store(true, Ordering::Release);
    assert_eq!(io.flush().unwrap_err().raw_os_error(), Some(libc::EIO));
}

#[test]
fn any_other_error_fails_a_parallel_flush_and_loses_nothing() {
    let (_d, media, io) = volume(2, 4);
    io.write(0, &[1u8; 4096], false).expect("write");
    io.slices[0][1]
        .hooks
        .fail_with
        .store(libc::ENOSPC, Ordering::Release);
    let err = io.flush().expect_err("flush fails");
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    assert_eq!(io.lost_slices(), Vec::<(u32, u32)>::new());
    assert_eq!(media.failed_media(), Vec::<String>::new());
    // Still to be made durable there: the next flush does it.
    assert!(io.slices[0][1].dirty.load(Ordering::Acquire));
    io.slices[0][1].hooks.fail_with.store(0, Ordering::Release);
    io.flush().expect("flush");
    assert!(!io.slices[0][1].dirty.load(Ordering::Acquire));
    // A FUA write fails, before any copy is written.
    io.slices[0][0]
        .hooks
        .fail_with
        .store(libc::ENOSPC, Ordering::Release);
    let err = io.write(0, &[2u8; 4096], true).expect_err("write fails");
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    io.slices[0][0].hooks.fail_with.store(0, Ordering::Release);
    assert_eq!(read_back(&io, 0, 4096), [1u8; 4096]);
    assert_eq!(io.lost_slices(), Vec::<(u32, u32)>::new());
}

/// Median and mean of `samples`, in µs.
fn summary(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort_unstable();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mean = samples.iter().map(|d| us(*d)).sum::<f64>() / samples.len().max(1) as f64;
    (samples.get(samples.len() / 2).map_or(0.0, |d| us(*d)), mean)
}

/// Flush-heavy 4 KiB writes on a 2-copy volume, the copies one after
/// another against at once, in the same run: the modes take turns op by
/// op, so both see the same disk (the media are directories of one
/// filesystem here; copies on separate disks gain more).
#[test]
#[ignore = "benchmark: thousands of fsyncs"]
fn benchmark_copies_synced_at_once_against_one_after_another() {
    let (_d, _media, io) = volume(2, 64);
    let n = 2000;
    let data = vec![0x5au8; 4096];
    let modes = [
        (1u8, "one after another"),
        (0, "syncs at once"),
        (2, "all at once"),
    ];
    let at = |i: usize| ((i * 7919) % 16_000) as u64 * 4096;
    let timed = |mode: u8, op: &dyn Fn()| {
        io.hooks.copies_mode.store(mode, Ordering::Relaxed);
        let start = Instant::now();
        op();
        start.elapsed()
    };
    let mut samples = vec![(Vec::new(), Vec::new(), Vec::new()); modes.len()];
    for i in 0..n {
        for (m, &(mode, _)) in modes.iter().enumerate() {
            let offset = at(i * modes.len() + m);
            samples[m].0.push(timed(mode, &|| {
                io.write(offset, &data, false).expect("write");
                io.flush().expect("flush");
            }));
            samples[m].1.push(timed(mode, &|| {
                io.write(offset, &data, true).expect("FUA write");
            }));
        }
    }
    // Plain writes apart: a flush after them would sync their pages too.
    for i in 0..n {
        for (m, &(mode, _)) in modes.iter().enumerate() {
            for k in 0..8 {
                let offset = at((i * modes.len() + m) * 8 + k);
                samples[m].2.push(timed(mode, &|| {
                    io.write(offset, &data, false).expect("write");
                }));
            }
        }
        io.flush().expect("flush");
    }
    println!(
        "2 copies, 4 KiB writes, µs per operation: median / mean ({n} each, plain {})",
        8 * n
    );
    println!(
        "{:<20} {:>18} {:>18} {:>18}",
        "mode", "write+flush", "FUA write", "plain write"
    );
    for (m, (_, name)) in modes.iter().enumerate() {
        let (wf, fua, plain) = &mut samples[m];
        let (wf, fua, plain) = (summary(wf), summary(fua), summary(plain));
        println!(
            "{name:<20} {:>8.0} / {:>7.0} {:>8.0} / {:>7.0} {:>8.1} / {:>7.1}",
            wf.0, wf.1, fua.0, fua.1, plain.0, plain.1
        );
    }
}
