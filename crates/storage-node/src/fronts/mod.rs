//! The volumes' fronts a storage node runs for the control plane: the
//! front end `svs serve` runs for a volume (`LocalVolumeIo` over
//! `ClusterMedia`, behind an [`ExportRegistry`] and the same NBD server),
//! here, so the volume's bytes go from the attaching node to the storage
//! nodes without passing through `svs serve`.
//!
//! The data plane has no local media: every slice is reached over the
//! slice protocol, the node's own through its own slice server, so every
//! write is fenced by the front's epoch like any front's. The control
//! plane says which fronts the node runs, in the answers to a long poll
//! (`POST /nodes/{node}/storage/fronts`) that carries which are open here;
//! each answer is carried out as [`plan::plan`] says. Copy failures
//! the fronts meet are reported (`POST /nodes/{node}/storage/failures`)
//! until the control plane took them.

mod calls;
mod failures;
pub mod plan;

pub use calls::FrontCalls;

use super::client::ControlPlaneClient;
use super::node_backoff;
use failures::{report_failures, Failed};
use plan::{plan, Held, Step};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use svs_dataplane::{
    ClusterMedia, CopyFailure, DataPlane, LocalMedia, LossRecord, NodeEndpoint, VolumeIo,
    VolumeLayout, DEFAULT_REQUEST_TIMEOUT,
};
use svs_front::exports::{ExportRegistry, SnapshotView, VolumeOpening};
use svs_front::wire::{FrontExport, FrontNode, FrontOpen, FrontSpec, FrontsAnswer, FrontsPoll};
use svs_nbd::{NbdConfig, TcpCongestion};
use svs_sliceproto::SliceClient;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Longest wait for one answer of the fronts' long poll: the control plane
/// answers within its own wait (20 s), this leaves it room.
const POLL_TIMEOUT: Duration = Duration::from_secs(45);
/// Longest wait for the control plane to take a report of failures.
const FAILURES_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a front being reopened waits for its previous opening to be
/// let go (the connections of its exports closing).
const CLOSE_WAIT: Duration = Duration::from_secs(10);

/// The node's fronts: the NBD server, the long poll that says which
/// fronts to run, and the report of their failures. Stopped at shutdown.
pub struct FrontServices {
    registry: Arc<ExportRegistry>,
    /// The fronts' media (every copy a node's; this node's own reached in
    /// process).
    media: ClusterMedia,
    listen: SocketAddr,
    nbd: Option<NbdRunning>,
    /// Why the NBD server is not serving, if it is not (every front wanted
    /// then fails with it).
    nbd_down: Arc<Mutex<Option<String>>>,
    tls_on: bool,
    /// Of the NBD server's connections, kept for its restarts (None: the
    /// kernel's default).
    tcp_congestion: Option<TcpCongestion>,
    /// The control plane's calls to the fronts (the slice server's
    /// `FrontCall`s go here).
    calls: Arc<FrontCalls>,
    stop: CancellationToken,
    poller: JoinHandle<()>,
    reporter: JoinHandle<()>,
}

struct NbdRunning {
    stop: CancellationToken,
    thread: std::thread::JoinHandle<()>,
}

impl FrontServices {
    /// Starts the NBD server of fronts on `listener` (bound at start-up:
    /// `Err` says why it could not be) with `tls` (the slice server's), and
    /// the long poll with `client`. The fronts reach this node's own media
    /// (it is the node `own.0`) through `own.1`, its slice server's
    /// in-process client.
    pub fn start(
        client: Arc<ControlPlaneClient>,
        listen: SocketAddr,
        listener: Result<TcpListener, String>,
        tls: Option<Arc<rustls::ServerConfig>>,
        tcp_congestion: Option<TcpCongestion>,
        own: (&str, SliceClient),
    ) -> FrontServices {
        let (registry, media, failed) = front_registry();
        media.reach_in_process(own.0, own.1);
        let stop = CancellationToken::new();
        let nbd_down = Arc::new(Mutex::new(None));
        let tls_on = tls.is_some();
        let nbd = start_nbd(&registry, listener, tls, tcp_congestion, &nbd_down);
        let calls = Arc::new(FrontCalls::new(Arc::clone(registry.data_plane())));
        let poller = tokio::spawn(poll_fronts(
            Arc::clone(&client),
            Arc::clone(&registry),
            Arc::clone(&calls),
            Arc::clone(&nbd_down),
            stop.clone(),
        ));
        let reporter = tokio::spawn(report_failures(client, failed, stop.clone()));
        FrontServices {
            registry,
            media,
            listen,
            nbd,
            nbd_down,
            tls_on,
            tcp_congestion,
            calls,
            stop,
            poller,
            reporter,
        }
    }

    /// Follows the slice server's TLS being turned on or off: the NBD
    /// server restarts with it (a certificate renewed needs nothing: the
    /// configuration resolves the node's current certificate).
    pub async fn set_tls(&mut self, tls: Option<Arc<rustls::ServerConfig>>) {
        if tls.is_some() == self.tls_on {
            return;
        }
        tracing::warn!(
            tls = tls.is_some(),
            "the slice TLS changed: restarting the NBD server of fronts"
        );
        self.tls_on = tls.is_some();
        if let Some(running) = self.nbd.take() {
            running.stop().await;
        }
        let listener = TcpListener::bind(self.listen)
            .await
            .map_err(|e| format!("cannot listen for NBD on {}: {e}", self.listen));
        self.nbd = start_nbd(
            &self.registry,
            listener,
            tls,
            self.tcp_congestion,
            &self.nbd_down,
        );
    }

    /// Where the slice server sends the control plane's calls to fronts.
    pub fn calls(&self) -> Arc<FrontCalls> {
        Arc::clone(&self.calls)
    }

    /// The slice server restarted: the fronts reach this node's media
    /// through its new in-process client.
    pub fn reach_in_process(&self, node: &str, client: SliceClient) {
        self.media.reach_in_process(node, client);
    }

    /// Closes every front and stops the NBD server.
    pub async fn stop(self) {
        self.stop.cancel();
        // The poller closes the fronts on its way out.
        if let Err(e) = self.poller.await {
            tracing::warn!(error = %e, "the fronts' poll ended badly");
        }
        // It refuses the records still pending as it goes (the writes
        // waiting for them fail).
        if let Err(e) = self.reporter.await {
            tracing::warn!(error = %e, "the failures' report ended badly");
        }
        if let Some(running) = self.nbd {
            running.stop().await;
        }
    }
}

impl NbdRunning {
    async fn stop(self) {
        self.stop.cancel();
        // Joins a thread: off the runtime's.
        let thread = self.thread;
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    }
}

/// The exports of fronts, over a data plane without media of this host
/// (the node's own are reached through its slice server, fenced like any
/// front's); that data plane; and the copy failures it meets.
fn front_registry() -> (
    Arc<ExportRegistry>,
    ClusterMedia,
    mpsc::UnboundedReceiver<Failed>,
) {
    let media = ClusterMedia::new(LocalMedia::new(std::iter::empty()), DEFAULT_REQUEST_TIMEOUT);
    let (failures, failed) = mpsc::unbounded_channel();
    media.on_copy_failure(Arc::new(move |f: &CopyFailure, record: &LossRecord| {
        // The reporter gone means the node is stopping: the writes
        // waiting for the record fail.
        if failures.send((f.clone(), record.clone())).is_err() {
            record.refused();
        }
    }));
    (
        Arc::new(ExportRegistry::new(Arc::new(media.clone()))),
        media,
        failed,
    )
}

/// The NBD server of fronts over `registry`, or None (and why in
/// `nbd_down`).
fn start_nbd(
    registry: &Arc<ExportRegistry>,
    listener: Result<TcpListener, String>,
    tls: Option<Arc<rustls::ServerConfig>>,
    tcp_congestion: Option<TcpCongestion>,
    nbd_down: &Mutex<Option<String>>,
) -> Option<NbdRunning> {
    let tls_on = tls.is_some();
    let config = NbdConfig {
        // The NBD server has a runtime of its own (`spawn_nbd_server`).
        inline_max: 64 * 1024,
        // Optional, as `svs serve`'s default `nbd_tls`: the attachment's
        // URL (`nbds://`) makes the agent use it.
        tls: tls.map(|config| svs_nbd::ServerTls {
            config,
            required: false,
        }),
        tcp_congestion,
        ..NbdConfig::default()
    };
    let stop = CancellationToken::new();
    let started = listener.and_then(|listener| {
        let address = listener.local_addr().map_err(|e| e.to_string())?;
        svs_front::exports::spawn_nbd_server(Arc::clone(registry), listener, config, stop.clone())
            .map(|thread| (thread, address))
    });
    let mut down = nbd_down.lock().unwrap_or_else(PoisonError::into_inner);
    match started {
        Ok((thread, address)) => {
            tracing::info!(listen = %address, tls = tls_on, "NBD server of fronts started");
            *down = None;
            Some(NbdRunning { stop, thread })
        }
        Err(why) => {
            tracing::error!(
                error = why,
                "the NBD server of fronts did not start: no volume's front can run on this node \
                 (set front_listen to a free address)"
            );
            *down = Some(why);
            None
        }
    }
}

/// The fronts open here, and their I/O (held: a front stays open while
/// wanted, whatever its exports).
struct Fronts {
    held: BTreeMap<String, Held>,
    ios: HashMap<String, Arc<dyn VolumeIo>>,
    /// Told of every front opened and closed.
    calls: Arc<FrontCalls>,
}

impl Fronts {
    fn new(calls: Arc<FrontCalls>) -> Fronts {
        Fronts {
            held: BTreeMap::new(),
            ios: HashMap::new(),
            calls,
        }
    }

    /// What the next poll says is open here.
    fn report(&self) -> Vec<FrontOpen> {
        self.held
            .values()
            .map(|h| FrontOpen {
                volume: h.spec.volume.clone(),
                epoch: h.spec.epoch,
                error: h.error.clone().unwrap_or_default(),
            })
            .collect()
    }
}

/// The long poll: says what is open, carries out each answer, and polls
/// again at once (so the control plane learns of a change quickly); after
/// a failed call, again after a back-off. At stop, closes every front.
async fn poll_fronts(
    client: Arc<ControlPlaneClient>,
    registry: Arc<ExportRegistry>,
    calls: Arc<FrontCalls>,
    nbd_down: Arc<Mutex<Option<String>>>,
    stop: CancellationToken,
) {
    let mut fronts = Fronts::new(calls);
    let mut version = String::new();
    let mut backoff = node_backoff();
    let mut last_failure: Option<String> = None;
    loop {
        let poll = FrontsPoll {
            version: version.clone(),
            open: fronts.report(),
        };
        let answer = tokio::select! {
            a = client.fronts(&poll, POLL_TIMEOUT) => a,
            _ = stop.cancelled() => break,
        };
        match answer {
            Ok(answer) => {
                if last_failure.take().is_some() {
                    tracing::info!("the fronts' poll answers again");
                }
                backoff = node_backoff();
                let down = nbd_down
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                follow(&registry, &mut fronts, &answer, down.as_deref()).await;
                version = answer.version;
            }
            Err(e) => {
                let state = e.state();
                if last_failure.as_deref() != Some(state.as_str()) {
                    tracing::warn!(error = %e, "cannot ask the control plane for the fronts; retrying");
                    last_failure = Some(state);
                }
                tokio::select! {
                    _ = tokio::time::sleep(backoff.step()) => {}
                    _ = stop.cancelled() => break,
                }
            }
        }
    }
    let volumes: Vec<String> = fronts.held.keys().cloned().collect();
    for volume in volumes {
        close(&registry, &mut fronts, &volume).await;
    }
}

/// Carries out one answer; every volume's failure is kept for the next
/// poll.
async fn follow(
    registry: &Arc<ExportRegistry>,
    fronts: &mut Fronts,
    answer: &FrontsAnswer,
    nbd_down: Option<&str>,
) {
    forget_recovered_failures(registry.data_plane().as_ref(), &answer.fronts);
    held_as_moved(fronts, &answer.fronts);
    for step in plan(&fronts.held, &answer.fronts) {
        let volume = step_volume(&step).to_string();
        // A failed step of an open front closes it: the next answer opens
        // it again, whole.
        if let Err(why) = apply(registry, fronts, step, nbd_down).await {
            tracing::error!(volume, error = why, "the volume's front failed");
            let spec = answer.fronts.iter().find(|s| s.volume == volume).cloned();
            close(registry, fronts, &volume).await;
            if let Some(spec) = spec {
                fronts.held.insert(
                    volume,
                    Held {
                        spec,
                        error: Some(why),
                    },
                );
            }
        }
    }
    // What is open now is what was asked.
    for spec in &answer.fronts {
        if let Some(h) = fronts.held.get_mut(&spec.volume) {
            if h.error.is_none() {
                h.spec = spec.clone();
            }
        }
    }
}

/// What the open fronts hold, as their live copies left them (see
/// `FrontCalls::layout`): the layout their I/O has now, or, while a copy
/// of the volume runs or just ended, the one the control plane names (its
/// store commits a switch after the front made it: the two differ for a
/// while, and opening the volume again then would close its exports, or
/// open it over the old place). Lost media a rebuild here brought back
/// are no longer held lost.
fn held_as_moved(fronts: &mut Fronts, wanted: &[FrontSpec]) {
    for spec in wanted {
        let Some(h) = fronts.held.get_mut(&spec.volume) else {
            continue;
        };
        if h.error.is_some() || h.spec.epoch != spec.epoch {
            continue;
        }
        let Some(layout) = fronts.calls.layout(&spec.volume) else {
            continue;
        };
        if layout.media == spec.media {
            fronts.calls.settled(&spec.volume);
        }
        h.spec.media = if layout.moving {
            spec.media.clone()
        } else {
            layout.media
        };
        h.spec
            .lostmedia
            .retain(|m| spec.lostmedia.contains(m) || !layout.revived.contains(m));
    }
}

/// Media this node's fronts saw fail that the control plane now lists as
/// healthy for every front it asks for (recovered, or resynced): their
/// failure is forgotten here, so a new one is reported again (the data
/// plane reports a medium's failure once until it is cleared). A failure
/// not recorded yet stays in the reporter's queue, which sends it anyway.
fn forget_recovered_failures(media: &dyn DataPlane, specs: &[FrontSpec]) {
    let mut failed: std::collections::BTreeSet<String> = media.failed_media().into_iter().collect();
    failed.extend(media.failed_copies().into_iter().map(|(medium, _)| medium));
    for medium in failed {
        let lost = specs.iter().any(|s| s.lostmedia.contains(&medium));
        let used = specs
            .iter()
            .any(|s| s.media.iter().flatten().any(|m| *m == medium));
        if used && !lost {
            tracing::info!(
                medium,
                "the control plane has the medium's copies healthy again"
            );
            media.set_medium_failed(&medium, false);
        }
    }
}

fn step_volume(step: &Step) -> &str {
    match step {
        Step::Close { volume }
        | Step::Resize { volume, .. }
        | Step::FailMedia { volume, .. }
        | Step::Attach { volume, .. }
        | Step::Detach { volume, .. } => volume,
        Step::Open(spec) | Step::Nodes(spec) => &spec.volume,
    }
}

async fn apply(
    registry: &Arc<ExportRegistry>,
    fronts: &mut Fronts,
    step: Step,
    nbd_down: Option<&str>,
) -> Result<(), String> {
    match step {
        Step::Close { volume } => close(registry, fronts, &volume).await,
        Step::Open(spec) => {
            if let Some(why) = nbd_down {
                return Err(format!(
                    "the node's NBD server for fronts is not running: {why}"
                ));
            }
            let io = open(registry, &spec).await?;
            tracing::info!(
                volume = spec.volume,
                epoch = spec.epoch,
                exports = spec.exports.len(),
                "front open"
            );
            fronts.calls.opened(
                &spec.volume,
                (spec.epoch, &spec.media),
                Arc::clone(&io),
                &spec.slicetlsroots,
            );
            fronts.ios.insert(spec.volume.clone(), io);
            fronts
                .held
                .insert(spec.volume.clone(), Held { spec, error: None });
        }
        Step::Nodes(spec) => {
            let media = Arc::clone(registry.data_plane());
            blocking(move || {
                add_nodes(
                    media.as_ref(),
                    &spec.volume,
                    &spec.nodes,
                    &spec.slicetlsroots,
                );
                Ok(())
            })
            .await?;
        }
        Step::Resize { volume, size } => {
            if let Some(io) = fronts.ios.get(&volume) {
                io.set_size(size);
            }
        }
        Step::FailMedia { volume, media } => {
            if let Some(io) = fronts.ios.get(&volume).cloned() {
                tracing::warn!(
                    volume,
                    media = media.join(","),
                    "copies lost: the front stops using them"
                );
                blocking(move || {
                    for medium in &media {
                        io.fail_medium(medium);
                    }
                    Ok(())
                })
                .await?;
            }
        }
        Step::Attach { volume, export } => {
            let Some(h) = fronts.held.get(&volume) else {
                return Ok(());
            };
            let opening = opening(&h.spec);
            let registry = Arc::clone(registry);
            blocking(move || attach(&registry, &export, &opening)).await?;
        }
        Step::Detach { volume, export } => {
            registry.detach(&export);
            tracing::info!(volume, export, "front's export detached");
        }
    }
    Ok(())
}

/// Detaches every export of the volume and lets its I/O go.
async fn close(registry: &Arc<ExportRegistry>, fronts: &mut Fronts, volume: &str) {
    if let Some(h) = fronts.held.remove(volume) {
        for export in &h.spec.exports {
            registry.detach(&export.name);
        }
        if h.error.is_none() {
            tracing::info!(volume, epoch = h.spec.epoch, "front closed");
        }
    }
    let io = fronts.ios.remove(volume);
    let calls = Arc::clone(&fronts.calls);
    let volume = volume.to_string();
    // Its copies stop first (they hold its I/O); the last holder closes
    // its slices: off the runtime's threads.
    let _ = tokio::task::spawn_blocking(move || {
        calls.closed(&volume);
        // What it served was reported; it starts again if it reopens here.
        svs_common::metrics::METRICS.volume_io.forget(&volume);
        drop(io)
    })
    .await;
}

/// Opens the volume (after its previous opening here, if any, is let go:
/// else the registry would share that one, at its old epoch) and attaches
/// its exports.
async fn open(
    registry: &Arc<ExportRegistry>,
    spec: &FrontSpec,
) -> Result<Arc<dyn VolumeIo>, String> {
    let since = Instant::now();
    while registry.volume_io(&spec.volume).is_some() {
        if since.elapsed() > CLOSE_WAIT {
            return Err("the volume's previous opening on this node is still in use".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let registry = Arc::clone(registry);
    let spec = spec.clone();
    blocking(move || {
        add_nodes(
            registry.data_plane().as_ref(),
            &spec.volume,
            &spec.nodes,
            &spec.slicetlsroots,
        );
        let opening = opening(&spec);
        let io = registry
            .open_io(&opening)
            .map_err(|e| format!("cannot open the volume: {e}"))?;
        for (i, export) in spec.exports.iter().enumerate() {
            if let Err(why) = attach(&registry, export, &opening) {
                for done in &spec.exports[..i] {
                    registry.detach(&done.name);
                }
                return Err(why);
            }
        }
        Ok(io)
    })
    .await
}

/// Makes one export available to its host (blocking).
fn attach(
    registry: &ExportRegistry,
    export: &FrontExport,
    opening: &VolumeOpening,
) -> Result<(), String> {
    let address: IpAddr = export.hostaddress.parse().map_err(|_| {
        format!(
            "export '{}': host address '{}' is no IP address",
            export.name, export.hostaddress
        )
    })?;
    registry.set_node_address(&export.host, Some(address));
    let view = export.snapshot.as_ref().map(|s| SnapshotView {
        seq: s.seq,
        size: s.size,
    });
    registry
        .attach(&export.name, &export.host, export.readonly, opening, view)
        .map_err(|e| format!("export '{}': {e}", export.name))?;
    tracing::info!(
        volume = opening.layout.volume_id,
        export = export.name,
        host = export.host,
        "front's export attached"
    );
    Ok(())
}

fn opening(spec: &FrontSpec) -> VolumeOpening {
    VolumeOpening {
        layout: VolumeLayout {
            volume_id: spec.volume.clone(),
            size: spec.size,
            media: spec.media.clone(),
            epoch: spec.epoch,
        },
        lost_media: spec.lostmedia.clone(),
    }
}

/// Serves the media of a volume's `nodes` (blocking: each is checked on
/// its node), over TLS checked against `roots` when there are any. A node
/// that cannot be reached is logged: its copies are lost to the opening,
/// which goes on with the others.
fn add_nodes(media: &dyn DataPlane, volume: &str, nodes: &[FrontNode], roots: &[String]) {
    let tls = match slice_client_tls(roots) {
        Ok(tls) => tls,
        Err(why) => {
            tracing::error!(volume, error = why, "the slice TLS roots are unusable");
            return;
        }
    };
    for node in nodes {
        let address: SocketAddr = match node.sliceaddress.parse() {
            Ok(a) => a,
            Err(_) => {
                tracing::error!(
                    node = node.node,
                    address = node.sliceaddress,
                    "bad slice address"
                );
                continue;
            }
        };
        let tls = match &tls {
            None => None,
            Some(slice_tls) => match slice_tls.client_tls(address.ip()) {
                Ok(t) => t,
                Err(why) => {
                    tracing::error!(
                        node = node.node,
                        error = why,
                        "no TLS for the node's slice server"
                    );
                    continue;
                }
            },
        };
        let endpoint = NodeEndpoint {
            node: node.node.clone(),
            address,
            credential: node.slicecredential.clone(),
            tls,
        };
        for medium in &node.media {
            if let Err(e) = media.add_node_medium(medium, endpoint.clone()) {
                tracing::warn!(
                    volume,
                    node = node.node,
                    medium,
                    error = %e,
                    "a storage node's medium cannot be reached; its copy is lost to the front"
                );
            }
        }
    }
}

/// How to verify slice servers: by `roots` (PEM), or plain TCP when there
/// are none.
fn slice_client_tls(roots: &[String]) -> Result<Option<svs_common::slice_tls::SliceTls>, String> {
    if roots.is_empty() {
        return Ok(None);
    }
    let mut certificates = Vec::new();
    for pem in roots {
        for certificate in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            certificates.push(certificate.map_err(|e| format!("a slice TLS root: {e}"))?);
        }
    }
    if certificates.is_empty() {
        return Err("the slice TLS roots hold no certificate".into());
    }
    svs_common::slice_tls::SliceTls::trusting(certificates).map(Some)
}

/// Runs blocking data-plane work off the runtime's threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| format!("the front's work panicked: {e}"))?
}

#[cfg(test)]
mod tests;
