//! The command-line client of svs: an HTTP client for the API
//! ([`api`]), the stored sessions ([`credentials`]), a node agent's
//! credential file ([`agent_file`]), tables and JSON
//! ([`output`]) and the commands built on them ([`commands`]).

pub mod agent_file;
pub mod api;
pub mod commands;
pub mod credentials;
pub mod error;
pub mod output;
pub mod users;

pub use commands::{Context, JobFilter, SnapshotRef};
pub use credentials::{CredentialsStore, DEFAULT_PROFILE};
pub use error::{ClientError, Result};
pub use output::OutputFormat;
