//! Jobs: what the caller's tenant started, read back, cancelled or removed.

use super::commands::ListJobs;
use super::{Caller, ServiceError, ServiceResult, Services};
use svs_store::{Job, JobFilter, JobSteering};

/// What `DELETE /jobs/{job}` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobRemoval {
    /// The job was running or pending: it stops and is undone, then ends
    /// with status `Cancelled`.
    Cancelling,
    /// The job had ended: its record is gone.
    Deleted,
}

impl Services {
    pub async fn list_jobs(&self, caller: &Caller, request: &ListJobs) -> ServiceResult<Vec<Job>> {
        let filter = JobFilter {
            kind: request.kind.clone(),
            object: request.object.clone(),
            state: request.state,
            page: request.page,
            count: request.count,
        };
        Ok(self.store.list_jobs(caller.tenant_id, &filter).await?)
    }

    pub async fn get_job(&self, caller: &Caller, id: &str) -> ServiceResult<Job> {
        let not_found = || ServiceError::NotFound(format!("job '{id}' not found"));
        let id: i64 = id.parse().map_err(|_| not_found())?;
        self.store
            .get_job(caller.tenant_id, id)
            .await?
            .ok_or_else(not_found)
    }

    /// `DELETE /jobs/{job}`: cancels a pending or running job (a volume's
    /// creation, resize or recovery), or removes the record of one that
    /// ended. The holder of the job, on whichever instance, stops it at its
    /// next safe point and undoes it.
    pub async fn remove_job(&self, caller: &Caller, id: &str) -> ServiceResult<JobRemoval> {
        let job = self.get_job(caller, id).await?;
        if job.state.is_finished() {
            return if self.store.delete_job(caller.tenant_id, job.id).await? {
                Ok(JobRemoval::Deleted)
            } else {
                Err(ServiceError::NotFound(format!("job '{id}' not found")))
            };
        }
        if !job.kind().is_some_and(|k| k.cancellable()) {
            return Err(ServiceError::Conflict(format!(
                "job {} ({}) cannot be cancelled: only a volume's creation, resize or recovery \
                 can be; it ends on its own, then DELETE removes its record",
                job.id, job.kind
            )));
        }
        let now = self
            .store
            .request_job_cancel(caller.tenant_id, job.id, self.clock.now_ms())
            .await?
            .ok_or_else(|| ServiceError::NotFound(format!("job '{id}' not found")))?;
        if now.cancel_requested {
            tracing::info!(job = job.id, "cancel requested");
            // Held here: it stops now; held elsewhere: its holder sees the
            // cancel in the store within a second.
            self.jobs.cancel(job.id);
            return Ok(JobRemoval::Cancelling);
        }
        Err(ServiceError::Conflict(if now.state.is_finished() {
            format!(
                "job {} ended ({}) before it could be cancelled; DELETE it again to remove its record",
                job.id,
                now.state.as_str()
            )
        } else {
            format!(
                "job {} is past its point of no return ({}): it finishes and can no longer be \
                 cancelled",
                job.id, now.status
            )
        }))
    }

    /// `PATCH /jobs/{job}`: pauses, resumes or sets the copy rate of a data
    /// movement or a recovery. Recorded in the store; the instance holding
    /// the job applies it within a second (this one at once).
    pub async fn steer_job(
        &self,
        caller: &Caller,
        id: &str,
        steering: &JobSteering,
    ) -> ServiceResult<Job> {
        let job = self.get_job(caller, id).await?;
        if job.state.is_finished() {
            return Err(ServiceError::Conflict(format!(
                "job {} has ended ({}): there is nothing to pause, resume or throttle",
                job.id,
                job.state.as_str()
            )));
        }
        let moves_data =
            job.kind() == Some(svs_domain::JobKind::VolumeRecovery) || job.data_movement;
        if !job.kind().is_some_and(|k| k.steerable()) || !moves_data {
            return Err(ServiceError::Conflict(format!(
                "job {} ({}) cannot be paused or given a rate: only a data movement \
                 (volume_modify_extend with allowdatamovement) or a recovery \
                 (volume_recovery) can be",
                job.id, job.kind
            )));
        }
        if job.cancel_requested {
            return Err(ServiceError::Conflict(format!(
                "job {} is being cancelled",
                job.id
            )));
        }
        if job.committed && steering.paused == Some(true) {
            return Err(ServiceError::Conflict(format!(
                "job {} is past its point of no return ({}): it finishes and can no longer be \
                 paused",
                job.id, job.status
            )));
        }
        let now = self
            .store
            .steer_job(caller.tenant_id, job.id, steering, self.clock.now_ms())
            .await?
            .ok_or_else(|| ServiceError::NotFound(format!("job '{id}' not found")))?;
        tracing::info!(job = job.id, paused = ?steering.paused, rate = ?steering.movement_rate, "job steered");
        self.jobs.steer_now();
        Ok(now)
    }
}
