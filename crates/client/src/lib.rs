//! The command-line client of svs: an HTTP client for the API
//! ([`api`]), the stored sessions ([`credentials`], [`sessions`]), a node
//! agent's credential file ([`agent_file`]), tables and JSON ([`output`]),
//! what every command shares ([`context`], [`args`]), and one module per
//! resource holding its subcommands (clap) beside what they do.

pub mod agent_file;
pub mod api;
pub mod args;
pub mod attachments;
pub mod context;
pub mod credentials;
pub mod error;
pub mod jobs;
pub mod media;
pub mod nodes;
pub mod output;
pub mod plans;
pub mod policies;
pub mod sessions;
pub mod snapshots;
pub mod users;
pub mod volumes;

pub use args::{parse_size_gib, AttachTo, SnapshotRef, WaitArgs};
pub use attachments::AttachmentCommand;
pub use context::Context;
pub use credentials::{CredentialsStore, DEFAULT_PROFILE};
pub use error::{ClientError, Result};
pub use jobs::{parse_copy_rate, CopyRate, JobCommand, JobFilter};
pub use media::MediaCommand;
pub use nodes::NodeCommand;
pub use output::OutputFormat;
pub use policies::PolicyCommand;
pub use snapshots::{Consistency, SnapshotCommand};
pub use volumes::{VolumeCommand, VolumeType};
