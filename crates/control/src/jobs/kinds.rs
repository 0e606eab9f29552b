//! One handler per job kind: what a try of the job runs and what a job that
//! ended in Error leaves undone, side by side, so a new kind is one type in
//! one place rather than a line in the dispatch and another in the undo.

use super::{
    attach, create, delete, growth, recovery, relocate, resize, snapshot, undo, JobContext,
    JobError,
};
use crate::planning::RelocationScope;
use async_trait::async_trait;
use svs_domain::{
    AttachmentArgs, DetachArgs, GrowFilesystemArgs, JobSpec, RecoveryArgs, ResizeVolumeArgs,
    SnapshotArgs,
};
use svs_store::Job;

#[async_trait]
pub(super) trait JobHandler: Send + Sync {
    /// One try of the job; the runner tries again after a transient error.
    async fn run(&self, ctx: &JobContext, job: &Job) -> Result<(), JobError>;

    /// After the job ended in Error: removes what its tries left behind that
    /// nothing else owns. Most kinds clean up inside `run` and leave nothing.
    async fn undo(&self, _ctx: &JobContext, _job: &Job) {}

    /// After a cancel stopped the job (its `run` no longer runs): undoes
    /// what it did; the job's last detail. Only kinds that
    /// `JobKind::cancellable` names are ever cancelled.
    async fn cancel(&self, _ctx: &JobContext, job: &Job) -> Result<String, JobError> {
        Err(JobError::Failed(format!(
            "a {} job cannot be cancelled",
            job.kind
        )))
    }
}

/// The handler of the job's kind, with its arguments as recorded.
pub(super) fn handler(job: &Job) -> Result<Box<dyn JobHandler>, JobError> {
    let spec = job.spec().map_err(|e| JobError::Failed(e.to_string()))?;
    Ok(match spec {
        JobSpec::VolumeCreate(_) => Box::new(CreateVolume),
        JobSpec::VolumeDelete(_) => Box::new(DeleteVolume),
        JobSpec::VolumeModifyExtend(args) => Box::new(ResizeVolume(args)),
        JobSpec::AttachmentCreate(args) => Box::new(Attach(args)),
        JobSpec::AttachmentDelete(args) => Box::new(Detach(args)),
        JobSpec::AttachmentModify(args) => Box::new(ModifyAttachment(args)),
        JobSpec::SnapshotCreate(args) => Box::new(CreateSnapshot(args)),
        JobSpec::SnapshotDelete(args) => Box::new(DeleteSnapshot(args)),
        JobSpec::SnapshotRollback(args) => Box::new(Rollback(args)),
        JobSpec::VolumeRecovery(args) => Box::new(RecoverVolume(args)),
        JobSpec::VolumeGrowFilesystem(args) => Box::new(GrowFilesystem(args)),
        JobSpec::MediaDrain(args) => Box::new(Relocate(RelocationScope::Drain(args.medium))),
        JobSpec::MediaRebalance(args) => Box::new(Relocate(RelocationScope::Rebalance(args))),
    })
}

/// `volume_create`: a volume that never became Ready goes with its slices.
struct CreateVolume;

#[async_trait]
impl JobHandler for CreateVolume {
    async fn run(&self, ctx: &JobContext, job: &Job) -> Result<(), JobError> {
        create::create_volume(ctx, job).await
    }
    async fn undo(&self, ctx: &JobContext, job: &Job) {
        create::discard_volume(ctx, &job.object).await
    }
    async fn cancel(&self, ctx: &JobContext, job: &Job) -> Result<String, JobError> {
        undo::cancel_create(ctx, job).await
    }
}

struct DeleteVolume;

#[async_trait]
impl JobHandler for DeleteVolume {
    async fn run(&self, ctx: &JobContext, job: &Job) -> Result<(), JobError> {
        delete::delete_volume(ctx, job).await
    }
}

/// `volume_modify_extend`: a failed movement removes its unswitched copies
/// as it fails (`resize`), so nothing is left for the end.
struct ResizeVolume(ResizeVolumeArgs);

#[async_trait]
impl JobHandler for ResizeVolume {
    async fn run(&self, ctx: &JobContext, job: &Job) -> Result<(), JobError> {
        resize::resize_volume(ctx, job, &self.0).await
    }
    async fn cancel(&self, ctx: &JobContext, job: &Job) -> Result<String, JobError> {
        undo::cancel_resize(ctx, job).await
    }
}

struct Attach(AttachmentArgs);

#[async_trait]
impl JobHandler for Attach {
    async fn run(&self, ctx: &JobContext, job: &Job) -> Result<(), JobError> {
        attach::attach(ctx, job, &self.0).await
    }
}

struct Detach(DetachArgs);

#[async_trait]
impl JobHandler for Detach {
    async fn run(&self, ctx: &JobContext, job: &Job) -> Result<(), JobError> {
        attach::detach(ctx, job, &self.0).await
    }
}

struct ModifyAttachment(AttachmentArgs);

#[async_trait]
impl JobHandler for ModifyAttachment {
    async fn run(&self, ctx: &JobContext, job: &Job) -> Result<(), JobError> {
        attach::modify_attachment(ctx, job, &self.0).await
    }
}

/// `snapshot_create`: a snapshot that was never taken goes with its files.
struct CreateSnapshot(SnapshotArgs);

#[async_trait]
impl JobHandler for CreateSnapshot {
    async fn run(&self, ctx: &JobContext, job: &Job) -> Result<(), JobError> {
        snapshot::create_snapshot(ctx, job, &self.0).await
    }
    async fn undo(&self, ctx: &JobContext, job: &Job) {
        snapshot::discard_snapshot(ctx, job).await
    }
}

struct DeleteSnapshot(SnapshotArgs);

#[async_trait]
impl JobHandler for DeleteSnapshot {
    async fn run(&self, ctx: &JobContext, job: &Job) -> Result<(), JobError> {
        snapshot::delete_snapshot(ctx, job, &self.0).await
    }
}

struct Rollback(SnapshotArgs);

#[async_trait]
impl JobHandler for Rollback {
    async fn run(&self, ctx: &JobContext, job: &Job) -> Result<(), JobError> {
        snapshot::rollback(ctx, job, &self.0).await
    }
}

struct RecoverVolume(RecoveryArgs);

#[async_trait]
impl JobHandler for RecoverVolume {
    async fn run(&self, ctx: &JobContext, job: &Job) -> Result<(), JobError> {
        recovery::recover_volume(ctx, job, &self.0).await
    }
    async fn cancel(&self, ctx: &JobContext, job: &Job) -> Result<String, JobError> {
        undo::cancel_recovery(ctx, job).await
    }
}

/// `volume_grow_filesystem`: grows a filesystem svs made to its volume's
/// size again, after a growth failed.
struct GrowFilesystem(GrowFilesystemArgs);

#[async_trait]
impl JobHandler for GrowFilesystem {
    async fn run(&self, ctx: &JobContext, job: &Job) -> Result<(), JobError> {
        growth::grow_filesystem_again(ctx, job, &self.0).await
    }
}

/// `media_drain` / `media_rebalance`: a failed move removes its unfinished
/// copies as it fails (`relocate`); a cancel keeps what moved.
struct Relocate(RelocationScope);

#[async_trait]
impl JobHandler for Relocate {
    async fn run(&self, ctx: &JobContext, job: &Job) -> Result<(), JobError> {
        relocate::relocate(ctx, job, &self.0).await
    }
    async fn cancel(&self, ctx: &JobContext, job: &Job) -> Result<String, JobError> {
        relocate::cancel_relocation(ctx, job, &self.0).await
    }
}
