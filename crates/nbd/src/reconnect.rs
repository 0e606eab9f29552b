//! [`ReconnectingClient`]: an [`NbdClient`] that outlives its connection.
//!
//! The host agent keeps a volume's device working while `svs serve` restarts:
//! the NBD server is gone for seconds to a minute, then listens again on the
//! same address with the same export. A request that fails because the
//! connection broke (closed, reset, or no reply within `request_timeout`) is
//! re-sent on a new connection, made with exponential back-off, until
//! `give_up_after` has passed since the request began; then it fails with an
//! error that carries no OS error code, which the FUSE layer answers `EIO`.
//! An error the server answered (`EIO`, `ENOSPC`, `EINVAL`, `EPERM`, ...) is
//! returned as is, except `ESHUTDOWN` (the server is going away), which is
//! retried like a lost connection.
//!
//! The server may move: [`ReconnectingClient::connect_following`] takes an
//! [`AddressSource`], asked for the address before each new connection (the
//! host agent's device process reads a file the agent rewrites when the
//! volume's front moves to another storage node). Requests that failed with
//! the old connection are re-sent on the new one, as after a restart; the
//! export name stays the same. Once connected at a new address, the old
//! connection is abandoned: requests still waiting on it (a dead node may
//! never answer, and would hold them for `request_timeout`) are re-sent on
//! the new one at once. That is safe where a moved server fences the old one
//! (svs's fronts take a new epoch when they move, and the slices refuse
//! the old epoch's writes). With TLS, the server name checked is the host of
//! the address connected to (certificates name the address); the caller's
//! name is kept for the first address's host.
//!
//! Connecting again is tried for *every* failure, "no such export" included:
//! a restarting server may accept connections a moment before its exports
//! are back. A caller that knows the export is gone for good (the volume was
//! detached) calls [`ReconnectingClient::close`], which ends the retries.
//!
//! Many threads call one client at once (the FUSE threads). They share one
//! connection, identified by a generation number. A thread whose request
//! failed on generation `g` connects again only if the current generation is
//! still `g`, under a lock, and the back-off schedule is shared: a lost
//! connection costs one new connection, not one per thread.
//!
//! Durability across a reconnect. Writes are idempotent, so a write whose
//! reply never came is simply sent again, as is a flush that failed. A write
//! *acknowledged* on the old connection without `FUA`, and not yet covered by
//! a flush, is durable only if the server kept it: NBD gives a client no way
//! to know whether a server crashed. We retry and rely on the server: svs
//! writes the volume's data files with `pwrite` before it replies, so a
//! restart of the `svs serve` process keeps those writes in the page cache,
//! and the next flush (on whichever connection) makes them durable. Only a
//! crash of the server's host between the write and the flush loses them,
//! exactly as a crash loses a local disk's volatile write cache.
//!
//! One more hazard, when the server is alive but slower than
//! `request_timeout`: a request given up on the old connection may still be
//! running on the server after its replacement was answered on the new one,
//! and a later write to the same bytes could be overwritten by the stale one.
//! Our server skips the device calls of a closed connection that have not
//! started yet, but cannot stop one already running. Keep `request_timeout`
//! well above the slowest expected request (the default is a minute).

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use crate::client::{ClientTls, NbdClient};
use crate::protocol::ESHUTDOWN;

/// How a [`ReconnectingClient`] connects, times requests out and retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconnectOptions {
    /// Limit of one connection attempt: TCP connect plus the handshake.
    /// Default 10 s.
    pub connect_timeout: Duration,
    /// A request with no reply within this time counts as a dead connection
    /// (it is re-sent on a new one). Default 60 s.
    pub request_timeout: Duration,
    /// How long one request keeps being retried while the server is
    /// unreachable; then it fails. Counted from the start of the request.
    /// Default 10 minutes.
    pub give_up_after: Duration,
    /// Wait after the first failed connection attempt; it doubles after each
    /// further failure. Default 100 ms.
    pub initial_backoff: Duration,
    /// Cap of the wait between attempts. Default 5 s.
    pub max_backoff: Duration,
    /// Every connection starts TLS (`NBD_OPT_STARTTLS`) with this. Default:
    /// none, plain NBD.
    pub tls: Option<ClientTls>,
}

impl Default for ReconnectOptions {
    fn default() -> Self {
        ReconnectOptions {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            give_up_after: Duration::from_secs(600),
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            tls: None,
        }
    }
}

/// Where a [`ReconnectingClient`] connects (`host:port`), asked before each
/// new connection, so that a server that moved is followed. Cheap enough to
/// call at every attempt (at most one per back-off step).
pub type AddressSource = Arc<dyn Fn() -> String + Send + Sync>;

/// The host part of `host:port` (`[v6]:port` too, without brackets): the
/// name a TLS certificate is checked for.
pub fn address_host(addr: &str) -> &str {
    addr.rsplit_once(':')
        .map_or(addr, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']')
}

/// The connection in use.
struct Current {
    client: Arc<NbdClient>,
    /// The address `client` is connected to.
    addr: String,
    /// Bumped whenever `client` is replaced.
    generation: u64,
    /// Set by [`ReconnectingClient::close`].
    closed: bool,
}

/// The shared reconnection schedule. Its lock is held for one connection
/// attempt, so concurrent threads never connect twice for one loss.
struct Schedule {
    /// No attempt before this.
    next_attempt: Instant,
    /// Wait after the next failed attempt.
    delay: Duration,
    /// Since when the server has been unreachable (for the log).
    outage_since: Option<Instant>,
    last_error: Option<String>,
}

/// An NBD client that reconnects when the connection is lost and retries the
/// requests that failed with it (see the module comment).
pub struct ReconnectingClient {
    address: AddressSource,
    /// The address of the latest connection attempt (for the log and the
    /// errors).
    addr: Mutex<String>,
    /// The host of the first connection: the caller's TLS server name is
    /// for it.
    first_host: String,
    export: String,
    opts: ReconnectOptions,
    current: Mutex<Current>,
    /// Wakes threads waiting out a back-off: a new connection, or closed.
    changed: Condvar,
    schedule: Mutex<Schedule>,
    size: AtomicU64,
    read_only: AtomicBool,
    /// Connections made (handshakes completed), the first one included.
    connections: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update under these locks is a plain assignment: a panic leaves
    // consistent state, so poisoning is ignored.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn closed_error() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "NBD client closed")
}

impl ReconnectingClient {
    /// Connects to `addr` (`host:port`) and opens `export`. This first
    /// connection is tried once: an error here is the caller's to handle
    /// (wrong address, no such export, server down at start).
    pub fn connect(
        addr: String,
        export: String,
        opts: ReconnectOptions,
    ) -> io::Result<ReconnectingClient> {
        ReconnectingClient::connect_following(Arc::new(move || addr.clone()), export, opts)
    }

    /// Like [`connect`](Self::connect), to the address `address` gives now
    /// and, after a lost connection, to the one it gives then.
    pub fn connect_following(
        address: AddressSource,
        export: String,
        opts: ReconnectOptions,
    ) -> io::Result<ReconnectingClient> {
        let addr = address();
        let client = open(&addr, &export, &opts, opts.tls.as_ref())?;
        let now = Instant::now();
        Ok(ReconnectingClient {
            size: AtomicU64::new(client.size()),
            read_only: AtomicBool::new(client.read_only()),
            connections: AtomicU64::new(1),
            schedule: Mutex::new(Schedule {
                next_attempt: now,
                delay: opts.initial_backoff,
                outage_since: None,
                last_error: None,
            }),
            current: Mutex::new(Current {
                client: Arc::new(client),
                addr: addr.clone(),
                generation: 0,
                closed: false,
            }),
            changed: Condvar::new(),
            first_host: address_host(&addr).to_string(),
            addr: Mutex::new(addr),
            address,
            export,
            opts,
        })
    }

    /// The address of the latest connection attempt.
    pub fn address(&self) -> String {
        lock(&self.addr).clone()
    }

    /// The export's size as of the latest connection's handshake.
    pub fn size(&self) -> u64 {
        self.size.load(Ordering::SeqCst)
    }

    pub fn read_only(&self) -> bool {
        self.read_only.load(Ordering::SeqCst)
    }

    /// Connections made so far (the first one, reconnects and size
    /// refreshes).
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }

    /// Makes a new connection, whose handshake reports the export's current
    /// size, and uses it from now on (requests in flight on the old one
    /// finish there); returns the new size. Retried like a request while the
    /// server is unreachable.
    pub fn refresh_size(&self) -> io::Result<u64> {
        let deadline = Instant::now() + self.opts.give_up_after;
        let (_, generation) = self.current()?;
        self.reconnect(generation, deadline)?;
        Ok(self.size())
    }

    /// Stops retrying: requests from now on, and those waiting for a new
    /// connection, fail at once. Requests in flight on the current
    /// connection finish there; it closes with its last user.
    pub fn close(&self) {
        lock(&self.current).closed = true;
        self.changed.notify_all();
    }

    pub fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.run(|c| c.read(offset, buf))
    }

    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        self.run(|c| c.write(offset, data, fua))
    }

    pub fn flush(&self) -> io::Result<()> {
        self.run(|c| c.flush())
    }

    pub fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.run(|c| c.trim(offset, len))
    }

    pub fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        self.run(|c| c.write_zeroes(offset, len, fua))
    }

    fn current(&self) -> io::Result<(Arc<NbdClient>, u64)> {
        let cur = lock(&self.current);
        if cur.closed {
            return Err(closed_error());
        }
        Ok((Arc::clone(&cur.client), cur.generation))
    }

    /// Runs `op` on the current connection; while it fails with the
    /// connection, connects again and re-runs it.
    fn run<T>(&self, mut op: impl FnMut(&NbdClient) -> io::Result<T>) -> io::Result<T> {
        let deadline = Instant::now() + self.opts.give_up_after;
        loop {
            let (client, generation) = self.current()?;
            let err = match op(&client) {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            let lost = client.is_broken() || err.raw_os_error() == Some(ESHUTDOWN as i32);
            if !lost {
                // The server's answer (or a local check): not ours to retry.
                return Err(err);
            }
            drop(client);
            if Instant::now() >= deadline {
                // Connections keep being made, but none answers in time.
                return Err(self.give_up(&err.to_string()));
            }
            debug!(addr = %self.address(), export = %self.export, generation, error = %err, "NBD request failed with its connection; retrying on a new one");
            self.reconnect(generation, deadline)?;
        }
    }

    /// Returns once the current generation is past `seen`: another thread
    /// connected, or this one did. Fails once `deadline` has passed, or when
    /// the client is closed.
    fn reconnect(&self, seen: u64, deadline: Instant) -> io::Result<()> {
        loop {
            let next_attempt = {
                let mut schedule = lock(&self.schedule);
                if self.current()?.1 != seen {
                    return Ok(());
                }
                if Instant::now() >= schedule.next_attempt {
                    self.attempt(&mut schedule);
                    if self.current()?.1 != seen {
                        return Ok(());
                    }
                }
                schedule.next_attempt
            };
            let now = Instant::now();
            if now >= deadline {
                let last = lock(&self.schedule).last_error.clone();
                return Err(self.give_up(last.as_deref().unwrap_or("no connection")));
            }
            // Wait for the next attempt (or the deadline), or until another
            // thread connects or the client is closed.
            let until = next_attempt.min(deadline);
            let mut cur = lock(&self.current);
            while !cur.closed && cur.generation == seen {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                cur = self
                    .changed
                    .wait_timeout(cur, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
    }

    /// The error of a request retried for `give_up_after`. It carries no OS
    /// error code, so the FUSE layer answers `EIO`.
    fn give_up(&self, last_error: &str) -> io::Error {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "NBD server {} (export {:?}) unreachable or not answering for {:?}: {last_error}",
                self.address(),
                self.export,
                self.opts.give_up_after
            ),
        )
    }

    /// The TLS of a connection to `addr`: the caller's for the first
    /// address's host, else the same configuration checking `addr`'s host.
    fn tls_for(&self, addr: &str) -> io::Result<Option<ClientTls>> {
        match &self.opts.tls {
            None => Ok(None),
            Some(tls) if address_host(addr) == self.first_host => Ok(Some(tls.clone())),
            Some(tls) => tls.with_server_name(address_host(addr)).map(Some),
        }
    }

    /// One connection attempt, under the schedule's lock; on success the new
    /// connection replaces the current one.
    fn attempt(&self, schedule: &mut Schedule) {
        let started = Instant::now();
        let addr = (self.address)();
        {
            let mut last = lock(&self.addr);
            if *last != addr {
                info!(from = %*last, to = %addr, export = %self.export, "NBD server address changed; connecting there");
                *last = addr.clone();
            }
        }
        match self
            .tls_for(&addr)
            .and_then(|tls| open(&addr, &self.export, &self.opts, tls.as_ref()))
        {
            Ok(client) => {
                let size = client.size();
                self.size.store(size, Ordering::SeqCst);
                self.read_only.store(client.read_only(), Ordering::SeqCst);
                self.connections.fetch_add(1, Ordering::SeqCst);
                let (old, moved) = {
                    let mut cur = lock(&self.current);
                    cur.generation += 1;
                    let moved = cur.addr != addr;
                    cur.addr = addr.clone();
                    (std::mem::replace(&mut cur.client, Arc::new(client)), moved)
                };
                self.changed.notify_all();
                if moved {
                    // Its waiting requests are re-sent here, now.
                    old.abandon(&format!("the NBD server moved to {addr}"));
                }
                if let Some(since) = schedule.outage_since.take() {
                    info!(addr = %addr, export = %self.export, size, down_for = ?since.elapsed(), "NBD connection re-established");
                }
                schedule.delay = self.opts.initial_backoff;
                schedule.next_attempt = started;
                schedule.last_error = None;
                // Closes the old connection if no request holds it any more.
                drop(old);
            }
            Err(e) => {
                if schedule.outage_since.is_none() {
                    schedule.outage_since = Some(started);
                    warn!(addr = %addr, export = %self.export, error = %e, "NBD server unreachable; reconnecting with back-off");
                } else {
                    debug!(addr = %addr, export = %self.export, error = %e, "NBD reconnection attempt failed");
                }
                schedule.next_attempt = Instant::now() + schedule.delay;
                schedule.delay = (schedule.delay * 2).min(self.opts.max_backoff);
                schedule.last_error = Some(e.to_string());
            }
        }
    }
}

/// One connection: resolves `addr` and tries its addresses in turn.
fn open(
    addr: &str,
    export: &str,
    opts: &ReconnectOptions,
    tls: Option<&ClientTls>,
) -> io::Result<NbdClient> {
    let addresses: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
    let mut last = None;
    for a in &addresses {
        match NbdClient::connect_timeout_tls(a, export, opts.connect_timeout, tls)
            .and_then(|c| c.with_request_timeout(Some(opts.request_timeout)))
        {
            Ok(c) => return Ok(c),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{addr} resolves to no address"),
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_retry_for_ten_minutes_with_capped_back_off() {
        let o = ReconnectOptions::default();
        assert_eq!(o.give_up_after, Duration::from_secs(600));
        assert!(o.initial_backoff < o.max_backoff);
        assert!(o.request_timeout > o.connect_timeout);
    }

    #[test]
    fn the_host_of_an_address_is_what_tls_checks() {
        assert_eq!(address_host("10.0.0.7:10809"), "10.0.0.7");
        assert_eq!(address_host("[fd00::7]:10809"), "fd00::7");
        assert_eq!(address_host("node-7.example:10809"), "node-7.example");
        assert_eq!(address_host("node-7"), "node-7");
    }

    #[test]
    fn a_first_connection_that_fails_is_an_error_at_once() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let started = Instant::now();
        let err = ReconnectingClient::connect(addr.to_string(), "vol".into(), Default::default())
            .err()
            .unwrap();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused, "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
