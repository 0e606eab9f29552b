//! Job steps that wait for a node's host agent: growing the filesystem of
//! an attached volume after a resize, and unmounting before a detach. The
//! job polls the store (where the agent's reports land) and ends when the
//! agent reported, or in Error when it did not within `agent_wait`.

use super::{JobContext, JobError};
use crate::attributes::Filesystem;
use std::time::Duration;
use svs_store::{Attachment, Job, Volume, HOST_DISCONNECTED, HOST_ERROR};
use tokio::time::Instant;

/// How often a waiting job reads the agent's reports.
const POLL: Duration = Duration::from_millis(200);

impl JobContext {
    /// Sleeps one poll interval; Err(Stopping) when the service stops.
    async fn agent_poll(&self) -> Result<(), JobError> {
        tokio::select! {
            () = tokio::time::sleep(POLL) => Ok(()),
            () = self.shutdown.cancelled() => Err(JobError::Stopping),
        }
    }

    fn agent_timeout(&self, node: &str) -> String {
        format!(
            "node '{node}' did not report within {} s",
            self.agent_wait.as_secs()
        )
    }
}

/// The read-write attachments of the live volume whose agents grow its
/// filesystem, by node.
pub(super) async fn agent_growers(
    ctx: &JobContext,
    volume: &Volume,
) -> Result<Vec<String>, JobError> {
    Ok(ctx
        .store
        .list_attachments(volume.tenant_id, Some(&volume.id))
        .await?
        .into_iter()
        .filter(|a| a.snapshot == svs_domain::LIVE_SNAPSHOT_NAME && !a.readonly)
        .filter(Attachment::is_agent_managed)
        .map(|a| a.node)
        .collect())
}

/// Waits until the agent of every node in `nodes` reports its filesystem
/// grown to `new_size` GiB; the note for the job's details. A grow error
/// reported for this job's request (the desired state names the job, the
/// agent's report names the request it answers) ends the job in Error at
/// once, even when it reads like the one before.
pub(super) async fn wait_for_growth(
    ctx: &JobContext,
    job: &Job,
    volume: &Volume,
    fs: Filesystem,
    nodes: &[String],
    (old_size, new_size): (u64, u64),
) -> Result<String, JobError> {
    let started_ms = ctx.clock.now_ms();
    let deadline = Instant::now() + ctx.agent_wait;
    let mut shown = String::new();
    loop {
        let attachments = ctx
            .store
            .list_attachments(volume.tenant_id, Some(&volume.id))
            .await?;
        let mut pending = None;
        for node in nodes {
            // A node that detached meanwhile has nothing left to grow.
            let Some(a) = attachments
                .iter()
                .find(|a| &a.node == node && a.snapshot == svs_domain::LIVE_SNAPSHOT_NAME)
            else {
                continue;
            };
            let host = a.host.as_ref();
            if host.and_then(|h| h.filesystem_size).unwrap_or(0) >= new_size {
                continue;
            }
            // A report answers this job when it names it; an agent that
            // names no request counts when it reported after the wait began.
            let answers = |h: &&svs_store::HostReport| match h.grow_job {
                Some(j) => j == job.id,
                None => h.updated_ms >= started_ms,
            };
            if let Some(error) = host.filter(answers).and_then(|h| h.grow_error.as_deref()) {
                return Err(JobError::Failed(format!(
                    "Could not grow the {} filesystem on node '{node}': {error}",
                    fs.as_str()
                )));
            }
            pending.get_or_insert(node.as_str());
        }
        let Some(node) = pending else {
            let on = match nodes {
                [one] => format!("node '{one}'"),
                many => format!(
                    "nodes {}",
                    many.iter()
                        .map(|n| format!("'{n}'"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            return Ok(format!(
                "Filesystem grown from {old_size} GiB to {new_size} GiB on {on}"
            ));
        };
        if Instant::now() >= deadline {
            return Err(JobError::Failed(format!(
                "Filesystem not grown: {}",
                ctx.agent_timeout(node)
            )));
        }
        let status = format!("Waiting for node '{node}' to grow the filesystem");
        if status != shown {
            ctx.progress(job, 98, &status).await?;
            shown = status;
        }
        ctx.agent_poll().await?;
    }
}

/// Waits until the agent of an attachment it holds reports it unmounted
/// and disconnected. On an Error report or a timeout, the attachment is
/// Attached again and the job ends in Error.
pub(super) async fn wait_for_disconnect(
    ctx: &JobContext,
    job: &Job,
    a: &Attachment,
) -> Result<(), JobError> {
    let node = a.node.as_str();
    ctx.progress(
        job,
        50,
        &format!("Waiting for node '{node}' to unmount and disconnect"),
    )
    .await?;
    let deadline = Instant::now() + ctx.agent_wait;
    loop {
        let current = ctx
            .store
            .get_attachment(&a.volume_id, &a.snapshot, node)
            .await?;
        let Some(current) = current else {
            return Ok(());
        };
        let failure = match current.host.as_ref().map(|h| h.state.as_str()) {
            Some(HOST_DISCONNECTED) => return Ok(()),
            Some(HOST_ERROR) => Some(
                current
                    .host
                    .as_ref()
                    .and_then(|h| h.detail.clone())
                    .filter(|d| !d.is_empty())
                    .unwrap_or_else(|| "the agent reported an error".into()),
            ),
            _ if Instant::now() >= deadline => Some(ctx.agent_timeout(node)),
            _ => None,
        };
        if let Some(reason) = failure {
            // The host still uses the volume: the export stays.
            ctx.store
                .set_attachment_state(&a.volume_id, &a.snapshot, node, "Attached")
                .await?;
            return Err(JobError::Failed(format!(
                "Detach failed on node '{node}': {reason}"
            )));
        }
        ctx.agent_poll().await?;
    }
}
