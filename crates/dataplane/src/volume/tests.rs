//! The volume front end: striping, copies, snapshots, extents.

use super::layout::{segments, Segment};
use super::*;
use crate::extents::punch_hole;
use crate::fsutil::partial_path;
use crate::{CopyOptions, LocalMedia, SliceKey, COW_CHUNK};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::DataPlane;
use std::thread;

const MIB: u64 = 1 << 20;

/// Media m0..m4 in a temp dir; a volume `v` with `copies` × `columns`
/// slices of `slice_mib` MiB on m0, m1, ...
fn volume(
    copies: usize,
    columns: usize,
    slice_mib: u64,
) -> (tempfile::TempDir, LocalMedia, VolumeLayout) {
    let dir = tempfile::tempdir().expect("temp dir");
    let media =
        LocalMedia::new((0..5).map(|i| (format!("m{i}"), dir.path().join(format!("m{i}")))));
    let mut layout = VolumeLayout {
        volume_id: "v".into(),
        size: columns as u64 * slice_mib * MIB,
        media: Vec::new(),
        epoch: 0,
    };
    let mut next = 0;
    for copy in 0..copies {
        let mut row = Vec::new();
        for column in 0..columns {
            let medium = format!("m{next}");
            next += 1;
            let key = SliceKey {
                volume_id: "v".into(),
                copy: copy as u32,
                column: column as u32,
            };
            media
                .create_slice(&medium, &key, slice_mib * MIB)
                .expect("slice");
            row.push(medium);
        }
        layout.media.push(row);
    }
    (dir, media, layout)
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1)
        .collect()
}

#[test]
fn writes_reach_every_copy_and_read_back_across_stripes() {
    let (_d, media, layout) = volume(2, 2, 4);
    let io = LocalVolumeIo::open(&media, &layout).expect("open");
    let data = pattern(7, (2 * MIB + 4096) as usize);
    io.write(MIB - 2048, &data, false).expect("write");
    io.flush().expect("flush");
    let mut back = vec![0u8; data.len()];
    io.read(MIB - 2048, &mut back).expect("read");
    assert!(back == data);
    // Stripe 0 is in column 0, stripe 1 in column 1, stripe 2 in column 0 row 1.
    for copy in 0..2u32 {
        for (column, off, at) in [
            (0u32, MIB - 2048, 0usize),
            (1, 0, 2048),
            (0, MIB, 2048 + MIB as usize),
        ] {
            let key = SliceKey {
                volume_id: "v".into(),
                copy,
                column,
            };
            let path = media
                .slice_path(&layout.media[copy as usize][column as usize], &key)
                .expect("path");
            let file = File::open(path).expect("slice");
            let mut got = vec![0u8; 1024];
            file.read_exact_at(&mut got, off).expect("read slice");
            assert!(got == data[at..at + 1024], "copy {copy} column {column}");
        }
    }
}

#[test]
fn requests_beyond_the_end_are_refused() {
    let (_d, media, layout) = volume(1, 1, 2);
    let io = LocalVolumeIo::open(&media, &layout).expect("open");
    let mut buf = [0u8; 10];
    assert!(io.read(2 * MIB - 5, &mut buf).is_err());
    assert!(io.write(u64::MAX - 2, &buf, false).is_err());
    assert!(io.discard(2 * MIB, 1, false).is_err());
}

#[test]
fn discard_reads_back_as_zeros_on_every_copy() {
    let (_d, media, layout) = volume(2, 1, 2);
    let io = LocalVolumeIo::open(&media, &layout).expect("open");
    io.write(0, &pattern(1, 65536), true).expect("write");
    io.discard(4096, 8192, false).expect("discard");
    let mut back = vec![1u8; 8192];
    io.read(4096, &mut back).expect("read");
    assert!(back.iter().all(|&b| b == 0));
}

#[test]
fn growing_the_volume_keeps_every_byte_where_it_was() {
    let (_d, media, mut layout) = volume(1, 2, 2);
    let io = LocalVolumeIo::open(&media, &layout).expect("open");
    let data = pattern(3, (4 * MIB) as usize);
    io.write(0, &data, false).expect("write");
    for column in 0..2u32 {
        let key = SliceKey {
            volume_id: "v".into(),
            copy: 0,
            column,
        };
        media
            .grow_slice(&layout.media[0][column as usize], &key, 4 * MIB)
            .expect("grow");
    }
    layout.size = 8 * MIB;
    io.set_size(layout.size);
    let reopened = LocalVolumeIo::open(&media, &layout).expect("reopen");
    let mut back = vec![0u8; data.len()];
    reopened.read(0, &mut back).expect("read");
    assert!(back == data);
    reopened
        .write(7 * MIB, &pattern(4, 4096), false)
        .expect("write in the new space");
}

#[test]
fn a_live_move_keeps_every_write_made_during_the_copy() {
    let (_d, media, layout) = volume(1, 1, 64);
    let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
    io.write(0, &pattern(9, (16 * MIB) as usize), false)
        .expect("initial data");
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (io, stop) = (Arc::clone(&io), Arc::clone(&stop));
        thread::spawn(move || {
            let mut written = Vec::new();
            let mut i = 0u64;
            while !stop.load(Ordering::Acquire) {
                // Spread over the whole slice: before and after the cursor.
                let off = (i * 7919 * 4096) % (63 * MIB);
                let data = pattern((i % 251) as u8, 4096);
                io.write(off, &data, false).expect("write during move");
                written.push((off, data));
                i += 1;
            }
            written
        })
    };
    let options = CopyOptions {
        rate_limit: Some(64 * MIB),
        ..CopyOptions::default()
    };
    let mut committed = false;
    io.move_slice(0, 0, "m4", &options, &mut |_, _| {}, &mut || {
        committed = true;
        Ok(())
    })
    .expect("move");
    stop.store(true, Ordering::Release);
    let written = writer.join().expect("writer");
    assert!(committed);
    assert!(written.len() > 10, "the writer ran during the move");
    // Later writes win: replay to find each offset's last value.
    let mut last = std::collections::HashMap::new();
    for (off, data) in &written {
        last.insert(*off, data.clone());
    }
    let key = SliceKey {
        volume_id: "v".into(),
        copy: 0,
        column: 0,
    };
    let target = File::open(media.slice_path("m4", &key).expect("path")).expect("moved slice");
    for (off, data) in &last {
        let mut got = vec![0u8; 4096];
        target.read_exact_at(&mut got, *off).expect("read target");
        assert!(&got == data, "offset {off} lost a write");
        let mut via_io = vec![0u8; 4096];
        io.read(*off, &mut via_io).expect("read via io");
        assert!(&via_io == data);
    }
    assert!(!partial_path(&media.slice_path("m4", &key).expect("path")).exists());
}

#[test]
fn a_refused_commit_leaves_io_on_the_source_and_no_target() {
    let (_d, media, layout) = volume(1, 1, 8);
    let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
    io.write(0, &pattern(5, 65536), false).expect("write");
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
    let key = SliceKey {
        volume_id: "v".into(),
        copy: 0,
        column: 0,
    };
    let target = media.slice_path("m4", &key).expect("path");
    assert!(!target.exists() && !partial_path(&target).exists());
    io.write(0, &pattern(6, 4096), false).expect("write after");
    let src = File::open(media.slice_path("m0", &key).expect("path")).expect("source");
    let mut got = vec![0u8; 4096];
    src.read_exact_at(&mut got, 0).expect("read");
    assert!(got == pattern(6, 4096), "I/O still goes to the source");
}

fn read_all(io: &dyn VolumeIo) -> Vec<u8> {
    let mut buf = vec![0u8; io.size() as usize];
    io.read(0, &mut buf).expect("read");
    buf
}

#[test]
fn a_snapshot_view_reads_the_volume_as_it_was_while_it_changes() {
    let (_d, media, mut layout) = volume(2, 2, 4);
    let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
    io.write(MIB - 100, &pattern(1, (3 * MIB) as usize), false)
        .expect("write");
    let before = read_all(io.as_ref());
    io.snapshot(1).expect("snapshot");
    io.snapshot(1).expect("repeated snapshot is a no-op");
    io.write(0, &pattern(2, (5 * MIB) as usize), false)
        .expect("write after");
    io.discard(6 * MIB, MIB, false).expect("discard after");
    let after = read_all(io.as_ref());
    let view = Arc::clone(&io).snapshot_view(1, layout.size).expect("view");
    assert!(read_all(view.as_ref()) == before);
    let err = view.write(0, &[1], false).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS));
    assert_eq!(
        view.discard(0, 1, false).unwrap_err().raw_os_error(),
        Some(libc::EROFS)
    );
    assert!(Arc::clone(&io).snapshot_view(1, layout.size + 1).is_err());
    assert!(Arc::clone(&io).snapshot_view(2, layout.size).is_err());

    // A second snapshot; rolling back to the first keeps the second.
    io.snapshot(2).expect("snapshot 2");
    io.rollback(1).expect("rollback");
    assert!(read_all(io.as_ref()) == before);
    let view2 = Arc::clone(&io)
        .snapshot_view(2, layout.size)
        .expect("view 2");
    assert!(read_all(view2.as_ref()) == after);

    // Reopening the volume finds both; deleting the first keeps the second.
    drop((view, view2));
    drop(io);
    let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("reopen"));
    io.delete_snapshot(1).expect("delete");
    io.delete_snapshot(1).expect("delete again");
    assert!(Arc::clone(&io).snapshot_view(1, layout.size).is_err());
    let view2 = Arc::clone(&io)
        .snapshot_view(2, layout.size)
        .expect("view 2");
    assert!(read_all(view2.as_ref()) == after);
    // A slice with snapshots moves with them.
    io.move_slice(
        0,
        0,
        "m4",
        &CopyOptions::default(),
        &mut |_, _| {},
        &mut || Ok(()),
    )
    .expect("move");
    let key = SliceKey {
        volume_id: "v".into(),
        copy: 0,
        column: 0,
    };
    media.delete_slice("m0", &key).expect("delete the source");
    layout.media[0][0] = "m4".into();
    assert!(read_all(view2.as_ref()) == after);
    assert!(read_all(io.as_ref()) == before);
    // Deleting the slices removes their snapshot files too.
    io.delete_snapshot(2).expect("delete 2");
    io.snapshot(3).expect("snapshot 3");
    drop((view2, io));
    for (copy, row) in layout.media.iter().enumerate() {
        for (column, medium) in row.iter().enumerate() {
            let key = SliceKey {
                volume_id: "v".into(),
                copy: copy as u32,
                column: column as u32,
            };
            media.delete_slice(medium, &key).expect("delete slice");
            let dir = media.medium_dir(medium).expect("dir").join("v");
            assert!(!dir.exists(), "{} left behind", dir.display());
        }
    }
}

#[test]
fn a_snapshot_left_on_some_slices_is_taken_again_whole() {
    let (_d, media, layout) = volume(1, 2, 2);
    let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
    io.write(0, &pattern(1, (4 * MIB) as usize), false)
        .expect("write");
    // As an interrupted call leaves it: column 0 only, at an older instant.
    let first = &io.slices[0][0];
    let state = first.read_state().expect("state");
    let live = state.live.as_ref().expect("live");
    live.create_snapshot(5).expect("partial");
    drop(state);
    io.write(0, &pattern(2, (4 * MIB) as usize), false)
        .expect("write");
    let now = read_all(io.as_ref());
    io.snapshot(5).expect("snapshot");
    let view = Arc::clone(&io).snapshot_view(5, layout.size).expect("view");
    assert!(read_all(view.as_ref()) == now);
}

#[test]
fn snapshot_operations_are_refused_during_a_move_and_the_move_goes_on() {
    let (_d, media, layout) = volume(1, 1, 8);
    let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
    io.write(0, &pattern(1, (8 * MIB) as usize), false)
        .expect("write");
    io.snapshot(1).expect("snapshot");
    let mut refused = Vec::new();
    io.move_slice(
        0,
        0,
        "m4",
        &CopyOptions::default(),
        &mut |_, _| {
            if refused.is_empty() {
                refused.push(io.snapshot(2).unwrap_err());
                refused.push(io.delete_snapshot(1).unwrap_err());
                refused.push(io.rollback(1).unwrap_err());
            }
        },
        &mut || Ok(()),
    )
    .expect("move");
    assert_eq!(refused.len(), 3);
    for e in &refused {
        assert_eq!(e.kind(), io::ErrorKind::ResourceBusy, "{e}");
    }
    io.snapshot(2).expect("snapshot after the move");
    io.delete_snapshot(1).expect("delete after the move");
}

#[test]
fn a_write_whose_save_finds_no_space_reaches_no_copy() {
    let (_d, media, layout) = volume(2, 1, 2);
    let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
    io.write(0, &pattern(1, (2 * MIB) as usize), false)
        .expect("write");
    let before = read_all(io.as_ref());
    io.snapshot(1).expect("snapshot");
    // The second copy's save fails: its first delta write finds no space.
    io.slices[0][1]
        .read_state()
        .expect("state")
        .live
        .as_ref()
        .expect("live")
        .as_local()
        .expect("a local slice")
        .snapshot_files()
        .inject(Some(crate::snapshot::Fault {
            at: 0,
            crash: false,
            seen: 0,
        }));
    let err = io.write(4096, &pattern(2, 8192), false).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    for copy in 0..2u32 {
        let key = SliceKey {
            volume_id: "v".into(),
            copy,
            column: 0,
        };
        let path = media
            .slice_path(&layout.media[copy as usize][0], &key)
            .expect("path");
        let file = File::open(path).expect("slice");
        let mut got = vec![0u8; (2 * MIB) as usize];
        file.read_exact_at(&mut got, 0).expect("read slice");
        assert!(got == before, "copy {copy} was written");
    }
    let view = Arc::clone(&io).snapshot_view(1, layout.size).expect("view");
    assert!(read_all(view.as_ref()) == before);
    // With space again the write goes through on both copies.
    io.write(4096, &pattern(2, 8192), false).expect("retry");
    assert!(read_all(view.as_ref()) == before);
}

#[test]
fn a_write_over_the_snapshot_budget_fails_with_enospc_and_changes_nothing() {
    let (_d, media, layout) = volume(2, 1, 2);
    let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
    io.write(0, &pattern(1, (2 * MIB) as usize), false)
        .expect("write");
    let before = read_all(io.as_ref());
    io.snapshot(1).expect("snapshot");
    // The second copy's medium has room for its map block only.
    let held = media
        .medium_snapshot_usage("m1")
        .expect("usage")
        .values()
        .sum::<u64>();
    media.set_snapshot_budget("m1", Some(held));
    let err = io.write(4096, &pattern(2, 8192), false).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::StorageFull, "{err}");
    assert!(err.to_string().contains("medium 'm1'"), "{err}");
    for copy in 0..2u32 {
        let key = SliceKey {
            volume_id: "v".into(),
            copy,
            column: 0,
        };
        let path = media
            .slice_path(&layout.media[copy as usize][0], &key)
            .expect("path");
        let mut got = vec![0u8; (2 * MIB) as usize];
        File::open(path)
            .expect("slice")
            .read_exact_at(&mut got, 0)
            .expect("read slice");
        assert!(got == before, "copy {copy} was written");
    }
    // A write to a chunk already saved on every copy costs nothing more.
    let view = Arc::clone(&io).snapshot_view(1, layout.size).expect("view");
    assert!(read_all(view.as_ref()) == before);
    // One chunk's room: the same write now goes through.
    media.set_snapshot_budget("m1", Some(held + COW_CHUNK + 4096));
    io.write(4096, &pattern(2, 8192), false)
        .expect("room for one chunk");
    // A second chunk does not fit.
    let err = io
        .write(COW_CHUNK + 4096, &pattern(3, 8192), false)
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::StorageFull, "{err}");
    // The chunk saved already takes no more space.
    io.write(0, &pattern(4, 4096), false).expect("saved chunk");
    let mut expect = before.clone();
    expect[4096..4096 + 8192].copy_from_slice(&pattern(2, 8192));
    expect[..4096].copy_from_slice(&pattern(4, 4096));
    assert!(read_all(io.as_ref()) == expect);
    assert!(read_all(view.as_ref()) == before);
    // Deleting the snapshot frees its space: no save is needed at all.
    io.delete_snapshot(1).expect("delete");
    io.write(COW_CHUNK + 4096, &pattern(3, 8192), false)
        .expect("no snapshot, no save");
}

#[test]
fn the_budget_count_follows_saves_without_scanning_and_is_re_measured_after_changes() {
    let (_d, media, layout) = volume(1, 1, 2);
    let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
    io.write(0, &pattern(1, (2 * MIB) as usize), false)
        .expect("write");
    io.snapshot(1).expect("snapshot");
    media.set_snapshot_budget("m0", Some(64 * MIB));
    assert_eq!(media.space.figures("m0"), (Some(64 * MIB), None));
    // Four chunks saved: the count is the files' measure plus exactly
    // what the saves allocated.
    io.write(0, &pattern(2, (4 * COW_CHUNK) as usize), false)
        .expect("write");
    // Held until a flush makes the saves (their space was taken at once).
    io.flush().expect("flush");
    let counted = media.space.figures("m0").1.expect("counted");
    let measured: u64 = media
        .medium_snapshot_usage("m0")
        .expect("usage")
        .values()
        .sum();
    assert_eq!(counted, measured);
    assert!(counted >= 4 * COW_CHUNK, "{counted}");
    // A file the count does not know of: a save does not scan for it...
    let stray = media
        .medium_dir("m0")
        .expect("dir")
        .join("v")
        .join("c9-k9.s1.delta");
    std::fs::write(&stray, vec![1u8; MIB as usize]).expect("stray");
    io.write(4 * COW_CHUNK, &pattern(3, 4096), false)
        .expect("write");
    assert_eq!(media.space.figures("m0").1, Some(counted + COW_CHUNK));
    // ...a new budget makes the next save measure the files again (the
    // held save made first, so that the files hold it).
    io.flush().expect("flush");
    media.set_snapshot_budget("m0", Some(64 * MIB));
    io.write(5 * COW_CHUNK, &pattern(3, 4096), false)
        .expect("write");
    let recounted = media.space.figures("m0").1.expect("counted");
    assert!(recounted >= counted + 2 * COW_CHUNK + MIB, "{recounted}");
    io.delete_snapshot(1).expect("delete");
    assert_eq!(media.space.figures("m0").1, None);
}

#[test]
fn no_write_is_torn_across_a_snapshot() {
    let (_d, media, layout) = volume(2, 2, 4);
    let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
    let len = (2 * MIB + 8192) as usize;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (io, stop) = (Arc::clone(&io), Arc::clone(&stop));
        thread::spawn(move || {
            let mut seed = 0u8;
            while !stop.load(Ordering::Acquire) {
                seed = seed.wrapping_add(1);
                // Spans three stripes over both columns and both copies.
                io.write(MIB - 4096, &pattern(seed, len), false)
                    .expect("write");
            }
        })
    };
    for id in 1..=20u64 {
        io.snapshot(id).expect("snapshot");
        let view = Arc::clone(&io)
            .snapshot_view(id, layout.size)
            .expect("view");
        let mut got = vec![0u8; len];
        view.read(MIB - 4096, &mut got).expect("read");
        let whole = got.iter().all(|&b| b == 0)
            || (0..=255u8)
                .any(|seed| got[..64] == pattern(seed, 64)[..] && got == pattern(seed, len));
        assert!(whole, "snapshot {id} holds a torn write");
    }
    stop.store(true, Ordering::Release);
    writer.join().expect("writer");
}

#[test]
fn one_column_maps_offsets_unchanged() {
    let s = segments(1, 5 * STRIPE + 7, 100);
    assert_eq!(
        s,
        vec![Segment {
            column: 0,
            slice_offset: 5 * STRIPE + 7,
            buf_offset: 0,
            len: 100
        }]
    );
}

#[test]
fn stripes_rotate_over_columns_and_split_at_boundaries() {
    let s = segments(2, STRIPE - 10, 20 + STRIPE as usize);
    assert_eq!(
        s,
        vec![
            Segment {
                column: 0,
                slice_offset: STRIPE - 10,
                buf_offset: 0,
                len: 10
            },
            Segment {
                column: 1,
                slice_offset: 0,
                buf_offset: 10,
                len: STRIPE as usize
            },
            Segment {
                column: 0,
                slice_offset: STRIPE,
                buf_offset: 10 + STRIPE as usize,
                len: 10
            },
        ]
    );
}

#[test]
fn the_mapping_does_not_depend_on_the_volume_size() {
    // Stripe 7 of a 3-column volume: column 1, row 2 — whatever the size.
    let s = segments(3, 7 * STRIPE + 5, 1);
    assert_eq!(s[0].column, 1);
    assert_eq!(s[0].slice_offset, 2 * STRIPE + 5);
}

fn ext(len: u64, hole: bool) -> Extent {
    Extent { len, hole }
}

#[test]
fn extents_follow_the_slices_holes_across_stripes_and_columns() {
    let (_d, media, layout) = volume(2, 2, 4);
    let io = LocalVolumeIo::open(&media, &layout).expect("open");
    assert_eq!(
        io.extents(0, 8 * MIB).expect("extents"),
        vec![ext(8 * MIB, true)]
    );
    io.write(0, &pattern(1, 64 * 1024), false).expect("write");
    io.write(MIB + 4096, &pattern(2, 8192), false)
        .expect("write");
    // Stripes 2, 3 and 4: columns 0, 1, 0.
    io.write(3 * MIB - 4096, &pattern(3, (2 * MIB) as usize), false)
        .expect("write");
    assert_eq!(
        io.extents(0, 8 * MIB).expect("extents"),
        vec![
            ext(64 * 1024, false),
            ext(MIB + 4096 - 64 * 1024, true),
            ext(8192, false),
            ext(2 * MIB - 4096 - 12 * 1024, true),
            ext(2 * MIB, false),
            ext(3 * MIB + 4096, true),
        ]
    );
    // A range inside a data run is one extent; bounds are checked.
    assert_eq!(
        io.extents(3 * MIB, MIB).expect("extents"),
        vec![ext(MIB, false)]
    );
    assert!(io.extents(8 * MIB - 1, 2).is_err());
    io.cache(0, 8 * MIB).expect("cache");
    assert!(io.cache(8 * MIB, 1).is_err());
}

#[test]
fn extents_come_from_the_copy_reads_use() {
    let (_d, media, layout) = volume(2, 1, 4);
    let io = LocalVolumeIo::open(&media, &layout).expect("open");
    io.write(0, &pattern(1, 64 * 1024), false).expect("write");
    // Copy 0 serves reads: a hole there is a hole (it reads as zeroes)...
    let key = SliceKey {
        volume_id: "v".into(),
        copy: 0,
        column: 0,
    };
    let path = media.slice_path("m0", &key).expect("path");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .expect("open copy 0");
    punch_hole(&file, 0, 64 * 1024).expect("punch");
    assert_eq!(
        io.extents(0, 4 * MIB).expect("extents"),
        vec![ext(4 * MIB, true)]
    );
    // ...until copy 0 is lost: copy 1 serves, with the data.
    io.fail_medium("m0");
    assert_eq!(
        io.extents(0, 4 * MIB).expect("extents"),
        vec![ext(64 * 1024, false), ext(4 * MIB - 64 * 1024, true)]
    );
    io.fail_medium("m1");
    assert_eq!(
        io.extents(0, 4096).unwrap_err().raw_os_error(),
        Some(libc::EIO)
    );
}

#[test]
fn a_snapshot_views_extents_are_the_data_it_holds_not_the_live_holes() {
    let (_d, media, layout) = volume(1, 1, 4);
    let io = Arc::new(LocalVolumeIo::open(&media, &layout).expect("open"));
    io.write(0, &pattern(1, 64 * 1024), false).expect("write");
    io.snapshot(1).expect("snapshot");
    io.discard(0, 64 * 1024, false).expect("discard");
    io.write(128 * 1024, &pattern(2, 64 * 1024), false)
        .expect("write");
    assert_eq!(
        io.extents(0, 4 * MIB).expect("live extents"),
        vec![
            ext(128 * 1024, true),
            ext(64 * 1024, false),
            ext(4 * MIB - 192 * 1024, true)
        ]
    );
    let view = Arc::clone(&io).snapshot_view(1, layout.size).expect("view");
    assert_eq!(
        view.extents(0, 4 * MIB).expect("view extents"),
        vec![ext(64 * 1024, false), ext(4 * MIB - 64 * 1024, true)]
    );
    assert!(view.extents(4 * MIB - 1, 2).is_err());
}

#[test]
fn reads_from_memory_match_plain_reads_and_leave_held_writes_to_them() {
    let (_d, media, layout) = volume(2, 2, 4);
    let io = LocalVolumeIo::open(&media, &layout).expect("open");
    io.write(MIB - 100, &pattern(1, (3 * MIB) as usize), false)
        .expect("write");
    // Just written, so in the page cache: across stripes and columns.
    let mut cached = vec![0u8; (2 * MIB) as usize];
    assert!(io.read_cached(MIB / 2, &mut cached).expect("cached read"));
    let mut plain = vec![0u8; cached.len()];
    io.read(MIB / 2, &mut plain).expect("read");
    assert!(cached == plain);
    assert!(io.read_cached(layout.size, &mut [0u8; 1]).is_err());

    // A write after a snapshot is held until a commit: a read there must
    // commit first, which waits for the disk; a read elsewhere need not.
    io.snapshot(1).expect("snapshot");
    let newer = pattern(2, 4096);
    io.write(MIB, &newer, false).expect("held write");
    let mut buf = vec![0u8; 4096];
    assert!(!io.read_cached(MIB, &mut buf).expect("cached read"));
    assert!(io.read_cached(2 * MIB, &mut buf).expect("cached read"));
    io.read(MIB, &mut buf).expect("read, committing");
    assert!(buf == newer);
    let mut again = vec![0u8; 4096];
    assert!(io.read_cached(MIB, &mut again).expect("cached read"));
    assert!(again == newer);
}
