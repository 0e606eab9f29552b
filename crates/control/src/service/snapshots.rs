//! Snapshots: point-in-time images of a volume. Create, delete and rollback
//! run as jobs on the volume; each is refused while the volume's data is
//! moving (the seed's guard), like every other operation it lists.

use super::attachments::TOP;
use super::commands::{CreateSnapshot, DeleteSnapshot, ModifySnapshot};
use super::volumes::Started;
use super::{Caller, ServiceError, ServiceResult, Services};
use svs_domain::{BlockedOperation, JobKind, JobSpec, SnapshotArgs, SnapshotState};
use svs_store::{NewSnapshot, Snapshot, Volume};

pub fn snapshot_not_found(volume: &str, snapshot: &str) -> ServiceError {
    ServiceError::NotFound(format!(
        "snapshot '{snapshot}' of volume '{volume}' not found"
    ))
}

fn args_of(s: &Snapshot) -> SnapshotArgs {
    SnapshotArgs {
        name: s.name.clone(),
        snapshot_id: s.id.clone(),
    }
}

impl Services {
    /// A snapshot of the volume by name or id.
    pub(super) async fn find_snapshot(
        &self,
        v: &Volume,
        snapshot: &str,
    ) -> ServiceResult<Snapshot> {
        self.store
            .get_snapshot(&v.id, snapshot)
            .await?
            .ok_or_else(|| snapshot_not_found(&v.name, snapshot))
    }

    /// The volume creation (clone) still copying from one of the
    /// snapshots, if any: (snapshot id, job id). One read of the jobs.
    pub(super) async fn clone_copying_from(
        &self,
        snapshots: &[Snapshot],
    ) -> ServiceResult<Option<(String, i64)>> {
        Ok(self
            .store
            .unfinished_jobs()
            .await?
            .into_iter()
            .filter(|j| j.kind() == Some(JobKind::VolumeCreate))
            .find_map(|j| match j.spec() {
                Ok(JobSpec::VolumeCreate(a)) => a
                    .source
                    .filter(|src| snapshots.iter().any(|s| s.id == src.snapshot_id))
                    .map(|src| (src.snapshot_id, j.id)),
                _ => None,
            }))
    }

    pub async fn create_snapshot(
        &self,
        caller: &Caller,
        volume: &str,
        request: &CreateSnapshot,
    ) -> ServiceResult<Started> {
        let name = request.name.as_str();
        if name == TOP {
            return Err(ServiceError::BadRequest(format!(
                "snapshot name '{TOP}' is reserved for the live volume"
            )));
        }
        let v = self.get_volume(caller, volume).await?;
        let (_admission, v) = self
            .admit_ready(&v, BlockedOperation::SnapshotCreate)
            .await?;
        let id = uuid::Uuid::new_v4().to_string();
        let spec = JobSpec::SnapshotCreate(SnapshotArgs {
            name: name.to_string(),
            snapshot_id: id.clone(),
        });
        let job = self.new_job(caller, spec, &v.id);
        let job_id = self
            .store
            .create_snapshot(
                &NewSnapshot {
                    id: id.clone(),
                    volume_id: v.id.clone(),
                    tenant_id: caller.tenant_id,
                    name: name.to_string(),
                    consistency: request.consistency,
                    volume_size: v.size,
                    attributes: request.attributes.clone(),
                    now_ms: job.now_ms,
                },
                &job,
            )
            .await?;
        self.jobs.submit(job_id);
        Ok(Started {
            job_id,
            object_id: id,
        })
    }

    pub async fn list_snapshots(
        &self,
        caller: &Caller,
        volume: &str,
    ) -> ServiceResult<Vec<Snapshot>> {
        let v = self.get_volume(caller, volume).await?;
        Ok(self
            .store
            .list_snapshots(caller.tenant_id, Some(&v.id))
            .await?)
    }

    pub async fn list_all_snapshots(&self, caller: &Caller) -> ServiceResult<Vec<Snapshot>> {
        Ok(self.store.list_snapshots(caller.tenant_id, None).await?)
    }

    pub async fn get_snapshot(
        &self,
        caller: &Caller,
        volume: &str,
        snapshot: &str,
    ) -> ServiceResult<Snapshot> {
        let v = self.get_volume(caller, volume).await?;
        self.find_snapshot(&v, snapshot).await
    }

    /// Renames the snapshot or changes its stored fields, at once (no job).
    pub async fn modify_snapshot(
        &self,
        caller: &Caller,
        volume: &str,
        snapshot: &str,
        request: &ModifySnapshot,
    ) -> ServiceResult<Snapshot> {
        let v = self.get_volume(caller, volume).await?;
        let s = self.find_snapshot(&v, snapshot).await?;
        let name = request
            .name
            .as_ref()
            .map_or(s.name.as_str(), |n| n.as_str());
        if name == TOP {
            return Err(ServiceError::BadRequest(format!(
                "snapshot name '{TOP}' is reserved for the live volume"
            )));
        }
        let (_admission, v) = self.admit(&v, BlockedOperation::SnapshotModify).await?;
        let mut attributes = s.attributes.clone();
        attributes.extend(request.attributes.clone());
        self.store.update_snapshot(&s.id, name, &attributes).await?;
        self.find_snapshot(&v, &s.id).await
    }

    pub async fn delete_snapshot(
        &self,
        caller: &Caller,
        volume: &str,
        snapshot: &str,
        request: &DeleteSnapshot,
    ) -> ServiceResult<Started> {
        let v = self.get_volume(caller, volume).await?;
        let s = self.find_snapshot(&v, snapshot).await?;
        let (_admission, v) = self.admit(&v, BlockedOperation::SnapshotDelete).await?;
        if let Some((_, job)) = self.clone_copying_from(std::slice::from_ref(&s)).await? {
            return Err(ServiceError::Conflict(format!(
                "snapshot '{}' is being copied into a new volume by job {job}; \
                 delete it when the copy ends",
                s.name
            )));
        }
        let attached: Vec<String> = self
            .store
            .list_attachments(caller.tenant_id, Some(&v.id))
            .await?
            .into_iter()
            .filter(|a| a.snapshot == s.id)
            .map(|a| a.node)
            .collect();
        if !attached.is_empty() && !request.force {
            return Err(ServiceError::Conflict(format!(
                "snapshot '{}' is attached to node(s) {}; detach it first or delete with force=true",
                s.name,
                attached.join(", ")
            )));
        }
        let job = self.new_job(caller, JobSpec::SnapshotDelete(args_of(&s)), &v.id);
        let job_id = self
            .store
            .start_snapshot_job(&s.id, Some(SnapshotState::Deleting), &job)
            .await?;
        self.jobs.submit(job_id);
        Ok(Started {
            job_id,
            object_id: s.id,
        })
    }

    /// Returns the volume to the snapshot's content. Refused while the live
    /// volume is attached read-write: its node would see its data change
    /// underneath it.
    pub async fn rollback_snapshot(
        &self,
        caller: &Caller,
        volume: &str,
        snapshot: &str,
    ) -> ServiceResult<Started> {
        let v = self.get_volume(caller, volume).await?;
        let s = self.find_snapshot(&v, snapshot).await?;
        let (_admission, v) = self.admit(&v, BlockedOperation::SnapshotRollback).await?;
        if s.state != SnapshotState::Ready {
            return Err(ServiceError::Conflict(format!(
                "snapshot '{}' is {}",
                s.name,
                s.state.as_str()
            )));
        }
        let writers: Vec<String> = self
            .store
            .list_attachments(caller.tenant_id, Some(&v.id))
            .await?
            .into_iter()
            .filter(|a| a.snapshot == TOP && !a.readonly)
            .map(|a| a.node)
            .collect();
        if !writers.is_empty() {
            return Err(ServiceError::Conflict(format!(
                "volume '{}' is attached read-write to node(s) {}; detach it or make the \
                 attachment read-only before a rollback",
                v.name,
                writers.join(", ")
            )));
        }
        let job = self.new_job(caller, JobSpec::SnapshotRollback(args_of(&s)), &v.id);
        let job_id = self.store.start_snapshot_job(&s.id, None, &job).await?;
        self.jobs.submit(job_id);
        Ok(Started {
            job_id,
            object_id: v.id,
        })
    }
}
