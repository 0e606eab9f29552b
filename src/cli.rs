//! The `svs` command line: `serve` runs the service, `user` manages users
//! offline; the rest is the API client (`crate::client`), which this file
//! only parses arguments for.

use crate::app::{open_store, Application, StartupFacts};
use crate::client::{
    Context, CredentialsStore, JobFilter, OutputFormat, SnapshotRef, DEFAULT_PROFILE,
};
use crate::clock::SystemClock;
use crate::config::{Config, LogFormat, Overrides};
use crate::service::users::add_user;
use clap::{Args, Parser, Subcommand};
use std::io::{IsTerminal, Read};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(name = "svs", version, about = "Self-hosted storage volume service")]
pub struct Cli {
    /// Output of the client commands: aligned tables, or the server's JSON as is.
    #[arg(long, global = true, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    /// Profile of the stored credentials used by the client commands.
    #[arg(long, global = true, env = "SVS_PROFILE", default_value = DEFAULT_PROFILE)]
    pub profile: String,
    #[command(subcommand)]
    pub command: Command,
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

/// `svs csi ...`.
#[derive(Debug, Subcommand)]
pub enum CsiCommand {
    /// The node plugin (Identity + Node), one per host: connects, mounts,
    /// publishes and grows the volumes the orchestrator places on it. Needs
    /// root (FUSE, loop devices, mount).
    Node {
        /// Where the orchestrator's sidecars reach it.
        #[arg(long, env = "CSI_ENDPOINT", default_value = "unix:///csi/csi.sock")]
        endpoint: String,
        /// This host's svs node name (the CSI node id).
        #[arg(long, env = "SVS_NODE")]
        node: String,
        /// This host's zone (the topology the orchestrator places by).
        #[arg(long, env = "SVS_ZONE")]
        zone: Option<String>,
        /// Where the plugin records its devices and mounts (kept across
        /// restarts of the plugin).
        #[arg(long, default_value = crate::csi::DEFAULT_NODE_STATE_DIR)]
        state_dir: PathBuf,
    },
    /// The controller plugin (Identity + Controller services): creates,
    /// attaches, snapshots and grows volumes through the svs API as one
    /// user. Its password comes from SVS_CSI_PASSWORD or --password-file.
    Controller {
        /// Where the sidecars connect, e.g. unix:///csi/csi.sock.
        #[arg(long, env = "CSI_ENDPOINT")]
        endpoint: String,
        /// Base URL of the service, e.g. http://svs:8080.
        #[arg(long, env = "SVS_URL")]
        url: String,
        /// The user the plugin signs in as.
        #[arg(long, env = "SVS_CSI_EMAIL")]
        email: String,
        /// A file holding the password (else SVS_CSI_PASSWORD).
        #[arg(long)]
        password_file: Option<PathBuf>,
        /// How long a call waits for its svs job, in seconds, before
        /// answering DEADLINE_EXCEEDED (the orchestrator retries).
        #[arg(long, default_value_t = 300)]
        job_timeout_secs: u64,
    },
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
    /// Manage users directly in the data directory (works offline).
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Manage the token signing keys in the data directory (works offline,
    /// and while the service runs).
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
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
        #[arg(long, default_value = crate::agent::DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
        /// `file` volumes without a mountpoint are mounted at
        /// <MOUNT_ROOT>/<volume>.
        #[arg(long, default_value = crate::agent::DEFAULT_MOUNT_ROOT)]
        mount_root: PathBuf,
        /// How attachments become block devices: `fuse` (svs's reconnecting
        /// NBD client, a FUSE file and a loop device; survives restarts of
        /// the service and sees volumes grow) or `kernel-nbd` (the kernel's
        /// driver, /dev/nbdN; no reconnect, no online growth).
        #[arg(long, value_enum, default_value = "fuse")]
        block_device: crate::agent::device::BlockDeviceMode,
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
        #[arg(long)]
        email: String,
    },
    /// Sign out (revoking the refresh tokens) and forget the profile's tokens.
    Logout,
    /// Volumes.
    Volume {
        #[command(subcommand)]
        command: VolumeCommand,
    },
    /// Policies.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Snapshots (point-in-time images of a volume), rollback, and
    /// read-only attachments of a snapshot.
    Snapshot {
        #[command(subcommand)]
        command: SnapshotCommand,
    },
    /// Media (the directories that hold the slices).
    Media {
        #[command(subcommand)]
        command: MediaCommand,
    },
    /// Nodes, and the credentials of their host agents (administrators).
    Node {
        #[command(subcommand)]
        command: NodeCommand,
    },
    /// Attachments of volumes and snapshots to nodes, with what the
    /// nodes' agents report.
    Attachment {
        #[command(subcommand)]
        command: AttachmentCommand,
    },
    /// Jobs (volume operations run as jobs).
    Job {
        #[command(subcommand)]
        command: JobCommand,
    },
}

#[derive(Debug, Args, Clone, Copy)]
pub struct WaitArgs {
    /// Follow the job until it ends (exit status 1 if it ends in Error).
    #[arg(long)]
    pub wait: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum VolumeType {
    Block,
    File,
}

impl VolumeType {
    fn as_str(self) -> &'static str {
        match self {
            VolumeType::Block => "block",
            VolumeType::File => "file",
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum VolumeCommand {
    /// List the volumes.
    List,
    /// Show one volume (by name or id).
    Get { name: String },
    /// Create a volume; prints the job id.
    Create {
        name: String,
        /// Size in GiB.
        #[arg(long)]
        size: u64,
        #[arg(long)]
        policy: String,
        #[arg(long = "type", value_enum, default_value_t = VolumeType::Block)]
        kind: VolumeType,
        /// The filesystem svs makes on a `file` volume (default ext4).
        #[arg(long, value_parser = ["ext4", "xfs"])]
        filesystem: Option<String>,
        #[arg(long)]
        zone: Option<String>,
        /// Clone: start with the content of snapshot VOLUME/SNAPSHOT (the
        /// size must be at least the snapshot's volumesize).
        #[arg(long, value_name = "VOLUME/SNAPSHOT")]
        from_snapshot: Option<SnapshotRef>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Grow a volume; prints the job id.
    Resize {
        name: String,
        /// New size in GiB (greater than the current size, at most 10x it).
        #[arg(long)]
        size: u64,
        /// Allow moving slices off media that lack room.
        #[arg(long)]
        allow_data_movement: bool,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Delete a volume; prints the job id.
    Delete {
        name: String,
        /// Delete even while attached.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Rebuild the copies a volume lost with a failed medium; prints the job id.
    Recover {
        name: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Consistency {
    Crash,
    Application,
}

impl Consistency {
    fn as_str(self) -> &'static str {
        match self {
            Consistency::Crash => "crash",
            Consistency::Application => "application",
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum SnapshotCommand {
    /// Take a snapshot of a volume; prints the job id.
    Create {
        volume: String,
        name: String,
        #[arg(long, value_enum, default_value_t = Consistency::Crash)]
        consistency: Consistency,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// List the snapshots of a volume, or of every volume without VOLUME.
    List { volume: Option<String> },
    /// Show one snapshot.
    Get { volume: String, name: String },
    /// Delete a snapshot; prints the job id.
    Delete {
        volume: String,
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
        volume: String,
        name: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Attach a snapshot read-only to a node; prints the job id and the NBD URI.
    Attach {
        volume: String,
        name: String,
        #[arg(long)]
        node: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum MediaCommand {
    /// List the media.
    List,
    /// Mark a medium failed (administrators): its slices are lost, and the
    /// volumes with copies on it turn Degraded or Failed.
    Fail { medium: String },
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// List the policies.
    List,
    /// Show one policy.
    Get { name: String },
    /// Create a policy (unset resiliencies take the server's defaults 2/1/1).
    Create {
        name: String,
        /// Copies on different media (0..2).
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..=2))]
        resiliency_media: Option<u8>,
        /// Copies on different nodes (0..2).
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..=2))]
        resiliency_node: Option<u8>,
        /// Copies in different zones (0..2).
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..=2))]
        resiliency_zone: Option<u8>,
    },
    /// Delete a policy.
    Delete { name: String },
}

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// List the nodes (AGENT: has an agent credential; AGENT SEEN: its
    /// agent's last request).
    List,
    /// Show one node.
    Get { name: String },
    /// Add a node (an existing one gets the address) and issue the
    /// credential of its agent, revoking the one it had (administrators).
    /// Prints the credential and the agent's command line, or with
    /// --credential-file only the file's path.
    Add {
        name: String,
        /// The IP address the node attaches from.
        #[arg(long)]
        address: String,
        /// Zone of a new node (default: the server's, "").
        #[arg(long)]
        zone: Option<String>,
        /// Write the credential to this file (created 0600) instead of
        /// printing it.
        #[arg(long, value_name = "FILE")]
        credential_file: Option<PathBuf>,
        /// Replace an existing --credential-file.
        #[arg(long, requires = "credential_file")]
        force: bool,
    },
    /// Revoke the node's agent credential: its agent is refused from then
    /// on (administrators).
    Revoke { name: String },
}

#[derive(Debug, Subcommand)]
pub enum AttachmentCommand {
    /// Attach a volume (or with --snapshot, a snapshot, read-only) to a
    /// node; its host agent connects it and mounts a `file` volume.
    Create {
        volume: String,
        #[arg(long)]
        node: String,
        /// Where the node's agent mounts a `file` volume (absolute path;
        /// default: under the agent's mount root).
        #[arg(long)]
        mountpoint: Option<String>,
        #[arg(long)]
        readonly: bool,
        #[arg(long, default_value = "top")]
        snapshot: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Detach: the node's agent unmounts and disconnects first (a busy
    /// mount fails the job).
    Delete {
        volume: String,
        node: String,
        #[arg(long, default_value = "top")]
        snapshot: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// List the attachments of a volume, or of every volume without VOLUME
    /// (HOST: what the node's agent last reported, `-` before it did).
    List { volume: Option<String> },
    /// Show one attachment, with the agent's report (hostdetail,
    /// hostdevice, hostmountpath, filesystembytes).
    Get {
        volume: String,
        node: String,
        /// The attached snapshot (default: the live volume, `top`).
        #[arg(long, default_value = "top")]
        snapshot: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// List jobs, newest first.
    List {
        /// Job type, e.g. volume_create, volume_modify_extend.
        #[arg(long = "type")]
        kind: Option<String>,
        /// Object (volume id).
        #[arg(long)]
        object: Option<String>,
        /// Pending, Running, Done or Error.
        #[arg(long)]
        state: Option<String>,
        /// Page (1-based).
        #[arg(long)]
        page: Option<u32>,
        /// Jobs per page (1..1000, default 100).
        #[arg(long)]
        count: Option<u32>,
    },
    /// Show one job.
    Get { id: String },
    /// Follow a job until it ends (exit status 1 if it ends in Error).
    Watch { id: String },
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Start signing tokens with a new key. The previous key keeps verifying
    /// the tokens it signed until they expire (token_lifetime), and stays in
    /// the JWKS until then; a running service picks the new key up within
    /// 2 seconds.
    Rotate {
        #[command(flatten)]
        common: CommonArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a user; the password is read from stdin, or prompted for on a terminal.
    Add {
        #[command(flatten)]
        common: CommonArgs,
        #[arg(long)]
        email: String,
        /// Tenant name; created if it does not exist.
        #[arg(long)]
        tenant: String,
        /// Display name (default: the part of the e-mail before '@').
        #[arg(long)]
        name: Option<String>,
        /// Make the user a service administrator: it manages the infrastructure
        /// (nodes, media) that every tenant shares, whatever its own tenant.
        #[arg(long)]
        admin: bool,
    },
}

/// The log format of this process once `init_tracing` set it up, so that
/// the error ending the process comes out in it too (`report_failure`).
static LOG_FORMAT: std::sync::OnceLock<LogFormat> = std::sync::OnceLock::new();

/// Log lines to stderr: colour codes only on a terminal (a journal or a file
/// would keep them as noise), or one JSON object per line.
fn init_tracing(filter: &str, format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        // The event's fields (`message` among them) at the top level, where
        // collectors look for them.
        LogFormat::Json => builder
            .with_ansi(false)
            .json()
            .flatten_event(true)
            .try_init(),
    };
    if installed.is_ok() {
        let _ = LOG_FORMAT.set(format);
    }
}

/// The error that ends the process: a log event when logs are JSON (one
/// format per stream for collectors), else a plain `svs: ...` line.
pub fn report_failure(message: &str) {
    if LOG_FORMAT.get() == Some(&LogFormat::Json) {
        tracing::error!("svs: {message}");
    } else {
        eprintln!("svs: {message}");
    }
}

/// The first lines of `svs serve` on stdout. The two "listening" lines come
/// first and never change: tests and scripts read them to find the ports.
fn startup_lines(http: SocketAddr, nbd: SocketAddr, facts: &StartupFacts) -> String {
    let mut lines = format!(
        "svs listening on http://{http}\nsvs nbd listening on nbd://{nbd}\n\
         svs data directory: {}\nsvs console: {}\n",
        facts.data_dir.display(),
        console_url(http)
    );
    if facts.demo {
        lines.push_str(&format!(
            "svs media: demo topology, {} media under {} (for trying svs; list real media as \
             [[media]] in a configuration file)\n",
            facts.media,
            facts.data_dir.join("media").display()
        ));
    } else {
        lines.push_str(&format!(
            "svs media: {} from the configuration (no demo topology)\n",
            facts.media
        ));
    }
    if !facts.has_users {
        lines.push_str(&format!(
            "svs: {}\n",
            crate::app::first_user_hint(&facts.data_dir)
        ));
    }
    lines
}

/// The console's address; on every address (0.0.0.0, ::) through this
/// host's name, which other machines can more likely reach.
fn console_url(http: SocketAddr) -> String {
    if http.ip().is_unspecified() {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".to_string());
        format!("http://{host}:{}/ui/", http.port())
    } else {
        format!("http://{http}/ui/")
    }
}

/// One warning naming every `SVS_*` variable that is no setting (a typo
/// stays visible without stopping the service).
fn warn_unknown_env_settings() {
    let names = std::env::vars_os().filter_map(|(k, _)| k.into_string().ok());
    let unknown = crate::config::unknown_env_settings(names);
    if !unknown.is_empty() {
        tracing::warn!(
            variables = %unknown.join(", "),
            "ignoring unknown SVS_* environment variables (not settings of svs serve)"
        );
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

pub async fn run(cli: Cli) -> Result<(), String> {
    private_files();
    match cli.command {
        Command::Serve {
            common,
            listen,
            nbd_listen,
        } => {
            let config = Config::load(&Overrides {
                config_file: common.config,
                data_dir: common.data_dir,
                listen,
                nbd_listen,
            })?;
            init_tracing(&config.log, config.log_format);
            warn_unknown_env_settings();
            let app = Application::build(config).await?;
            let addr = app.local_addr()?;
            let nbd = app.nbd_addr()?;
            // One write, and no failure if nobody reads stdout any more.
            {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(startup_lines(addr, nbd, app.facts()).as_bytes());
                let _ = out.flush();
            }
            app.run_until_stopped().await
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
        } => {
            let config = common.offline_config()?;
            let password = read_password(true)?;
            let store = open_store(&config).await?;
            add_user(
                &*store,
                &SystemClock,
                &tenant,
                &email,
                name.as_deref(),
                &password,
                admin,
            )
            .await?;
            store.close().await;
            println!("added user {email} to tenant {tenant}");
            Ok(())
        }
        Command::Keys {
            command: KeysCommand::Rotate { common },
        } => {
            let config = common.offline_config()?;
            let now = crate::clock::Clock::now_secs(&SystemClock);
            let lifetime = config.token_lifetime.as_secs();
            let ring = crate::auth::KeyRing::rotate(&config.data_dir, now, lifetime)?;
            println!("new signing key {}", ring.current.kid);
            for r in &ring.retired {
                println!(
                    "retired key {} verifies tokens until {}",
                    r.key.kid,
                    crate::service::format_ms(
                        i64::try_from(r.live_until_secs(lifetime))
                            .unwrap_or(i64::MAX / 1000)
                            .saturating_mul(1000)
                    )
                );
            }
            Ok(())
        }
        Command::Backup { common, out } => {
            let config = common.offline_config()?;
            let manifest = crate::backup::backup(&config.data_dir, &out).await?;
            println!(
                "backed up {} to {} (database schema {}; {})",
                config.data_dir.display(),
                out.display(),
                manifest.schema_version,
                manifest
                    .files
                    .iter()
                    .map(|f| f.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            Ok(())
        }
        Command::Restore { common, from } => {
            let config = common.offline_config()?;
            let manifest = crate::backup::restore(&config.data_dir, &from).await?;
            println!(
                "restored {} (taken {} by svs {}, database schema {}) into {}",
                from.display(),
                manifest.created,
                manifest.svs_version,
                manifest.schema_version,
                config.data_dir.display()
            );
            Ok(())
        }
        Command::Agent {
            url,
            node,
            credential_file,
            state_dir,
            mount_root,
            block_device,
        } => {
            init_tracing(
                &std::env::var("SVS_LOG").unwrap_or_else(|_| "info".into()),
                LogFormat::Text,
            );
            crate::agent::run(crate::agent::AgentConfig {
                url,
                node,
                credential_file,
                state_dir,
                mount_root,
                block_device,
            })
            .await
            .map_err(|e| e.to_string())
        }
        Command::Csi {
            command:
                CsiCommand::Node {
                    endpoint,
                    node,
                    zone,
                    state_dir,
                },
        } => {
            init_tracing(
                &std::env::var("SVS_LOG").unwrap_or_else(|_| "info".into()),
                LogFormat::Text,
            );
            crate::csi::run_node(crate::csi::NodeConfig {
                endpoint,
                node,
                zone,
                state_dir,
            })
            .await
        }
        Command::Csi {
            command:
                CsiCommand::Controller {
                    endpoint,
                    url,
                    email,
                    password_file,
                    job_timeout_secs,
                },
        } => {
            init_tracing(
                &std::env::var("SVS_LOG").unwrap_or_else(|_| "info".into()),
                LogFormat::Text,
            );
            let password = csi_password(password_file.as_deref())?;
            crate::csi::run_controller(crate::csi::ControllerConfig {
                endpoint,
                url,
                email,
                password,
                job_timeout: std::time::Duration::from_secs(job_timeout_secs),
            })
            .await
        }
        Command::AgentDevice { dir } => {
            init_tracing(
                &std::env::var("SVS_LOG").unwrap_or_else(|_| "info".into()),
                LogFormat::Text,
            );
            crate::agent::device::run_device(dir).await
        }
        command => {
            let ctx = Context {
                store: CredentialsStore::from_env().map_err(|e| e.to_string())?,
                profile: cli.profile,
                output: cli.output,
            };
            run_client(&ctx, command).await.map_err(|e| e.to_string())
        }
    }
}

async fn run_client(ctx: &Context, command: Command) -> crate::client::Result<()> {
    use crate::client::ClientError;
    match command {
        // Handled by `run`.
        Command::Serve { .. }
        | Command::User { .. }
        | Command::Keys { .. }
        | Command::Backup { .. }
        | Command::Restore { .. }
        | Command::Agent { .. }
        | Command::Csi { .. }
        | Command::AgentDevice { .. } => Ok(()),
        Command::Login { url, email } => {
            let password = read_password(false).map_err(ClientError::Input)?;
            ctx.login(&url, &email, &password).await
        }
        Command::Logout => ctx.logout().await,
        Command::Volume { command } => match command {
            VolumeCommand::List => ctx.volume_list().await,
            VolumeCommand::Get { name } => ctx.volume_get(&name).await,
            VolumeCommand::Create {
                name,
                size,
                policy,
                kind,
                filesystem,
                zone,
                from_snapshot,
                wait,
            } => {
                ctx.volume_create(
                    &name,
                    size,
                    &policy,
                    kind.as_str(),
                    filesystem.as_deref(),
                    zone.as_deref(),
                    from_snapshot.as_ref(),
                    wait.wait,
                )
                .await
            }
            VolumeCommand::Resize {
                name,
                size,
                allow_data_movement,
                wait,
            } => {
                ctx.volume_resize(&name, size, allow_data_movement, wait.wait)
                    .await
            }
            VolumeCommand::Delete { name, force, wait } => {
                ctx.volume_delete(&name, force, wait.wait).await
            }
            VolumeCommand::Recover { name, wait } => ctx.volume_recover(&name, wait.wait).await,
        },
        Command::Snapshot { command } => match command {
            SnapshotCommand::Create {
                volume,
                name,
                consistency,
                wait,
            } => {
                ctx.snapshot_create(&volume, &name, consistency.as_str(), wait.wait)
                    .await
            }
            SnapshotCommand::List { volume } => ctx.snapshot_list(volume.as_deref()).await,
            SnapshotCommand::Get { volume, name } => ctx.snapshot_get(&volume, &name).await,
            SnapshotCommand::Delete {
                volume,
                name,
                force,
                wait,
            } => ctx.snapshot_delete(&volume, &name, force, wait.wait).await,
            SnapshotCommand::Rollback { volume, name, wait } => {
                ctx.snapshot_rollback(&volume, &name, wait.wait).await
            }
            SnapshotCommand::Attach {
                volume,
                name,
                node,
                wait,
            } => ctx.snapshot_attach(&volume, &name, &node, wait.wait).await,
        },
        Command::Policy { command } => match command {
            PolicyCommand::List => ctx.policy_list().await,
            PolicyCommand::Get { name } => ctx.policy_get(&name).await,
            PolicyCommand::Create {
                name,
                resiliency_media,
                resiliency_node,
                resiliency_zone,
            } => {
                ctx.policy_create(&name, resiliency_media, resiliency_node, resiliency_zone)
                    .await
            }
            PolicyCommand::Delete { name } => ctx.policy_delete(&name).await,
        },
        Command::Media { command } => match command {
            MediaCommand::List => ctx.media_list().await,
            MediaCommand::Fail { medium } => ctx.media_fail(&medium).await,
        },
        Command::Node { command } => match command {
            NodeCommand::List => ctx.node_list().await,
            NodeCommand::Get { name } => ctx.node_get(&name).await,
            NodeCommand::Add {
                name,
                address,
                zone,
                credential_file,
                force,
            } => {
                ctx.node_add(
                    &name,
                    &address,
                    zone.as_deref(),
                    credential_file.as_deref(),
                    force,
                )
                .await
            }
            NodeCommand::Revoke { name } => ctx.node_revoke(&name).await,
        },
        Command::Attachment { command } => match command {
            AttachmentCommand::Create {
                volume,
                node,
                mountpoint,
                readonly,
                snapshot,
                wait,
            } => {
                ctx.attachment_create(
                    &volume,
                    &snapshot,
                    &node,
                    mountpoint.as_deref(),
                    readonly,
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
                ctx.attachment_delete(&volume, &snapshot, &node, wait.wait)
                    .await
            }
            AttachmentCommand::List { volume } => ctx.attachment_list(volume.as_deref()).await,
            AttachmentCommand::Get {
                volume,
                node,
                snapshot,
            } => ctx.attachment_get(&volume, &snapshot, &node).await,
        },
        Command::Job { command } => match command {
            JobCommand::List {
                kind,
                object,
                state,
                page,
                count,
            } => {
                ctx.job_list(&JobFilter {
                    kind,
                    object,
                    state,
                    page,
                    count,
                })
                .await
            }
            JobCommand::Get { id } => ctx.job_get(&id).await,
            JobCommand::Watch { id } => ctx.job_watch(&id).await,
        },
    }
}

/// A password from stdin (its first line), or prompted for on a terminal
/// (twice with `confirm`).
/// The CSI controller's password: the file's first line, else
/// SVS_CSI_PASSWORD (a Kubernetes Secret either way).
fn csi_password(file: Option<&std::path::Path>) -> Result<String, String> {
    let password = match file {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("password file {}: {e}", path.display()))?
            .lines()
            .next()
            .unwrap_or_default()
            .to_string(),
        None => std::env::var("SVS_CSI_PASSWORD").unwrap_or_default(),
    };
    if password.is_empty() {
        return Err("no password: set SVS_CSI_PASSWORD or pass --password-file".into());
    }
    Ok(password)
}

fn read_password(confirm: bool) -> Result<String, String> {
    if std::io::stdin().is_terminal() {
        let first = rpassword::prompt_password("Password: ").map_err(|e| e.to_string())?;
        if !confirm {
            return Ok(first);
        }
        let second = rpassword::prompt_password("Repeat password: ").map_err(|e| e.to_string())?;
        if first != second {
            return Err("passwords do not match".into());
        }
        Ok(first)
    } else {
        let mut input = String::new();
        std::io::stdin()
            .read_to_string(&mut input)
            .map_err(|e| format!("cannot read the password from stdin: {e}"))?;
        Ok(input.trim_end_matches(['\n', '\r']).to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Command, clap::Error> {
        Cli::try_parse_from(std::iter::once("svs").chain(args.iter().copied())).map(|c| c.command)
    }

    fn facts(demo: bool, has_users: bool) -> StartupFacts {
        StartupFacts {
            data_dir: PathBuf::from("/var/lib/svs"),
            media: if demo { 6 } else { 2 },
            demo,
            has_users,
        }
    }

    #[test]
    fn startup_lines_begin_with_the_listening_lines_then_say_where_things_are() {
        let http: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let nbd: SocketAddr = "127.0.0.1:10809".parse().unwrap();
        let text = startup_lines(http, nbd, &facts(true, true));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "svs listening on http://127.0.0.1:8080",
                "svs nbd listening on nbd://127.0.0.1:10809",
                "svs data directory: /var/lib/svs",
                "svs console: http://127.0.0.1:8080/ui/",
                "svs media: demo topology, 6 media under /var/lib/svs/media (for trying svs; \
                 list real media as [[media]] in a configuration file)",
            ]
        );
        let text = startup_lines(http, nbd, &facts(false, false));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 6, "{text}");
        assert_eq!(
            lines[4],
            "svs media: 2 from the configuration (no demo topology)"
        );
        assert!(
            lines[5].starts_with(
                "svs: no users yet, so nobody can sign in: add the first administrator with \
                 `svs user add --admin --email EMAIL --tenant TENANT --data-dir /var/lib/svs`"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_console_url_of_every_address_names_this_host() {
        let url = console_url("0.0.0.0:8080".parse().unwrap());
        assert!(
            url.starts_with("http://") && url.ends_with(":8080/ui/"),
            "{url}"
        );
        assert!(!url.contains("0.0.0.0"), "{url}");
        assert_eq!(
            console_url("[::1]:9000".parse().unwrap()),
            "http://[::1]:9000/ui/"
        );
    }

    #[test]
    fn volume_recover_takes_a_name_and_wait() {
        match parse(&["volume", "recover", "db", "--wait"]) {
            Ok(Command::Volume {
                command: VolumeCommand::Recover { name, wait },
            }) => {
                assert_eq!(name, "db");
                assert!(wait.wait);
            }
            other => panic!("{other:?}"),
        }
        match parse(&["volume", "recover", "db"]) {
            Ok(Command::Volume {
                command: VolumeCommand::Recover { wait, .. },
            }) => assert!(!wait.wait),
            other => panic!("{other:?}"),
        }
        assert!(
            parse(&["volume", "recover"]).is_err(),
            "the volume is required"
        );
    }

    #[test]
    fn media_fail_takes_one_medium() {
        match parse(&["media", "fail", "d3"]) {
            Ok(Command::Media {
                command: MediaCommand::Fail { medium },
            }) => assert_eq!(medium, "d3"),
            other => panic!("{other:?}"),
        }
        assert!(parse(&["media", "fail"]).is_err());
        assert!(parse(&["media", "fail", "a", "b"]).is_err());
        assert!(matches!(
            parse(&["media", "list"]),
            Ok(Command::Media {
                command: MediaCommand::List
            })
        ));
    }

    #[test]
    fn from_snapshot_is_volume_slash_snapshot() {
        match parse(&[
            "volume",
            "create",
            "c",
            "--size",
            "4",
            "--policy",
            "p",
            "--from-snapshot",
            "v/s1",
        ]) {
            Ok(Command::Volume {
                command: VolumeCommand::Create { from_snapshot, .. },
            }) => assert_eq!(
                from_snapshot,
                Some(SnapshotRef {
                    volume: "v".into(),
                    snapshot: "s1".into()
                })
            ),
            other => panic!("{other:?}"),
        }
        for bad in ["v", "v/", "/s", "v/s/x"] {
            let err = parse(&[
                "volume",
                "create",
                "c",
                "--size",
                "4",
                "--policy",
                "p",
                "--from-snapshot",
                bad,
            ])
            .expect_err(bad);
            assert!(
                err.to_string().contains("expected VOLUME/SNAPSHOT"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn node_add_needs_an_address_and_force_needs_a_file() {
        match parse(&[
            "node",
            "add",
            "host-7",
            "--address",
            "10.0.0.7",
            "--credential-file",
            "/tmp/c",
            "--force",
        ]) {
            Ok(Command::Node {
                command:
                    NodeCommand::Add {
                        name,
                        address,
                        zone,
                        credential_file,
                        force,
                    },
            }) => {
                assert_eq!((name.as_str(), address.as_str()), ("host-7", "10.0.0.7"));
                assert_eq!(zone, None);
                assert_eq!(credential_file, Some(PathBuf::from("/tmp/c")));
                assert!(force);
            }
            other => panic!("{other:?}"),
        }
        assert!(
            parse(&["node", "add", "host-7"]).is_err(),
            "--address is required"
        );
        assert!(parse(&["node", "add", "h", "--address", "10.0.0.7", "--force"]).is_err());
        assert!(matches!(
            parse(&["node", "revoke", "h"]),
            Ok(Command::Node {
                command: NodeCommand::Revoke { .. }
            })
        ));
    }

    #[test]
    fn attachment_get_defaults_to_the_live_volume() {
        match parse(&["attachment", "get", "db", "host-1"]) {
            Ok(Command::Attachment {
                command:
                    AttachmentCommand::Get {
                        volume,
                        node,
                        snapshot,
                    },
            }) => assert_eq!(
                (volume, node, snapshot),
                ("db".into(), "host-1".into(), "top".into())
            ),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(&["attachment", "list"]),
            Ok(Command::Attachment {
                command: AttachmentCommand::List { volume: None }
            })
        ));
    }

    #[test]
    fn snapshot_create_defaults_to_crash_consistency() {
        match parse(&["snapshot", "create", "v", "s1"]) {
            Ok(Command::Snapshot {
                command:
                    SnapshotCommand::Create {
                        consistency, wait, ..
                    },
            }) => {
                assert_eq!(consistency, Consistency::Crash);
                assert!(!wait.wait);
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(&["snapshot", "create", "v", "s1", "--consistency", "fuzzy"]).is_err());
        assert!(matches!(
            parse(&["snapshot", "list"]),
            Ok(Command::Snapshot {
                command: SnapshotCommand::List { volume: None }
            })
        ));
        assert!(
            parse(&["snapshot", "attach", "v", "s1"]).is_err(),
            "--node is required"
        );
    }
}
