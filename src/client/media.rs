//! `svs media ...`: the subcommands and what each does through the API.

use super::args::parse_size_gib;
use super::context::{Context, Print};
use super::error::Result;
use super::output;
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
            MediaCommand::Remove { medium } => {
                ctx.show(Print::Message, |api| async move {
                    api.delete_medium(medium).await
                })
                .await
            }
        }
    }
}
