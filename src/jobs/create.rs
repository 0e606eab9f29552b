//! `volume_create`: place the volume's slices, then create their files.

use super::{slice_key, step_progress, JobContext, JobError};
use svs_domain::{place_volume, PlacementRequest, GIB};
use svs_store::Job;
use tracing::{error, warn};

pub(super) async fn create_volume(ctx: &JobContext, job: &Job) -> Result<(), JobError> {
    let volume = ctx.volume(job).await?;
    let mut slices = ctx.store.volume_slices(&volume.id).await?;
    if slices.is_empty() {
        let _booking = ctx.allocation.lock().await;
        let media = ctx.media_states().await?;
        let request = PlacementRequest {
            size: volume.size,
            resiliency: volume.resiliency,
            zone: volume.zone.clone(),
        };
        match place_volume(&media, &request) {
            Ok(placements) => {
                slices = ctx.store.place_slices(&volume.id, &placements).await?;
            }
            Err(e) => {
                // Nothing was allocated: the volume is not created.
                ctx.store.delete_volume(&volume.id).await?;
                return Err(JobError::Failed(format!(
                    "Could not create volume '{}': {e}",
                    volume.name
                )));
            }
        }
    }
    let total = slices.len().max(1);
    for (i, row) in slices.iter().enumerate() {
        ctx.check_stopping()?;
        let key = slice_key(&volume.id, &row.slice);
        let medium = row.slice.medium.clone();
        let bytes = row.slice.size * GIB;
        ctx.blocking(move |dp| dp.create_slice(&medium, &key, bytes))
            .await
            .map_err(|e| e.context(format!("Could not create volume '{}'", volume.name)))?;
        ctx.progress(
            job,
            step_progress(i + 1, total),
            &format!("Created slice {} of {total}", i + 1),
        )
        .await?;
    }
    ctx.done(
        job,
        format!(
            "Volume '{}' created: {} GiB in {} slice(s)",
            volume.name,
            volume.size,
            slices.len()
        ),
    )
    .await
}

/// Best-effort removal of a volume whose creation failed: a volume is not
/// kept half-made.
pub(super) async fn discard_volume(ctx: &JobContext, volume_id: &str) {
    let slices = match ctx.store.volume_slices(volume_id).await {
        Ok(slices) => slices,
        Err(e) => {
            error!(error = %e, "cannot list slices of a failed volume");
            return;
        }
    };
    for row in &slices {
        let key = slice_key(volume_id, &row.slice);
        let medium = row.slice.medium.clone();
        if let Err(e) = ctx.blocking(move |dp| dp.delete_slice(&medium, &key)).await {
            warn!(error = %e, "cannot remove slice of a failed volume");
        }
    }
    if let Err(e) = ctx.store.delete_volume(volume_id).await {
        error!(error = %e, "cannot remove failed volume");
    }
}
