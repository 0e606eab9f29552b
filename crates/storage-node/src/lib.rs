//! `svs storage-node`: one storage host's media, served to the rest of
//! svs. It registers the node's media with the control plane (`PUT
//! /nodes/{node}/storage`, with the node's storage credential) and then
//! heartbeats with the same call every `heartbeatseconds`. Before each
//! heartbeat it checks every medium's directory (there, a directory,
//! writable): a medium that fails the check is left out of the list, and
//! the control plane fails it. A node that stops heartbeating goes Offline
//! in the control plane after `storage_node_timeout`.
//!
//! Its slice server (the slice protocol, `svs_sliceproto`, over the
//! node's media) starts in [`start_slice_services`] once the first
//! registration answered the slice credential it must accept; then too
//! the volumes' fronts the control plane has it run
//! ([`fronts::FrontServices`]: an NBD server on `front_listen`, and a long
//! poll that says which fronts).

pub mod client;
pub mod config;
pub mod fronts;
pub mod tls;

use client::{Addresses, ControlPlaneClient, StorageMedium, StorageNodeRegistered};
use config::{StorageNodeConfig, StorageNodeMedium};
use fronts::FrontServices;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use svs_common::backoff::Backoff;
use svs_common::slice_tls::SliceTlsMode;
use svs_dataplane::{start_slice_server, SharedSecret};
use thiserror::Error;
use tls::NodeTls;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// The documented defaults of a package install.
pub const DEFAULT_CONFIG: &str = "/etc/svs/storage-node.toml";

const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Longest wait for the control plane's answer to one heartbeat.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// A medium smaller than this cannot be offered (the API counts whole GiB).
const MIN_MEDIUM_BYTES: u64 = 1 << 30;
/// The file a medium check writes and removes.
const PROBE_FILE: &str = ".svs-storage-node-probe";

#[derive(Debug, Error)]
pub enum StorageNodeError {
    #[error("{0}")]
    Config(String),
    #[error("the control plane is unreachable: {0}")]
    Unreachable(String),
    #[error("the control plane refused ({status}): {message}")]
    Refused { status: u16, message: String },
    #[error("{0}")]
    Io(String),
}

impl StorageNodeError {
    /// What changes the log: each kind of failure is logged when it starts,
    /// not at every retry.
    fn state(&self) -> String {
        match self {
            StorageNodeError::Refused { status, message } => format!("refused {status} {message}"),
            StorageNodeError::Unreachable(_) => "unreachable".into(),
            other => other.to_string(),
        }
    }
}

/// The services a storage node runs once registered: its slice server.
/// Stopped at shutdown.
pub struct SliceServices {
    server: svs_sliceproto::SliceServer,
    /// It serves TLS (else plain TCP).
    tls: bool,
    /// Follows the slice credential the heartbeats answer.
    follower: tokio::task::JoinHandle<()>,
}

impl SliceServices {
    pub fn stop(self) {
        self.follower.abort();
        self.server.shutdown();
    }
}

/// Starts the node's slice services: the slice server on
/// `config.slice_listen` over the media of `config.media`, with the epochs
/// it accepted kept in `config.state_dir`. `slice_credential` holds the
/// secret fronts must present; it changes when a heartbeat answers a new
/// one (the node's credential was reissued), and the server then accepts
/// only the new one.
pub fn start_slice_services(
    config: &StorageNodeConfig,
    mut slice_credential: watch::Receiver<String>,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> Result<SliceServices, StorageNodeError> {
    let tls_on = tls.is_some();
    let secret = Arc::new(SharedSecret::new(&slice_credential.borrow_and_update()));
    let media = config
        .media
        .iter()
        .map(|m| (m.name.clone(), m.directory.clone()))
        .collect();
    let authenticator: Arc<dyn svs_sliceproto::Authenticator> = secret.clone();
    let server = start_slice_server(
        media,
        &config.state_dir,
        config.slice_listen,
        authenticator,
        tls,
    )
    .map_err(|e| StorageNodeError::Config(format!("the slice server did not start: {e}")))?;
    tracing::info!(listen = %server.local_addr(), tls = tls_on, "slice server started");
    let follower = tokio::spawn(async move {
        while slice_credential.changed().await.is_ok() {
            secret.set(&slice_credential.borrow_and_update());
            tracing::info!("slice credential replaced");
        }
    });
    Ok(SliceServices {
        server,
        tls: tls_on,
        follower,
    })
}

/// The slice server, once started, and the credential it follows.
#[derive(Default)]
struct Slice {
    services: Option<SliceServices>,
    credential: Option<watch::Sender<String>>,
}

/// The node's fronts, started with the slice server (they reach the
/// node's own media through it, and serve NBD with its TLS).
struct Fronts {
    client: Arc<ControlPlaneClient>,
    listen: SocketAddr,
    /// Bound at start-up (Err: why not), until the services take it.
    listener: Option<Result<TcpListener, String>>,
    /// Of the NBD server's connections (None: the kernel's default).
    tcp_congestion: Option<svs_nbd::TcpCongestion>,
    services: Option<FrontServices>,
}

impl Fronts {
    /// Starts the services, or has them follow the slice server's TLS;
    /// either way they reach the node's own media through `own`, the
    /// (new) slice server's in-process client.
    async fn follow(
        &mut self,
        tls: Option<Arc<rustls::ServerConfig>>,
        node: &str,
        own: svs_sliceproto::SliceClient,
    ) {
        match &mut self.services {
            Some(services) => {
                services.reach_in_process(node, own);
                services.set_tls(tls).await;
            }
            None => {
                let listener = match self.listener.take() {
                    Some(l) => l,
                    None => TcpListener::bind(self.listen)
                        .await
                        .map_err(|e| format!("cannot listen for NBD on {}: {e}", self.listen)),
                };
                self.services = Some(FrontServices::start(
                    Arc::clone(&self.client),
                    self.listen,
                    listener,
                    tls,
                    self.tcp_congestion,
                    (node, own),
                ));
            }
        }
    }
}

/// Acts on a registration answer: takes the slice certificate it issued,
/// and starts the slice server (or restarts it, when the service's slice
/// TLS was turned on or off) once it can serve as fronts will connect.
/// `Ok(true)`: register again at once (the control plane has a new CA and
/// the node must send its key for a certificate of it).
async fn follow_answer(
    config: &StorageNodeConfig,
    node_tls: &mut NodeTls,
    answer: &StorageNodeRegistered,
    sent_key: bool,
    slice: &mut Slice,
    fronts: &mut Fronts,
) -> Result<bool, StorageNodeError> {
    // An answer without it is from a control plane before slice TLS.
    let mode = SliceTlsMode::parse(&answer.slicetls).unwrap_or(SliceTlsMode::Off);
    node_tls.accept(answer, config.advertised())?;
    if let Err(why) = node_tls.ready_for(mode) {
        if mode == SliceTlsMode::Issued && !sent_key {
            return Ok(true);
        }
        return Err(StorageNodeError::Config(why));
    }
    let tls_on = mode != SliceTlsMode::Off;
    if slice.services.as_ref().is_some_and(|s| s.tls != tls_on) {
        tracing::warn!(
            tls = tls_on,
            "the service's slice TLS changed: restarting the slice server"
        );
        slice.credential = None;
        if let Some(old) = slice.services.take() {
            // Joins its threads: off the runtime's.
            tokio::task::spawn_blocking(move || old.stop())
                .await
                .map_err(|e| StorageNodeError::Io(e.to_string()))?;
        }
    }
    match &slice.credential {
        Some(sender) => {
            sender.send_if_modified(|held| {
                let changed = *held != answer.slicecredential;
                if changed {
                    tracing::warn!("the slice credential changed; fronts must present the new one");
                    held.clone_from(&answer.slicecredential);
                }
                changed
            });
        }
        None => {
            let (sender, receiver) = watch::channel(answer.slicecredential.clone());
            let tls = node_tls.server_config(mode)?;
            let services = start_slice_services(config, receiver, tls.clone())?;
            let own = services
                .server
                .in_process_client(svs_dataplane::DEFAULT_REQUEST_TIMEOUT);
            slice.services = Some(services);
            slice.credential = Some(sender);
            fronts.follow(tls, &config.node, own).await;
            if let (Some(services), Some(front)) = (&slice.services, &fronts.services) {
                // The control plane steers jobs on the fronts through the
                // slice server (`FrontCall`).
                services.server.serve_front_calls(front.calls());
            }
        }
    }
    Ok(false)
}

fn read_credential(path: &Path) -> Result<String, StorageNodeError> {
    svs_common::secret_files::read_credential_file(path).map_err(StorageNodeError::Config)
}

/// The medium as it can be offered now, or why not: its directory exists,
/// is a directory, and takes a write and an fsync.
fn check_medium(m: &StorageNodeMedium) -> Result<StorageMedium, String> {
    let meta = std::fs::metadata(&m.directory)
        .map_err(|e| format!("directory {}: {e}", m.directory.display()))?;
    if !meta.is_dir() {
        return Err(format!("{} is not a directory", m.directory.display()));
    }
    let probe = m.directory.join(PROBE_FILE);
    let written = std::fs::File::create(&probe)
        .and_then(|mut f| f.write_all(b"svs").and_then(|()| f.sync_all()));
    let removed = std::fs::remove_file(&probe);
    written
        .and(removed)
        .map_err(|e| format!("directory {} is not writable: {e}", m.directory.display()))?;
    let size = match m.size {
        Some(size) => size.as_u64(),
        None => {
            svs_hostdev::host::filesystem_stats(&m.directory)
                .map_err(|e| e.to_string())?
                .total_bytes
        }
    };
    if size < MIN_MEDIUM_BYTES {
        return Err(format!("size {size} bytes is under 1 GiB"));
    }
    Ok(StorageMedium {
        name: m.name.clone(),
        size,
        directory: m.directory.display().to_string(),
    })
}

/// The media that pass their check; a change in which fail is logged.
fn healthy_media(
    media: &[StorageNodeMedium],
    failing: &mut Vec<(String, String)>,
) -> Vec<StorageMedium> {
    let mut offered = Vec::new();
    let mut now_failing = Vec::new();
    for m in media {
        match check_medium(m) {
            Ok(o) => offered.push(o),
            Err(why) => now_failing.push((m.name.clone(), why)),
        }
    }
    for (name, why) in &now_failing {
        if !failing.iter().any(|(n, w)| n == name && w == why) {
            tracing::error!(
                medium = name,
                error = why,
                "medium left out: it failed its check"
            );
        }
    }
    for (name, _) in failing.iter() {
        if !now_failing.iter().any(|(n, _)| n == name) {
            tracing::warn!(medium = name, "medium passes its check again");
        }
    }
    *failing = now_failing;
    offered
}

/// A storage node's back-off after a failed call to the API: 0.25 s doubling
/// to [`MAX_BACKOFF`] (or the heartbeat period, once known), up to 100 ms
/// of jitter.
pub(crate) fn node_backoff() -> Backoff {
    Backoff::new(
        Duration::from_millis(250),
        MAX_BACKOFF,
        Duration::from_millis(100),
    )
}

/// Runs the storage node until SIGTERM or SIGINT.
pub async fn run(config_file: &Path) -> Result<(), StorageNodeError> {
    let config = StorageNodeConfig::load(config_file)?;
    let credential = read_credential(&config.credential_file)?;
    std::fs::create_dir_all(&config.state_dir).map_err(|e| {
        StorageNodeError::Io(format!(
            "cannot create state_dir {}: {e}",
            config.state_dir.display()
        ))
    })?;
    let client = Arc::new(ControlPlaneClient::new(
        &config.api,
        &config.node,
        &credential,
    )?);
    // Bound now, so a port taken is said at start-up; serving starts with
    // the slice server.
    let mut fronts = Fronts {
        client: Arc::clone(&client),
        listen: config.front_listen(),
        listener: Some(
            TcpListener::bind(config.front_listen())
                .await
                .map_err(|e| format!("cannot listen for NBD on {}: {e}", config.front_listen())),
        ),
        // Checked when the configuration was loaded.
        tcp_congestion: svs_front::tcp::nbd_tcp_congestion(&config.nbd_tcp_congestion)
            .unwrap_or_default(),
        services: None,
    };
    let addresses = Addresses {
        slice: config.advertised(),
        front: config.front_advertised(),
    };
    let stop = svs_common::stop_signal::stop_signal()
        .map_err(|e| StorageNodeError::Config(e.to_string()))?;
    tokio::pin!(stop);
    tracing::info!(
        node = config.node,
        api = config.api,
        slice_address = %config.advertised(),
        front_address = %config.front_advertised(),
        media = config.media.len(),
        "storage node started"
    );
    let mut node_tls = NodeTls::load(&config)?;
    let mut slice = Slice::default();
    let mut failing_media = Vec::new();
    let mut last_failure: Option<String> = None;
    let mut backoff = node_backoff();
    // Once the control plane told the heartbeat period, a failing node
    // still tries at least that often: the control plane judges it by its
    // heartbeats as soon as it can record them again (after its database
    // came back, say), and a longer pause would make it Offline.
    let mut heartbeat: Option<Duration> = None;
    loop {
        let media_config = config.media.clone();
        let failing = std::mem::take(&mut failing_media);
        let (media, failing) = tokio::task::spawn_blocking(move || {
            let mut failing = failing;
            let media = healthy_media(&media_config, &mut failing);
            (media, failing)
        })
        .await
        .map_err(|e| StorageNodeError::Io(e.to_string()))?;
        failing_media = failing;
        let public_key =
            node_tls.wanted_public_key(config.advertised(), time::OffsetDateTime::now_utc());
        let answer = tokio::select! {
            a = client.register(addresses, &media, public_key.as_deref(), REQUEST_TIMEOUT) => a,
            _ = &mut stop => break,
        };
        let followed = match answer {
            Ok(registered) => {
                if last_failure.is_some() || slice.services.is_none() {
                    tracing::info!(
                        node = config.node,
                        media = media.len(),
                        heartbeat_secs = registered.heartbeatseconds,
                        slice_tls = registered.slicetls,
                        "registered with the control plane"
                    );
                }
                backoff = node_backoff();
                heartbeat = Some(Duration::from_secs(registered.heartbeatseconds.max(1)));
                let sent_key = public_key.is_some();
                follow_answer(
                    &config,
                    &mut node_tls,
                    &registered,
                    sent_key,
                    &mut slice,
                    &mut fronts,
                )
                .await
                .map(|again| {
                    if again {
                        Duration::ZERO
                    } else {
                        Duration::from_secs(registered.heartbeatseconds.max(1))
                    }
                })
            }
            Err(e) => Err(e),
        };
        let pause = match followed {
            Ok(pause) => {
                last_failure = None;
                pause
            }
            Err(e) => {
                let pause = backoff.step_up_to(heartbeat.unwrap_or(MAX_BACKOFF));
                let state = e.state();
                if last_failure.as_deref() != Some(state.as_str()) {
                    tracing::warn!(error = %e, "cannot register with the control plane; retrying");
                    last_failure = Some(state);
                }
                pause
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = &mut stop => break,
        }
    }
    // Before the slice server: they write through it.
    if let Some(f) = fronts.services.take() {
        f.stop().await;
    }
    if let Some(s) = slice.services.take() {
        s.stop();
    }
    tracing::info!("storage node stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_node_backs_off_no_longer_than_its_heartbeat_once_known() {
        let mut backoff = node_backoff();
        let pauses: Vec<Duration> = (0..10).map(|_| backoff.step()).collect();
        assert!(pauses[0] < Duration::from_millis(400));
        assert!(pauses[9] >= MAX_BACKOFF, "{pauses:?}");
        let mut backoff = node_backoff();
        let heartbeat = Duration::from_secs(2);
        for _ in 0..10 {
            assert!(backoff.step_up_to(heartbeat) < heartbeat + Duration::from_millis(100));
        }
    }

    fn medium(dir: &Path, size: Option<u64>) -> StorageNodeMedium {
        StorageNodeMedium {
            name: "d1".into(),
            directory: dir.to_path_buf(),
            size: size.map(bytesize::ByteSize::b),
        }
    }

    #[test]
    fn a_medium_is_offered_while_its_directory_takes_writes() {
        let dir = tempfile::tempdir().unwrap();
        let offered = check_medium(&medium(dir.path(), Some(2 << 30))).unwrap();
        assert_eq!(offered.size, 2 << 30);
        assert!(!dir.path().join(PROBE_FILE).exists());
        // Measured when not configured.
        assert!(check_medium(&medium(dir.path(), None)).is_ok());
        let err = check_medium(&medium(dir.path(), Some(1000))).unwrap_err();
        assert_eq!(err, "size 1000 bytes is under 1 GiB");
        let gone = dir.path().join("gone");
        let err = check_medium(&medium(&gone, Some(2 << 30))).unwrap_err();
        assert!(
            err.starts_with(&format!("directory {}", gone.display())),
            "{err}"
        );
    }

    #[test]
    fn failing_media_are_left_out_and_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let media = [
            medium(dir.path(), Some(2 << 30)),
            StorageNodeMedium {
                name: "d2".into(),
                directory: dir.path().join("missing"),
                size: None,
            },
        ];
        let mut failing = Vec::new();
        let offered = healthy_media(&media, &mut failing);
        assert_eq!(offered.len(), 1);
        assert_eq!(failing.len(), 1);
        assert_eq!(failing[0].0, "d2");
    }
}
