//! The health probe of one slice: are its file and its snapshots' files on
//! their medium and readable? A recovery asks before it plans, so a copy
//! whose disk was pulled (no I/O has touched it since) is known lost then,
//! not at the next health-check poll.
//!
//! The probe reads one byte of each file: an open file handle would keep a
//! file readable after its directory was removed, a fresh open does not.

use crate::fsutil::slice_stem;
use crate::snapshot::{delta_name, map_name};
use crate::{DataPlaneError, LocalMedia, SliceKey};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Opens the file and reads its first byte (none when it is empty).
fn readable(path: &Path) -> io::Result<()> {
    let file = File::open(path)?;
    let mut byte = [0u8; 1];
    file.read_at(&mut byte, 0)?;
    Ok(())
}

impl LocalMedia {
    /// See [`crate::DataPlane::probe_slice`]. Every file the store says is
    /// there must be: one that is missing from a medium that still reads
    /// reports this copy lost; one unreadable, or missing with its medium's
    /// directory, reports the medium failed.
    pub(crate) fn probe(
        &self,
        medium: &str,
        slice: &SliceKey,
        snapshots: &[u64],
    ) -> Result<(), DataPlaneError> {
        let path = self.slice_path(medium, slice)?;
        let stem = slice_stem(&path).unwrap_or_default().to_string();
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut files = vec![path.clone()];
        for id in snapshots {
            files.push(dir.join(map_name(&stem, *id)));
            files.push(dir.join(delta_name(&stem, *id)));
        }
        for file in files {
            if let Err(source) = readable(&file) {
                // Interrupted: nothing learnt; the caller may try again.
                if source.kind() != io::ErrorKind::Interrupted {
                    self.saw_io_error(medium, slice, &source);
                }
                return Err(DataPlaneError::Io {
                    medium: medium.to_string(),
                    slice: format!(
                        "{}/{}",
                        slice.volume_id,
                        file.file_name()
                            .and_then(|n| n.to_str())
                            .unwrap_or_default()
                    ),
                    op: "probe",
                    source,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DataPlane, VolumeLayout};
    use std::sync::{Arc, Mutex};

    fn key() -> SliceKey {
        SliceKey {
            volume_id: "v1".into(),
            copy: 0,
            column: 0,
        }
    }

    /// What the listener heard: (medium, copy, whether the medium failed).
    type Heard = Arc<Mutex<Vec<(String, u32, bool)>>>;

    /// Media m0, m1 with one mirrored 1 MiB volume, and what the listener heard.
    fn setup() -> (tempfile::TempDir, LocalMedia, Heard) {
        let dir = tempfile::tempdir().expect("temp dir");
        let media = LocalMedia::new(["m0", "m1"].map(|m| (m.to_string(), dir.path().join(m))));
        for m in ["m0", "m1"] {
            media.check_medium(m).expect("medium");
        }
        for (copy, m) in ["m0", "m1"].into_iter().enumerate() {
            let key = SliceKey {
                copy: copy as u32,
                ..key()
            };
            media.create_slice(m, &key, 1 << 20).expect("slice");
        }
        let heard = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&heard);
        media.on_copy_failure(Arc::new(
            move |f: &crate::CopyFailure, record: &crate::LossRecord| {
                sink.lock()
                    .expect("lock")
                    .push((f.medium.clone(), f.slice.copy, f.medium_failed));
                record.recorded();
            },
        ));
        (dir, media, heard)
    }

    #[test]
    fn a_slice_whose_medium_directory_is_gone_fails_the_probe_and_reports_it_once() {
        let (dir, media, heard) = setup();
        media.probe("m0", &key(), &[]).expect("healthy");
        std::fs::remove_dir_all(dir.path().join("m0")).expect("pulled");
        assert!(media.probe("m0", &key(), &[]).is_err());
        assert!(media.probe("m0", &key(), &[]).is_err());
        assert_eq!(*heard.lock().expect("lock"), [("m0".into(), 0, true)]);
        assert_eq!(media.failed_media(), ["m0"]);
        assert_eq!(media.failed_copies(), []);
    }

    #[test]
    fn a_read_after_the_medium_directory_went_away_reports_it_and_reads_the_other_copy() {
        let (dir, media, heard) = setup();
        let layout = VolumeLayout {
            volume_id: "v1".into(),
            size: 1 << 20,
            media: vec![vec!["m0".into()], vec!["m1".into()]],
            epoch: 0,
        };
        let io = media.open_volume(&layout).expect("open");
        io.write(0, &[7u8; 4096], true).expect("write");
        std::fs::remove_dir_all(dir.path().join("m0")).expect("pulled");
        // The open file still answers; the read's link check does not.
        std::thread::sleep(std::time::Duration::from_millis(120));
        let mut buf = [0u8; 4096];
        io.read(0, &mut buf).expect("read from copy 1");
        assert_eq!(buf, [7u8; 4096]);
        assert_eq!(*heard.lock().expect("lock"), [("m0".into(), 0, true)]);
        assert_eq!(io.lost_slices(), [(0, 0)]);
    }

    #[test]
    fn a_movement_whose_source_medium_is_gone_reports_it() {
        let (dir, media, heard) = setup();
        std::fs::remove_dir_all(dir.path().join("m0")).expect("pulled");
        let copied = media.copy_slice(
            "m0",
            "m1",
            &key(),
            &crate::CopyOptions::default(),
            &mut |_, _| {},
        );
        assert!(copied.is_err());
        assert_eq!(*heard.lock().expect("lock"), [("m0".into(), 0, true)]);
    }

    #[test]
    fn a_missing_snapshot_file_fails_the_probe() {
        let (dir, media, heard) = setup();
        let layout = VolumeLayout {
            volume_id: "v1".into(),
            size: 1 << 20,
            media: vec![vec!["m0".into()], vec!["m1".into()]],
            epoch: 0,
        };
        let io = media.open_volume(&layout).expect("open");
        io.snapshot(7).expect("snapshot");
        media.probe("m0", &key(), &[7]).expect("healthy");
        std::fs::remove_file(dir.path().join("m0/v1/c0-k0.s7.delta")).expect("removed");
        let e = media.probe("m0", &key(), &[7]).expect_err("delta gone");
        assert!(e.to_string().contains("c0-k0.s7.delta"), "{e}");
        // The medium still reads: that copy alone is lost, once.
        assert!(media.probe("m0", &key(), &[7]).is_err());
        assert_eq!(*heard.lock().expect("lock"), [("m0".into(), 0, false)]);
        assert_eq!(media.failed_media(), Vec::<String>::new());
        assert_eq!(media.failed_copies(), [("m0".to_string(), key())]);
        // Deleted there (a rebuild put it elsewhere), it is lost no more.
        media.delete_slice("m0", &key()).expect("deleted");
        assert_eq!(media.failed_copies(), []);
    }

    #[test]
    fn a_missing_slice_file_on_a_medium_that_reads_loses_only_that_copy() {
        let (dir, media, heard) = setup();
        let other = SliceKey {
            volume_id: "v2".into(),
            ..key()
        };
        media.create_slice("m0", &other, 1 << 20).expect("slice");
        std::fs::remove_file(dir.path().join("m0/v1/c0-k0.slice")).expect("removed");
        assert!(media.probe("m0", &key(), &[]).is_err());
        media
            .probe("m0", &other, &[])
            .expect("the other volume's copy");
        assert_eq!(*heard.lock().expect("lock"), [("m0".into(), 0, false)]);
        assert_eq!(media.failed_media(), Vec::<String>::new());
        assert_eq!(media.failed_copies(), [("m0".to_string(), key())]);
    }

    #[test]
    fn an_unreadable_file_fails_the_medium() {
        let (dir, media, heard) = setup();
        // A directory where the slice file should be: EISDIR on read.
        let path = dir.path().join("m0/v1/c0-k0.slice");
        std::fs::remove_file(&path).expect("removed");
        std::fs::create_dir(&path).expect("dir in its place");
        assert!(media.probe("m0", &key(), &[]).is_err());
        assert_eq!(*heard.lock().expect("lock"), [("m0".into(), 0, true)]);
        assert_eq!(media.failed_media(), ["m0"]);
    }
}
