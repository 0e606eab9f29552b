//! `svs volume ...`: the subcommands and what each does through the API.

use super::api::Api;
use super::args::{parse_size_gib, AttachTo, SnapshotRef, WaitArgs};
use super::context::{emit, Context, Print, Shown};
use super::error::Result;
use super::output::{self, OutputFormat};
use super::plans;
use clap::Subcommand;
use serde_json::Value;
use svs_wire::requests::VolumeCreateRequest;
use svs_wire::views::{AttachmentView, SliceView, VolumeView};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum VolumeType {
    Block,
    File,
}

svs_domain::svs_names!(VolumeType {
    Block = "block",
    File = "file",
});

/// `--dry-run` and `--plan` of a creation or a resize.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanArgs {
    /// Print what the request would do (the plan, or why there is none)
    /// and change nothing.
    #[arg(long, conflicts_with_all = ["plan", "wait"])]
    pub dry_run: bool,
    /// Carry out exactly this plan (the `Plan:` a dry run printed), or be
    /// refused naming what changed since.
    #[arg(long, value_name = "PLAN")]
    pub plan: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum VolumeCommand {
    /// List the volumes.
    List,
    /// Show one volume (by name or id).
    Get {
        /// The volume (name or id).
        name: String,
    },
    /// Create a volume; prints the job id.
    Create {
        /// The new volume's name (unique in the tenant).
        name: String,
        /// Size in GiB: 20, 20G, 20GiB or 1T (whole GiB).
        #[arg(long, value_parser = parse_size_gib)]
        size: u64,
        /// The policy whose resiliency places the copies.
        #[arg(long)]
        policy: String,
        /// `block` (a raw device) or `file` (svs makes a filesystem on it).
        #[arg(long = "type", value_enum, default_value_t = VolumeType::Block)]
        kind: VolumeType,
        /// The filesystem svs makes on a `file` volume (default ext4).
        #[arg(long, value_parser = ["ext4", "xfs"])]
        filesystem: Option<String>,
        /// The zone to place the volume in (default: any).
        #[arg(long)]
        zone: Option<String>,
        /// Clone: start with the content of snapshot VOLUME/SNAPSHOT (the
        /// size must be at least the snapshot's volumesize).
        #[arg(long, value_name = "VOLUME/SNAPSHOT")]
        from_snapshot: Option<SnapshotRef>,
        #[command(flatten)]
        plan: PlanArgs,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Grow a volume; prints the job id.
    Resize {
        /// The volume (name or id).
        name: String,
        /// New size in GiB (20, 20G, 20GiB; greater than the current size,
        /// at most 10x it).
        #[arg(long, value_parser = parse_size_gib)]
        size: u64,
        /// Allow moving slices off media that lack room.
        #[arg(long)]
        allow_data_movement: bool,
        #[command(flatten)]
        plan: PlanArgs,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Delete a volume; prints the job id.
    Delete {
        /// The volume (name or id).
        name: String,
        /// Delete even while attached.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Attach the volume to a node (the same as `svs attachment create`):
    /// the node's agent connects it and mounts a `file` volume; prints the
    /// job id and the NBD URI.
    Attach {
        /// The volume (name or id).
        name: String,
        #[command(flatten)]
        to: AttachTo,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Detach the volume from a node (the same as `svs attachment delete`).
    Detach {
        /// The volume (name or id).
        name: String,
        /// The node it is attached to.
        #[arg(long)]
        node: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Rebuild the copies a volume lost with a failed medium; prints the job id.
    Recover {
        /// The volume (name or id).
        name: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Grow the volume's filesystem again to fill the volume, after a
    /// growth failed (`volume get` says the filesystem is smaller); prints the job id.
    GrowFilesystem {
        /// The volume (name or id).
        name: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

impl VolumeCommand {
    pub async fn run(&self, ctx: &Context) -> Result<()> {
        match self {
            VolumeCommand::List => {
                ctx.show(Print::List(output::VOLUME_COLUMNS), |api| async move {
                    api.list_volumes().await
                })
                .await
            }
            VolumeCommand::Get { name } => get(ctx, name).await,
            VolumeCommand::Create {
                name,
                size,
                policy,
                kind,
                filesystem,
                zone,
                from_snapshot,
                plan,
                wait,
            } => {
                let body = VolumeCreateRequest {
                    name: name.clone(),
                    size: *size,
                    policy: policy.clone(),
                    kind: Some(kind.as_str().to_string()),
                    filesystem: filesystem.clone(),
                    zone: zone.clone(),
                    contentvolume: from_snapshot.as_ref().map(|f| f.volume.clone()),
                    contentsnapshot: from_snapshot.as_ref().map(|f| f.snapshot.clone()),
                    ..VolumeCreateRequest::default()
                };
                if plan.dry_run {
                    return dry_run(ctx, plans::render_create_plan, |api| async move {
                        api.preview_create(&body).await
                    })
                    .await;
                }
                let token = plan.plan.as_deref();
                ctx.start_job(wait.wait, Shown::Volume(name), |api| async move {
                    api.create_volume(&body, token).await
                })
                .await
            }
            VolumeCommand::Resize {
                name,
                size,
                allow_data_movement,
                plan,
                wait,
            } => {
                if plan.dry_run {
                    return dry_run(ctx, plans::render_resize_plan, |api| async move {
                        api.preview_resize(name, *size, *allow_data_movement).await
                    })
                    .await;
                }
                let token = plan.plan.as_deref();
                ctx.start_job(wait.wait, Shown::Volume(name), |api| async move {
                    api.resize_volume(name, (*size, *allow_data_movement), token)
                        .await
                })
                .await
            }
            VolumeCommand::Delete { name, force, wait } => {
                ctx.start_job(wait.wait, Shown::Nothing, |api| async move {
                    api.delete_volume(name, *force).await
                })
                .await
            }
            VolumeCommand::Attach { name, to, wait } => {
                ctx.attachment_create(
                    name,
                    "top",
                    &to.node,
                    to.mountpoint.as_deref(),
                    to.readonly,
                    wait.wait,
                )
                .await
            }
            VolumeCommand::Detach { name, node, wait } => {
                ctx.attachment_delete(name, "top", node, wait.wait).await
            }
            // A `volume_recovery` job rebuilds the copies lost with a
            // failed medium.
            VolumeCommand::Recover { name, wait } => {
                ctx.start_job(wait.wait, Shown::Volume(name), |api| async move {
                    api.recover_volume(name).await
                })
                .await
            }
            // A `volume_grow_filesystem` job grows the volume's filesystem
            // again after a growth failed.
            VolumeCommand::GrowFilesystem { name, wait } => {
                ctx.start_job(wait.wait, Shown::Volume(name), |api| async move {
                    api.grow_volume_filesystem(name).await
                })
                .await
            }
        }
    }
}

/// Prints a dry run's plan: as the API answers it with `--output json`,
/// else as `render` says it.
pub(super) async fn dry_run<P, F, Fut>(
    ctx: &Context,
    render: fn(&P) -> String,
    ask: F,
) -> Result<()>
where
    P: serde::de::DeserializeOwned,
    F: FnOnce(Api) -> Fut,
    Fut: std::future::Future<Output = Result<Value>>,
{
    let s = ctx.session().await?;
    let plan = s.hint(ask(s.api.clone()).await)?;
    if ctx.output == OutputFormat::Json {
        ctx.one(&plan);
    } else {
        emit(&render(&s.api.read_answer(plan)?));
    }
    Ok(())
}

/// A readable summary (placement and attachments too), or with
/// `--output json` the server's volume object alone.
async fn get(ctx: &Context, name: &str) -> Result<()> {
    let s = ctx.session().await?;
    let item: Value = s.hint(s.api.get_volume(name).await)?;
    if ctx.output == OutputFormat::Json {
        ctx.one(&item);
        return Ok(());
    }
    let volume: VolumeView = s.api.read_answer(item)?;
    // By id: a rename or another volume of the same name between the
    // calls cannot mix two volumes in one summary.
    let id = &volume.volumeid;
    let slices: Vec<SliceView> = s.hint(s.api.volume_slices(id).await)?;
    let attachments: Vec<AttachmentView> = s.hint(s.api.list_attachments(Some(id)).await)?;
    emit(&output::render_volume_summary(
        &volume,
        &slices,
        &attachments,
    ));
    Ok(())
}
