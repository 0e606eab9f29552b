//! Reading fields of a JSON request object with clear 400 messages.

use super::ApiError;
use axum::http::StatusCode;
use serde_json::{Map, Value};
use svs_wire::fields::whole_number;

pub type Body = Map<String, Value>;

pub type ParseResult<T> = Result<T, ApiError>;

pub fn bad(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, message)
}

// Optional fields are absent or of their type: `null` is refused like any
// other wrong type (the reference's fields are not nullable, and a client
// sending null most likely meant something). Required fields that are null
// are "required".

/// An optional string field.
pub fn opt_str<'a>(body: &'a Body, key: &str) -> ParseResult<Option<&'a str>> {
    match body.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(bad(format!("{key} must be a string"))),
    }
}

/// A required, non-empty string field.
pub fn req_str<'a>(body: &'a Body, key: &str) -> ParseResult<&'a str> {
    match body.get(key) {
        None | Some(Value::Null) => Err(bad(format!("{key} is required"))),
        _ => match opt_str(body, key)? {
            Some(s) if !s.is_empty() => Ok(s),
            _ => Err(bad(format!("{key} is required"))),
        },
    }
}

pub fn opt_bool(body: &Body, key: &str) -> ParseResult<Option<bool>> {
    match body.get(key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(bad(format!("{key} must be true or false"))),
    }
}

/// An optional whole number in `min..=max` (20.0 is taken as 20).
pub fn opt_uint(body: &Body, key: &str, min: u64, max: u64) -> ParseResult<Option<u64>> {
    body.get(key)
        .map(|v| whole_number(v, min, max).map_err(|m| bad(format!("{key} {m}"))))
        .transpose()
}

pub fn req_uint(body: &Body, key: &str, min: u64, max: u64) -> ParseResult<u64> {
    match body.get(key) {
        None | Some(Value::Null) => Err(bad(format!("{key} is required"))),
        _ => opt_uint(body, key, min, max)?.ok_or_else(|| bad(format!("{key} is required"))),
    }
}

/// A required size in whole GiB, without an upper bound of its own (the
/// caller checks the bounds that apply).
pub fn req_gib(body: &Body, key: &str) -> ParseResult<u64> {
    match body.get(key) {
        None | Some(Value::Null) => Err(bad(format!("{key} is required"))),
        Some(Value::Number(_)) => opt_uint(body, key, 0, u64::MAX)
            .ok()
            .flatten()
            .ok_or_else(|| bad(format!("{key} must be a whole number of GiB"))),
        Some(_) => Err(bad(format!("{key} must be a number"))),
    }
}

/// A request body from a JSON object, for tests.
#[cfg(test)]
pub(super) fn body(v: Value) -> Body {
    match v {
        Value::Object(m) => m,
        _ => unreachable!("test bodies are objects"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_are_checked_for_type_range_and_wholeness() {
        let b = body(json!({"a": 5, "b": 2.5, "c": "5", "d": -1, "e": 7.0, "f": null}));
        assert_eq!(opt_uint(&b, "a", 1, 10).unwrap(), Some(5));
        assert!(opt_uint(&b, "b", 1, 10).is_err());
        assert!(opt_uint(&b, "c", 1, 10).is_err());
        assert!(opt_uint(&b, "d", 0, 10).is_err());
        assert_eq!(opt_uint(&b, "e", 1, 10).unwrap(), Some(7));
        assert_eq!(
            opt_uint(&b, "f", 1, 10).unwrap_err().message,
            "f must be a number"
        );
        assert_eq!(opt_uint(&b, "g", 1, 10).unwrap(), None);
        assert_eq!(
            req_uint(&b, "f", 1, 10).unwrap_err().message,
            "f is required"
        );
        assert!(opt_uint(&b, "a", 6, 10).is_err());
        assert!(req_uint(&b, "zz", 0, 1).is_err());
    }

    #[test]
    fn strings_and_bools_are_type_checked() {
        let b = body(json!({"s": "x", "n": 1, "t": true, "e": "", "z": null}));
        assert_eq!(opt_str(&b, "z").unwrap_err().message, "z must be a string");
        assert_eq!(req_str(&b, "z").unwrap_err().message, "z is required");
        assert_eq!(
            opt_bool(&b, "z").unwrap_err().message,
            "z must be true or false"
        );
        assert_eq!(opt_str(&b, "s").unwrap(), Some("x"));
        assert!(opt_str(&b, "n").is_err());
        assert!(req_str(&b, "e").is_err());
        assert_eq!(opt_bool(&b, "t").unwrap(), Some(true));
        assert!(opt_bool(&b, "s").is_err());
    }
}
