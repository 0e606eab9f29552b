//! The commands that run on a host: the agent, one attached volume's
//! device process, and the CSI driver's plugins.

use super::CaCertArgs;
use clap::Subcommand;
use std::path::PathBuf;
use svs_common::logging::init_tracing;
use svs_control::config::LogFormat;

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
        #[arg(long, env = "SVS_ZONE", value_parser = svs_csi_driver::topology_value)]
        zone: String,
        /// Where the plugin records its devices and mounts (kept across
        /// restarts of the plugin).
        #[arg(long, default_value = svs_csi_driver::DEFAULT_NODE_STATE_DIR)]
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

/// Logging of the host processes: `SVS_LOG` (default info), as text.
fn init_host_tracing() {
    init_tracing(
        &std::env::var("SVS_LOG").unwrap_or_else(|_| "info".into()),
        LogFormat::Text,
    );
}

pub(super) async fn agent(config: svs_agent::AgentConfig) -> Result<(), String> {
    init_host_tracing();
    svs_agent::run(config).await.map_err(|e| e.to_string())
}

pub(super) async fn storage_node(config: &std::path::Path) -> Result<(), String> {
    init_host_tracing();
    svs_storage_node::run(config)
        .await
        .map_err(|e| e.to_string())
}

pub(super) async fn agent_device(dir: PathBuf) -> Result<(), String> {
    init_host_tracing();
    svs_agent::device::run_device(dir).await
}

pub(super) async fn csi(command: CsiCommand) -> Result<(), String> {
    init_host_tracing();
    match command {
        CsiCommand::Node {
            endpoint,
            node,
            zone,
            state_dir,
            ..
        } => {
            svs_csi_driver::run_node(svs_csi_driver::NodeConfig {
                endpoint,
                node,
                zone,
                state_dir,
            })
            .await
        }
        CsiCommand::Controller {
            endpoint,
            url,
            email,
            password_file,
            job_timeout_secs,
            ..
        } => {
            let password = csi_password(password_file.as_deref())?;
            svs_csi_driver::run_controller(svs_csi_driver::ControllerConfig {
                endpoint,
                url,
                email,
                password,
                job_timeout: std::time::Duration::from_secs(job_timeout_secs),
            })
            .await
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
