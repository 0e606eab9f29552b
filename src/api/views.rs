//! Every response body, rendered from records with the reference API's
//! field names.

use crate::auth::TokenSet;
use crate::service::attachments::attachment_uri;
use crate::service::attributes::{StoredField, VolumeAttributes};
use crate::service::auth::SignedIn;
use crate::service::catalog::NodeSummary;
use crate::service::format_ms;
use crate::service::volumes::{volume_zone, Started};
use serde_json::{json, Value};
use svs_store::{Attachment, Job, MediumUsage, Policy, SliceRow, Volume};

/// What a mutating call that runs as a job answers.
pub fn started(message: &str, s: &Started) -> Value {
    json!({
        "Message": message,
        "JobID": s.job_id.to_string(),
        "ObjectID": s.object_id,
    })
}

/// What a call with nothing to report answers (`POST /signout`).
pub fn empty() -> Value {
    json!({})
}

/// What a mutating call that is done at once answers.
pub fn done(message: &str, object_id: &str) -> Value {
    json!({"Message": message, "ObjectID": object_id})
}

pub fn signed_in(s: &SignedIn) -> Value {
    json!({
        "AccessToken": s.tokens.access_token,
        "IdToken": s.tokens.id_token,
        "RefreshToken": s.refresh_token,
        "ExpiresIn": s.tokens.expires_in,
        "TokenType": "Bearer",
    })
}

/// The Volumez refresh answer: when each token expires (RFC 3339, UTC).
pub fn volumez_refreshed(t: &TokenSet) -> Value {
    let expiry = format_ms(
        i64::try_from(t.issued_at_secs.saturating_add(t.expires_in))
            .unwrap_or(i64::MAX / 1000)
            .saturating_mul(1000),
    );
    json!({
        "AccessToken": t.access_token,
        "IdToken": t.id_token,
        "AccessTokenExpiration": expiry,
        "IdTokenExpiration": expiry,
        "TokenType": "Bearer",
    })
}

/// The JSON Web Key Set: the key that signs tokens now, then the retired
/// ones whose tokens may still be valid, each as (kid, public key).
pub fn jwks(keys: &[(String, String)]) -> Value {
    let keys: Vec<Value> = keys
        .iter()
        .map(|(kid, x)| {
            json!({
                "kty": "OKP",
                "crv": "Ed25519",
                "alg": "EdDSA",
                "use": "sig",
                "kid": kid,
                "x": x,
            })
        })
        .collect();
    json!({ "keys": keys })
}

pub fn version() -> Value {
    json!({"version": env!("CARGO_PKG_VERSION"), "componentName": "svs"})
}

pub fn volume(v: &Volume) -> Value {
    let attributes = VolumeAttributes::from_record(&v.attributes);
    let stored = |field: StoredField| attributes.get(field);
    let (status, progress) = match &v.job {
        Some((_, progress, status)) => (status.as_str(), *progress),
        None => ("Online", 100),
    };
    json!({
        "name": v.name,
        "volumeid": v.id,
        "type": v.kind.as_str(),
        "contentvolume": "",
        "contentsnapshot": "",
        "size": v.size,
        "maxsize": v.size.saturating_mul(10),
        "policy": v.policy,
        "consistencygroup": stored(StoredField::ConsistencyGroup),
        "node": v.first_node.as_deref().unwrap_or_default(),
        "zone": volume_zone(v),
        "zonereplica": stored(StoredField::ZoneReplica),
        "volumegroupname": stored(StoredField::VolumeGroupName),
        "volumegroupid": v.id,
        "replicationnode": stored(StoredField::ReplicationNode),
        "replicationvolumegroupname": stored(StoredField::ReplicationVolumeGroupName),
        "replicationvolumegroupid": "",
        "volumerecoveryjob": "",
        "state": v.state.as_str(),
        "status": status,
        "progress": progress,
        "capacitygroup": stored(StoredField::CapacityGroup),
        "throttlingscheme": stored(StoredField::ThrottlingScheme),
        // A request to move data, never a state: always false when read.
        "allowdatamovement": false,
        "flavor": attributes.flavor().as_str(),
    })
}

pub fn slice(row: &SliceRow) -> Value {
    json!({
        "sliceid": row.slice.id,
        "copy": row.slice.copy,
        "column": row.slice.column,
        "media": row.slice.medium,
        "node": row.node,
        "zone": row.zone,
        "size": row.slice.size,
    })
}

/// The stored settings as they are, plus name, resiliency and authorship.
pub fn policy(p: &Policy) -> Value {
    let mut out = p.attributes.clone();
    let mut set = |key: &str, value: Value| {
        out.insert(key.to_string(), value);
    };
    set("name", json!(p.name));
    set("resiliencymedia", json!(p.resiliency.media));
    set("resiliencynode", json!(p.resiliency.node));
    set("resiliencyzone", json!(p.resiliency.zone));
    set("createdbyuserName", json!(p.created_by_name));
    set("createdbyuseremail", json!(p.created_by_email));
    set("createdtime", json!(format_ms(p.created_ms)));
    set(
        "updatebyusername",
        json!(p.updated_by_name.as_deref().unwrap_or_default()),
    );
    set(
        "updatebyUseremail",
        json!(p.updated_by_email.as_deref().unwrap_or_default()),
    );
    set(
        "updatetime",
        json!(p.updated_ms.map(format_ms).unwrap_or_default()),
    );
    Value::Object(out)
}

/// `nbd_base` is `nbd://host:port` of the NBD server.
pub fn attachment(a: &Attachment, nbd_base: &str) -> Value {
    // A finished attachment job leaves its status behind; only a
    // transition in progress shows it.
    let (status, progress) = match &a.job {
        Some((_, progress, status)) if a.state != "Attached" => (status.as_str(), *progress),
        _ => (a.state.as_str(), 100),
    };
    json!({
        "volumename": a.volume_name,
        "volumeid": a.volume_id,
        "snapshotname": a.snapshot,
        "snapshotid": a.snapshot,
        "node": a.node,
        "state": a.state,
        "status": status,
        "progress": progress,
        "mountpoint": a.mountpoint,
        "readonly": a.readonly,
        "exportname": a.export_name,
        "uri": attachment_uri(a, nbd_base),
    })
}

pub fn job(j: &Job) -> Value {
    json!({
        "id": j.id,
        "type": j.kind,
        "object": j.object,
        "args": j.args,
        "state": j.state.as_str(),
        "status": j.status,
        "progress": j.progress,
        "starttime": j.starttime_ms.map(format_ms).unwrap_or_default(),
        "endtime": j.endtime_ms.map(format_ms).unwrap_or_default(),
        "username": j.username,
        "useremail": j.useremail,
        "details": j.details,
    })
}

pub fn medium(m: &MediumUsage) -> Value {
    json!({
        "mediaid": m.record.medium.id,
        "media": m.record.directory,
        "model": "svs sparse-file medium",
        "bus": "file",
        "location": m.record.directory,
        "node": m.record.medium.node,
        "zone": m.record.medium.zone,
        "size": m.record.medium.size,
        "freesize": m.free(),
        "volumescount": m.volumes_count,
        "sectorsize": 4096,
        "sed": false,
        "assignment": "svs",
        "state": "Online",
        "status": "Ready",
        "progress": 100,
        "capacitygroup": "",
    })
}

pub fn node(n: &NodeSummary) -> Value {
    json!({
        "name": n.record.name,
        "zone": n.record.zone,
        "address": n.record.address.as_deref().unwrap_or_default(),
        "os": std::env::consts::OS,
        "state": "Online",
        "status": "Ready",
        "progress": 100,
        "mediacount": n.media_count,
        "size": n.size,
        "freesize": n.free,
        "volumescount": n.volumes_count,
    })
}

/// A list rendered with one of the functions above.
pub fn list<T>(items: &[T], render: impl Fn(&T) -> Value) -> Value {
    Value::Array(items.iter().map(render).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;
    use svs_domain::{Resiliency, VolumeState, VolumeType};

    fn volume_record() -> Volume {
        let mut attributes = Map::new();
        attributes.insert("capacitygroup".into(), json!("cg"));
        Volume {
            id: "id-1".into(),
            tenant_id: 1,
            name: "data".into(),
            kind: VolumeType::Block,
            size: 10,
            policy: "gold".into(),
            resiliency: Resiliency::default(),
            zone: None,
            attributes,
            state: VolumeState::Ready,
            job: None,
            first_node: Some("node-a".into()),
            first_zone: Some("zone-a".into()),
            created_ms: 0,
        }
    }

    #[test]
    fn a_volume_shows_its_stored_fields_first_zone_and_default_flavor() {
        let v = volume(&volume_record());
        assert_eq!(v["capacitygroup"], "cg");
        assert_eq!(v["consistencygroup"], "");
        assert_eq!(v["zone"], "zone-a");
        assert_eq!(v["node"], "node-a");
        assert_eq!(v["flavor"], "regular");
        assert_eq!(v["maxsize"], 100);
        assert_eq!(
            (v["status"].clone(), v["progress"].clone()),
            (json!("Online"), json!(100))
        );
    }

    #[test]
    fn a_volume_shows_what_a_resize_compares_its_fixed_fields_with() {
        use crate::service::commands::FixedVolumeField;
        use crate::service::volumes::fixed_field_value;
        let mut record = volume_record();
        record
            .attributes
            .insert("flavor".into(), json!("filedirect"));
        for record in [volume_record(), record] {
            let shown = volume(&record);
            let attributes = VolumeAttributes::from_record(&record.attributes);
            for field in FixedVolumeField::ALL {
                assert_eq!(
                    shown[field.wire_name()],
                    json!(fixed_field_value(&record, &attributes, field)),
                    "{}",
                    field.wire_name()
                );
            }
        }
    }

    #[test]
    fn a_volume_with_a_running_job_shows_its_status_and_progress() {
        let mut record = volume_record();
        record.state = VolumeState::Resizing;
        record.job = Some((7, 40, "Copying".into()));
        let v = volume(&record);
        assert_eq!(v["state"], "Resizing");
        assert_eq!(v["status"], "Copying");
        assert_eq!(v["progress"], 40);
    }
}
