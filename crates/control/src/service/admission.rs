//! Admission of work on a volume: "check the volume is free, then start a
//! job on it" under one lock, so two requests cannot both pass the check.
//! Every request that starts a job on an existing volume opens the same
//! way: look the volume up, take the lock, refuse it if a job works on it,
//! read it again as stored now (and, for most, require it Ready).

use super::attributes::VolumeAttributes;
use super::commands::ResizeVolume;
use super::volumes::{fixed_field_value, volume_not_found};
use super::Caller;
use super::{ServiceError, ServiceResult, Services};
use svs_domain::{
    ensure_not_moving, time_left_secs, validate_new_size, ActiveMovement, BlockedOperation,
    VolumeState,
};
use svs_store::Volume;
use tokio::sync::MutexGuard;

/// The admission lock, held until this is dropped: bind it to a named
/// variable (`_admission`) for as long as the job is being started.
pub(crate) struct Admission<'a> {
    _held: MutexGuard<'a, ()>,
}

impl Services {
    /// Takes the admission lock and refuses `op` while a job works on the
    /// volume; returns the lock and the volume read again under it.
    pub(crate) async fn admit(
        &self,
        volume: &Volume,
        op: BlockedOperation,
    ) -> ServiceResult<(Admission<'_>, Volume)> {
        let held = self.admission_lock().await;
        self.ensure_idle(&volume.id, &volume.name, op).await?;
        let volume = self.fresh_volume(volume).await?;
        Ok((held, volume))
    }

    /// `admit`, and the volume must be Ready (409 `volume '<name>' is
    /// <state>` otherwise).
    pub(crate) async fn admit_ready(
        &self,
        volume: &Volume,
        op: BlockedOperation,
    ) -> ServiceResult<(Admission<'_>, Volume)> {
        let (held, v) = self.admit(volume, op).await?;
        if v.state != VolumeState::Ready {
            return Err(ServiceError::Conflict(format!(
                "volume '{}' is {}",
                v.name,
                v.state.as_str()
            )));
        }
        Ok((held, v))
    }

    /// The admission lock alone, for an opening of its own (the filesystem
    /// growth checks its own busy rule).
    pub(crate) async fn admission_lock(&self) -> Admission<'_> {
        Admission {
            _held: self.admission.lock().await,
        }
    }

    /// The volume as stored now (not cached), once admission is held.
    pub(crate) async fn fresh_volume(&self, volume: &Volume) -> ServiceResult<Volume> {
        self.store
            .volume_by_id(&volume.id)
            .await?
            .ok_or_else(|| volume_not_found(&volume.name))
    }

    /// Refuses `op` on a volume that any job is working on: a data movement
    /// through the shared guard (naming the job), any other job with 409.
    pub(crate) async fn ensure_idle(
        &self,
        volume_id: &str,
        volume_name: &str,
        op: BlockedOperation,
    ) -> ServiceResult<()> {
        let Some(job) = self.store.active_volume_job(volume_id).await? else {
            return Ok(());
        };
        let now_ms = self.clock.now_ms();
        ensure_not_moving(op, moving(&job, volume_name, now_ms).as_ref())?;
        Err(ServiceError::Conflict(format!(
            "volume '{volume_name}' is busy with job {} ({}); try again when it ends",
            job.id, job.kind
        )))
    }

    /// The checks of a resize request: fixed fields unchanged, nothing
    /// blocking, the volume Ready and whole, then the size against the
    /// volume as it is now (another resize may have finished while this
    /// request waited; once the job is started the volume is Resizing, so
    /// its size cannot change under the job). Answers the admission (held
    /// while a job is started) and the volume as it is now.
    pub(super) async fn admit_resize(
        &self,
        caller: &Caller,
        name: &str,
        request: &ResizeVolume,
    ) -> ServiceResult<(Admission<'_>, Volume)> {
        let volume = self.get_volume(caller, name).await?;
        let attributes = VolumeAttributes::from_record(&volume.attributes);
        for (field, given) in &request.repeated {
            if *given != fixed_field_value(&volume, &attributes, *field) {
                return Err(ServiceError::BadRequest(format!(
                    "{} cannot be changed: only size and allowdatamovement can be modified",
                    field.wire_name()
                )));
            }
        }
        let (admission, volume) = self.admit(&volume, BlockedOperation::DataMovement).await?;
        if volume.state != VolumeState::Ready {
            return Err(ServiceError::Conflict(format!(
                "volume '{}' is {} and cannot be resized",
                volume.name,
                volume.state.as_str()
            )));
        }
        if volume.lost_slices > 0 {
            return Err(ServiceError::Conflict(format!(
                "volume '{}' lost {} slice(s) on failed media; recover it before resizing",
                volume.name, volume.lost_slices
            )));
        }
        validate_new_size(volume.size, request.size)
            .map_err(|e| ServiceError::BadRequest(e.to_string()))?;
        Ok((admission, volume))
    }
}

/// The data movement a volume's active job is carrying, if it is one, with
/// the time it still needs at the pace it kept since it started (its
/// progress counts the bytes its copies moved).
fn moving(job: &svs_store::Job, volume_name: &str, now_ms: i64) -> Option<ActiveMovement> {
    job.data_movement.then(|| ActiveMovement {
        volume_name: volume_name.to_string(),
        job_id: job.id,
        left_secs: job
            .starttime_ms
            .and_then(|started| time_left_secs(job.progress, now_ms - started)),
        cancelling: job.cancel_requested,
        paused: job.paused || job.status.starts_with("Paused"),
    })
}
