//! Tests of the per-slice copy-on-write snapshots against an in-memory
//! model: the live bytes and each snapshot's bytes as they must read.

use super::*;
use std::collections::BTreeMap;

const SLICE: u64 = 16 * COW_CHUNK; // 1 MiB

struct Fixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
    live: File,
}

fn fixture(len: u64) -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("c0-k0.slice");
    let live = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .expect("slice");
    live.set_len(len).expect("size");
    Fixture {
        _dir: dir,
        path,
        live,
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Model {
    live: Vec<u8>,
    snaps: BTreeMap<u64, Vec<u8>>,
}

impl Model {
    fn new(len: u64) -> Model {
        Model {
            live: vec![0; len as usize],
            snaps: BTreeMap::new(),
        }
    }
    fn write(&mut self, offset: u64, data: &[u8]) {
        self.live[offset as usize..offset as usize + data.len()].copy_from_slice(data);
    }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x as u8) | 1
        })
        .collect()
}

fn live_bytes(f: &Fixture) -> Vec<u8> {
    let len = f.live.metadata().expect("stat").len();
    let mut buf = vec![0u8; len as usize];
    read_zero_fill(&f.live, &mut buf, 0).expect("read live");
    buf
}

fn snap_bytes(store: &SliceSnapshots, f: &Fixture, id: u64, size: u64) -> Vec<u8> {
    let mut buf = vec![0u8; size as usize];
    store.read(id, &f.live, 0, &mut buf).expect("read snapshot");
    buf
}

/// The store and the live file read exactly as the model says.
fn check(store: &SliceSnapshots, f: &Fixture, model: &Model) {
    assert!(live_bytes(f) == model.live, "live slice differs");
    let listed: Vec<u64> = store.list().expect("list").iter().map(|s| s.id).collect();
    let want: Vec<u64> = model.snaps.keys().copied().collect();
    assert_eq!(listed, want);
    for (id, bytes) in &model.snaps {
        let got = snap_bytes(store, f, *id, bytes.len() as u64);
        assert!(&got == bytes, "snapshot {id} differs");
    }
}

/// Writes data in chunks 0, 1 and 5 (chunk 3 written with zeros); the rest
/// holes.
fn seed(store: &SliceSnapshots, f: &Fixture, model: &mut Model) {
    for (off, data) in [
        (0, pattern(1, 2 * COW_CHUNK as usize)),
        (5 * COW_CHUNK + 100, pattern(2, 5000)),
        (3 * COW_CHUNK, vec![0u8; COW_CHUNK as usize]),
    ] {
        store.write(&f.live, off, &data).expect("seed write");
        model.write(off, &data);
    }
}

fn delta_blocks(f: &Fixture, id: u64) -> u64 {
    let path = f.path.with_file_name(format!("c0-k0.s{id}.delta"));
    fs::metadata(path).expect("delta").blocks()
}

fn map_len(f: &Fixture, id: u64) -> u64 {
    let path = f.path.with_file_name(format!("c0-k0.s{id}.map"));
    fs::metadata(path).expect("map").len()
}

#[test]
fn creating_a_snapshot_copies_nothing() {
    let f = fixture(SLICE);
    let store = SliceSnapshots::open(&f.path).expect("open");
    let mut model = Model::new(SLICE);
    seed(&store, &f, &mut model);
    store.create(1, &f.live).expect("snapshot");
    assert_eq!(delta_blocks(&f, 1), 0);
    assert_eq!(map_len(&f, 1), HEADER_LEN as u64);
    let info = store.list().expect("list");
    assert_eq!(info.len(), 1);
    assert_eq!((info[0].id, info[0].size), (1, SLICE));
    assert!(info[0].used_bytes <= 8192, "{info:?}");
    model.snaps.insert(1, model.live.clone());
    check(&store, &f, &model);
    // Taking it again is a no-op; an older id is refused.
    store.create(1, &f.live).expect("retried snapshot");
    let err = store.create(0, &f.live).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
}

#[test]
fn the_first_write_saves_the_old_chunk_and_later_writes_go_in_place() {
    let f = fixture(SLICE);
    let store = SliceSnapshots::open(&f.path).expect("open");
    let mut model = Model::new(SLICE);
    seed(&store, &f, &mut model);
    store.create(1, &f.live).expect("snapshot");
    model.snaps.insert(1, model.live.clone());

    // A partial write into chunk 1: the whole old chunk is saved.
    let data = pattern(3, 4096);
    store
        .write(&f.live, COW_CHUNK + 8192, &data)
        .expect("write");
    model.write(COW_CHUNK + 8192, &data);
    check(&store, &f, &model);
    assert_eq!(map_len(&f, 1), (HEADER_LEN + RECORD_LEN) as u64);
    assert_eq!(delta_blocks(&f, 1) * 512, COW_CHUNK);

    // Later writes to that chunk add nothing.
    let data = pattern(4, 4096);
    store.write(&f.live, COW_CHUNK, &data).expect("write again");
    model.write(COW_CHUNK, &data);
    assert_eq!(map_len(&f, 1), (HEADER_LEN + RECORD_LEN) as u64);

    // A hole and a chunk of written zeros are recorded without data.
    store
        .write(&f.live, 9 * COW_CHUNK, &data)
        .expect("write hole");
    model.write(9 * COW_CHUNK, &data);
    store
        .write(&f.live, 3 * COW_CHUNK, &data)
        .expect("write zeros");
    model.write(3 * COW_CHUNK, &data);
    assert_eq!(map_len(&f, 1), (HEADER_LEN + 3 * RECORD_LEN) as u64);
    assert_eq!(delta_blocks(&f, 1) * 512, COW_CHUNK);
    check(&store, &f, &model);

    // A discard saves too.
    store.discard(&f.live, 0, COW_CHUNK).expect("discard");
    model.live[..COW_CHUNK as usize].fill(0);
    check(&store, &f, &model);
    drop(store);
    let store = SliceSnapshots::open(&f.path).expect("reopen");
    check(&store, &f, &model);
}

/// A small deterministic generator for the model test.
struct Rng(u64);

impl Rng {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below.max(1)
    }
}

#[test]
fn several_snapshots_stay_exact_through_writes_deletes_and_rollbacks() {
    let f = fixture(SLICE);
    let mut store = SliceSnapshots::open(&f.path).expect("open");
    let mut model = Model::new(SLICE);
    seed(&store, &f, &mut model);
    let mut rng = Rng(0x5eed);
    let mut next_id = 1;
    for step in 0..400u64 {
        match rng.next(10) {
            0..=4 => {
                let len = 1 + rng.next(3 * COW_CHUNK) as usize;
                let off = rng.next(SLICE - len as u64);
                let data = pattern(step, len);
                store.write(&f.live, off, &data).expect("write");
                model.write(off, &data);
            }
            5 => {
                let len = 1 + rng.next(2 * COW_CHUNK);
                let off = rng.next(SLICE - len) / 4096 * 4096;
                let len = len.div_ceil(4096) * 4096;
                store.discard(&f.live, off, len).expect("discard");
                model.live[off as usize..(off + len) as usize].fill(0);
            }
            6 | 7 => {
                store.create(next_id, &f.live).expect("create");
                model.snaps.insert(next_id, model.live.clone());
                next_id += 1;
            }
            8 if !model.snaps.is_empty() => {
                let ids: Vec<u64> = model.snaps.keys().copied().collect();
                let id = ids[rng.next(ids.len() as u64) as usize];
                store.delete(id, &f.live).expect("delete");
                model.snaps.remove(&id);
            }
            9 if !model.snaps.is_empty() => {
                let ids: Vec<u64> = model.snaps.keys().copied().collect();
                let id = ids[rng.next(ids.len() as u64) as usize];
                store.rollback(id, &f.live).expect("rollback");
                model.live = model.snaps[&id].clone();
            }
            _ => {}
        }
        check(&store, &f, &model);
        if step % 50 == 49 {
            drop(store);
            store = SliceSnapshots::open(&f.path).expect("reopen");
            check(&store, &f, &model);
        }
    }
    assert!(next_id > 20, "the test took snapshots");
    // Deleting everything leaves no snapshot file behind.
    for id in model.snaps.keys() {
        store.delete(*id, &f.live).expect("delete");
    }
    let left: Vec<String> = fs::read_dir(f.path.parent().expect("dir"))
        .expect("list")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n != "c0-k0.slice")
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn rollback_keeps_newer_snapshots_and_zeroes_what_the_slice_grew_by() {
    let f = fixture(SLICE);
    let store = SliceSnapshots::open(&f.path).expect("open");
    let mut model = Model::new(SLICE);
    seed(&store, &f, &mut model);
    store.create(1, &f.live).expect("snapshot 1");
    model.snaps.insert(1, model.live.clone());
    let data = pattern(7, 3 * COW_CHUNK as usize);
    store.write(&f.live, 100, &data).expect("write");
    model.write(100, &data);
    // The slice grows; the new space gets data; snapshot 2 sees it.
    f.live.set_len(2 * SLICE).expect("grow");
    model.live.resize(2 * SLICE as usize, 0);
    let data = pattern(8, 2 * COW_CHUNK as usize);
    store
        .write(&f.live, SLICE + 4096, &data)
        .expect("write grown");
    model.write(SLICE + 4096, &data);
    store.create(2, &f.live).expect("snapshot 2");
    model.snaps.insert(2, model.live.clone());
    check(&store, &f, &model);

    store.rollback(1, &f.live).expect("rollback");
    let mut want = model.snaps[&1].clone();
    want.resize(2 * SLICE as usize, 0);
    model.live = want;
    check(&store, &f, &model);
    assert_eq!(f.live.metadata().expect("stat").len(), 2 * SLICE);
    // Rolling back again changes nothing; rolling forward restores 2.
    store.rollback(1, &f.live).expect("rollback again");
    check(&store, &f, &model);
    store.rollback(2, &f.live).expect("roll forward");
    model.live = model.snaps[&2].clone();
    check(&store, &f, &model);
}

#[test]
fn reopening_cuts_a_torn_record_and_keeps_the_rest() {
    let f = fixture(SLICE);
    let store = SliceSnapshots::open(&f.path).expect("open");
    let mut model = Model::new(SLICE);
    seed(&store, &f, &mut model);
    store.create(1, &f.live).expect("snapshot");
    model.snaps.insert(1, model.live.clone());
    let data = pattern(9, 4096);
    store.write(&f.live, 0, &data).expect("write");
    model.write(0, &data);
    drop(store);
    let map = f.path.with_file_name("c0-k0.s1.map");
    let good = fs::metadata(&map).expect("map").len();
    // Half a record, as a crash in the middle of an append leaves it.
    let log = OpenOptions::new().write(true).open(&map).expect("map");
    log.write_all_at(&encode_record(TAG_DATA, 7)[..13], good)
        .expect("torn append");
    drop(log);
    // Leftovers of an interrupted creation are removed.
    fs::write(f.path.with_file_name("c0-k0.s9.map.tmp"), b"x").expect("tmp");
    fs::write(f.path.with_file_name("c0-k0.s9.delta"), b"x").expect("orphan");
    let store = SliceSnapshots::open(&f.path).expect("reopen");
    assert_eq!(fs::metadata(&map).expect("map").len(), good);
    assert!(!f.path.with_file_name("c0-k0.s9.map.tmp").exists());
    assert!(!f.path.with_file_name("c0-k0.s9.delta").exists());
    check(&store, &f, &model);
    // A corrupt header is refused rather than read as an empty snapshot.
    drop(store);
    let log = OpenOptions::new().write(true).open(&map).expect("map");
    log.write_all_at(b"X", 0).expect("corrupt");
    let err = SliceSnapshots::open(&f.path).err().expect("refused");
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
}

/// One operation of the crash and ENOSPC tests, from a fixed start: the
/// seeded slice with snapshots 1 and 2 (each with saved chunks).
#[derive(Debug, Clone, Copy)]
enum Op {
    Create,
    Write,
    Discard,
    DeleteMiddle,
    DeleteNewest,
    DeleteOldest,
    Rollback,
}

const OPS: [Op; 7] = [
    Op::Create,
    Op::Write,
    Op::Discard,
    Op::DeleteMiddle,
    Op::DeleteNewest,
    Op::DeleteOldest,
    Op::Rollback,
];

fn start() -> (Fixture, SliceSnapshots, Model) {
    let f = fixture(SLICE);
    let store = SliceSnapshots::open(&f.path).expect("open");
    let mut model = Model::new(SLICE);
    seed(&store, &f, &mut model);
    for (id, off) in [(1u64, 0u64), (2, 4 * COW_CHUNK + 10)] {
        store.create(id, &f.live).expect("snapshot");
        model.snaps.insert(id, model.live.clone());
        let data = pattern(10 + id, 3 * COW_CHUNK as usize);
        store.write(&f.live, off, &data).expect("write");
        model.write(off, &data);
    }
    (f, store, model)
}

/// Runs `op`; returns the model after it.
fn run(op: Op, store: &SliceSnapshots, f: &Fixture, model: &Model) -> (io::Result<()>, Model) {
    let mut after = model.clone();
    let r = match op {
        Op::Create => {
            after.snaps.insert(3, after.live.clone());
            store.create(3, &f.live)
        }
        Op::Write => {
            // Spans chunks held by snapshot 2, a hole and a data chunk.
            let data = pattern(99, 3 * COW_CHUNK as usize);
            after.write(5 * COW_CHUNK + 7, &data);
            store.write(&f.live, 5 * COW_CHUNK + 7, &data)
        }
        Op::Discard => {
            after.live[..2 * COW_CHUNK as usize].fill(0);
            store.discard(&f.live, 0, 2 * COW_CHUNK)
        }
        Op::DeleteMiddle | Op::DeleteOldest | Op::DeleteNewest => {
            let id = match op {
                Op::DeleteOldest => 1,
                _ => 2,
            };
            if let Op::DeleteMiddle = op {
                // Make 2 a middle snapshot first (outside the fault).
                after.snaps.insert(3, after.live.clone());
            }
            after.snaps.remove(&id);
            store.delete(id, &f.live)
        }
        Op::Rollback => {
            after.live = after.snaps[&1].clone();
            store.rollback(1, &f.live)
        }
    };
    (r, after)
}

fn prepare(op: Op) -> (Fixture, SliceSnapshots, Model) {
    let (f, store, mut model) = start();
    if let Op::DeleteMiddle = op {
        store.create(3, &f.live).expect("snapshot 3");
        model.snaps.insert(3, model.live.clone());
    }
    (f, store, model)
}

/// How many I/O steps `op` takes without faults.
fn steps_of(op: Op) -> usize {
    let (f, store, model) = prepare(op);
    store.inject(Some(Fault {
        at: usize::MAX,
        crash: true,
        seen: 0,
    }));
    let (r, after) = run(op, &store, &f, &model);
    r.expect("op without faults");
    let steps = store.steps_seen();
    store.inject(None);
    check(&store, &f, &after);
    assert!(steps > 0, "{op:?} has steps");
    steps
}

#[test]
fn a_crash_at_any_step_recovers_a_consistent_state() {
    for op in OPS {
        let steps = steps_of(op);
        for at in 0..steps {
            let (f, store, before) = prepare(op);
            store.inject(Some(Fault {
                at,
                crash: true,
                seen: 0,
            }));
            let (r, after) = run(op, &store, &f, &before);
            assert!(r.is_err(), "{op:?} crashed at step {at}");
            drop(store);
            let store = SliceSnapshots::open(&f.path).expect("reopen after crash");
            let live = live_bytes(&f);
            let listed: Vec<u64> = store.list().expect("list").iter().map(|s| s.id).collect();
            // Every snapshot that exists reads exactly as it was taken.
            for id in &listed {
                let want = after
                    .snaps
                    .get(id)
                    .or(before.snaps.get(id))
                    .expect("a known snapshot");
                assert!(
                    &snap_bytes(&store, &f, *id, want.len() as u64) == want,
                    "{op:?} crash at {at}: snapshot {id} torn"
                );
            }
            match op {
                Op::Rollback => {
                    // Partly done: live is a mix; re-running finishes it.
                    store.rollback(1, &f.live).expect("rollback re-run");
                    check(&store, &f, &after);
                }
                Op::Write | Op::Discard => {
                    assert!(live == before.live || live == after.live, "{op:?} at {at}");
                    let want: Vec<u64> = before.snaps.keys().copied().collect();
                    assert_eq!(listed, want);
                }
                Op::Create | Op::DeleteMiddle | Op::DeleteNewest | Op::DeleteOldest => {
                    assert!(live == before.live, "{op:?} at {at}: live changed");
                    let b: Vec<u64> = before.snaps.keys().copied().collect();
                    let a: Vec<u64> = after.snaps.keys().copied().collect();
                    assert!(listed == b || listed == a, "{op:?} at {at}: {listed:?}");
                    // Re-running converges on the state after the operation.
                    let (r, _) = run(op, &store, &f, &before);
                    r.expect("re-run");
                    check(&store, &f, &after);
                }
            }
        }
    }
}

#[test]
fn a_save_that_finds_no_space_fails_the_write_and_changes_nothing() {
    for op in [Op::Write, Op::Discard, Op::Rollback] {
        let steps = steps_of(op);
        for at in 0..steps {
            let (f, store, before) = prepare(op);
            store.inject(Some(Fault {
                at,
                crash: false,
                seen: 0,
            }));
            let (r, after) = run(op, &store, &f, &before);
            let err = r.expect_err("the injected ENOSPC fails the operation");
            assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{op:?} at {at}");
            store.inject(None);
            if let Op::Rollback = op {
                // Chunks before the failing one were rolled back already.
                for (id, bytes) in &before.snaps {
                    assert!(&snap_bytes(&store, &f, *id, SLICE) == bytes);
                }
            } else {
                check(&store, &f, &before);
            }
            // With space again the same call succeeds, and survives a reopen.
            let (r, _) = run(op, &store, &f, &before);
            r.expect("retry with space");
            check(&store, &f, &after);
            drop(store);
            let store = SliceSnapshots::open(&f.path).expect("reopen");
            check(&store, &f, &after);
        }
    }
}

#[test]
fn a_map_read_in_pages_is_the_whole_map_cut_at_record_boundaries() {
    let f = fixture(SLICE);
    let snaps = SliceSnapshots::open(&f.path).expect("open");
    // Ten chunks with data before the snapshot, overwritten after it: a
    // header and ten "data in the delta" records.
    for c in 0..10 {
        snaps
            .write(&f.live, c * COW_CHUNK, &pattern(c, 4096))
            .expect("write");
    }
    snaps.create(1, &f.live).expect("snapshot");
    for c in 0..10 {
        snaps
            .write(&f.live, c * COW_CHUNK, &pattern(c + 10, 4096))
            .expect("write");
    }
    let whole = snaps.map_since(1, 0).expect("whole map");
    assert_eq!(whole.end as usize, HEADER_LEN + 10 * RECORD_LEN);
    assert_eq!(whole.data_chunks, (0..10).collect::<Vec<u64>>());
    for max in [1, 23, 24, 32, 33, 56, 100, 1 << 20] {
        let (mut from, mut bytes, mut chunks) = (0u64, Vec::new(), Vec::new());
        loop {
            let page = snaps.map_page(1, from, max).expect("page");
            if page.bytes.is_empty() {
                break;
            }
            assert_eq!(page.end, from + page.bytes.len() as u64);
            let on_boundary = page.end as usize == HEADER_LEN
                || (page.end as usize - HEADER_LEN).is_multiple_of(RECORD_LEN);
            assert!(on_boundary, "max {max}: a page ends at {}", page.end);
            assert!(
                page.bytes.len() as u64 <= max.max(RECORD_LEN as u64).max(HEADER_LEN as u64),
                "max {max}: a page of {} bytes",
                page.bytes.len()
            );
            bytes.extend_from_slice(&page.bytes);
            chunks.extend(page.data_chunks);
            from = page.end;
        }
        assert_eq!(bytes, whole.bytes, "max {max}");
        assert_eq!(chunks, whole.data_chunks, "max {max}");
    }
    assert_eq!(map_page_end(0, 10), HEADER_LEN as u64);
    assert_eq!(map_page_end(32, 10), 56);
    assert_eq!(map_page_end(32, 50), 80);
    // No overflow near the end of the range.
    assert!((map_page_end(u64::MAX - 10, 100) - 32).is_multiple_of(24));
}

fn journal_path(f: &Fixture) -> PathBuf {
    f.path.with_file_name("c0-k0.journal")
}

/// `start`, then writes held from now on.
fn start_holding() -> (Fixture, SliceSnapshots, Model) {
    let (f, store, model) = start();
    store.hold_writes();
    (f, store, model)
}

#[test]
fn held_writes_change_nothing_on_disk_but_their_journal_until_a_commit() {
    let (f, store, mut model) = start_holding();
    store.create(3, &f.live).expect("snapshot 3");
    model.snaps.insert(3, model.live.clone());
    let before = model.clone();
    // Spans a data chunk, a hole and a chunk snapshot 2 holds; then a
    // write over part of it, and a discard of the first chunk.
    let a = pattern(31, 3 * COW_CHUNK as usize);
    store
        .write(&f.live, 5 * COW_CHUNK + 7, &a)
        .expect("write a");
    model.write(5 * COW_CHUNK + 7, &a);
    let b = pattern(32, 5000);
    store
        .write(&f.live, 6 * COW_CHUNK + 3, &b)
        .expect("write b");
    model.write(6 * COW_CHUNK + 3, &b);
    store.discard(&f.live, 0, COW_CHUNK).expect("discard");
    model.live[..COW_CHUNK as usize].fill(0);

    // Nothing reached the live slice, the delta or the map; every
    // snapshot reads as taken.
    assert!(live_bytes(&f) == before.live, "the live slice changed");
    assert_eq!(map_len(&f, 3), HEADER_LEN as u64);
    assert_eq!(delta_blocks(&f, 3), 0, "nothing saved before the commit");
    assert!(journal_path(&f).is_file());
    for (id, bytes) in &model.snaps {
        assert!(
            &snap_bytes(&store, &f, *id, SLICE) == bytes,
            "snapshot {id}"
        );
    }
    // A read elsewhere leaves them held; a read where they are commits.
    store
        .commit_range(&f.live, 10 * COW_CHUNK, COW_CHUNK)
        .expect("read elsewhere");
    assert!(live_bytes(&f) == before.live);
    store
        .commit_range(&f.live, 6 * COW_CHUNK, 10)
        .expect("read there");
    check(&store, &f, &model);
    assert!(!journal_path(&f).exists(), "the journal goes at the commit");
    assert!(map_len(&f, 3) > HEADER_LEN as u64);
    assert!(delta_blocks(&f, 3) > 0, "the old bytes saved at the commit");

    // Writes to chunks saved already go straight to the live slice again.
    let c = pattern(33, 100);
    store.write(&f.live, 6 * COW_CHUNK, &c).expect("write c");
    model.write(6 * COW_CHUNK, &c);
    check(&store, &f, &model);
    assert!(!journal_path(&f).exists());
}

#[test]
fn a_slice_commits_by_itself_once_it_holds_its_bound_of_writes() {
    let (f, store, mut model) = start_holding();
    store.create(3, &f.live).expect("snapshot 3");
    model.snaps.insert(3, model.live.clone());
    for i in 0..held::HELD_WRITES as u64 {
        let data = [(i % 251) as u8 + 1; 8];
        let at = 9 * COW_CHUNK + (i * 8) % COW_CHUNK;
        store.write(&f.live, at, &data).expect("write");
        model.write(at, &data);
    }
    // The last write reached the bound: all of them are in place.
    assert!(!journal_path(&f).exists());
    check(&store, &f, &model);
}

/// One op of [`held_ops`]: it updates the model and runs on the store.
type HeldOp<'a> = &'a dyn Fn(&mut Model) -> io::Result<()>;

/// Held writes, then their commit: the ops of the fault tests below, run
/// until one fails (a crashed process runs nothing more). Their results,
/// and the model after each op.
fn held_ops(
    store: &SliceSnapshots,
    f: &Fixture,
    model: &Model,
) -> (Vec<io::Result<()>>, Vec<Model>) {
    let a = pattern(41, 3 * COW_CHUNK as usize);
    let b = pattern(42, 6000);
    let ops: [HeldOp<'_>; 4] = [
        &|m| {
            m.write(5 * COW_CHUNK + 7, &a);
            store.write(&f.live, 5 * COW_CHUNK + 7, &a)
        },
        &|m| {
            m.live[..2 * COW_CHUNK as usize].fill(0);
            store.discard(&f.live, 0, 2 * COW_CHUNK)
        },
        &|m| {
            m.write(6 * COW_CHUNK + 100, &b);
            store.write(&f.live, 6 * COW_CHUNK + 100, &b)
        },
        &|_| store.commit(&f.live),
    ];
    let (mut results, mut models) = (Vec::new(), Vec::new());
    let mut m = model.clone();
    for op in ops {
        let r = op(&mut m);
        let failed = r.is_err();
        results.push(r);
        models.push(m.clone());
        if failed {
            break;
        }
    }
    (results, models)
}

/// The I/O steps of [`held_ops`] without faults (all of them succeed).
fn held_steps() -> usize {
    let (f, store, model) = start_holding();
    store.inject(Some(Fault {
        at: usize::MAX,
        crash: true,
        seen: 0,
    }));
    let (results, models) = held_ops(&store, &f, &model);
    assert!(results.len() == 4 && results.iter().all(|r| r.is_ok()));
    let steps = store.steps_seen();
    store.inject(None);
    check(&store, &f, &models[3]);
    steps
}

/// [`held_ops`] on a fresh store whose step `at` fails (a crash: every
/// later step too; else ENOSPC): the store, the state before, and the ops'
/// results and models.
#[allow(clippy::type_complexity)]
fn held_ops_failing_at(
    at: usize,
    crash: bool,
) -> (
    Fixture,
    SliceSnapshots,
    Model,
    Vec<io::Result<()>>,
    Vec<Model>,
) {
    let (f, store, before) = start_holding();
    store.inject(Some(Fault { at, crash, seen: 0 }));
    let (results, models) = held_ops(&store, &f, &before);
    (f, store, before, results, models)
}

#[test]
fn a_crash_at_any_step_of_held_writes_or_their_commit_loses_nothing_answered() {
    for at in 0..held_steps() {
        let (f, store, before, results, models) = held_ops_failing_at(at, true);
        // The writes answered before the crash (the process dies there).
        let answered = results.iter().take(3).take_while(|r| r.is_ok()).count();
        assert!(
            results.last().is_some_and(|r| r.is_err()),
            "crashed at step {at}"
        );
        drop(store);
        let store = SliceSnapshots::open(&f.path).expect("reopen replays the journal");
        let want = if answered == 0 {
            &before
        } else {
            &models[answered - 1]
        };
        check(&store, &f, want);
        assert!(!journal_path(&f).exists(), "step {at}: journal left");
    }
}

#[test]
fn a_held_write_whose_save_finds_no_space_fails_and_changes_nothing() {
    for at in 0..held_steps() {
        let (f, store, before, results, models) = held_ops_failing_at(at, false);
        let failed = results.len() - 1;
        let err = results[failed].as_ref().expect_err("one op fails");
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "step {at}");
        store.inject(None);
        // The ops before the failing one stand, a failing write or discard
        // changed nothing; a failed commit is tried again.
        let want = match failed {
            0 => before.clone(),
            3 => models[3].clone(),
            n => models[n - 1].clone(),
        };
        store.commit(&f.live).expect("commit with space");
        check(&store, &f, &want);
        drop(store);
        let store = SliceSnapshots::open(&f.path).expect("reopen");
        check(&store, &f, &want);
    }
}
