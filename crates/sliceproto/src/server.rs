//! The server core: a thread accepts connections (at most
//! `max_connections` at once); each connection has a thread that runs the
//! hello and then reads requests, and a few workers that run them on the
//! backend and write the replies in whatever order they finish. A bounded
//! queue between them holds back a client that sends faster than its
//! requests run (it stops being read, so TCP pushes back).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver as JobReceiver};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;
use svs_buffers::BufferPool;

use tracing::{debug, info, warn};

use crate::backend::{dispatch, op_failed, Authenticator, FrontControl, Refusal, SliceBackend};
use crate::client::InProcessServer;
use crate::fence::EpochFence;
use crate::fence::EpochStore;
use crate::outbox::Outbox;
use crate::wire::{
    self, Hello, HelloReply, Op, RemoteError, ReplyHeader, RequestHeader, Status,
    MAX_PAYLOAD_LIMIT, PROTOCOL_VERSION, REQUEST_LEN,
};
use crate::{SliceClient, SliceName};
use svs_stream::{self as stream, Sender};

/// The largest write a connection's reader runs itself (see
/// `read_requests`): a page-cache write of this size takes microseconds.
const INLINE_MAX: usize = 64 << 10;

/// How the server runs.
#[derive(Clone)]
pub struct ServerConfig {
    /// Connections served at once; more are closed at accept.
    pub max_connections: usize,
    /// Requests of one connection run at once.
    pub workers_per_connection: usize,
    /// Requests of one connection read and waiting for a worker.
    pub queued_per_connection: usize,
    /// Largest write payload, read length and reply payload (announced in
    /// the hello; at most 64 MiB).
    pub max_payload: u32,
    /// Time for the TLS handshake and the hello.
    pub hello_timeout: Duration,
    /// Time for a reply to be taken by the client; a client that reads
    /// nothing for this long loses its connection.
    pub reply_timeout: Duration,
    /// TLS for every connection (from its first byte), if given.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            max_connections: 256,
            workers_per_connection: 8,
            queued_per_connection: 32,
            max_payload: 4 * 1024 * 1024,
            hello_timeout: Duration::from_secs(10),
            reply_timeout: Duration::from_secs(30),
            tls: None,
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("max_connections", &self.max_connections)
            .field("workers_per_connection", &self.workers_per_connection)
            .field("queued_per_connection", &self.queued_per_connection)
            .field("max_payload", &self.max_payload)
            .field("hello_timeout", &self.hello_timeout)
            .field("reply_timeout", &self.reply_timeout)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

#[derive(Default)]
struct Connections {
    next_id: u64,
    /// A handle on each open connection's socket, to shut it down.
    open: HashMap<u64, TcpStream>,
    threads: Vec<JoinHandle<()>>,
}

struct Shared {
    config: ServerConfig,
    backend: Arc<dyn SliceBackend>,
    auth: Arc<dyn Authenticator>,
    fence: EpochFence,
    /// Where [`Op::FrontCall`]s go, once the node runs fronts.
    front: RwLock<Option<Arc<dyn FrontControl>>>,
    stopping: AtomicBool,
    connections: Mutex<Connections>,
}

impl Shared {
    fn front(&self) -> Option<Arc<dyn FrontControl>> {
        self.front
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Runs one request (from a connection or in process).
    fn handle(
        &self,
        header: &RequestHeader,
        slice: &SliceName,
        payload: &[u8],
    ) -> Result<Vec<u8>, Refusal> {
        // Only a front call reads the lock: not on every slice request.
        let front = (header.op == Op::FrontCall.code())
            .then(|| self.front())
            .flatten();
        dispatch(
            self.backend.as_ref(),
            front.as_deref(),
            &self.fence,
            header,
            slice,
            payload,
            self.config.max_payload,
        )
    }

    fn connections(&self) -> MutexGuard<'_, Connections> {
        // Every update is one insert, remove or push: poisoning is ignored.
        self.connections.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running server. [`SliceServer::shutdown`] (or dropping it) stops
/// accepting, closes every connection and waits for every thread.
pub struct SliceServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// The listening socket, to wake the accepting thread at shutdown.
    listener: TcpListener,
    acceptor: Option<JoinHandle<()>>,
}

impl SliceServer {
    /// Serves `backend` on `listener` from threads of its own.
    pub fn start(
        listener: TcpListener,
        config: ServerConfig,
        backend: Arc<dyn SliceBackend>,
        auth: Arc<dyn Authenticator>,
        epochs: Arc<dyn EpochStore>,
    ) -> io::Result<SliceServer> {
        if config.max_payload == 0 || config.max_payload > MAX_PAYLOAD_LIMIT {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("max payload must be 1 byte to {MAX_PAYLOAD_LIMIT} bytes"),
            ));
        }
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            config,
            backend,
            auth,
            fence: EpochFence::new(epochs),
            front: RwLock::new(None),
            stopping: AtomicBool::new(false),
            connections: Mutex::new(Connections::default()),
        });
        let accepting = listener.try_clone()?;
        let accept_shared = Arc::clone(&shared);
        let acceptor = std::thread::Builder::new()
            .name("slice-accept".into())
            .spawn(move || accept_loop(&accepting, &accept_shared))?;
        info!(%addr, "slice server listening");
        Ok(SliceServer {
            addr,
            shared,
            listener,
            acceptor: Some(acceptor),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The epochs the server fences with (for the node's own checks).
    pub fn fence(&self) -> &EpochFence {
        &self.shared.fence
    }

    /// A client of this server for this very process (the node's own
    /// fronts reaching its own slices): each request runs in the calling
    /// thread through the same dispatch and epoch fence as one that came
    /// over the network, without a socket, a hello or a thread hand-off.
    /// It fails every request once the server stopped. `timeout` is only
    /// what the client reports; requests in process are not timed.
    pub fn in_process_client(&self, timeout: Duration) -> SliceClient {
        SliceClient::in_process(
            Box::new(InProcess {
                shared: Arc::clone(&self.shared),
            }),
            self.shared.config.max_payload,
            timeout,
        )
    }

    /// Answers [`Op::FrontCall`]s with `front` from now on (before, they
    /// are refused: the node runs no fronts).
    pub fn serve_front_calls(&self, front: Arc<dyn FrontControl>) {
        *self
            .shared
            .front
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(front);
    }

    /// Connections open now.
    pub fn connection_count(&self) -> usize {
        self.shared.connections().open.len()
    }

    /// Stops accepting, closes every connection (requests running finish,
    /// their replies may not reach the client) and waits for every thread.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wakes the blocked accept (Linux: it fails with EINVAL).
        // SAFETY: the descriptor is open (owned by `self.listener`).
        unsafe {
            libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR);
        }
        let _ = acceptor.join();
        let threads = {
            let mut c = self.shared.connections();
            for socket in c.open.values() {
                let _ = socket.shutdown(Shutdown::Both);
            }
            std::mem::take(&mut c.threads)
        };
        for t in threads {
            let _ = t.join();
        }
        info!(addr = %self.addr, "slice server stopped");
    }
}

impl Drop for SliceServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    loop {
        let accepted = listener.accept();
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let (socket, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of descriptors and the like: wait instead of spinning.
                warn!("slice server: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let mut c = shared.connections();
        c.threads.retain(|t| !t.is_finished());
        if c.open.len() >= shared.config.max_connections {
            warn!(%peer, "slice server: at its {} connections, closing a new one", shared.config.max_connections);
            continue;
        }
        let Ok(handle) = socket.try_clone() else {
            continue;
        };
        let id = c.next_id;
        c.next_id += 1;
        c.open.insert(id, handle);
        let conn_shared = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("slice-conn".into())
            .spawn(move || {
                if let Err(e) = serve_connection(&conn_shared, socket, peer) {
                    debug!(%peer, "slice connection ended: {e}");
                }
                conn_shared.connections().open.remove(&id);
            });
        match spawned {
            Ok(t) => c.threads.push(t),
            Err(e) => {
                warn!("slice server: no thread for a connection: {e}");
                c.open.remove(&id);
            }
        }
    }
}

/// Payload buffers a connection keeps, given back by its workers once a
/// request has run and reused by its reader (with a copy's 1 MiB writes, a
/// third of that thread's time went to zeroing new ones): at most this many,
/// holding at most [`POOLED_BYTES`].
const POOLED_BUFFERS: usize = 4;
const POOLED_BYTES: usize = 4 << 20;

/// A request read off the wire, for a worker.
struct Job {
    header: RequestHeader,
    medium: Vec<u8>,
    volume: Vec<u8>,
    payload: Vec<u8>,
}

fn serve_connection(
    shared: &Arc<Shared>,
    mut socket: TcpStream,
    peer: SocketAddr,
) -> io::Result<()> {
    let config = &shared.config;
    socket.set_nodelay(true)?;
    socket.set_read_timeout(Some(config.hello_timeout))?;
    socket.set_write_timeout(Some(config.hello_timeout))?;
    let session = match &config.tls {
        None => None,
        Some(tls) => {
            let session = rustls::ServerConnection::new(Arc::clone(tls))
                .map_err(|e| io::Error::other(format!("TLS: {e}")))?;
            Some(stream::handshake(&mut socket, session.into())?)
        }
    };
    let closer = socket.try_clone()?;
    let (mut sender, mut receiver) = stream::split(socket, session)?;
    let refusal = match Hello::decode(&mut receiver) {
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            Some((Status::BadRequest, e.to_string()))
        }
        Err(e) => return Err(e),
        Ok(hello) if hello.version != PROTOCOL_VERSION => Some((
            Status::UnsupportedVersion,
            format!(
                "protocol version {} is not spoken here (this node speaks {PROTOCOL_VERSION})",
                hello.version
            ),
        )),
        Ok(hello) => match shared
            .auth
            .authenticate(&hello.credential, &hello.name, peer)
        {
            Ok(()) => {
                debug!(%peer, caller = %hello.name, "slice connection accepted");
                None
            }
            Err(message) => {
                warn!(%peer, caller = %hello.name, "slice connection refused: {message}");
                Some((Status::Unauthorized, message))
            }
        },
    };
    let (status, message) = refusal.clone().unwrap_or((Status::Ok, String::new()));
    let reply = HelloReply {
        version: PROTOCOL_VERSION,
        status,
        max_payload: config.max_payload,
        message,
    };
    sender.write_all(&reply.encode())?;
    if let Some((_, message)) = refusal {
        let _ = closer.shutdown(Shutdown::Both);
        return Err(io::Error::new(io::ErrorKind::PermissionDenied, message));
    }
    closer.set_read_timeout(None)?;
    closer.set_write_timeout(Some(config.reply_timeout))?;

    let writer = Arc::new(Outbox::new(sender));
    let busy = Arc::new(AtomicUsize::new(0));
    let (jobs, job_queue) = sync_channel::<Job>(config.queued_per_connection.max(1));
    let job_queue = Arc::new(Mutex::new(job_queue));
    let buffers = Arc::new(BufferPool::new(POOLED_BUFFERS, POOLED_BYTES));
    let mut workers = Vec::new();
    for _ in 0..config.workers_per_connection.max(1) {
        let shared = Arc::clone(shared);
        let writer = Arc::clone(&writer);
        let job_queue = Arc::clone(&job_queue);
        let buffers = Arc::clone(&buffers);
        let busy = Arc::clone(&busy);
        let closer = closer.try_clone()?;
        let spawned = std::thread::Builder::new()
            .name("slice-worker".into())
            .spawn(move || work(&shared, &job_queue, &writer, &closer, (&buffers, &busy)));
        match spawned {
            Ok(w) => workers.push(w),
            // Fewer workers is slower, not wrong; none at all cannot serve.
            Err(e) if workers.is_empty() => return Err(e),
            Err(e) => warn!("slice server: fewer workers for a connection: {e}"),
        }
    }
    // Buffered: a small request (header, names, payload) is one read.
    let mut receiver = io::BufReader::with_capacity(wire::READ_BUFFER, receiver);
    let ended = read_requests(shared, &mut receiver, &jobs, &writer, (&buffers, &busy));
    // The workers finish what was queued, then stop.
    drop(jobs);
    for w in workers {
        let _ = w.join();
    }
    let _ = closer.shutdown(Shutdown::Both);
    ended
}

/// Reads requests until the client leaves or breaks the framing. A write
/// or discard of at most [`INLINE_MAX`] bytes that is the only request the
/// connection has (none buffered behind it, none queued or running) runs
/// here, without the hand-off to a worker (a thread wake-up each way,
/// which at depth 1 is a good part of the round trip); anything else, or
/// anything while others are in flight, goes to the workers.
fn read_requests(
    shared: &Shared,
    receiver: &mut io::BufReader<impl Read>,
    jobs: &std::sync::mpsc::SyncSender<Job>,
    writer: &Outbox<Sender>,
    (buffers, busy): (&BufferPool, &AtomicUsize),
) -> io::Result<()> {
    let max_payload = shared.config.max_payload;
    loop {
        let mut raw = [0u8; REQUEST_LEN];
        match receiver.read_exact(&mut raw) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        let header = match RequestHeader::decode(&raw, max_payload) {
            Ok(h) => h,
            Err((id, message)) => {
                // The stream cannot be trusted past a bad header: say why,
                // then close.
                let _ = send_reply(writer, id, Status::BadRequest, &message, &[]);
                return Err(wire::protocol_error(message));
            }
        };
        let medium = wire::read_bytes(receiver, usize::from(header.medium_len))?;
        let volume = wire::read_bytes(receiver, usize::from(header.volume_len))?;
        let mut payload = buffers.take(header.payload_len as usize);
        receiver.read_exact(&mut payload)?;
        if shared.stopping.load(Ordering::SeqCst) {
            let _ = send_reply(
                writer,
                header.id,
                Status::ShuttingDown,
                "the node is shutting down",
                &[],
            );
            return Ok(());
        }
        let job = Job {
            header,
            medium,
            volume,
            payload,
        };
        let small_change = (job.header.op == Op::Write as u16
            || job.header.op == Op::Discard as u16)
            && job.payload.len() <= INLINE_MAX;
        if small_change && receiver.buffer().is_empty() && busy.load(Ordering::Acquire) == 0 {
            answer(shared, job, writer, buffers)?;
            continue;
        }
        busy.fetch_add(1, Ordering::AcqRel);
        if jobs.send(job).is_err() {
            // Every worker is gone (they stop on a broken socket).
            return Ok(());
        }
    }
}

/// A worker: runs queued requests and writes their replies.
fn work(
    shared: &Shared,
    queue: &Mutex<JobReceiver<Job>>,
    writer: &Outbox<Sender>,
    closer: &TcpStream,
    (buffers, busy): (&BufferPool, &AtomicUsize),
) {
    loop {
        let job = {
            let queue = queue.lock().unwrap_or_else(|e| e.into_inner());
            queue.recv()
        };
        let Ok(job) = job else {
            return;
        };
        let answered = answer(shared, job, writer, buffers);
        busy.fetch_sub(1, Ordering::AcqRel);
        if let Err(e) = answered {
            // A reply half sent (or not taken in time) leaves the stream
            // unusable: close it, which ends the reading thread.
            debug!("slice server: a reply could not be sent: {e}");
            let _ = closer.shutdown(Shutdown::Both);
            return;
        }
    }
}

/// Runs one request and sends its reply.
fn answer(
    shared: &Shared,
    job: Job,
    writer: &Outbox<Sender>,
    buffers: &BufferPool,
) -> io::Result<()> {
    let id = job.header.id;
    let (status, message, payload) = match run(shared, &job) {
        Ok(payload) => (Status::Ok, String::new(), payload),
        Err((status, message)) => (status, message, Vec::new()),
    };
    buffers.give(job.payload);
    send_reply(writer, id, status, &message, &payload)
}

fn run(shared: &Shared, job: &Job) -> Result<Vec<u8>, (Status, String)> {
    let (Ok(medium), Ok(volume)) = (
        std::str::from_utf8(&job.medium),
        std::str::from_utf8(&job.volume),
    ) else {
        return Err((
            Status::BadRequest,
            "medium or volume name is not UTF-8".into(),
        ));
    };
    let slice = SliceName::new(medium, volume, job.header.copy, job.header.column);
    shared.handle(&job.header, &slice, &job.payload)
}

/// The line of an in-process client to its server.
struct InProcess {
    shared: Arc<Shared>,
}

fn stopped() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the slice server stopped")
}

/// The error a remote client gets for a refusal.
fn refused((status, message): Refusal) -> io::Error {
    RemoteError { status, message }.into_io()
}

impl InProcessServer for InProcess {
    fn is_stopped(&self) -> bool {
        self.shared.stopping.load(Ordering::Acquire)
    }

    fn call(
        &self,
        op: Op,
        slice: &SliceName,
        epoch: u64,
        args: [u64; 3],
        payload: &[u8],
    ) -> io::Result<Vec<u8>> {
        if self.is_stopped() {
            return Err(stopped());
        }
        let header = RequestHeader::for_slice(op, 0, epoch, args, slice, payload.len());
        self.shared.handle(&header, slice, payload).map_err(refused)
    }

    fn read_cached(&self, slice: &SliceName, offset: u64, buf: &mut [u8]) -> bool {
        !self.is_stopped()
            && self
                .shared
                .backend
                .read_cached(slice, offset, buf)
                .unwrap_or(false)
    }

    /// A plain read goes straight into `buf` (reads are not fenced).
    fn read(
        &self,
        op: Op,
        slice: &SliceName,
        buf: &mut [u8],
        args: &dyn Fn(u64, u64) -> [u64; 3],
    ) -> io::Result<()> {
        if self.is_stopped() {
            return Err(stopped());
        }
        if op == Op::Read {
            let [offset, _, _] = args(0, buf.len() as u64);
            return self
                .shared
                .backend
                .read(slice, offset, buf)
                .map_err(|e| refused(op_failed(op, slice, &e)));
        }
        let max = self.shared.config.max_payload as usize;
        for (part, at) in buf.chunks_mut(max).zip((0..).step_by(max)) {
            let data = self.call(op, slice, 0, args(at as u64, part.len() as u64), &[])?;
            if data.len() != part.len() {
                return Err(wire::protocol_error(format!(
                    "{op:?} {slice}: {} bytes answered for {}",
                    data.len(),
                    part.len()
                )));
            }
            part.copy_from_slice(&data);
        }
        Ok(())
    }
}

fn send_reply(
    writer: &Outbox<Sender>,
    id: u64,
    status: Status,
    message: &str,
    payload: &[u8],
) -> io::Result<()> {
    let message = wire::truncated(message);
    let header = ReplyHeader {
        status: status.code(),
        message_len: message.len() as u16,
        id,
        payload_len: payload.len() as u32,
    };
    let header = header.encode();
    if payload.len() <= wire::COPIED_PAYLOAD {
        // One write for small replies, with those other workers queued.
        return writer.send(&[&header, message.as_bytes(), payload], &[]);
    }
    writer.send(&[&header, message.as_bytes()], payload)
}
