//! Attachments: a volume exported over NBD to one node. Create, modify and
//! delete run as jobs, and are refused while the volume's data is moving.

use super::fields::{opt_bool, opt_str, req_str, Body};
use super::volumes::{volume_not_found, Started};
use super::{now_ms, Caller, ServiceError, ServiceResult, Services};
use serde_json::{json, Value};
use std::net::IpAddr;
use svs_domain::{AttachmentArgs, BlockedOperation, DetachArgs, JobSpec, VolumeState};
use svs_store::{Attachment, NewAttachment, NodeRecord, Volume};

/// The only snapshot that exists so far: the live volume.
pub const TOP: &str = "top";

pub fn attachment_json(a: &Attachment, nbd_base: &str) -> Value {
    let (status, progress) = match &a.job {
        Some((_, progress, status)) if a.state != "Attached" => (status.clone(), *progress),
        _ => (a.state.clone(), 100),
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
        "uri": format!("{nbd_base}/{}", a.export_name),
    })
}

pub fn node_json(n: &NodeRecord) -> Value {
    json!({"name": n.name, "zone": n.zone, "address": n.address.clone().unwrap_or_default()})
}

fn snapshot_must_be_top(snapshot: &str) -> ServiceResult<()> {
    if snapshot == TOP {
        Ok(())
    } else {
        Err(ServiceError::NotFound(format!(
            "snapshot '{snapshot}' not found"
        )))
    }
}

fn attachment_not_found(volume: &str, node: &str) -> ServiceError {
    ServiceError::NotFound(format!(
        "volume '{volume}' is not attached to node '{node}'"
    ))
}

/// 32 random bytes as hex: the export name is the capability to find it.
fn new_export_name() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

impl Services {
    async fn attachment_volume(
        &self,
        caller: &Caller,
        volume: &str,
        snapshot: &str,
    ) -> ServiceResult<Volume> {
        let v = self
            .store
            .get_volume(caller.tenant_id, volume)
            .await?
            .ok_or_else(|| volume_not_found(volume))?;
        snapshot_must_be_top(snapshot)?;
        Ok(v)
    }

    pub async fn create_attachment(
        &self,
        caller: &Caller,
        volume: &str,
        snapshot: &str,
        body: &Body,
    ) -> ServiceResult<Started> {
        let v = self.attachment_volume(caller, volume, snapshot).await?;
        let node = req_str(body, "node")?;
        let readonly = opt_bool(body, "readonly")?.unwrap_or(false);
        let mountpoint = opt_str(body, "mountpoint")?.unwrap_or("").to_string();
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
        let _admission = self.admission.lock().await;
        self.ensure_idle(&v.id, &v.name, BlockedOperation::AttachmentCreate)
            .await?;
        if v.state != VolumeState::Ready {
            return Err(ServiceError::Conflict(format!(
                "volume '{}' is {}",
                v.name,
                v.state.as_str()
            )));
        }
        let spec = JobSpec::AttachmentCreate(AttachmentArgs {
            node: node.to_string(),
            readonly,
            mountpoint: mountpoint.to_string(),
        });
        let job = self.new_job(caller, spec, &v.id);
        let job_id = self
            .store
            .create_attachment(
                &NewAttachment {
                    volume_id: v.id.clone(),
                    node: node.to_string(),
                    tenant_id: caller.tenant_id,
                    readonly,
                    mountpoint,
                    export_name: new_export_name(),
                    now_ms: now_ms(),
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
        let v = self
            .attachment_volume(caller, volume, snapshot.unwrap_or(TOP))
            .await?;
        Ok(self
            .store
            .list_attachments(caller.tenant_id, Some(&v.id))
            .await?)
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
        let v = self.attachment_volume(caller, volume, snapshot).await?;
        self.store
            .get_attachment(&v.id, node)
            .await?
            .ok_or_else(|| attachment_not_found(volume, node))
    }

    pub async fn modify_attachment(
        &self,
        caller: &Caller,
        volume: &str,
        snapshot: &str,
        node: &str,
        body: &Body,
    ) -> ServiceResult<Started> {
        let current = self.get_attachment(caller, volume, snapshot, node).await?;
        let readonly = opt_bool(body, "readonly")?.unwrap_or(current.readonly);
        let mountpoint = opt_str(body, "mountpoint")?
            .map(str::to_string)
            .unwrap_or(current.mountpoint.clone());
        let v = self.attachment_volume(caller, volume, snapshot).await?;
        let _admission = self.admission.lock().await;
        self.ensure_idle(&v.id, &v.name, BlockedOperation::AttachmentModify)
            .await?;
        let spec = JobSpec::AttachmentModify(AttachmentArgs {
            node: node.to_string(),
            readonly,
            mountpoint,
        });
        let job = self.new_job(caller, spec, &v.id);
        let job_id = self.store.start_volume_job(&v.id, v.state, &job).await?;
        self.jobs.submit(job_id);
        Ok(Started {
            job_id,
            object_id: v.id,
        })
    }

    pub async fn delete_attachment(
        &self,
        caller: &Caller,
        volume: &str,
        snapshot: &str,
        node: &str,
    ) -> ServiceResult<Started> {
        self.get_attachment(caller, volume, snapshot, node).await?;
        let v = self.attachment_volume(caller, volume, snapshot).await?;
        let _admission = self.admission.lock().await;
        self.ensure_idle(&v.id, &v.name, BlockedOperation::AttachmentDelete)
            .await?;
        let spec = JobSpec::AttachmentDelete(DetachArgs {
            node: node.to_string(),
        });
        let job = self.new_job(caller, spec, &v.id);
        let job_id = self.store.start_volume_job(&v.id, v.state, &job).await?;
        self.store
            .set_attachment_state(&v.id, node, "Detaching")
            .await?;
        self.jobs.submit(job_id);
        Ok(Started {
            job_id,
            object_id: v.id,
        })
    }

    pub async fn list_node_records(&self) -> ServiceResult<Vec<NodeRecord>> {
        Ok(self.store.list_nodes().await?)
    }

    /// `PATCH /nodes/{node}` `{"address": "10.0.0.5"}` (empty: no address).
    pub async fn set_node_address(&self, node: &str, body: &Body) -> ServiceResult<NodeRecord> {
        let address = match opt_str(body, "address")? {
            None => return Err(ServiceError::BadRequest("address is required".into())),
            Some("") => None,
            Some(a) => Some(a.parse::<IpAddr>().map_err(|_| {
                ServiceError::BadRequest(format!("address '{a}' is not an IP address"))
            })?),
        };
        let text = address.map(|a| a.to_string());
        self.store
            .set_node_address(node, text.as_deref())
            .await
            .map_err(|e| match e {
                svs_store::StoreError::NotFound => {
                    ServiceError::NotFound(format!("node '{node}' not found"))
                }
                other => other.into(),
            })?;
        self.exports.set_node_address(node, address);
        self.store
            .list_nodes()
            .await?
            .into_iter()
            .find(|n| n.name == node)
            .ok_or_else(|| ServiceError::NotFound(format!("node '{node}' not found")))
    }
}
