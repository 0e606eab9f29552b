//! Unit tests of the local data plane.

use crate::{
    digest_file, CancellationToken, CopyOptions, CopyResume, CopyStats, DataPlane, DataPlaneError,
    Digest, LocalMedia, SliceKey, StoredSlice,
};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// Looks at slice files the way only tests need to.
trait Inspect {
    /// Logical-content digest of the slice on this medium.
    fn digest_slice(&self, medium: &str, slice: &SliceKey) -> Result<Digest, DataPlaneError>;
    fn slice_exists(&self, medium: &str, slice: &SliceKey) -> Result<bool, DataPlaneError>;
    /// Current length in bytes of the slice's file.
    fn slice_len(&self, medium: &str, slice: &SliceKey) -> Result<u64, DataPlaneError>;
}

fn io_error<'a>(
    medium: &'a str,
    op: &'static str,
) -> impl FnOnce(io::Error) -> DataPlaneError + 'a {
    move |source| DataPlaneError::Io {
        medium: medium.to_string(),
        slice: String::new(),
        op,
        source,
    }
}

impl Inspect for LocalMedia {
    fn digest_slice(&self, medium: &str, slice: &SliceKey) -> Result<Digest, DataPlaneError> {
        digest_file(&self.slice_path(medium, slice)?).map_err(io_error(medium, "digest"))
    }

    fn slice_exists(&self, medium: &str, slice: &SliceKey) -> Result<bool, DataPlaneError> {
        match fs::metadata(self.slice_path(medium, slice)?) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_error(medium, "stat")(e)),
        }
    }

    fn slice_len(&self, medium: &str, slice: &SliceKey) -> Result<u64, DataPlaneError> {
        fs::metadata(self.slice_path(medium, slice)?)
            .map(|m| m.len())
            .map_err(io_error(medium, "stat"))
    }
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Two media, "a" and "b", in a fresh temporary directory.
fn media() -> (TempDir, LocalMedia) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let media = LocalMedia::new([
        ("a".to_string(), tmp.path().join("a")),
        ("b".to_string(), tmp.path().join("b")),
    ]);
    (tmp, media)
}

fn key(volume: &str, copy: u32, column: u32) -> SliceKey {
    SliceKey {
        volume_id: volume.to_string(),
        copy,
        column,
    }
}

fn path(media: &LocalMedia, medium: &str, slice: &SliceKey) -> PathBuf {
    media.slice_path(medium, slice).expect("known medium")
}

fn partial(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".partial");
    PathBuf::from(p)
}

fn write_at(path: &Path, offset: u64, bytes: &[u8]) {
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open for write");
    f.write_all_at(bytes, offset).expect("write");
}

/// Bytes that are never zero, varying with `seed`.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1)
        .collect()
}

/// Allocated size in bytes.
fn allocated(path: &Path) -> u64 {
    fs::metadata(path).expect("metadata").blocks() * 512
}

fn no_progress() -> impl FnMut(u64, u64) {
    |_, _| {}
}

/// A 16 MiB + 1234 B slice on "a" with data at awkward places: the first
/// block, across a block boundary, across 1 MiB chunk boundaries, a fully
/// written MiB, a written-zero range, and the very end of the file.
fn awkward_source(media: &LocalMedia, slice: &SliceKey) -> (PathBuf, u64) {
    let len = 16 * MIB + 1234;
    media.create_slice("a", slice, len).expect("create");
    let p = path(media, "a", slice);
    write_at(&p, 0, &pattern(100, 1));
    write_at(&p, 4 * KIB - 3, &pattern(7, 2));
    write_at(&p, MIB - 10, &pattern(20, 3));
    write_at(&p, 3 * MIB - 5000, &pattern(MIB as usize + 10_000, 4));
    write_at(&p, 6 * MIB, &vec![0u8; 2 * MIB as usize]);
    write_at(&p, 9 * MIB + 12_345, &pattern(3, 5));
    write_at(&p, len - 5, &pattern(5, 6));
    (p, len)
}

#[test]
fn create_makes_a_sparse_file_of_the_requested_length() {
    let (_tmp, media) = media();
    let s = key("vol1", 0, 1);
    media.create_slice("a", &s, GIB).unwrap();
    let p = path(&media, "a", &s);
    assert!(p.ends_with("a/vol1/c0-k1.slice"));
    assert_eq!(media.slice_len("a", &s).unwrap(), GIB);
    assert!(media.slice_exists("a", &s).unwrap());
    assert!(allocated(&p) <= 64 * KIB, "uses {} bytes", allocated(&p));
}

#[test]
fn create_is_idempotent_and_never_truncates() {
    let (_tmp, media) = media();
    let s = key("vol1", 0, 0);
    media.create_slice("a", &s, 2 * MIB).unwrap();
    let p = path(&media, "a", &s);
    write_at(&p, 2 * MIB - 4, b"tail");
    media.create_slice("a", &s, 2 * MIB).unwrap();
    media.create_slice("a", &s, MIB).unwrap();
    assert_eq!(media.slice_len("a", &s).unwrap(), 2 * MIB);
    let bytes = fs::read(&p).unwrap();
    assert_eq!(&bytes[bytes.len() - 4..], b"tail");
    media.create_slice("a", &s, 3 * MIB).unwrap();
    assert_eq!(media.slice_len("a", &s).unwrap(), 3 * MIB);
}

#[test]
fn grow_extends_the_slice_and_keeps_its_bytes() {
    let (_tmp, media) = media();
    let s = key("vol1", 1, 0);
    media.create_slice("a", &s, MIB).unwrap();
    let p = path(&media, "a", &s);
    write_at(&p, 1000, b"keep me");
    media.grow_slice("a", &s, 5 * MIB).unwrap();
    assert_eq!(media.slice_len("a", &s).unwrap(), 5 * MIB);
    media.grow_slice("a", &s, MIB).unwrap();
    assert_eq!(media.slice_len("a", &s).unwrap(), 5 * MIB);
    let bytes = fs::read(&p).unwrap();
    assert_eq!(&bytes[1000..1007], b"keep me");
    assert!(bytes[1007..].iter().all(|&b| b == 0));
}

#[test]
fn grow_fails_when_the_slice_does_not_exist() {
    let (_tmp, media) = media();
    let err = media.grow_slice("a", &key("vol1", 0, 0), MIB).unwrap_err();
    assert!(
        matches!(&err, DataPlaneError::Io { op: "grow", slice, .. } if slice == "vol1/c0-k0"),
        "{err:?}"
    );
}

#[test]
fn delete_is_idempotent_and_removes_the_volume_directory_once_empty() {
    let (_tmp, media) = media();
    let (s0, s1) = (key("vol1", 0, 0), key("vol1", 0, 1));
    media.create_slice("a", &s0, MIB).unwrap();
    media.create_slice("a", &s1, MIB).unwrap();
    let p0 = path(&media, "a", &s0);
    fs::write(partial(&p0), b"half a copy").unwrap();
    let dir = p0.parent().unwrap().to_path_buf();

    media.delete_slice("a", &s0).unwrap();
    assert!(!media.slice_exists("a", &s0).unwrap());
    assert!(!partial(&p0).exists());
    assert!(dir.is_dir(), "another slice still lives there");

    media.delete_slice("a", &s1).unwrap();
    assert!(!dir.exists());
    media.delete_slice("a", &s1).unwrap();
    media.delete_slice("a", &s0).unwrap();
    media.delete_slice("b", &s0).unwrap();
}

#[test]
fn check_medium_creates_the_directory_and_leaves_nothing_behind() {
    let (tmp, media) = media();
    media.check_medium("a").unwrap();
    media.check_medium("a").unwrap();
    let dir = tmp.path().join("a");
    assert!(dir.is_dir());
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
}

#[test]
fn check_medium_fails_with_medium_unusable_on_a_path_under_a_regular_file() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("not-a-dir");
    fs::write(&file, b"x").unwrap();
    let media = LocalMedia::new([("m".to_string(), file.join("medium"))]);
    let err = media.check_medium("m").unwrap_err();
    assert!(
        matches!(&err, DataPlaneError::MediumUnusable { medium, dir, .. }
            if medium == "m" && *dir == file.join("medium")),
        "{err:?}"
    );
}

#[test]
fn every_operation_rejects_an_unknown_medium() {
    let (_tmp, media) = media();
    let s = key("vol1", 0, 0);
    let unknown = |r: Result<(), DataPlaneError>| {
        assert!(
            matches!(r, Err(DataPlaneError::UnknownMedium(ref m)) if m == "zz"),
            "{r:?}"
        )
    };
    unknown(media.check_medium("zz"));
    unknown(media.create_slice("zz", &s, MIB));
    unknown(media.grow_slice("zz", &s, MIB));
    unknown(media.delete_slice("zz", &s));
    unknown(media.digest_slice("zz", &s).map(drop));
    unknown(media.slice_exists("zz", &s).map(drop));
    unknown(media.slice_len("zz", &s).map(drop));
    media.create_slice("a", &s, MIB).unwrap();
    let opts = CopyOptions::default();
    unknown(
        media
            .copy_slice("a", "zz", &s, &opts, &mut no_progress())
            .map(drop),
    );
    unknown(
        media
            .copy_slice("zz", "a", &s, &opts, &mut no_progress())
            .map(drop),
    );
}

#[test]
fn digest_is_the_same_for_a_hole_and_for_written_zeros() {
    let (_tmp, media) = media();
    let (holey, written) = (key("v", 0, 0), key("v", 0, 1));
    media.create_slice("a", &holey, 8 * MIB + 100).unwrap();
    media.create_slice("a", &written, 8 * MIB + 100).unwrap();
    for s in [&holey, &written] {
        write_at(&path(&media, "a", s), 3 * MIB + 17, b"data");
        write_at(&path(&media, "a", s), 8 * MIB + 99, b"z");
    }
    let zeros = vec![0u8; 3 * MIB as usize];
    write_at(&path(&media, "a", &written), 0, &zeros);
    write_at(&path(&media, "a", &written), 4 * MIB, &zeros);
    assert!(allocated(&path(&media, "a", &written)) > allocated(&path(&media, "a", &holey)));
    assert_eq!(
        media.digest_slice("a", &holey).unwrap(),
        media.digest_slice("a", &written).unwrap()
    );
}

#[test]
fn digest_differs_when_one_byte_differs() {
    let (_tmp, media) = media();
    let (x, y) = (key("v", 0, 0), key("v", 1, 0));
    for s in [&x, &y] {
        media.create_slice("a", s, 4 * MIB).unwrap();
        write_at(&path(&media, "a", s), MIB, &pattern(10_000, 9));
    }
    assert_eq!(
        media.digest_slice("a", &x).unwrap(),
        media.digest_slice("a", &y).unwrap()
    );
    write_at(&path(&media, "a", &y), MIB + 5000, &[0]);
    assert_ne!(
        media.digest_slice("a", &x).unwrap(),
        media.digest_slice("a", &y).unwrap()
    );
}

#[test]
fn digest_differs_when_a_block_moves() {
    let (_tmp, media) = media();
    let (x, y) = (key("v", 0, 0), key("v", 1, 0));
    for s in [&x, &y] {
        media.create_slice("a", s, MIB).unwrap();
    }
    write_at(&path(&media, "a", &x), 0, &pattern(4096, 1));
    write_at(&path(&media, "a", &y), 4096, &pattern(4096, 1));
    assert_ne!(
        media.digest_slice("a", &x).unwrap(),
        media.digest_slice("a", &y).unwrap()
    );
}

#[test]
fn digest_differs_when_length_differs() {
    let (_tmp, media) = media();
    let (x, y) = (key("v", 0, 0), key("v", 1, 0));
    media.create_slice("a", &x, 4 * MIB).unwrap();
    media.create_slice("a", &y, 4 * MIB + 4096).unwrap();
    assert_ne!(
        media.digest_slice("a", &x).unwrap(),
        media.digest_slice("a", &y).unwrap()
    );
    for s in [&x, &y] {
        write_at(&path(&media, "a", s), 0, b"same data");
    }
    assert_ne!(
        media.digest_slice("a", &x).unwrap(),
        media.digest_slice("a", &y).unwrap()
    );
}

#[test]
fn digest_of_a_huge_sparse_file_reads_only_its_data() {
    let (_tmp, media) = media();
    let s = key("big", 0, 0);
    media.create_slice("a", &s, 200 * GIB).unwrap();
    let p = path(&media, "a", &s);
    for (i, at) in [0, 50 * GIB + 123, 199 * GIB, 200 * GIB - 2 * MIB]
        .into_iter()
        .enumerate()
    {
        write_at(&p, at, &pattern(MIB as usize, i as u8));
    }
    let started = Instant::now();
    let d = media.digest_slice("a", &s).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(digest_file(&p).unwrap(), d);
}

#[test]
fn copy_preserves_every_byte_and_keeps_the_target_sparse() {
    let (_tmp, media) = media();
    let s = key("vol7", 2, 3);
    let (src, len) = awkward_source(&media, &s);
    let digest = media
        .copy_slice("a", "b", &s, &CopyOptions::default(), &mut no_progress())
        .unwrap();
    let dst = path(&media, "b", &s);
    assert_eq!(fs::metadata(&dst).unwrap().len(), len);
    assert!(
        fs::read(&src).unwrap() == fs::read(&dst).unwrap(),
        "contents differ"
    );
    assert!(
        allocated(&dst) < 2 * MIB,
        "target uses {} bytes",
        allocated(&dst)
    );
    assert!(!partial(&dst).exists());
    assert_eq!(digest, media.digest_slice("a", &s).unwrap());
    assert_eq!(digest, media.digest_slice("b", &s).unwrap());
}

#[test]
fn copy_reports_progress_up_to_the_total_of_data() {
    let (_tmp, media) = media();
    let s = key("vol7", 0, 0);
    awkward_source(&media, &s);
    let mut calls = Vec::new();
    media
        .copy_slice("a", "b", &s, &CopyOptions::default(), &mut |done, total| {
            calls.push((done, total))
        })
        .unwrap();
    let &(done, total) = calls.last().unwrap();
    assert_eq!(done, total);
    assert!((MIB..16 * MIB).contains(&total), "total {total}");
    assert!(calls
        .windows(2)
        .all(|w| w[0].0 <= w[1].0 && w[0].1 == w[1].1));
}

#[test]
fn copy_of_an_empty_slice_makes_an_empty_slice() {
    let (_tmp, media) = media();
    let s = key("v", 0, 0);
    media.create_slice("a", &s, 0).unwrap();
    let mut last = None;
    let d = media
        .copy_slice("a", "b", &s, &CopyOptions::default(), &mut |d, t| {
            last = Some((d, t))
        })
        .unwrap();
    assert_eq!(last, Some((0, 0)));
    assert_eq!(media.slice_len("b", &s).unwrap(), 0);
    assert_eq!(d, media.digest_slice("b", &s).unwrap());
}

#[test]
fn throttled_copy_keeps_to_the_rate() {
    let (_tmp, media) = media();
    let s = key("v", 0, 0);
    media.create_slice("a", &s, 64 * MIB).unwrap();
    write_at(
        &path(&media, "a", &s),
        10 * MIB,
        &pattern(4 * MIB as usize, 7),
    );
    let opts = CopyOptions {
        rate_limit: Some(8 * MIB),
        ..Default::default()
    };
    let started = Instant::now();
    media
        .copy_slice("a", "b", &s, &opts, &mut no_progress())
        .unwrap();
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(450), "took {took:?}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn cancelled_copy_fails_and_leaves_no_files() {
    let (_tmp, media) = media();
    let s = key("v", 0, 0);
    media.create_slice("a", &s, 32 * MIB).unwrap();
    write_at(&path(&media, "a", &s), 0, &pattern(8 * MIB as usize, 3));
    let cancel = CancellationToken::new();
    let opts = CopyOptions {
        rate_limit: Some(4 * MIB),
        cancel: cancel.clone(),
        ..Default::default()
    };
    let started = Instant::now();
    let err = media
        .copy_slice("a", "b", &s, &opts, &mut |done, _| {
            if done > 0 {
                cancel.cancel();
            }
        })
        .unwrap_err();
    assert!(matches!(err, DataPlaneError::Cancelled), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "took {:?}",
        started.elapsed()
    );
    let dst = path(&media, "b", &s);
    assert!(!dst.exists());
    assert!(!partial(&dst).exists());
}

/// Checkpoints a copy recorded, in order (0: forgotten).
#[derive(Clone, Default)]
struct Recorded(Arc<Mutex<Vec<u64>>>);

impl Recorded {
    /// Resumes at `from`, with a checkpoint after every MiB.
    fn resume(&self, from: u64) -> CopyResume {
        let list = Arc::clone(&self.0);
        CopyResume {
            from,
            record: Some(Arc::new(move |offset| {
                list.lock().map_err(|e| e.to_string())?.push(offset);
                Ok(())
            })),
            every_bytes: MIB,
            min_interval: Duration::ZERO,
        }
    }

    fn all(&self) -> Vec<u64> {
        self.0.lock().unwrap().clone()
    }
}

#[test]
fn a_stopped_copy_resumes_from_its_checkpoint_and_copies_only_the_rest() {
    let (_tmp, media) = media();
    let s = key("v", 0, 0);
    media.create_slice("a", &s, 32 * MIB).unwrap();
    let src = path(&media, "a", &s);
    let head = pattern(8 * MIB as usize, 3);
    write_at(&src, 0, &head);
    write_at(&src, 20 * MIB, &pattern(MIB as usize, 5));

    // Stopped once 4 MiB are copied: a checkpoint there, the partial kept.
    let recorded = Recorded::default();
    let cancel = CancellationToken::new();
    let opts = CopyOptions {
        cancel: cancel.clone(),
        resume: recorded.resume(0),
        ..Default::default()
    };
    let err = media
        .copy_slice("a", "b", &s, &opts, &mut |done, _| {
            if done >= 4 * MIB {
                cancel.cancel();
            }
        })
        .unwrap_err();
    assert!(matches!(err, DataPlaneError::Cancelled), "{err:?}");
    assert_eq!(recorded.all(), vec![MIB, 2 * MIB, 3 * MIB, 4 * MIB]);
    let dst = path(&media, "b", &s);
    assert!(partial(&dst).exists(), "kept for the resume");
    assert!(!dst.exists());
    // Bytes past the checkpoint may be stale: the resume clears them.
    write_at(&partial(&dst), 6 * MIB, &pattern(4096, 9));

    let stats = CopyStats::default();
    let opts = CopyOptions {
        resume: recorded.resume(4 * MIB),
        stats: stats.clone(),
        ..Default::default()
    };
    let digest = media
        .copy_slice("a", "b", &s, &opts, &mut no_progress())
        .expect("resumed copy");
    assert_eq!(digest, digest_file(&src).unwrap(), "verified as a whole");
    assert_eq!(stats.resumed_at(), 4 * MIB);
    assert_eq!(stats.copied(), 4 * MIB + MIB, "only what was left");
    assert_eq!(digest_file(&dst).unwrap(), digest);
    assert_eq!(
        recorded.all().last(),
        Some(&(32 * MIB)),
        "the slice file is done"
    );
    assert!(!partial(&dst).exists());

    // A checkpoint without its partial file is forgotten before anything
    // is written, and the copy starts over.
    media.delete_slice("b", &s).unwrap();
    let stats = CopyStats::default();
    let recorded = Recorded::default();
    let opts = CopyOptions {
        resume: recorded.resume(4 * MIB),
        stats: stats.clone(),
        ..Default::default()
    };
    media
        .copy_slice("a", "b", &s, &opts, &mut no_progress())
        .expect("copy from the start");
    assert_eq!(recorded.all().first(), Some(&0));
    assert_eq!((stats.resumed_at(), stats.copied()), (0, 9 * MIB));
    assert_eq!(digest_file(&dst).unwrap(), digest_file(&src).unwrap());
}

#[test]
fn cancellation_during_a_throttle_sleep_stops_promptly() {
    let (_tmp, media) = media();
    let s = key("v", 0, 0);
    media.create_slice("a", &s, 8 * MIB).unwrap();
    write_at(&path(&media, "a", &s), 0, &pattern(8 * MIB as usize, 3));
    let cancel = CancellationToken::new();
    let opts = CopyOptions {
        rate_limit: Some(64 * KIB),
        cancel: cancel.clone(),
        ..Default::default()
    };
    let flag = cancel.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        flag.cancel();
    });
    let started = Instant::now();
    let err = media
        .copy_slice("a", "b", &s, &opts, &mut no_progress())
        .unwrap_err();
    canceller.join().unwrap();
    assert!(matches!(err, DataPlaneError::Cancelled), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_millis(800),
        "took {:?}",
        started.elapsed()
    );
    assert!(!partial(&path(&media, "b", &s)).exists());
}

#[test]
fn copy_overwrites_a_stale_target() {
    let (_tmp, media) = media();
    let s = key("v", 0, 0);
    let (src, _) = awkward_source(&media, &s);
    media.create_slice("b", &s, 20 * MIB).unwrap();
    let dst = path(&media, "b", &s);
    write_at(&dst, 0, &pattern(5 * MIB as usize, 42));
    fs::write(partial(&dst), b"leftover").unwrap();
    let d = media
        .copy_slice("a", "b", &s, &CopyOptions::default(), &mut no_progress())
        .unwrap();
    assert!(
        fs::read(&src).unwrap() == fs::read(&dst).unwrap(),
        "contents differ"
    );
    assert_eq!(d, media.digest_slice("b", &s).unwrap());
    assert!(!partial(&dst).exists());
}

#[test]
fn copy_fails_when_the_source_is_missing() {
    let (_tmp, media) = media();
    let s = key("v", 0, 4);
    let err = media
        .copy_slice("a", "b", &s, &CopyOptions::default(), &mut no_progress())
        .unwrap_err();
    assert!(
        matches!(&err, DataPlaneError::Io { medium, slice, .. } if medium == "a" && slice == "v/c0-k4"),
        "{err:?}"
    );
    assert!(!partial(&path(&media, "b", &s)).exists());
}

#[test]
fn copy_digest_matches_digest_file() {
    let (_tmp, media) = media();
    let s = key("v", 0, 0);
    let (src, _) = awkward_source(&media, &s);
    let d = media
        .copy_slice("a", "b", &s, &CopyOptions::default(), &mut no_progress())
        .unwrap();
    assert_eq!(digest_file(&src).unwrap(), d);
    assert_eq!(digest_file(&path(&media, "b", &s)).unwrap(), d);
}

/// Throughput against `cp --sparse=always` on a 1 GiB fully written file.
/// Run with `cargo test --release -p svs-dataplane -- --ignored --nocapture`.
#[test]
#[ignore = "benchmark: writes 2-3 GiB"]
fn benchmark_copy_of_a_fully_written_gib_against_cp() {
    let dir = std::env::var_os("SVS_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::tempdir_in(dir).unwrap();
    let media = LocalMedia::new([
        ("a".to_string(), tmp.path().join("a")),
        ("b".to_string(), tmp.path().join("b")),
    ]);
    let s = key("bench", 0, 0);
    media.create_slice("a", &s, GIB).unwrap();
    let src = path(&media, "a", &s);
    {
        let f = OpenOptions::new().write(true).open(&src).unwrap();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut buf = vec![0u8; MIB as usize];
        for i in 0..GIB / MIB {
            for w in buf.chunks_exact_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                w.copy_from_slice(&x.to_le_bytes());
            }
            f.write_all_at(&buf, i * MIB).unwrap();
        }
        f.sync_all().unwrap();
    }
    let cp_to = tmp.path().join("cp.out");
    // Each run starts with nothing dirty and its output gone.
    let settle = |p: &Path| {
        let _ = fs::remove_file(p);
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
    };
    let cp = |sync: bool| {
        settle(&cp_to);
        let started = Instant::now();
        let status = std::process::Command::new("cp")
            .arg("--sparse=always")
            .arg(&src)
            .arg(&cp_to)
            .status()
            .unwrap();
        assert!(status.success());
        if sync {
            File::open(&cp_to).unwrap().sync_all().unwrap();
        }
        started.elapsed().as_secs_f64()
    };
    let ours = || {
        settle(&path(&media, "b", &s));
        let started = Instant::now();
        media
            .copy_slice("a", "b", &s, &CopyOptions::default(), &mut no_progress())
            .unwrap();
        started.elapsed().as_secs_f64()
    };
    let digest = || {
        let started = Instant::now();
        digest_file(&src).unwrap();
        started.elapsed().as_secs_f64()
    };
    let rounds: usize = std::env::var("SVS_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let mut runs: [Vec<f64>; 4] = Default::default();
    // Warm-up: lets the device settle after the source was written.
    let _ = (cp(true), ours());
    for round in 0..rounds {
        let times = [cp(false), cp(true), ours(), digest()];
        println!(
            "round {round}: cp --sparse=always {:.3}s, cp + fsync {:.3}s, copy_slice {:.3}s, digest {:.3}s",
            times[0], times[1], times[2], times[3]
        );
        for (run, t) in runs.iter_mut().zip(times) {
            run.push(t);
        }
    }
    let [cp, cp_sync, ours, digest] = runs.map(|mut r| {
        r.sort_by(f64::total_cmp);
        r[r.len() / 2]
    });
    let rate = |t: f64| 1024.0 / t;
    println!(
        "median of {rounds}, 1 GiB: cp --sparse=always {cp:.3}s ({:.0} MiB/s), cp + fsync {cp_sync:.3}s \
         ({:.0} MiB/s), copy_slice {ours:.3}s ({:.0} MiB/s) = {:.2}x cp, {:.2}x cp + fsync; \
         digest {digest:.3}s ({:.0} MiB/s)",
        rate(cp),
        rate(cp_sync),
        rate(ours),
        cp / ours,
        cp_sync / ours,
        rate(digest),
    );
}

#[test]
fn stored_slices_lists_complete_and_partial_copies_and_nothing_else() {
    let (tmp, media) = media();
    let (s0, s1) = (key("v1", 0, 0), key("v2", 1, 3));
    media.create_slice("a", &s0, MIB).unwrap();
    media.create_slice("a", &s1, MIB).unwrap();
    fs::write(partial(&path(&media, "a", &s1)), b"half").unwrap();
    fs::write(path(&media, "a", &s0).with_file_name("notes.txt"), b"x").unwrap();
    fs::write(tmp.path().join("a").join("stray"), b"x").unwrap();
    let mut found = media.stored_slices("a").unwrap();
    found.sort_by_key(|s| (s.key.volume_id.clone(), s.partial));
    assert_eq!(
        found,
        vec![
            StoredSlice {
                key: s0,
                partial: false
            },
            StoredSlice {
                key: s1.clone(),
                partial: false
            },
            StoredSlice {
                key: s1.clone(),
                partial: true
            },
        ]
    );
    assert!(matches!(
        media.stored_slices("zz"),
        Err(DataPlaneError::UnknownMedium(_))
    ));

    media.delete_partial_copy("a", &s1).unwrap();
    media.delete_partial_copy("a", &s1).unwrap();
    assert!(!partial(&path(&media, "a", &s1)).exists());
    assert!(
        media.slice_exists("a", &s1).unwrap(),
        "the slice itself stays"
    );
}

#[test]
fn slice_data_bytes_counts_written_extents_not_holes() {
    let (_tmp, media) = media();
    let slice = key("v1", 0, 0);
    media.create_slice("a", &slice, 16 * MIB).unwrap();
    assert_eq!(media.slice_data_bytes("a", &slice).unwrap(), 0);
    let file = OpenOptions::new()
        .write(true)
        .open(path(&media, "a", &slice))
        .unwrap();
    file.write_all_at(&vec![7; MIB as usize], 4 * MIB).unwrap();
    file.write_all_at(&[9; 4096], 12 * MIB).unwrap();
    let written = MIB + 4 * KIB;
    // Extents come in whole filesystem blocks (exact on ext4's 4 KiB):
    // allow up to a 64 KiB block per write elsewhere.
    let data = media.slice_data_bytes("a", &slice).unwrap();
    assert!(
        (written..=MIB + 2 * 64 * KIB).contains(&data),
        "{data} data bytes for {written} written"
    );

    let missing = media
        .slice_data_bytes("a", &key("v1", 1, 0))
        .expect_err("no such slice");
    assert!(
        matches!(&missing, DataPlaneError::Io { op: "open", source, .. }
            if source.kind() == io::ErrorKind::NotFound),
        "{missing}"
    );
    assert!(matches!(
        media.slice_data_bytes("zz", &slice),
        Err(DataPlaneError::UnknownMedium(_))
    ));
}

#[test]
fn a_medium_added_at_runtime_takes_slices_and_its_removal_leaves_foreign_files() {
    let (root, media) = media();
    let clone = media.clone();
    let dir = root.path().join("added");
    let slice = key("v", 0, 0);
    assert!(matches!(
        media.create_slice("c", &slice, MIB),
        Err(DataPlaneError::UnknownMedium(m)) if m == "c"
    ));
    assert!(media.add_medium("c", &dir).expect("added"));
    // Clones share the media: the job runner and the exports see it too.
    clone
        .create_slice("c", &slice, MIB)
        .expect("slice on the new medium");
    assert!(media.slice_exists("c", &slice).expect("stat"));
    // The same directory again is fine, another one is not.
    assert!(!media.add_medium("c", &dir).expect("same again"));
    assert!(matches!(
        media.add_medium("c", &root.path().join("other")),
        Err(DataPlaneError::MediumExists { medium, .. }) if medium == "c"
    ));
    // An orphaned slice file goes with the medium; a file svs did not make stays.
    fs::write(dir.join("notes.txt"), b"the admin's").expect("foreign file");
    media.remove_medium("c").expect("removed");
    assert!(
        !dir.join("v").exists(),
        "slice files and their directory removed"
    );
    assert_eq!(
        fs::read(dir.join("notes.txt")).expect("kept"),
        b"the admin's"
    );
    assert!(matches!(
        clone.create_slice("c", &slice, MIB),
        Err(DataPlaneError::UnknownMedium(_))
    ));
    media.remove_medium("c").expect("unknown media are fine");
    // Forgetting touches no file.
    assert!(media.add_medium("c", &dir).expect("added again"));
    clone.create_slice("c", &slice, MIB).expect("slice");
    media.forget_medium("c");
    assert!(media.slice_path("c", &slice).is_err());
    assert!(dir.join("v").join("c0-k0.slice").is_file());
}

#[test]
fn a_medium_whose_directory_cannot_be_made_is_not_added() {
    let (root, media) = media();
    let file = root.path().join("a-file");
    fs::write(&file, b"x").expect("file");
    assert!(matches!(
        media.add_medium("c", &file.join("sub")),
        Err(DataPlaneError::MediumUnusable { medium, .. }) if medium == "c"
    ));
    assert!(matches!(
        media.check_medium("c"),
        Err(DataPlaneError::UnknownMedium(_))
    ));
}
