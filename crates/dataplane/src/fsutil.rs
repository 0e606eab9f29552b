//! Small filesystem helpers shared by the local data plane.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

/// Path of the partial (in-progress copy) file for a slice file.
pub(crate) fn partial_path(path: &Path) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(".partial");
    PathBuf::from(name)
}

/// Makes a directory's entries (creations, renames, removals) durable.
pub(crate) fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Creates `dir` and any missing ancestors, fsyncing the parent of each
/// directory it creates so the new entries survive a crash.
pub(crate) fn create_dir_durable(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent {
        create_dir_durable(parent)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => {}
        // Lost a race with another creator: fine as long as it is a directory.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => return Ok(()),
        Err(e) => return Err(e),
    }
    fsync_dir(parent.unwrap_or(Path::new(".")))
}

/// `remove_file` that treats a missing file as success.
pub(crate) fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Removes a file when dropped unless disarmed: cleans up partial copies on
/// errors, cancellation and panics alike.
pub(crate) struct RemoveOnDrop {
    path: PathBuf,
    armed: bool,
}

impl RemoveOnDrop {
    pub(crate) fn new(path: impl Into<PathBuf>) -> Self {
        RemoveOnDrop {
            path: path.into(),
            armed: true,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if self.armed {
            if let Err(e) = remove_if_exists(&self.path) {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot remove partial file");
            }
        }
    }
}

/// The name of a slice file without its `.slice` suffix (what its
/// snapshot and partial files are named after); `None` for another name.
pub(crate) fn slice_stem(path: &Path) -> Option<&str> {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".slice"))
}
