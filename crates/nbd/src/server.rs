//! Accepting connections: admission, then per connection the handshake and
//! the transmission phase.
//!
//! Admission, in order, at accept and before any byte is exchanged: a peer
//! whose address no export admits ([`Exports::admits`]) is closed at once;
//! so is one more connection from a peer that already has
//! `max_connections_per_peer`, and one more beyond `max_connections`. So
//! strangers never hold a slot, and one (admitted) peer cannot take them all;
//! a connection that stays idle in the handshake is closed after
//! `handshake_timeout`.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::io::{BufReader, BufWriter, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, info_span, warn, Instrument};

use crate::handshake::{self, Haggled, HandshakeError, Negotiated, TlsState};
use crate::transmission::{End, Transmission};
use crate::{Exports, NbdConfig, ServerTls};

/// Read and write buffers of a connection.
const BUFFER: usize = 256 * 1024;

/// The NBD server: serves the exports `Exports` opens.
pub struct NbdServer {
    exports: Arc<dyn Exports>,
    config: NbdConfig,
}

impl NbdServer {
    pub fn new(exports: Arc<dyn Exports>, config: NbdConfig) -> NbdServer {
        let mut config = config;
        // The maximum block size must be at least the preferred one.
        config.max_payload = config
            .max_payload
            .max(crate::protocol::PREFERRED_BLOCK_SIZE);
        NbdServer { exports, config }
    }

    /// Serves until `shutdown` is cancelled. Then stops accepting, lets every
    /// connection answer the requests it has in flight (for a bounded time),
    /// closes them all and returns.
    pub async fn serve(
        &self,
        listener: TcpListener,
        shutdown: CancellationToken,
    ) -> io::Result<()> {
        let local = listener.local_addr()?;
        let congestion = self.config.tcp_congestion.filter(|chosen| {
            chosen
                .apply(&listener)
                .inspect_err(|e| {
                    warn!(%local, tcp_congestion = %chosen, error = %e,
                        "TCP congestion control not set, connections keep the kernel's default");
                })
                .is_ok()
        });
        info!(
            tcp_congestion = congestion.as_ref().map_or("the kernel's default", |c| c.as_str()),
            %local,
            max_connections = self.config.max_connections,
            max_connections_per_peer = self.config.max_connections_per_peer,
            handshake_timeout = ?self.config.handshake_timeout,
            tls = match &self.config.tls {
                None => "off",
                Some(t) if t.required => "require",
                Some(_) => "optional",
            },
            "NBD server listening"
        );
        let slots = Arc::new(Semaphore::new(self.config.max_connections));
        let peers = PeerCounts::new(self.config.max_connections_per_peer);
        let mut refusals = Refusals::default();
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                accepted = listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            // Per-connection failures (reset before accept)
                            // and resource exhaustion (EMFILE) alike: wait a
                            // little and go on; the listener itself stays good.
                            warn!(error = %e, "accept failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let ip = canonical(peer.ip());
                    if !self.exports.admits(ip) {
                        refusals.note(peer, "no export admits this address");
                        continue;
                    }
                    let Some(peer_slot) = peers.take(ip) else {
                        refusals.note(peer, "too many connections from this address");
                        continue;
                    };
                    let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                        refusals.note(peer, "too many connections");
                        continue;
                    };
                    let span = info_span!("nbd", %peer, export = tracing::field::Empty);
                    let exports = Arc::clone(&self.exports);
                    let limits = Limits {
                        max_payload: self.config.max_payload,
                        inline_max: self.config.inline_max,
                        handshake_timeout: self.config.handshake_timeout,
                    };
                    let shutdown = shutdown.clone();
                    let tls = self.config.tls.clone();
                    connections.spawn(
                        async move {
                            serve_connection(stream, peer, exports, limits, tls, shutdown).await;
                            drop(slot);
                            drop(peer_slot);
                        }
                        .instrument(span),
                    );
                }
            }
        }
        info!(%local, open = connections.len(), "NBD server stopping");
        while connections.join_next().await.is_some() {}
        Ok(())
    }
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    exports: Arc<dyn Exports>,
    limits: Limits,
    tls: Option<ServerTls>,
    shutdown: CancellationToken,
) {
    let Limits {
        max_payload,
        inline_max,
        handshake_timeout,
    } = limits;
    if let Err(e) = stream.set_nodelay(true) {
        debug!(error = %e, "TCP_NODELAY not set");
    }
    debug!("connection accepted");

    let negotiated = tokio::select! {
        _ = shutdown.cancelled() => {
            debug!("server shutting down during the handshake");
            return;
        }
        r = tokio::time::timeout(
            handshake_timeout,
            handshake_connection(stream, exports.as_ref(), peer, max_payload, tls.as_ref()),
        ) => r,
    };
    let (negotiated, link) = match negotiated {
        Err(_) => {
            info!("handshake timed out");
            return;
        }
        Ok(Err(HandshakeError::Io(e))) => {
            debug!(error = %e, "connection lost during the handshake");
            return;
        }
        Ok(Err(e)) => {
            info!(error = %e, "handshake failed, connection closed");
            return;
        }
        Ok(Ok(None)) => {
            debug!("client aborted the handshake");
            return;
        }
        Ok(Ok(Some(n))) => n,
    };

    tracing::Span::current().record("export", negotiated.name.as_str());
    let device = negotiated.export.device;
    info!(
        size = device.size(),
        read_only = device.read_only(),
        tls = matches!(link, Link::Tls(..)),
        structured_replies = negotiated.structured,
        block_status = negotiated.allocation,
        "client connected to export"
    );
    let transmission = Transmission {
        device,
        closed: negotiated.export.closed,
        shutdown,
        max_payload,
        inline_max,
        structured: negotiated.structured,
        allocation: negotiated.allocation,
    };
    // Each kind of stream has its own (monomorphised) transmission loop:
    // plain connections keep their owned TCP halves, untouched by TLS.
    let ended = match link {
        Link::Plain(reader, writer) => transmission.run(reader, writer).await,
        Link::Tls(reader, writer) => transmission.run(reader, writer).await,
    };
    match ended {
        Ok(End::Disconnect) => info!("client disconnected"),
        Ok(End::PeerGone) | Ok(End::WriteFailed) => info!("client connection lost"),
        Ok(End::ExportClosed) => info!("export closed, client disconnected"),
        Ok(End::Shutdown) => info!("server shutting down, client disconnected"),
        Err(e) => warn!(error = %e, "protocol violation, connection closed"),
    }
}

type TlsStream = tokio_rustls::server::TlsStream<TcpStream>;

/// A connection after the handshake, buffered both ways.
enum Link {
    Plain(BufReader<OwnedReadHalf>, BufWriter<OwnedWriteHalf>),
    Tls(
        BufReader<ReadHalf<TlsStream>>,
        BufWriter<WriteHalf<TlsStream>>,
    ),
}

/// The whole handshake: greeting, haggling, and with STARTTLS the TLS
/// handshake and the haggling that follows inside TLS. `Ok(None)`: the
/// client aborted.
async fn handshake_connection(
    stream: TcpStream,
    exports: &dyn Exports,
    peer: SocketAddr,
    max_payload: u32,
    tls: Option<&ServerTls>,
) -> Result<Option<(Negotiated, Link)>, HandshakeError> {
    let (read_half, write_half) = stream.into_split();
    let mut reader = BufReader::with_capacity(BUFFER, read_half);
    let mut writer = BufWriter::with_capacity(BUFFER, write_half);
    let client = handshake::greet(&mut reader, &mut writer).await?;
    let mut state = TlsState {
        offered: tls.is_some(),
        required: tls.is_some_and(|t| t.required),
        active: false,
    };
    let haggled = handshake::haggle(
        &mut reader,
        &mut writer,
        exports,
        peer,
        max_payload,
        client,
        state,
    )
    .await?;
    let negotiated = match haggled {
        Haggled::Aborted => return Ok(None),
        Haggled::Export(n) => return Ok(Some((n, Link::Plain(reader, writer)))),
        Haggled::StartTls => match tls {
            Some(tls) => tls,
            // Only acknowledged when offered.
            None => return Err(HandshakeError::Tls(io::Error::other("TLS not offered"))),
        },
    };
    // The client waits for the ACK before its ClientHello: anything it
    // sent already would be lost in our buffer.
    if !reader.buffer().is_empty() {
        return Err(HandshakeError::DataBeforeTls);
    }
    let stream = reader
        .into_inner()
        .reunite(writer.into_inner())
        .map_err(|e| HandshakeError::Io(io::Error::other(e.to_string())))?;
    let stream = tokio_rustls::TlsAcceptor::from(Arc::clone(&negotiated.config))
        .accept(stream)
        .await
        .map_err(HandshakeError::Tls)?;
    debug!("TLS started");
    let (read_half, write_half) = tokio::io::split(stream);
    let mut reader = BufReader::with_capacity(BUFFER, read_half);
    let mut writer = BufWriter::with_capacity(BUFFER, write_half);
    state.active = true;
    match handshake::haggle(
        &mut reader,
        &mut writer,
        exports,
        peer,
        max_payload,
        client,
        state,
    )
    .await?
    {
        Haggled::Aborted => Ok(None),
        Haggled::Export(n) => Ok(Some((n, Link::Tls(reader, writer)))),
        // A second STARTTLS is refused inside `haggle`.
        Haggled::StartTls => Err(HandshakeError::Tls(io::Error::other("STARTTLS twice"))),
    }
}

/// What a connection's task needs of the configuration.
#[derive(Clone, Copy)]
struct Limits {
    max_payload: u32,
    inline_max: u32,
    handshake_timeout: Duration,
}

/// The address a peer is counted and admitted by: an IPv4 client of an
/// IPv6 listener (`::ffff:a.b.c.d`) is the IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// Open connections per peer address.
#[derive(Clone)]
struct PeerCounts {
    max: usize,
    counts: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl PeerCounts {
    fn new(max: usize) -> PeerCounts {
        PeerCounts {
            max: max.max(1),
            counts: Arc::default(),
        }
    }

    fn counts(&self) -> MutexGuard<'_, HashMap<IpAddr, usize>> {
        // A poisoned lock only means a panic elsewhere; the counts stay usable.
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A slot for one more connection from `ip`, unless it has them all.
    fn take(&self, ip: IpAddr) -> Option<PeerSlot> {
        let mut counts = self.counts();
        let n = counts.entry(ip).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(PeerSlot {
            ip,
            peers: self.clone(),
        })
    }
}

/// One connection's place in its peer's count, given back when dropped.
struct PeerSlot {
    ip: IpAddr,
    peers: PeerCounts,
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut counts = self.peers.counts();
        if let Some(n) = counts.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

/// Connections refused at accept are logged at debug level one by one, and
/// as one warning at most every [`Refusals::EVERY`] (a flood of them must
/// not flood the log too).
#[derive(Default)]
struct Refusals {
    last_warning: Option<Instant>,
    since: u64,
}

impl Refusals {
    const EVERY: Duration = Duration::from_secs(10);

    fn note(&mut self, peer: SocketAddr, why: &'static str) {
        debug!(%peer, "connection refused: {why}");
        self.since += 1;
        let due = self
            .last_warning
            .is_none_or(|at| at.elapsed() >= Self::EVERY);
        if due {
            warn!(%peer, refused = self.since, "NBD connection refused: {why} (count since the last warning)");
            self.last_warning = Some(Instant::now());
            self.since = 0;
        }
    }
}
