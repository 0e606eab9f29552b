//! What snapshots hold on a medium, measured from their files' allocated
//! blocks (no map is replayed, so it is cheap enough to poll).

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Allocated bytes of every snapshot on the medium in `dir`, by volume id
/// and snapshot id: one pass over its volume directories, a stat per
/// snapshot file (`<volume_id>/c<copy>-k<column>.s<id>.{delta,map}`).
/// Unfinished copies' files (`*.partial`, `*.map.tmp`) are not counted. A
/// missing directory holds none.
pub(crate) fn medium_snapshot_bytes(dir: &Path) -> io::Result<BTreeMap<(String, u64), u64>> {
    let mut used = BTreeMap::new();
    visit_volume_files(dir, |volume_id, name, bytes| {
        if let Some(id) = snapshot_file_id(name) {
            *used.entry((volume_id.to_string(), id)).or_insert(0) += bytes;
        }
    })?;
    Ok(used)
}

/// Bytes written on the medium in `dir`: the disk blocks every file of its
/// volume directories takes (slices, their snapshots, copies in progress).
/// Slices are sparse, so what a volume never wrote counts nothing: this is
/// what the medium really holds, where its allocation is what slices may
/// grow to. A missing directory holds none.
pub(crate) fn medium_written_bytes(dir: &Path) -> io::Result<u64> {
    let mut written = 0u64;
    visit_volume_files(dir, |_, _, bytes| written = written.saturating_add(bytes))?;
    Ok(written)
}

/// Calls `f(volume_id, file_name, allocated_bytes)` for every file in the
/// volume directories of the medium in `dir` (one pass, a stat per file).
/// Files removed while listed are skipped; a missing directory has none.
fn visit_volume_files(dir: &Path, mut f: impl FnMut(&str, &str, u64)) -> io::Result<()> {
    let volumes = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for volume in volumes {
        let volume = volume?;
        if !volume.file_type()?.is_dir() {
            continue;
        }
        let Some(volume_id) = volume.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let entries = match fs::read_dir(volume.path()) {
            Ok(entries) => entries,
            // Removed since it was listed (its last slice was deleted).
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let file_name = entry.file_name();
            let Some(name) = file_name.to_str() else {
                continue;
            };
            let bytes = match entry.metadata() {
                Ok(m) if m.is_file() => m.blocks() * 512,
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            f(&volume_id, name, bytes);
        }
    }
    Ok(())
}

/// The snapshot id of a snapshot file name `c<copy>-k<column>.s<id>.delta`
/// (or `.map`); `None` for any other name.
fn snapshot_file_id(name: &str) -> Option<u64> {
    let rest = name
        .strip_suffix(".delta")
        .or_else(|| name.strip_suffix(".map"))?;
    let (stem, id) = rest.rsplit_once(".s")?;
    let (copy, column) = stem.strip_prefix('c')?.split_once("-k")?;
    copy.parse::<u32>().ok()?;
    column.parse::<u32>().ok()?;
    id.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_medium_s_snapshots_are_counted_per_volume_in_one_pass() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (v1, v2) = (dir.path().join("v1"), dir.path().join("v2"));
        fs::create_dir_all(&v1).expect("v1");
        fs::create_dir_all(&v2).expect("v2");
        fs::write(v1.join("c0-k0.slice"), vec![1u8; 8192]).expect("slice");
        fs::write(v1.join("c0-k0.s2.delta"), vec![7u8; 8192]).expect("delta");
        fs::write(v1.join("c1-k0.s2.delta"), vec![7u8; 4096]).expect("delta");
        fs::write(v1.join("c0-k0.s2.map"), [0u8; 56]).expect("map");
        fs::write(v2.join("c0-k3.s9.map"), [0u8; 32]).expect("map");
        fs::write(v2.join("c0-k3.s10.delta.partial"), vec![1u8; 4096]).expect("partial");
        fs::write(v2.join("c0-k3.s11.map.tmp"), [0u8; 32]).expect("tmp");
        fs::write(dir.path().join("stray.s1.map"), [0u8; 32]).expect("stray");
        let used = medium_snapshot_bytes(dir.path()).expect("usage");
        let keys: Vec<_> = used.keys().cloned().collect();
        assert_eq!(keys, vec![("v1".to_string(), 2), ("v2".to_string(), 9)]);
        // Two deltas (8 KiB + 4 KiB) and a map of one block, at least.
        assert!(used[&("v1".to_string(), 2)] >= 12288 + 512, "{used:?}");
        assert!(medium_snapshot_bytes(&dir.path().join("gone"))
            .expect("no directory: no snapshots")
            .is_empty());
    }

    #[test]
    fn a_medium_s_written_bytes_are_the_blocks_its_volume_files_take() {
        let dir = tempfile::tempdir().expect("tempdir");
        let v1 = dir.path().join("v1");
        fs::create_dir_all(&v1).expect("v1");
        // A 64 MiB slice with 1 MiB written: only the written MiB counts.
        let slice = fs::File::create(v1.join("c0-k0.slice")).expect("slice");
        slice.set_len(64 << 20).expect("sparse");
        let mut slice = fs::OpenOptions::new()
            .write(true)
            .open(v1.join("c0-k0.slice"))
            .expect("open");
        std::io::Write::write_all(&mut slice, &vec![1u8; 1 << 20]).expect("write");
        slice.sync_all().expect("sync");
        fs::write(v1.join("c0-k0.s2.delta"), vec![7u8; 8192]).expect("delta");
        // Outside the volume directories: not svs's data.
        fs::write(dir.path().join("stray"), vec![1u8; 1 << 20]).expect("stray");
        let written = medium_written_bytes(dir.path()).expect("written");
        assert!(
            ((1 << 20) + 8192..(2 << 20)).contains(&written),
            "{written}"
        );
        assert_eq!(
            medium_written_bytes(&dir.path().join("gone")).expect("no directory"),
            0
        );
    }

    #[test]
    fn only_snapshot_file_names_have_an_id() {
        assert_eq!(snapshot_file_id("c0-k1.s3.delta"), Some(3));
        assert_eq!(snapshot_file_id("c10-k2.s44.map"), Some(44));
        for other in [
            "c0-k1.slice",
            "c0-k1.s3.map.tmp",
            "c0-k1.s3.delta.partial",
            "x0-k1.s3.map",
            "c0-k1.sx.map",
            "c0.s3.map",
        ] {
            assert_eq!(snapshot_file_id(other), None, "{other}");
        }
    }
}
