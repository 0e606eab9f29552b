//! `svs snapshot ...`: the subcommands and what each does through the API.

use super::args::WaitArgs;
use super::context::{emit, started_line, Context, Print, Shown};
use super::error::Result;
use super::output::{self, OutputFormat};
use clap::Subcommand;
use svs_wire::requests::SnapshotCreateRequest;
use svs_wire::views::{AttachmentView, JobStarted};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Consistency {
    Crash,
    Application,
}

svs_domain::svs_names!(Consistency {
    Crash = "crash",
    Application = "application",
});

#[derive(Debug, Subcommand)]
pub enum SnapshotCommand {
    /// Take a snapshot of a volume; prints the job id.
    Create {
        /// The volume (name or id).
        volume: String,
        /// The snapshot's name (or id).
        name: String,
        /// `crash` (as after a power cut) or `application` (filesystems frozen first).
        #[arg(long, value_enum, default_value_t = Consistency::Crash)]
        consistency: Consistency,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// List the snapshots of a volume, or of every volume without VOLUME.
    List {
        /// Only this volume's snapshots (name or id).
        volume: Option<String>,
    },
    /// Show one snapshot.
    Get {
        /// The volume (name or id).
        volume: String,
        /// The snapshot's name (or id).
        name: String,
    },
    /// Delete a snapshot; prints the job id.
    Delete {
        /// The volume (name or id).
        volume: String,
        /// The snapshot's name (or id).
        name: String,
        /// Delete even while attached (its attachments go with it).
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Return the volume's content to the snapshot (the volume must not be
    /// attached read-write); prints the job id.
    Rollback {
        /// The volume (name or id).
        volume: String,
        /// The snapshot's name (or id).
        name: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Attach a snapshot read-only to a node; prints the job id and the NBD URI.
    Attach {
        /// The volume (name or id).
        volume: String,
        /// The snapshot's name (or id).
        name: String,
        /// The node the snapshot is attached to.
        #[arg(long)]
        node: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

impl SnapshotCommand {
    pub async fn run(&self, ctx: &Context) -> Result<()> {
        match self {
            SnapshotCommand::Create {
                volume,
                name,
                consistency,
                wait,
            } => {
                let body = SnapshotCreateRequest {
                    name: name.clone(),
                    consistency: consistency.as_str().to_string(),
                    ..SnapshotCreateRequest::default()
                };
                ctx.start_job(
                    wait.wait,
                    Shown::Snapshot { volume, name },
                    |api| async move { api.create_snapshot(volume, &body).await },
                )
                .await
            }
            // The snapshots of `volume`, or of every volume of the tenant.
            SnapshotCommand::List { volume } => {
                ctx.show(Print::List(output::SNAPSHOT_COLUMNS), |api| async move {
                    match volume {
                        Some(v) => api.list_snapshots(v).await,
                        None => api.list_all_snapshots().await,
                    }
                })
                .await
            }
            SnapshotCommand::Get { volume, name } => {
                ctx.show(Print::One, |api| async move {
                    api.get_snapshot(volume, name).await
                })
                .await
            }
            SnapshotCommand::Delete {
                volume,
                name,
                force,
                wait,
            } => {
                ctx.start_job(wait.wait, Shown::Nothing, |api| async move {
                    api.delete_snapshot(volume, name, *force).await
                })
                .await
            }
            SnapshotCommand::Rollback { volume, name, wait } => {
                ctx.start_job(wait.wait, Shown::Volume(volume), |api| async move {
                    api.rollback_snapshot(volume, name).await
                })
                .await
            }
            SnapshotCommand::Attach {
                volume,
                name,
                node,
                wait,
            } => attach(ctx, volume, name, node, wait.wait).await,
        }
    }
}

/// Attaches a snapshot (read-only) to `node`. The table output ends
/// with the NBD URI on a line of its own (the export exists from the
/// start; it serves once the job is Done); `--output json` prints the
/// attachment, with its `uri`, after the job (or the started job's
/// answer without `wait`).
async fn attach(ctx: &Context, volume: &str, name: &str, node: &str, wait: bool) -> Result<()> {
    let mut s = ctx.session().await?;
    let answer = s.hint(s.api.attach_snapshot(volume, name, node).await)?;
    let answer: JobStarted = s.api.read_answer(answer)?;
    if ctx.output == OutputFormat::Json && !wait {
        emit(&output::render_view(&answer));
        return Ok(());
    }
    if ctx.output == OutputFormat::Table {
        emit(&started_line(&answer));
    }
    if wait {
        ctx.follow(&mut s, &answer.JobID).await?;
    }
    let attachment: serde_json::Value = s.hint(s.api.get_attachment(volume, name, node).await)?;
    match ctx.output {
        OutputFormat::Json => emit(&output::render_json(&attachment)),
        OutputFormat::Table => {
            let attachment: AttachmentView = s.api.read_answer(attachment)?;
            emit(&format!("{}\n", attachment.uri))
        }
    }
    Ok(())
}
