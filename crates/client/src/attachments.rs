//! `svs attachment ...` (and `svs volume attach/detach`): the
//! subcommands and what each does through the API.

use super::api::Session;
use super::args::{AttachTo, WaitArgs};
use super::context::{emit, started_line, Context, Print};
use super::error::Result;
use super::output::{self, OutputFormat};
use clap::Subcommand;
use serde_json::{json, Value};
use svs_wire::views::JobStarted;

#[derive(Debug, Subcommand)]
pub enum AttachmentCommand {
    /// Attach a volume (or with --snapshot, a snapshot, read-only) to a
    /// node; its host agent connects it and mounts a `file` volume.
    Create {
        /// The volume (name or id).
        volume: String,
        #[command(flatten)]
        to: AttachTo,
        /// The snapshot to attach (read-only); `top` is the live volume.
        #[arg(long, default_value = "top")]
        snapshot: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Detach: the node's agent unmounts and disconnects first (a busy
    /// mount fails the job).
    Delete {
        /// The volume (name or id).
        volume: String,
        /// The node (host) it is attached to.
        node: String,
        /// The snapshot to attach (read-only); `top` is the live volume.
        #[arg(long, default_value = "top")]
        snapshot: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// List the attachments of a volume, or of every volume without VOLUME
    /// (HOST: what the node's agent last reported, `-` before it did).
    List {
        /// Only this volume's attachments (name or id).
        volume: Option<String>,
    },
    /// Show one attachment, with the agent's report (hostdetail,
    /// hostdevice, hostmountpath, filesystembytes).
    Get {
        /// The volume (name or id).
        volume: String,
        /// The node (host) it is attached to.
        node: String,
        /// The attached snapshot (default: the live volume, `top`).
        #[arg(long, default_value = "top")]
        snapshot: String,
    },
}

impl AttachmentCommand {
    pub async fn run(&self, ctx: &Context) -> Result<()> {
        match self {
            AttachmentCommand::Create {
                volume,
                to,
                snapshot,
                wait,
            } => {
                ctx.attachment_create(
                    volume,
                    snapshot,
                    &to.node,
                    to.mountpoint.as_deref(),
                    to.readonly,
                    wait.wait,
                )
                .await
            }
            AttachmentCommand::Delete {
                volume,
                node,
                snapshot,
                wait,
            } => {
                ctx.attachment_delete(volume, snapshot, node, wait.wait)
                    .await
            }
            // The attachments of one volume, or of every volume of the tenant.
            AttachmentCommand::List { volume } => {
                ctx.show(Print::List(output::ATTACHMENT_COLUMNS), |api| async move {
                    api.list_attachments(volume.as_deref()).await
                })
                .await
            }
            AttachmentCommand::Get {
                volume,
                node,
                snapshot,
            } => ctx.attachment_get(volume, snapshot, node).await,
        }
    }
}

impl Context {
    /// Attaches; with `wait`, follows the job and shows the attachment.
    pub(super) async fn attachment_create(
        &self,
        volume: &str,
        snapshot: &str,
        node: &str,
        mountpoint: Option<&str>,
        readonly: bool,
        wait: bool,
    ) -> Result<()> {
        let mut s = self.session().await?;
        let answer = s.hint(
            s.api
                .create_attachment(volume, snapshot, node, mountpoint, readonly)
                .await,
        )?;
        self.job_then_attachment(&mut s, &answer, wait, volume, snapshot, node)
            .await
    }

    /// Detaches; with `wait`, follows the job (exit 1 when the node's
    /// agent could not unmount).
    pub(super) async fn attachment_delete(
        &self,
        volume: &str,
        snapshot: &str,
        node: &str,
        wait: bool,
    ) -> Result<()> {
        let mut s = self.session().await?;
        let answer = s.hint(s.api.delete_attachment(volume, snapshot, node).await)?;
        let answer: JobStarted = s.api.read_answer(answer)?;
        let job_id = &answer.JobID;
        match self.output {
            OutputFormat::Json if !wait => emit(&output::render_view(&answer)),
            OutputFormat::Json => {}
            OutputFormat::Table => emit(&started_line(&answer)),
        }
        if wait {
            let job = self.follow(&mut s, job_id).await?;
            if self.output == OutputFormat::Json {
                emit(&output::render_json(&job));
            }
        }
        Ok(())
    }

    async fn job_then_attachment(
        &self,
        s: &mut Session,
        answer: &Value,
        wait: bool,
        volume: &str,
        snapshot: &str,
        node: &str,
    ) -> Result<()> {
        let answer: JobStarted = s.api.read_answer(answer.clone())?;
        if !wait {
            self.started(&answer);
            return Ok(());
        }
        self.follow(s, &answer.JobID).await?;
        let attachment = s.hint(s.api.get_attachment(volume, snapshot, node).await)?;
        self.one(&attachment);
        Ok(())
    }

    /// One attachment, with what the node's agent reported (table output:
    /// `filesystembytes` also in binary units).
    async fn attachment_get(&self, volume: &str, snapshot: &str, node: &str) -> Result<()> {
        let s = self.session().await?;
        let mut item: Value = s.hint(s.api.get_attachment(volume, snapshot, node).await)?;
        if self.output == OutputFormat::Table {
            if let Some(n) = item["filesystembytes"].as_u64() {
                item["filesystembytes"] = json!(format!("{n} ({})", output::human_bytes(n)));
            }
        }
        self.one(&item);
        Ok(())
    }
}
