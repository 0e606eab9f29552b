//! The connection to one storage node, shared by every slice of every
//! volume on its media: one [`SliceClient`] (it pipelines requests from any
//! number of threads), opened when first needed and opened again, lazily,
//! after it broke, no sooner than a backoff after a failed attempt.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, Instant};

use svs_sliceproto::{ClientTls, SliceClient};

/// The first wait after a failed connection attempt; it doubles with each
/// failure, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// How to reach a storage node's slice server.
#[derive(Clone)]
pub struct NodeEndpoint {
    /// The node's id (several media share one node, and its connection).
    pub node: String,
    pub address: SocketAddr,
    /// Said in the hello; the node checks it.
    pub credential: String,
    /// TLS for the connection (with the service's CA), when the service
    /// has TLS.
    pub tls: Option<ClientTls>,
}

impl std::fmt::Debug for NodeEndpoint {
    /// The credential is a secret: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeEndpoint")
            .field("node", &self.node)
            .field("address", &self.address)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

struct LinkState {
    endpoint: NodeEndpoint,
    client: Option<Arc<SliceClient>>,
    /// After a failed attempt: none before this, and why it failed.
    retry_at: Option<(Instant, String)>,
    backoff: Duration,
}

/// One storage node's connection.
pub(super) struct NodeLink {
    /// Bounds the connection, the hello and every request.
    timeout: Duration,
    /// Who this front is, in the hello.
    caller: String,
    state: Mutex<LinkState>,
    /// The node is this very process: its slice server is called in
    /// process (see `ClusterMedia::reach_in_process`), not over TCP.
    in_process: RwLock<Option<Arc<SliceClient>>>,
}

impl NodeLink {
    pub(super) fn new(endpoint: NodeEndpoint, timeout: Duration, caller: &str) -> NodeLink {
        NodeLink {
            timeout,
            caller: caller.to_string(),
            state: Mutex::new(LinkState {
                endpoint,
                client: None,
                retry_at: None,
                backoff: FIRST_BACKOFF,
            }),
            in_process: RwLock::new(None),
        }
    }

    /// This process's own slice server's client, if the node is this process
    /// (read by every request: a read lock).
    fn own(&self) -> Option<Arc<SliceClient>> {
        self.in_process
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether calls go to this process's own slice server.
    pub(super) fn is_in_process(&self) -> bool {
        self.in_process
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// Whether a call gets its connection without waiting: in process, or
    /// a connection open and not broken.
    pub(super) fn is_connected(&self) -> bool {
        self.is_in_process() || self.state().client.as_ref().is_some_and(|c| !c.is_broken())
    }

    /// Calls go to `client`, this process's own slice server, from now on.
    pub(super) fn set_in_process(&self, client: Arc<SliceClient>) {
        *self
            .in_process
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(client);
    }

    fn state(&self) -> MutexGuard<'_, LinkState> {
        // Every update leaves the state whole: poisoning is ignored.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The node's connection: the open one, or a new one when it broke
    /// (or was never opened). Fails at once (`NotConnected`) while the
    /// backoff after a failed attempt runs. Callers that find it broken
    /// meanwhile fail their request (the front end then loses the slice).
    pub(super) fn client(&self) -> io::Result<Arc<SliceClient>> {
        if let Some(own) = self.own() {
            return Ok(own);
        }
        let mut state = self.state();
        if let Some(client) = state.client.as_ref().filter(|c| !c.is_broken()) {
            return Ok(Arc::clone(client));
        }
        // Dropped outside the lock: closing joins its reader thread.
        let broken = state.client.take();
        let endpoint = state.endpoint.clone();
        if let Some((at, why)) = &state.retry_at {
            let left = at.saturating_duration_since(Instant::now());
            if !left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    format!(
                        "storage node {} ({}) is unreachable ({why}); next attempt in {left:?}",
                        endpoint.node, endpoint.address
                    ),
                ));
            }
        }
        // Held while connecting: callers meanwhile wait for this attempt
        // (bounded by the timeout) rather than each making one.
        let connected = SliceClient::connect_tls(
            endpoint.address,
            &endpoint.credential,
            &self.caller,
            self.timeout,
            endpoint.tls.as_ref(),
        );
        let outcome = match connected {
            Ok(client) => {
                let client = Arc::new(client);
                state.client = Some(Arc::clone(&client));
                state.retry_at = None;
                state.backoff = FIRST_BACKOFF;
                Ok(client)
            }
            Err(e) => {
                tracing::warn!(node = %endpoint.node, address = %endpoint.address, error = %e,
                    "cannot connect to the storage node");
                state.retry_at = Some((Instant::now() + state.backoff, e.to_string()));
                state.backoff = (state.backoff * 2).min(MAX_BACKOFF);
                Err(e)
            }
        };
        drop(state);
        drop(broken);
        outcome
    }

    /// The node's address, credential or TLS changed: later connections
    /// use them. A new address or TLS closes the connection (requests in
    /// flight fail); a new credential alone keeps it (the node accepted it
    /// already) and a failed attempt's backoff ends.
    pub(super) fn update(&self, endpoint: NodeEndpoint) {
        let mut state = self.state();
        let moved = state.endpoint.address != endpoint.address
            || state.endpoint.tls.is_some() != endpoint.tls.is_some();
        state.endpoint = endpoint;
        state.retry_at = None;
        state.backoff = FIRST_BACKOFF;
        let closed = if moved { state.client.take() } else { None };
        drop(state);
        drop(closed);
    }

    /// Same address and TLS as `endpoint` (and so the same node's server).
    pub(super) fn reaches(&self, endpoint: &NodeEndpoint) -> bool {
        let state = self.state();
        state.endpoint.address == endpoint.address
            && state.endpoint.tls.is_some() == endpoint.tls.is_some()
            && state.endpoint.credential == endpoint.credential
    }
}
