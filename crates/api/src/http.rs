//! The HTTP server: hyper's HTTP/1 connections with the limits an
//! internet-facing API needs. `axum::serve` keeps every connection for as
//! long as the peer likes, so a few thousand peers sending their headers a
//! byte a second would hold a file descriptor each forever. Here:
//!
//! - **header read timeout**: a request's head (request line and headers)
//!   must arrive within it, counted from its first byte — and, on a new
//!   connection, from the accept (a peer that connects and says nothing is
//!   the cheapest slow client of all);
//! - **keep-alive timeout**: a connection with no request in progress is
//!   closed after this long idle;
//! - **body timeout**: a request's body must have arrived this long after its
//!   head; else the answer is 408 and the connection is closed;
//! - **connection cap**: at most this many connections at once. At the cap
//!   the server stops accepting: new connections wait in the kernel's listen
//!   queue (and are served as soon as a slot frees, which the timeouts above
//!   guarantee happens), rather than being accepted and dropped.
//!
//! hyper's own `header_read_timeout` cannot be used for the first rule: it
//! runs from the moment hyper waits for a head, which includes the idle time
//! between keep-alive requests, so it would cut idle connections at the
//! (short) header timeout. Each connection is watched instead: its socket
//! wrapper notes when a head starts arriving, its service wrapper when a
//! request is in progress, and the connection's task closes it at the
//! deadline that applies.
//!
//! Each request carries `ConnectInfo<SocketAddr>` (the TCP peer), like
//! `into_make_service_with_connect_info` gives under `axum::serve`.
//!
//! With TLS, the handshake runs on the connection's task and counts as part
//! of the first request's head: it must end within the header read timeout
//! from the accept, so a peer that connects and stalls the handshake is cut
//! like one that sends nothing. The watches then see decrypted bytes.

use axum::body::Body;
use axum::body::Bytes;
use axum::extract::ConnectInfo;
use axum::http::{header, HeaderValue, Request, Response, StatusCode};
use axum::Router;
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;
use tracing::{debug, info, warn};

/// The limits of the HTTP server (see the module documentation).
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    pub header_read_timeout: Duration,
    pub keep_alive_timeout: Duration,
    pub body_timeout: Duration,
    pub max_connections: usize,
}

/// After shutdown, connections get this long to finish the requests in
/// progress (idle ones close at once); the rest are then dropped, so a
/// client can never hold up a stop.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Serves `router` on `listener` until `shutdown` is cancelled, then stops
/// accepting, lets connections finish the requests in progress (at most
/// [`SHUTDOWN_GRACE`]) and returns.
/// With `tls`, connections are HTTPS only.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    tls: Option<TlsAcceptor>,
    shutdown: CancellationToken,
) -> io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut connections = JoinSet::new();
    loop {
        // Take a slot first, then accept: at the cap nothing is accepted,
        // so waiting clients stay in the listen queue instead of being cut.
        // (Both steps are cancel-safe, so reaping may interrupt them.)
        let next = async {
            let slot = Arc::clone(&slots).acquire_owned().await;
            (slot, listener.accept().await)
        };
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            (slot, accepted) = next => {
                let Ok(slot) = slot else { break };
                match accepted {
                    Ok((stream, peer)) => {
                        let router = router.clone();
                        let shutdown = shutdown.clone();
                        let tls = tls.clone();
                        connections.spawn(serve_connection(stream, peer, router, limits, tls, shutdown, slot));
                    }
                    Err(e) => {
                        // A connection reset before accept, or no file
                        // descriptor left (EMFILE): wait a little and go on,
                        // the listener itself stays good.
                        warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        }
    }
    if !connections.is_empty() {
        info!(open = connections.len(), "HTTP server stopping");
    }
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        warn!(
            open = connections.len(),
            "HTTP connections still busy after the shutdown grace period, closed"
        );
        connections.shutdown().await;
    }
    Ok(())
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    limits: HttpLimits,
    tls: Option<TlsAcceptor>,
    shutdown: CancellationToken,
    _slot: OwnedSemaphorePermit,
) {
    if let Err(e) = stream.set_nodelay(true) {
        debug!(error = %e, "TCP_NODELAY not set");
    }
    // Made at the accept: the first head's deadline counts from here.
    let watch = Arc::new(Watch::new());
    let Some(tls) = tls else {
        return serve_http(stream, peer, router, limits, shutdown, watch).await;
    };
    let handshake = async {
        // A TLS connection starts with a handshake record (0x16); anything
        // else is most likely plain HTTP sent to the HTTPS port: it gets
        // an answer saying so instead of a bare close.
        let mut first = [0u8; 1];
        if stream.peek(&mut first).await? == 1 && first[0] != TLS_HANDSHAKE_RECORD {
            let mut stream = stream;
            let _ = stream.write_all(PLAIN_HTTP_ON_HTTPS.as_bytes()).await;
            let _ = stream.shutdown().await;
            return Ok(None);
        }
        tls.accept(stream).await.map(Some)
    };
    let handshake = tokio::select! {
        _ = shutdown.cancelled() => return,
        done = tokio::time::timeout(limits.header_read_timeout, handshake) => done,
    };
    match handshake {
        Ok(Ok(Some(stream))) => serve_http(stream, peer, router, limits, shutdown, watch).await,
        Ok(Ok(None)) => debug!(%peer, "plain HTTP on the HTTPS port, answered 400"),
        Ok(Err(e)) => debug!(%peer, error = %e, "TLS handshake failed"),
        Err(_) => debug!(%peer, "TLS handshake not done within the header read timeout"),
    }
}

/// The first byte of a TLS connection: a handshake record.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// The answer to plain HTTP on the HTTPS port.
const PLAIN_HTTP_ON_HTTPS: &str = "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n\
    content-length: 65\r\nconnection: close\r\n\r\n\
    {\"message\":\"this port speaks HTTPS: use an https:// URL instead\"}";

/// Serves HTTP/1 on a connected stream (TCP, or TLS over TCP).
async fn serve_http<S>(
    stream: S,
    peer: SocketAddr,
    router: Router,
    limits: HttpLimits,
    shutdown: CancellationToken,
    watch: Arc<Watch>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let io = TokioIo::new(Watched {
        inner: stream,
        watch: Arc::clone(&watch),
    });
    let service_watch = Arc::clone(&watch);
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let in_progress = InProgress::start(&service_watch);
        let router = router.clone();
        async move {
            let response = handle(router, peer, limits.body_timeout, req).await;
            drop(in_progress);
            response
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    // Our own watch enforces the header timeout (see the module docs);
    // hyper's would need a timer and would also cut idle keep-alives.
    builder.header_read_timeout(None).keep_alive(true);
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    // The futures the loop waits on live across iterations: a request costs
    // no timer registration, and at most one wake-up (when its head starts).
    let stopped = shutdown.cancelled();
    tokio::pin!(stopped);
    let mut stopping = false;
    let changed = watch.changed.notified();
    tokio::pin!(changed);
    let timer = tokio::time::sleep_until(watch.deadline(&limits));
    tokio::pin!(timer);
    loop {
        tokio::select! {
            served = connection.as_mut() => {
                if let Err(e) = served {
                    debug!(%peer, error = %e, "HTTP connection ended with an error");
                }
                return;
            }
            // A head started arriving: its deadline may be sooner.
            _ = changed.as_mut() => {
                changed.set(watch.changed.notified());
                timer.as_mut().reset(watch.deadline(&limits));
            }
            _ = timer.as_mut() => {
                if let Some(why) = watch.expired(&limits) {
                    debug!(%peer, "HTTP connection closed: {why}");
                    return;
                }
                timer.as_mut().reset(watch.deadline(&limits));
            }
            _ = stopped.as_mut(), if !stopping => {
                // Idle connections close now; one with a request in
                // progress closes once its response is sent.
                connection.as_mut().graceful_shutdown();
                stopping = true;
            }
        }
    }
}

/// One request: the peer address in its extensions, its body under the
/// body deadline, then the router. A body that missed its deadline answers
/// 408 and closes the connection, whatever the handler made of the failed
/// read (typically a 400 about a body it could not buffer).
async fn handle(
    router: Router,
    peer: SocketAddr,
    body_timeout: Duration,
    mut req: Request<Incoming>,
) -> Result<Response<Body>, std::convert::Infallible> {
    req.extensions_mut().insert(ConnectInfo(peer));
    let timed_out = Arc::new(AtomicBool::new(false));
    let req = req.map(|body| {
        Body::new(DeadlineBody {
            inner: body,
            deadline: Box::pin(tokio::time::sleep(body_timeout)),
            timeout: body_timeout,
            timed_out: Arc::clone(&timed_out),
        })
    });
    let response = router.oneshot(req).await?;
    if timed_out.load(Ordering::Relaxed) {
        debug!(%peer, "HTTP request body timed out");
        let message = format!(
            "request body not received within {}s",
            body_timeout.as_secs_f64()
        );
        let mut response = Response::new(Body::from(
            serde_json::json!({ "message": message }).to_string(),
        ));
        *response.status_mut() = StatusCode::REQUEST_TIMEOUT;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        return Ok(response);
    }
    Ok(response)
}

/// What a connection's task needs to know to pick its deadline.
struct Watch {
    state: Mutex<WatchState>,
    /// Woken when the deadline moved sooner (a head started after a keep-alive).
    changed: Notify,
}

struct WatchState {
    /// Requests whose response is not yet produced.
    in_flight: usize,
    /// Requests answered so far on this connection.
    served: u64,
    /// Since when the connection has had no request in progress.
    idle_since: Instant,
    /// When the head of the next request started arriving.
    head_since: Option<Instant>,
}

impl Watch {
    fn new() -> Watch {
        Watch {
            state: Mutex::new(WatchState {
                in_flight: 0,
                served: 0,
                idle_since: Instant::now(),
                head_since: None,
            }),
            changed: Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, WatchState> {
        // A poisoned lock only means a panic elsewhere; the counters stay usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bytes arrived from the peer.
    fn read_some(&self) {
        let mut s = self.state();
        if s.in_flight == 0 && s.head_since.is_none() {
            if s.served == 0 {
                // On a new connection the head's clock started at the
                // accept: the deadline stays where it was.
                s.head_since = Some(s.idle_since);
            } else {
                // After a keep-alive, the header deadline is sooner than
                // the idle one the task sleeps until.
                s.head_since = Some(Instant::now());
                drop(s);
                self.changed.notify_one();
            }
        }
    }

    /// When the connection's task must look again: the moment it is to be
    /// closed unless something happens first. While a request is in
    /// progress there is nothing to enforce (its body has a deadline of its
    /// own; handlers are short), so the task just looks again after the
    /// shorter timeout; as the last look was at most that long before the
    /// request ended, the keep-alive deadline that follows is met exactly,
    /// without waking the task at every request's end.
    fn deadline(&self, limits: &HttpLimits) -> Instant {
        let s = self.state();
        if s.in_flight > 0 {
            return Instant::now() + limits.header_read_timeout.min(limits.keep_alive_timeout);
        }
        match s.head_since {
            Some(head) => head + limits.header_read_timeout,
            // A new connection owes its first request within the header timeout.
            None if s.served == 0 => s.idle_since + limits.header_read_timeout,
            None => s.idle_since + limits.keep_alive_timeout,
        }
    }

    /// Why the connection is to be closed now, if it is.
    fn expired(&self, limits: &HttpLimits) -> Option<&'static str> {
        let at = self.deadline(limits);
        let s = self.state();
        if s.in_flight > 0 || Instant::now() < at {
            return None;
        }
        Some(if s.head_since.is_some() || s.served == 0 {
            "request head not received within the header read timeout"
        } else {
            "idle beyond the keep-alive timeout"
        })
    }
}

/// Marks a request in progress on its connection, until dropped.
struct InProgress(Arc<Watch>);

impl InProgress {
    fn start(watch: &Arc<Watch>) -> InProgress {
        let mut s = watch.state();
        s.in_flight += 1;
        s.head_since = None;
        // No wake-up: the task's deadline can only move later (see `deadline`).
        InProgress(Arc::clone(watch))
    }
}

impl Drop for InProgress {
    fn drop(&mut self) {
        let mut s = self.0.state();
        s.in_flight = s.in_flight.saturating_sub(1);
        if s.in_flight == 0 {
            s.served += 1;
            s.idle_since = Instant::now();
        }
    }
}

/// The stream of a connection, telling its watch when bytes arrive.
struct Watched<S> {
    inner: S,
    watch: Arc<Watch>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.watch.read_some();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// A request body that fails once its deadline (set when the head arrived)
/// has passed: a body trickled in a byte at a time cannot hold a handler,
/// and its connection, for long.
struct DeadlineBody {
    inner: Incoming,
    deadline: Pin<Box<Sleep>>,
    timeout: Duration,
    timed_out: Arc<AtomicBool>,
}

#[derive(Debug, thiserror::Error)]
#[error("request body not received within {0:?}")]
struct BodyTimedOut(Duration);

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            this.timed_out.store(true, Ordering::Relaxed);
            return Poll::Ready(Some(Err(BodyTimedOut(this.timeout).into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::{get, post};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const LIMITS: HttpLimits = HttpLimits {
        header_read_timeout: Duration::from_millis(500),
        keep_alive_timeout: Duration::from_millis(1500),
        body_timeout: Duration::from_millis(500),
        max_connections: 100,
    };

    /// A server with `/peer` (the `ConnectInfo` a handler sees) and
    /// `/echo` (reads the whole body).
    async fn start(
        limits: HttpLimits,
    ) -> (
        SocketAddr,
        CancellationToken,
        tokio::task::JoinHandle<io::Result<()>>,
    ) {
        start_tls(limits, None).await
    }

    async fn start_tls(
        limits: HttpLimits,
        tls: Option<TlsAcceptor>,
    ) -> (
        SocketAddr,
        CancellationToken,
        tokio::task::JoinHandle<io::Result<()>>,
    ) {
        let router = Router::new()
            .route(
                "/peer",
                get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }),
            )
            .route("/echo", post(|body: String| async move { body }));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let served = tokio::spawn(serve(listener, router, limits, tls, stop.clone()));
        (addr, stop, served)
    }

    /// Reads one response (head and a body of content-length bytes).
    async fn read_response<S: AsyncRead + Unpin>(s: &mut S) -> String {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let text = String::from_utf8_lossy(&got).into_owned();
            if let Some(end) = text.find("\r\n\r\n") {
                let length = text
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length: ")
                            .map(|v| v.trim().parse::<usize>().unwrap())
                    })
                    .unwrap_or(0);
                if got.len() >= end + 4 + length {
                    return text;
                }
            }
            let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
                .await
                .expect("answered")
                .expect("read");
            assert!(n > 0, "closed before a full answer: {text}");
            got.extend_from_slice(&buf[..n]);
        }
    }

    /// Time until the server closes `s`, if within `limit`.
    async fn closed_within<S: AsyncRead + Unpin>(s: &mut S, limit: Duration) -> Option<Duration> {
        let started = Instant::now();
        let mut buf = [0u8; 64];
        loop {
            let left = limit.checked_sub(started.elapsed())?;
            match tokio::time::timeout(left, s.read(&mut buf)).await {
                Err(_) => return None,
                Ok(Ok(0)) | Ok(Err(_)) => return Some(started.elapsed()),
                Ok(Ok(_)) => {}
            }
        }
    }

    #[tokio::test]
    async fn handlers_see_the_tcp_peer_as_connect_info() {
        let (addr, stop, served) = start(LIMITS).await;
        let mut s = TcpStream::connect(addr).await.unwrap();
        let local = s.local_addr().unwrap();
        s.write_all(b"GET /peer HTTP/1.1\r\nhost: t\r\n\r\n")
            .await
            .unwrap();
        let answer = read_response(&mut s).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with(&local.to_string()), "{answer}");
        stop.cancel();
        served.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn an_idle_keep_alive_connection_lives_past_the_header_timeout_until_the_keep_alive_timeout(
    ) {
        let (addr, stop, _served) = start(LIMITS).await;
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /peer HTTP/1.1\r\nhost: t\r\n\r\n")
            .await
            .unwrap();
        assert!(read_response(&mut s).await.starts_with("HTTP/1.1 200"));
        // Past the header timeout (0.5 s) the idle connection is still open...
        assert_eq!(
            closed_within(&mut s, Duration::from_millis(1000)).await,
            None
        );
        // ...and serves another request, after which its idle clock restarts.
        s.write_all(b"GET /peer HTTP/1.1\r\nhost: t\r\n\r\n")
            .await
            .unwrap();
        assert!(read_response(&mut s).await.starts_with("HTTP/1.1 200"));
        let closed = closed_within(&mut s, Duration::from_secs(5)).await;
        assert!(
            closed.is_some_and(|c| c >= Duration::from_millis(1300)),
            "closed after {closed:?}"
        );
        stop.cancel();
    }

    #[tokio::test]
    async fn a_head_started_after_a_keep_alive_must_complete_within_the_header_timeout() {
        let (addr, stop, _served) = start(LIMITS).await;
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /peer HTTP/1.1\r\nhost: t\r\n\r\n")
            .await
            .unwrap();
        assert!(read_response(&mut s).await.starts_with("HTTP/1.1 200"));
        s.write_all(b"GET /peer HTTP/1.1\r\n").await.unwrap();
        let closed = closed_within(&mut s, Duration::from_secs(5)).await;
        assert!(
            closed.is_some_and(|c| c >= Duration::from_millis(400) && c < Duration::from_millis(1400)),
            "closed after {closed:?}"
        );
        stop.cancel();
    }

    #[tokio::test]
    async fn a_trickled_body_answers_408_and_closes_the_connection() {
        let (addr, stop, _served) = start(LIMITS).await;
        let mut s = TcpStream::connect(addr).await.unwrap();
        let started = Instant::now();
        s.write_all(b"POST /echo HTTP/1.1\r\nhost: t\r\ncontent-length: 100\r\n\r\nonly ten..")
            .await
            .unwrap();
        let answer = read_response(&mut s).await;
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("\"message\""), "{answer}");
        assert!(started.elapsed() >= Duration::from_millis(400));
        assert!(closed_within(&mut s, Duration::from_secs(2))
            .await
            .is_some());
        // A body sent in time is served.
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"POST /echo HTTP/1.1\r\nhost: t\r\ncontent-length: 5\r\n\r\nhello")
            .await
            .unwrap();
        let answer = read_response(&mut s).await;
        assert!(
            answer.starts_with("HTTP/1.1 200") && answer.ends_with("hello"),
            "{answer}"
        );
        stop.cancel();
    }

    #[tokio::test]
    async fn shutdown_closes_idle_connections_and_returns() {
        let (addr, stop, served) = start(LIMITS).await;
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /peer HTTP/1.1\r\nhost: t\r\n\r\n")
            .await
            .unwrap();
        assert!(read_response(&mut s).await.starts_with("HTTP/1.1 200"));
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(2), served)
            .await
            .expect("serve returns at once")
            .unwrap()
            .unwrap();
        assert!(closed_within(&mut s, Duration::from_secs(1))
            .await
            .is_some());
    }

    /// An acceptor with a certificate for 127.0.0.1 from a private CA
    /// (as `tls = "auto"` makes them), and a connector trusting that CA.
    fn tls_pair(dir: &std::path::Path) -> (TlsAcceptor, tokio_rustls::TlsConnector) {
        let names = vec!["127.0.0.1".to_string()];
        let (chain, key, facts) = svs_common::tls::auto_certificates(dir, &names).unwrap();
        let server =
            rustls::ServerConfig::builder_with_provider(svs_common::tls::crypto_provider())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        for ca in svs_common::tls::load_chain(&facts.certificate, "CA").unwrap() {
            roots.add(ca).unwrap();
        }
        let client =
            rustls::ClientConfig::builder_with_provider(svs_common::tls::crypto_provider())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
        (
            TlsAcceptor::from(Arc::new(server)),
            tokio_rustls::TlsConnector::from(Arc::new(client)),
        )
    }

    #[tokio::test]
    async fn over_tls_requests_are_served_and_idle_connections_close_at_the_keep_alive_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let (acceptor, connector) = tls_pair(dir.path());
        let (addr, stop, _served) = start_tls(LIMITS, Some(acceptor)).await;
        let tcp = TcpStream::connect(addr).await.unwrap();
        let local = tcp.local_addr().unwrap();
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let mut s = connector.connect(name, tcp).await.unwrap();
        s.write_all(b"GET /peer HTTP/1.1\r\nhost: t\r\n\r\n")
            .await
            .unwrap();
        let answer = read_response(&mut s).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with(&local.to_string()), "{answer}");
        // Idle past the header timeout, closed at the keep-alive timeout.
        let closed = closed_within(&mut s, Duration::from_secs(5)).await;
        assert!(
            closed.is_some_and(|c| c >= Duration::from_millis(1300)),
            "closed after {closed:?}"
        );
        stop.cancel();
    }

    #[tokio::test]
    async fn a_tls_handshake_not_done_within_the_header_timeout_closes_the_connection() {
        let dir = tempfile::tempdir().unwrap();
        let (acceptor, _) = tls_pair(dir.path());
        let (addr, stop, _served) = start_tls(LIMITS, Some(acceptor)).await;
        // Connects and says nothing.
        let mut s = TcpStream::connect(addr).await.unwrap();
        let closed = closed_within(&mut s, Duration::from_secs(5)).await;
        assert!(
            closed.is_some_and(|c| c >= Duration::from_millis(400) && c < Duration::from_millis(1400)),
            "closed after {closed:?}"
        );
        // Plain HTTP to the TLS port is answered 400, saying why, and closed.
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /peer HTTP/1.1\r\nhost: t\r\n\r\n")
            .await
            .unwrap();
        let answer = read_response(&mut s).await;
        assert!(answer.starts_with("HTTP/1.1 400 Bad Request"), "{answer}");
        assert!(
            answer
                .ends_with("{\"message\":\"this port speaks HTTPS: use an https:// URL instead\"}"),
            "{answer}"
        );
        assert!(closed_within(&mut s, Duration::from_secs(2))
            .await
            .is_some());
        stop.cancel();
    }
}
