//! `snapshot_create`, `snapshot_delete`, `snapshot_rollback`: work on the
//! volume's shared I/O (the one its exports use, or one opened for the job),
//! so a snapshot is taken at one barrier across every connection's writes.

use super::{JobContext, JobError};
use svs_dataplane::VolumeIo;
use svs_domain::{SnapshotArgs, SnapshotState};
use svs_store::{Job, Snapshot, Volume};
use tracing::warn;

impl JobContext {
    /// Runs one snapshot operation on the volume's shared I/O; its failure
    /// ends the job with `failed`, then the cause.
    async fn on_volume(
        &self,
        volume: &Volume,
        op: impl FnOnce(&dyn VolumeIo) -> std::io::Result<()> + Send + 'static,
        failed: impl FnOnce() -> String,
    ) -> Result<(), JobError> {
        let io = self.front_io(volume).await?;
        self.on_io(&io, op).await?.map_err(|e| {
            let message = format!("{}: {e}", failed());
            if svs_dataplane::is_passing(e.kind()) {
                // The front moved or its node is away: tried again.
                JobError::Transient(message)
            } else {
                JobError::Failed(message)
            }
        })
    }

    async fn snapshot(&self, args: &SnapshotArgs) -> Result<Option<Snapshot>, JobError> {
        Ok(self.store.snapshot_by_id(&args.snapshot_id).await?)
    }
}

pub(super) async fn create_snapshot(
    ctx: &JobContext,
    job: &Job,
    args: &SnapshotArgs,
) -> Result<(), JobError> {
    let volume = ctx.volume(job).await?;
    let snapshot = ctx
        .snapshot(args)
        .await?
        .ok_or_else(|| JobError::Failed(format!("snapshot '{}' no longer exists", args.name)))?;
    ctx.progress(job, 10, &format!("Taking snapshot '{}'", snapshot.name))
        .await?;
    let seq = snapshot.seq;
    // On failure the runner discards what was made (`discard_snapshot`).
    ctx.on_volume(
        &volume,
        move |io| io.snapshot(seq),
        || {
            format!(
                "Could not create snapshot '{}' of volume '{}'",
                snapshot.name, volume.name
            )
        },
    )
    .await?;
    ctx.store
        .set_snapshot_state(&snapshot.id, SnapshotState::Ready)
        .await?;
    ctx.done(
        job,
        format!(
            "Snapshot '{}' of volume '{}' created",
            snapshot.name, volume.name
        ),
    )
    .await
}

/// Best-effort removal of a snapshot whose creation failed, whatever the
/// step: nothing half-made stays, on the slices or in the store.
pub(super) async fn discard_snapshot(ctx: &JobContext, job: &Job) {
    let Ok(svs_domain::JobSpec::SnapshotCreate(args)) = job.spec() else {
        return;
    };
    let snapshot = match ctx.snapshot(&args).await {
        Ok(Some(s)) => s,
        Ok(None) => return,
        Err(e) => {
            warn!(error = %e, "cannot read a failed snapshot");
            return;
        }
    };
    if let Ok(volume) = ctx.volume(job).await {
        let seq = snapshot.seq;
        let removed = match ctx.front_io(&volume).await {
            Ok(io) => ctx
                .on_io(&io, move |io| io.delete_snapshot(seq))
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string())),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = removed {
            warn!(error = %e, "cannot remove the files of a failed snapshot");
        }
    }
    if let Err(e) = ctx.store.delete_snapshot(&snapshot.id).await {
        warn!(error = %e, "cannot remove a failed snapshot");
    }
}

pub(super) async fn delete_snapshot(
    ctx: &JobContext,
    job: &Job,
    args: &SnapshotArgs,
) -> Result<(), JobError> {
    let volume = ctx.volume(job).await?;
    if let Some(snapshot) = ctx.snapshot(args).await? {
        // Its exports close before its data goes.
        for a in ctx.store.all_attachments().await? {
            if a.snapshot == snapshot.id {
                ctx.exports.detach(&a.export_name);
            }
        }
        ctx.progress(job, 10, &format!("Deleting snapshot '{}'", snapshot.name))
            .await?;
        let seq = snapshot.seq;
        ctx.on_volume(
            &volume,
            move |io| io.delete_snapshot(seq),
            || {
                format!(
                    "Could not delete snapshot '{}' of volume '{}'",
                    snapshot.name, volume.name
                )
            },
        )
        .await?;
        ctx.store.delete_snapshot(&snapshot.id).await?;
    }
    ctx.done(
        job,
        format!(
            "Snapshot '{}' of volume '{}' deleted",
            args.name, volume.name
        ),
    )
    .await
}

pub(super) async fn rollback(
    ctx: &JobContext,
    job: &Job,
    args: &SnapshotArgs,
) -> Result<(), JobError> {
    let volume = ctx.volume(job).await?;
    let snapshot = ctx
        .snapshot(args)
        .await?
        .ok_or_else(|| JobError::Failed(format!("snapshot '{}' no longer exists", args.name)))?;
    ctx.progress(
        job,
        10,
        &format!("Rolling back to snapshot '{}'", snapshot.name),
    )
    .await?;
    let seq = snapshot.seq;
    ctx.on_volume(
        &volume,
        move |io| io.rollback(seq),
        || {
            format!(
                "Could not roll volume '{}' back to snapshot '{}'",
                volume.name, snapshot.name
            )
        },
    )
    .await?;
    let grown = if volume.size > snapshot.volume_size {
        format!(
            "; the {} GiB added since the snapshot now read as zeros",
            volume.size - snapshot.volume_size
        )
    } else {
        String::new()
    };
    ctx.done(
        job,
        format!(
            "Volume '{}' rolled back to snapshot '{}'{grown}",
            volume.name, snapshot.name
        ),
    )
    .await
}
