//! [`FileEpochStore`]: the highest epoch this node accepted for each volume,
//! kept in files so that a front the node has refused stays refused after
//! the node restarts.
//!
//! Layout under the state directory: `epochs/<volume id>`, one 24-byte file
//! per volume (magic `SVSEPOC1`, the epoch as u64 little-endian, XXH3-64 of
//! those 16 bytes), and `epochs.tmp/` for files being written. A raise
//! writes a new file in `epochs.tmp/`, fsyncs it, renames it over the
//! volume's file and fsyncs `epochs/`: a crash leaves the old file or the
//! new one, never a mix, and the raise is durable when it returns.
//!
//! A file that does not check out (wrong length, magic or checksum: the
//! disk corrupted it, or someone wrote it by hand) cannot be read as any
//! epoch, and reading it as 0 would let a stale front back in. The store
//! then refuses to open, naming the file: the operator decides (restore it,
//! or remove it knowing that every front of that volume is accepted again).

use super::names::check_name;
use crate::fsutil::{create_dir_durable, fsync_dir, remove_if_exists};
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use svs_sliceproto::EpochStore;
use xxhash_rust::xxh3::xxh3_64;

const MAGIC: &[u8; 8] = b"SVSEPOC1";
const FILE_LEN: usize = 24;

/// Durable per-volume epochs in a state directory (see the module docs for
/// the files). Read once at [`FileEpochStore::open`] and then kept in
/// memory: one process owns the directory.
#[derive(Debug)]
pub struct FileEpochStore {
    dir: PathBuf,
    tmp_dir: PathBuf,
    /// Every volume's highest epoch; held while a raise writes, so raises
    /// never overtake each other on disk.
    epochs: Mutex<HashMap<String, u64>>,
    tmp_seq: AtomicU64,
}

fn encode(epoch: u64) -> [u8; FILE_LEN] {
    let mut b = [0u8; FILE_LEN];
    b[..8].copy_from_slice(MAGIC);
    b[8..16].copy_from_slice(&epoch.to_le_bytes());
    let sum = xxh3_64(&b[..16]);
    b[16..].copy_from_slice(&sum.to_le_bytes());
    b
}

/// The epoch a file holds, or why it holds none.
fn decode(bytes: &[u8]) -> Result<u64, &'static str> {
    if bytes.len() != FILE_LEN {
        return Err("it is not 24 bytes long");
    }
    if &bytes[..8] != MAGIC {
        return Err("it does not start with SVSEPOC1");
    }
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[16..24]);
    if u64::from_le_bytes(word) != xxh3_64(&bytes[..16]) {
        return Err("its checksum does not match");
    }
    word.copy_from_slice(&bytes[8..16]);
    Ok(u64::from_le_bytes(word))
}

impl FileEpochStore {
    /// Opens (creating if needed) the epochs under `state_dir` and reads
    /// them all. Fails, naming the file, when one is damaged or is not a
    /// volume's (see the module docs). Files of raises a crash interrupted
    /// are removed: such a raise never returned, so no op relied on it.
    pub fn open(state_dir: &Path) -> io::Result<FileEpochStore> {
        let dir = state_dir.join("epochs");
        let tmp_dir = state_dir.join("epochs.tmp");
        let context = |what: &str, path: &Path, e: io::Error| {
            io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
        };
        for d in [&dir, &tmp_dir] {
            create_dir_durable(d).map_err(|e| context("epoch directory", d, e))?;
        }
        for entry in fs::read_dir(&tmp_dir).map_err(|e| context("listing", &tmp_dir, e))? {
            let entry = entry.map_err(|e| context("listing", &tmp_dir, e))?;
            remove_if_exists(&entry.path()).map_err(|e| context("removing", &entry.path(), e))?;
        }
        let mut epochs = HashMap::new();
        for entry in fs::read_dir(&dir).map_err(|e| context("listing", &dir, e))? {
            let entry = entry.map_err(|e| context("listing", &dir, e))?;
            let path = entry.path();
            let refuse = |why: &str| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "epoch file {} cannot be trusted: {why}; refusing to start rather \
                         than forget which front end owns the volume (restore the file, or \
                         remove it to accept any front end of that volume again)",
                        path.display()
                    ),
                )
            };
            let Some(volume) = entry.file_name().to_str().map(str::to_string) else {
                return Err(refuse("its name is not UTF-8, so it is no volume's"));
            };
            if check_name("volume id", &volume).is_err() {
                return Err(refuse("its name is not a volume id"));
            }
            let bytes = fs::read(&path).map_err(|e| context("reading", &path, e))?;
            let epoch = decode(&bytes).map_err(refuse)?;
            epochs.insert(volume, epoch);
        }
        Ok(FileEpochStore {
            dir,
            tmp_dir,
            epochs: Mutex::new(epochs),
            tmp_seq: AtomicU64::new(0),
        })
    }

    /// Writes `epoch` as `volume`'s file: temp file, fsync, rename, fsync
    /// of the directory.
    fn write(&self, volume: &str, epoch: u64) -> io::Result<()> {
        let tmp = self
            .tmp_dir
            .join(self.tmp_seq.fetch_add(1, Ordering::Relaxed).to_string());
        let written = (|| {
            let mut file: File = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)?;
            file.write_all(&encode(epoch))?;
            file.sync_all()?;
            fs::rename(&tmp, self.dir.join(volume))?;
            fsync_dir(&self.dir)
        })();
        if written.is_err() {
            let _ = remove_if_exists(&tmp);
        }
        written.map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "recording epoch {epoch} of volume {volume} in {}: {e}",
                    self.dir.display()
                ),
            )
        })
    }
}

impl EpochStore for FileEpochStore {
    fn highest(&self, volume: &str) -> io::Result<u64> {
        check_name("volume id", volume)?;
        let epochs = self.epochs.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(epochs.get(volume).copied().unwrap_or(0))
    }

    /// Never lowers an epoch: a raise to one not above the highest is done
    /// already.
    fn raise(&self, volume: &str, epoch: u64) -> io::Result<()> {
        check_name("volume id", volume)?;
        // Held while writing: the map changes only once the file is
        // durable, and a raise cannot be overtaken by a lower one.
        let mut epochs = self.epochs.lock().unwrap_or_else(PoisonError::into_inner);
        if epochs.get(volume).is_some_and(|&h| h >= epoch) {
            return Ok(());
        }
        self.write(volume, epoch)?;
        epochs.insert(volume.to_string(), epoch);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_round_trip_and_damage_is_named() {
        assert_eq!(decode(&encode(7)), Ok(7));
        assert_eq!(decode(&encode(u64::MAX)), Ok(u64::MAX));
        let mut flipped = encode(7);
        flipped[9] ^= 1;
        assert_eq!(decode(&flipped), Err("its checksum does not match"));
        assert_eq!(decode(&encode(7)[..20]), Err("it is not 24 bytes long"));
        let mut magic = encode(7);
        magic[0] = b'X';
        assert_eq!(decode(&magic), Err("it does not start with SVSEPOC1"));
    }

    #[test]
    fn raises_survive_reopening_and_never_lower() {
        let state = tempfile::tempdir().expect("temp dir");
        let store = FileEpochStore::open(state.path()).expect("open");
        assert_eq!(store.highest("vol-1").expect("highest"), 0);
        store.raise("vol-1", 3).expect("raise");
        store.raise("vol-1", 2).expect("lower raise is a no-op");
        store.raise("vol-2", 9).expect("raise");
        drop(store);
        let store = FileEpochStore::open(state.path()).expect("reopen");
        assert_eq!(store.highest("vol-1").expect("highest"), 3);
        assert_eq!(store.highest("vol-2").expect("highest"), 9);
        assert_eq!(
            fs::read(state.path().join("epochs/vol-1")).expect("file"),
            encode(3)
        );
        // Nothing left in the temp directory.
        assert_eq!(
            fs::read_dir(state.path().join("epochs.tmp"))
                .expect("tmp dir")
                .count(),
            0
        );
    }

    #[test]
    fn a_bad_volume_id_is_einval() {
        let state = tempfile::tempdir().expect("temp dir");
        let store = FileEpochStore::open(state.path()).expect("open");
        for bad in ["", "..", "a/b", "a\nb"] {
            assert_eq!(
                store.raise(bad, 1).expect_err(bad).kind(),
                io::ErrorKind::InvalidInput
            );
            assert_eq!(
                store.highest(bad).expect_err(bad).kind(),
                io::ErrorKind::InvalidInput
            );
        }
        assert!(!state.path().join("epochs/a").exists());
    }

    #[test]
    fn a_damaged_file_refuses_the_start_and_a_leftover_temp_file_goes() {
        let state = tempfile::tempdir().expect("temp dir");
        let store = FileEpochStore::open(state.path()).expect("open");
        store.raise("vol-1", 5).expect("raise");
        drop(store);
        fs::write(state.path().join("epochs.tmp/0"), b"half").expect("leftover");
        FileEpochStore::open(state.path()).expect("reopen with a leftover");
        assert!(!state.path().join("epochs.tmp/0").exists());

        let file = state.path().join("epochs/vol-1");
        let mut bytes = fs::read(&file).expect("read");
        bytes.truncate(10);
        fs::write(&file, &bytes).expect("tear");
        let e = FileEpochStore::open(state.path()).expect_err("torn file");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert_eq!(
            e.to_string(),
            format!(
                "epoch file {} cannot be trusted: it is not 24 bytes long; refusing to start \
                 rather than forget which front end owns the volume (restore the file, or \
                 remove it to accept any front end of that volume again)",
                file.display()
            )
        );
    }
}
