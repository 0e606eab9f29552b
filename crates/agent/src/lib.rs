//! `svs agent`: the host side of svs. It follows its node's attachments
//! from the service (a long poll, with back-off when the service is away)
//! and makes them real on this host: a block device per attachment, and
//! for `file` volumes the filesystem mounted and grown (see `host`). It
//! reports each attachment's host state back to the service.
//!
//! It signs in with the node's own credential, which allows nothing but
//! reading the node's attachments and reporting on them.

pub mod caps;
pub mod device;
pub mod host;
pub mod service;

use host::{Host, HostConfig};
use service::{HostReport, ServiceClient};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use svs_common::backoff::Backoff;
use thiserror::Error;

/// The documented defaults of a package install.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/svs-agent";
pub const DEFAULT_MOUNT_ROOT: &str = "/mnt/svs";

/// How long one long poll waits for a change.
const LONG_POLL: Duration = Duration::from_secs(30);
/// How soon to come back when something is left to do on the host.
const RETRY: Duration = Duration::from_secs(5);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

#[derive(Debug, Error)]
pub enum AgentError {
    #[error("{0}")]
    Config(String),
    #[error("the service is unreachable: {0}")]
    Unreachable(String),
    #[error("the service refused ({status}): {message}")]
    Refused { status: u16, message: String },
    #[error("{0}")]
    Host(String),
}

#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub url: String,
    pub node: String,
    pub credential_file: PathBuf,
    pub state_dir: PathBuf,
    pub mount_root: PathBuf,
    pub block_device: device::BlockDeviceMode,
}

fn read_credential(path: &Path) -> Result<String, AgentError> {
    svs_common::secret_files::read_credential_file(path).map_err(AgentError::Config)
}

/// The agent's back-off after a failed call: 0.5 s doubling to
/// [`MAX_BACKOFF`], up to 250 ms of jitter.
fn agent_backoff() -> Backoff {
    Backoff::new(
        Duration::from_millis(500),
        MAX_BACKOFF,
        Duration::from_millis(250),
    )
}

/// Runs the agent until SIGTERM or SIGINT. Stopping it leaves every device
/// and mount in place: a restarted agent takes them over.
pub async fn run(config: AgentConfig) -> Result<(), AgentError> {
    let credential = read_credential(&config.credential_file)?;
    if config.block_device == device::BlockDeviceMode::KernelNbd
        && !svs_hostdev::KernelNbd::available()
    {
        return Err(AgentError::Config(
            "--block-device kernel-nbd needs the kernel's nbd module (modprobe nbd)".into(),
        ));
    }
    let client = ServiceClient::new(&config.url, &config.node, &credential)?;
    let exe = std::env::current_exe()
        .map_err(|e| AgentError::Config(format!("cannot find the svs binary: {e}")))?;
    let host_config = HostConfig {
        state_dir: config.state_dir.clone(),
        mount_root: config.mount_root.clone(),
        exe,
        mode: config.block_device,
    };
    let host = tokio::task::spawn_blocking(move || Host::open(host_config))
        .await
        .map_err(|e| AgentError::Host(e.to_string()))?
        .map_err(AgentError::Host)?;
    let host = Arc::new(Mutex::new(host));
    tracing::info!(node = config.node, url = config.url, "agent started");
    caps::warn_if_ext4_growth_blocked();

    let stop =
        svs_common::stop_signal::stop_signal().map_err(|e| AgentError::Config(e.to_string()))?;
    tokio::pin!(stop);
    let mut revision: Option<String> = None;
    let mut reported: HashMap<(String, String), HostReport> = HashMap::new();
    let mut backoff = agent_backoff();
    let mut wait = Duration::ZERO;
    loop {
        let desired = tokio::select! {
            r = client.desired(revision.as_deref(), wait) => r,
            _ = &mut stop => break,
        };
        let state = match desired {
            Ok(s) => s,
            Err(e) => {
                let pause = backoff.step();
                tracing::warn!(error = %e, retry_in = ?pause, "no desired state");
                tokio::select! {
                    _ = tokio::time::sleep(pause) => continue,
                    _ = &mut stop => break,
                }
            }
        };
        backoff.reset();
        let h = host.clone();
        let attachments = state.attachments.clone();
        let (outcomes, pending) = tokio::task::spawn_blocking(move || {
            let mut h = h.lock().unwrap_or_else(|p| p.into_inner());
            let outcomes = h.reconcile(&attachments);
            (outcomes, h.pending())
        })
        .await
        .map_err(|e| AgentError::Host(e.to_string()))?;
        let mut all_sent = true;
        for o in outcomes {
            let key = (o.volume_id.clone(), o.snapshot_id.clone());
            if reported.get(&key) == Some(&o.report) {
                continue;
            }
            match client.report(&o.volume_id, &o.snapshot_id, &o.report).await {
                Ok(_) => {
                    reported.insert(key, o.report);
                }
                Err(e) => {
                    all_sent = false;
                    tracing::warn!(volume = o.volume_id, error = %e, "host state not reported");
                }
            }
        }
        reported.retain(|(v, s), _| {
            state
                .attachments
                .iter()
                .any(|a| &a.volumeid == v && &a.snapshotid == s)
        });
        revision = Some(state.revision);
        wait = LONG_POLL;
        if pending || !all_sent {
            // Come back after RETRY even if nothing changes.
            revision = None;
            tokio::select! {
                _ = tokio::time::sleep(RETRY) => {}
                _ = &mut stop => break,
            }
        }
    }
    tracing::info!("agent stopped; devices and mounts stay in place");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_backs_off_from_half_a_second_to_its_cap() {
        let mut b = agent_backoff();
        let first = b.step();
        assert!(first >= Duration::from_millis(500) && first < Duration::from_millis(750));
        for _ in 0..10 {
            b.step();
        }
        assert!(b.step() >= MAX_BACKOFF);
    }
}
