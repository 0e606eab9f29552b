//! What a job of each kind runs, what one that ended in Error leaves
//! undone, and how a cancel undoes it: one match each over the job's
//! recorded arguments (`JobSpec`), side by side, so a new kind is added in
//! one place (the compiler names the `run` arm it lacks).

use super::{
    attach, create, delete, growth, recovery, relocate, resize, snapshot, undo, JobContext,
    JobError,
};
use crate::planning::RelocationScope;
use svs_domain::JobSpec;
use svs_store::Job;

/// A job's handler: its arguments as recorded.
pub(super) struct JobHandler(JobSpec);

/// The handler of the job's kind, with its arguments as recorded.
pub(super) fn handler(job: &Job) -> Result<JobHandler, JobError> {
    job.spec()
        .map(JobHandler)
        .map_err(|e| JobError::Failed(e.to_string()))
}

impl JobHandler {
    /// One try of the job; the runner tries again after a transient error.
    pub(super) async fn run(&self, ctx: &JobContext, job: &Job) -> Result<(), JobError> {
        match &self.0 {
            JobSpec::VolumeCreate(_) => create::create_volume(ctx, job).await,
            JobSpec::VolumeDelete(_) => delete::delete_volume(ctx, job).await,
            // A failed movement removes its unswitched copies as it fails.
            JobSpec::VolumeModifyExtend(args) => resize::resize_volume(ctx, job, args).await,
            JobSpec::AttachmentCreate(args) => attach::attach(ctx, job, args).await,
            JobSpec::AttachmentDelete(args) => attach::detach(ctx, job, args).await,
            JobSpec::AttachmentModify(args) => attach::modify_attachment(ctx, job, args).await,
            JobSpec::SnapshotCreate(args) => snapshot::create_snapshot(ctx, job, args).await,
            JobSpec::SnapshotDelete(args) => snapshot::delete_snapshot(ctx, job, args).await,
            JobSpec::SnapshotRollback(args) => snapshot::rollback(ctx, job, args).await,
            JobSpec::VolumeRecovery(args) => recovery::recover_volume(ctx, job, args).await,
            // Grows a filesystem svs made to its volume's size again,
            // after a growth failed.
            JobSpec::VolumeGrowFilesystem(args) => {
                growth::grow_filesystem_again(ctx, job, args).await
            }
            // A failed move removes its unfinished copies as it fails.
            JobSpec::MediaDrain(args) => {
                let scope = RelocationScope::Drain(args.medium.clone());
                relocate::relocate(ctx, job, &scope).await
            }
            JobSpec::MediaRebalance(args) => {
                let scope = RelocationScope::Rebalance(args.clone());
                relocate::relocate(ctx, job, &scope).await
            }
        }
    }

    /// After the job ended in Error: removes what its tries left behind that
    /// nothing else owns. Most kinds clean up inside `run` and leave nothing.
    pub(super) async fn undo(&self, ctx: &JobContext, job: &Job) {
        match &self.0 {
            // A volume that never became Ready goes with its slices.
            JobSpec::VolumeCreate(_) => create::discard_volume(ctx, &job.object).await,
            // A snapshot that was never taken goes with its files.
            JobSpec::SnapshotCreate(_) => snapshot::discard_snapshot(ctx, job).await,
            _ => {}
        }
    }

    /// After a cancel stopped the job (its `run` no longer runs): undoes
    /// what it did; the job's last detail. Only kinds that
    /// `JobKind::cancellable` names are ever cancelled.
    pub(super) async fn cancel(&self, ctx: &JobContext, job: &Job) -> Result<String, JobError> {
        match &self.0 {
            JobSpec::VolumeCreate(_) => undo::cancel_create(ctx, job).await,
            JobSpec::VolumeModifyExtend(_) => undo::cancel_resize(ctx, job).await,
            JobSpec::VolumeRecovery(_) => undo::cancel_recovery(ctx, job).await,
            // A cancel keeps what moved.
            JobSpec::MediaDrain(args) => {
                let scope = RelocationScope::Drain(args.medium.clone());
                relocate::cancel_relocation(ctx, job, &scope).await
            }
            JobSpec::MediaRebalance(args) => {
                let scope = RelocationScope::Rebalance(args.clone());
                relocate::cancel_relocation(ctx, job, &scope).await
            }
            _ => Err(JobError::Failed(format!(
                "a {} job cannot be cancelled",
                job.kind
            ))),
        }
    }
}
