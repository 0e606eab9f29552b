//! How request fields are read and written: the `deserialize_with`
//! functions that check a field and answer the API's 400 message, and the
//! `serialize_with` ones that write a typed field as the API spells it.
//! A message may start with [`FIELD`], which the server's body reader
//! replaces by the field's name.

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serializer};
use serde_json::Value;
use std::net::IpAddr;
use std::path::PathBuf;
use svs_domain::{plain_directory, AttachmentManager, CredentialRole, ResourceName};
use utoipa::openapi::schema::{AnyOfBuilder, ObjectBuilder, Schema, SchemaFormat, Type};

/// Stands for the field's name at the start of an error message.
pub const FIELD: &str = "{field}";

/// `value` as a whole number in `min..=max`, or what is wrong with it
/// (without the field's name).
pub fn whole_number(value: &Value, min: u64, max: u64) -> Result<u64, String> {
    let n = value
        .as_u64()
        .or_else(|| {
            // Accept 20.0 from clients that send every number as a float.
            value
                .as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u64::MAX as f64)
                .map(|f| f as u64)
        })
        .ok_or_else(|| match value {
            Value::Number(_) => format!("must be a whole number from {min} to {max}"),
            _ => "must be a number".to_string(),
        })?;
    if n < min || n > max {
        return Err(format!("must be a whole number from {min} to {max}"));
    }
    Ok(n)
}

/// A required whole number in `MIN..=MAX`.
pub fn whole<'de, const MIN: u64, const MAX: u64, D: Deserializer<'de>>(
    d: D,
) -> Result<u64, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Err(de::Error::custom(format!("{FIELD} is required"))),
        v => whole_number(&v, MIN, MAX).map_err(|m| de::Error::custom(format!("{FIELD} {m}"))),
    }
}

/// An optional whole number in `MIN..=MAX`.
pub fn opt_whole<'de, const MIN: u64, const MAX: u64, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<u64>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None => Ok(None),
        Some(v) => whole_number(&v, MIN, MAX)
            .map(Some)
            .map_err(|m| de::Error::custom(format!("{FIELD} {m}"))),
    }
}

/// A required name of a `kind` of resource (`ResourceName`'s rules and
/// message).
fn name<'de, D: Deserializer<'de>>(d: D, kind: &str) -> Result<ResourceName, D::Error> {
    ResourceName::parse(kind, &String::deserialize(d)?).map_err(de::Error::custom)
}

pub fn medium_name<'de, D: Deserializer<'de>>(d: D) -> Result<ResourceName, D::Error> {
    name(d, "medium")
}

pub fn node_name<'de, D: Deserializer<'de>>(d: D) -> Result<ResourceName, D::Error> {
    name(d, "node")
}

pub fn zone_name<'de, D: Deserializer<'de>>(d: D) -> Result<ResourceName, D::Error> {
    name(d, "zone")
}

/// An optional name of a `kind` of resource.
fn opt_name<'de, D: Deserializer<'de>>(d: D, kind: &str) -> Result<Option<ResourceName>, D::Error> {
    Option::<String>::deserialize(d)?
        .map(|s| ResourceName::parse(kind, &s).map_err(de::Error::custom))
        .transpose()
}

pub fn opt_node_name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ResourceName>, D::Error> {
    opt_name(d, "node")
}

pub fn opt_zone_name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ResourceName>, D::Error> {
    opt_name(d, "zone")
}

/// An optional zone name; `""`: none.
pub fn zone_or_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Option::<String>::deserialize(d)? {
        Some(z) if !z.is_empty() => ResourceName::parse("zone", &z)
            .map(|z| Some(z.into_string()))
            .map_err(de::Error::custom),
        _ => Ok(None),
    }
}

/// A medium's directory: absolute, without `..`.
pub fn directory<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
    plain_directory(std::path::Path::new(&String::deserialize(d)?)).map_err(de::Error::custom)
}

fn not_an_ip_address<E: de::Error>(a: &str) -> E {
    de::Error::custom(format!("address '{a}' is not an IP address"))
}

/// A required IP address.
pub fn ip_address<'de, D: Deserializer<'de>>(d: D) -> Result<IpAddr, D::Error> {
    let a = String::deserialize(d)?;
    a.parse().map_err(|_| not_an_ip_address(&a))
}

/// A required IP address or `""` (none).
pub fn ip_address_or_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<IpAddr>, D::Error> {
    match Option::<String>::deserialize(d)?.as_deref() {
        None => Err(de::Error::custom("address is required")),
        Some("") => Ok(None),
        Some(a) => a.parse().map(Some).map_err(|_| not_an_ip_address(a)),
    }
}

/// The address or `""` (none), as [`ip_address_or_none`] reads it.
pub fn write_ip_address_or_none<S: Serializer>(
    a: &Option<IpAddr>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match a {
        Some(a) => s.collect_str(a),
        None => s.serialize_str(""),
    }
}

/// `manager`: `agent` or `csi`.
pub fn manager<'de, D: Deserializer<'de>>(d: D) -> Result<Option<AttachmentManager>, D::Error> {
    Option::<String>::deserialize(d)?
        .map(|m| {
            AttachmentManager::parse(&m)
                .ok_or_else(|| de::Error::custom("manager must be 'agent' or 'csi'"))
        })
        .transpose()
}

pub fn write_manager<S: Serializer>(
    m: &Option<AttachmentManager>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match m {
        Some(m) => s.serialize_str(m.as_str()),
        None => s.serialize_none(),
    }
}

/// The roles a node credential may have.
const ROLES: &str = "role must be 'agent', 'storage' or 'agent+storage'";

/// `role`: absent or null is the default.
pub fn role<'de, D: Deserializer<'de>>(d: D) -> Result<Option<CredentialRole>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(r)) => CredentialRole::parse(&r)
            .map(Some)
            .ok_or_else(|| de::Error::custom(format!("{ROLES} (got '{r}')"))),
        Some(_) => Err(de::Error::custom(ROLES)),
    }
}

pub fn write_role<S: Serializer>(r: &Option<CredentialRole>, s: S) -> Result<S::Ok, S::Error> {
    match r {
        Some(r) => s.serialize_str(r.as_str()),
        None => s.serialize_none(),
    }
}

/// A string that is an IPv4 or IPv6 address (Rust's `IpAddr` syntax), or
/// `""` when `or_empty`.
fn ip_address_schema(description: &str, or_empty: bool) -> Schema {
    let string = || ObjectBuilder::new().schema_type(Type::String);
    let format = |f: &str| {
        string()
            .format(Some(SchemaFormat::Custom(f.into())))
            .min_length(Some(1))
    };
    let mut any = AnyOfBuilder::new()
        .description(Some(description))
        .item(format("ipv4"))
        .item(format("ipv6"));
    if or_empty {
        any = any.item(string().max_length(Some(0)));
    }
    Schema::AnyOf(any.build())
}

pub fn node_address_schema() -> Schema {
    ip_address_schema(
        "The IP address the node's NBD connections come from.",
        false,
    )
}

pub fn new_node_address_schema() -> Schema {
    ip_address_schema(
        "The IP address the node's NBD connections come from; `\"\"` removes it.",
        true,
    )
}
