//! The slice copier on its own: files as source and target.

use super::*;
use crate::{CopyResume, CopyStats};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

const MIB: u64 = 1 << 20;

fn file(path: &Path, len: u64) -> File {
    let f = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .expect("create");
    f.set_len(len).expect("size");
    f
}

/// 16 MiB, mostly holes: data at 1 MiB (3 MiB, with a zero block inside)
/// and at 9 MiB (64 KiB).
fn sparse_source(dir: &Path) -> File {
    let f = file(&dir.join("source"), 16 * MIB);
    let mut data: Vec<u8> = (0..3 * MIB).map(|i| (i % 251) as u8 + 1).collect();
    data[(MIB as usize)..(MIB as usize) + 4096].fill(0);
    f.write_all_at(&data, MIB).expect("write");
    f.write_all_at(&[7u8; 64 << 10], 9 * MIB).expect("write");
    f
}

fn no_progress() -> impl FnMut(u64, u64) {
    |_, _| {}
}

/// A file target that may corrupt what is read back from it, or drop one
/// write, and takes chunks of `chunk` bytes (4 MiB as a slice on a storage
/// node, or [`CHUNK`] as a local file). With `sends`, it verifies its
/// writes itself as a storage node does ([`CopyTarget::verified_writes`])
/// and records each `(offset, length)` sent.
struct Faulty {
    file: File,
    flip_reads: bool,
    drop_write_at: Option<u64>,
    chunk: usize,
    sends: Option<Mutex<Vec<(u64, usize)>>>,
}

/// [`Faulty`]'s verified writes: each written at once and read back
/// through the target.
struct FaultyWrites<'t> {
    target: &'t Faulty,
    held: bool,
    failed: Option<io::Error>,
}

impl VerifiedWrites for FaultyWrites<'_> {
    fn send(&mut self, data: &[u8], offset: u64) {
        if let Some(sends) = &self.target.sends {
            sends.lock().expect("sends").push((offset, data.len()));
        }
        let checked = self.target.write_at(data, offset).and_then(|()| {
            let mut back = vec![0u8; data.len()];
            self.target.read_at(&mut back, offset)?;
            Ok(back == data)
        });
        match checked {
            Ok(same) => self.held &= same,
            Err(e) => self.failed = self.failed.take().or(Some(e)),
        }
    }

    fn finish(self: Box<Self>) -> io::Result<bool> {
        self.failed.map_or(Ok(self.held), Err)
    }
}

impl CopyTarget for Faulty {
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        if self.drop_write_at == Some(offset) {
            return Ok(());
        }
        CopyTarget::write_at(&self.file, data, offset)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        CopyTarget::read_at(&self.file, buf, offset)?;
        if self.flip_reads {
            buf[0] ^= 1;
        }
        Ok(())
    }

    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        CopyTarget::punch_hole(&self.file, offset, len)
    }

    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(&self.file)
    }

    fn sync_all(&self) -> io::Result<()> {
        File::sync_all(&self.file)
    }

    fn digest(&self, buf: &mut [u8]) -> io::Result<Digest> {
        CopyTarget::digest(&self.file, buf)
    }

    fn chunk(&self) -> usize {
        self.chunk
    }

    fn verified_writes(&self) -> Option<Box<dyn VerifiedWrites + '_>> {
        self.sends.as_ref()?;
        Some(Box::new(FaultyWrites {
            target: self,
            held: true,
            failed: None,
        }))
    }
}

/// Records every chunk the copy walks, and its end (`None`).
struct Seen(Vec<Option<(u64, u64)>>);

impl ChunkHold for Seen {
    fn around(&mut self, copy_chunk: &mut CopyChunk<'_>) -> Result<Option<(u64, u64)>, CopyError> {
        let copied = copy_chunk()?;
        self.0.push(copied);
        Ok(copied)
    }
}

#[test]
fn holes_stay_holes_and_the_digest_is_the_sources() {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = sparse_source(dir.path());
    let target = file(&dir.path().join("target"), 16 * MIB);
    for verify in [Verify::Digest, Verify::ReadBack] {
        target.set_len(0).expect("empty");
        target.set_len(16 * MIB).expect("size");
        let options = CopyOptions::default();
        let mut reported = Vec::new();
        let mut progress = |done, total| reported.push((done, total));
        let mut copier = Copier::new(&options, verify, &mut progress);
        copier.measure(&source, 0, 0).expect("measure");
        copier.report();
        let digest = copier
            .copy_data(&source, &target, 0, None, &mut Unheld)
            .expect("copy");
        let data = 3 * MIB + (64 << 10);
        assert_eq!(reported.first(), Some(&(0, data)));
        assert_eq!(reported.last(), Some(&(data, data)));
        assert_eq!(options.stats.copied(), data);
        let expected = CopySource::digest(&source, &mut vec![0u8; CHUNK]).expect("digest");
        assert_eq!(digest, (verify == Verify::Digest).then_some(expected));
        assert_eq!(
            CopyTarget::digest(&target, &mut vec![0u8; CHUNK]).expect("digest"),
            expected
        );
        // Only the non-zero blocks were written.
        let allocated = target.metadata().expect("stat").blocks() * 512;
        assert_eq!(allocated, data - 4096, "{verify:?}");
    }
}

#[test]
fn a_copy_resumes_from_its_checkpoint_and_copies_only_the_rest() {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = sparse_source(dir.path());
    let target = file(&dir.path().join("target"), 16 * MIB);
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let list = Arc::clone(&recorded);
    let resume = CopyResume {
        record: Some(Arc::new(move |offset| {
            list.lock().map_err(|e| e.to_string())?.push(offset);
            Ok(())
        })),
        every_bytes: MIB,
        min_interval: Duration::ZERO,
        ..CopyResume::default()
    };
    // Stopped once 2 MiB are copied.
    let options = CopyOptions {
        resume: resume.clone(),
        ..CopyOptions::default()
    };
    let cancel = options.cancel.clone();
    let mut progress = |done, _| {
        if done >= 2 * MIB {
            cancel.cancel();
        }
    };
    let mut copier = Copier::new(&options, Verify::Digest, &mut progress);
    copier.measure(&source, 0, 0).expect("measure");
    let mut checkpoints = Checkpoints::new(&options.resume, &options.stats);
    let stopped = copier.copy_data(&source, &target, 0, Some(&mut checkpoints), &mut Unheld);
    assert!(matches!(stopped, Err(CopyError::Cancelled)), "{stopped:?}");
    let at = options.stats.checkpoint();
    assert_eq!(at, 3 * MIB, "{:?}", recorded.lock().expect("lock"));
    // What lies past the checkpoint may be stale: a resume clears it.
    target.write_all_at(&[9u8; 4096], 12 * MIB).expect("stale");
    punch_hole(&target, at, 16 * MIB - at).expect("clear");

    let options = CopyOptions {
        resume: CopyResume { from: at, ..resume },
        stats: CopyStats::default(),
        ..CopyOptions::default()
    };
    let mut reported = Vec::new();
    let mut progress = |done, total| reported.push((done, total));
    let mut copier = Copier::new(&options, Verify::Digest, &mut progress);
    copier.measure(&source, at, 0).expect("measure");
    copier.report();
    let mut checkpoints = Checkpoints::new(&options.resume, &options.stats);
    let digest = copier
        .copy_data(&source, &target, at, Some(&mut checkpoints), &mut Unheld)
        .expect("resumed copy");
    let expected = CopySource::digest(&source, &mut vec![0u8; CHUNK]).expect("digest");
    assert_eq!(digest, Some(expected));
    assert_eq!(
        options.stats.copied(),
        MIB + (64 << 10),
        "only the data past 3 MiB"
    );
    let data = 3 * MIB + (64 << 10);
    assert_eq!(reported.first(), Some(&(2 * MIB, data)));
    assert_eq!(options.stats.checkpoint(), 16 * MIB);
}

#[test]
fn a_verification_mismatch_is_detected_either_way() {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = sparse_source(dir.path());
    for (verify, flip_reads, drop_write_at) in [
        // A chunk read back differs from what was read from the source.
        (Verify::ReadBack, true, None),
        // A write lost on the way: the digest at the end differs.
        (Verify::Digest, false, Some(9 * MIB)),
    ] {
        let target = Faulty {
            file: file(&dir.path().join("target"), 16 * MIB),
            flip_reads,
            drop_write_at,
            chunk: CHUNK,
            sends: None,
        };
        let options = CopyOptions::default();
        let mut progress = no_progress();
        let mut copier = Copier::new(&options, verify, &mut progress);
        let copied = copier.copy_data(&source, &target, 0, None, &mut Unheld);
        assert!(
            matches!(copied, Err(CopyError::VerifyFailed)),
            "{verify:?}: {copied:?}"
        );
    }
}

#[test]
fn a_cancelled_copy_stops_before_its_next_chunk() {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = sparse_source(dir.path());
    let target = file(&dir.path().join("target"), 16 * MIB);
    // Cancelled before it starts: nothing is copied.
    let options = CopyOptions::default();
    options.cancel.cancel();
    let mut progress = no_progress();
    let mut copier = Copier::new(&options, Verify::ReadBack, &mut progress);
    let copied = copier.copy_data(&source, &target, 0, None, &mut Unheld);
    assert!(matches!(copied, Err(CopyError::Cancelled)), "{copied:?}");
    assert_eq!(options.stats.copied(), 0);
    // Cancelled after the first chunk: no second one.
    let options = CopyOptions::default();
    let cancel = options.cancel.clone();
    let mut progress = |_, _| cancel.cancel();
    let mut copier = Copier::new(&options, Verify::ReadBack, &mut progress);
    let copied = copier.copy_data(&source, &target, 0, None, &mut Unheld);
    assert!(matches!(copied, Err(CopyError::Cancelled)), "{copied:?}");
    assert_eq!(options.stats.copied(), MIB);
}

/// The chunks a read-back copy of `source` to `target` walks, and its end.
fn walk(source: &File, target: &dyn CopyTarget, options: &CopyOptions) -> Vec<Option<(u64, u64)>> {
    let mut progress = no_progress();
    let mut copier = Copier::new(options, Verify::ReadBack, &mut progress);
    let mut seen = Seen(Vec::new());
    copier
        .copy_data(source, target, 0, None, &mut seen)
        .expect("copy");
    seen.0
}

/// `sparse_source`'s walk in 1 MiB chunks.
fn mebibyte_walk() -> Vec<Option<(u64, u64)>> {
    vec![
        Some((MIB, 2 * MIB)),
        Some((2 * MIB, 3 * MIB)),
        Some((3 * MIB, 4 * MIB)),
        Some((9 * MIB, 9 * MIB + (64 << 10))),
        None,
    ]
}

#[test]
fn a_hold_sees_every_chunk_and_the_end() {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = sparse_source(dir.path());
    let target = file(&dir.path().join("target"), 16 * MIB);
    assert_eq!(
        walk(&source, &target, &CopyOptions::default()),
        mebibyte_walk()
    );
}

/// The first 16 MiB of `file` (all of `sparse_source` and its copies).
fn sixteen_mebibytes(file: &File) -> Vec<u8> {
    let mut bytes = vec![0u8; 16 * MIB as usize];
    file.read_exact_at(&mut bytes, 0).expect("read");
    bytes
}

#[test]
fn a_target_s_chunk_sets_the_walk_unless_the_copy_is_paced() {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = sparse_source(dir.path());
    let expected = sixteen_mebibytes(&source);
    let walked = |max_chunk| {
        let target = Faulty {
            file: file(&dir.path().join("target"), 16 * MIB),
            flip_reads: false,
            drop_write_at: None,
            chunk: 4 << 20,
            sends: None,
        };
        let options = CopyOptions {
            max_chunk,
            ..CopyOptions::default()
        };
        let seen = walk(&source, &target, &options);
        let copied = sixteen_mebibytes(&target.file);
        assert!(copied == expected, "the target differs from the source");
        seen
    };
    // The data at 1 MiB (3 MiB) in one chunk: up to the 4 MiB boundary.
    assert_eq!(
        walked(None),
        vec![
            Some((MIB, 4 * MIB)),
            Some((9 * MIB, 9 * MIB + (64 << 10))),
            None
        ]
    );
    // Paced from outside: at most a mebibyte at a time.
    assert_eq!(walked(Some(MIB)), mebibyte_walk());
}

#[test]
fn a_target_that_verifies_its_writes_gets_each_chunk_in_pieces_and_fails_a_mismatch() {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = sparse_source(dir.path());
    let expected = sixteen_mebibytes(&source);
    let target = |flip_reads, drop_write_at| Faulty {
        file: file(&dir.path().join("target"), 16 * MIB),
        flip_reads,
        drop_write_at,
        chunk: 4 << 20,
        sends: Some(Mutex::new(Vec::new())),
    };
    let copy = |target: &Faulty, verify| {
        let options = CopyOptions::default();
        let mut progress = no_progress();
        let mut copier = Copier::new(&options, verify, &mut progress);
        copier.copy_data(&source, target, 0, None, &mut Unheld)
    };
    // One chunk of 3 MiB (1 to 4 MiB) goes in 1 MiB pieces, each as its
    // data runs (the zero block at 2 MiB is not sent), then the 64 KiB.
    let good = target(false, None);
    copy(&good, Verify::ReadBack).expect("copy");
    let sends = good
        .sends
        .as_ref()
        .map(|s| s.lock().expect("sends").clone());
    assert_eq!(
        sends,
        Some(vec![
            (MIB, MIB as usize),
            (2 * MIB + 4096, (MIB - 4096) as usize),
            (3 * MIB, MIB as usize),
            (9 * MIB, 64 << 10),
        ])
    );
    let copied = sixteen_mebibytes(&good.file);
    assert!(copied == expected, "the target differs from the source");
    // A copy verified by its digest at the end writes as before.
    let by_digest = target(false, None);
    copy(&by_digest, Verify::Digest).expect("copy");
    assert_eq!(
        by_digest
            .sends
            .as_ref()
            .map(|s| s.lock().expect("sends").len()),
        Some(0)
    );
    // What the target holds differs from what was sent: the copy fails.
    for (flip_reads, drop_write_at) in [(true, None), (false, Some(3 * MIB))] {
        let copied = copy(&target(flip_reads, drop_write_at), Verify::ReadBack);
        assert!(
            matches!(copied, Err(CopyError::VerifyFailed)),
            "{flip_reads} {drop_write_at:?}: {copied:?}"
        );
    }
}

/// A stale copy of `sparse_source`: equal but for 4 KiB changed at 1.5
/// MiB, the data at 9 MiB missing, and data at 12 MiB where the source
/// has a hole.
fn stale_copy(dir: &Path, source: &File) -> File {
    let stale = file(&dir.join("stale"), 16 * MIB);
    let mut buf = vec![0u8; 16 * MIB as usize];
    source.read_exact_at(&mut buf, 0).expect("read source");
    stale
        .write_all_at(&buf[MIB as usize..(4 * MIB) as usize], MIB)
        .expect("write");
    stale
        .write_all_at(&[0xee; 4096], MIB + MIB / 2)
        .expect("write");
    stale.write_all_at(&[5u8; 8192], 12 * MIB).expect("write");
    stale
}

#[test]
fn a_resync_compares_every_chunk_and_rewrites_only_those_that_differ() {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = sparse_source(dir.path());
    for verify in [Verify::ReadBack, Verify::Digest] {
        let stale = stale_copy(dir.path(), &source);
        let options = CopyOptions::default();
        let mut progress = no_progress();
        let mut copier = Copier::new(&options, verify, &mut progress);
        copier.compare_target();
        copier.measure(&source, 0, 0).expect("measure");
        // Every byte is compared: the total is the slice, not its data.
        assert_eq!(copier.tally.total, 16 * MIB);
        let digest = copier
            .copy_data(&source, &stale, 0, None, &mut Unheld)
            .expect("resync");
        // The chunks at 1 MiB (changed), 9 MiB (missing) and 12 MiB (a
        // hole of the source): 3 of 16.
        assert_eq!(options.stats.compared(), 16 * MIB, "{verify:?}");
        assert_eq!(options.stats.rewritten(), 3 * MIB, "{verify:?}");
        let (mut a, mut b) = (vec![0u8; 16 * MIB as usize], vec![0u8; 16 * MIB as usize]);
        source.read_exact_at(&mut a, 0).expect("read");
        stale.read_exact_at(&mut b, 0).expect("read");
        assert!(a == b, "{verify:?}: the target differs after the resync");
        // Where the source has a hole, the target's data was punched out.
        assert_eq!(
            CopySource::data_bytes(&stale, 12 * MIB, 13 * MIB).expect("extents"),
            0
        );
        if verify == Verify::Digest {
            let mut buf = vec![0u8; CHUNK];
            assert_eq!(
                digest,
                Some(CopySource::digest(&source, &mut buf).expect("digest"))
            );
        }
        // Once in sync, a second pass rewrites nothing.
        let again = CopyOptions::default();
        let mut progress = no_progress();
        let mut copier = Copier::new(&again, verify, &mut progress);
        copier.compare_target();
        copier
            .copy_data(&source, &stale, 0, None, &mut Unheld)
            .expect("resync");
        assert_eq!(
            (again.stats.compared(), again.stats.rewritten()),
            (16 * MIB, 0)
        );
    }
}

#[test]
fn a_resync_still_catches_a_corrupt_target() {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = sparse_source(dir.path());
    for (verify, flip_reads, drop_write_at) in [
        // What is read back differs from what was written.
        (Verify::ReadBack, true, None),
        // A rewrite lost on the way: the digest at the end differs.
        (Verify::Digest, false, Some(9 * MIB)),
    ] {
        let stale = stale_copy(dir.path(), &source);
        let target = Faulty {
            file: stale,
            flip_reads,
            drop_write_at,
            chunk: CHUNK,
            sends: None,
        };
        let options = CopyOptions::default();
        let mut progress = no_progress();
        let mut copier = Copier::new(&options, verify, &mut progress);
        copier.compare_target();
        let copied = copier.copy_data(&source, &target, 0, None, &mut Unheld);
        assert!(
            matches!(copied, Err(CopyError::VerifyFailed)),
            "{verify:?}: {copied:?}"
        );
    }
}
