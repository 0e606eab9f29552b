//! The CSI driver (`svs csi controller`, `svs csi node`): svs volumes for
//! container orchestrators. The controller plugin speaks to svs over its
//! REST API (`crate::client`), like any client; the node plugin makes the
//! volumes real on its host with the host agent's code (`crate::agent`).
//! The gRPC plumbing and the CSI bindings are in the `svs-csi` crate.
//!
//! Seed rule 7: through CSI, data movement is not supported; volume
//! expansion uses the orchestrator's own mechanism (ControllerExpandVolume,
//! always in place, then NodeExpandVolume).

pub mod identity;
pub mod node;

use crate::agent::device::BlockDeviceMode;
use crate::agent::host::{Host, HostConfig};
use identity::{AlwaysReady, IdentityService};
use std::path::PathBuf;
use svs_csi::tonic::Status;

/// Where the node plugin records its devices and mounts by default.
pub const DEFAULT_NODE_STATE_DIR: &str = "/var/lib/svs-csi";

/// `svs csi node`.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// `unix:///csi/csi.sock`.
    pub endpoint: String,
    /// This host's svs node name (the CSI node id).
    pub node: String,
    pub zone: Option<String>,
    pub state_dir: PathBuf,
}

/// Runs the node plugin (Identity + Node) until SIGTERM or SIGINT.
/// Stopping it leaves every device and mount in place: a restarted plugin
/// takes them over from its state directory.
pub async fn run_node(config: NodeConfig) -> Result<(), String> {
    // A bad endpoint is refused before anything is made on the host.
    svs_csi::unix_path(&config.endpoint).map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the svs binary: {e}"))?;
    let host_config = HostConfig {
        // The node plugin never mounts by a default path: the orchestrator
        // names every staging and target path.
        mount_root: config.state_dir.join("mounts"),
        state_dir: config.state_dir.clone(),
        exe,
        mode: BlockDeviceMode::Fuse,
    };
    let host = tokio::task::spawn_blocking(move || Host::open(host_config))
        .await
        .map_err(|e| e.to_string())??;
    tracing::info!(
        node = config.node,
        endpoint = config.endpoint,
        "CSI node plugin started"
    );
    svs_csi::serve(
        &config.endpoint,
        svs_csi::Services {
            identity: IdentityService::new(AlwaysReady, false),
            controller: None::<svs_csi::Absent>,
            node: Some(node::NodeService::new(config.node, config.zone, host)),
        },
        stop_signal(),
    )
    .await
    .map_err(|e| e.to_string())?;
    tracing::info!("CSI node plugin stopped; devices and mounts stay in place");
    Ok(())
}

/// Resolves when the process is asked to stop (SIGTERM, SIGINT).
pub async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        // Without signal handlers, run until killed.
        _ => std::future::pending::<()>().await,
    }
}

/// A required request field that is missing or empty.
pub fn required(field: &str) -> Status {
    Status::invalid_argument(format!("{field} is required"))
}
