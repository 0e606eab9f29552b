//! Volumes: create, read, resize, delete. Long work runs as jobs.

use super::fields::{opt_bool, opt_str, req_gib, req_str, req_uint, Body};
use super::{now_ms, Caller, ServiceError, ServiceResult, Services};
use serde_json::{json, Map, Value};
use svs_domain::{
    validate_new_size, BlockedOperation, CreateVolumeArgs, DeleteVolumeArgs, JobSpec,
    ResizeVolumeArgs, ResourceName, VolumeState, VolumeType, MAX_VOLUME_GIB, MIN_VOLUME_GIB,
};
use svs_store::{NewJob, NewVolume, SliceRow, Volume};

/// Reference fields svs stores and returns without interpreting them.
const STORED_STRINGS: [&str; 8] = [
    "consistencygroup",
    "zonereplica",
    "volumegroupname",
    "replicationnode",
    "replicationvolumegroupname",
    "capacitygroup",
    "throttlingscheme",
    "flavor",
];
const FLAVORS: [&str; 2] = ["regular", "filedirect"];

/// Writable fields a resize may repeat but not change.
const FIXED_ON_RESIZE: [&str; 14] = [
    "name",
    "type",
    "policy",
    "zone",
    "contentvolume",
    "contentsnapshot",
    "consistencygroup",
    "zonereplica",
    "volumegroupname",
    "replicationnode",
    "replicationvolumegroupname",
    "capacitygroup",
    "throttlingscheme",
    "flavor",
];

/// What a mutating call started.
pub struct Started {
    pub job_id: i64,
    pub object_id: String,
}

/// The public representation of a volume (reference field names).
pub fn volume_json(v: &Volume) -> Value {
    let attr = |k: &str| {
        v.attributes
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (state, status, progress) = match &v.job {
        Some((_, progress, status)) => (v.state.as_str(), status.clone(), *progress),
        None => (v.state.as_str(), "Online".to_string(), 100),
    };
    let flavor = match attr("flavor") {
        f if f.is_empty() => "regular".to_string(),
        f => f,
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
        "consistencygroup": attr("consistencygroup"),
        "node": v.first_node.clone().unwrap_or_default(),
        "zone": v.zone.clone().or_else(|| v.first_zone.clone()).unwrap_or_default(),
        "zonereplica": attr("zonereplica"),
        "volumegroupname": attr("volumegroupname"),
        "volumegroupid": v.id,
        "replicationnode": attr("replicationnode"),
        "replicationvolumegroupname": attr("replicationvolumegroupname"),
        "replicationvolumegroupid": "",
        "volumerecoveryjob": "",
        "state": state,
        "status": status,
        "progress": progress,
        "capacitygroup": attr("capacitygroup"),
        "throttlingscheme": attr("throttlingscheme"),
        "allowdatamovement": false,
        "flavor": flavor,
    })
}

pub fn slice_json(row: &SliceRow) -> Value {
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

pub fn volume_not_found(name: &str) -> ServiceError {
    ServiceError::NotFound(format!("volume '{name}' not found"))
}

impl Services {
    pub async fn get_volume(&self, caller: &Caller, name: &str) -> ServiceResult<Volume> {
        self.store
            .get_volume(caller.tenant_id, name)
            .await?
            .ok_or_else(|| volume_not_found(name))
    }

    pub async fn list_volumes(&self, caller: &Caller) -> ServiceResult<Vec<Volume>> {
        Ok(self.store.list_volumes(caller.tenant_id).await?)
    }

    pub async fn volume_slices(&self, caller: &Caller, name: &str) -> ServiceResult<Vec<SliceRow>> {
        let volume = self.get_volume(caller, name).await?;
        Ok(self.store.volume_slices(&volume.id).await?)
    }

    pub(super) fn new_job(&self, caller: &Caller, spec: JobSpec, object: &str) -> NewJob {
        NewJob {
            tenant_id: caller.tenant_id,
            spec,
            object: object.to_string(),
            user_id: caller.user_id,
            username: caller.name.clone(),
            useremail: caller.email.clone(),
            now_ms: now_ms(),
        }
    }

    pub async fn create_volume(&self, caller: &Caller, body: &Body) -> ServiceResult<Started> {
        let name = ResourceName::parse("volume", req_str(body, "name")?)
            .map_err(ServiceError::BadRequest)?;
        let kind = match opt_str(body, "type")? {
            None | Some("") => VolumeType::Block,
            Some(t) => VolumeType::parse(t).ok_or_else(|| {
                ServiceError::BadRequest("type must be \"block\" or \"file\"".into())
            })?,
        };
        let size = req_uint(body, "size", MIN_VOLUME_GIB, MAX_VOLUME_GIB)?;
        let policy_name = req_str(body, "policy")?;
        let policy = self
            .store
            .get_policy(caller.tenant_id, policy_name)
            .await?
            .ok_or_else(|| {
                ServiceError::BadRequest(format!("policy '{policy_name}' does not exist"))
            })?;
        let zone = match opt_str(body, "zone")? {
            None | Some("") => None,
            Some(z) => {
                let known = self
                    .store
                    .media_usage()
                    .await?
                    .iter()
                    .any(|m| m.record.medium.zone == z);
                if !known {
                    return Err(ServiceError::BadRequest(format!("zone '{z}' has no media")));
                }
                Some(z.to_string())
            }
        };
        for key in ["contentvolume", "contentsnapshot"] {
            if opt_str(body, key)?.is_some_and(|s| !s.is_empty()) {
                return Err(ServiceError::BadRequest(format!(
                    "{key}: creating a volume from existing content is not supported"
                )));
            }
        }
        let mut attributes = Map::new();
        for key in STORED_STRINGS {
            if let Some(v) = opt_str(body, key)?.filter(|s| !s.is_empty()) {
                attributes.insert(key.to_string(), Value::from(v));
            }
        }
        if let Some(f) = attributes.get("flavor").and_then(Value::as_str) {
            if !FLAVORS.contains(&f) {
                return Err(ServiceError::BadRequest(
                    "flavor must be \"regular\" or \"filedirect\"".into(),
                ));
            }
        }
        let id = uuid::Uuid::new_v4().to_string();
        let spec = JobSpec::VolumeCreate(CreateVolumeArgs {
            name: name.as_str().to_string(),
            size,
            policy: policy.name.clone(),
            kind,
        });
        let job = self.new_job(caller, spec, &id);
        let volume = NewVolume {
            id: id.clone(),
            tenant_id: caller.tenant_id,
            name: name.into_string(),
            kind,
            size,
            policy_id: policy.id,
            zone,
            attributes,
            now_ms: job.now_ms,
        };
        let job_id = self.store.create_volume(&volume, &job).await?;
        self.jobs.submit(job_id);
        Ok(Started {
            job_id,
            object_id: id,
        })
    }

    /// The volume as stored now (not cached), once admission is held.
    async fn fresh_volume(&self, volume: &Volume) -> ServiceResult<Volume> {
        self.store
            .volume_by_id(&volume.id)
            .await?
            .ok_or_else(|| volume_not_found(&volume.name))
    }

    pub async fn delete_volume(
        &self,
        caller: &Caller,
        name: &str,
        force: bool,
    ) -> ServiceResult<Started> {
        let volume = self.get_volume(caller, name).await?;
        let _admission = self.admission.lock().await;
        let volume = self.fresh_volume(&volume).await?;
        self.ensure_idle(&volume.id, &volume.name, BlockedOperation::DataMovement)
            .await?;
        let attached: Vec<String> = self
            .store
            .list_attachments(caller.tenant_id, Some(&volume.id))
            .await?
            .into_iter()
            .map(|a| a.node)
            .collect();
        if !attached.is_empty() && !force {
            return Err(ServiceError::Conflict(format!(
                "volume '{}' is attached to node(s) {}; detach it first or delete with force=true",
                volume.name,
                attached.join(", ")
            )));
        }
        let spec = JobSpec::VolumeDelete(DeleteVolumeArgs {
            name: volume.name.clone(),
            force,
        });
        let job = self.new_job(caller, spec, &volume.id);
        let job_id = self
            .store
            .start_volume_job(&volume.id, VolumeState::Deleting, &job)
            .await?;
        self.jobs.submit(job_id);
        Ok(Started {
            job_id,
            object_id: volume.id,
        })
    }

    /// `PATCH /volumes/{volume}`: validates, then starts a
    /// `volume_modify_extend` job that plans and carries out the resize.
    pub async fn resize_volume(
        &self,
        caller: &Caller,
        name: &str,
        body: &Body,
    ) -> ServiceResult<Started> {
        let volume = self.get_volume(caller, name).await?;
        let view = volume_json(&volume);
        for key in FIXED_ON_RESIZE {
            let given = match body.get(key) {
                None | Some(Value::Null) => continue,
                Some(Value::String(s)) if s.is_empty() => continue,
                Some(v) => v,
            };
            if Some(given) != view.get(key) {
                return Err(ServiceError::BadRequest(format!(
                    "{key} cannot be changed: only size and allowdatamovement can be modified"
                )));
            }
        }
        let size = req_gib(body, "size")?;
        let allow_movement = opt_bool(body, "allowdatamovement")?.unwrap_or(false);
        validate_new_size(volume.size, size)
            .map_err(|e| ServiceError::BadRequest(e.to_string()))?;

        let _admission = self.admission.lock().await;
        // Checked again against the volume as it is now: another resize may
        // have finished while this request waited.
        let volume = self.fresh_volume(&volume).await?;
        self.ensure_idle(&volume.id, &volume.name, BlockedOperation::DataMovement)
            .await?;
        if volume.state != VolumeState::Ready {
            return Err(ServiceError::Conflict(format!(
                "volume '{}' is {} and cannot be resized",
                volume.name,
                volume.state.as_str()
            )));
        }
        validate_new_size(volume.size, size)
            .map_err(|e| ServiceError::BadRequest(e.to_string()))?;
        let spec = JobSpec::VolumeModifyExtend(ResizeVolumeArgs {
            size,
            allow_data_movement: allow_movement,
            from_size: volume.size,
        });
        let job = self.new_job(caller, spec, &volume.id);
        let job_id = self
            .store
            .start_volume_job(&volume.id, VolumeState::Resizing, &job)
            .await?;
        tracing::info!(job = job_id, volume = %volume.id, size, allow_movement, "resize requested");
        self.jobs.submit(job_id);
        Ok(Started {
            job_id,
            object_id: volume.id,
        })
    }
}
