//! Policies: named outcomes; the resiliency ones drive placement.

use super::fields::{opt_bool, opt_str, opt_uint, req_str, Body};
use super::{now_ms, Caller, ServiceError, ServiceResult, Services};
use serde_json::{Map, Value};
use svs_domain::{Resiliency, ResourceName};
use svs_store::{Policy, PolicyWrite};

/// Defaults of the reference API when a resiliency field is omitted.
const DEFAULT_RESILIENCY: Resiliency = Resiliency {
    media: 2,
    node: 1,
    zone: 1,
};
const CAPACITY_OPTIMIZATIONS: [&str; 3] = ["capacity", "balanced", "performance"];

enum Kind {
    Uint(u64, u64),
    Bool,
    Str,
}

/// Stored-and-returned policy fields other than name and resiliency.
const ATTRIBUTES: &[(&str, Kind)] = &[
    ("iopswrite", Kind::Uint(0, u32::MAX as u64)),
    ("iopsread", Kind::Uint(0, u32::MAX as u64)),
    ("bandwidthwrite", Kind::Uint(0, u32::MAX as u64)),
    ("bandwidthread", Kind::Uint(0, u32::MAX as u64)),
    ("latencywrite", Kind::Uint(0, u32::MAX as u64)),
    ("latencyread", Kind::Uint(0, u32::MAX as u64)),
    ("localzoneread", Kind::Bool),
    ("failureperformance", Kind::Bool),
    ("capacityoptimization", Kind::Str),
    ("capacityreservation", Kind::Uint(0, 500)),
    ("encryption", Kind::Bool),
    ("sed", Kind::Bool),
    ("integrity", Kind::Bool),
    ("snapshotkeep", Kind::Uint(0, 100_000)),
    ("snapshotfrequency", Kind::Str),
    ("snapshotday", Kind::Uint(0, 31)),
    ("snapshothour", Kind::Uint(0, 23)),
    ("snapshotminute", Kind::Uint(0, 59)),
];

/// Builds the stored form of a policy from a request body, starting from
/// `base` (the current policy on PATCH).
fn policy_write(body: &Body, base: Option<&Policy>, caller: &Caller) -> ServiceResult<PolicyWrite> {
    let name = match (opt_str(body, "name")?, base) {
        (Some(n), _) => n.to_string(),
        (None, Some(p)) => p.name.clone(),
        (None, None) => req_str(body, "name")?.to_string(),
    };
    let name = ResourceName::parse("policy", &name)
        .map_err(ServiceError::BadRequest)?
        .into_string();
    let current = base.map(|p| p.resiliency).unwrap_or(DEFAULT_RESILIENCY);
    let level = |key: &str, current: u8| -> ServiceResult<u8> {
        Ok(opt_uint(body, key, 0, 2)?
            .map(|v| u8::try_from(v).unwrap_or(2))
            .unwrap_or(current))
    };
    let resiliency = Resiliency {
        media: level("resiliencymedia", current.media)?,
        node: level("resiliencynode", current.node)?,
        zone: level("resiliencyzone", current.zone)?,
    };
    let mut attributes: Map<String, Value> = base.map(|p| p.attributes.clone()).unwrap_or_default();
    for (key, kind) in ATTRIBUTES {
        let value = match kind {
            Kind::Uint(min, max) => opt_uint(body, key, *min, *max)?.map(Value::from),
            Kind::Bool => opt_bool(body, key)?.map(Value::from),
            Kind::Str => opt_str(body, key)?.map(Value::from),
        };
        if let Some(v) = value {
            attributes.insert((*key).to_string(), v);
        }
    }
    match attributes
        .get("capacityoptimization")
        .and_then(Value::as_str)
    {
        Some(v) if !CAPACITY_OPTIMIZATIONS.contains(&v) => {
            return Err(ServiceError::BadRequest(
                "capacityoptimization must be one of capacity, balanced, performance".into(),
            ))
        }
        Some(_) => {}
        None => {
            attributes.insert("capacityoptimization".into(), Value::from("performance"));
        }
    }
    Ok(PolicyWrite {
        name,
        resiliency,
        attributes,
        by_name: caller.name.clone(),
        by_email: caller.email.clone(),
        now_ms: now_ms(),
    })
}

impl Services {
    pub async fn create_policy(&self, caller: &Caller, body: &Body) -> ServiceResult<Policy> {
        let write = policy_write(body, None, caller)?;
        Ok(self.store.create_policy(caller.tenant_id, &write).await?)
    }

    pub async fn list_policies(&self, caller: &Caller) -> ServiceResult<Vec<Policy>> {
        Ok(self.store.list_policies(caller.tenant_id).await?)
    }

    pub async fn get_policy(&self, caller: &Caller, name: &str) -> ServiceResult<Policy> {
        self.store
            .get_policy(caller.tenant_id, name)
            .await?
            .ok_or_else(|| policy_not_found(name))
    }

    pub async fn update_policy(
        &self,
        caller: &Caller,
        name: &str,
        body: &Body,
    ) -> ServiceResult<Policy> {
        let current = self.get_policy(caller, name).await?;
        let write = policy_write(body, Some(&current), caller)?;
        self.store
            .update_policy(caller.tenant_id, name, &write)
            .await
            .map_err(|e| match e {
                svs_store::StoreError::NotFound => policy_not_found(name),
                other => other.into(),
            })
    }

    pub async fn delete_policy(&self, caller: &Caller, name: &str) -> ServiceResult<()> {
        self.store
            .delete_policy(caller.tenant_id, name)
            .await
            .map_err(|e| match e {
                svs_store::StoreError::NotFound => policy_not_found(name),
                other => other.into(),
            })
    }
}

pub fn policy_not_found(name: &str) -> ServiceError {
    ServiceError::NotFound(format!("policy '{name}' not found"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn caller() -> Caller {
        Caller {
            user_id: 1,
            tenant_id: 1,
            email: "a@b.c".into(),
            name: "a".into(),
        }
    }

    fn body(v: Value) -> Body {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn omitted_fields_take_the_reference_defaults() {
        let w = policy_write(&body(json!({"name": "gold"})), None, &caller()).unwrap();
        assert_eq!(w.resiliency, DEFAULT_RESILIENCY);
        assert_eq!(w.attributes["capacityoptimization"], "performance");
    }

    #[test]
    fn resiliency_above_two_is_refused() {
        let err = policy_write(
            &body(json!({"name": "x", "resiliencyzone": 3})),
            None,
            &caller(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "resiliencyzone must be a whole number from 0 to 2"
        );
    }

    #[test]
    fn wrong_types_and_enum_values_are_refused() {
        assert!(policy_write(
            &body(json!({"name": "x", "encryption": "yes"})),
            None,
            &caller()
        )
        .is_err());
        assert!(policy_write(
            &body(json!({"name": "x", "capacityoptimization": "fast"})),
            None,
            &caller()
        )
        .is_err());
        assert!(policy_write(&body(json!({"name": "bad name"})), None, &caller()).is_err());
        assert!(policy_write(&body(json!({})), None, &caller()).is_err());
    }
}
