//! Every response body, rendered from records into typed views with the
//! reference API's field names. The views derive `ToSchema`, so the
//! document at `/openapi.json` describes exactly what is sent.

use crate::service::volumes::Started;
use serde::Serialize;
use utoipa::ToSchema;

/// Every error: a status code and this body.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ErrorResponse)]
pub struct ErrorBody {
    /// What went wrong, for people (the seed's messages are exact).
    pub message: String,
}

/// What a mutating call that runs as a job answers: follow the job with
/// `GET /jobs/{JobID}`.
#[derive(Debug, Serialize, ToSchema)]
#[allow(non_snake_case)]
pub struct JobStarted {
    pub Message: String,
    /// The job's id, a decimal string.
    pub JobID: String,
    /// The object the job works on (a volume id).
    pub ObjectID: String,
}

pub fn started(message: &str, s: &Started) -> JobStarted {
    JobStarted {
        Message: message.to_string(),
        JobID: s.job_id.to_string(),
        ObjectID: s.object_id.clone(),
    }
}

/// What a call with nothing to report answers (`POST /signout`): `{}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Empty {}

/// What a mutating call that is done at once answers.
#[derive(Debug, Serialize, ToSchema)]
#[allow(non_snake_case)]
pub struct Done {
    pub Message: String,
    /// The name of the object changed.
    pub ObjectID: String,
}

pub fn done(message: &str, object_id: &str) -> Done {
    Done {
        Message: message.to_string(),
        ObjectID: object_id.to_string(),
    }
}

/// A stored reference field that the reference requires to be non-empty
/// when present: omitted when not set.
pub(super) fn non_empty(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_string())
}

/// A list rendered with one of the functions above.
pub fn list<T, V>(items: &[T], render: impl Fn(&T) -> V) -> Vec<V> {
    items.iter().map(render).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Map};
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
            lost_slices: 0,
            lost_columns: 0,
            recovery_job: None,
            filesystem_size: None,
            filesystem_error: None,
            created_ms: 0,
        }
    }

    #[test]
    fn a_volume_that_lost_slices_shows_its_health_as_its_state() {
        let mut v = volume_record();
        assert_eq!(json_of(&volume(&v))["state"], "Ready");
        v.lost_slices = 1;
        v.recovery_job = Some(7);
        let shown = json_of(&volume(&v));
        assert_eq!(shown["state"], "Degraded");
        assert_eq!(shown["volumerecoveryjob"], "7");
        v.lost_columns = 1;
        assert_eq!(json_of(&volume(&v))["state"], "Failed");
        v.state = VolumeState::Deleting;
        assert_eq!(json_of(&volume(&v))["state"], "Deleting");
    }

    fn json_of(v: &VolumeView) -> Value {
        serde_json::to_value(v).expect("a volume serializes")
    }

    #[test]
    fn a_volume_shows_its_stored_fields_first_zone_and_default_flavor() {
        let v = json_of(&volume(&volume_record()));
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
    fn unset_fields_the_reference_requires_non_empty_are_omitted() {
        let mut record = volume_record();
        record.attributes = Map::new();
        record.first_zone = None;
        let v = json_of(&volume(&record));
        for key in [
            "capacitygroup",
            "volumegroupname",
            "replicationvolumegroupname",
            "replicationvolumegroupid",
            "volumerecoveryjob",
            "throttlingscheme",
            "zone",
        ] {
            assert!(v.get(key).is_none(), "{key} in {v}");
        }
        // Fields the reference allows empty stay, as before.
        assert_eq!(v["consistencygroup"], "");
        assert_eq!(v["contentvolume"], "");
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
            let shown = json_of(&volume(&record));
            let attributes = VolumeAttributes::from_record(&record.attributes);
            for field in FixedVolumeField::ALL {
                let expected = fixed_field_value(&record, &attributes, field);
                let got = shown.get(field.wire_name()).cloned().unwrap_or(json!(""));
                assert_eq!(got, json!(expected), "{}", field.wire_name());
            }
        }
    }

    #[test]
    fn a_volume_with_a_running_job_shows_its_status_and_progress() {
        let mut record = volume_record();
        record.state = VolumeState::Resizing;
        record.job = Some((7, 40, "Copying".into()));
        let v = json_of(&volume(&record));
        assert_eq!(v["state"], "Resizing");
        assert_eq!(v["status"], "Copying");
        assert_eq!(v["progress"], 40);
    }
}
