//! Which volume ids and medium names a storage node takes: those the local
//! data plane can hold as one directory entry (a volume's directory on a
//! medium, a volume's epoch file), nothing that walks elsewhere.

use std::io;

/// Longest name a directory entry may have (Linux `NAME_MAX`; the slice
/// protocol's names are no longer either).
pub(crate) const MAX_NAME_BYTES: usize = 255;

/// `Ok` when `name` is one plain file-name component: not empty, at most
/// [`MAX_NAME_BYTES`] bytes, not `.` or `..`, without `/` and without
/// control characters (NUL included). Else EINVAL (`InvalidInput`) saying
/// why, with `what` ("volume id", "medium name") in front.
pub(crate) fn check_name(what: &str, name: &str) -> io::Result<()> {
    let why = if name.is_empty() {
        "is empty"
    } else if name.len() > MAX_NAME_BYTES {
        "is over 255 bytes"
    } else if name == "." || name == ".." {
        "is a path segment ('.' or '..')"
    } else if name.contains('/') {
        "contains '/'"
    } else if name.chars().any(char::is_control) {
        "contains a control character"
    } else {
        return Ok(());
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what} {name:?} {why}: not a plain file name"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_pass_and_paths_controls_and_long_names_do_not() {
        for ok in [
            "3f2a7c1e-0d4b-4c2a-9f6e-1a2b3c4d5e6f",
            "vol-1",
            "m.1_a",
            ".hidden",
            "...",
            "é",
            &"a".repeat(255),
        ] {
            assert!(check_name("volume id", ok).is_ok(), "{ok:?}");
        }
        for (bad, why) in [
            ("", "is empty"),
            (".", "is a path segment ('.' or '..')"),
            ("..", "is a path segment ('.' or '..')"),
            ("a/b", "contains '/'"),
            ("/", "contains '/'"),
            ("a\0b", "contains a control character"),
            ("a\nb", "contains a control character"),
            ("a\u{1b}[31m", "contains a control character"),
        ] {
            let e = check_name("volume id", bad).expect_err(bad);
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            assert_eq!(
                e.to_string(),
                format!("volume id {bad:?} {why}: not a plain file name")
            );
        }
        let long = "a".repeat(256);
        assert_eq!(
            check_name("medium name", &long)
                .expect_err("long")
                .to_string(),
            format!("medium name {long:?} is over 255 bytes: not a plain file name")
        );
    }
}
