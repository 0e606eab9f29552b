//! `volume_delete`: close the volume's exports, remove its slice files, then
//! its record.

use super::{slice_key, step_progress, JobContext, JobError};
use svs_store::Job;

pub(super) async fn delete_volume(ctx: &JobContext, job: &Job) -> Result<(), JobError> {
    let Some(volume) = ctx.store.volume_by_id(&job.object).await? else {
        // Already removed by an earlier run of this job.
        return ctx
            .done(job, format!("Volume {} deleted", job.object))
            .await;
    };
    // Forced delete of an attached volume: its exports go first.
    for a in ctx.store.all_attachments().await? {
        if a.volume_id == volume.id {
            ctx.exports.detach(&a.export_name);
        }
    }
    let slices = ctx.store.volume_slices(&volume.id).await?;
    let total = slices.len().max(1);
    for (i, row) in slices.iter().enumerate() {
        ctx.check_stopping()?;
        let key = slice_key(&volume.id, &row.slice);
        let medium = row.slice.medium.clone();
        ctx.blocking(move |dp| dp.delete_slice(&medium, &key))
            .await?;
        ctx.progress(
            job,
            step_progress(i + 1, total),
            &format!("Removed slice {} of {total}", i + 1),
        )
        .await?;
    }
    ctx.store.delete_volume(&volume.id).await?;
    ctx.done(job, format!("Volume '{}' deleted", volume.name))
        .await
}
