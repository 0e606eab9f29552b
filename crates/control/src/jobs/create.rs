//! `volume_create`: place the volume's slices, then create their files.

use super::{node_front, slice_key, step_progress, JobContext, JobError};
use crate::attributes::{Filesystem, VolumeAttributes};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use svs_dataplane::{CloneFill, CopyOptions, CopyStats, SliceMove};
use svs_domain::{
    place_volume, plan_changed_message, plan_changes, CloneSource, JobSpec, PlacementRequest,
    PlanShape, GIB,
};
use svs_store::{Job, Volume};
use tracing::{error, warn};

pub(super) async fn create_volume(ctx: &JobContext, job: &Job) -> Result<(), JobError> {
    let volume = ctx.volume(job).await?;
    let args = match job.spec() {
        Ok(JobSpec::VolumeCreate(args)) => Some(args),
        _ => None,
    };
    let mut slices = ctx.store.volume_slices(&volume.id).await?;
    if slices.is_empty() {
        let _booking = ctx.allocation.lock().await;
        let media = crate::planning::media_states(ctx.store.as_ref()).await?;
        let request = PlacementRequest {
            size: volume.size,
            resiliency: volume.resiliency,
            zone: volume.zone.clone(),
        };
        let placed = place_volume(&media, &request);
        let expected = args
            .as_ref()
            .and_then(|a| a.plan.as_deref())
            .and_then(PlanShape::from_token);
        // Given a dry run's placement: that placement, or nothing.
        let changes = expected.map_or_else(Vec::new, |expected| {
            let now = PlanShape::of_placement(&placed);
            plan_changes(&expected, &now, &|id| id.to_string())
        });
        if !changes.is_empty() {
            ctx.store.delete_volume(&volume.id).await?;
            return Err(JobError::Failed(plan_changed_message(&changes)));
        }
        match placed {
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
    let source = args.and_then(|a| a.source);
    // A clone's slices are a tenth of its job; the copy is the rest.
    let slices_share: usize = if source.is_some() { 10 } else { 100 };
    let total = slices.len().max(1);
    for (i, row) in slices.iter().enumerate() {
        ctx.check_stopping()?;
        let key = slice_key(&volume.id, &row.slice);
        let medium = row.slice.medium.clone();
        let bytes = row.slice.size * GIB;
        ctx.blocking(move |dp| dp.create_slice(&medium, &key, bytes))
            .await
            .map_err(|e| e.context(format!("Could not create volume '{}'", volume.name)))?;
        let progress = step_progress((i + 1) * slices_share, total * 100);
        ctx.progress(
            job,
            progress,
            &format!("Created slice {} of {total}", i + 1),
        )
        .await?;
    }
    if let Some(source) = &source {
        let copied = copy_snapshot_into(ctx, job, &volume, source).await?;
        return ctx
            .done(
                job,
                format!(
                    "Volume '{}' created: {} GiB in {} slice(s), cloned from snapshot '{}' \
                     of volume '{}' ({} bytes of data copied)",
                    volume.name,
                    volume.size,
                    slices.len(),
                    copied.snapshot,
                    copied.volume,
                    copied.bytes
                ),
            )
            .await;
    }
    let filesystem = provision_filesystem(ctx, job, &volume).await?;
    ctx.done(
        job,
        format!(
            "Volume '{}' created: {} GiB in {} slice(s){}",
            volume.name,
            volume.size,
            slices.len(),
            filesystem
                .map(|fs| format!("; Filesystem {} created", fs.as_str()))
                .unwrap_or_default()
        ),
    )
    .await
}

/// The last step for a `file` volume: make its filesystem and record that
/// svs provisioned it. A run that already made it (then stopped before the
/// job ended) does not make it again.
async fn provision_filesystem(
    ctx: &JobContext,
    job: &Job,
    volume: &Volume,
) -> Result<Option<Filesystem>, JobError> {
    let mut attributes = VolumeAttributes::from_record(&volume.attributes);
    let Some(fs) = attributes.filesystem else {
        return Ok(None);
    };
    if attributes.filesystem_provisioned {
        return Ok(Some(fs));
    }
    ctx.progress(job, 95, &format!("Creating filesystem {}", fs.as_str()))
        .await?;
    let io = ctx.volume_io(volume).await?;
    ctx.make_filesystem(io, fs).await?;
    attributes.filesystem_provisioned = true;
    ctx.store
        .set_volume_attributes(&volume.id, &attributes.to_record())
        .await?;
    ctx.progress(job, 100, &format!("Filesystem {} created", fs.as_str()))
        .await?;
    Ok(Some(fs))
}

/// What a clone copied from.
struct Copied {
    volume: String,
    snapshot: String,
    bytes: u64,
}

/// Fills a new volume with a snapshot's content (`CloneFill`: read
/// through the source volume's shared I/O, so writes to the source, moves
/// of its slices and copy-on-write saves meanwhile are all seen), paced by
/// `movement_rate`. When the source's front runs on a storage node, the
/// copy runs there, into a front of the new volume opened on the same
/// node, so the bytes go between storage nodes; else in svs serve. A
/// resumed job copies again from the start: every piece is written whole.
async fn copy_snapshot_into(
    ctx: &JobContext,
    job: &Job,
    volume: &Volume,
    source: &CloneSource,
) -> Result<Copied, JobError> {
    let snapshot = ctx
        .store
        .snapshot_by_id(&source.snapshot_id)
        .await?
        .ok_or_else(|| JobError::Failed("the snapshot to clone no longer exists".into()))?;
    let source_volume = ctx
        .store
        .volume_by_id(&source.volume_id)
        .await?
        .ok_or_else(|| JobError::Failed("the volume to clone no longer exists".into()))?;
    // The source's front (on a node, or here) stays put while the clone
    // reads it.
    let _source_busy = ctx.activity.job_started(&source_volume.id).await;
    let (seq, size) = (snapshot.seq, snapshot.volume_size * GIB);
    let filling = match clone_on_node(ctx, volume, &source_volume, (seq, size))
        .await
        .map_err(|e| e.context(format!("Could not open snapshot '{}'", snapshot.name)))?
    {
        Some(on_node) => on_node,
        None => {
            let source_io = ctx.volume_io(&source_volume).await?;
            let target = ctx.volume_io(volume).await?;
            let view = tokio::task::spawn_blocking(move || source_io.snapshot_view(seq, size))
                .await
                .map_err(|e| JobError::Failed(format!("data plane task failed: {e}")))?
                .map_err(|e| {
                    JobError::Failed(format!("Could not open snapshot '{}': {e}", snapshot.name))
                })?;
            Box::new(CloneFill::new(view, target, size))
        }
    };
    let stats = CopyStats::default();
    let done = Arc::new(AtomicU64::new(0));
    let cancel = ctx.shutdown.child_token();
    let _stop_on_drop = cancel.clone().drop_guard();
    let copy = {
        let options = CopyOptions {
            rate_limit: ctx.rate_limit,
            cancel: cancel.clone(),
            stats: stats.clone(),
            ..CopyOptions::default()
        };
        let done = Arc::clone(&done);
        tokio::task::spawn_blocking(move || {
            let mut filling = filling;
            filling.fill(&options, &mut |at, _| done.store(at, Ordering::Relaxed))?;
            filling.finish()
        })
    };
    tokio::pin!(copy);
    let status = format!(
        "Copying snapshot '{}' of volume '{}'",
        snapshot.name, source_volume.name
    );
    let filled = loop {
        tokio::select! {
            result = &mut copy => {
                break result.map_err(|e| JobError::Failed(format!("clone task failed: {e}")))?;
            }
            () = tokio::time::sleep(Duration::from_millis(250)) => {
                let at = done.load(Ordering::Relaxed);
                let progress = 10 + at.saturating_mul(89) / size.max(1);
                ctx.progress(job, u8::try_from(progress).unwrap_or(99), &status).await?;
            }
        }
    };
    match filled {
        Ok(()) => {}
        Err(_) if cancel.is_cancelled() => return Err(JobError::Stopping),
        Err(e) => {
            return Err(JobError::DataPlane(e).context(format!(
                "Could not copy snapshot '{}' into volume '{}'",
                snapshot.name, volume.name
            )))
        }
    }
    Ok(Copied {
        volume: source_volume.name,
        snapshot: snapshot.name,
        bytes: stats.copied(),
    })
}

/// The clone's copy on the storage node that runs the source's front (see
/// [`copy_snapshot_into`]), begun; None when it runs in svs serve.
async fn clone_on_node(
    ctx: &JobContext,
    volume: &Volume,
    source: &Volume,
    (seq, size): (u64, u64),
) -> Result<Option<Box<dyn SliceMove>>, JobError> {
    if ctx.exports.volume_io(&source.id).is_some() {
        return Ok(None);
    }
    let Some(front) = node_front::steered_front(ctx, source).await? else {
        return Ok(None);
    };
    let Some(epoch) = node_front::front_beside(ctx, volume, front.node()).await? else {
        return Ok(None);
    };
    tracing::info!(volume = %volume.name, source = %source.name, node = front.node(), epoch,
        "the clone's copy runs on the source's front on its storage node");
    let into = volume.id.clone();
    let began = tokio::task::spawn_blocking(move || front.begin_clone(seq, size, (&into, epoch)))
        .await
        .map_err(|e| JobError::Failed(format!("data plane task failed: {e}")))?;
    Ok(Some(began.map_err(JobError::DataPlane)?))
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
