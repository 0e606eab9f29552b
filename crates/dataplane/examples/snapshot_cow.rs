//! Micro-benchmark of the per-slice copy-on-write snapshots.
//!
//! ```text
//! snapshot_cow [ROOT]     # ROOT: a scratch directory (default: the temp dir)
//! ```
//!
//! 1. Snapshot creation time (median of 9) for a 1 GiB and a 64 GiB sparse
//!    slice holding the same 256 MiB of data: it must not grow with size.
//! 2. 4 KiB random writes (buffered, as NBD writes without FUA) on the
//!    1 GiB slice: with no snapshot; the first write to each chunk after a
//!    snapshot (saves the 64 KiB chunk durably first); later writes to
//!    chunks already saved; the first writes after a new snapshot with
//!    writes held (as a served slice: saved without a sync, the write in
//!    the journal), and the commit that a flush then runs. Median µs per
//!    write and IOPS (writes / total time).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;
use svs_dataplane::{SliceSnapshots, COW_CHUNK};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const WRITES: usize = 1000;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A slice of `len` bytes with 256 MiB of data: 64 MiB at the start of each
/// quarter of its first GiB.
fn prepare(dir: &Path, len: u64) -> Result<(PathBuf, File), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join("c0-k0.slice");
    let fail = |e: std::io::Error| format!("{}: {e}", path.display());
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(fail)?;
    file.set_len(len).map_err(fail)?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut buf = vec![0u8; MIB as usize];
    for quarter in 0..4 {
        for i in 0..64 {
            for w in buf.chunks_exact_mut(8) {
                w.copy_from_slice(&rng.next().to_le_bytes());
            }
            file.write_all_at(&buf, quarter * GIB / 4 + i * MIB)
                .map_err(fail)?;
        }
    }
    file.sync_all().map_err(fail)?;
    Ok((path, file))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Median µs of 9 snapshot creations, each deleted again before the next,
/// so every creation starts with no snapshot.
fn creation(dir: &Path, len: u64) -> Result<f64, String> {
    let (path, live) = prepare(dir, len)?;
    let store = SliceSnapshots::open(&path).map_err(|e| e.to_string())?;
    let mut times = Vec::new();
    for id in 1..=9 {
        let started = Instant::now();
        store.create(id, &live).map_err(|e| e.to_string())?;
        times.push(started.elapsed().as_secs_f64() * 1e6);
        store.delete(id, &live).map_err(|e| e.to_string())?;
    }
    std::fs::remove_dir_all(dir).map_err(|e| e.to_string())?;
    Ok(median(times))
}

/// Writes 4 KiB at each offset; returns (median µs, IOPS).
fn writes(store: &SliceSnapshots, live: &File, offsets: &[u64]) -> Result<(f64, f64), String> {
    let data = vec![0x5au8; 4096];
    let mut times = Vec::with_capacity(offsets.len());
    let started = Instant::now();
    for &off in offsets {
        let t = Instant::now();
        store.write(live, off, &data).map_err(|e| e.to_string())?;
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let iops = offsets.len() as f64 / started.elapsed().as_secs_f64();
    Ok((median(times), iops))
}

fn run(root: &Path) -> Result<(), String> {
    let root = root.join(format!("svs-snapshot-cow-{}", std::process::id()));
    println!("snapshot creation, 256 MiB written (median of 9):");
    for (name, len) in [("1 GiB", GIB), ("64 GiB", 64 * GIB)] {
        let us = creation(&root.join(name.replace(' ', "")), len)?;
        println!("  {name:>6} slice: {us:9.1} µs");
    }

    let dir = root.join("writes");
    let (path, live) = prepare(&dir, GIB)?;
    let store = SliceSnapshots::open(&path).map_err(|e| e.to_string())?;
    let mut rng = Rng(0x1234_5678_9abc_def1);
    // Distinct chunks, a random 4 KiB block inside each.
    let chunks = GIB / COW_CHUNK;
    let mut picked = std::collections::BTreeSet::new();
    while picked.len() < WRITES {
        picked.insert(rng.next() % chunks);
    }
    let mut offsets: Vec<u64> = picked
        .into_iter()
        .map(|c| c * COW_CHUNK + (rng.next() % (COW_CHUNK / 4096)) * 4096)
        .collect();
    for i in (1..offsets.len()).rev() {
        offsets.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    println!("4 KiB random writes on the 1 GiB slice ({WRITES} each, buffered):");
    let (us, iops) = writes(&store, &live, &offsets)?;
    println!("  no snapshot:               median {us:9.1} µs, {iops:9.0} IOPS");
    store.create(1, &live).map_err(|e| e.to_string())?;
    let (us, iops) = writes(&store, &live, &offsets)?;
    println!("  first write per chunk:     median {us:9.1} µs, {iops:9.0} IOPS");
    let (us, iops) = writes(&store, &live, &offsets)?;
    println!("  later writes, same chunks: median {us:9.1} µs, {iops:9.0} IOPS");
    // The same with writes held (as a served slice does): the first writes
    // after a fresh snapshot, then the commit a flush runs.
    store.delete(1, &live).map_err(|e| e.to_string())?;
    store.create(2, &live).map_err(|e| e.to_string())?;
    store.hold_writes();
    let (us, iops) = writes(&store, &live, &offsets)?;
    println!("  first write per chunk, held: median {us:7.1} µs, {iops:9.0} IOPS");
    let started = Instant::now();
    store.commit(&live).map_err(|e| e.to_string())?;
    println!(
        "  their commit (a flush):      {:9.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    let used = store.list().map_err(|e| e.to_string())?;
    if let Some(s) = used.first() {
        println!(
            "  snapshot space after {WRITES} first writes: {:.1} MiB",
            s.used_bytes as f64 / MIB as f64
        );
    }
    drop(store);
    std::fs::remove_dir_all(&root).map_err(|e| e.to_string())?;
    Ok(())
}

fn main() -> ExitCode {
    let root = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    match run(&root) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("snapshot_cow: {e}");
            ExitCode::FAILURE
        }
    }
}
