//! The `svs` command line: `serve` runs the service (the binary's, given to
//! [`main`] as a [`ServeFn`]: it alone needs `svs-api`); `user add`,
//! `keys`, `backup` and `restore` work on the data directory ([`offline`]);
//! `agent`, `agent-device` and `csi` run on a host ([`hosts`]); the rest is
//! the API client (`svs_client`, where each resource's subcommands live
//! beside what they do). This module parses and dispatches.

mod hosts;
mod offline;
mod passwords;
mod users;

pub use hosts::CsiCommand;
pub use offline::KeysCommand;
pub use passwords::NewPasswordArgs;
pub use passwords::{CURRENT_PASSWORD_ENV, NEW_PASSWORD_ENV};
pub use svs_common::logging::report_failure;
pub use users::UserCommand;

use clap::{Args, Parser, Subcommand};
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::ExitCode;
use svs_client::{
    AttachmentCommand, Context, CredentialsStore, JobCommand, MediaCommand, NodeCommand,
    OutputFormat, PolicyCommand, SnapshotCommand, VolumeCommand, DEFAULT_PROFILE,
};
use svs_control::config::{Config, Overrides};

#[derive(Debug, Parser)]
#[command(name = "svs", version, about = "Self-hosted storage volume service")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The options of the API client's commands, and only of those: `serve`
/// and the offline commands print nothing a profile or format could change.
/// Global within each client command, so they go before or after its
/// subcommand (`svs volume list --output json`).
#[derive(Debug, Args, Clone)]
pub struct ClientArgs {
    /// Output: aligned tables and summaries, or the server's JSON as is.
    #[arg(long, global = true, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    /// Profile of the stored credentials (several sessions side by side).
    #[arg(long, global = true, env = "SVS_PROFILE", default_value = DEFAULT_PROFILE)]
    pub profile: String,
    #[command(flatten)]
    pub tls: CaCertArgs,
}

/// The CA a client trusts beside the system's roots: client commands, the
/// agent and the CSI plugins (not `serve`, whose certificates are settings).
#[derive(Debug, Args, Clone, Default)]
pub struct CaCertArgs {
    /// A CA certificate (PEM) trusted beside the system's and the built-in
    /// roots, e.g. the `<data_dir>/tls/ca.pem` of a service with tls = "auto".
    #[arg(long, global = true, env = "SVS_CA_CERT", value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct CommonArgs {
    /// Configuration file (TOML).
    #[arg(long, env = "SVS_CONFIG")]
    pub config: Option<PathBuf>,
    /// Data directory (database, keys, demo media). Default ./svs-data;
    /// the systemd unit (deploy/systemd/svs.service) uses /var/lib/svs.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
}

impl CommonArgs {
    /// The configuration of a command that works on the data directory
    /// without the service's network settings (`user add`, `keys rotate`).
    fn offline_config(self) -> Result<Config, String> {
        Config::load(&Overrides {
            config_file: self.config,
            data_dir: self.data_dir,
            listen: None,
            nbd_listen: None,
        })
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the service.
    Serve {
        #[command(flatten)]
        common: CommonArgs,
        /// Address to listen on, e.g. 127.0.0.1:8080 (port 0 = any free port).
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Address the NBD server listens on, e.g. 127.0.0.1:10809.
        #[arg(long)]
        nbd_listen: Option<SocketAddr>,
    },
    /// Users: `add` works on the data directory (offline); the other
    /// commands go through the API (administrators only, except `passwd`).
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Manage the token signing keys in the configured store (works
    /// offline, and while services run).
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// The store: move a stopped service's SQLite database to PostgreSQL.
    Store {
        #[command(subcommand)]
        command: offline::StoreCommand,
    },
    /// Copy the service's state (database and token signing keys) into one
    /// archive, consistently, while the service runs. Slice data stays on
    /// the media and is not in it.
    Backup {
        #[command(flatten)]
        common: CommonArgs,
        /// The archive to write (a new file; tar format).
        #[arg(long)]
        out: PathBuf,
    },
    /// Put a backup into an empty (or missing) data directory, to start
    /// `svs serve` on. Refuses a directory with anything in it.
    Restore {
        #[command(flatten)]
        common: CommonArgs,
        /// The archive written by `svs backup`.
        #[arg(long)]
        from: PathBuf,
    },
    /// Run the host agent: follow this node's attachments, connect them as
    /// block devices, mount and grow `file` volumes, report their state.
    Agent {
        /// Base URL of the service, e.g. http://10.0.0.1:8080.
        #[arg(long, env = "SVS_URL")]
        url: String,
        /// This host's node name (as in `svs node add`).
        #[arg(long, env = "SVS_NODE")]
        node: String,
        /// File holding the node's agent credential (from `svs node add`).
        #[arg(long, env = "SVS_AGENT_CREDENTIAL_FILE")]
        credential_file: PathBuf,
        /// Where the agent records its devices and mounts.
        #[arg(long, default_value = svs_agent::DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
        /// `file` volumes without a mountpoint are mounted at
        /// <MOUNT_ROOT>/<volume>.
        #[arg(long, default_value = svs_agent::DEFAULT_MOUNT_ROOT)]
        mount_root: PathBuf,
        /// How attachments become block devices: `fuse` (svs's reconnecting
        /// NBD client, a FUSE file and a loop device; survives restarts of
        /// the service and sees volumes grow) or `kernel-nbd` (the kernel's
        /// driver, /dev/nbdN; no reconnect, no online growth).
        #[arg(long, value_enum, default_value = "fuse")]
        block_device: svs_agent::device::BlockDeviceMode,
        #[command(flatten)]
        tls: CaCertArgs,
    },
    /// Run a storage node: register this host's media with the service,
    /// heartbeat, and serve their slices to the rest of svs.
    StorageNode {
        /// The storage node's configuration file (TOML; see
        /// docs/storage-nodes.md).
        #[arg(long, env = "SVS_STORAGE_NODE_CONFIG", default_value = svs_storage_node::DEFAULT_CONFIG)]
        config: PathBuf,
        #[command(flatten)]
        tls: CaCertArgs,
    },
    /// The CSI driver's plugins, for Kubernetes and other container
    /// orchestrators.
    Csi {
        #[command(subcommand)]
        command: CsiCommand,
    },
    /// One attached volume's device (started by `svs agent`, not by hand).
    #[command(hide = true)]
    AgentDevice {
        #[arg(long)]
        dir: PathBuf,
    },
    /// Sign in to a service and store the tokens in ~/.config/svs/credentials.
    /// The password is read from stdin, or prompted for on a terminal.
    Login {
        /// Base URL of the service, e.g. http://127.0.0.1:8080.
        #[arg(long, env = "SVS_URL")]
        url: String,
        /// The e-mail address of the account.
        #[arg(long)]
        email: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Sign out (revoking the refresh tokens) and forget the profile's tokens.
    Logout {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Volumes.
    Volume {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: VolumeCommand,
    },
    /// Policies.
    Policy {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Snapshots (point-in-time images of a volume), rollback, and
    /// read-only attachments of a snapshot.
    Snapshot {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: SnapshotCommand,
    },
    /// Media (the directories that hold the slices).
    Media {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: MediaCommand,
    },
    /// Nodes, and the credentials of their host agents (administrators).
    Node {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: NodeCommand,
    },
    /// Attachments of volumes and snapshots to nodes, with what the
    /// nodes' agents report.
    Attachment {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: AttachmentCommand,
    },
    /// Jobs (volume operations run as jobs).
    Job {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: JobCommand,
    },
}

impl Command {
    /// The client options of an API client command (`None` for `serve`
    /// and the commands that work on the data directory or the host).
    fn client_args(&self) -> Option<&ClientArgs> {
        match self {
            Command::User { command } => command.client_args(),
            Command::Login { client, .. }
            | Command::Logout { client }
            | Command::Volume { client, .. }
            | Command::Policy { client, .. }
            | Command::Snapshot { client, .. }
            | Command::Media { client, .. }
            | Command::Node { client, .. }
            | Command::Attachment { client, .. }
            | Command::Job { client, .. } => Some(client),
            Command::Serve { .. }
            | Command::Store { .. }
            | Command::Keys { .. }
            | Command::Backup { .. }
            | Command::Restore { .. }
            | Command::Agent { .. }
            | Command::StorageNode { .. }
            | Command::Csi { .. }
            | Command::AgentDevice { .. } => None,
        }
    }
}

impl Command {
    /// The CA certificate this process trusts beside the system's roots.
    fn ca_cert(&self) -> Option<&std::path::Path> {
        let tls = match self {
            Command::Agent { tls, .. }
            | Command::StorageNode { tls, .. }
            | Command::Csi {
                command: CsiCommand::Node { tls, .. } | CsiCommand::Controller { tls, .. },
            } => Some(tls),
            command => command.client_args().map(|c| &c.tls),
        };
        tls.and_then(|t| t.ca_cert.as_deref())
    }
}

/// Everything svs creates (database, slice files, media directories) holds
/// user data or password hashes: owner-only.
fn private_files() {
    // SAFETY: umask only changes this process's file-creation mask; it
    // cannot fail and touches no memory.
    unsafe {
        libc::umask(0o077);
    }
}

/// `svs serve`'s arguments.
pub struct ServeArgs {
    pub common: CommonArgs,
    pub listen: Option<SocketAddr>,
    pub nbd_listen: Option<SocketAddr>,
}

/// What runs `svs serve`: a boxed future, so that its state machine is
/// compiled where it is written, not here.
pub type ServeFn = fn(ServeArgs) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// The `svs` command: the command line parsed and run on a tokio runtime
/// (in this crate, not in the binary, which would compile every command's
/// state machine again at each build).
pub fn main(serve: ServeFn) -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            report_failure(&format!("cannot start the async runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli, serve)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            report_failure(&message);
            ExitCode::FAILURE
        }
    }
}

pub async fn run(cli: Cli, serve: ServeFn) -> Result<(), String> {
    private_files();
    if let Some(ca) = cli.command.ca_cert() {
        svs_common::tls::trust_ca_file(ca)?;
    }
    match cli.command {
        Command::Serve {
            common,
            listen,
            nbd_listen,
        } => {
            serve(ServeArgs {
                common,
                listen,
                nbd_listen,
            })
            .await
        }
        Command::User {
            command:
                UserCommand::Add {
                    common,
                    email,
                    tenant,
                    name,
                    admin,
                },
        } => offline::user_add(common, &email, &tenant, name.as_deref(), admin).await,
        Command::Keys {
            command: KeysCommand::Rotate { common },
        } => offline::keys_rotate(common).await,
        Command::Store {
            command: offline::StoreCommand::Migrate { from, to },
        } => offline::store_migrate(&from, &to).await,
        Command::Backup { common, out } => offline::backup(common, &out).await,
        Command::Restore { common, from } => offline::restore(common, &from).await,
        Command::Agent {
            url,
            node,
            credential_file,
            state_dir,
            mount_root,
            block_device,
            ..
        } => {
            hosts::agent(svs_agent::AgentConfig {
                url,
                node,
                credential_file,
                state_dir,
                mount_root,
                block_device,
            })
            .await
        }
        Command::StorageNode { config, .. } => hosts::storage_node(&config).await,
        Command::Csi { command } => hosts::csi(command).await,
        Command::AgentDevice { dir } => hosts::agent_device(dir).await,
        command => {
            let client = command
                .client_args()
                .cloned()
                .unwrap_or_else(|| ClientArgs {
                    output: OutputFormat::Table,
                    profile: DEFAULT_PROFILE.to_string(),
                    tls: CaCertArgs::default(),
                });
            let ctx = Context {
                store: CredentialsStore::from_env().map_err(|e| e.to_string())?,
                profile: client.profile,
                output: client.output,
            };
            run_client(&ctx, command).await.map_err(|e| e.to_string())
        }
    }
}

/// The API client's commands: each resource's own dispatch.
async fn run_client(ctx: &Context, command: Command) -> svs_client::Result<()> {
    match command {
        // Handled by `run`.
        Command::Serve { .. }
        | Command::Store { .. }
        | Command::Keys { .. }
        | Command::Backup { .. }
        | Command::Restore { .. }
        | Command::Agent { .. }
        | Command::StorageNode { .. }
        | Command::Csi { .. }
        | Command::AgentDevice { .. } => Ok(()),
        Command::User { command } => users::run(ctx, command).await,
        Command::Login { url, email, .. } => {
            let password =
                passwords::read_password(false).map_err(svs_client::ClientError::Input)?;
            ctx.login(&url, &email, &password).await
        }
        Command::Logout { .. } => ctx.logout().await,
        Command::Volume { command, .. } => command.run(ctx).await,
        Command::Snapshot { command, .. } => command.run(ctx).await,
        Command::Policy { command, .. } => command.run(ctx).await,
        Command::Media { command, .. } => command.run(ctx).await,
        Command::Node { command, .. } => command.run(ctx).await,
        Command::Attachment { command, .. } => command.run(ctx).await,
        Command::Job { command, .. } => command.run(ctx).await,
    }
}

#[cfg(test)]
mod tests;
