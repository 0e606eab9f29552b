//! `attachment_create`, `attachment_delete`, `attachment_modify`: the
//! volume's NBD exports follow its attachments.

use super::{JobContext, JobError};
use crate::exports::volume_layout;
use std::sync::Arc;
use svs_domain::AttachmentArgs;
use svs_store::Job;

pub(super) async fn attach(ctx: &JobContext, job: &Job, node: &str) -> Result<(), JobError> {
    let volume = ctx.volume(job).await?;
    let attachment = ctx
        .store
        .get_attachment(&volume.id, node)
        .await?
        .ok_or_else(|| JobError::Failed(format!("attachment to node '{node}' no longer exists")))?;
    let layout = volume_layout(&volume, &ctx.store.volume_slices(&volume.id).await?);
    let exports = Arc::clone(&ctx.exports);
    let (name, owner, readonly) = (
        attachment.export_name.clone(),
        node.to_string(),
        attachment.readonly,
    );
    let opened =
        tokio::task::spawn_blocking(move || exports.attach(&name, &owner, readonly, &layout))
            .await
            .map_err(|e| JobError::Failed(e.to_string()))?;
    if let Err(e) = opened {
        ctx.store.delete_attachment(&volume.id, node).await?;
        return Err(JobError::Failed(format!(
            "Could not attach volume '{}' to node '{node}': {e}",
            volume.name
        )));
    }
    ctx.store
        .set_attachment_state(&volume.id, node, "Attached")
        .await?;
    ctx.done(
        job,
        format!("Volume '{}' attached to node '{node}'", volume.name),
    )
    .await
}

pub(super) async fn detach(ctx: &JobContext, job: &Job, node: &str) -> Result<(), JobError> {
    let volume = ctx.volume(job).await?;
    if let Some(a) = ctx.store.get_attachment(&volume.id, node).await? {
        // Closes the node's connections before the record goes.
        ctx.exports.detach(&a.export_name);
        ctx.store.delete_attachment(&volume.id, node).await?;
    }
    ctx.done(
        job,
        format!("Volume '{}' detached from node '{node}'", volume.name),
    )
    .await
}

pub(super) async fn modify_attachment(
    ctx: &JobContext,
    job: &Job,
    args: &AttachmentArgs,
) -> Result<(), JobError> {
    let volume = ctx.volume(job).await?;
    let node = &args.node;
    let a = ctx
        .store
        .get_attachment(&volume.id, node)
        .await?
        .ok_or_else(|| JobError::Failed(format!("attachment to node '{node}' no longer exists")))?;
    let (readonly, mountpoint) = (args.readonly, args.mountpoint.clone());
    ctx.store
        .update_attachment(&volume.id, node, readonly, &mountpoint)
        .await?;
    ctx.exports.set_readonly(&a.export_name, readonly);
    ctx.done(
        job,
        format!(
            "Attachment of volume '{}' to node '{node}' is now {}",
            volume.name,
            if readonly { "read-only" } else { "read-write" }
        ),
    )
    .await
}
