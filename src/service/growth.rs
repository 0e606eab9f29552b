//! `POST /volumes/{volume}/grow-filesystem`: after a filesystem growth
//! failed (the volume shows `filesystemsize` below its `size`), a
//! `volume_grow_filesystem` job grows it again: by the agents that hold it
//! mounted, or by svs when nothing has it attached.

use super::volumes::Started;
use super::{Caller, ServiceError, ServiceResult, Services};
use crate::attributes::VolumeAttributes;
use svs_domain::{GrowFilesystemArgs, JobSpec, VolumeState};

impl Services {
    /// Starts a `volume_grow_filesystem` job. 409 for a volume without a
    /// filesystem svs made, one that is not Ready, or one a job works on.
    pub async fn grow_volume_filesystem(
        &self,
        caller: &Caller,
        volume: &str,
    ) -> ServiceResult<Started> {
        let v = self.get_volume(caller, volume).await?;
        let _admission = self.admission.lock().await;
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
        let job = self.new_job(caller, spec, &v.id);
        let job_id = self.store.start_volume_job(&v.id, v.state, &job).await?;
        self.jobs.submit(job_id);
        Ok(Started {
            job_id,
            object_id: v.id,
        })
    }
}
