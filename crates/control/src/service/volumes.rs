//! Volumes: create, read, resize, delete, recover what failed media lost
//! (`volume_recovery`), grow a filesystem again after a failed growth
//! (`volume_grow_filesystem`, by the agents that hold it mounted, or by svs
//! when nothing has it attached). Long work runs as jobs.

use super::attributes::VolumeAttributes;
use super::commands::{CreateVolume, DeleteVolume, FixedVolumeField, ResizeVolume};
use super::{Caller, ServiceError, ServiceResult, Services};
use crate::jobs::{CreatePreview, ResizePreview};
use svs_domain::{
    plan_changed_message, plan_changes, BlockedOperation, CloneSource, CreateVolumeArgs,
    DeleteVolumeArgs, GrowFilesystemArgs, JobSpec, PlacementRequest, PlanShape, RecoveryArgs,
    ResizeVolumeArgs, SnapshotState, VolumeState,
};
use svs_store::{NewJob, NewVolume, Page, Policy, SliceRow, Volume};

/// What a mutating call started.
pub struct Started {
    pub job_id: i64,
    pub object_id: String,
}

/// The placement a creation asks for (what its job places).
fn placement_of(request: &CreateVolume, policy: &Policy) -> PlacementRequest {
    PlacementRequest {
        size: request.size,
        resiliency: policy.resiliency,
        zone: request.zone.clone(),
    }
}

/// The zone a volume shows: the requested one, else its first slice's.
pub fn volume_zone(v: &Volume) -> &str {
    v.zone
        .as_deref()
        .or(v.first_zone.as_deref())
        .unwrap_or_default()
}

/// The value a volume shows for a field a resize may not change (what a
/// client that read the volume sends back; the view must agree).
pub fn fixed_field_value(
    v: &Volume,
    attributes: &VolumeAttributes,
    field: FixedVolumeField,
) -> String {
    match field {
        FixedVolumeField::Name => v.name.clone(),
        FixedVolumeField::Type => v.kind.as_str().to_string(),
        FixedVolumeField::Policy => v.policy.clone(),
        FixedVolumeField::Zone => volume_zone(v).to_string(),
        FixedVolumeField::ContentVolume => attributes.content().0.to_string(),
        FixedVolumeField::ContentSnapshot => attributes.content().1.to_string(),
        FixedVolumeField::Stored(f) => attributes.get(f).to_string(),
        FixedVolumeField::Flavor => attributes.flavor().as_str().to_string(),
    }
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

    /// The caller's volumes by name: all of them, or one page.
    pub async fn list_volumes(
        &self,
        caller: &Caller,
        page: Option<Page>,
    ) -> ServiceResult<Vec<Volume>> {
        Ok(self.store.list_volumes(caller.tenant_id, page).await?)
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
            now_ms: self.clock.now_ms(),
        }
    }

    /// Records a job on the volume, which takes `state`, and hands it to
    /// the runner.
    pub(super) async fn start_volume_job(
        &self,
        caller: &Caller,
        spec: JobSpec,
        volume_id: &str,
        state: VolumeState,
    ) -> ServiceResult<Started> {
        let job = self.new_job(caller, spec, volume_id);
        let job_id = self.store.start_volume_job(volume_id, state, &job).await?;
        self.jobs.submit(job_id);
        Ok(Started {
            job_id,
            object_id: volume_id.to_string(),
        })
    }

    pub async fn create_volume(
        &self,
        caller: &Caller,
        request: &CreateVolume,
        plan: Option<&PlanShape>,
    ) -> ServiceResult<Started> {
        let (policy, source) = self.check_create(caller, request).await?;
        if let Some(expected) = plan {
            let preview = crate::planning::preview_create(
                self.store.as_ref(),
                &placement_of(request, &policy),
            )
            .await?;
            let changes = plan_changes(expected, &preview.shape, &|id| id.to_string());
            if !changes.is_empty() {
                return Err(ServiceError::Conflict(plan_changed_message(&changes)));
            }
        }
        let id = uuid::Uuid::new_v4().to_string();
        let spec = JobSpec::VolumeCreate(CreateVolumeArgs {
            name: request.name.as_str().to_string(),
            size: request.size,
            policy: policy.name.clone(),
            kind: request.kind,
            source,
            plan: plan.map(PlanShape::token),
        });
        let job = self.new_job(caller, spec, &id);
        let volume = NewVolume {
            id: id.clone(),
            tenant_id: caller.tenant_id,
            name: request.name.as_str().to_string(),
            kind: request.kind,
            size: request.size,
            policy_id: policy.id,
            zone: request.zone.clone(),
            attributes: request.attributes.to_record(),
            now_ms: job.now_ms,
        };
        let job_id = self.store.create_volume(&volume, &job).await?;
        self.jobs.submit(job_id);
        Ok(Started {
            job_id,
            object_id: id,
        })
    }

    /// `POST /volumes?dryrun=true`: where the creation would place its
    /// slices now (the same checks and refusals as the request, a name in
    /// use too), changing nothing.
    pub async fn preview_create(
        &self,
        caller: &Caller,
        request: &CreateVolume,
    ) -> ServiceResult<CreatePreview> {
        let (policy, _source) = self.check_create(caller, request).await?;
        let name = request.name.as_str();
        if self.get_volume(caller, name).await.is_ok() {
            return Err(ServiceError::Conflict(format!(
                "a volume named '{name}' already exists"
            )));
        }
        Ok(
            crate::planning::preview_create(self.store.as_ref(), &placement_of(request, &policy))
                .await?,
        )
    }

    /// The checks of a creation that need the store: the policy, the
    /// zone, the clone's source. Answers the policy and the source.
    async fn check_create(
        &self,
        caller: &Caller,
        request: &CreateVolume,
    ) -> ServiceResult<(Policy, Option<CloneSource>)> {
        let policy = self
            .store
            .get_policy(caller.tenant_id, &request.policy)
            .await?
            .ok_or_else(|| {
                ServiceError::BadRequest(format!("policy '{}' does not exist", request.policy))
            })?;
        if let Some(zone) = &request.zone {
            let known = self
                .store
                .media_usage()
                .await?
                .iter()
                .any(|m| &m.record.medium.zone == zone);
            if !known {
                return Err(ServiceError::BadRequest(format!(
                    "zone '{zone}' has no media"
                )));
            }
        }
        let source = match &request.clone_from {
            None => None,
            Some(from) => {
                let source = self.get_volume(caller, &from.volume).await.map_err(|_| {
                    ServiceError::BadRequest(format!(
                        "contentvolume: volume '{}' does not exist",
                        from.volume
                    ))
                })?;
                let snapshot = self
                    .store
                    .get_snapshot(&source.id, &from.snapshot)
                    .await?
                    .ok_or_else(|| {
                        ServiceError::BadRequest(format!(
                            "contentsnapshot: snapshot '{}' of volume '{}' does not exist",
                            from.snapshot, source.name
                        ))
                    })?;
                if snapshot.state != SnapshotState::Ready {
                    return Err(ServiceError::Conflict(format!(
                        "snapshot '{}' is {}",
                        snapshot.name,
                        snapshot.state.as_str()
                    )));
                }
                if request.size < snapshot.volume_size {
                    return Err(ServiceError::BadRequest(format!(
                        "size must be at least the snapshot's size of {} GiB",
                        snapshot.volume_size
                    )));
                }
                Some(CloneSource {
                    volume_id: source.id,
                    snapshot_id: snapshot.id,
                })
            }
        };
        Ok((policy, source))
    }

    pub async fn delete_volume(
        &self,
        caller: &Caller,
        name: &str,
        request: &DeleteVolume,
    ) -> ServiceResult<Started> {
        let force = request.force;
        let volume = self.get_volume(caller, name).await?;
        let (_admission, volume) = self.admit(&volume, BlockedOperation::DataMovement).await?;
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
        let snapshots = self.store.volume_snapshots(&volume.id).await?;
        if !snapshots.is_empty() && !force {
            return Err(ServiceError::Conflict(format!(
                "volume '{}' has {} snapshot(s); delete them first or delete with force=true",
                volume.name,
                snapshots.len()
            )));
        }
        if let Some((id, job)) = self.clone_copying_from(&snapshots).await? {
            let name = snapshots
                .iter()
                .find(|s| s.id == id)
                .map_or(id.as_str(), |s| s.name.as_str());
            return Err(ServiceError::Conflict(format!(
                "snapshot '{name}' of volume '{}' is being copied into a new volume by job {job}; \
                 delete the volume when the copy ends",
                volume.name
            )));
        }
        let spec = JobSpec::VolumeDelete(DeleteVolumeArgs {
            name: volume.name.clone(),
            force,
        });
        self.start_volume_job(caller, spec, &volume.id, VolumeState::Deleting)
            .await
    }

    /// `PATCH /volumes/{volume}`: validates, then starts a
    /// `volume_modify_extend` job that plans and carries out the resize.
    /// Given a dry run's plan (`plan`), the resize is refused (409, naming
    /// what changed) unless it still plans the same, and its job carries
    /// out that plan or ends in Error.
    pub async fn resize_volume(
        &self,
        caller: &Caller,
        name: &str,
        request: &ResizeVolume,
        plan: Option<&PlanShape>,
    ) -> ServiceResult<Started> {
        let (_admission, volume) = self.admit_resize(caller, name, request).await?;
        let size = request.size;
        let allow_movement = request.allow_data_movement;
        if let Some(expected) = plan {
            if let Some(changed) = crate::planning::resize_plan_changed(
                self.store.as_ref(),
                &volume,
                size,
                allow_movement,
                expected,
            )
            .await?
            {
                return Err(ServiceError::Conflict(changed));
            }
        }
        let spec = JobSpec::VolumeModifyExtend(ResizeVolumeArgs {
            size,
            allow_data_movement: allow_movement,
            from_size: volume.size,
            plan: plan.map(PlanShape::token),
        });
        let started = self
            .start_volume_job(caller, spec, &volume.id, VolumeState::Resizing)
            .await?;
        tracing::info!(job = started.job_id, volume = %volume.id, size, allow_movement, "resize requested");
        Ok(started)
    }

    /// `PATCH /volumes/{volume}?dryrun=true`: what the resize would do now
    /// (the same checks and refusals as the request, then the plan),
    /// changing nothing.
    pub async fn preview_resize(
        &self,
        caller: &Caller,
        name: &str,
        request: &ResizeVolume,
    ) -> ServiceResult<(Volume, ResizePreview)> {
        let (admission, volume) = self.admit_resize(caller, name, request).await?;
        // Planning reads the figures; nothing is booked, so others may go on.
        drop(admission);
        let preview = self
            .jobs
            .preview_resize(&volume, request.size, request.allow_data_movement)
            .await?;
        Ok((volume, preview))
    }

    /// `POST /volumes/{volume}/recover`: starts a `volume_recovery` job.
    /// On a volume that lost nothing the job ends Done at once.
    pub async fn recover_volume(&self, caller: &Caller, volume: &str) -> ServiceResult<Started> {
        let v = self.get_volume(caller, volume).await?;
        let (_admission, v) = self
            .admit_ready(&v, BlockedOperation::VolumeRecovery)
            .await?;
        let spec = JobSpec::VolumeRecovery(RecoveryArgs {
            name: v.name.clone(),
        });
        self.start_volume_job(caller, spec, &v.id, v.state).await
    }

    /// Starts a `volume_grow_filesystem` job. 409 for a volume without a
    /// filesystem svs made, one that is not Ready, or one a job works on.
    pub async fn grow_volume_filesystem(
        &self,
        caller: &Caller,
        volume: &str,
    ) -> ServiceResult<Started> {
        let v = self.get_volume(caller, volume).await?;
        let _admission = self.admission_lock().await;
        let v = self.fresh_volume(&v).await?;
        let attributes = VolumeAttributes::from_record(&v.attributes);
        if attributes.filesystem.is_none() || !attributes.filesystem_provisioned {
            return Err(ServiceError::Conflict(format!(
                "volume '{}' has no filesystem made by svs to grow",
                v.name
            )));
        }
        if let Some(job) = self.store.active_volume_job(&v.id).await? {
            return Err(ServiceError::Conflict(format!(
                "volume '{}' is busy with job {} ({}); try again when it ends",
                v.name, job.id, job.kind
            )));
        }
        if v.state != VolumeState::Ready {
            return Err(ServiceError::Conflict(format!(
                "volume '{}' is {}",
                v.name,
                v.state.as_str()
            )));
        }
        let spec = JobSpec::VolumeGrowFilesystem(GrowFilesystemArgs {
            name: v.name.clone(),
            size: v.size,
        });
        self.start_volume_job(caller, spec, &v.id, v.state).await
    }
}
