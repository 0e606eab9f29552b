//! Media failure and volume recovery: an admin marks a medium failed (the
//! data plane notices the others, see `reconcile::MediaHealth`), and a
//! `volume_recovery` job rebuilds what a volume lost.

use super::volumes::Started;
use super::{Administrator, Caller, ServiceError, ServiceResult, Services};
use crate::exports::fail_medium;
use svs_domain::{BlockedOperation, JobSpec, RecoveryArgs, VolumeState};
use svs_store::{MediumUsage, StoreError};

impl Services {
    /// `PATCH /media/{media}` with `{"state": "Failed"}`: only an
    /// administrator may fail a medium; its slices are lost at once for
    /// every volume.
    pub(crate) async fn set_medium_failed(
        &self,
        admin: &Administrator,
        medium: &str,
    ) -> ServiceResult<MediumUsage> {
        fail_medium(self.store.as_ref(), &self.exports, medium)
            .await
            .map_err(|e| match e {
                StoreError::NotFound => {
                    ServiceError::NotFound(format!("media '{medium}' not found"))
                }
                other => other.into(),
            })?;
        tracing::warn!(
            medium,
            by = admin.caller().user_id,
            "medium marked failed by an administrator"
        );
        self.get_medium(medium).await
    }

    /// `POST /volumes/{volume}/recover`: starts a `volume_recovery` job.
    /// On a volume that lost nothing the job ends Done at once.
    pub async fn recover_volume(&self, caller: &Caller, volume: &str) -> ServiceResult<Started> {
        let v = self.get_volume(caller, volume).await?;
        let _admission = self.admission.lock().await;
        self.ensure_idle(&v.id, &v.name, BlockedOperation::VolumeRecovery)
            .await?;
        let v = self.fresh_volume(&v).await?;
        if v.state != VolumeState::Ready {
            return Err(ServiceError::Conflict(format!(
                "volume '{}' is {}",
                v.name,
                v.state.as_str()
            )));
        }
        let spec = JobSpec::VolumeRecovery(RecoveryArgs {
            name: v.name.clone(),
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
