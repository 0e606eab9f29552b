//! A blocking NBD client: the fixed newstyle handshake with `NBD_OPT_GO`,
//! then simple-reply transmission with many requests in flight over one
//! connection.
//!
//! Any number of threads may call one [`NbdClient`] at once (the FUSE layer
//! does): each request gets a unique handle, is written whole under the
//! writer lock, and waits for its own reply. One reader thread takes replies
//! off the socket in whatever order the server sends them and hands each to
//! the request with its handle. When the connection breaks, every waiting
//! and later request fails with `BrokenPipe`-like errors instead of hanging.
//!
//! With a request timeout ([`NbdClient::with_request_timeout`]) a request
//! that gets no reply in time (or cannot be sent in time) fails with
//! `TimedOut` and breaks the connection: a late reply could not be told
//! apart from a lost one, so the connection is not trusted any more. A hung
//! server then never holds a caller forever; [`crate::ReconnectingClient`]
//! builds on this to reconnect.
//!
//! With [`ClientTls`] the client starts TLS (`NBD_OPT_STARTTLS`) right
//! after the greeting and haggles inside it. One rustls session then serves
//! both directions: a sender encrypts under the session lock and writes the
//! records itself (under the writer lock, so records go out in order); the
//! reader thread reads the socket without any lock and only takes the
//! session's lock to decrypt what arrived.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use svs_stream::Sender;

use rustls::pki_types::ServerName;
use rustls::ClientConnection;

use crate::protocol::*;

/// Largest option reply the client accepts (they are small: infos, names).
const MAX_OPTION_REPLY: u32 = 64 * 1024;
/// Largest read or write sent in one request when the server gives no
/// maximum block size (the protocol's safe default is 32 MiB).
const DEFAULT_MAX_PAYLOAD: u32 = 32 * 1024 * 1024;

/// What `NBD_OPT_GO` told about the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportInfo {
    /// Size in bytes at the time of the handshake.
    pub size: u64,
    /// Transmission flags (`FLAG_*`).
    pub flags: u16,
    /// Largest payload of one request (from `NBD_INFO_BLOCK_SIZE`).
    pub max_payload: u32,
}

impl ExportInfo {
    pub fn read_only(&self) -> bool {
        self.flags & FLAG_READ_ONLY != 0
    }
}

/// The state of one request in flight.
enum Slot {
    /// Waiting for its reply; a read expects this many bytes of data.
    Waiting { read_len: u32 },
    /// Replied: the read data (empty for other commands) or the NBD error.
    Done(Result<Vec<u8>, u32>),
}

struct Pending {
    next_handle: u64,
    slots: HashMap<u64, Slot>,
    /// Set once the connection is unusable: why.
    broken: Option<String>,
}

struct Shared {
    pending: Mutex<Pending>,
    replied: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // A panic while holding the lock leaves the map consistent (every
        // update is a single insert or remove), so poisoning is ignored.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn break_with(&self, why: String) {
        let mut p = self.lock();
        if p.broken.is_none() {
            p.broken = Some(why);
        }
        drop(p);
        self.replied.notify_all();
    }
}

/// TLS for the client: the configuration (roots to trust) and the name
/// the server's certificate must be valid for.
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

/// The same server name and the very same configuration.
impl PartialEq for ClientTls {
    fn eq(&self, other: &ClientTls) -> bool {
        self.server_name == other.server_name && Arc::ptr_eq(&self.config, &other.config)
    }
}

impl Eq for ClientTls {}

impl ClientTls {
    /// `server_name`: a DNS name or an IP address (usually the host part
    /// of the server's address).
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

    /// The same configuration, checking another server name (a server that
    /// moved to another address, whose certificate names that address).
    pub fn with_server_name(&self, server_name: &str) -> io::Result<ClientTls> {
        ClientTls::new(Arc::clone(&self.config), server_name)
    }
}

/// A connection to one export of an NBD server.
pub struct NbdClient {
    info: ExportInfo,
    writer: Mutex<Sender>,
    /// Another handle on the socket, to shut it down without the writer lock
    /// (a send may hold that lock, blocked on a hung server).
    socket: TcpStream,
    shared: Arc<Shared>,
    reader: Option<JoinHandle<()>>,
    /// A request without a reply within this time breaks the connection.
    request_timeout: Option<Duration>,
}

fn broken(why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        format!("NBD connection lost: {why}"),
    )
}

fn protocol_error(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

impl NbdClient {
    /// Connects to `addr` and opens the export `name` with `NBD_OPT_GO`.
    pub fn connect(addr: impl ToSocketAddrs, name: &str) -> io::Result<NbdClient> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        Self::open(stream, name)
    }

    /// Like [`NbdClient::connect`], but gives up when connecting or the
    /// handshake takes longer than `timeout` (`TimedOut`). Requests have no
    /// time limit unless one is set with [`NbdClient::with_request_timeout`]:
    /// a slow volume is not a dead one.
    pub fn connect_timeout(
        addr: &SocketAddr,
        name: &str,
        timeout: Duration,
    ) -> io::Result<NbdClient> {
        Self::connect_timeout_tls(addr, name, timeout, None)
    }

    /// [`NbdClient::connect_timeout`], over TLS when `tls` is given.
    pub fn connect_timeout_tls(
        addr: &SocketAddr,
        name: &str,
        timeout: Duration,
        tls: Option<&ClientTls>,
    ) -> io::Result<NbdClient> {
        let stream = TcpStream::connect_timeout(addr, timeout)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        Self::open_tls(stream, name, tls)
    }

    /// Connects and runs the handshake (within `timeout`), then hands the
    /// stream back, ready for transmission, with what the server told: for
    /// a consumer that speaks transmission itself (the kernel's NBD driver,
    /// which takes the socket over).
    pub fn negotiate(
        addr: &SocketAddr,
        name: &str,
        timeout: Duration,
    ) -> io::Result<(TcpStream, ExportInfo)> {
        let mut stream = TcpStream::connect_timeout(addr, timeout)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        let (info, _) = handshake(&mut stream, name, None).map_err(handshake_error)?;
        stream.set_read_timeout(None)?;
        stream.set_write_timeout(None)?;
        Ok((stream, info))
    }

    /// Runs the handshake on a connected stream (within its read and write
    /// timeouts, if any), then clears the timeouts and starts the reader.
    pub fn open(stream: TcpStream, name: &str) -> io::Result<NbdClient> {
        Self::open_tls(stream, name, None)
    }

    /// [`NbdClient::open`], over TLS when `tls` is given.
    pub fn open_tls(
        mut stream: TcpStream,
        name: &str,
        tls: Option<&ClientTls>,
    ) -> io::Result<NbdClient> {
        let (info, session) = handshake(&mut stream, name, tls).map_err(handshake_error)?;
        stream.set_read_timeout(None)?;
        stream.set_write_timeout(None)?;
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending {
                next_handle: 1,
                slots: HashMap::new(),
                broken: None,
            }),
            replied: Condvar::new(),
        });
        let socket = stream.try_clone()?;
        let reader_shared = Arc::clone(&shared);
        let (sender, receiver) = svs_stream::split(stream, session.map(Into::into))?;
        let reader = std::thread::Builder::new()
            .name("nbd-client-reader".into())
            .spawn(move || read_replies(receiver, &reader_shared))?;
        Ok(NbdClient {
            info,
            writer: Mutex::new(sender),
            socket,
            shared,
            reader: Some(reader),
            request_timeout: None,
        })
    }

    /// Sets the time limit of every request (`None`: no limit, the
    /// default). A request not sent, or not answered, within it fails with
    /// `TimedOut` and breaks the connection (see the module comment).
    pub fn with_request_timeout(mut self, timeout: Option<Duration>) -> io::Result<NbdClient> {
        // A zero timeout is refused by the socket; it means "no time at all".
        let timeout = timeout.map(|t| t.max(Duration::from_millis(1)));
        self.writer
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .socket()
            .set_write_timeout(timeout)?;
        self.request_timeout = timeout;
        Ok(self)
    }

    /// Breaks the connection on purpose (its server moved): requests
    /// waiting on it fail as on a lost connection, [`is_broken`](Self::is_broken)
    /// is true, and the server sees the connection close.
    pub fn abandon(&self, why: &str) {
        self.break_connection(why.to_string());
    }

    /// Whether the connection is unusable (lost, timed out, or broken by a
    /// protocol error): every request on it fails from now on.
    pub fn is_broken(&self) -> bool {
        self.shared.lock().broken.is_some()
    }

    pub fn info(&self) -> ExportInfo {
        self.info
    }

    pub fn size(&self) -> u64 {
        self.info.size
    }

    pub fn read_only(&self) -> bool {
        self.info.read_only()
    }

    /// Fills `buf` from `offset` (split into requests of at most the
    /// server's maximum payload, all in flight at once).
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(offset, buf.len() as u64)?;
        let max = self.info.max_payload as usize;
        let deadline = self.deadline();
        let mut handles = Vec::new();
        let mut at = 0usize;
        while at < buf.len() {
            let n = (buf.len() - at).min(max);
            let h = self.send(CMD_READ, 0, offset + at as u64, n as u32, &[])?;
            handles.push((h, at, n));
            at += n;
        }
        let mut first_err = None;
        for (h, at, n) in handles {
            // Wait for every part even after a failure: no reply is left
            // behind in the map.
            match self.wait(h, deadline) {
                Ok(data) if data.len() == n => buf[at..at + n].copy_from_slice(&data),
                Ok(_) => first_err = first_err.or(Some(protocol_error("short read reply"))),
                Err(e) => first_err = first_err.or(Some(e)),
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Writes `data` at `offset`; with `fua`, the server makes it durable
    /// before replying.
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        self.check_writable()?;
        check_range(offset, data.len() as u64)?;
        let flags = self.fua_flag(fua);
        let max = self.info.max_payload as usize;
        let deadline = self.deadline();
        let handles: Vec<u64> = data
            .chunks(max.max(1))
            .scan(offset, |at, chunk| {
                let o = *at;
                *at += chunk.len() as u64;
                Some((o, chunk))
            })
            .map(|(o, chunk)| self.send(CMD_WRITE, flags, o, chunk.len() as u32, chunk))
            .collect::<io::Result<_>>()?;
        self.wait_all(handles, deadline)
    }

    /// Makes every completed write durable.
    pub fn flush(&self) -> io::Result<()> {
        if self.info.flags & FLAG_SEND_FLUSH == 0 {
            // The server has no write cache to flush.
            return Ok(());
        }
        let deadline = self.deadline();
        let h = self.send(CMD_FLUSH, 0, 0, 0, &[])?;
        self.wait(h, deadline).map(drop)
    }

    /// Tells the server these bytes are no longer needed.
    pub fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check_writable()?;
        if self.info.flags & FLAG_SEND_TRIM == 0 {
            // Trim is advisory: without server support it is a no-op.
            return Ok(());
        }
        self.ranged(CMD_TRIM, 0, offset, len)
    }

    /// Makes the range read back as zeroes.
    pub fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        self.check_writable()?;
        check_range(offset, len)?;
        if self.info.flags & FLAG_SEND_WRITE_ZEROES == 0 {
            let zeroes = vec![0u8; (len.min(1 << 20)) as usize];
            let mut at = offset;
            while at < offset + len {
                let n = (offset + len - at).min(zeroes.len() as u64) as usize;
                self.write(at, &zeroes[..n], fua)?;
                at += n as u64;
            }
            return Ok(());
        }
        self.ranged(CMD_WRITE_ZEROES, self.fua_flag(fua), offset, len)
    }

    /// Sends `NBD_CMD_DISC` after the requests in flight are answered, and
    /// closes the connection. Dropping the client does the same.
    pub fn disconnect(mut self) -> io::Result<()> {
        self.close()
    }

    fn close(&mut self) -> io::Result<()> {
        let Some(reader) = self.reader.take() else {
            return Ok(());
        };
        let sent = self.send_disc();
        let stream = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        // The server closes after DISC; shutting down our side as well ends
        // the reader even if it does not.
        let _ = stream.socket().shutdown(Shutdown::Both);
        drop(stream);
        let _ = reader.join();
        sent
    }

    fn send_disc(&self) -> io::Result<()> {
        // Requests in flight are answered first: the protocol lets the
        // server drop them after DISC.
        {
            let mut p = self.shared.lock();
            while !p.slots.is_empty() && p.broken.is_none() {
                p = self
                    .shared
                    .replied
                    .wait(p)
                    .unwrap_or_else(|e| e.into_inner());
            }
            if let Some(why) = &p.broken {
                return Err(broken(why));
            }
        }
        let header = request_header(0, CMD_DISC, 0, 0, 0);
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        w.write_all(&header)
    }

    fn check_writable(&self) -> io::Result<()> {
        if self.read_only() {
            return Err(io::Error::from_raw_os_error(libc_errno(EPERM)));
        }
        Ok(())
    }

    fn fua_flag(&self, fua: bool) -> u16 {
        if fua && self.info.flags & FLAG_SEND_FUA != 0 {
            CMD_FLAG_FUA
        } else {
            0
        }
    }

    /// Trim / write zeroes over a 64-bit length: split at the 32-bit field.
    fn ranged(&self, command: u16, flags: u16, offset: u64, len: u64) -> io::Result<()> {
        check_range(offset, len)?;
        const STEP: u64 = 1 << 30;
        let deadline = self.deadline();
        let mut handles = Vec::new();
        let mut at = offset;
        while at < offset + len {
            let n = (offset + len - at).min(STEP);
            handles.push(self.send(command, flags, at, n as u32, &[])?);
            at += n;
        }
        self.wait_all(handles, deadline)
    }

    /// When the replies to requests sent from now on are due.
    fn deadline(&self) -> Option<Instant> {
        self.request_timeout.map(|t| Instant::now() + t)
    }

    fn wait_all(&self, handles: Vec<u64>, deadline: Option<Instant>) -> io::Result<()> {
        let mut first_err = None;
        for h in handles {
            if let Err(e) = self.wait(h, deadline) {
                first_err = first_err.or(Some(e));
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Registers a handle and sends the request; returns the handle.
    fn send(
        &self,
        command: u16,
        flags: u16,
        offset: u64,
        length: u32,
        payload: &[u8],
    ) -> io::Result<u64> {
        let handle = {
            let mut p = self.shared.lock();
            if let Some(why) = &p.broken {
                return Err(broken(why));
            }
            let h = p.next_handle;
            p.next_handle += 1;
            let read_len = if command == CMD_READ { length } else { 0 };
            p.slots.insert(h, Slot::Waiting { read_len });
            h
        };
        let header = request_header(flags, command, handle, offset, length);
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let sent = w.write_all(&header).and_then(|()| w.write_all(payload));
        drop(w);
        if let Err(e) = sent {
            // A half-written request leaves the stream unusable.
            self.shared.lock().slots.remove(&handle);
            let e = match e.kind() {
                // A write timeout shows as WouldBlock on Linux.
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => io::Error::new(
                    io::ErrorKind::TimedOut,
                    "NBD request could not be sent within the request timeout",
                ),
                _ => e,
            };
            self.break_connection(format!("send failed: {e}"));
            return Err(e);
        }
        Ok(handle)
    }

    /// Marks the connection broken and shuts the socket down: the reader
    /// ends, and the server sees the connection go.
    fn break_connection(&self, why: String) {
        self.shared.break_with(why);
        let _ = self.socket.shutdown(Shutdown::Both);
    }

    /// Waits for the reply to `handle`, until `deadline` if any.
    fn wait(&self, handle: u64, deadline: Option<Instant>) -> io::Result<Vec<u8>> {
        let mut p = self.shared.lock();
        loop {
            if let Some(Slot::Done(_)) = p.slots.get(&handle) {
                let Some(Slot::Done(result)) = p.slots.remove(&handle) else {
                    unreachable!("checked just above")
                };
                drop(p);
                // Someone may be waiting for the map to empty (disconnect).
                self.shared.replied.notify_all();
                return result.map_err(|errno| io::Error::from_raw_os_error(libc_errno(errno)));
            }
            if let Some(why) = &p.broken {
                let err = broken(why);
                p.slots.remove(&handle);
                return Err(err);
            }
            let Some(deadline) = deadline else {
                p = self
                    .shared
                    .replied
                    .wait(p)
                    .unwrap_or_else(|e| e.into_inner());
                continue;
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                p.slots.remove(&handle);
                drop(p);
                self.break_connection("a request got no reply within the request timeout".into());
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "NBD request got no reply within the request timeout",
                ));
            }
            p = self
                .shared
                .replied
                .wait_timeout(p, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Drop for NbdClient {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// A read timeout during the handshake shows as `WouldBlock` on Linux.
fn handshake_error(e: io::Error) -> io::Error {
    match e.kind() {
        io::ErrorKind::WouldBlock => {
            io::Error::new(io::ErrorKind::TimedOut, "NBD handshake timed out")
        }
        _ => e,
    }
}

/// A range whose end overflows is refused before anything is sent (the
/// server checks the end against the export's size).
fn check_range(offset: u64, len: u64) -> io::Result<()> {
    match offset.checked_add(len) {
        Some(_) => Ok(()),
        None => Err(io::Error::from_raw_os_error(EINVAL as i32)),
    }
}

/// The NBD error values are Linux errno values; anything odd becomes EIO.
fn libc_errno(value: u32) -> i32 {
    match value {
        EPERM | EIO | ENOMEM | EINVAL | ENOSPC | EOVERFLOW | ENOTSUP | ESHUTDOWN => value as i32,
        _ => EIO as i32,
    }
}

fn request_header(flags: u16, command: u16, handle: u64, offset: u64, length: u32) -> [u8; 28] {
    let mut b = [0u8; REQUEST_LEN];
    b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&flags.to_be_bytes());
    b[6..8].copy_from_slice(&command.to_be_bytes());
    b[8..16].copy_from_slice(&handle.to_be_bytes());
    b[16..24].copy_from_slice(&offset.to_be_bytes());
    b[24..28].copy_from_slice(&length.to_be_bytes());
    b
}

/// The reader thread: takes replies off the socket until it closes.
fn read_replies<R: Read>(mut stream: R, shared: &Shared) {
    let why = loop {
        let mut header = [0u8; SIMPLE_REPLY_LEN];
        if let Err(e) = stream.read_exact(&mut header) {
            break format!("reading a reply: {e}");
        }
        let magic = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
        if magic != SIMPLE_REPLY_MAGIC {
            break format!("bad reply magic {magic:#010x}");
        }
        let error = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
        let mut h = [0u8; 8];
        h.copy_from_slice(&header[8..16]);
        let handle = u64::from_be_bytes(h);
        let read_len = match shared.lock().slots.get(&handle) {
            Some(Slot::Waiting { read_len }) => *read_len,
            _ => break format!("reply to unknown handle {handle}"),
        };
        let result = if error != 0 {
            Err(error)
        } else {
            let mut data = vec![0u8; read_len as usize];
            if let Err(e) = stream.read_exact(&mut data) {
                break format!("reading read data: {e}");
            }
            Ok(data)
        };
        shared.lock().slots.insert(handle, Slot::Done(result));
        shared.replied.notify_all();
    };
    shared.break_with(why);
}

/// Fixed newstyle handshake with `NBD_OPT_GO` for `name`; with `tls`,
/// `NBD_OPT_STARTTLS` first, and the session that then carries the rest.
fn handshake(
    s: &mut TcpStream,
    name: &str,
    tls: Option<&ClientTls>,
) -> io::Result<(ExportInfo, Option<ClientConnection>)> {
    let mut greeting = [0u8; GREETING_LEN];
    s.read_exact(&mut greeting)?;
    let mut m = [0u8; 8];
    m.copy_from_slice(&greeting[0..8]);
    if u64::from_be_bytes(m) != NBDMAGIC {
        return Err(protocol_error("not an NBD server (bad magic)"));
    }
    m.copy_from_slice(&greeting[8..16]);
    if u64::from_be_bytes(m) != IHAVEOPT {
        return Err(protocol_error("server does not speak newstyle NBD"));
    }
    let server_flags = u16::from_be_bytes([greeting[16], greeting[17]]);
    if server_flags & FLAG_FIXED_NEWSTYLE == 0 {
        return Err(protocol_error("server does not speak fixed newstyle NBD"));
    }
    let mut client_flags = FLAG_C_FIXED_NEWSTYLE;
    if server_flags & FLAG_NO_ZEROES != 0 {
        client_flags |= FLAG_C_NO_ZEROES;
    }
    if name.len() > MAX_STRING {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "export name over 4096 bytes",
        ));
    }
    let Some(tls) = tls else {
        let mut msg = client_flags.to_be_bytes().to_vec();
        msg.extend_from_slice(&go_request(name));
        s.write_all(&msg)?;
        return Ok((go_replies(s, name)?, None));
    };
    let mut msg = client_flags.to_be_bytes().to_vec();
    msg.extend_from_slice(&IHAVEOPT.to_be_bytes());
    msg.extend_from_slice(&OPT_STARTTLS.to_be_bytes());
    msg.extend_from_slice(&0u32.to_be_bytes());
    s.write_all(&msg)?;
    let (reply_type, body) = option_reply(s, OPT_STARTTLS)?;
    if reply_type != REP_ACK {
        let msg = String::from_utf8_lossy(&body).into_owned();
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("the NBD server does not start TLS ({reply_type:#x}): {msg}"),
        ));
    }
    let mut session = ClientConnection::new(Arc::clone(&tls.config), tls.server_name.clone())
        .map_err(|e| io::Error::other(format!("TLS: {e}")))?;
    while session.is_handshaking() {
        session
            .complete_io(s)
            .map_err(|e| io::Error::new(e.kind(), format!("NBD TLS handshake: {e}")))?;
    }
    let info = {
        let mut stream = rustls::Stream::new(&mut session, s);
        stream.write_all(&go_request(name))?;
        go_replies(&mut stream, name)?
    };
    Ok((info, Some(session)))
}

/// One option reply to `option`: its type and data.
fn option_reply<S: Read>(s: &mut S, option: u32) -> io::Result<(u32, Vec<u8>)> {
    let mut header = [0u8; 20];
    s.read_exact(&mut header)?;
    let mut m = [0u8; 8];
    m.copy_from_slice(&header[0..8]);
    if u64::from_be_bytes(m) != OPTION_REPLY_MAGIC {
        return Err(protocol_error("bad option reply magic"));
    }
    let replied = u32::from_be_bytes([header[8], header[9], header[10], header[11]]);
    let reply_type = u32::from_be_bytes([header[12], header[13], header[14], header[15]]);
    let len = u32::from_be_bytes([header[16], header[17], header[18], header[19]]);
    if replied != option {
        return Err(protocol_error(format!(
            "reply to option {replied}, not {option}"
        )));
    }
    if len > MAX_OPTION_REPLY {
        return Err(protocol_error(format!("option reply of {len} bytes")));
    }
    let mut body = vec![0u8; len as usize];
    s.read_exact(&mut body)?;
    Ok((reply_type, body))
}

/// `NBD_OPT_GO` for `name`, asking for the block size.
fn go_request(name: &str) -> Vec<u8> {
    let mut data = Vec::with_capacity(4 + name.len() + 4);
    data.extend_from_slice(&(name.len() as u32).to_be_bytes());
    data.extend_from_slice(name.as_bytes());
    data.extend_from_slice(&1u16.to_be_bytes());
    data.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    let mut msg = Vec::with_capacity(OPTION_HEADER_LEN + data.len());
    msg.extend_from_slice(&IHAVEOPT.to_be_bytes());
    msg.extend_from_slice(&OPT_GO.to_be_bytes());
    msg.extend_from_slice(&(data.len() as u32).to_be_bytes());
    msg.extend_from_slice(&data);
    msg
}

/// The replies to `NBD_OPT_GO`, up to its ACK.
fn go_replies<S: Read>(s: &mut S, name: &str) -> io::Result<ExportInfo> {
    let mut export: Option<(u64, u16)> = None;
    let mut max_payload = DEFAULT_MAX_PAYLOAD;
    loop {
        let (reply_type, body) = option_reply(s, OPT_GO)?;
        match reply_type {
            REP_ACK => break,
            REP_INFO => parse_info(&body, &mut export, &mut max_payload)?,
            REP_ERR_UNKNOWN => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("no NBD export {name:?}"),
                ))
            }
            REP_ERR_POLICY => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("NBD export {name:?} refused by policy"),
                ))
            }
            REP_ERR_TLS_REQD => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "the NBD server requires TLS (NBD_REP_ERR_TLS_REQD)",
                ))
            }
            t if t & (1 << 31) != 0 => {
                let msg = String::from_utf8_lossy(&body).into_owned();
                return Err(io::Error::other(format!(
                    "NBD_OPT_GO refused ({t:#x}): {msg}"
                )));
            }
            // Unknown non-error replies may be ignored (the protocol says so).
            _ => {}
        }
    }
    let (size, flags) =
        export.ok_or_else(|| protocol_error("NBD_OPT_GO acked without NBD_INFO_EXPORT"))?;
    Ok(ExportInfo {
        size,
        flags,
        max_payload: max_payload.max(1),
    })
}

fn parse_info(
    body: &[u8],
    export: &mut Option<(u64, u16)>,
    max_payload: &mut u32,
) -> io::Result<()> {
    if body.len() < 2 {
        return Err(protocol_error("NBD_REP_INFO shorter than its type"));
    }
    match u16::from_be_bytes([body[0], body[1]]) {
        INFO_EXPORT => {
            if body.len() != 12 {
                return Err(protocol_error("NBD_INFO_EXPORT of the wrong length"));
            }
            let mut sz = [0u8; 8];
            sz.copy_from_slice(&body[2..10]);
            *export = Some((
                u64::from_be_bytes(sz),
                u16::from_be_bytes([body[10], body[11]]),
            ));
        }
        INFO_BLOCK_SIZE => {
            if body.len() != 14 {
                return Err(protocol_error("NBD_INFO_BLOCK_SIZE of the wrong length"));
            }
            *max_payload = u32::from_be_bytes([body[10], body[11], body[12], body[13]]);
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_header_is_magic_flags_command_handle_offset_length() {
        let h = request_header(CMD_FLAG_FUA, CMD_WRITE, 7, 1 << 33, 4096);
        let parsed = parse_request(&h).unwrap();
        assert_eq!(
            parsed,
            Request {
                flags: CMD_FLAG_FUA,
                command: CMD_WRITE,
                handle: 7,
                offset: 1 << 33,
                length: 4096
            }
        );
    }

    #[test]
    fn ranges_whose_end_overflows_are_refused() {
        assert!(check_range(u64::MAX - 4096, 4096).is_ok());
        let err = check_range(u64::MAX - 4095, 4097).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(22));
    }

    #[test]
    fn nbd_errors_map_to_the_same_errno_and_odd_ones_to_eio() {
        assert_eq!(libc_errno(EPERM), 1);
        assert_eq!(libc_errno(ENOSPC), 28);
        assert_eq!(libc_errno(EIO), 5);
        assert_eq!(libc_errno(12345), 5);
    }

    #[test]
    fn info_replies_set_size_flags_and_max_payload() {
        let mut export = None;
        let mut max = DEFAULT_MAX_PAYLOAD;
        parse_info(&info_export(1 << 30, 0x1ed), &mut export, &mut max).unwrap();
        parse_info(&info_block_size(1, 4096, 1 << 20), &mut export, &mut max).unwrap();
        assert_eq!(export, Some((1 << 30, 0x1ed)));
        assert_eq!(max, 1 << 20);
        assert!(parse_info(&[0, 0, 1], &mut export, &mut max).is_err());
    }
}
