//! The file `svs node add --credential-file` writes a node's agent
//! credential to. It is reserved before the credential is issued (issuing
//! revokes the node's previous credential, so a file that cannot be
//! written must be found out first) and is owner-only (0600) from the
//! moment it exists.

use super::error::{ClientError, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A credential file about to be written: either the file itself, created
/// new, or (with `force`) a temporary file beside it that replaces it.
#[derive(Debug)]
pub struct CredentialFile {
    path: PathBuf,
    /// Where the bytes go first: `path` itself, or the temporary file.
    written: PathBuf,
    file: Option<File>,
}

impl CredentialFile {
    /// Creates the file (0600). An existing file is refused unless `force`,
    /// which replaces it only once the credential is written.
    pub fn reserve(path: &Path, force: bool) -> Result<CredentialFile> {
        let io_err = |source| ClientError::CredentialFile {
            path: path.to_path_buf(),
            source,
        };
        let written = if force {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .ok_or_else(|| ClientError::Input(format!("{} is not a file", path.display())))?;
            path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
        } else {
            path.to_path_buf()
        };
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&written)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists && !force {
                    ClientError::Input(format!(
                        "{} exists; pass --force to replace it",
                        path.display()
                    ))
                } else {
                    io_err(e)
                }
            })?;
        Ok(CredentialFile {
            path: path.to_path_buf(),
            written,
            file: Some(file),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the credential (one line), syncs it and puts it in place.
    pub fn write(mut self, credential: &str) -> Result<()> {
        let io_err = |source| ClientError::CredentialFile {
            path: self.path.clone(),
            source,
        };
        let Some(mut file) = self.file.take() else {
            return Ok(());
        };
        let outcome = file
            .write_all(format!("{credential}\n").as_bytes())
            .and_then(|()| file.sync_all())
            .and_then(|()| {
                if self.written == self.path {
                    Ok(())
                } else {
                    std::fs::rename(&self.written, &self.path)
                }
            });
        match outcome {
            Ok(()) => {
                // Written: nothing for Drop to clean up.
                self.written = PathBuf::new();
                Ok(())
            }
            Err(e) => Err(io_err(e)),
        }
    }
}

impl Drop for CredentialFile {
    /// A credential file that was reserved but never written (the server
    /// refused, or the write failed) is removed: no empty file is left.
    fn drop(&mut self) {
        if !self.written.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.written);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().mode() & 0o777
    }

    #[test]
    fn a_new_file_is_owner_only_and_holds_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.credential");
        let file = CredentialFile::reserve(&path, false).unwrap();
        assert_eq!(mode(&path), 0o600);
        file.write("svsnode.0123456789abcdef.secret").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "svsnode.0123456789abcdef.secret\n"
        );
        assert_eq!(mode(&path), 0o600);
    }

    #[test]
    fn an_existing_file_is_kept_unless_forced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.credential");
        std::fs::write(&path, "old\n").unwrap();
        let err = CredentialFile::reserve(&path, false).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{} exists; pass --force to replace it", path.display())
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");

        // Forced: the old file stays until the new credential replaces it.
        let file = CredentialFile::reserve(&path, true).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
        file.write("new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file left"
        );
    }

    #[test]
    fn a_file_never_written_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.credential");
        drop(CredentialFile::reserve(&path, false).unwrap());
        assert!(!path.exists());
        std::fs::write(&path, "old\n").unwrap();
        drop(CredentialFile::reserve(&path, true).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope/agent.credential");
        let err = CredentialFile::reserve(&path, false).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("credential file {}: ", path.display())),
            "{err}"
        );
    }
}
