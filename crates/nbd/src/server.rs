//! Accepting connections: the connection limit, then per connection the
//! handshake and the transmission phase.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, info_span, warn, Instrument};

use crate::handshake::{self, HandshakeError};
use crate::transmission::{End, Transmission};
use crate::{Exports, NbdConfig};

/// A client must finish the handshake within this time.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
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
        info!(%local, max_connections = self.config.max_connections, "NBD server listening");
        let slots = Arc::new(Semaphore::new(self.config.max_connections));
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
                    let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                        warn!(%peer, max_connections = self.config.max_connections, "connection refused: too many connections");
                        drop(stream);
                        continue;
                    };
                    let span = info_span!("nbd", %peer, export = tracing::field::Empty);
                    let exports = Arc::clone(&self.exports);
                    let limits = (self.config.max_payload, self.config.inline_max);
                    let shutdown = shutdown.clone();
                    connections.spawn(
                        async move {
                            serve_connection(stream, peer, exports, limits, shutdown).await;
                            drop(slot);
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
    (max_payload, inline_max): (u32, u32),
    shutdown: CancellationToken,
) {
    if let Err(e) = stream.set_nodelay(true) {
        debug!(error = %e, "TCP_NODELAY not set");
    }
    debug!("connection accepted");
    let (read_half, write_half) = stream.into_split();
    let mut reader = BufReader::with_capacity(BUFFER, read_half);
    let mut writer = BufWriter::with_capacity(BUFFER, write_half);

    let negotiated = tokio::select! {
        _ = shutdown.cancelled() => {
            debug!("server shutting down during the handshake");
            return;
        }
        r = tokio::time::timeout(
            HANDSHAKE_TIMEOUT,
            handshake::negotiate(&mut reader, &mut writer, exports.as_ref(), peer, max_payload),
        ) => r,
    };
    let negotiated = match negotiated {
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
        "client connected to export"
    );
    let transmission = Transmission {
        device,
        closed: negotiated.export.closed,
        shutdown,
        max_payload,
        inline_max,
    };
    match transmission.run(reader, writer).await {
        Ok(End::Disconnect) => info!("client disconnected"),
        Ok(End::PeerGone) | Ok(End::WriteFailed) => info!("client connection lost"),
        Ok(End::ExportClosed) => info!("export closed, client disconnected"),
        Ok(End::Shutdown) => info!("server shutting down, client disconnected"),
        Err(e) => warn!(error = %e, "protocol violation, connection closed"),
    }
}
