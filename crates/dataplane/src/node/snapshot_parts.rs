//! A live copy's snapshot files of a slice on this node (the slice
//! protocol's `WriteSnapshotPart`, `ReadSnapshot*Part`,
//! `PlaceSnapshotParts`, `DropSnapshotParts`): `*.partial` files next to
//! the slice, as the local data plane's copies write them, put in place
//! (deltas before maps: a map makes its snapshot exist) at the copy's
//! switch.

use crate::fsutil::{fsync_dir, partial_path, remove_if_exists, slice_stem};
use crate::snapshot::{delta_name, map_name, parse_snapshot_file, read_up_to};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use svs_sliceproto::SnapshotPart;

/// The directory and file stem of the slice file `slice`.
fn dir_and_stem(slice: &Path) -> io::Result<(&Path, &str)> {
    let stem = slice_stem(slice)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a slice file name"))?;
    Ok((slice.parent().unwrap_or(Path::new(".")), stem))
}

/// Snapshot `id`'s `part` of the slice file `slice`, in place.
fn final_path(slice: &Path, id: u64, part: SnapshotPart) -> io::Result<PathBuf> {
    let (dir, stem) = dir_and_stem(slice)?;
    Ok(dir.join(match part {
        SnapshotPart::Map => map_name(stem, id),
        SnapshotPart::Delta => delta_name(stem, id),
    }))
}

/// Writes `data` at `offset` of the part (made when missing; no bytes:
/// made again, empty).
pub(super) fn write(
    slice: &Path,
    (id, part): (u64, SnapshotPart),
    offset: u64,
    data: &[u8],
) -> io::Result<()> {
    let path = partial_path(&final_path(slice, id, part)?);
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(data.is_empty() && offset == 0)
        .open(path)?;
    file.write_all_at(data, offset)
}

/// Reads the part at `offset` into `buf`: the bytes read.
pub(super) fn read(
    slice: &Path,
    (id, part): (u64, SnapshotPart),
    offset: u64,
    buf: &mut [u8],
) -> io::Result<usize> {
    let file = File::open(partial_path(&final_path(slice, id, part)?))?;
    read_up_to(&file, buf, offset)
}

/// Makes the parts of snapshots `ids` durable and puts them in place,
/// deltas before maps, then removes the slice's other snapshot files (an
/// older copy's, a snapshot deleted since): the slice's snapshots are
/// exactly the copied ones.
pub(super) fn place(slice: &Path, ids: &[u64]) -> io::Result<()> {
    let (dir, stem) = dir_and_stem(slice)?;
    for &id in ids {
        for part in [SnapshotPart::Delta, SnapshotPart::Map] {
            File::open(partial_path(&final_path(slice, id, part)?))?.sync_all()?;
        }
    }
    for part in [SnapshotPart::Delta, SnapshotPart::Map] {
        for &id in ids {
            let to = final_path(slice, id, part)?;
            fs::rename(partial_path(&to), &to)?;
        }
    }
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let Some((id, _)) = name.to_str().and_then(|n| parse_snapshot_file(stem, n)) else {
            continue;
        };
        if !ids.contains(&id) {
            remove_if_exists(&dir.join(&name))?;
        }
    }
    fsync_dir(dir)
}

/// Removes the slice's snapshot parts not in place.
pub(super) fn drop_parts(slice: &Path) -> io::Result<()> {
    crate::snapshot::remove_snapshot_files(slice, true).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn parts_are_written_read_back_and_replace_the_slice_s_snapshot_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let slice = dir.path().join("c0-k0.slice");
        fs::write(&slice, b"slice").expect("slice");
        // An older copy's snapshots: 1 stays (copied again), 2 goes.
        for name in ["c0-k0.s1.map", "c0-k0.s1.delta", "c0-k0.s2.map"] {
            fs::write(dir.path().join(name), b"old").expect("old");
        }
        for part in [SnapshotPart::Map, SnapshotPart::Delta] {
            write(&slice, (1, part), 0, &[]).expect("start");
        }
        write(&slice, (1, SnapshotPart::Map), 0, b"map-bytes").expect("map");
        write(&slice, (1, SnapshotPart::Delta), 4096, b"delta").expect("delta");
        let mut buf = [0u8; 16];
        let n = read(&slice, (1, SnapshotPart::Map), 4, &mut buf).expect("read");
        assert_eq!(&buf[..n], b"bytes");
        place(&slice, &[1]).expect("place");
        assert_eq!(
            names(dir.path()),
            ["c0-k0.s1.delta", "c0-k0.s1.map", "c0-k0.slice"]
        );
        assert_eq!(
            fs::read(dir.path().join("c0-k0.s1.map")).expect("map"),
            b"map-bytes"
        );
        let delta = fs::read(dir.path().join("c0-k0.s1.delta")).expect("delta");
        assert_eq!(&delta[4096..], b"delta");
    }

    #[test]
    fn parts_not_placed_are_dropped_and_the_placed_files_stay() {
        let dir = tempfile::tempdir().expect("tempdir");
        let slice = dir.path().join("c0-k0.slice");
        fs::write(&slice, b"slice").expect("slice");
        fs::write(dir.path().join("c0-k0.s3.map"), b"in place").expect("placed");
        write(&slice, (4, SnapshotPart::Map), 0, b"part").expect("part");
        // Starting a part again empties it.
        write(&slice, (4, SnapshotPart::Map), 0, &[]).expect("again");
        let mut buf = [0u8; 4];
        assert_eq!(
            read(&slice, (4, SnapshotPart::Map), 0, &mut buf).expect("read"),
            0
        );
        drop_parts(&slice).expect("drop");
        assert_eq!(names(dir.path()), ["c0-k0.s3.map", "c0-k0.slice"]);
    }
}
