//! Local media: each medium is a directory; each slice a sparse file at
//! `<dir>/<volume_id>/c<copy>-k<column>.slice`.

use crate::copy::{copy_file, CopyError};
use crate::digest::digest_file;
use crate::fsutil::{create_dir_durable, fsync_dir, partial_path, remove_if_exists};
use crate::{CopyOptions, DataPlane, DataPlaneError, Digest, SliceKey};
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Media held as directories on this machine.
#[derive(Debug, Clone)]
pub struct LocalMedia {
    dirs: HashMap<String, PathBuf>,
}

impl LocalMedia {
    /// `media`: medium id → directory.
    pub fn new(media: impl IntoIterator<Item = (String, PathBuf)>) -> LocalMedia {
        LocalMedia {
            dirs: media.into_iter().collect(),
        }
    }

    /// Path of a slice's file on a medium (whether or not it exists).
    pub fn slice_path(&self, medium: &str, slice: &SliceKey) -> Result<PathBuf, DataPlaneError> {
        Ok(self
            .medium_dir(medium)?
            .join(&slice.volume_id)
            .join(format!("c{}-k{}.slice", slice.copy, slice.column)))
    }

    fn medium_dir(&self, medium: &str) -> Result<&Path, DataPlaneError> {
        self.dirs
            .get(medium)
            .map(PathBuf::as_path)
            .ok_or_else(|| DataPlaneError::UnknownMedium(medium.to_string()))
    }
}

/// How a slice is named in errors: `<volume_id>/c<copy>-k<column>`.
fn slice_label(slice: &SliceKey) -> String {
    format!("{}/c{}-k{}", slice.volume_id, slice.copy, slice.column)
}

/// Maps an I/O error to `DataPlaneError::Io` for `op` on the slice.
fn io_err<'a>(
    medium: &'a str,
    slice: &'a SliceKey,
    op: &'static str,
) -> impl FnOnce(io::Error) -> DataPlaneError + 'a {
    move |source| DataPlaneError::Io {
        medium: medium.to_string(),
        slice: slice_label(slice),
        op,
        source,
    }
}

/// Directory holding a slice file.
fn parent(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new("."))
}

/// Extends the open file to `size` if shorter (never truncates), then fsyncs it.
fn extend_and_sync(file: &File, size: u64) -> io::Result<()> {
    if file.metadata()?.len() < size {
        file.set_len(size)?;
    }
    file.sync_all()
}

/// Writes, fsyncs and removes a probe file in `dir`.
fn probe(dir: &Path) -> io::Result<()> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        ".svs-probe-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let path = dir.join(name);
    let written = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        f.write_all(b"svs medium probe\n")?;
        f.sync_all()
    })();
    let removed = remove_if_exists(&path);
    written?;
    removed?;
    fsync_dir(dir)
}

impl DataPlane for LocalMedia {
    fn check_medium(&self, medium: &str) -> Result<(), DataPlaneError> {
        let dir = self.medium_dir(medium)?;
        create_dir_durable(dir)
            .and_then(|()| probe(dir))
            .map_err(|source| DataPlaneError::MediumUnusable {
                medium: medium.to_string(),
                dir: dir.to_path_buf(),
                source,
            })
    }

    fn create_slice(
        &self,
        medium: &str,
        slice: &SliceKey,
        size: u64,
    ) -> Result<(), DataPlaneError> {
        let path = self.slice_path(medium, slice)?;
        let dir = parent(&path);
        create_dir_durable(dir).map_err(io_err(medium, slice, "mkdir"))?;
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err(medium, slice, "create"))?;
        extend_and_sync(&file, size).map_err(io_err(medium, slice, "create"))?;
        fsync_dir(dir).map_err(io_err(medium, slice, "fsync"))
    }

    fn grow_slice(&self, medium: &str, slice: &SliceKey, size: u64) -> Result<(), DataPlaneError> {
        let path = self.slice_path(medium, slice)?;
        let file = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(io_err(medium, slice, "grow"))?;
        extend_and_sync(&file, size).map_err(io_err(medium, slice, "grow"))
    }

    fn delete_slice(&self, medium: &str, slice: &SliceKey) -> Result<(), DataPlaneError> {
        let path = self.slice_path(medium, slice)?;
        let dir = parent(&path);
        remove_if_exists(&path).map_err(io_err(medium, slice, "delete"))?;
        remove_if_exists(&partial_path(&path)).map_err(io_err(medium, slice, "delete"))?;
        match fsync_dir(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            r => r.map_err(io_err(medium, slice, "fsync"))?,
        }
        // Fails while other slices of the volume remain: that is fine.
        if fs::remove_dir(dir).is_ok() {
            fsync_dir(parent(dir)).map_err(io_err(medium, slice, "fsync"))?;
        }
        Ok(())
    }

    fn copy_slice(
        &self,
        from_medium: &str,
        to_medium: &str,
        slice: &SliceKey,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Digest, DataPlaneError> {
        let from = self.slice_path(from_medium, slice)?;
        let to = self.slice_path(to_medium, slice)?;
        copy_file(&from, &to, options, progress).map_err(|e| match e {
            CopyError::Source(op, source) => io_err(from_medium, slice, op)(source),
            CopyError::Target(op, source) => io_err(to_medium, slice, op)(source),
            CopyError::Cancelled => DataPlaneError::Cancelled,
            CopyError::VerifyFailed => DataPlaneError::VerifyFailed {
                slice: slice_label(slice),
                from: from_medium.to_string(),
                to: to_medium.to_string(),
            },
        })
    }

    fn digest_slice(&self, medium: &str, slice: &SliceKey) -> Result<Digest, DataPlaneError> {
        let path = self.slice_path(medium, slice)?;
        digest_file(&path).map_err(io_err(medium, slice, "digest"))
    }

    fn slice_exists(&self, medium: &str, slice: &SliceKey) -> Result<bool, DataPlaneError> {
        let path = self.slice_path(medium, slice)?;
        match fs::metadata(&path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_err(medium, slice, "stat")(e)),
        }
    }

    fn slice_len(&self, medium: &str, slice: &SliceKey) -> Result<u64, DataPlaneError> {
        let path = self.slice_path(medium, slice)?;
        fs::metadata(&path)
            .map(|m| m.len())
            .map_err(io_err(medium, slice, "stat"))
    }
}
