//! Benchmark helper for `bench/run.sh`: prepares a slice on medium `a` under
//! a root directory and moves it to medium `b`, unthrottled: the way a job
//! moves a slice (through the volume's I/O, in the move's phases: begin,
//! fill, switch, finish), or file to file (`copy_slice`).
//!
//! ```text
//! slice_move prepare ROOT full|sparse     # writes the source slice, prints its path
//! slice_move move ROOT full|sparse        # moves it a -> b as a job does, prints seconds
//! slice_move copy-file ROOT full|sparse   # copy_slice a -> b, prints seconds taken
//! ```
//!
//! `full`: 1 GiB, every block written with non-zero data.
//! `sparse`: 4 GiB logical, 1 GiB of non-zero data in 4 extents of 256 MiB.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;
use svs_dataplane::{CopyOptions, DataPlane, LocalMedia, SliceCopyKind, SliceKey, VolumeLayout};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

struct Layout {
    /// Logical size of the slice.
    len: u64,
    /// `(offset, length)` of each data extent.
    extents: Vec<(u64, u64)>,
}

fn layout(kind: &str) -> Option<Layout> {
    match kind {
        "full" => Some(Layout {
            len: GIB,
            extents: vec![(0, GIB)],
        }),
        // 256 MiB of data at the start of each GiB.
        "sparse" => Some(Layout {
            len: 4 * GIB,
            extents: (0..4).map(|i| (i * GIB, 256 * MIB)).collect(),
        }),
        _ => None,
    }
}

fn media(root: &Path) -> LocalMedia {
    LocalMedia::new([
        ("a".to_string(), root.join("a")),
        ("b".to_string(), root.join("b")),
    ])
}

fn key(kind: &str) -> SliceKey {
    SliceKey {
        volume_id: format!("bench-{kind}"),
        copy: 0,
        column: 0,
    }
}

/// Creates the source slice on medium `a` and fills its data extents with
/// xorshift output (never an all-zero block), durably.
fn prepare(root: &Path, kind: &str, layout: &Layout) -> Result<PathBuf, String> {
    let media = media(root);
    let slice = key(kind);
    media.check_medium("a").map_err(|e| e.to_string())?;
    media.check_medium("b").map_err(|e| e.to_string())?;
    media
        .create_slice("a", &slice, layout.len)
        .map_err(|e| e.to_string())?;
    let path = media.slice_path("a", &slice).map_err(|e| e.to_string())?;
    let file = OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut buf = vec![0u8; MIB as usize];
    for &(start, n) in &layout.extents {
        for i in 0..n / MIB {
            for w in buf.chunks_exact_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                w.copy_from_slice(&x.to_le_bytes());
            }
            file.write_all_at(&buf, start + i * MIB)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    file.sync_all()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// Moves the slice from `a` to `b` as a job does (the volume's I/O opened,
/// begin, fill, switch, finish), unthrottled; returns seconds taken. The
/// old file stays (a job deletes it after recording the switch) for the
/// next round.
fn move_slice(root: &Path, kind: &str, len: u64) -> Result<f64, String> {
    let media = media(root);
    let slice = key(kind);
    let started = Instant::now();
    let io = media
        .open_volume(&VolumeLayout {
            volume_id: slice.volume_id.clone(),
            size: len,
            media: vec![vec!["a".to_string()]],
            epoch: 0,
        })
        .map_err(|e| e.to_string())?;
    let mut moving = std::sync::Arc::clone(&io)
        .begin_slice_copy(SliceCopyKind::Move, 0, 0, "b", 0)
        .map_err(|e| e.to_string())?;
    moving
        .fill(&CopyOptions::default(), &mut |_, _| {})
        .map_err(|e| e.to_string())?;
    moving.switch().map_err(|e| e.to_string())?;
    moving.finish().map_err(|e| e.to_string())?;
    drop(io);
    Ok(started.elapsed().as_secs_f64())
}

/// Copies the slice file from `a` to `b` (`copy_slice`), unthrottled;
/// returns seconds taken.
fn copy_file(root: &Path, kind: &str) -> Result<f64, String> {
    let media = media(root);
    let slice = key(kind);
    let started = Instant::now();
    media
        .copy_slice("a", "b", &slice, &CopyOptions::default(), &mut |_, _| {})
        .map_err(|e| e.to_string())?;
    Ok(started.elapsed().as_secs_f64())
}

fn run(args: &[String]) -> Result<(), String> {
    let usage = "usage: slice_move prepare|move|copy-file ROOT full|sparse";
    let [cmd, root, kind] = args else {
        return Err(usage.to_string());
    };
    let root = Path::new(root);
    let layout = layout(kind).ok_or(usage)?;
    match cmd.as_str() {
        "prepare" => {
            let path = prepare(root, kind, &layout)?;
            println!("{}", path.display());
        }
        "move" => {
            let secs = move_slice(root, kind, layout.len)?;
            println!("{secs:.6}");
        }
        "copy-file" => {
            let secs = copy_file(root, kind)?;
            println!("{secs:.6}");
        }
        _ => return Err(usage.to_string()),
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("slice_move: {e}");
            ExitCode::FAILURE
        }
    }
}
