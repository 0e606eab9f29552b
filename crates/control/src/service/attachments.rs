//! Attachments: a volume exported over NBD to one node. Create, modify and
//! delete run as jobs, and are refused while the volume's data is moving.

use super::commands::{CreateAttachment, ModifyAttachment};
use super::volumes::{volume_not_found, Started};
use super::{Caller, ServiceError, ServiceResult, Services};
use svs_domain::{AttachmentArgs, BlockedOperation, DetachArgs, JobSpec, SnapshotState};
use svs_store::{Attachment, NewAttachment, Volume};

/// Where a snapshot name is expected, the live volume.
pub const TOP: &str = svs_domain::LIVE_SNAPSHOT_NAME;

/// An attachment's NBD URI: where its node connects. A front on a storage
/// node is reached at the node's front address, with the scheme of svs
/// serve's own NBD server (`nbds://` when it offers TLS).
pub fn attachment_uri(a: &Attachment, nbd_base: &str) -> String {
    match &a.front_address {
        Some(address) => {
            let scheme = nbd_base.split_once("://").map_or("nbd", |(s, _)| s);
            format!("{scheme}://{address}/{}", a.export_name)
        }
        None => format!("{nbd_base}/{}", a.export_name),
    }
}

fn attachment_not_found(volume: &str, snapshot: &str, node: &str) -> ServiceError {
    if snapshot == TOP {
        ServiceError::NotFound(format!(
            "volume '{volume}' is not attached to node '{node}'"
        ))
    } else {
        ServiceError::NotFound(format!(
            "snapshot '{snapshot}' of volume '{volume}' is not attached to node '{node}'"
        ))
    }
}

/// The volume an attachment call names, and what of it is attached: `top`
/// or the snapshot's id.
struct Target {
    volume: Volume,
    snapshot: String,
}

/// 32 random bytes as hex: the export name is the capability to find it.
fn new_export_name() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

impl Services {
    async fn attachment_target(
        &self,
        caller: &Caller,
        volume: &str,
        snapshot: &str,
    ) -> ServiceResult<Target> {
        let v = self
            .store
            .get_volume(caller.tenant_id, volume)
            .await?
            .ok_or_else(|| volume_not_found(volume))?;
        if snapshot == TOP {
            return Ok(Target {
                volume: v,
                snapshot: TOP.to_string(),
            });
        }
        let s = self.find_snapshot(&v, snapshot).await?;
        Ok(Target {
            volume: v,
            snapshot: s.id,
        })
    }

    pub async fn create_attachment(
        &self,
        caller: &Caller,
        volume: &str,
        snapshot: &str,
        request: &CreateAttachment,
    ) -> ServiceResult<Started> {
        let Target {
            volume: v,
            snapshot: snapshot_id,
        } = self.attachment_target(caller, volume, snapshot).await?;
        let node = request.node.as_str();
        // Snapshots are images of an instant: attached read-only.
        let readonly = request.readonly || snapshot_id != TOP;
        let mountpoint = request.mountpoint.clone();
        let known = self.store.list_nodes().await?;
        let record = known
            .iter()
            .find(|n| n.name == node)
            .ok_or_else(|| ServiceError::BadRequest(format!("node '{node}' does not exist")))?;
        if record.address.is_none() {
            return Err(ServiceError::BadRequest(format!(
                "node '{node}' has no address: set one with PATCH /nodes/{node}"
            )));
        }
        let (_admission, v) = self
            .admit_ready(&v, BlockedOperation::AttachmentCreate)
            .await?;
        if snapshot_id != TOP {
            let s = self.find_snapshot(&v, &snapshot_id).await?;
            if s.state != SnapshotState::Ready {
                return Err(ServiceError::Conflict(format!(
                    "snapshot '{}' is {}",
                    s.name,
                    s.state.as_str()
                )));
            }
        }
        let spec = JobSpec::AttachmentCreate(AttachmentArgs {
            node: node.to_string(),
            readonly,
            mountpoint: mountpoint.clone(),
            snapshot: snapshot_id.clone(),
        });
        let job = self.new_job(caller, spec, &v.id);
        let job_id = self
            .store
            .create_attachment(
                &NewAttachment {
                    volume_id: v.id.clone(),
                    snapshot: snapshot_id,
                    node: node.to_string(),
                    tenant_id: caller.tenant_id,
                    readonly,
                    mountpoint,
                    export_name: new_export_name(),
                    now_ms: self.clock.now_ms(),
                    manager: request.manager,
                },
                &job,
            )
            .await?;
        self.jobs.submit(job_id);
        Ok(Started {
            job_id,
            object_id: v.id,
        })
    }

    pub async fn list_volume_attachments(
        &self,
        caller: &Caller,
        volume: &str,
        snapshot: Option<&str>,
    ) -> ServiceResult<Vec<Attachment>> {
        let target = self
            .attachment_target(caller, volume, snapshot.unwrap_or(TOP))
            .await?;
        let all = self
            .store
            .list_attachments(caller.tenant_id, Some(&target.volume.id))
            .await?;
        // The volume's own list holds every attachment; a snapshot's, its own.
        Ok(match snapshot {
            None => all,
            Some(_) => all
                .into_iter()
                .filter(|a| a.snapshot == target.snapshot)
                .collect(),
        })
    }

    pub async fn list_attachments(&self, caller: &Caller) -> ServiceResult<Vec<Attachment>> {
        Ok(self.store.list_attachments(caller.tenant_id, None).await?)
    }

    pub async fn get_attachment(
        &self,
        caller: &Caller,
        volume: &str,
        snapshot: &str,
        node: &str,
    ) -> ServiceResult<Attachment> {
        let target = self.attachment_target(caller, volume, snapshot).await?;
        self.store
            .get_attachment(&target.volume.id, &target.snapshot, node)
            .await?
            .ok_or_else(|| attachment_not_found(volume, snapshot, node))
    }

    pub async fn modify_attachment(
        &self,
        caller: &Caller,
        volume: &str,
        snapshot: &str,
        node: &str,
        request: &ModifyAttachment,
    ) -> ServiceResult<Started> {
        let current = self.get_attachment(caller, volume, snapshot, node).await?;
        let readonly = request.readonly.unwrap_or(current.readonly);
        if !readonly && current.snapshot != TOP {
            return Err(ServiceError::BadRequest(
                "a snapshot can only be attached read-only".into(),
            ));
        }
        let mountpoint = request
            .mountpoint
            .clone()
            .unwrap_or_else(|| current.mountpoint.clone());
        if readonly == current.readonly && mountpoint == current.mountpoint {
            return Err(ServiceError::BadRequest(format!(
                "nothing to change: the attachment is already {} with mountpoint '{mountpoint}'",
                if readonly { "read-only" } else { "read-write" }
            )));
        }
        let v = self
            .attachment_target(caller, volume, snapshot)
            .await?
            .volume;
        let (_admission, v) = self.admit(&v, BlockedOperation::AttachmentModify).await?;
        let spec = JobSpec::AttachmentModify(AttachmentArgs {
            node: node.to_string(),
            readonly,
            mountpoint,
            snapshot: current.snapshot,
        });
        self.start_volume_job(caller, spec, &v.id, v.state).await
    }

    pub async fn delete_attachment(
        &self,
        caller: &Caller,
        volume: &str,
        snapshot: &str,
        node: &str,
    ) -> ServiceResult<Started> {
        let current = self.get_attachment(caller, volume, snapshot, node).await?;
        let v = self
            .attachment_target(caller, volume, snapshot)
            .await?
            .volume;
        let (_admission, v) = self.admit(&v, BlockedOperation::AttachmentDelete).await?;
        let spec = JobSpec::AttachmentDelete(DetachArgs {
            node: node.to_string(),
            snapshot: current.snapshot.clone(),
        });
        let job = self.new_job(caller, spec, &v.id);
        let job_id = self.store.start_volume_job(&v.id, v.state, &job).await?;
        self.store
            .set_attachment_state(&v.id, &current.snapshot, node, "Detaching")
            .await?;
        self.jobs.submit(job_id);
        Ok(Started {
            job_id,
            object_id: v.id,
        })
    }
}
