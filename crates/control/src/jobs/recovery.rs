//! `volume_recovery`: rebuild every lost copy of the volume's slices on
//! media chosen by the placement rules, each from a healthy copy of its
//! column; a copy lost on a medium usable again (a storage node that came
//! back) is resynced there in place, only what differs rewritten. The plan
//! is recorded (as moves from where the copy was lost) before
//! any byte is copied, so a restart resumes it: a rebuilt slice stays
//! rebuilt, an unfinished one starts again. Before it plans, it probes the
//! volume's files (see `crate::media_health`): a copy whose disk was pulled
//! a moment ago is rebuilt too.

use super::slice_move::{self, StepCopy};
use super::{JobContext, JobError};
use crate::media_health::{probe_volume, ProbeError};
use svs_domain::{plan_recovery, PlacedSlice, RecoveryArgs};
use svs_store::{Job, StepState};

pub(super) async fn recover_volume(
    ctx: &JobContext,
    job: &Job,
    _args: &RecoveryArgs,
) -> Result<(), JobError> {
    let volume = ctx.volume(job).await?;
    let mut steps = ctx.store.resize_steps(job.id).await?;
    if steps.is_empty() {
        // What the store says is lost may lag a disk pulled a moment ago:
        // the volume's files are checked now, and what is unreadable is
        // lost before the plan is made.
        probe_volume(ctx.store.as_ref(), &ctx.exports, &volume)
            .await
            .map_err(|e| match e {
                ProbeError::Store(e) => JobError::Store(e),
                ProbeError::Task(e) => JobError::Failed(format!("data plane task failed: {e}")),
            })?;
        let slices: Vec<PlacedSlice> = ctx
            .store
            .volume_slices(&volume.id)
            .await?
            .into_iter()
            .map(|r| PlacedSlice {
                slice: r.slice,
                node: r.node,
                zone: r.zone,
                lost: r.lost,
            })
            .collect();
        let lost = slices.iter().filter(|s| s.lost).count();
        if lost == 0 {
            return ctx
                .done(
                    job,
                    format!(
                        "Volume '{}' has every copy of its slices; nothing to rebuild",
                        volume.name
                    ),
                )
                .await;
        }
        let _booking = ctx.allocation.lock().await;
        let media = crate::planning::media_states(ctx.store.as_ref()).await?;
        let plan = plan_recovery(&media, &slices, volume.resiliency).map_err(|e| {
            JobError::Failed(format!("Could not recover volume '{}': {e}", volume.name))
        })?;
        let targets: Vec<String> = plan
            .moves
            .iter()
            .filter_map(|m| {
                let s = slices.iter().find(|s| s.slice.id == m.slice_id)?;
                let (copy, column, to) = (s.slice.copy, s.slice.column, &m.to_medium);
                Some(if m.from_medium == m.to_medium {
                    format!("c{copy}-k{column} resynced in place on {to}")
                } else {
                    format!("c{copy}-k{column} on {to}")
                })
            })
            .collect();
        let detail = format!(
            "Recovery plan: {lost} lost slice(s) {} from healthy copies ({})",
            if plan.moves.iter().any(|m| m.from_medium == m.to_medium) {
                "rebuilt or resynced"
            } else {
                "rebuilt"
            },
            targets.join(", ")
        );
        ctx.store
            .save_resize_plan(job.id, &plan, Some(&detail))
            .await?;
        steps = ctx.store.resize_steps(job.id).await?;
    }
    let count = steps.len();
    for (index, step) in steps.iter().enumerate() {
        ctx.check_stopping()?;
        if step.state == StepState::Done {
            continue;
        }
        slice_move::copy_step(ctx, job, &volume, step, (index, count), StepCopy::Rebuild).await?;
    }
    let resynced = steps
        .iter()
        .filter(|s| s.to_medium.as_deref() == Some(s.from_medium.as_str()))
        .count();
    let what = match (count - resynced, resynced) {
        (rebuilt, 0) => format!("{rebuilt} slice(s) rebuilt"),
        (0, resynced) => format!("{resynced} slice(s) resynced in place"),
        (rebuilt, resynced) => {
            format!("{rebuilt} slice(s) rebuilt and {resynced} resynced in place")
        }
    };
    ctx.done(
        job,
        format!(
            "Volume '{}' recovered: {what}; every copy is healthy again",
            volume.name
        ),
    )
    .await
}
