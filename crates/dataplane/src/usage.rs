//! What snapshots hold on a medium, measured from their files' allocated
//! blocks (no map is replayed, so it is cheap enough to poll).

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Allocated bytes of each snapshot of the slice at `slice_path`: its delta
/// and its map, by snapshot id. A slice without snapshots (or without a
/// directory) has none.
pub(crate) fn snapshot_bytes(slice_path: &Path) -> io::Result<BTreeMap<u64, u64>> {
    let mut used = BTreeMap::new();
    let (Some(dir), Some(stem)) = (
        slice_path.parent(),
        slice_path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".slice")),
    ) else {
        return Ok(used);
    };
    let prefix = format!("{stem}.s");
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(used),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let Some((id, suffix)) = name
            .strip_prefix(&prefix)
            .and_then(|rest| rest.split_once('.'))
        else {
            continue;
        };
        let Ok(id) = id.parse::<u64>() else { continue };
        if suffix != "delta" && suffix != "map" {
            continue;
        }
        let bytes = match entry.metadata() {
            Ok(m) => m.blocks() * 512,
            // Deleted since it was listed.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        *used.entry(id).or_insert(0) += bytes;
    }
    Ok(used)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn counts_each_snapshot_s_files_and_nothing_else() {
        let dir = tempfile::tempdir().expect("tempdir");
        let slice = dir.path().join("c0-k1.slice");
        fs::write(&slice, vec![1u8; 8192]).expect("slice");
        let mut delta = fs::File::create(dir.path().join("c0-k1.s3.delta")).expect("delta");
        delta.write_all(&[7u8; 65536]).expect("write");
        delta.sync_all().expect("sync");
        fs::write(dir.path().join("c0-k1.s3.map"), [0u8; 56]).expect("map");
        fs::write(dir.path().join("c1-k1.s3.delta"), [9u8; 4096]).expect("other copy");
        fs::write(dir.path().join("c0-k1.s4.map.tmp"), [0u8; 32]).expect("tmp");
        let used = snapshot_bytes(&slice).expect("usage");
        assert_eq!(used.keys().copied().collect::<Vec<_>>(), vec![3]);
        assert!(used[&3] >= 65536, "{used:?}");
        let missing = snapshot_bytes(&dir.path().join("gone").join("c0-k0.slice"));
        assert!(missing.expect("no directory: no snapshots").is_empty());
    }
}
