//! Validated input types, built before any domain code runs.

use crate::model::Gib;
use thiserror::Error;

/// A volume or policy name: 1–63 characters of `[A-Za-z0-9._-]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceName(String);

impl ResourceName {
    pub fn parse(kind: &str, value: &str) -> Result<ResourceName, String> {
        let ok_len = (1..=63).contains(&value.len());
        let ok_chars = value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if ok_len && ok_chars {
            Ok(ResourceName(value.to_string()))
        } else {
            Err(format!(
                "{kind} name must be 1 to 63 characters of letters, digits, '.', '_' or '-'"
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
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
