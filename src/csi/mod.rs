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

use svs_csi::tonic::Status;

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
