//! Validated input types, built before any domain code runs.

use crate::model::Gib;
use std::path::{Component, Path, PathBuf};
use thiserror::Error;

/// A volume, snapshot, policy, node, zone or medium name: 1–63 characters
/// of `[A-Za-z0-9._-]`, not only dots (`.` and `..` are path segments that
/// clients normalise away from URLs) and not starting with `-` (read as an
/// option by shell tools).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct ResourceName(String);

impl ResourceName {
    pub fn parse(kind: &str, value: &str) -> Result<ResourceName, String> {
        let ok_len = (1..=63).contains(&value.len());
        let ok_chars = value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !(ok_len && ok_chars) {
            return Err(format!(
                "{kind} name must be 1 to 63 characters of letters, digits, '.', '_' or '-'"
            ));
        }
        if value.bytes().all(|b| b == b'.') {
            return Err(format!("{kind} name must not be only dots"));
        }
        if value.starts_with('-') {
            return Err(format!("{kind} name must not start with '-'"));
        }
        Ok(ResourceName(value.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// A medium's directory as the API takes it: absolute and without `..`
/// (so that one spelling names one place), in its plain form (no `.`
/// components, no trailing `/`).
pub fn plain_directory(directory: &Path) -> Result<PathBuf, String> {
    let plain = directory
        .components()
        .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if !directory.is_absolute() || !plain {
        return Err(format!(
            "media must be an absolute directory path without '..' (got '{}')",
            directory.display()
        ));
    }
    Ok(directory.components().collect())
}

/// Characters that change how text is shown rather than being shown:
/// controls (C0, DEL, C1: ESC starts terminal escape sequences) and the
/// invisible and bidirectional formatting characters (U+202E turns the
/// rest of a line around). Such text looks like something it is not.
pub fn is_hidden_character(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{061C}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
        )
}

pub const HIDDEN_CHARACTERS_IN_EMAIL: &str =
    "the e-mail address must not contain control or bidirectional formatting characters";

/// An e-mail address as svs takes it for a new user: `local@domain`, both
/// parts non-empty, no whitespace and no hidden characters (see
/// `is_hidden_character`). Whether it exists is not svs's business.
pub fn check_email(email: &str) -> Result<(), String> {
    if email.chars().any(is_hidden_character) {
        return Err(HIDDEN_CHARACTERS_IN_EMAIL.into());
    }
    let is_address = email
        .split_once('@')
        .is_some_and(|(local, domain)| !local.is_empty() && !domain.is_empty());
    if !is_address || email.chars().any(char::is_whitespace) {
        return Err(format!("'{email}' is not an e-mail address"));
    }
    Ok(())
}

/// Why a requested new size is refused (resize rule 1).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SizeError {
    #[error("size must be greater than the current size of {current} GiB")]
    NotLarger { current: Gib },
    #[error("size must be at most 10 times the current size ({max} GiB)")]
    TooLarge { max: Gib },
}

/// New size must be strictly greater than the current size and at most 10× it.
pub fn validate_new_size(current: Gib, new: Gib) -> Result<(), SizeError> {
    if new <= current {
        return Err(SizeError::NotLarger { current });
    }
    let max = current.saturating_mul(10);
    if new > max {
        return Err(SizeError::TooLarge { max });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_medium_directory_is_absolute_without_dot_dot_and_taken_in_its_plain_form() {
        for (given, plain) in [
            ("/srv/disk1", "/srv/disk1"),
            ("/srv/./disk1/", "/srv/disk1"),
            ("//srv//disk1", "/srv/disk1"),
        ] {
            assert_eq!(plain_directory(Path::new(given)), Ok(PathBuf::from(plain)));
        }
        for bad in ["disk1", "./disk1", "/srv/../etc", ""] {
            let err = plain_directory(Path::new(bad)).unwrap_err();
            assert!(
                err.starts_with("media must be an absolute directory path without '..'"),
                "{err}"
            );
        }
    }

    #[test]
    fn names_accept_the_allowed_alphabet() {
        assert!(ResourceName::parse("volume", "db-01.data_x").is_ok());
        assert!(ResourceName::parse("volume", &"a".repeat(63)).is_ok());
    }

    #[test]
    fn names_refuse_empty_long_and_odd_characters() {
        assert!(ResourceName::parse("volume", "").is_err());
        assert!(ResourceName::parse("volume", &"a".repeat(64)).is_err());
        assert!(ResourceName::parse("volume", "a b").is_err());
        assert!(ResourceName::parse("volume", "a/b").is_err());
        assert!(ResourceName::parse("volume", "é").is_err());
    }

    #[test]
    fn names_refuse_only_dots_and_a_leading_dash() {
        for name in [".", "..", "...", &".".repeat(63)] {
            assert_eq!(
                ResourceName::parse("volume", name),
                Err("volume name must not be only dots".into()),
                "{name}"
            );
        }
        for name in ["-", "-rf", "--help", "-.-"] {
            assert_eq!(
                ResourceName::parse("snapshot", name),
                Err("snapshot name must not start with '-'".into()),
                "{name}"
            );
        }
        for name in [".hidden", "a.", "a..b", "a-", "a--b", "_x", "x.-"] {
            assert!(ResourceName::parse("volume", name).is_ok(), "{name}");
        }
    }

    #[test]
    fn e_mails_refuse_hidden_characters() {
        assert_eq!(check_email("a@b.example"), Ok(()));
        assert_eq!(check_email("élodie@exemple.fr"), Ok(()));
        for email in [
            "eve\u{1b}[31m@x.example",
            "eve@x\u{202e}elpmaxe",
            "eve\u{200b}@x.example",
            "eve\u{7f}@x.example",
            "eve\u{85}@x.example",
            "eve\u{2067}@x.example",
            "\u{feff}eve@x.example",
            "eve\u{ad}@x.example",
            "eve@x.example\u{0}",
        ] {
            assert_eq!(
                check_email(email),
                Err(HIDDEN_CHARACTERS_IN_EMAIL.into()),
                "{email:?}"
            );
        }
        for email in ["a b@c", " a@b", "@b", "a@", "ab"] {
            assert_eq!(
                check_email(email),
                Err(format!("'{email}' is not an e-mail address"))
            );
        }
    }

    #[test]
    fn resize_must_grow() {
        assert_eq!(
            validate_new_size(10, 10),
            Err(SizeError::NotLarger { current: 10 })
        );
        assert_eq!(
            validate_new_size(10, 5),
            Err(SizeError::NotLarger { current: 10 })
        );
    }

    #[test]
    fn resize_beyond_ten_times_is_rejected() {
        assert_eq!(
            validate_new_size(10, 101),
            Err(SizeError::TooLarge { max: 100 })
        );
        assert_eq!(validate_new_size(10, 100), Ok(()));
        assert_eq!(validate_new_size(10, 11), Ok(()));
    }
}
