//! What a cancelled job undoes, once its work has stopped (the runner
//! stops it, then calls its handler's `cancel`), and the removal of the
//! copies a failed or cancelled movement leaves.
//!
//! A cancelled movement ends with every slice where it was before the job:
//! copies that never became a slice's placement are removed (complete or
//! partial), and each slice that had already switched is moved back with
//! the same mover (copy, verify, switch, remove), as recorded undo steps
//! that a restart resumes. Its old place is still booked for it (the store
//! keeps a moved slice's source booked until the job ends), so the move
//! back always has room.

use super::slice_move::{copy_step, StepCopy};
use super::{slice_key, JobContext, JobError};
use svs_dataplane::SliceKey;
use svs_domain::SliceMove;
use svs_store::{Job, ResizeStep, StepState};
use tracing::warn;

/// `volume_modify_extend` cancelled: the volume keeps its size, every slice
/// its original medium. The job's last detail.
pub(super) async fn cancel_resize(ctx: &JobContext, job: &Job) -> Result<String, JobError> {
    let volume = ctx.volume(job).await?;
    let steps = ctx.store.resize_steps(job.id).await?;
    let is_move = |s: &&ResizeStep| !s.undo && s.to_medium.is_some();
    let stopped = steps
        .iter()
        .filter(is_move)
        .filter(|s| s.state == StepState::Planned)
        .count();
    let left = discard_unswitched_copies(ctx, &volume.id, job.id).await?;

    // Every forward move now either left nothing (planned) or is done: its
    // slice lives on the target and goes back, unless its old medium failed.
    let failed: Vec<String> = ctx
        .store
        .media_usage()
        .await?
        .into_iter()
        .filter(|u| u.failed)
        .map(|u| u.record.medium.id)
        .collect();
    let steps = ctx.store.resize_steps(job.id).await?;
    let back: Vec<SliceMove> = steps
        .iter()
        .filter(is_move)
        .filter(|s| s.state == StepState::Done && !failed.contains(&s.from_medium))
        .filter_map(|s| {
            Some(SliceMove {
                slice_id: s.slice_id,
                from_medium: s.to_medium.clone()?,
                to_medium: s.from_medium.clone(),
                old_size: s.old_size,
                new_size: s.old_size,
            })
        })
        .collect();
    let kept = steps
        .iter()
        .filter(is_move)
        .filter(|s| s.state != StepState::Planned)
        .filter(|s| s.state == StepState::Switched || failed.contains(&s.from_medium))
        .count();
    ctx.store.save_undo_steps(job.id, &back).await?;
    let undo: Vec<ResizeStep> = ctx
        .store
        .resize_steps(job.id)
        .await?
        .into_iter()
        .filter(|s| s.undo)
        .collect();
    let count = undo.len();
    for (index, step) in undo.iter().enumerate() {
        ctx.check_stopping()?;
        if step.state == StepState::Done {
            continue;
        }
        if let Err(e) = copy_step(ctx, job, &volume, step, (index, count), StepCopy::MoveBack).await
        {
            if !matches!(e, JobError::Stopping) && !ctx.shutdown.is_cancelled() {
                // The cancel ends in Error: no partial copy stays behind.
                if let Err(e) = discard_unswitched_copies(ctx, &volume.id, job.id).await {
                    warn!(error = %e, "cannot remove every copy the move back left");
                }
            }
            return Err(e.context("Could not move every slice back"));
        }
    }
    ctx.refresh_snapshot_space().await;
    let mut what = Vec::new();
    if stopped > 0 {
        what.push(format!(
            "{stopped} unfinished move(s) stopped and their copies removed"
        ));
    }
    if count > 0 {
        what.push(format!("{count} moved slice(s) moved back"));
    }
    if left > 0 {
        what.push(format!(
            "{left} copy(ies) not removable now, left to the orphaned-copies reconciler"
        ));
    }
    let placement = if kept > 0 {
        format!(
            "every slice on its original medium but {kept} whose original place cannot take it \
             back (they stay where they moved)"
        )
    } else {
        "every slice on its original medium".to_string()
    };
    Ok(format!(
        "Cancelled: volume '{}' stays at {} GiB, {placement}{}",
        volume.name,
        volume.size,
        if what.is_empty() {
            String::new()
        } else {
            format!(" ({})", what.join(", "))
        }
    ))
}

/// `volume_recovery` cancelled: copies rebuilt so far stay (they are
/// healthy), unfinished rebuilds are removed, and the rest stay lost for a
/// later recovery.
pub(super) async fn cancel_recovery(ctx: &JobContext, job: &Job) -> Result<String, JobError> {
    let volume = ctx.volume(job).await?;
    let steps = ctx.store.resize_steps(job.id).await?;
    let rebuilt = steps
        .iter()
        .filter(|s| s.state != StepState::Planned)
        .count();
    let orphans = discard_unswitched_copies(ctx, &volume.id, job.id).await?;
    let lost = steps.len() - rebuilt;
    let orphans = if orphans > 0 {
        format!("; {orphans} unfinished copy(ies) not removable now, left to the orphaned-copies reconciler")
    } else {
        String::new()
    };
    Ok(format!(
        "Cancelled: volume '{}' keeps the {rebuilt} copy(ies) already rebuilt; {lost} stay lost \
         (recover the volume again to rebuild them){orphans}",
        volume.name
    ))
}

/// `volume_create` cancelled: the volume goes with whatever was placed.
pub(super) async fn cancel_create(ctx: &JobContext, job: &Job) -> Result<String, JobError> {
    let name = ctx
        .store
        .volume_by_id(&job.object)
        .await?
        .map_or_else(|| job.object_name.clone(), |v| v.name);
    super::create::discard_volume(ctx, &job.object).await;
    Ok(format!("Cancelled: volume '{name}' was not created"))
}

/// After a failed or cancelled movement: removes every copy on a target
/// that never became the slice's placement (complete or partial), except a
/// lost copy resynced in place (the slice's own file), and the old copy of
/// each slice that did switch. A copy that cannot be removed now (its node
/// unreachable, say) is counted and left to the orphaned-copies reconciler;
/// the answer is that count. Stops, leaving the rest, when the job's stop
/// signal fires (the copies are then the next holder's to resume).
pub(super) async fn discard_unswitched_copies(
    ctx: &JobContext,
    volume_id: &str,
    job_id: i64,
) -> Result<usize, JobError> {
    let current = ctx.store.resize_steps(job_id).await?;
    let slices = ctx.store.volume_slices(volume_id).await?;
    let mut left = 0;
    for step in current.iter().filter(|s| s.state == StepState::Switched) {
        ctx.check_stopping()?;
        // The slice lives on the target; its old copy must not linger.
        if let Some(row) = slices.iter().find(|r| r.slice.id == step.slice_id) {
            let key = slice_key(volume_id, &row.slice);
            if remove_copy(ctx, &step.from_medium, key, "a switched slice's old copy").await? {
                ctx.store.finish_step(step.id).await?;
            } else {
                left += 1;
            }
        }
    }
    for step in current.iter().filter(|s| s.state == StepState::Planned) {
        let (Some(target), Some(row)) = (
            step.to_medium.clone(),
            slices.iter().find(|r| r.slice.id == step.slice_id),
        ) else {
            continue;
        };
        if target == step.from_medium {
            // A resync in place: the target is the slice's own file.
            continue;
        }
        ctx.check_stopping()?;
        let key = slice_key(volume_id, &row.slice);
        if !remove_copy(ctx, &target, key, "an abandoned copy").await? {
            left += 1;
        }
    }
    Ok(left)
}

/// Removes a copy of a slice from a medium: true once gone, false when it
/// cannot be now (logged); `Stopping` when the job's stop signal fired.
async fn remove_copy(
    ctx: &JobContext,
    medium: &str,
    key: SliceKey,
    what: &str,
) -> Result<bool, JobError> {
    let medium = medium.to_string();
    match ctx.blocking(move |dp| dp.delete_slice(&medium, &key)).await {
        Ok(()) => Ok(true),
        Err(JobError::Stopping) => Err(JobError::Stopping),
        Err(e) => {
            warn!(error = %e, "cannot remove {what}");
            Ok(false)
        }
    }
}
