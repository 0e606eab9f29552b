//! What a job is asked to do: one variant per kind, with typed arguments.
//!
//! The store keeps a job's kind and its arguments as JSON (the API shows
//! them as `type` and `args`); nothing reads that JSON field by field: it is
//! turned back into a [`JobSpec`] once, here.

use crate::model::{Gib, JobKind, VolumeType};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// `volume_create`: the volume row exists (state Creating); place and create its slices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateVolumeArgs {
    pub name: String,
    pub size: Gib,
    pub policy: String,
    #[serde(rename = "type", with = "volume_type")]
    pub kind: VolumeType,
    /// A clone: the snapshot whose content fills the new volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<CloneSource>,
    /// The placement a dry run answered, given back with the request (its
    /// `PlanShape` token): the job places the volume so, or ends in Error
    /// naming what changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
}

/// Where a clone's content comes from: a snapshot of another volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloneSource {
    #[serde(rename = "contentvolume")]
    pub volume_id: String,
    #[serde(rename = "contentsnapshot")]
    pub snapshot_id: String,
}

/// `snapshot_create` / `snapshot_delete` / `snapshot_rollback`: one
/// snapshot of the job's volume (the job reads its record by id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotArgs {
    pub name: String,
    #[serde(rename = "snapshotid")]
    pub snapshot_id: String,
}

/// `volume_delete`: remove the slices, then the volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteVolumeArgs {
    pub name: String,
    pub force: bool,
}

/// `volume_modify_extend`: grow to `size` GiB (from `fromsize`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResizeVolumeArgs {
    pub size: Gib,
    #[serde(rename = "allowdatamovement")]
    pub allow_data_movement: bool,
    #[serde(rename = "fromsize")]
    pub from_size: Gib,
    /// The plan a dry run answered, given back with the request (its
    /// `PlanShape` token): the job carries out that plan or ends in Error
    /// naming what changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
}

/// `volume_recovery`: rebuild every lost copy of the volume's slices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryArgs {
    pub name: String,
}

/// `volume_grow_filesystem`: grow the volume's filesystem to fill its
/// `size` GiB again, after a growth failed (svs extension).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrowFilesystemArgs {
    pub name: String,
    pub size: Gib,
}

/// `media_drain`: move every slice off `medium`, which takes no new slice
/// meanwhile (svs extension).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainArgs {
    pub medium: String,
}

/// `media_rebalance`: even the usage of the media of one node, one zone,
/// or (neither given) of every medium, moving the fewest bytes (svs
/// extension).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebalanceArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

impl RebalanceArgs {
    /// The job's object: `node:<name>`, `zone:<name>` or `all`.
    pub fn scope(&self) -> String {
        match (&self.node, &self.zone) {
            (Some(node), _) => format!("node:{node}"),
            (None, Some(zone)) => format!("zone:{zone}"),
            (None, None) => "all".to_string(),
        }
    }
}

/// `attachment_create` / `attachment_modify`: the attachment of the volume
/// (or of one of its snapshots) to `node`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachmentArgs {
    pub node: String,
    pub readonly: bool,
    pub mountpoint: String,
    /// `top` (the live volume) or a snapshot id.
    #[serde(default = "live", skip_serializing_if = "is_live")]
    pub snapshot: String,
}

/// `attachment_delete`: detach the volume (or one of its snapshots) from `node`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DetachArgs {
    pub node: String,
    #[serde(default = "live", skip_serializing_if = "is_live")]
    pub snapshot: String,
}

/// Jobs stored before snapshots existed attached the live volume.
fn live() -> String {
    crate::model::LIVE_SNAPSHOT_NAME.to_string()
}

fn is_live(s: &str) -> bool {
    s == crate::model::LIVE_SNAPSHOT_NAME
}

/// A job's kind and its typed arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobSpec {
    VolumeCreate(CreateVolumeArgs),
    VolumeDelete(DeleteVolumeArgs),
    VolumeModifyExtend(ResizeVolumeArgs),
    AttachmentCreate(AttachmentArgs),
    AttachmentDelete(DetachArgs),
    AttachmentModify(AttachmentArgs),
    SnapshotCreate(SnapshotArgs),
    SnapshotDelete(SnapshotArgs),
    SnapshotRollback(SnapshotArgs),
    VolumeRecovery(RecoveryArgs),
    VolumeGrowFilesystem(GrowFilesystemArgs),
    MediaDrain(DrainArgs),
    MediaRebalance(RebalanceArgs),
}

/// Stored arguments that do not fit their kind: a bug or a damaged record.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("job arguments of kind '{kind}' are invalid: {reason}")]
pub struct JobSpecError {
    pub kind: String,
    pub reason: String,
}

impl JobSpec {
    pub fn kind(&self) -> JobKind {
        match self {
            JobSpec::VolumeCreate(_) => JobKind::VolumeCreate,
            JobSpec::VolumeDelete(_) => JobKind::VolumeDelete,
            JobSpec::VolumeModifyExtend(_) => JobKind::VolumeModifyExtend,
            JobSpec::AttachmentCreate(_) => JobKind::AttachmentCreate,
            JobSpec::AttachmentDelete(_) => JobKind::AttachmentDelete,
            JobSpec::AttachmentModify(_) => JobKind::AttachmentModify,
            JobSpec::SnapshotCreate(_) => JobKind::SnapshotCreate,
            JobSpec::SnapshotDelete(_) => JobKind::SnapshotDelete,
            JobSpec::SnapshotRollback(_) => JobKind::SnapshotRollback,
            JobSpec::VolumeRecovery(_) => JobKind::VolumeRecovery,
            JobSpec::VolumeGrowFilesystem(_) => JobKind::VolumeGrowFilesystem,
            JobSpec::MediaDrain(_) => JobKind::MediaDrain,
            JobSpec::MediaRebalance(_) => JobKind::MediaRebalance,
        }
    }

    /// A resize that may move data blocks the seed's nine operations; so
    /// do a drain and a rebalance on each volume while they move its slices.
    pub fn is_data_movement(&self) -> bool {
        match self {
            JobSpec::VolumeModifyExtend(a) => a.allow_data_movement,
            JobSpec::MediaDrain(_) | JobSpec::MediaRebalance(_) => true,
            _ => false,
        }
    }

    /// The arguments as stored and shown (`args` of a job).
    pub fn args_json(&self) -> serde_json::Value {
        let value = match self {
            JobSpec::VolumeCreate(a) => serde_json::to_value(a),
            JobSpec::VolumeDelete(a) => serde_json::to_value(a),
            JobSpec::VolumeModifyExtend(a) => serde_json::to_value(a),
            JobSpec::AttachmentCreate(a) | JobSpec::AttachmentModify(a) => serde_json::to_value(a),
            JobSpec::AttachmentDelete(a) => serde_json::to_value(a),
            JobSpec::SnapshotCreate(a)
            | JobSpec::SnapshotDelete(a)
            | JobSpec::SnapshotRollback(a) => serde_json::to_value(a),
            JobSpec::VolumeRecovery(a) => serde_json::to_value(a),
            JobSpec::VolumeGrowFilesystem(a) => serde_json::to_value(a),
            JobSpec::MediaDrain(a) => serde_json::to_value(a),
            JobSpec::MediaRebalance(a) => serde_json::to_value(a),
        };
        // Plain structs of strings, numbers and booleans always serialize.
        value.unwrap_or(serde_json::Value::Null)
    }

    /// Rebuilds a spec from a stored kind and arguments.
    pub fn from_stored(kind: &str, args: &serde_json::Value) -> Result<JobSpec, JobSpecError> {
        let invalid = |reason: String| JobSpecError {
            kind: kind.to_string(),
            reason,
        };
        fn parse<T: serde::de::DeserializeOwned>(v: &serde_json::Value) -> Result<T, String> {
            T::deserialize(v).map_err(|e| e.to_string())
        }
        let spec = match JobKind::parse(kind) {
            Some(JobKind::VolumeCreate) => parse(args).map(JobSpec::VolumeCreate),
            Some(JobKind::VolumeDelete) => parse(args).map(JobSpec::VolumeDelete),
            Some(JobKind::VolumeModifyExtend) => parse(args).map(JobSpec::VolumeModifyExtend),
            Some(JobKind::AttachmentCreate) => parse(args).map(JobSpec::AttachmentCreate),
            Some(JobKind::AttachmentDelete) => parse(args).map(JobSpec::AttachmentDelete),
            Some(JobKind::AttachmentModify) => parse(args).map(JobSpec::AttachmentModify),
            Some(JobKind::SnapshotCreate) => parse(args).map(JobSpec::SnapshotCreate),
            Some(JobKind::SnapshotDelete) => parse(args).map(JobSpec::SnapshotDelete),
            Some(JobKind::SnapshotRollback) => parse(args).map(JobSpec::SnapshotRollback),
            Some(JobKind::VolumeRecovery) => parse(args).map(JobSpec::VolumeRecovery),
            Some(JobKind::VolumeGrowFilesystem) => parse(args).map(JobSpec::VolumeGrowFilesystem),
            Some(JobKind::MediaDrain) => parse(args).map(JobSpec::MediaDrain),
            Some(JobKind::MediaRebalance) => parse(args).map(JobSpec::MediaRebalance),
            None => Err("unknown job type".to_string()),
        };
        spec.map_err(invalid)
    }
}

/// `block` / `file` on the wire, as in the API.
mod volume_type {
    use crate::model::VolumeType;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(kind: &VolumeType, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(kind.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<VolumeType, D::Error> {
        let s = String::deserialize(d)?;
        VolumeType::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown volume type '{s}'")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn args_keep_the_field_names_the_api_has_always_shown() {
        let spec = JobSpec::VolumeModifyExtend(ResizeVolumeArgs {
            size: 25,
            allow_data_movement: true,
            from_size: 10,
            plan: None,
        });
        assert_eq!(
            spec.args_json(),
            json!({"size": 25, "allowdatamovement": true, "fromsize": 10})
        );
        let create = JobSpec::VolumeCreate(CreateVolumeArgs {
            name: "db".into(),
            size: 10,
            policy: "mirror".into(),
            kind: VolumeType::File,
            source: None,
            plan: None,
        });
        assert_eq!(
            create.args_json(),
            json!({"name": "db", "size": 10, "policy": "mirror", "type": "file"})
        );
    }

    #[test]
    fn every_kind_round_trips_through_its_stored_form() {
        let specs = [
            JobSpec::VolumeCreate(CreateVolumeArgs {
                name: "v".into(),
                size: 1,
                policy: "p".into(),
                kind: VolumeType::Block,
                source: Some(CloneSource {
                    volume_id: "v0".into(),
                    snapshot_id: "s0".into(),
                }),
                plan: Some("7b7d".into()),
            }),
            JobSpec::VolumeDelete(DeleteVolumeArgs {
                name: "v".into(),
                force: true,
            }),
            JobSpec::VolumeModifyExtend(ResizeVolumeArgs {
                size: 2,
                allow_data_movement: false,
                from_size: 1,
                plan: None,
            }),
            JobSpec::AttachmentCreate(AttachmentArgs {
                node: "n".into(),
                readonly: false,
                mountpoint: "/m".into(),
                snapshot: "top".into(),
            }),
            JobSpec::AttachmentDelete(DetachArgs {
                node: "n".into(),
                snapshot: "s1".into(),
            }),
            JobSpec::AttachmentModify(AttachmentArgs {
                node: "n".into(),
                readonly: true,
                mountpoint: String::new(),
                snapshot: "s1".into(),
            }),
            JobSpec::SnapshotCreate(SnapshotArgs {
                name: "daily".into(),
                snapshot_id: "s1".into(),
            }),
            JobSpec::SnapshotDelete(SnapshotArgs {
                name: "daily".into(),
                snapshot_id: "s1".into(),
            }),
            JobSpec::SnapshotRollback(SnapshotArgs {
                name: "daily".into(),
                snapshot_id: "s1".into(),
            }),
            JobSpec::VolumeRecovery(RecoveryArgs { name: "v".into() }),
            JobSpec::VolumeGrowFilesystem(GrowFilesystemArgs {
                name: "v".into(),
                size: 3,
            }),
            JobSpec::MediaDrain(DrainArgs {
                medium: "m1".into(),
            }),
            JobSpec::MediaRebalance(RebalanceArgs {
                node: None,
                zone: Some("z1".into()),
            }),
        ];
        for spec in specs {
            let back = JobSpec::from_stored(spec.kind().as_str(), &spec.args_json());
            assert_eq!(back, Ok(spec));
        }
    }

    #[test]
    fn only_a_resize_allowing_movement_is_a_data_movement() {
        let resize = |allow| {
            JobSpec::VolumeModifyExtend(ResizeVolumeArgs {
                size: 2,
                allow_data_movement: allow,
                from_size: 1,
                plan: None,
            })
        };
        assert!(resize(true).is_data_movement());
        assert!(!resize(false).is_data_movement());
        assert!(JobSpec::MediaDrain(DrainArgs { medium: "m".into() }).is_data_movement());
    }

    #[test]
    fn attachment_jobs_stored_before_snapshots_attach_the_live_volume() {
        let stored = json!({"node": "n", "readonly": false, "mountpoint": ""});
        let Ok(JobSpec::AttachmentCreate(a)) = JobSpec::from_stored("attachment_create", &stored)
        else {
            panic!("old attachment job must parse");
        };
        assert_eq!(a.snapshot, "top");
        assert_eq!(JobSpec::AttachmentCreate(a).args_json(), stored);
    }

    #[test]
    fn damaged_arguments_are_an_error_not_a_default() {
        let err = JobSpec::from_stored("volume_modify_extend", &json!({"size": "big"}));
        assert!(err.is_err());
        assert!(JobSpec::from_stored("volume_explode", &json!({})).is_err());
    }
}
