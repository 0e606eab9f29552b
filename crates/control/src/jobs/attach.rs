//! `attachment_create`, `attachment_delete`, `attachment_modify`: the
//! volume's NBD exports follow its attachments (of the live volume or of
//! one of its snapshots).

use super::{JobContext, JobError};
use crate::front_layout::{attachment_view, layout_for_open, SnapshotView};
use std::sync::Arc;
use svs_domain::{AttachmentArgs, DetachArgs};
use svs_store::{Job, StoreError, Volume};

/// What the attachment exports: the live volume, or a snapshot's view.
async fn export_view(
    ctx: &JobContext,
    volume: &Volume,
    snapshot: &str,
) -> Result<(Option<SnapshotView>, String), JobError> {
    match attachment_view(ctx.store.as_ref(), snapshot).await {
        Ok(None) => Ok((None, format!("Volume '{}'", volume.name))),
        Ok(Some((view, s))) => Ok((
            Some(view),
            format!("Snapshot '{}' of volume '{}'", s.name, volume.name),
        )),
        Err(StoreError::NotFound) => Err(JobError::Failed(format!(
            "snapshot {snapshot} no longer exists"
        ))),
        Err(e) => Err(e.into()),
    }
}

pub(super) async fn attach(
    ctx: &JobContext,
    job: &Job,
    args: &AttachmentArgs,
) -> Result<(), JobError> {
    let volume = ctx.volume(job).await?;
    let (node, snapshot) = (args.node.as_str(), args.snapshot.as_str());
    let attachment = ctx
        .store
        .get_attachment(&volume.id, snapshot, node)
        .await?
        .ok_or_else(|| JobError::Failed(format!("attachment to node '{node}' no longer exists")))?;
    let (view, what) = export_view(ctx, &volume, snapshot).await?;
    if let Some(front) = super::front::place_front(ctx, &volume).await? {
        if let Err(why) = super::front::wait_front_open(ctx, &volume, &front).await {
            ctx.store
                .delete_attachment(&volume.id, snapshot, node)
                .await?;
            ctx.store.clear_unattached_front(&volume.id).await?;
            ctx.changes.notify();
            return Err(JobError::Failed(format!(
                "Could not attach {} to node '{node}': the front on storage node '{}' did not \
                 open: {why}",
                what.to_lowercase_first(),
                front.node
            )));
        }
        ctx.store
            .set_attachment_state(&volume.id, snapshot, node, "Attached")
            .await?;
        return ctx
            .done(
                job,
                format!(
                    "{what} attached to node '{node}' (its front on storage node '{}')",
                    front.node
                ),
            )
            .await;
    }
    let opening =
        layout_for_open(ctx.store.as_ref(), &ctx.exports, &ctx.node_media, &volume).await?;
    let exports = Arc::clone(&ctx.exports);
    let (name, owner, readonly) = (
        attachment.export_name.clone(),
        node.to_string(),
        attachment.readonly,
    );
    let opened = tokio::task::spawn_blocking(move || {
        exports.attach(&name, &owner, readonly, &opening, view)
    })
    .await
    .map_err(|e| JobError::Failed(e.to_string()))?;
    if let Err(e) = opened {
        ctx.store
            .delete_attachment(&volume.id, snapshot, node)
            .await?;
        return Err(JobError::Failed(format!(
            "Could not attach {} to node '{node}': {e}",
            what.to_lowercase_first()
        )));
    }
    ctx.store
        .set_attachment_state(&volume.id, snapshot, node, "Attached")
        .await?;
    ctx.done(job, format!("{what} attached to node '{node}'"))
        .await
}

pub(super) async fn detach(ctx: &JobContext, job: &Job, args: &DetachArgs) -> Result<(), JobError> {
    let volume = ctx.volume(job).await?;
    let (node, snapshot) = (args.node.as_str(), args.snapshot.as_str());
    let what = match export_view(ctx, &volume, snapshot).await {
        Ok((_, what)) => what,
        Err(_) => format!("Volume '{}'", volume.name),
    };
    if let Some(a) = ctx.store.get_attachment(&volume.id, snapshot, node).await? {
        if a.is_agent_managed() {
            // The host still has it mounted: its agent lets go first.
            super::agents::wait_for_disconnect(ctx, job, &a).await?;
        }
        // Closes the node's connections before the record goes (a front on
        // a storage node drops the export when its next poll no longer
        // lists it).
        ctx.exports.detach(&a.export_name);
        ctx.store
            .delete_attachment(&volume.id, snapshot, node)
            .await?;
        if ctx.store.clear_unattached_front(&volume.id).await? {
            tracing::info!(volume = %volume.name, "no attachment left: the volume's front on a storage node ends");
        }
    }
    ctx.done(job, format!("{what} detached from node '{node}'"))
        .await
}

pub(super) async fn modify_attachment(
    ctx: &JobContext,
    job: &Job,
    args: &AttachmentArgs,
) -> Result<(), JobError> {
    let volume = ctx.volume(job).await?;
    let (node, snapshot) = (args.node.as_str(), args.snapshot.as_str());
    let a = ctx
        .store
        .get_attachment(&volume.id, snapshot, node)
        .await?
        .ok_or_else(|| JobError::Failed(format!("attachment to node '{node}' no longer exists")))?;
    let (readonly, mountpoint) = (args.readonly, args.mountpoint.clone());
    ctx.store
        .update_attachment(&volume.id, snapshot, node, readonly, &mountpoint)
        .await?;
    ctx.exports.set_readonly(&a.export_name, readonly);
    let (_, what) = export_view(ctx, &volume, snapshot).await?;
    ctx.done(
        job,
        format!(
            "Attachment of {} to node '{node}' is now {}",
            what.to_lowercase_first(),
            if readonly { "read-only" } else { "read-write" }
        ),
    )
    .await
}

/// "Volume 'x'" → "volume 'x'" inside a sentence.
trait LowercaseFirst {
    fn to_lowercase_first(&self) -> String;
}

impl LowercaseFirst for String {
    fn to_lowercase_first(&self) -> String {
        let mut chars = self.chars();
        match chars.next() {
            Some(c) => c.to_lowercase().chain(chars).collect(),
            None => String::new(),
        }
    }
}
