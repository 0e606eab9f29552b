//! The blocking client: one connection to one storage node, shared by any
//! number of threads.
//!
//! Each request gets a unique id, is written whole (with those other
//! threads queued meanwhile: see `outbox`), and waits for its own reply;
//! one reader thread takes replies off the socket in whatever order the
//! node sends them and hands each to the request with its id.
//!
//! Every request has a time limit (the `timeout` of
//! [`SliceClient::connect`]). A request not sent or not answered in time
//! fails with `io::ErrorKind::TimedOut` and breaks the connection: a node
//! that stops answering is treated as gone (a late reply could not be told
//! from a lost one, and a write sent may still land: the caller must
//! consider that copy out of date). When the connection breaks, every
//! request waiting fails at once, with `TimedOut` after a timeout,
//! `InvalidData` after a reply that broke the framing and `BrokenPipe`
//! otherwise, and every later one fails at once too. Such
//! errors carry no [`RemoteError`]; an error the node answered with does
//! (see [`remote_error`]): that is how a caller tells a failure of the
//! slice from one of the connection.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, BufRead, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;

use crate::outbox::Outbox;
use crate::sent::Sent;
use crate::wire::{
    self, protocol_error, Hello, HelloReply, Op, RemoteError, ReplyHeader, RequestHeader, Status,
    MAX_NAME, MAX_PAYLOAD_LIMIT, PROTOCOL_VERSION, REPLY_LEN,
};
use crate::{MapTail, SliceName, SnapshotInfo, SnapshotPart, StoredSlice};
use svs_stream::{self as stream, Receiver, Sender};

/// A slice server of this very process, as its in-process client calls it
/// (implemented by the server: the client does not depend on it).
pub(crate) trait InProcessServer: Send + Sync {
    /// Whether the server stopped: every request fails then.
    fn is_stopped(&self) -> bool;

    /// Runs one request as the server runs one from the network: its
    /// reply payload, or the error a remote client would have got.
    fn call(
        &self,
        op: Op,
        slice: &SliceName,
        epoch: u64,
        args: [u64; 3],
        payload: &[u8],
    ) -> io::Result<Vec<u8>>;

    /// [`SliceBackend::read_cached`](crate::SliceBackend::read_cached):
    /// whether `buf` was read from memory (false on any failure: the
    /// caller then reads as usual, and meets the failure there).
    fn read_cached(&self, slice: &SliceName, offset: u64, buf: &mut [u8]) -> bool;

    /// Fills `buf` with `op`'s reply, in parts of at most the max payload
    /// (`args(at, len)` are a part's args).
    fn read(
        &self,
        op: Op,
        slice: &SliceName,
        buf: &mut [u8],
        args: &dyn Fn(u64, u64) -> [u64; 3],
    ) -> io::Result<()>;
}

/// The reply the node answered a request with, if `e` is one: the op
/// failed on the node (its errno), the epoch was stale, and so on. `None`:
/// the request failed on its way (connection lost, timed out, refused
/// before sending).
pub fn remote_error(e: &io::Error) -> Option<&RemoteError> {
    e.get_ref()?.downcast_ref::<RemoteError>()
}

/// TLS for the client: the configuration (roots to trust) and the name the
/// node's certificate must be valid for.
#[derive(Clone)]
pub struct ClientTls {
    config: Arc<rustls::ClientConfig>,
    server_name: ServerName<'static>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl ClientTls {
    /// `server_name`: a DNS name or an IP address.
    pub fn new(config: Arc<rustls::ClientConfig>, server_name: &str) -> io::Result<ClientTls> {
        let server_name = ServerName::try_from(server_name.to_string()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{server_name:?} is no TLS server name: {e}"),
            )
        })?;
        Ok(ClientTls {
            config,
            server_name,
        })
    }
}

/// What a reply must carry.
#[derive(Clone, Copy)]
pub(crate) enum Expect {
    /// Exactly this many bytes (a read), when it succeeds.
    Exact(usize),
    /// At most the max payload.
    Any,
}

/// Runs a callback once every reply it was registered for is in (see
/// [`SliceClient::call_on_replies`]): a front writing several copies is
/// answered by the thread that reads the last reply, with no thread of its
/// own waiting. The callback runs on that reader thread (or in
/// [`Replies::arm`] when every reply was in before): it must not wait for
/// another reply of a connection.
pub struct Replies {
    /// Replies still to come, plus one until [`Replies::arm`].
    remaining: AtomicUsize,
    done: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl Replies {
    pub fn new(done: impl FnOnce() + Send + 'static) -> Arc<Replies> {
        Arc::new(Replies {
            remaining: AtomicUsize::new(1),
            done: Mutex::new(Some(Box::new(done))),
        })
    }

    /// Every registration is made: the last reply runs the callback from
    /// now on, or this call does when none is left to come.
    pub fn arm(&self) {
        self.one_in();
    }

    fn one_in(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            let done = self.done.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(done) = done {
                done();
            }
        }
    }
}

/// The state of one request in flight.
enum Slot {
    /// Waiting for its reply, woken by its own condition variable (with
    /// the pending map's lock): a reply wakes one caller, not all; and
    /// counted in by the [`Replies`] registered for it, if any.
    Waiting(Expect, Arc<Condvar>, Option<Arc<Replies>>),
    /// Nobody waits (a hint): the reply is dropped.
    Ignored,
    Done(Result<Vec<u8>, RemoteError>),
}

struct Pending {
    next_id: u64,
    slots: HashMap<u64, Slot>,
    /// The deadlines of the requests a [`Replies`] waits for (nobody else
    /// watches them): the reader breaks the connection when the first
    /// passes (ids grow with time, so the first is the earliest).
    called: BTreeMap<u64, Instant>,
    /// Set once the connection is unusable: the kind of error and why.
    broken: Option<(io::ErrorKind, String)>,
}

impl Pending {
    /// See [`Shared::overdue`]; no clock read while none is waited for.
    fn overdue(&self) -> bool {
        self.called
            .first_key_value()
            .is_some_and(|(_, deadline)| *deadline <= Instant::now())
    }
}

struct Shared {
    pending: Mutex<Pending>,
    peer: SocketAddr,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // Every update is one insert or remove: poisoning is ignored.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn break_with(&self, kind: io::ErrorKind, why: String) {
        let mut p = self.lock();
        if p.broken.is_none() {
            p.broken = Some((kind, why));
        }
        let mut calls = Vec::new();
        for slot in p.slots.values_mut() {
            if let Slot::Waiting(_, wake, call) = slot {
                wake.notify_all();
                calls.extend(call.take());
            }
        }
        p.called.clear();
        drop(p);
        // Their requests fail now: collecting them finds the connection broken.
        for call in calls {
            call.one_in();
        }
    }

    /// Whether a request a [`Replies`] waits for is past its deadline.
    fn overdue(&self) -> bool {
        self.lock().overdue()
    }

    fn broken_error(&self, kind: io::ErrorKind, why: &str) -> io::Error {
        io::Error::new(kind, format!("slice connection to {}: {why}", self.peer))
    }
}

/// A connection to one storage node (or, in the node's own process, a
/// direct line to its slice server: see [`SliceServer::in_process_client`](crate::SliceServer::in_process_client)).
pub struct SliceClient {
    conn: Conn,
    timeout: Duration,
    max_payload: u32,
}

enum Conn {
    Tcp(TcpConn),
    /// Requests run in the calling thread, through the server's own
    /// dispatch and epoch fence: no socket, no thread hand-off.
    InProcess(Box<dyn InProcessServer>),
}

struct TcpConn {
    writer: Outbox<Sender>,
    /// Another handle on the socket, to shut it down without the writer
    /// lock (a send may hold that lock, blocked on a hung node).
    socket: TcpStream,
    shared: Arc<Shared>,
    reader: Option<JoinHandle<()>>,
}

impl SliceClient {
    /// Connects to the node at `addr` and says hello with `credential` and
    /// the caller's `name`. `timeout` bounds the connection, the hello and
    /// then every request.
    pub fn connect(
        addr: SocketAddr,
        credential: &str,
        name: &str,
        timeout: Duration,
    ) -> io::Result<SliceClient> {
        Self::connect_tls(addr, credential, name, timeout, None)
    }

    /// [`SliceClient::connect`], over TLS when `tls` is given.
    pub fn connect_tls(
        addr: SocketAddr,
        credential: &str,
        name: &str,
        timeout: Duration,
        tls: Option<&ClientTls>,
    ) -> io::Result<SliceClient> {
        // A zero timeout is refused by the socket; it means "no time at all".
        let timeout = timeout.max(Duration::from_millis(1));
        let hello = Hello {
            version: PROTOCOL_VERSION,
            credential: credential.to_string(),
            name: name.to_string(),
        }
        .encode()?;
        let mut socket = TcpStream::connect_timeout(&addr, timeout)?;
        socket.set_nodelay(true)?;
        socket.set_read_timeout(Some(timeout))?;
        socket.set_write_timeout(Some(timeout))?;
        let session = match tls {
            None => None,
            Some(tls) => {
                let session =
                    rustls::ClientConnection::new(Arc::clone(&tls.config), tls.server_name.clone())
                        .map_err(|e| io::Error::other(format!("TLS: {e}")))?;
                Some(stream::handshake(&mut socket, session.into()).map_err(timed_out)?)
            }
        };
        let handle = socket.try_clone()?;
        let (mut sender, mut receiver) = stream::split(socket, session)?;
        let closed = |e: io::Error| match e.kind() {
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!(
                    "{addr} closed the connection during the hello (at its connection \
                     limit, or not a storage node): {e}"
                ),
            ),
            _ => timed_out(e),
        };
        sender.write_all(&hello).map_err(closed)?;
        let reply = HelloReply::decode(&mut receiver).map_err(closed)?;
        if reply.status != Status::Ok {
            return Err(RemoteError {
                status: reply.status,
                message: reply.message,
            }
            .into_io());
        }
        if reply.version != PROTOCOL_VERSION {
            return Err(protocol_error(format!(
                "{addr} answered with protocol version {}",
                reply.version
            )));
        }
        if reply.max_payload == 0 || reply.max_payload > MAX_PAYLOAD_LIMIT {
            return Err(protocol_error(format!(
                "{addr} announced a max payload of {} bytes",
                reply.max_payload
            )));
        }
        // The reader wakes at least once a timeout to check the deadlines
        // of requests nobody waits in (see `Replies`); the others keep
        // their own.
        handle.set_read_timeout(Some(timeout))?;
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending {
                next_id: 1,
                slots: HashMap::new(),
                called: BTreeMap::new(),
                broken: None,
            }),
            peer: addr,
        });
        let reader_shared = Arc::clone(&shared);
        let max_payload = reply.max_payload;
        let reader = std::thread::Builder::new()
            .name("slice-client-reader".into())
            .spawn(move || read_replies(receiver, &reader_shared, max_payload))?;
        Ok(SliceClient {
            conn: Conn::Tcp(TcpConn {
                writer: Outbox::new(sender),
                socket: handle,
                shared,
                reader: Some(reader),
            }),
            timeout,
            max_payload,
        })
    }

    /// A client of the slice server `server` of this very process.
    pub(crate) fn in_process(
        server: Box<dyn InProcessServer>,
        max_payload: u32,
        timeout: Duration,
    ) -> SliceClient {
        SliceClient {
            conn: Conn::InProcess(server),
            timeout,
            max_payload,
        }
    }

    /// The connection of a client over TCP; a client in process has none.
    fn tcp(&self) -> io::Result<&TcpConn> {
        match &self.conn {
            Conn::Tcp(tcp) => Ok(tcp),
            Conn::InProcess(_) => Err(io::Error::other("no connection: an in-process client")),
        }
    }

    /// Largest payload of one request (reads and writes are split at it).
    pub fn max_payload(&self) -> u32 {
        self.max_payload
    }

    /// Whether the connection is unusable: every request fails from now on.
    pub fn is_broken(&self) -> bool {
        match &self.conn {
            Conn::Tcp(tcp) => tcp.shared.lock().broken.is_some(),
            Conn::InProcess(server) => server.is_stopped(),
        }
    }

    pub fn size(&self, slice: &SliceName) -> io::Result<u64> {
        wire::decode_u64(&self.call(Op::Size, slice, 0, [0; 3], &[])?)
    }

    /// Reads exactly `buf.len()` bytes at `offset`.
    pub fn read(&self, slice: &SliceName, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.read_split(Op::Read, slice, buf, |at, len| [offset + at, len, 0])
    }

    /// Reads `buf` at `offset` if it can be answered at once from memory:
    /// only a client in the server's own process can (a storage node's
    /// front reading its own copy, answered without a thread hand-off);
    /// false otherwise, and on any failure (the caller then reads as
    /// usual).
    pub fn read_cached(&self, slice: &SliceName, offset: u64, buf: &mut [u8]) -> bool {
        match &self.conn {
            Conn::InProcess(server) => server.read_cached(slice, offset, buf),
            Conn::Tcp(_) => false,
        }
    }

    pub fn prepare_write(
        &self,
        slice: &SliceName,
        epoch: u64,
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        self.call(Op::PrepareWrite, slice, epoch, [offset, len, 0], &[])
            .map(drop)
    }

    /// Writes `data` at `offset` (in requests of at most the max payload,
    /// all in flight at once).
    pub fn write(&self, slice: &SliceName, epoch: u64, offset: u64, data: &[u8]) -> io::Result<()> {
        let sent = self.send_write(slice, epoch, offset, data);
        self.collect(sent)
    }

    /// Sends [`SliceClient::write`]'s requests without waiting for their
    /// replies: [`SliceClient::collect`] waits. A caller writing several
    /// copies sends to every node before it waits for any, so their round
    /// trips overlap.
    pub fn send_write(&self, slice: &SliceName, epoch: u64, offset: u64, data: &[u8]) -> Sent {
        if let Conn::InProcess(server) = &self.conn {
            return Sent::done(
                server
                    .call(Op::Write, slice, epoch, [offset, 0, 0], data)
                    .map(drop),
            );
        }
        let mut sent = Sent::new(self.deadline());
        let mut at = 0u64;
        for chunk in data.chunks(self.max_payload as usize) {
            let id = self.send(
                Op::Write,
                slice,
                epoch,
                [offset + at, 0, 0],
                chunk,
                Expect::Any,
            );
            if !sent.add(id) {
                break;
            }
            at += chunk.len() as u64;
        }
        sent
    }

    pub fn discard(&self, slice: &SliceName, epoch: u64, offset: u64, len: u64) -> io::Result<()> {
        let sent = self.send_discard(slice, epoch, offset, len);
        self.collect(sent)
    }

    /// [`SliceClient::discard`] sent, its reply not waited for (see
    /// [`SliceClient::send_write`]).
    pub fn send_discard(&self, slice: &SliceName, epoch: u64, offset: u64, len: u64) -> Sent {
        self.send_one(Op::Discard, slice, epoch, [offset, len, 0])
    }

    /// [`SliceClient::sync`] sent, its reply not waited for (see
    /// [`SliceClient::send_write`]); `check_present`: the node first checks
    /// the slice is in place ([`SliceClient::check_present`]).
    pub fn send_sync(&self, slice: &SliceName, epoch: u64, check_present: bool) -> Sent {
        let check = if check_present {
            wire::SYNC_CHECK_PRESENT
        } else {
            0
        };
        self.send_one(Op::Sync, slice, epoch, [check, 0, 0])
    }

    /// A request without payload whose reply carries none, sent.
    fn send_one(&self, op: Op, slice: &SliceName, epoch: u64, args: [u64; 3]) -> Sent {
        if let Conn::InProcess(server) = &self.conn {
            return Sent::done(server.call(op, slice, epoch, args, &[]).map(drop));
        }
        let mut sent = Sent::new(self.deadline());
        sent.add(self.send(op, slice, epoch, args, &[], Expect::Any));
        sent
    }

    /// Waits for the replies of requests this client's `send_*` sent: the
    /// first failure, once every reply is in (none is left behind).
    pub fn collect(&self, sent: Sent) -> io::Result<()> {
        let Sent {
            ids,
            deadline,
            mut failed,
        } = sent;
        for id in ids.iter() {
            if let Err(e) = self.wait(id, deadline) {
                failed = failed.or(Some(e));
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Counts `sent`'s replies into `replies`: its callback waits for them
    /// too. Requests answered already (or run in process) are not waited
    /// for; nor, once the connection broke, any (collecting them fails at
    /// once). A request still unanswered at its deadline breaks the
    /// connection, as one a caller waits for does. Collect `sent` (which
    /// then does not wait) once the callback ran.
    pub fn call_on_replies(&self, sent: &Sent, replies: &Arc<Replies>) {
        let Conn::Tcp(tcp) = &self.conn else {
            return;
        };
        let mut p = tcp.shared.lock();
        if p.broken.is_some() {
            return;
        }
        for id in sent.ids.iter() {
            if let Some(Slot::Waiting(_, _, call @ None)) = p.slots.get_mut(&id) {
                replies.remaining.fetch_add(1, Ordering::AcqRel);
                *call = Some(Arc::clone(replies));
                p.called.insert(id, sent.deadline);
            }
        }
    }

    pub fn sync(&self, slice: &SliceName, epoch: u64) -> io::Result<()> {
        let sent = self.send_sync(slice, epoch, false);
        self.collect(sent)
    }

    pub fn allocation(
        &self,
        slice: &SliceName,
        offset: u64,
        len: u64,
    ) -> io::Result<Vec<(u64, bool)>> {
        wire::decode_runs(&self.call(Op::Allocation, slice, 0, [offset, len, 0], &[])?)
    }

    /// A hint: sent, not waited for (a failure to send is ignored too).
    pub fn will_need(&self, slice: &SliceName, offset: u64, len: u64) {
        self.hint(Op::WillNeed, slice, [offset, len, 0]);
    }

    /// A hint: sent, not waited for (see [`Op::WriteBack`]).
    pub fn start_writeback(&self, slice: &SliceName, offset: u64, len: u64) {
        self.hint(Op::WriteBack, slice, [offset, len, 0]);
    }

    /// Sends `op`, does not wait for its reply; a failure to send is
    /// ignored too.
    fn hint(&self, op: Op, slice: &SliceName, args: [u64; 3]) {
        let tcp = match &self.conn {
            Conn::Tcp(tcp) => tcp,
            Conn::InProcess(server) => {
                let _ = server.call(op, slice, 0, args, &[]);
                return;
            }
        };
        if let Ok(id) = self.send(op, slice, 0, args, &[], Expect::Any) {
            let mut p = tcp.shared.lock();
            // Replied already: drop it; else the reader drops it.
            if let Some(Slot::Done(_)) = p.slots.get(&id) {
                p.slots.remove(&id);
            } else {
                p.slots.insert(id, Slot::Ignored);
            }
        }
    }

    pub fn next_data(
        &self,
        slice: &SliceName,
        from: u64,
        len: u64,
    ) -> io::Result<Option<(u64, u64)>> {
        wire::decode_next_data(&self.call(Op::NextData, slice, 0, [from, len, 0], &[])?)
    }

    pub fn data_bytes(&self, slice: &SliceName, from: u64, len: u64) -> io::Result<u64> {
        wire::decode_u64(&self.call(Op::DataBytes, slice, 0, [from, len, 0], &[])?)
    }

    pub fn check_present(&self, slice: &SliceName) -> io::Result<()> {
        self.call(Op::CheckPresent, slice, 0, [0; 3], &[]).map(drop)
    }

    pub fn snapshots(&self, slice: &SliceName) -> io::Result<Vec<SnapshotInfo>> {
        wire::decode_snapshots(&self.call(Op::Snapshots, slice, 0, [0; 3], &[])?)
    }

    pub fn create_snapshot(&self, slice: &SliceName, epoch: u64, id: u64) -> io::Result<()> {
        self.call(Op::CreateSnapshot, slice, epoch, [id, 0, 0], &[])
            .map(drop)
    }

    pub fn delete_snapshot(&self, slice: &SliceName, epoch: u64, id: u64) -> io::Result<()> {
        self.call(Op::DeleteSnapshot, slice, epoch, [id, 0, 0], &[])
            .map(drop)
    }

    pub fn rollback(&self, slice: &SliceName, epoch: u64, id: u64) -> io::Result<()> {
        self.call(Op::Rollback, slice, epoch, [id, 0, 0], &[])
            .map(drop)
    }

    pub fn read_snapshot(
        &self,
        slice: &SliceName,
        id: u64,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<()> {
        self.read_split(Op::ReadSnapshot, slice, buf, |at, len| {
            [id, offset + at, len]
        })
    }

    pub fn snapshot_allocation(
        &self,
        slice: &SliceName,
        id: u64,
        offset: u64,
        len: u64,
    ) -> io::Result<Vec<(u64, bool)>> {
        wire::decode_runs(&self.call(Op::SnapshotAllocation, slice, 0, [id, offset, len], &[])?)
    }

    pub fn snapshot_ids(&self, slice: &SliceName) -> io::Result<Vec<u64>> {
        wire::decode_ids(&self.call(Op::SnapshotIds, slice, 0, [0; 3], &[])?)
    }

    pub fn snapshot_map_since(&self, slice: &SliceName, id: u64, from: u64) -> io::Result<MapTail> {
        wire::decode_map_tail(self.call(Op::SnapshotMapSince, slice, 0, [id, from, 0], &[])?)
    }

    /// Writes `data` (at most the max payload) at `offset` of snapshot
    /// `id`'s `part` ([`Op::WriteSnapshotPart`]), fenced at `epoch`.
    pub fn write_snapshot_part(
        &self,
        slice: &SliceName,
        epoch: u64,
        (id, part): (u64, SnapshotPart),
        offset: u64,
        data: &[u8],
    ) -> io::Result<()> {
        let args = [id, part.code(), offset];
        self.call(Op::WriteSnapshotPart, slice, epoch, args, data)
            .map(drop)
    }

    /// Reads what was written of snapshot `id`'s `part` at `offset` into
    /// `buf` (at most the max payload): the bytes read.
    pub fn read_snapshot_part(
        &self,
        slice: &SliceName,
        (id, part): (u64, SnapshotPart),
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<usize> {
        let op = match part {
            SnapshotPart::Map => Op::ReadSnapshotMapPart,
            SnapshotPart::Delta => Op::ReadSnapshotDeltaPart,
        };
        let got = self.call(op, slice, 0, [id, offset, buf.len() as u64], &[])?;
        let n = got.len().min(buf.len());
        buf[..n].copy_from_slice(&got[..n]);
        Ok(n)
    }

    /// Puts the written parts of snapshots `ids` in place
    /// ([`Op::PlaceSnapshotParts`]), fenced at `epoch`.
    pub fn place_snapshot_parts(
        &self,
        slice: &SliceName,
        epoch: u64,
        ids: &[u64],
    ) -> io::Result<()> {
        let payload = wire::encode_ids(ids);
        self.call(Op::PlaceSnapshotParts, slice, epoch, [0; 3], &payload)
            .map(drop)
    }

    /// Removes the slice's snapshot parts not in place, fenced at `epoch`.
    pub fn drop_snapshot_parts(&self, slice: &SliceName, epoch: u64) -> io::Result<()> {
        self.call(Op::DropSnapshotParts, slice, epoch, [0; 3], &[])
            .map(drop)
    }

    /// Reads chunk `chunk` of snapshot `id`'s saved data: `buf.len()`
    /// bytes (at most the max payload).
    pub fn read_snapshot_chunk(
        &self,
        slice: &SliceName,
        id: u64,
        chunk: u64,
        buf: &mut [u8],
    ) -> io::Result<()> {
        let args = [id, chunk, buf.len() as u64];
        if let Conn::InProcess(server) = &self.conn {
            let got = server.call(Op::ReadSnapshotChunk, slice, 0, args, &[])?;
            if got.len() != buf.len() {
                return Err(protocol_error("a snapshot chunk of another length"));
            }
            buf.copy_from_slice(&got);
            return Ok(());
        }
        let deadline = self.deadline();
        let rid = self.send(
            Op::ReadSnapshotChunk,
            slice,
            0,
            args,
            &[],
            Expect::Exact(buf.len()),
        )?;
        buf.copy_from_slice(&self.wait(rid, deadline)?);
        Ok(())
    }

    pub fn create_slice(&self, slice: &SliceName, size: u64) -> io::Result<()> {
        self.call(Op::CreateSlice, slice, 0, [size, 0, 0], &[])
            .map(drop)
    }

    pub fn grow_slice(&self, slice: &SliceName, size: u64) -> io::Result<()> {
        self.call(Op::GrowSlice, slice, 0, [size, 0, 0], &[])
            .map(drop)
    }

    pub fn delete_slice(&self, slice: &SliceName) -> io::Result<()> {
        self.call(Op::DeleteSlice, slice, 0, [0; 3], &[]).map(drop)
    }

    pub fn digest(&self, slice: &SliceName) -> io::Result<u128> {
        wire::decode_digest(&self.call(Op::Digest, slice, 0, [0; 3], &[])?)
    }

    /// The node's digest of `[offset, offset + len)` seeded with `seed`
    /// (see [`SliceBackend::range_digest`](crate::SliceBackend::range_digest)):
    /// `len` is at most the max payload.
    pub fn range_digest(
        &self,
        slice: &SliceName,
        offset: u64,
        len: u64,
        seed: u64,
    ) -> io::Result<u128> {
        wire::decode_digest(&self.call(Op::RangeDigest, slice, 0, [offset, len, seed], &[])?)
    }

    pub fn stored_slices(&self, medium: &str) -> io::Result<Vec<StoredSlice>> {
        let slice = SliceName::new(medium, "", 0, 0);
        wire::decode_stored(&self.call(Op::StoredSlices, &slice, 0, [0; 3], &[])?)
    }

    /// Sends `request` to the node's front of `volume` ([`Op::FrontCall`])
    /// and returns its answer. Bound by the request time limit like any
    /// request: a call that may run longer answers "not yet" and is asked
    /// again (the node's business).
    pub fn front_call(&self, volume: &str, request: &[u8]) -> io::Result<Vec<u8>> {
        let slice = SliceName::new("", volume, 0, 0);
        self.call(Op::FrontCall, &slice, 0, [0; 3], request)
    }

    /// The server this client calls in process, if it is one.
    pub(crate) fn in_process_server(&self) -> Option<&dyn InProcessServer> {
        match &self.conn {
            Conn::InProcess(server) => Some(server.as_ref()),
            Conn::Tcp(_) => None,
        }
    }

    /// When the replies to requests sent from now on are due.
    pub(crate) fn deadline(&self) -> Instant {
        Instant::now() + self.timeout
    }

    fn call(
        &self,
        op: Op,
        slice: &SliceName,
        epoch: u64,
        args: [u64; 3],
        payload: &[u8],
    ) -> io::Result<Vec<u8>> {
        if let Conn::InProcess(server) = &self.conn {
            return server.call(op, slice, epoch, args, payload);
        }
        let deadline = self.deadline();
        let id = self.send(op, slice, epoch, args, payload, Expect::Any)?;
        self.wait(id, deadline)
    }

    /// A read in requests of at most the max payload, all in flight at
    /// once; `args(at, len)` are the args of the part at `at`.
    fn read_split(
        &self,
        op: Op,
        slice: &SliceName,
        buf: &mut [u8],
        args: impl Fn(u64, u64) -> [u64; 3],
    ) -> io::Result<()> {
        if let Conn::InProcess(server) = &self.conn {
            return server.read(op, slice, buf, &args);
        }
        let deadline = self.deadline();
        let max = self.max_payload as usize;
        let mut parts = Vec::new();
        let mut at = 0usize;
        let mut failed = None;
        while at < buf.len() {
            let n = (buf.len() - at).min(max);
            match self.send(
                op,
                slice,
                0,
                args(at as u64, n as u64),
                &[],
                Expect::Exact(n),
            ) {
                Ok(id) => parts.push((id, at, n)),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
            at += n;
        }
        // Every part is waited for even after a failure: no reply is left
        // behind in the map.
        for (id, at, n) in parts {
            match self.wait(id, deadline) {
                Ok(data) => buf[at..at + n].copy_from_slice(&data),
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Registers an id and sends the request; returns the id.
    pub(crate) fn send(
        &self,
        op: Op,
        slice: &SliceName,
        epoch: u64,
        args: [u64; 3],
        payload: &[u8],
        expect: Expect,
    ) -> io::Result<u64> {
        if slice.medium.len() > MAX_NAME || slice.volume.len() > MAX_NAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("medium or volume name of {slice} over {MAX_NAME} bytes"),
            ));
        }
        if let Expect::Exact(n) = expect {
            if n > self.max_payload as usize {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "a read of {n} bytes, over the node's max payload of {}",
                        self.max_payload
                    ),
                ));
            }
        }
        let tcp = self.tcp()?;
        let id = {
            let mut p = tcp.shared.lock();
            if let Some((kind, why)) = &p.broken {
                return Err(tcp.shared.broken_error(*kind, why));
            }
            let id = p.next_id;
            p.next_id += 1;
            p.slots
                .insert(id, Slot::Waiting(expect, Arc::new(Condvar::new()), None));
            id
        };
        let header = RequestHeader::for_slice(op, id, epoch, args, slice, payload.len()).encode();
        let names = [
            &header[..],
            slice.medium.as_bytes(),
            slice.volume.as_bytes(),
        ];
        // Small payloads go in the same write (one segment, one record),
        // with whatever other threads queued meanwhile.
        let sent = if payload.len() <= wire::COPIED_PAYLOAD {
            tcp.writer
                .send(&[names[0], names[1], names[2], payload], &[])
        } else {
            tcp.writer.send(&names, payload)
        };
        if let Err(e) = sent {
            // A half-written request leaves the stream unusable.
            tcp.shared.lock().slots.remove(&id);
            let e = timed_out(e);
            let kind = match e.kind() {
                io::ErrorKind::TimedOut => io::ErrorKind::TimedOut,
                _ => io::ErrorKind::BrokenPipe,
            };
            let why = format!("sending a request failed: {e}");
            self.break_connection(kind, why.clone());
            return Err(tcp.shared.broken_error(kind, &why));
        }
        Ok(id)
    }

    /// Marks the connection broken and shuts the socket down: the reader
    /// ends, and the node sees the connection go.
    fn break_connection(&self, kind: io::ErrorKind, why: String) {
        if let Conn::Tcp(tcp) = &self.conn {
            tcp.shared.break_with(kind, why);
            let _ = tcp.socket.shutdown(Shutdown::Both);
        }
    }

    /// Waits for the reply to `id` until `deadline`.
    pub(crate) fn wait(&self, id: u64, deadline: Instant) -> io::Result<Vec<u8>> {
        let tcp = self.tcp()?;
        let mut p = tcp.shared.lock();
        let wake = match p.slots.get(&id) {
            Some(Slot::Waiting(_, wake, _)) => Some(Arc::clone(wake)),
            _ => None,
        };
        loop {
            if let Some(Slot::Done(_)) = p.slots.get(&id) {
                let Some(Slot::Done(result)) = p.slots.remove(&id) else {
                    unreachable!("checked just above")
                };
                return result.map_err(RemoteError::into_io);
            }
            if let Some((kind, why)) = &p.broken {
                let e = tcp.shared.broken_error(*kind, why);
                p.slots.remove(&id);
                return Err(e);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                p.slots.remove(&id);
                drop(p);
                let why = format!("a request got no reply within {:?}", self.timeout);
                self.break_connection(io::ErrorKind::TimedOut, why.clone());
                return Err(tcp.shared.broken_error(io::ErrorKind::TimedOut, &why));
            }
            let Some(wake) = &wake else {
                // Not waiting and not done: cannot happen (only its
                // caller removes a slot), but never wait for nothing.
                return Err(protocol_error(format!("request {id} was lost")));
            };
            p = wake
                .wait_timeout(p, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Drop for SliceClient {
    fn drop(&mut self) {
        // Closing is the goodbye: the node drops what it still runs for us.
        self.break_connection(io::ErrorKind::BrokenPipe, "the client was closed".into());
        if let Conn::Tcp(tcp) = &mut self.conn {
            if let Some(reader) = tcp.reader.take() {
                let _ = reader.join();
            }
        }
    }
}

/// A socket timeout shows as `WouldBlock` on Linux.
fn timed_out(e: io::Error) -> io::Error {
    match e.kind() {
        io::ErrorKind::WouldBlock => io::Error::new(io::ErrorKind::TimedOut, "timed out"),
        _ => e,
    }
}

/// The reader thread: takes replies off the socket until it closes or a
/// reply breaks the framing.
fn read_replies(stream: Receiver, shared: &Shared, max_payload: u32) {
    // Buffered: a reply (header, message, payload) is one read.
    let mut stream = io::BufReader::with_capacity(wire::READ_BUFFER, stream);
    let (kind, why) = loop {
        // Between replies: a read timing out here only checks deadlines.
        match stream.fill_buf() {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if shared.overdue() {
                    break (
                        io::ErrorKind::TimedOut,
                        "a request got no reply in time".to_string(),
                    );
                }
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            _ => {}
        }
        match read_reply(&mut stream, shared, max_payload) {
            Ok(Overdue(true)) => {
                break (
                    io::ErrorKind::TimedOut,
                    "a request got no reply in time".to_string(),
                )
            }
            Ok(Overdue(false)) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                break (
                    io::ErrorKind::TimedOut,
                    format!("a reply stopped half way: {e}"),
                )
            }
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                break (
                    io::ErrorKind::BrokenPipe,
                    "the node closed the connection".to_string(),
                )
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                break (io::ErrorKind::InvalidData, format!("bad reply: {e}"))
            }
            Err(e) => break (io::ErrorKind::BrokenPipe, format!("reading a reply: {e}")),
        }
    };
    shared.break_with(kind, why);
}

/// Whether, once a reply is in, a request a [`Replies`] waits for is past
/// its deadline (looked at under the lock the reply takes anyway).
struct Overdue(bool);

fn read_reply(stream: &mut impl Read, shared: &Shared, max_payload: u32) -> io::Result<Overdue> {
    let mut raw = [0u8; REPLY_LEN];
    stream.read_exact(&mut raw)?;
    let header = ReplyHeader::decode(&raw)?;
    let message = wire::read_bytes(stream, usize::from(header.message_len))?;
    let status = Status::from_code(header.status);
    let len = header.payload_len as usize;
    let (expect, wake) = match shared.lock().slots.get(&header.id) {
        Some(Slot::Waiting(expect, wake, _)) => (Some(*expect), Some(Arc::clone(wake))),
        Some(Slot::Ignored) => (None, None),
        _ => {
            return Err(protocol_error(format!(
                "reply to unknown request {}",
                header.id
            )))
        }
    };
    let fits = match (status, expect) {
        (Status::Ok, Some(Expect::Exact(n))) => len == n,
        (Status::Ok, _) => len <= max_payload as usize,
        _ => len == 0,
    };
    if !fits {
        return Err(protocol_error(format!(
            "reply of {len} bytes to request {} ({status:?})",
            header.id
        )));
    }
    let payload = wire::read_bytes(stream, len)?;
    let mut p = shared.lock();
    if expect.is_none() {
        p.slots.remove(&header.id);
        return Ok(Overdue(p.overdue()));
    }
    let result = match status {
        Status::Ok => Ok(payload),
        status => Err(RemoteError {
            status,
            message: String::from_utf8_lossy(&message).into_owned(),
        }),
    };
    let call = match p.slots.insert(header.id, Slot::Done(result)) {
        Some(Slot::Waiting(_, _, call)) => call,
        _ => None,
    };
    if call.is_some() {
        p.called.remove(&header.id);
    }
    let overdue = Overdue(p.overdue());
    drop(p);
    if let Some(wake) = wake {
        wake.notify_all();
    }
    if let Some(call) = call {
        call.one_in();
    }
    Ok(overdue)
}
