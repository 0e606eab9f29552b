//! The credential file a host agent or a storage node reads at start: the
//! credential `svs node add` printed, alone in a file (surrounding blank
//! space ignored).

use std::path::Path;

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
