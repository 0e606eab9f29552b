//! `svs media ...`: the subcommands and what each does through the API.

use super::args::{parse_size_gib, WaitArgs};
use super::context::{Context, Print, Shown};
use super::error::Result;
use super::output;
use super::plans::render_relocation_plan;
use super::volumes::dry_run;
use clap::Subcommand;
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum MediaCommand {
    /// List the media.
    List,
    /// Mark a medium failed (administrators): its slices are lost, and the
    /// volumes with copies on it turn Degraded or Failed.
    Fail {
        /// The medium's id.
        medium: String,
    },
    /// Add a medium (administrators): a directory svs may keep slices in.
    /// It is kept in the database (MANAGED BY api), not in the
    /// configuration file.
    Add {
        /// The medium's id (letters, digits, '.', '_', '-').
        id: String,
        /// The node the medium is attached to (added when new).
        #[arg(long)]
        node: String,
        /// The node's zone.
        #[arg(long)]
        zone: String,
        /// Absolute path of the directory on the server; created if missing.
        #[arg(long)]
        directory: PathBuf,
        /// Logical capacity in GiB (20, 20G, 20GiB, 1T).
        #[arg(long, value_parser = parse_size_gib)]
        size: u64,
    },
    /// Change a medium added through the API (administrators): grow it, or
    /// shrink it down to what is in use on it.
    Set {
        /// The medium's id.
        medium: String,
        /// New logical capacity in GiB (20, 20G, 20GiB, 1T).
        #[arg(long, value_parser = parse_size_gib)]
        size: u64,
    },
    /// Drain a medium (administrators): it takes no new slice, and one
    /// job moves every slice off it with the data mover, keeping each
    /// volume's placement rules.
    ///
    /// Prints the job (follow it with `svs job watch`, pause, resume or
    /// cancel it with `svs job ...`). The medium stays Draining, empty,
    /// until `svs media ready`; `svs media remove` then removes it.
    Drain {
        /// The medium's id.
        medium: String,
        /// Print what would move, changing nothing.
        #[arg(long, conflicts_with = "wait")]
        dry_run: bool,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Let a drained medium take slices again (administrators); refused
    /// while its drain job runs (cancel it first).
    Ready {
        /// The medium's id.
        medium: String,
    },
    /// Even the usage of media (administrators): one job moves whole
    /// slices from fuller to emptier media of a node, a zone, or every
    /// medium, moving few bytes.
    Rebalance {
        /// Only the media of this node.
        #[arg(long, conflicts_with = "zone")]
        node: Option<String>,
        /// Only the media of this zone.
        #[arg(long)]
        zone: Option<String>,
        /// Print what would move, changing nothing.
        #[arg(long, conflicts_with = "wait")]
        dry_run: bool,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Remove a medium added through the API (administrators); refused
    /// while volumes have slices on it. Its directory stays.
    Remove {
        /// The medium's id.
        medium: String,
    },
}

impl MediaCommand {
    pub async fn run(&self, ctx: &Context) -> Result<()> {
        match self {
            MediaCommand::List => {
                ctx.show(Print::List(output::MEDIA_COLUMNS), |api| async move {
                    api.list_media().await
                })
                .await
            }
            // Administrators only; shows the medium as the server answers
            // it (`state` Failed, `freesize` 0).
            MediaCommand::Fail { medium } => {
                ctx.show(
                    Print::One,
                    |api| async move { api.fail_medium(medium).await },
                )
                .await
            }
            // Administrators only; shows the medium as the server answers it.
            MediaCommand::Add {
                id,
                node,
                zone,
                directory,
                size,
            } => {
                ctx.show(Print::One, |api| async move {
                    api.create_medium(id, node, zone, &directory.to_string_lossy(), *size)
                        .await
                })
                .await
            }
            // Administrators only (media added through the API); shows the
            // medium.
            MediaCommand::Set { medium, size } => {
                ctx.show(Print::One, |api| async move {
                    api.resize_medium(medium, *size).await
                })
                .await
            }
            MediaCommand::Drain {
                medium,
                dry_run: true,
                ..
            } => {
                dry_run(ctx, render_relocation_plan, |api| async move {
                    api.drain_medium(medium, true).await
                })
                .await
            }
            MediaCommand::Drain { medium, wait, .. } => {
                ctx.start_job(wait.wait, Shown::Nothing, |api| async move {
                    api.drain_medium(medium, false).await
                })
                .await
            }
            MediaCommand::Ready { medium } => {
                ctx.show(
                    Print::One,
                    |api| async move { api.undrain_medium(medium).await },
                )
                .await
            }
            MediaCommand::Rebalance {
                node,
                zone,
                dry_run: preview,
                wait,
            } => {
                let (node, zone) = (node.as_deref(), zone.as_deref());
                if *preview {
                    return dry_run(ctx, render_relocation_plan, |api| async move {
                        api.rebalance_media(node, zone, true).await
                    })
                    .await;
                }
                ctx.start_job(wait.wait, Shown::Nothing, |api| async move {
                    api.rebalance_media(node, zone, false).await
                })
                .await
            }
            MediaCommand::Remove { medium } => {
                ctx.show(Print::Message, |api| async move {
                    api.delete_medium(medium).await
                })
                .await
            }
        }
    }
}
