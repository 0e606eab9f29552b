//! Jobs: what the caller's tenant started, read back, cancelled or removed.

use super::commands::ListJobs;
use super::{Caller, ServiceError, ServiceResult, Services};
use svs_domain::JobKind;
use svs_store::{Job, JobFilter, JobSteering, ResizeStep, StepState};

/// One slice of a data movement or a recovery, with its own outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceOutcome {
    /// `c1-k0`.
    pub slice: String,
    pub from: String,
    pub to: String,
    /// `moved` (`rebuilt`), `copying`, `not started`, `not moved`
    /// (`not rebuilt`: the job ended first), `failed`, `moving back`,
    /// `moved back`.
    pub outcome: &'static str,
    /// Why its last copy failed: `target full`, `node unreachable`,
    /// `source read error`, `verification mismatch`, ...
    pub cause: Option<String>,
    pub failures: u32,
}

/// Each moving slice's outcome, from the job's steps (growths in place
/// are not listed): `label` names a slice by its id.
pub fn slice_outcomes(
    job: &Job,
    steps: &[ResizeStep],
    label: &dyn Fn(i64) -> String,
) -> Vec<SliceOutcome> {
    let rebuild = job.kind() == Some(JobKind::VolumeRecovery);
    let running = !job.state.is_finished();
    let mut copying_seen = false;
    let mut out = Vec::new();
    for step in steps {
        let Some(to) = &step.to_medium else {
            continue;
        };
        let outcome = match (step.undo, step.state) {
            (true, StepState::Done) => "moved back",
            (true, _) => "moving back",
            (false, StepState::Done | StepState::Switched) if rebuild => "rebuilt",
            (false, StepState::Done | StepState::Switched) => "moved",
            (false, StepState::Planned) if !running && step.failure.is_some() => "failed",
            (false, StepState::Planned) if !running && rebuild => "not rebuilt",
            (false, StepState::Planned) if !running => "not moved",
            (false, StepState::Planned) if !copying_seen => {
                copying_seen = true;
                "copying"
            }
            (false, StepState::Planned) => "not started",
        };
        out.push(SliceOutcome {
            slice: label(step.slice_id),
            from: step.from_medium.clone(),
            to: to.clone(),
            outcome,
            cause: step.failure.clone(),
            failures: step.failures,
        });
    }
    out
}

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

    /// The per-slice outcomes of a data movement or a recovery (empty for
    /// other jobs, and before the job planned).
    pub async fn job_slices(&self, job: &Job) -> ServiceResult<Vec<SliceOutcome>> {
        if !job.kind().is_some_and(|k| k.steerable()) {
            return Ok(Vec::new());
        }
        let steps = self.store.resize_steps(job.id).await?;
        if steps.iter().all(|s| s.to_medium.is_none()) {
            return Ok(Vec::new());
        }
        if job.kind().is_some_and(|k| k.moves_many_volumes()) {
            // Slices of many volumes: each named with its volume.
            let slices = self.store.step_slices(job.id).await?;
            let label = |id: i64| {
                slices.iter().find(|s| s.slice_id == id).map_or_else(
                    || id.to_string(),
                    |s| crate::jobs::slice_of_volume(s.copy, s.column, &s.volume_name),
                )
            };
            return Ok(slice_outcomes(job, &steps, &label));
        }
        let rows = self.store.volume_slices(&job.object).await?;
        let label = |id: i64| crate::jobs::slice_label(&rows, id);
        Ok(slice_outcomes(job, &steps, &label))
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
                "job {} ({}) cannot be cancelled: only a volume's creation, resize or recovery, \
                 or a drain or rebalance of media can be; it ends on its own, then DELETE \
                 removes its record",
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
        if steering == &JobSteering::default() {
            // Nothing asked: the job as it is.
            return Ok(job);
        }
        if job.state.is_finished() {
            return Err(ServiceError::Conflict(format!(
                "job {} has ended ({}): there is nothing to pause, resume or throttle",
                job.id,
                job.state.as_str()
            )));
        }
        if !job.copies_data() {
            return Err(ServiceError::Conflict(format!(
                "job {} ({}) cannot be paused or given a rate: only a data movement \
                 (volume_modify_extend with allowdatamovement, media_drain, media_rebalance) \
                 or a recovery (volume_recovery) can be",
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

#[cfg(test)]
mod tests {
    use super::*;
    use svs_domain::JobState;

    fn step(id: i64, state: StepState, undo: bool, failure: Option<&str>) -> ResizeStep {
        ResizeStep {
            id,
            job_id: 1,
            slice_id: id,
            from_medium: format!("from-{id}"),
            to_medium: Some(format!("to-{id}")),
            old_size: 1,
            new_size: 2,
            state,
            checkpoint: None,
            undo,
            failure: failure.map(str::to_string),
            failures: u32::from(failure.is_some()),
        }
    }

    fn job(kind: &str, state: JobState) -> Job {
        Job {
            id: 1,
            tenant_id: 1,
            kind: kind.into(),
            object: "v".into(),
            object_name: "v".into(),
            args: serde_json::json!({}),
            state,
            status: String::new(),
            progress: 0,
            starttime_ms: None,
            endtime_ms: None,
            user_id: 1,
            username: String::new(),
            useremail: String::new(),
            details: Vec::new(),
            data_movement: true,
            created_ms: 0,
            cancel_requested: false,
            committed: false,
            paused: false,
            movement_rate: None,
        }
    }

    fn outcomes(job: &Job, steps: &[ResizeStep]) -> Vec<(&'static str, Option<String>)> {
        slice_outcomes(job, steps, &|id| format!("s{id}"))
            .into_iter()
            .map(|o| (o.outcome, o.cause))
            .collect()
    }

    #[test]
    fn each_slice_of_a_movement_has_its_own_outcome() {
        let mut growth = step(9, StepState::Planned, false, None);
        growth.to_medium = None;
        let steps = [
            step(1, StepState::Done, false, None),
            step(2, StepState::Planned, false, Some("verification mismatch")),
            step(3, StepState::Planned, false, None),
            growth,
        ];
        let running = job("volume_modify_extend", JobState::Running);
        assert_eq!(
            outcomes(&running, &steps),
            [
                ("moved", None),
                ("copying", Some("verification mismatch".into())),
                ("not started", None)
            ]
        );
        let failed = job("volume_modify_extend", JobState::Error);
        assert_eq!(
            outcomes(&failed, &steps),
            [
                ("moved", None),
                ("failed", Some("verification mismatch".into())),
                ("not moved", None)
            ]
        );
        let recovery = job("volume_recovery", JobState::Error);
        assert_eq!(outcomes(&recovery, &steps)[0].0, "rebuilt");
        assert_eq!(outcomes(&recovery, &steps)[2].0, "not rebuilt");
        let undone = [
            step(1, StepState::Done, false, None),
            step(4, StepState::Done, true, None),
        ];
        assert_eq!(
            outcomes(&failed, &undone),
            [("moved", None), ("moved back", None)]
        );
    }
}
