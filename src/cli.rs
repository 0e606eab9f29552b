//! The `svs` command line: `serve` runs the service, `user` manages users
//! offline; the rest is the API client (`crate::client`), which this file
//! only parses arguments for.

use crate::app::{open_store, Application, StartupFacts};
use crate::client::{
    Context, CredentialsStore, JobFilter, OutputFormat, SnapshotRef, DEFAULT_PROFILE,
};
use crate::clock::SystemClock;
use crate::config::{Config, LogFormat, Overrides};
use crate::logging::init_tracing;
pub use crate::logging::report_failure;
use crate::service::users::add_user;
use clap::{Args, Parser, Subcommand};
use std::io::{IsTerminal, Read};
use std::net::SocketAddr;
use std::path::PathBuf;

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
        /// This host's zone, an svs zone with media: the topology the
        /// orchestrator places volumes by (required: the plugin advertises
        /// accessibility constraints, so NodeGetInfo must report one).
        #[arg(long, env = "SVS_ZONE", value_parser = crate::csi::topology_value)]
        zone: String,
        /// Where the plugin records its devices and mounts (kept across
        /// restarts of the plugin).
        #[arg(long, default_value = crate::csi::DEFAULT_NODE_STATE_DIR)]
        state_dir: PathBuf,
        #[command(flatten)]
        tls: CaCertArgs,
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
        #[command(flatten)]
        tls: CaCertArgs,
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
    /// Users: `add` works on the data directory (offline); the other
    /// commands go through the API (administrators only, except `passwd`).
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
            | Command::Keys { .. }
            | Command::Backup { .. }
            | Command::Restore { .. }
            | Command::Agent { .. }
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
            | Command::Csi {
                command: CsiCommand::Node { tls, .. } | CsiCommand::Controller { tls, .. },
            } => Some(tls),
            command => command.client_args().map(|c| &c.tls),
        };
        tls.and_then(|t| t.ca_cert.as_deref())
    }
}

impl UserCommand {
    /// `user add` works on the data directory; the rest is the API's.
    fn client_args(&self) -> Option<&ClientArgs> {
        match self {
            UserCommand::Add { .. } => None,
            UserCommand::List { client }
            | UserCommand::Get { client, .. }
            | UserCommand::Create { client, .. }
            | UserCommand::Disable { client, .. }
            | UserCommand::Enable { client, .. }
            | UserCommand::Delete { client, .. }
            | UserCommand::ResetPassword { client, .. }
            | UserCommand::MakeAdmin { client, .. }
            | UserCommand::RemoveAdmin { client, .. }
            | UserCommand::Passwd { client, .. } => Some(client),
        }
    }
}

/// Where and how `volume attach` and `attachment create` attach.
#[derive(Debug, Args)]
pub struct AttachTo {
    /// The node (host) it is attached to.
    #[arg(long)]
    node: String,
    /// Where the node's agent mounts a `file` volume (absolute path;
    /// default: under the agent's mount root).
    #[arg(long)]
    mountpoint: Option<String>,
    /// Attach read-only (writes are refused).
    #[arg(long)]
    readonly: bool,
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

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// List the policies.
    List,
    /// Show one policy.
    Get {
        /// The policy's name.
        name: String,
    },
    /// Create a policy (unset resiliencies take the server's defaults 2/1/1).
    Create {
        /// The policy's name.
        name: String,
        /// Media failures to survive (0..2); a policy keeps 1 + the largest
        /// resiliency copies of every slice, each on a different medium.
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..=2))]
        resiliency_media: Option<u8>,
        /// Node failures to survive (0..2); at least 1 puts the copies of a
        /// column on different nodes.
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..=2))]
        resiliency_node: Option<u8>,
        /// Zone failures to survive (0..2); at least 1 puts the copies of a
        /// column in different zones.
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..=2))]
        resiliency_zone: Option<u8>,
    },
    /// Delete a policy.
    Delete {
        /// The policy's name.
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// List the nodes (AGENT: has an agent credential; AGENT SEEN: its
    /// agent's last request).
    List,
    /// Show one node.
    Get {
        /// The node's name.
        name: String,
    },
    /// Add a node (an existing one gets the address) and issue the
    /// credential of its agent, revoking the one it had (administrators).
    /// Prints the credential and the agent's command line, or with
    /// --credential-file only the file's path.
    Add {
        /// The node's name.
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
    Revoke {
        /// The node's name.
        name: String,
    },
    /// Remove a node added through the API (administrators); refused while
    /// it has media or attachments. Its agent credential is revoked.
    Remove {
        /// The node's name.
        name: String,
    },
}

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

#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// List jobs, newest first.
    List {
        /// Job type, e.g. volume_create, volume_modify_extend.
        #[arg(long = "type")]
        kind: Option<String>,
        /// Volume name or id (a name also finds the jobs of a deleted
        /// volume of that name).
        #[arg(long, value_name = "NAME")]
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
    Get {
        /// The job's id.
        id: String,
    },
    /// Follow a job until it ends (exit status 1 if it ends in Error).
    Watch {
        /// The job's id.
        id: String,
    },
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
        /// The user's e-mail address (their sign-in name).
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
    /// List the users of every tenant (administrators).
    List {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Show one user (by e-mail or id; administrators).
    Get {
        /// The user's e-mail or id.
        user: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Create a user through the API (administrators). The password comes
    /// from --password-file, else SVS_NEW_PASSWORD, else stdin's first
    /// line, else a prompt on a terminal.
    Create {
        /// The new user's e-mail (its sign-in name).
        email: String,
        /// Display name (default: the part of the e-mail before '@').
        #[arg(long)]
        name: Option<String>,
        /// Tenant name, created if new (default: your own tenant).
        #[arg(long)]
        tenant: Option<String>,
        /// Make the user a service administrator.
        #[arg(long)]
        admin: bool,
        #[command(flatten)]
        password: NewPasswordArgs,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Disable a user: it cannot sign in, its sessions end at once
    /// (administrators; not yourself).
    Disable {
        /// The user's e-mail or id.
        user: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Enable a disabled user (administrators).
    Enable {
        /// The user's e-mail or id.
        user: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Delete a user (administrators; not yourself). Its tenant's volumes
    /// stay; its jobs keep its name and e-mail.
    Delete {
        /// The user's e-mail or id.
        user: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Set a user's password; its sessions end (administrators; for your
    /// own password use `passwd`). Password as for `create`.
    ResetPassword {
        /// The user's e-mail or id.
        user: String,
        #[command(flatten)]
        password: NewPasswordArgs,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Make a user a service administrator (administrators).
    MakeAdmin {
        /// The user's e-mail or id.
        user: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Take the administrator role away (administrators; not your own, and
    /// never the last enabled administrator's).
    RemoveAdmin {
        /// The user's e-mail or id.
        user: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Change your own password. Current password: --current-password-file,
    /// else SVS_CURRENT_PASSWORD, else stdin's first line, else a prompt; the
    /// new one as for `create` (stdin's next line). Your other sessions end.
    Passwd {
        /// A file whose first line is your current password.
        #[arg(long, value_name = "FILE")]
        current_password_file: Option<PathBuf>,
        #[command(flatten)]
        password: NewPasswordArgs,
        #[command(flatten)]
        client: ClientArgs,
    },
}

/// Where a new password comes from (never a flag's value, which other
/// users could read in the process list).
#[derive(Debug, Args, Clone)]
pub struct NewPasswordArgs {
    /// A file whose first line is the new password.
    #[arg(long, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
}

/// The environment variables the user commands read passwords from.
pub const NEW_PASSWORD_ENV: &str = "SVS_NEW_PASSWORD";
pub const CURRENT_PASSWORD_ENV: &str = "SVS_CURRENT_PASSWORD";

/// Standard input, read once, handing out one line per password.
#[derive(Default)]
struct StdinLines {
    lines: Option<std::vec::IntoIter<String>>,
}

impl StdinLines {
    fn next_line(&mut self) -> Result<Option<String>, String> {
        if self.lines.is_none() {
            let mut input = String::new();
            std::io::stdin()
                .read_to_string(&mut input)
                .map_err(|e| format!("cannot read the password from stdin: {e}"))?;
            let lines: Vec<String> = input.lines().map(str::to_string).collect();
            self.lines = Some(lines.into_iter());
        }
        Ok(self.lines.as_mut().and_then(Iterator::next))
    }
}

/// A password from, in order: the file's first line, the environment
/// variable, the next line of stdin (not a terminal), a prompt (a
/// terminal; twice with `confirm`). Empty is refused.
fn password_from(
    file: Option<&std::path::Path>,
    env: &str,
    what: &str,
    stdin: &mut StdinLines,
    confirm: bool,
) -> Result<String, String> {
    let password = if let Some(path) = file {
        std::fs::read_to_string(path)
            .map_err(|e| format!("password file {}: {e}", path.display()))?
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    } else if let Some(value) = std::env::var(env).ok().filter(|v| !v.is_empty()) {
        value
    } else if !std::io::stdin().is_terminal() {
        stdin.next_line()?.unwrap_or_default()
    } else {
        let first = rpassword::prompt_password(format!("{what}: ")).map_err(|e| e.to_string())?;
        if confirm {
            let second = rpassword::prompt_password(format!("Repeat {}: ", what.to_lowercase()))
                .map_err(|e| e.to_string())?;
            if first != second {
                return Err("passwords do not match".into());
            }
        }
        first
    };
    if password.is_empty() {
        return Err(format!(
            "no {}: give a file, set {env}, or write it on stdin",
            what.to_lowercase()
        ));
    }
    Ok(password)
}

fn new_password(args: &NewPasswordArgs, stdin: &mut StdinLines) -> Result<String, String> {
    password_from(
        args.password_file.as_deref(),
        NEW_PASSWORD_ENV,
        "New password",
        stdin,
        true,
    )
}

/// The first lines of `svs serve` on stdout. The two "listening" lines come
/// first and never change: tests and scripts read them to find the ports.
fn startup_lines(http: SocketAddr, nbd: SocketAddr, facts: &StartupFacts) -> String {
    let scheme = if facts.tls.is_some() { "https" } else { "http" };
    let mut lines = format!(
        "svs listening on {scheme}://{http}\nsvs nbd listening on nbd://{nbd}\n\
         svs data directory: {}\nsvs console: {}\n",
        facts.data_dir.display(),
        console_url(scheme, http)
    );
    if let Some(tls) = &facts.tls {
        let whose = if tls.own_ca {
            "svs's private CA"
        } else {
            "certificate"
        };
        lines.push_str(&format!(
            "svs tls: {whose} {} (SHA-256 {}); clients trust it with --ca-cert {}; nbd tls {}\n",
            tls.certificate.display(),
            tls.fingerprint,
            tls.certificate.display(),
            facts.nbd_tls.as_str()
        ));
    }
    for warning in &facts.plaintext_warnings {
        lines.push_str(&format!("svs: {warning}\n"));
    }
    // Media added through the API are named only when there are some, so
    // the line stays as it was for a service that has none.
    let api = match facts.api_media {
        0 => String::new(),
        n => format!(", {n} added through the API"),
    };
    if facts.demo {
        lines.push_str(&format!(
            "svs media: demo topology, {} media under {}{api} (for trying svs; list real media \
             as [[media]] in a configuration file)\n",
            facts.media,
            facts.data_dir.join("media").display()
        ));
    } else {
        lines.push_str(&format!(
            "svs media: {} from the configuration{api} (no demo topology)\n",
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
fn console_url(scheme: &str, http: SocketAddr) -> String {
    if http.ip().is_unspecified() {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".to_string());
        format!("{scheme}://{host}:{}/ui/", http.port())
    } else {
        format!("{scheme}://{http}/ui/")
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
    if let Some(ca) = cli.command.ca_cert() {
        crate::tls::trust_ca_file(ca)?;
    }
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
            ..
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
                    ..
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
                    ..
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

async fn run_client(ctx: &Context, command: Command) -> crate::client::Result<()> {
    use crate::client::ClientError;
    match command {
        // Handled by `run`.
        Command::Serve { .. }
        | Command::Keys { .. }
        | Command::Backup { .. }
        | Command::Restore { .. }
        | Command::Agent { .. }
        | Command::Csi { .. }
        | Command::AgentDevice { .. } => Ok(()),
        Command::User { command } => run_user_client(ctx, command).await,
        Command::Login { url, email, .. } => {
            let password = read_password(false).map_err(ClientError::Input)?;
            ctx.login(&url, &email, &password).await
        }
        Command::Logout { .. } => ctx.logout().await,
        Command::Volume { command, .. } => match command {
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
            VolumeCommand::Attach { name, to, wait } => {
                ctx.attachment_create(
                    &name,
                    "top",
                    &to.node,
                    to.mountpoint.as_deref(),
                    to.readonly,
                    wait.wait,
                )
                .await
            }
            VolumeCommand::Detach { name, node, wait } => {
                ctx.attachment_delete(&name, "top", &node, wait.wait).await
            }
            VolumeCommand::Recover { name, wait } => ctx.volume_recover(&name, wait.wait).await,
            VolumeCommand::GrowFilesystem { name, wait } => {
                ctx.volume_grow_filesystem(&name, wait.wait).await
            }
        },
        Command::Snapshot { command, .. } => match command {
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
        Command::Policy { command, .. } => match command {
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
        Command::Media { command, .. } => match command {
            MediaCommand::List => ctx.media_list().await,
            MediaCommand::Fail { medium } => ctx.media_fail(&medium).await,
            MediaCommand::Add {
                id,
                node,
                zone,
                directory,
                size,
            } => ctx.media_add(&id, &node, &zone, &directory, size).await,
            MediaCommand::Set { medium, size } => ctx.media_set(&medium, size).await,
            MediaCommand::Remove { medium } => ctx.media_remove(&medium).await,
        },
        Command::Node { command, .. } => match command {
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
            NodeCommand::Remove { name } => ctx.node_remove(&name).await,
        },
        Command::Attachment { command, .. } => match command {
            AttachmentCommand::Create {
                volume,
                to,
                snapshot,
                wait,
            } => {
                ctx.attachment_create(
                    &volume,
                    &snapshot,
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
        Command::Job { command, .. } => match command {
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

/// A size in whole GiB, the unit of every volume size: `20`, `20G`,
/// `20GiB`, `2T`, `2TiB` (any case). Decimal units (`20GB`) are refused
/// rather than silently read as GiB, which they are not.
fn parse_size_gib(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let unit = unit.trim().to_ascii_lowercase();
    let per_unit: u64 = match unit.as_str() {
        "" | "g" | "gi" | "gib" => 1,
        "t" | "ti" | "tib" => 1024,
        "gb" | "tb" => {
            return Err(format!(
                "'{text}': sizes are in binary units; write {digits}G or {digits}GiB ({digits} GiB)"
            ))
        }
        _ => {
            return Err(format!(
                "'{text}' is not a size: give whole GiB, e.g. 20, 20G, 20GiB or 1T"
            ))
        }
    };
    let n: u64 = digits.parse().map_err(|_| {
        format!("'{text}' is not a size: give whole GiB, e.g. 20, 20G, 20GiB or 1T")
    })?;
    if n == 0 {
        return Err(format!("'{text}': a size must be at least 1 GiB"));
    }
    n.checked_mul(per_unit)
        .ok_or_else(|| format!("'{text}' is too large"))
}

/// The user commands that go through the API.
async fn run_user_client(ctx: &Context, command: UserCommand) -> crate::client::Result<()> {
    use crate::client::users::NewUser;
    use crate::client::ClientError;
    let mut stdin = StdinLines::default();
    match command {
        // Handled by `run`: works on the data directory.
        UserCommand::Add { .. } => Ok(()),
        UserCommand::List { .. } => ctx.user_list().await,
        UserCommand::Get { user, .. } => ctx.user_get(&user).await,
        UserCommand::Create {
            email,
            name,
            tenant,
            admin,
            password,
            ..
        } => {
            let password = new_password(&password, &mut stdin).map_err(ClientError::Input)?;
            ctx.user_create(&NewUser {
                email: &email,
                name: name.as_deref(),
                tenant: tenant.as_deref(),
                admin,
                password: &password,
            })
            .await
        }
        UserCommand::Disable { user, .. } => ctx.user_set_disabled(&user, true).await,
        UserCommand::Enable { user, .. } => ctx.user_set_disabled(&user, false).await,
        UserCommand::Delete { user, .. } => ctx.user_delete(&user).await,
        UserCommand::ResetPassword { user, password, .. } => {
            let password = new_password(&password, &mut stdin).map_err(ClientError::Input)?;
            ctx.user_reset_password(&user, &password).await
        }
        UserCommand::MakeAdmin { user, .. } => ctx.user_set_admin(&user, true).await,
        UserCommand::RemoveAdmin { user, .. } => ctx.user_set_admin(&user, false).await,
        UserCommand::Passwd {
            current_password_file,
            password,
            ..
        } => {
            let current = password_from(
                current_password_file.as_deref(),
                CURRENT_PASSWORD_ENV,
                "Current password",
                &mut stdin,
                false,
            )
            .map_err(ClientError::Input)?;
            let new = new_password(&password, &mut stdin).map_err(ClientError::Input)?;
            ctx.user_passwd(&current, &new).await
        }
    }
}

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

/// A password from stdin (all of it but the line end), or prompted for on
/// a terminal (twice with `confirm`).
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
            api_media: 0,
            demo,
            has_users,
            tls: None,
            nbd_tls: crate::config::NbdTlsMode::Off,
            plaintext_warnings: Vec::new(),
        }
    }

    #[test]
    fn startup_lines_with_tls_say_https_and_the_ca_to_trust() {
        let http: SocketAddr = "0.0.0.0:8443".parse().unwrap();
        let nbd: SocketAddr = "127.0.0.1:10809".parse().unwrap();
        let mut facts = facts(true, true);
        facts.tls = Some(crate::tls::TlsFacts {
            certificate: PathBuf::from("/var/lib/svs/tls/ca.pem"),
            own_ca: true,
            fingerprint: "AB:CD".into(),
        });
        facts.nbd_tls = crate::config::NbdTlsMode::Require;
        let text = startup_lines(http, nbd, &facts);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "svs listening on https://0.0.0.0:8443");
        assert!(lines[3].starts_with("svs console: https://"), "{text}");
        assert_eq!(
            lines[4],
            "svs tls: svs's private CA /var/lib/svs/tls/ca.pem (SHA-256 AB:CD); clients trust it \
             with --ca-cert /var/lib/svs/tls/ca.pem; nbd tls require"
        );
    }

    #[test]
    fn startup_lines_count_media_added_through_the_api_when_there_are_some() {
        let http: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let nbd: SocketAddr = "127.0.0.1:10809".parse().unwrap();
        let mut with_api = facts(false, true);
        with_api.api_media = 3;
        let text = startup_lines(http, nbd, &with_api);
        assert_eq!(
            text.lines().nth(4),
            Some("svs media: 2 from the configuration, 3 added through the API (no demo topology)")
        );
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
        let url = console_url("http", "0.0.0.0:8080".parse().unwrap());
        assert!(
            url.starts_with("http://") && url.ends_with(":8080/ui/"),
            "{url}"
        );
        assert!(!url.contains("0.0.0.0"), "{url}");
        assert_eq!(
            console_url("http", "[::1]:9000".parse().unwrap()),
            "http://[::1]:9000/ui/"
        );
    }

    #[test]
    fn volume_recover_takes_a_name_and_wait() {
        match parse(&["volume", "recover", "db", "--wait"]) {
            Ok(Command::Volume {
                command: VolumeCommand::Recover { name, wait },
                ..
            }) => {
                assert_eq!(name, "db");
                assert!(wait.wait);
            }
            other => panic!("{other:?}"),
        }
        match parse(&["volume", "recover", "db"]) {
            Ok(Command::Volume {
                command: VolumeCommand::Recover { wait, .. },
                ..
            }) => assert!(!wait.wait),
            other => panic!("{other:?}"),
        }
        assert!(
            parse(&["volume", "recover"]).is_err(),
            "the volume is required"
        );
    }

    #[test]
    fn user_commands_take_passwords_from_files_never_from_a_flags_value() {
        match parse(&[
            "user",
            "create",
            "bob@example.com",
            "--password-file",
            "pw",
            "--admin",
        ]) {
            Ok(Command::User {
                command:
                    UserCommand::Create {
                        email,
                        admin,
                        password,
                        ..
                    },
            }) => {
                assert_eq!(email, "bob@example.com");
                assert!(admin);
                assert_eq!(password.password_file, Some(PathBuf::from("pw")));
            }
            other => panic!("{other:?}"),
        }
        for args in [
            &["user", "create", "bob@example.com", "--password", "secret"][..],
            &[
                "user",
                "reset-password",
                "bob@example.com",
                "--password",
                "secret",
            ],
            &["user", "passwd", "--current-password", "secret"],
        ] {
            assert!(parse(args).is_err(), "{args:?}");
        }
        match parse(&["user", "passwd", "--current-password-file", "old"]) {
            Ok(Command::User {
                command:
                    UserCommand::Passwd {
                        current_password_file,
                        password,
                        ..
                    },
            }) => {
                assert_eq!(current_password_file, Some(PathBuf::from("old")));
                assert_eq!(password.password_file, None);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn media_fail_takes_one_medium() {
        match parse(&["media", "fail", "d3"]) {
            Ok(Command::Media {
                command: MediaCommand::Fail { medium },
                ..
            }) => assert_eq!(medium, "d3"),
            other => panic!("{other:?}"),
        }
        assert!(parse(&["media", "fail"]).is_err());
        assert!(parse(&["media", "fail", "a", "b"]).is_err());
        assert!(matches!(
            parse(&["media", "list"]),
            Ok(Command::Media {
                command: MediaCommand::List,
                ..
            })
        ));
    }

    #[test]
    fn media_add_needs_node_zone_directory_and_a_size_of_at_least_one() {
        match parse(&[
            "media",
            "add",
            "m7",
            "--node",
            "n",
            "--zone",
            "z",
            "--directory",
            "/srv/m7",
            "--size",
            "100",
        ]) {
            Ok(Command::Media {
                command:
                    MediaCommand::Add {
                        id,
                        node,
                        zone,
                        directory,
                        size,
                    },
                ..
            }) => {
                assert_eq!(
                    (id.as_str(), node.as_str(), zone.as_str()),
                    ("m7", "n", "z")
                );
                assert_eq!((directory, size), (PathBuf::from("/srv/m7"), 100));
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(&["media", "add", "m7", "--node", "n", "--zone", "z"]).is_err());
        assert!(parse(&["media", "set", "m7", "--size", "0"]).is_err());
        assert!(matches!(
            parse(&["media", "set", "m7", "--size", "5"]),
            Ok(Command::Media {
                command: MediaCommand::Set { size: 5, .. },
                ..
            })
        ));
        assert!(matches!(
            parse(&["media", "remove", "m7"]),
            Ok(Command::Media {
                command: MediaCommand::Remove { .. },
                ..
            })
        ));
        assert!(matches!(
            parse(&["node", "remove", "h"]),
            Ok(Command::Node {
                command: NodeCommand::Remove { .. },
                ..
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
                ..
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
                ..
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
                command: NodeCommand::Revoke { .. },
                ..
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
                ..
            }) => assert_eq!(
                (volume, node, snapshot),
                ("db".into(), "host-1".into(), "top".into())
            ),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(&["attachment", "list"]),
            Ok(Command::Attachment {
                command: AttachmentCommand::List { volume: None },
                ..
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
                ..
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
                command: SnapshotCommand::List { volume: None },
                ..
            })
        ));
        assert!(
            parse(&["snapshot", "attach", "v", "s1"]).is_err(),
            "--node is required"
        );
    }

    #[test]
    fn every_argument_has_a_help_line() {
        use clap::CommandFactory;
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if arg.is_hide_set() || id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                if !sub.is_hide_set() {
                    walk(sub, &format!("{path} {}", sub.get_name()), missing);
                }
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "svs", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:#?}");
    }

    #[test]
    fn client_options_belong_to_client_commands_only() {
        for args in [
            &["serve", "--output", "json"][..],
            &["serve", "--profile", "p"],
            &[
                "user", "add", "--email", "a@b.c", "--tenant", "t", "--output", "json",
            ],
            &[
                "user",
                "add",
                "--email",
                "a@b.c",
                "--tenant",
                "t",
                "--profile",
                "p",
            ],
            &["backup", "--out", "f", "--output", "json"],
            &["serve", "--ca-cert", "ca.pem"],
        ] {
            let err = parse(args).expect_err(&args.join(" "));
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::UnknownArgument,
                "{args:?}"
            );
        }
        for args in [
            &["volume", "list", "--output", "json"][..],
            &["volume", "--output", "json", "list"],
            &["job", "list", "--profile", "other", "--output", "json"],
            &["logout", "--profile", "other"],
            &["user", "list", "--output", "json"],
            &["volume", "list", "--ca-cert", "ca.pem", "--output", "json"],
            &["user", "disable", "bob@example.com", "--profile", "other"],
        ] {
            let command = parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            let client = command.client_args().expect("a client command");
            assert!(
                client.output == OutputFormat::Json || client.profile == "other",
                "{args:?}: {client:?}"
            );
        }
    }

    #[test]
    fn sizes_are_whole_gib_with_or_without_a_unit() {
        for (text, gib) in [
            ("20", 20),
            ("20G", 20),
            ("20g", 20),
            ("20GiB", 20),
            ("20 GiB", 20),
            ("20Gi", 20),
            ("2T", 2048),
            ("1TiB", 1024),
        ] {
            assert_eq!(parse_size_gib(text), Ok(gib), "{text}");
        }
        assert_eq!(
            parse_size_gib("20GB"),
            Err("'20GB': sizes are in binary units; write 20G or 20GiB (20 GiB)".into())
        );
        for bad in [
            "",
            "0",
            "0G",
            "G",
            "1.5G",
            "-1",
            "20M",
            "20 apples",
            "99999999999999999999T",
        ] {
            assert!(parse_size_gib(bad).is_err(), "{bad}");
        }
        match parse(&["volume", "resize", "db", "--size", "30GiB"]) {
            Ok(Command::Volume {
                command: VolumeCommand::Resize { size, .. },
                ..
            }) => assert_eq!(size, 30),
            other => panic!("{other:?}"),
        }
    }
}
