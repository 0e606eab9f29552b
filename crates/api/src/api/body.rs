//! Typed request bodies: a JSON object read into the request struct that
//! also documents it (`Deserialize` + `ToSchema`), with the API's 400
//! messages. Fields are read in the struct's order (unknown ones first, so
//! a struct that denies them refuses before reading any field), so the
//! first bad field answers as the hand-written parsers did:
//!
//! - absent required field, or `null`, or `""` for a required string:
//!   `{key} is required`;
//! - a string field of another type (`null` for an optional one):
//!   `{key} must be a string`; a boolean: `{key} must be true or false`;
//! - a number: `{key} must be a number`, or `{key} must be a whole number
//!   from {min} to {max}` (20.0 is taken as 20); `whole` and
//!   `opt_whole` give other bounds;
//! - an unknown field, with `deny_unknown_fields`: `unknown field '{key}'
//!   (accepted: ...)`.
//!
//! A field that may be left out is an `Option` (absent: `None`), not a
//! `#[serde(default)]` of another type: an absent field is read in its
//! turn, and only an `Option` takes it.
//!
//! A `deserialize_with` function's error (`svs_wire::fields`) may start
//! with `FIELD`, which becomes the field's name.

use super::parse::{bad, Body, ParseResult};
use super::requests::FromBody;
use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use serde_json::Value;
use std::fmt;
use svs_wire::fields::{whole_number, FIELD};

/// `body` read into `T`.
pub fn typed<T: DeserializeOwned>(body: &Body) -> ParseResult<T> {
    T::deserialize(Object(body)).map_err(|e| bad(e.0))
}

/// A request struct read by [`typed`]: `Parsed<T>` takes it as it is.
pub trait Typed: DeserializeOwned {}

impl<T: Typed> FromBody for T {
    fn from_body(body: &Body) -> ParseResult<T> {
        typed(body)
    }
}

/// A refused body: the message of its 400.
#[derive(Debug)]
pub struct Refused(String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

impl de::Error for Refused {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Refused(msg.to_string())
    }

    fn missing_field(field: &'static str) -> Self {
        Refused(format!("{field} is required"))
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        Refused(format!(
            "unknown field '{field}' (accepted: {})",
            expected.join(", ")
        ))
    }
}

/// The body as a struct's fields.
struct Object<'a>(&'a Body);

impl<'de> de::Deserializer<'de> for Object<'de> {
    type Error = Refused;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        let entries: Vec<_> = self.0.iter().map(|(k, v)| (k.as_str(), Some(v))).collect();
        visitor.visit_map(Entries::new(entries))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Refused> {
        let mut entries: Vec<_> = self
            .0
            .iter()
            .filter(|(k, _)| !fields.contains(&k.as_str()))
            .map(|(k, v)| (k.as_str(), Some(v)))
            .collect();
        entries.extend(fields.iter().map(|f| (*f, self.0.get(*f))));
        visitor.visit_map(Entries::new(entries))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

struct Entries<'de> {
    entries: std::vec::IntoIter<(&'de str, Option<&'de Value>)>,
    value: Option<(&'de str, Option<&'de Value>)>,
}

impl<'de> Entries<'de> {
    fn new(entries: Vec<(&'de str, Option<&'de Value>)>) -> Self {
        Entries {
            entries: entries.into_iter(),
            value: None,
        }
    }
}

impl<'de> MapAccess<'de> for Entries<'de> {
    type Error = Refused;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Refused> {
        match self.entries.next() {
            None => Ok(None),
            Some((key, value)) => {
                self.value = Some((key, value));
                seed.deserialize(key.into_deserializer()).map(Some)
            }
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, Refused> {
        let (key, value) = self
            .value
            .take()
            .ok_or_else(|| Refused("a value without its key".into()))?;
        seed.deserialize(Field {
            key,
            value,
            optional: false,
        })
        .map_err(|Refused(message)| match message.strip_prefix(FIELD) {
            Some(rest) => Refused(format!("{key}{rest}")),
            None => Refused(message),
        })
    }
}

/// One field's value (`None`: absent), checked for the type its struct
/// asks for.
struct Field<'de> {
    key: &'de str,
    value: Option<&'de Value>,
    /// An `Option` field: `null` is refused as a wrong type, not as missing.
    optional: bool,
}

impl Field<'_> {
    fn refuse(&self, what: &str) -> Refused {
        Refused(format!("{} {what}", self.key))
    }

    fn required(&self) -> Refused {
        self.refuse("is required")
    }

    /// A whole number up to `max`, with `opt_uint`'s messages.
    fn whole(&self, max: u64) -> Result<u64, Refused> {
        match self.value {
            Some(Value::Null) if !self.optional => Err(self.required()),
            Some(v) => whole_number(v, 0, max).map_err(|m| self.refuse(&m)),
            None => Err(self.required()),
        }
    }
}

impl<'de> de::Deserializer<'de> for Field<'de> {
    type Error = Refused;

    /// The raw value, for fields read by their own `deserialize_with`.
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        let value = self.value.ok_or_else(|| self.required())?;
        de::Deserializer::deserialize_any(value, visitor).map_err(|e| Refused(e.to_string()))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        match self.value {
            None => Err(self.required()),
            Some(Value::Bool(b)) => visitor.visit_bool(*b),
            _ => Err(self.refuse("must be true or false")),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        match self.value {
            Some(Value::String(s)) if !s.is_empty() || self.optional => {
                visitor.visit_borrowed_str(s)
            }
            None | Some(Value::Null | Value::String(_)) if !self.optional => Err(self.required()),
            _ => Err(self.refuse("must be a string")),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        self.deserialize_str(visitor)
    }

    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        visitor.visit_u64(self.whole(u8::MAX.into())?)
    }

    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        visitor.visit_u64(self.whole(u16::MAX.into())?)
    }

    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        visitor.visit_u64(self.whole(u32::MAX.into())?)
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        visitor.visit_u64(self.whole(u64::MAX)?)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        match self.value {
            None => visitor.visit_none(),
            Some(_) => visitor.visit_some(Field {
                optional: true,
                ..self
            }),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Refused> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i32 i64 i128 u128 f32 f64 char bytes byte_buf unit unit_struct
        seq tuple tuple_struct map struct enum identifier
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::parse::body;
    use serde::Deserialize;
    use serde_json::json;
    use svs_wire::fields::opt_whole;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Sample {
        name: String,
        note: Option<String>,
        flag: Option<bool>,
        count: Option<u64>,
        #[serde(deserialize_with = "opt_whole::<1, 10, _>")]
        small: Option<u64>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Strict {
        a: Option<bool>,
        b: Option<bool>,
    }

    fn refused<T: DeserializeOwned + fmt::Debug>(v: Value) -> String {
        typed::<T>(&body(v)).expect_err("refused").message
    }

    #[test]
    fn fields_answer_the_parsers_messages_in_the_structs_order() {
        let s: Sample = typed(&body(json!({"name": "x", "count": 7.0, "small": 3}))).unwrap();
        assert_eq!((s.count, s.small, s.note), (Some(7), Some(3), None));
        for (b, message) in [
            (json!({}), "name is required"),
            (json!({"name": null}), "name is required"),
            (json!({"name": ""}), "name is required"),
            (json!({"name": 5}), "name must be a string"),
            (json!({"name": "x", "note": null}), "note must be a string"),
            (
                json!({"name": "x", "flag": "y"}),
                "flag must be true or false",
            ),
            (json!({"name": "x", "count": "1"}), "count must be a number"),
            (
                json!({"name": "x", "count": -1}),
                "count must be a whole number from 0 to 18446744073709551615",
            ),
            (
                json!({"name": "x", "small": 11}),
                "small must be a whole number from 1 to 10",
            ),
            (json!({"small": 11, "note": 1}), "name is required"),
            (
                json!({"flag": 1, "note": 1, "name": "n"}),
                "note must be a string",
            ),
        ] {
            assert_eq!(refused::<Sample>(b.clone()), message, "{b}");
        }
        assert_eq!(
            refused::<Strict>(json!({"a": 1, "c": 1})),
            "unknown field 'c' (accepted: a, b)"
        );
    }
}
