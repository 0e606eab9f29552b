//! Files holding secrets: the credential file a host agent or a storage
//! node reads at start (the credential `svs node add` printed, alone in a
//! file, surrounding blank space ignored), and the owner-only files keys
//! and certificates are written to.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Writes an owner-only (0600) file whole and durably: a temporary file,
/// synced, renamed over the old one, then the directory synced; a crash
/// never leaves half a key, nor a key that disappears.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => std::fs::File::open(dir)?.sync_all(),
        _ => std::fs::File::open(".")?.sync_all(),
    }
}

/// The credential in `path`, or why it cannot be used (a message for the
/// operator, naming the file).
pub fn read_credential_file(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the credential file {}: {e}", path.display()))?;
    let credential = text.trim().to_string();
    if credential.is_empty() {
        return Err(format!("the credential file {} is empty", path.display()));
    }
    Ok(credential)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_file_is_owner_only_and_replaced_whole() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("key.pem");
        write_private(&path, b"first").expect("written");
        write_private(&path, b"second").expect("replaced");
        assert_eq!(std::fs::read(&path).expect("read"), b"second");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!path.with_extension("tmp").exists());
    }

    #[test]
    fn a_credential_is_read_trimmed_and_an_empty_or_missing_file_is_named() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("credential");
        std::fs::write(&path, "  svs-node-abc \n").expect("write");
        assert_eq!(read_credential_file(&path), Ok("svs-node-abc".to_string()));
        std::fs::write(&path, "\n").expect("write");
        assert_eq!(
            read_credential_file(&path),
            Err(format!("the credential file {} is empty", path.display()))
        );
        let missing = dir.path().join("missing");
        let e = read_credential_file(&missing).expect_err("missing");
        assert!(
            e.starts_with(&format!(
                "cannot read the credential file {}: ",
                missing.display()
            )),
            "{e}"
        );
    }
}
