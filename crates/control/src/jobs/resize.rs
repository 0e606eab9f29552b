//! `volume_modify_extend`: plan (in place or with data movement), move the
//! slices the plan moves, grow every slice, then record the new size.

use super::agents::agent_growers;
use super::growth::{grow_by_agents, grow_unattached, provisioned};
use super::slice_move::{copy_step, StepCopy};
use super::undo::discard_unswitched_copies;
use super::{slice_key, JobContext, JobError};
use crate::planning::{plan_changed, plan_resize_now, PlannedResize};
use std::collections::BTreeSet;
use svs_domain::{column_size, PlanShape, ResizeVolumeArgs, GIB, MOVEMENT_PLAN_FOUND};
use svs_store::{Job, JobEnd, ResizeStep, StepState};
use tracing::{info, warn};

pub(super) async fn resize_volume(
    ctx: &JobContext,
    job: &Job,
    args: &ResizeVolumeArgs,
) -> Result<(), JobError> {
    let volume = ctx.volume(job).await?;
    let new_size = args.size;

    let mut steps = ctx.store.resize_steps(job.id).await?;
    if steps.is_empty() {
        let _booking = ctx.allocation.lock().await;
        let PlannedResize { planned, rows, .. } = plan_resize_now(
            ctx.store.as_ref(),
            &volume,
            new_size,
            args.allow_data_movement,
        )
        .await?;
        // Given a dry run's plan: that plan, or nothing.
        if let Some(expected) = args.plan.as_deref().and_then(PlanShape::from_token) {
            if let Some(changed) = plan_changed(&expected, &planned, &rows) {
                return Err(JobError::Failed(changed));
            }
        }
        let plan = planned.map_err(|e| JobError::Failed(e.to_string()))?;
        let detail = (!plan.is_in_place()).then_some(MOVEMENT_PLAN_FOUND);
        ctx.store.save_resize_plan(job.id, &plan, detail).await?;
        steps = ctx.store.resize_steps(job.id).await?;
    }

    let moves: Vec<&ResizeStep> = steps.iter().filter(|s| s.to_medium.is_some()).collect();
    let move_count = moves.len();
    for (i, step) in moves.iter().enumerate() {
        ctx.check_stopping()?;
        let mut moved = copy_step(ctx, job, &volume, step, (i, move_count), StepCopy::Move).await;
        let failed = moved.as_ref().err();
        // Stopped (the lease lost, the service stopping): the copies are
        // left as they are for whoever holds the job next to go on with.
        if let Some(e) = failed.filter(|e| !ctx.stopped_by(e)) {
            if let Some(step) = source_lost(ctx, &volume.id, job.id, step).await? {
                // The moved copy died under the move (its node or its
                // medium): the move goes on as a rebuild of that copy onto
                // the same target, from a healthy copy of its column.
                warn!(error = %e, "the copy being moved was lost: rebuilding it on the target instead");
                let detail = format!(
                    "The copy being moved was lost ({e}); rebuilding it on {} from a healthy copy",
                    step.to_medium.as_deref().unwrap_or_default()
                );
                ctx.store.add_job_detail(job.id, &detail).await?;
                moved =
                    copy_step(ctx, job, &volume, &step, (i, move_count), StepCopy::Rebuild).await;
            }
        }
        if let Err(e) = moved {
            if !ctx.stopped_by(&e) {
                // What this misses (the store unreachable, say), the
                // orphaned-copies reconciler removes later.
                if let Err(e) = discard_unswitched_copies(ctx, &volume.id, job.id).await {
                    warn!(error = %e, "cannot remove every copy the failed movement left");
                }
            }
            return Err(e);
        }
    }

    // Every slice now sits where it stays. The point of no return: the
    // slices grow and the volume takes its new size; a cancel asked for
    // before it moves every slice back instead.
    ctx.commit(job).await?;
    // Grow each slice to the new size.
    ctx.progress(job, if move_count > 0 { 95 } else { 50 }, "Growing slices")
        .await?;
    let slices = ctx.store.volume_slices(&volume.id).await?;
    let columns = slices
        .iter()
        .map(|r| r.slice.column)
        .collect::<BTreeSet<_>>()
        .len();
    let new_slice_size = column_size(new_size, u32::try_from(columns).unwrap_or(1));
    for row in &slices {
        ctx.check_stopping()?;
        let key = slice_key(&volume.id, &row.slice);
        let medium = row.slice.medium.clone();
        let bytes = new_slice_size * GIB;
        ctx.blocking(move |dp| dp.grow_slice(&medium, &key, bytes))
            .await?;
    }
    let detail = format!(
        "Volume '{}' resized from {} GiB to {new_size} GiB{}",
        volume.name,
        volume.size,
        if move_count > 0 {
            format!(" after moving {move_count} slice(s)")
        } else {
            " in place".to_string()
        }
    );
    let detail = match grow_filesystem(ctx, job, &volume, new_size, new_slice_size).await? {
        Some(note) => format!("{detail}; {note}"),
        None => detail,
    };
    // A move carried snapshot files to other media: their figures are
    // current before a client waiting for Done reads them (as `done` does
    // for every other job that changes space).
    ctx.refresh_snapshot_space().await;
    info!(detail = %detail, "job done");
    ctx.store
        .complete_resize(
            job.id,
            &volume.id,
            new_size,
            new_slice_size,
            &JobEnd::done(detail, ctx.clock.now_ms()),
        )
        .await?;
    ctx.exports.set_size(&volume.id, new_size * GIB);
    Ok(())
}

/// The last step for a volume whose filesystem svs provisioned: grow it
/// to `new_size` GiB (the slices already have it); when a host agent holds
/// it mounted read-write, wait for that agent to grow it; when it is
/// attached otherwise, leave it to the host. The note for the job's details.
/// On failure the slices keep their new size while the volume keeps its
/// old one; the job's own retry runs this step again (growing to fill the
/// device is idempotent).
async fn grow_filesystem(
    ctx: &JobContext,
    job: &Job,
    volume: &svs_store::Volume,
    new_size: u64,
    new_slice_size: u64,
) -> Result<Option<String>, JobError> {
    let Some(fs) = provisioned(volume) else {
        return Ok(None);
    };
    let growers = agent_growers(ctx, volume).await?;
    if !growers.is_empty() {
        // The hosts' agents grow the mounted filesystem: the volume takes
        // its new size now (its hosts see it and their agents see the new
        // `size`), then the job waits for their reports.
        let before = volume.filesystem_size.unwrap_or(volume.size);
        // Until the agents report, the filesystem is the size it was.
        ctx.store
            .set_volume_filesystem(&volume.id, Some(before), None)
            .await?;
        ctx.store
            .record_resize(job.id, &volume.id, new_size, new_slice_size)
            .await?;
        ctx.exports.set_size(&volume.id, new_size * GIB);
        ctx.changes.notify();
        let note = grow_by_agents(ctx, job, volume, fs, &growers, (before, new_size)).await?;
        return Ok(Some(note));
    }
    if ctx.exports.volume_io(&volume.id).is_some() {
        return Ok(Some(format!(
            "Filesystem {} not grown: the volume is attached, its host grows it",
            fs.as_str()
        )));
    }
    grow_unattached(ctx, job, volume, fs, new_size)
        .await
        .map(Some)
}

/// How long a failed move waits for the loss of the copy it moved to be
/// recorded (the front records it as it fails the copy).
const LOSS_RECORD_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// The step again, as the store has it now, when its move failed because
/// the copy it moved is lost while another copy of its column is healthy
/// (a rebuild can take over); None otherwise.
async fn source_lost(
    ctx: &JobContext,
    volume_id: &str,
    job_id: i64,
    step: &ResizeStep,
) -> Result<Option<ResizeStep>, JobError> {
    let deadline = tokio::time::Instant::now() + LOSS_RECORD_WAIT;
    loop {
        let rows = ctx.store.volume_slices(volume_id).await?;
        let Some(row) = rows.iter().find(|r| r.slice.id == step.slice_id) else {
            return Ok(None);
        };
        if row.lost {
            let column_healthy = rows.iter().any(|r| {
                r.slice.column == row.slice.column && r.slice.id != row.slice.id && !r.lost
            });
            if !column_healthy {
                return Ok(None);
            }
            let now = ctx.store.resize_steps(job_id).await?;
            return Ok(now
                .into_iter()
                .find(|s| s.id == step.id && s.state == StepState::Planned));
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
