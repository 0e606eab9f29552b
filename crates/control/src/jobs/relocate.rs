//! `media_drain` and `media_rebalance`: slices of many volumes moved between
//! media, at their size, by the mover a resize uses (copy while writes go
//! on, verify, switch, remove the source), paced by the same gate (pause,
//! the job's rate, the movement window).
//!
//! The plan (the domain's `plan_drain` / `plan_rebalance`) is recorded as
//! move steps before any byte is copied, so a restart resumes it. Then,
//! volume by volume, the job *holds* the volume (it becomes the volume's
//! current job: the nine blocked operations answer 409 naming it, and no
//! other job starts there), moves that volume's slices and frees it. A
//! volume another job holds is skipped and tried again once the others are
//! done. A slice whose copy fails is reported with its cause and the rest
//! go on; the job then ends in Error, and repeating the request plans only
//! what is still left.
//!
//! A cancel stops the copy in progress and removes every unfinished copy;
//! slices already moved stay where they moved (moving them back onto a
//! medium being emptied would undo what the operator asked for).

use super::slice_move::{copy_step, StepCopy};
use super::undo::discard_unswitched_copies;
use super::{JobContext, JobError};
use crate::planning::{plan_relocation, RelocationScope};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use svs_store::{Job, ResizeStep, StepSlice, StepState};
use tracing::{info, warn};

/// How long the job waits before trying a volume another job held again.
const BUSY_VOLUME_RETRY: Duration = Duration::from_secs(2);

/// One try of a drain or a rebalance: plan (once), then move volume by
/// volume.
pub(super) async fn relocate(
    ctx: &JobContext,
    job: &Job,
    scope: &RelocationScope,
) -> Result<(), JobError> {
    if let RelocationScope::Drain(medium) = scope {
        let usage = ctx.store.media_usage().await?;
        match usage.iter().find(|u| &u.record.medium.id == medium) {
            None => return Err(JobError::Failed(format!("medium '{medium}' is gone"))),
            Some(u) if u.failed => {
                return Err(JobError::Failed(format!(
                    "medium '{medium}' failed during the drain: its slices are lost; recover their volumes"
                )))
            }
            Some(_) => {}
        }
    }
    let mut steps = ctx.store.resize_steps(job.id).await?;
    let mut stuck = Vec::new();
    if steps.is_empty() {
        let _booking = ctx.allocation.lock().await;
        let planned = plan_relocation(ctx.store.as_ref(), scope).await?;
        stuck = planned.stuck_lines();
        if planned.plan.is_empty() {
            let what = scope.describe();
            return if stuck.is_empty() {
                ctx.done(job, nothing_to_move(scope)).await
            } else {
                Err(JobError::Failed(format!(
                    "No slice of {what} can move: {}",
                    stuck.join("; ")
                )))
            };
        }
        let detail = format!(
            "Plan: {} slice(s) of {} volume(s) move ({} GiB): {}",
            planned.plan.moves.len(),
            planned
                .plan
                .moves
                .iter()
                .map(|m| m.volume_id.as_str())
                .collect::<BTreeSet<_>>()
                .len(),
            planned.plan.bytes_gib(),
            planned.moves_line()
        );
        ctx.store
            .save_resize_plan(job.id, &planned.plan.to_resize_plan(), Some(&detail))
            .await?;
        for line in &stuck {
            ctx.store.add_job_detail(job.id, line).await?;
        }
        steps = ctx.store.resize_steps(job.id).await?;
    }

    let slices = ctx.store.step_slices(job.id).await?;
    let forward: Vec<&ResizeStep> = steps
        .iter()
        .filter(|s| s.to_medium.is_some() && !s.undo)
        .collect();
    let count = forward.len();
    // Each volume's steps, in plan order (with each step's index).
    let mut by_volume: BTreeMap<&str, Vec<(usize, &ResizeStep)>> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for (i, step) in forward.iter().enumerate() {
        // A slice gone with its volume has nothing left to move.
        let Some(slice) = slices.iter().find(|s| s.slice_id == step.slice_id) else {
            continue;
        };
        if step.state == StepState::Done {
            continue;
        }
        let entry = by_volume.entry(slice.volume_id.as_str()).or_default();
        if entry.is_empty() {
            order.push(slice.volume_id.as_str());
        }
        entry.push((i, step));
    }

    let mut failed: Vec<String> = Vec::new();
    let mut waiting: Vec<&str> = order;
    let mut waiting_status = String::new();
    while !waiting.is_empty() {
        let mut busy = Vec::new();
        for volume_id in waiting {
            ctx.check_stopping()?;
            if !ctx.store.hold_volume(volume_id, job.id).await? {
                // Deleted meanwhile: nothing of it is left to move.
                if ctx.store.volume_by_id(volume_id).await?.is_some() {
                    busy.push(volume_id);
                }
                continue;
            }
            // Its moves write their own status.
            waiting_status.clear();
            let steps = by_volume.get(volume_id).map(Vec::as_slice).unwrap_or(&[]);
            match move_volume(ctx, job, volume_id, steps, count, &slices).await {
                Ok(()) => {}
                Err(e) if stopped(ctx, &e) => return Err(e),
                Err(e) => {
                    let name = volume_name(&slices, volume_id);
                    warn!(volume = %name, error = %e, "a slice of the volume could not move");
                    failed.push(format!("volume '{name}': {e}"));
                }
            }
            ctx.store.release_volume(volume_id, job.id).await?;
        }
        if !busy.is_empty() {
            let names: Vec<String> = busy
                .iter()
                .map(|v| format!("'{}'", volume_name(&slices, v)))
                .collect();
            let status = format!(
                "Waiting for other jobs to end on volume(s) {}",
                names.join(", ")
            );
            // Written when it changes, keeping the progress the moves reached.
            if status != waiting_status {
                ctx.progress(job, job_progress(ctx, job).await, &status)
                    .await?;
                waiting_status = status;
            }
            tokio::select! {
                _ = ctx.shutdown.cancelled() => return Err(JobError::Stopping),
                _ = tokio::time::sleep(BUSY_VOLUME_RETRY) => {}
            }
        }
        waiting = busy;
    }

    let mut left = failed;
    if let RelocationScope::Drain(_) = scope {
        // Whatever is still on the medium, planned again from the store
        // (not from this try's plan: a retry does not have it, and a
        // creation planned just before the drain may have placed a slice
        // there since).
        let _booking = ctx.allocation.lock().await;
        let now = plan_relocation(ctx.store.as_ref(), scope).await?;
        left.extend(now.stuck_lines());
        if left.is_empty() && !now.plan.is_empty() {
            left.extend(
                now.plan
                    .moves
                    .iter()
                    .map(|m| format!("{} is still on it", now.label(m.slice_move.slice_id))),
            );
        }
    } else {
        left.extend(stuck);
    }
    if !left.is_empty() {
        return Err(JobError::Failed(format!(
            "{} not finished: {}; the slices that moved stay moved; repeat the request to move the rest",
            capitalized(&scope.describe()),
            left.join("; ")
        )));
    }
    // What this job moved (a slice another job moved first is not counted).
    let finished: Vec<ResizeStep> = ctx
        .store
        .resize_steps(job.id)
        .await?
        .into_iter()
        .filter(|s| s.to_medium.is_some() && !s.undo && s.state != StepState::Planned)
        .collect();
    let moved = finished.len();
    let gib: u64 = finished.iter().map(|s| s.new_size).sum();
    let detail = match scope {
        RelocationScope::Drain(m) => format!(
            "Medium '{m}' drained: {moved} slice(s) moved off it ({gib} GiB); it takes no new slice until it is set Ready"
        ),
        RelocationScope::Rebalance(_) => format!(
            "{} rebalanced: {moved} slice(s) moved ({gib} GiB)",
            capitalized(&scope.describe())
        ),
    };
    info!(job = job.id, detail = %detail, "relocation done");
    ctx.done(job, detail).await
}

/// The detail of a drain or rebalance that finds nothing to move.
fn nothing_to_move(scope: &RelocationScope) -> String {
    match scope {
        RelocationScope::Drain(m) => {
            format!("Medium '{m}' holds no slice; it takes no new slice until it is set Ready")
        }
        RelocationScope::Rebalance(_) => format!(
            "{} are as even as moving whole slices makes them; nothing to move",
            capitalized(&scope.describe())
        ),
    }
}

fn capitalized(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// Stopped (the lease lost, the service stopping, a cancel): the copies
/// stay as they are for whoever goes on.
fn stopped(ctx: &JobContext, e: &JobError) -> bool {
    matches!(e, JobError::Cancelled) || ctx.stopped_by(e)
}

fn volume_name(slices: &[StepSlice], volume_id: &str) -> String {
    slices
        .iter()
        .find(|s| s.volume_id == volume_id)
        .map_or_else(|| volume_id.to_string(), |s| s.volume_name.clone())
}

/// The job's progress as recorded (kept while it waits).
async fn job_progress(ctx: &JobContext, job: &Job) -> u8 {
    match ctx.store.job_by_id(job.id).await {
        Ok(Some(j)) => j.progress,
        _ => job.progress,
    }
}

/// Moves the volume's planned slices (the job holds the volume). A failed
/// copy removes what it left and answers the error.
async fn move_volume(
    ctx: &JobContext,
    job: &Job,
    volume_id: &str,
    steps: &[(usize, &ResizeStep)],
    count: usize,
    slices: &[StepSlice],
) -> Result<(), JobError> {
    let Some(volume) = ctx.store.volume_by_id(volume_id).await? else {
        return Ok(());
    };
    let _busy = ctx.activity.job_started(volume_id).await;
    // The steps as stored now: an earlier try may have switched some.
    let current = ctx.store.resize_steps(job.id).await?;
    for (i, step) in steps {
        ctx.check_stopping()?;
        let step = current.iter().find(|s| s.id == step.id).unwrap_or(*step);
        if step.state == StepState::Done {
            continue;
        }
        let label = slices
            .iter()
            .find(|s| s.slice_id == step.slice_id)
            .map(|s| svs_domain::slice_label(s.copy, s.column))
            .unwrap_or_else(|| step.slice_id.to_string());
        if step.state == StepState::Planned {
            // Another job may have moved the volume's slices since the plan
            // (the job waited for it): a step no longer true is not carried
            // out.
            let rows = ctx.store.volume_slices(volume_id).await?;
            let Some(row) = rows.iter().find(|r| r.slice.id == step.slice_id) else {
                continue;
            };
            if row.slice.medium != step.from_medium {
                let detail = format!(
                    "Slice {label} of volume '{}' left {} meanwhile (another job moved it to {}); \
                     this job leaves it there",
                    volume.name, step.from_medium, row.slice.medium
                );
                ctx.store.add_job_detail(job.id, &detail).await?;
                continue;
            }
            let target = step.to_medium.as_deref().unwrap_or_default();
            if rows.iter().any(|r| r.slice.medium == target) {
                return Err(JobError::Failed(format!(
                    "slice {label} from {} to {target}: {target} holds another slice of the \
                     volume since the plan (another job moved it there); repeat the request \
                     to plan again",
                    step.from_medium
                )));
            }
        }
        let moved = copy_step(ctx, job, &volume, step, (*i, count), StepCopy::Move).await;
        if let Err(e) = moved {
            if !stopped(ctx, &e) {
                if let Err(e) = discard_unswitched_copies(ctx, volume_id, job.id).await {
                    warn!(error = %e, "cannot remove every copy the failed move left");
                }
            }
            return Err(e.context(format!(
                "slice {label} from {} to {}",
                step.from_medium,
                step.to_medium.as_deref().unwrap_or_default()
            )));
        }
    }
    Ok(())
}

/// After a cancel stopped the drain or rebalance: every unfinished copy is
/// removed; what moved stays moved. The job's last detail.
pub(super) async fn cancel_relocation(
    ctx: &JobContext,
    job: &Job,
    scope: &RelocationScope,
) -> Result<String, JobError> {
    let slices = ctx.store.step_slices(job.id).await?;
    let volumes: BTreeSet<&str> = slices.iter().map(|s| s.volume_id.as_str()).collect();
    let mut left = 0;
    for volume_id in volumes {
        left += discard_unswitched_copies(ctx, volume_id, job.id).await?;
    }
    let steps = ctx.store.resize_steps(job.id).await?;
    let moved = steps
        .iter()
        .filter(|s| s.to_medium.is_some() && s.state != StepState::Planned)
        .count();
    let not_moved = steps
        .iter()
        .filter(|s| s.to_medium.is_some() && s.state == StepState::Planned)
        .count();
    let mut detail = format!(
        "Cancelled: {moved} slice(s) of {} moved and stay where they moved; {not_moved} slice(s) stay where they were, their unfinished copies removed",
        scope.describe()
    );
    if left > 0 {
        detail.push_str(&format!(
            " ({left} copy(ies) on unreachable media are removed once they answer)"
        ));
    }
    Ok(detail)
}
