//! The transmission phase: requests are read one after the other, checked,
//! and run concurrently on the blocking pool; simple replies go out through a
//! single writer task in completion order.

use std::future::Future;
use std::io::{self, IoSlice};
use std::sync::Arc;
use std::time::Duration;

use svs_buffers::BufferPool;
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn, Instrument};

use crate::protocol::{self, ProtocolError, Request};
use crate::BlockDevice;

/// Requests of one connection being served at once; the next request is not
/// read until one of them has been answered.
pub const MAX_IN_FLIGHT: usize = 32;
/// Payload bytes (READ and WRITE lengths) of one connection's requests in
/// flight at once; raised to `max_payload` if that is larger, so one request
/// of the largest size always fits.
pub const IN_FLIGHT_BYTES: u32 = 64 * 1024 * 1024;
/// The largest write the server offers the device to start without
/// waiting ([`BlockDevice::start_write`]): small writes, whose sends fit a
/// socket's buffers even towards a node that stopped reading, so the
/// async worker that sends them never waits on the network. Larger ones
/// run on a blocking thread.
const STARTED_WRITE_MAX: usize = 64 * 1024;
/// Zero buffer used for `WRITE_ZEROES` with `NO_HOLE`.
const ZERO_CHUNK: usize = 256 * 1024;
/// Payload buffers one connection keeps for its next requests (see
/// [`BufferPool`]): at most this many bytes of capacity, and this many buffers.
/// Enough for a client keeping `MAX_IN_FLIGHT` 256 KiB requests in flight
/// (`nbdcopy`'s default size): below that, each request past the pool got
/// a fresh buffer, zeroed by the allocator. These bytes were in use at the
/// connection's busiest; the pool only keeps them for its next requests.
const POOLED_BYTES: usize = 8 * 1024 * 1024;
const POOLED_BUFFERS: usize = MAX_IN_FLIGHT;
/// How long a soft disconnect or a server shutdown waits for the requests in
/// flight to be answered before closing anyway.
const DRAIN_GRACE: Duration = Duration::from_secs(10);

/// How a transmission phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// `NBD_CMD_DISC`: replies to the requests in flight were sent first.
    Disconnect,
    /// The client closed the connection (possibly mid-request).
    PeerGone,
    /// The export's `closed` token was cancelled.
    ExportClosed,
    /// The server is shutting down.
    Shutdown,
    /// A reply could not be written: the client is gone.
    WriteFailed,
}

/// A protocol violation that closes the connection.
#[derive(Debug, Error)]
pub(crate) enum TransmissionError {
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    #[error("write of {length} bytes is over max_payload ({max_payload})")]
    WriteTooLarge { length: u32, max_payload: u32 },
}

/// Reads of at least this many bytes look up holes first when structured
/// replies are negotiated, and answer them with hole chunks. Smaller reads
/// are sent as data: a hole chunk would save little there, and the lookup
/// is one more system call per request.
pub(crate) const HOLE_LOOKUP_MIN: u32 = 64 * 1024;

/// A checked request, ready for the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Read {
        offset: u64,
        len: u32,
        /// Look up holes and send them as hole chunks (structured replies).
        sparse: bool,
    },
    Write {
        offset: u64,
        fua: bool,
    },
    Flush,
    Trim {
        offset: u64,
        len: u32,
        fua: bool,
    },
    WriteZeroes {
        offset: u64,
        len: u32,
        fua: bool,
        no_hole: bool,
    },
    Cache {
        offset: u64,
        len: u32,
    },
    BlockStatus {
        offset: u64,
        len: u32,
        req_one: bool,
    },
    /// A zero-length read, write, trim, cache or write zeroes: succeeds
    /// untouched.
    Nothing,
}

/// What requests are checked against: the export and what the client
/// negotiated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub size: u64,
    pub read_only: bool,
    pub max_payload: u32,
    /// Structured replies were negotiated.
    pub structured: bool,
    /// `base:allocation` was selected: block status may be asked.
    pub allocation: bool,
    /// The device's write zeroes are fast (see `BlockDevice::fast_zeroes`).
    pub fast_zeroes: bool,
}

/// Checks a request (other than `DISC`) against the export: the `Op` to run,
/// or the NBD error value to answer.
pub(crate) fn check(req: &Request, limits: &Limits) -> Result<Op, u32> {
    use protocol::*;
    let allowed = match req.command {
        CMD_READ if limits.structured => CMD_FLAG_FUA | CMD_FLAG_DF,
        CMD_READ | CMD_WRITE | CMD_FLUSH | CMD_TRIM => CMD_FLAG_FUA,
        CMD_WRITE_ZEROES => CMD_FLAG_FUA | CMD_FLAG_NO_HOLE | CMD_FLAG_FAST_ZERO,
        CMD_CACHE => 0,
        // Only with a selected context (which needs structured replies).
        CMD_BLOCK_STATUS if limits.allocation => CMD_FLAG_REQ_ONE,
        // Unknown, and block status without a context.
        _ => return Err(EINVAL),
    };
    // Unknown flags, or flags not applicable to the command (DF without
    // structured replies, REQ_ONE on a read, ...).
    if req.flags & !allowed != 0 {
        return Err(EINVAL);
    }
    let fua = req.flags & CMD_FLAG_FUA != 0;
    let (offset, len) = (req.offset, req.length);
    let in_range = range_ok(offset, len, limits.size);
    let writable = || if limits.read_only { Err(EPERM) } else { Ok(()) };
    let unless_empty = |op: Op| if len == 0 { Op::Nothing } else { op };
    match req.command {
        CMD_READ => {
            if len > limits.max_payload || !in_range {
                return Err(EINVAL);
            }
            // Don't fragment: one data chunk, so no hole lookup.
            let whole = req.flags & CMD_FLAG_DF != 0;
            let sparse = limits.structured && !whole && len >= HOLE_LOOKUP_MIN;
            Ok(unless_empty(Op::Read {
                offset,
                len,
                sparse,
            }))
        }
        CMD_WRITE => {
            writable()?;
            if len > limits.max_payload {
                return Err(EINVAL);
            }
            if !in_range {
                return Err(ENOSPC);
            }
            Ok(unless_empty(Op::Write { offset, fua }))
        }
        CMD_FLUSH => Ok(Op::Flush),
        CMD_TRIM => {
            writable()?;
            if !in_range {
                return Err(EINVAL);
            }
            Ok(unless_empty(Op::Trim { offset, len, fua }))
        }
        CMD_WRITE_ZEROES => {
            writable()?;
            if !in_range {
                return Err(ENOSPC);
            }
            let no_hole = req.flags & CMD_FLAG_NO_HOLE != 0;
            // Zeroes written as buffers are no faster than a write: a fast
            // zero request is refused at once, before anything changes.
            if req.flags & CMD_FLAG_FAST_ZERO != 0 && (no_hole || !limits.fast_zeroes) {
                return Err(ENOTSUP);
            }
            Ok(unless_empty(Op::WriteZeroes {
                offset,
                len,
                fua,
                no_hole,
            }))
        }
        CMD_CACHE => {
            if !in_range {
                return Err(EINVAL);
            }
            Ok(unless_empty(Op::Cache { offset, len }))
        }
        CMD_BLOCK_STATUS => {
            // A successful reply needs at least one non-empty extent.
            if !in_range || len == 0 {
                return Err(EINVAL);
            }
            Ok(Op::BlockStatus {
                offset,
                len,
                req_one: req.flags & CMD_FLAG_REQ_ONE != 0,
            })
        }
        _ => Err(EINVAL),
    }
}

/// A run of a read's buffer: data to send, or a hole (zeroes, not sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece {
    /// Offset in the buffer.
    pub start: usize,
    pub len: usize,
    pub hole: bool,
}

/// The answer to a request, as the writer sends it.
#[derive(Debug)]
pub(crate) enum Body {
    /// Success, nothing to send but the reply.
    Done,
    /// The NBD error value, and where it happened (reads) when known.
    Failed { error: u32, offset: Option<u64> },
    /// A read's bytes at `offset`: `pieces` cover `buf` in order (none:
    /// all of it is data, the common case, which allocates nothing more).
    Data {
        offset: u64,
        buf: Vec<u8>,
        pieces: Vec<Piece>,
    },
    /// `base:allocation` descriptors of a block status request.
    Status(Vec<protocol::Descriptor>),
}

/// A device call that failed, and where (reads), when known.
pub(crate) struct Failure {
    pub error: io::Error,
    pub offset: Option<u64>,
}

impl From<io::Error> for Failure {
    fn from(error: io::Error) -> Failure {
        Failure {
            error,
            offset: None,
        }
    }
}

/// The pieces of a read of `len` bytes at `offset`: the device's extents,
/// merged, clamped to the read. If the device cannot tell (an error, or an
/// answer that makes no progress), the rest is data: the read then finds out.
pub(crate) fn read_pieces(device: &dyn BlockDevice, offset: u64, len: usize) -> Vec<Piece> {
    let mut pieces: Vec<Piece> = Vec::new();
    let mut push = |start: usize, n: usize, hole: bool| match pieces.last_mut() {
        Some(last) if last.hole == hole => last.len += n,
        _ => pieces.push(Piece {
            start,
            len: n,
            hole,
        }),
    };
    let mut at = 0usize;
    while at < len {
        let before = at;
        let left = (len - at) as u64;
        if let Ok(extents) = device.extents(offset + at as u64, left) {
            for e in extents {
                let n = e.len.min((len - at) as u64) as usize;
                if n == 0 {
                    break;
                }
                push(at, n, e.hole);
                at += n;
            }
        }
        if at == before {
            push(at, len - at, false);
            at = len;
        }
    }
    pieces
}

/// A read's reply body: its holes looked up when `sparse`, its data pieces
/// read into a buffer of `buffers` with `read(offset, buf)`. `None` as soon
/// as `read` answers false (not read: see [`BlockDevice::read_cached`]).
fn read_request(
    offset: u64,
    len: u32,
    sparse: bool,
    device: &dyn BlockDevice,
    buffers: &BufferPool,
    mut read: impl FnMut(u64, &mut [u8]) -> io::Result<bool>,
) -> Option<Result<Body, Failure>> {
    let len = len as usize;
    let mut pieces = if sparse {
        read_pieces(device, offset, len)
    } else {
        Vec::new()
    };
    if let [only] = pieces.as_slice() {
        if !only.hole {
            pieces.clear();
        }
    }
    // A reused buffer: the bytes of holes are stale, but holes are sent as
    // hole chunks, never as data.
    let mut buf = buffers.take(len);
    let whole = [Piece {
        start: 0,
        len,
        hole: false,
    }];
    let data = if pieces.is_empty() {
        &whole[..]
    } else {
        &pieces
    };
    for p in data.iter().filter(|p| !p.hole) {
        let at = offset + p.start as u64;
        match read(at, &mut buf[p.start..p.start + p.len]) {
            Ok(true) => {}
            Ok(false) => {
                buffers.give(buf);
                return None;
            }
            Err(error) => {
                buffers.give(buf);
                return Some(Err(Failure {
                    error,
                    offset: Some(at),
                }));
            }
        }
    }
    Some(Ok(Body::Data {
        offset,
        buf,
        pieces,
    }))
}

/// Runs a checked request on the device (blocking). `payload` is the data of
/// a write, empty otherwise (given back to `buffers` once written). A read's
/// data is in a buffer of `buffers`.
fn execute(
    op: Op,
    payload: Vec<u8>,
    device: &dyn BlockDevice,
    buffers: &BufferPool,
) -> Result<Body, Failure> {
    match op {
        Op::Read {
            offset,
            len,
            sparse,
        } => read_request(offset, len, sparse, device, buffers, |at, buf| {
            device.read(at, buf).map(|()| true)
        })
        .unwrap_or_else(|| Err(io::Error::other("read not answered").into())),
        Op::Write { offset, fua } => {
            let written = device.write(offset, &payload, fua);
            buffers.give(payload);
            written?;
            Ok(Body::Done)
        }
        Op::Flush => {
            device.flush()?;
            Ok(Body::Done)
        }
        Op::Trim { offset, len, fua } => {
            device.trim(offset, u64::from(len))?;
            // The trait's trim has no FUA: make it durable before replying.
            if fua {
                device.flush()?;
            }
            Ok(Body::Done)
        }
        Op::WriteZeroes {
            offset,
            len,
            fua,
            no_hole: false,
        } => {
            device.write_zeroes(offset, u64::from(len), fua)?;
            Ok(Body::Done)
        }
        Op::WriteZeroes {
            offset,
            len,
            fua,
            no_hole: true,
        } => {
            // The client wants the range allocated, not a hole: write zeroes.
            let zeroes = vec![0u8; ZERO_CHUNK.min(len as usize)];
            let end = offset + u64::from(len);
            let mut at = offset;
            while at < end {
                let n = (end - at).min(zeroes.len() as u64) as usize;
                device.write(at, &zeroes[..n], fua)?;
                at += n as u64;
            }
            Ok(Body::Done)
        }
        Op::Cache { offset, len } => {
            device.cache(offset, u64::from(len))?;
            Ok(Body::Done)
        }
        Op::BlockStatus {
            offset,
            len,
            req_one,
        } => {
            let extents = device
                .extents(offset, u64::from(len))
                .map_err(|error| Failure {
                    error,
                    offset: Some(offset),
                })?;
            let mut descriptors = protocol::allocation_descriptors(&extents, len, req_one);
            if descriptors.is_empty() {
                // The device described nothing: "allocated" is always true.
                descriptors.push(protocol::Descriptor {
                    length: len,
                    status: 0,
                });
            }
            Ok(Body::Status(descriptors))
        }
        Op::Nothing => Ok(Body::Done),
    }
}

/// Holds a request's share of the connection's limits until its reply is
/// written.
struct Permits {
    _count: OwnedSemaphorePermit,
    _bytes: OwnedSemaphorePermit,
}

struct Reply {
    handle: u64,
    /// Answer with structured reply chunks (reads and block status, once
    /// structured replies are negotiated); else a simple reply.
    structured: bool,
    body: Body,
    _permits: Permits,
}

/// Everything the transmission phase of one connection needs.
pub(crate) struct Transmission {
    pub device: Arc<dyn BlockDevice>,
    pub closed: CancellationToken,
    pub shutdown: CancellationToken,
    pub max_payload: u32,
    /// See `NbdConfig::inline_max`.
    pub inline_max: u32,
    /// Structured replies were negotiated.
    pub structured: bool,
    /// `base:allocation` was selected for this export.
    pub allocation: bool,
}

impl Transmission {
    /// Serves requests until the client disconnects, the export is closed,
    /// the server shuts down or the client breaks the protocol.
    pub(crate) async fn run<R, W>(self, mut reader: R, writer: W) -> Result<End, TransmissionError>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let write_failed = CancellationToken::new();
        let (tx, rx) = mpsc::channel::<Reply>(MAX_IN_FLIGHT);
        let budget = Budget {
            count: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            bytes: Arc::new(Semaphore::new(
                IN_FLIGHT_BYTES.max(self.max_payload) as usize
            )),
            buffers: Arc::new(BufferPool::new(POOLED_BUFFERS, POOLED_BYTES)),
        };
        let writer_task = tokio::spawn(
            write_replies(
                writer,
                rx,
                write_failed.clone(),
                Arc::clone(&budget.buffers),
            )
            .instrument(tracing::Span::current()),
        );
        let mut tasks = JoinSet::new();
        // Cancelled when the connection ends without answering what is in
        // flight: device calls not yet started are then skipped. Their client
        // got no reply, and one that reconnects sends them again; running a
        // stale write after its re-sent copy (and a newer write to the same
        // bytes) could bring old data back.
        let abandoned = CancellationToken::new();

        let outcome = self
            .serve_requests(
                &mut reader,
                &tx,
                &budget,
                &write_failed,
                &abandoned,
                &mut tasks,
            )
            .await;

        match outcome {
            Ok(End::Disconnect) | Ok(End::Shutdown) => {
                // Answer what is in flight, then close: the writer ends once
                // every task has sent its reply and dropped its sender.
                drop(tx);
                let mut writer_task = writer_task;
                let drain = async {
                    while tasks.join_next().await.is_some() {}
                    let _ = (&mut writer_task).await;
                };
                let drained = tokio::select! {
                    _ = drain => true,
                    _ = self.closed.cancelled() => false,
                    _ = tokio::time::sleep(DRAIN_GRACE) => false,
                };
                if !drained {
                    abandoned.cancel();
                    tasks.abort_all();
                    writer_task.abort();
                }
            }
            _ => {
                abandoned.cancel();
                tasks.abort_all();
                writer_task.abort();
            }
        }
        outcome
    }

    /// Waits for `fut` unless the connection must stop first.
    async fn guarded<F: Future>(
        &self,
        write_failed: &CancellationToken,
        fut: F,
    ) -> Result<F::Output, End> {
        tokio::select! {
            biased;
            _ = self.closed.cancelled() => Err(End::ExportClosed),
            _ = write_failed.cancelled() => Err(End::WriteFailed),
            _ = self.shutdown.cancelled() => Err(End::Shutdown),
            out = fut => Ok(out),
        }
    }

    async fn serve_requests<R: AsyncRead + Unpin>(
        &self,
        reader: &mut R,
        tx: &mpsc::Sender<Reply>,
        budget: &Budget,
        write_failed: &CancellationToken,
        abandoned: &CancellationToken,
        tasks: &mut JoinSet<()>,
    ) -> Result<End, TransmissionError> {
        macro_rules! guard {
            ($fut:expr) => {
                match self.guarded(write_failed, $fut).await {
                    Ok(out) => out,
                    Err(end) => return Ok(end),
                }
            };
        }
        loop {
            while tasks.try_join_next().is_some() {}

            let mut header = [0u8; protocol::REQUEST_LEN];
            if let Err(e) = guard!(reader.read_exact(&mut header)) {
                debug!(error = %e, "client closed the connection");
                return Ok(End::PeerGone);
            }
            let req = protocol::parse_request(&header)?;
            if req.command == protocol::CMD_DISC {
                debug!("client disconnects");
                return Ok(End::Disconnect);
            }
            if req.command == protocol::CMD_WRITE && req.length > self.max_payload {
                // Its payload is never read: the stream cannot go on.
                return Err(TransmissionError::WriteTooLarge {
                    length: req.length,
                    max_payload: self.max_payload,
                });
            }
            let payload_len = match req.command {
                protocol::CMD_READ | protocol::CMD_WRITE if req.length <= self.max_payload => {
                    req.length
                }
                _ => 0,
            };
            let Some(permits) = guard!(budget.acquire(payload_len)) else {
                return Ok(End::WriteFailed);
            };
            let mut payload = Vec::new();
            if req.command == protocol::CMD_WRITE {
                payload = budget.buffers.take(req.length as usize);
                if let Err(e) = guard!(reader.read_exact(&mut payload)) {
                    debug!(error = %e, handle = req.handle, "client closed the connection in a write's payload");
                    return Ok(End::PeerGone);
                }
            }

            let device = &self.device;
            let limits = Limits {
                size: device.size(),
                read_only: device.read_only(),
                max_payload: self.max_payload,
                structured: self.structured,
                allocation: self.allocation,
                fast_zeroes: device.fast_zeroes(),
            };
            // Reads and block status get structured replies once negotiated
            // (errors included); every other command keeps simple replies.
            let structured = self.structured
                && matches!(req.command, protocol::CMD_READ | protocol::CMD_BLOCK_STATUS);
            let op = match check(&req, &limits) {
                Ok(op) => op,
                Err(error) => {
                    debug!(
                        command = req.command,
                        flags = req.flags,
                        offset = req.offset,
                        length = req.length,
                        error,
                        "request refused"
                    );
                    let reply = Reply {
                        handle: req.handle,
                        structured,
                        body: Body::Failed {
                            error,
                            offset: None,
                        },
                        _permits: permits,
                    };
                    if guard!(tx.send(reply)).is_err() {
                        return Ok(End::WriteFailed);
                    }
                    continue;
                }
            };
            let handle = req.handle;
            // Inline (see `NbdConfig::inline_max`): small reads and writes,
            // and any read or write that is the only request in flight (at
            // queue depth 1 nothing could run beside it, and the hand-off to
            // a blocking thread and back costs as much as a 1 MiB page-cache
            // read). FUA writes and flushes wait for the device: never.
            let alone = budget.count.available_permits() + 1 == MAX_IN_FLIGHT;
            let inline = self.inline_max > 0
                && match op {
                    Op::Read { len, .. } => {
                        device.runs_inline(false) && (alone || len <= self.inline_max)
                    }
                    Op::Write { fua: false, .. } => {
                        device.runs_inline(true)
                            && (alone || payload.len() <= self.inline_max as usize)
                    }
                    _ => false,
                };
            // Answered here: an inline request, or any other read that
            // memory can answer (see `BlockDevice::read_cached`); only one
            // that would wait is handed to a blocking thread, which costs
            // two wake-ups. The memory attempt skips the hole lookup, which
            // may wait (a device may commit first): a hole is rarely in
            // memory, and one that is reads as zeroes.
            let answered_here = if inline {
                let payload = std::mem::take(&mut payload);
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    execute(op, payload, &**device, &budget.buffers)
                }));
                Some(outcome.map_err(|_| "panicked"))
            } else {
                match op {
                    Op::Read { offset, len, .. }
                        if self.inline_max > 0 && device.runs_inline(false) =>
                    {
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            read_request(
                                offset,
                                len,
                                false,
                                &**device,
                                &budget.buffers,
                                |at, buf| device.read_cached(at, buf),
                            )
                        }))
                        .map_err(|_| "panicked")
                        .transpose()
                    }
                    _ => None,
                }
            };
            if let Some(outcome) = answered_here {
                let reply = Reply {
                    handle,
                    structured,
                    body: answer(handle, op, outcome),
                    _permits: permits,
                };
                if guard!(tx.send(reply)).is_err() {
                    return Ok(End::WriteFailed);
                }
                continue;
            }
            // A small plain write the device can start without waiting: its
            // reply is sent by whichever thread ends it (see
            // `BlockDevice::start_write`), no blocking thread in between.
            if let Op::Write { offset, fua: false } = op {
                if self.inline_max > 0 && payload.len() <= STARTED_WRITE_MAX {
                    let reply = LateReply {
                        tx: tx.clone(),
                        handle,
                        op,
                        buffers: Arc::clone(&budget.buffers),
                        permits: Some(permits),
                    };
                    let done: crate::WriteDone =
                        Box::new(move |result, payload| reply.send(result, payload));
                    let payload = std::mem::take(&mut payload);
                    let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        device.start_write(offset, payload, done)
                    }));
                    match started {
                        // Started, or panicked (its reply, EIO, went when
                        // `done` was dropped).
                        Ok(Ok(())) | Err(_) => continue,
                        Ok(Err((refused, done))) => {
                            let device = Arc::clone(device);
                            let closed = self.closed.clone();
                            let abandoned = abandoned.clone();
                            let span = tracing::Span::current();
                            tasks.spawn_blocking(move || {
                                let _entered = span.enter();
                                let result = if closed.is_cancelled() {
                                    Err(io::Error::other("export closed"))
                                } else if abandoned.is_cancelled() {
                                    Err(io::Error::other("connection gone"))
                                } else {
                                    device.write(offset, &refused, false)
                                };
                                done(result, refused);
                            });
                            continue;
                        }
                    }
                }
            }
            let device = Arc::clone(device);
            let buffers = Arc::clone(&budget.buffers);
            let closed = self.closed.clone();
            let abandoned = abandoned.clone();
            let tx = tx.clone();
            let span = tracing::Span::current();
            // The blocking thread hands its reply to the writer itself: one
            // wake-up per request fewer than an async task awaiting it.
            tasks.spawn_blocking(move || {
                let _entered = span.enter();
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    // A request queued behind others when its export went
                    // away, or its connection was abandoned, does not touch
                    // the device any more.
                    if closed.is_cancelled() {
                        return Err(io::Error::other("export closed").into());
                    }
                    if abandoned.is_cancelled() {
                        return Err(io::Error::other("connection gone").into());
                    }
                    execute(op, payload, &*device, &buffers)
                }));
                let body = answer(handle, op, outcome.map_err(|_| "panicked"));
                let _ = tx.blocking_send(Reply {
                    handle,
                    structured,
                    body,
                    _permits: permits,
                });
            });
        }
    }
}

/// The reply of a write another thread ends ([`BlockDevice::start_write`]):
/// sent once, by `send`, or as EIO if it is dropped unsent (the device
/// panicked, or lost the write), so that no request goes unanswered.
struct LateReply {
    tx: mpsc::Sender<Reply>,
    handle: u64,
    op: Op,
    buffers: Arc<BufferPool>,
    /// Taken when the reply is sent.
    permits: Option<Permits>,
}

impl LateReply {
    fn send(mut self, result: io::Result<()>, payload: Vec<u8>) {
        self.buffers.give(payload);
        self.reply(result.map(|()| Body::Done).map_err(Failure::from));
    }

    fn reply(&mut self, outcome: Result<Body, Failure>) {
        let Some(permits) = self.permits.take() else {
            return;
        };
        let reply = Reply {
            handle: self.handle,
            structured: false,
            body: answer(self.handle, self.op, Ok(outcome)),
            _permits: permits,
        };
        // Never full: the channel holds as many replies as the connection
        // has requests in flight (each holds a permit until written).
        // Closed: the connection is gone, nobody waits for the reply.
        let _ = self.tx.try_send(reply);
    }
}

impl Drop for LateReply {
    fn drop(&mut self) {
        self.reply(Err(
            io::Error::other("the write was dropped unanswered").into()
        ));
    }
}

/// The reply body of a device call's outcome (logging failures).
fn answer(handle: u64, op: Op, outcome: Result<Result<Body, Failure>, &'static str>) -> Body {
    match outcome {
        Ok(Ok(body)) => body,
        Ok(Err(Failure { error, offset })) => {
            let value = protocol::io_error_value(&error);
            warn!(handle, ?op, error = %error, nbd_error = value, "device call failed");
            Body::Failed {
                error: value,
                offset,
            }
        }
        Err(why) => {
            warn!(handle, ?op, "device call {why}");
            Body::Failed {
                error: protocol::EIO,
                offset: None,
            }
        }
    }
}

/// The requests (and their payload bytes) one connection may have in
/// flight, and the buffers their payloads reuse.
struct Budget {
    count: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
    buffers: Arc<BufferPool>,
}

impl Budget {
    /// Takes one request slot and `len` bytes of the payload budget; `None`
    /// only if the semaphores were closed, which they never are.
    async fn acquire(&self, len: u32) -> Option<Permits> {
        let count = Arc::clone(&self.count).acquire_owned().await.ok()?;
        let bytes = Arc::clone(&self.bytes).acquire_many_owned(len).await.ok()?;
        Some(Permits {
            _count: count,
            _bytes: bytes,
        })
    }
}

/// The single writer: replies in the order they complete, flushed whenever
/// no other reply is waiting. Ends (closing the write side) once every sender
/// is gone; on a write error, cancels `failed`.
async fn write_replies<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut rx: mpsc::Receiver<Reply>,
    failed: CancellationToken,
    buffers: Arc<BufferPool>,
) {
    let result: io::Result<()> = async {
        while let Some(reply) = rx.recv().await {
            write_reply(&mut writer, reply, &buffers).await?;
            while let Ok(reply) = rx.try_recv() {
                write_reply(&mut writer, reply, &buffers).await?;
            }
            writer.flush().await?;
        }
        writer.shutdown().await
    }
    .await;
    if let Err(e) = result {
        debug!(error = %e, "writing replies failed");
        failed.cancel();
    }
}

/// Writes one reply; a read's buffer then goes back to `buffers`.
async fn write_reply<W: AsyncWrite + Unpin>(
    writer: &mut W,
    reply: Reply,
    buffers: &BufferPool,
) -> io::Result<()> {
    let handle = reply.handle;
    if !reply.structured {
        let (error, data) = match &reply.body {
            Body::Done => (0, None),
            Body::Failed { error, .. } => (*error, None),
            Body::Data { buf, .. } => (0, Some(buf)),
            // Never built: block status needs structured replies, and its
            // requests get them.
            Body::Status(_) => (protocol::EINVAL, None),
        };
        let header = protocol::simple_reply(error, handle);
        match data {
            Some(data) => write_all_vectored(writer, &header, data).await?,
            None => writer.write_all(&header).await?,
        }
        if let Body::Data { buf, .. } = reply.body {
            buffers.give(buf);
        }
        return Ok(());
    }
    match reply.body {
        Body::Done => writer.write_all(&protocol::none_chunk(handle)).await,
        Body::Failed { error, offset } => {
            let chunk = protocol::error_chunk(handle, error, error_message(error), offset);
            writer.write_all(&chunk).await
        }
        Body::Data {
            offset,
            buf,
            pieces,
        } => {
            if pieces.is_empty() {
                // All data: one chunk (reads are at most max_payload, u32).
                let header = protocol::offset_data_header(handle, offset, buf.len() as u32, true);
                write_all_vectored(writer, &header, &buf).await?;
                buffers.give(buf);
                return Ok(());
            }
            let last = pieces.len() - 1;
            for (i, p) in pieces.iter().enumerate() {
                // The whole read is in memory: no error can follow, so the
                // last content chunk ends the reply.
                let done = i == last;
                let at = offset + p.start as u64;
                // Pieces are within a read of at most max_payload (u32).
                let len = p.len as u32;
                if p.hole {
                    writer
                        .write_all(&protocol::offset_hole_chunk(handle, at, len, done))
                        .await?;
                } else {
                    let header = protocol::offset_data_header(handle, at, len, done);
                    write_all_vectored(writer, &header, &buf[p.start..p.start + p.len]).await?;
                }
            }
            buffers.give(buf);
            Ok(())
        }
        Body::Status(descriptors) => {
            let chunk =
                protocol::block_status_chunk(handle, protocol::ALLOCATION_CONTEXT_ID, &descriptors);
            writer.write_all(&chunk).await
        }
    }
}

/// The message of a structured error chunk.
fn error_message(error: u32) -> &'static str {
    match error {
        protocol::EPERM => "the export is read-only",
        protocol::EIO => "input/output error",
        protocol::EINVAL => "invalid request",
        protocol::ENOSPC => "no space left on the device",
        protocol::ENOTSUP => "not supported",
        _ => "request failed",
    }
}

/// Writes `header` then `data`, in one `writev` where the stream can (a
/// reply larger than the write buffer goes straight to the socket: header
/// and data then leave in one call, not a lone 16-byte segment first).
async fn write_all_vectored<W: AsyncWrite + Unpin>(
    writer: &mut W,
    header: &[u8],
    data: &[u8],
) -> io::Result<()> {
    let mut done = 0;
    while done < header.len() + data.len() {
        let n = if done < header.len() {
            let parts = [IoSlice::new(&header[done..]), IoSlice::new(data)];
            writer.write_vectored(&parts).await?
        } else {
            writer.write(&data[done - header.len()..]).await?
        };
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        done += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::*;
    use crate::Extent;

    const SIZE: u64 = 1 << 20;
    const MAX: u32 = 64 * 1024;

    fn req(command: u16, flags: u16, offset: u64, length: u32) -> Request {
        Request {
            flags,
            command,
            handle: 1,
            offset,
            length,
        }
    }

    /// A read-write export, simple replies only.
    fn limits() -> Limits {
        Limits {
            size: SIZE,
            read_only: false,
            max_payload: MAX,
            structured: false,
            allocation: false,
            fast_zeroes: false,
        }
    }

    /// Structured replies and `base:allocation` negotiated.
    fn negotiated() -> Limits {
        Limits {
            structured: true,
            allocation: true,
            ..limits()
        }
    }

    fn check_rw(r: Request) -> Result<Op, u32> {
        check(&r, &limits())
    }

    fn check_ro(r: Request) -> Result<Op, u32> {
        check(
            &r,
            &Limits {
                read_only: true,
                ..limits()
            },
        )
    }

    #[test]
    fn reads_within_the_device_become_read_ops() {
        assert_eq!(
            check_rw(req(CMD_READ, 0, 4096, 512)),
            Ok(Op::Read {
                offset: 4096,
                len: 512,
                sparse: false
            })
        );
        assert_eq!(
            check_rw(req(CMD_READ, CMD_FLAG_FUA, 0, MAX)),
            Ok(Op::Read {
                offset: 0,
                len: MAX,
                sparse: false
            })
        );
        assert_eq!(
            check_ro(req(CMD_READ, 0, 0, 1)),
            Ok(Op::Read {
                offset: 0,
                len: 1,
                sparse: false
            })
        );
    }

    #[test]
    fn reads_past_the_end_or_over_max_payload_are_einval() {
        assert_eq!(check_rw(req(CMD_READ, 0, SIZE - 1, 2)), Err(EINVAL));
        assert_eq!(check_rw(req(CMD_READ, 0, u64::MAX, 1)), Err(EINVAL));
        assert_eq!(check_rw(req(CMD_READ, 0, 0, MAX + 1)), Err(EINVAL));
        assert_eq!(check_rw(req(CMD_READ, 0, 0, u32::MAX)), Err(EINVAL));
    }

    #[test]
    fn writes_past_the_end_are_enospc() {
        assert_eq!(check_rw(req(CMD_WRITE, 0, SIZE, 1)), Err(ENOSPC));
        assert_eq!(check_rw(req(CMD_WRITE, 0, u64::MAX - 1, 4)), Err(ENOSPC));
        assert_eq!(
            check_rw(req(CMD_WRITE_ZEROES, 0, SIZE - 512, 1024)),
            Err(ENOSPC)
        );
        assert_eq!(
            check_rw(req(CMD_WRITE_ZEROES, 0, u64::MAX, u32::MAX)),
            Err(ENOSPC)
        );
    }

    #[test]
    fn trims_past_the_end_are_einval() {
        assert_eq!(check_rw(req(CMD_TRIM, 0, SIZE, 1)), Err(EINVAL));
        assert_eq!(check_rw(req(CMD_TRIM, 0, u64::MAX, 1)), Err(EINVAL));
    }

    #[test]
    fn writes_trims_and_write_zeroes_on_a_read_only_export_are_eperm() {
        assert_eq!(check_ro(req(CMD_WRITE, 0, 0, 512)), Err(EPERM));
        assert_eq!(check_ro(req(CMD_TRIM, 0, 0, 512)), Err(EPERM));
        assert_eq!(check_ro(req(CMD_WRITE_ZEROES, 0, 0, 512)), Err(EPERM));
        assert_eq!(check_ro(req(CMD_FLUSH, 0, 0, 0)), Ok(Op::Flush));
    }

    #[test]
    fn unknown_or_unadvertised_commands_are_einval() {
        for command in [CMD_BLOCK_STATUS, 8, 99, u16::MAX] {
            assert_eq!(
                check_rw(req(command, 0, 0, 512)),
                Err(EINVAL),
                "command {command}"
            );
        }
    }

    #[test]
    fn flags_not_applicable_to_the_command_are_einval() {
        assert_eq!(check_rw(req(CMD_READ, CMD_FLAG_DF, 0, 512)), Err(EINVAL));
        assert_eq!(
            check_rw(req(CMD_WRITE, CMD_FLAG_NO_HOLE, 0, 512)),
            Err(EINVAL)
        );
        assert_eq!(
            check_rw(req(CMD_WRITE, CMD_FLAG_FAST_ZERO, 0, 512)),
            Err(EINVAL)
        );
        assert_eq!(check_rw(req(CMD_TRIM, 1 << 15, 0, 512)), Err(EINVAL));
        assert_eq!(check_rw(req(CMD_CACHE, CMD_FLAG_FUA, 0, 512)), Err(EINVAL));
        assert_eq!(
            check(&req(CMD_READ, CMD_FLAG_REQ_ONE, 0, 512), &negotiated()),
            Err(EINVAL)
        );
        assert_eq!(
            check(&req(CMD_BLOCK_STATUS, CMD_FLAG_DF, 0, 512), &negotiated()),
            Err(EINVAL)
        );
    }

    #[test]
    fn fua_and_no_hole_are_carried_to_the_op() {
        assert_eq!(
            check_rw(req(CMD_WRITE, CMD_FLAG_FUA, 8, 8)),
            Ok(Op::Write {
                offset: 8,
                fua: true
            })
        );
        assert_eq!(
            check_rw(req(CMD_TRIM, CMD_FLAG_FUA, 0, 4096)),
            Ok(Op::Trim {
                offset: 0,
                len: 4096,
                fua: true
            })
        );
        assert_eq!(
            check_rw(req(CMD_WRITE_ZEROES, CMD_FLAG_NO_HOLE, 0, 4096)),
            Ok(Op::WriteZeroes {
                offset: 0,
                len: 4096,
                fua: false,
                no_hole: true
            })
        );
        // Write zeroes and trim are not bounded by max_payload: no payload.
        assert_eq!(
            check_rw(req(CMD_WRITE_ZEROES, 0, 0, SIZE as u32)),
            Ok(Op::WriteZeroes {
                offset: 0,
                len: SIZE as u32,
                fua: false,
                no_hole: false
            })
        );
    }

    #[tokio::test]
    async fn a_vectored_reply_is_written_whole_through_short_writes() {
        // A pipe that takes at most 7 bytes at a time: every write is short.
        let (mut near, mut far) = tokio::io::duplex(7);
        let header = [1u8; 16];
        let data: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let expected = [&header[..], &data[..]].concat();
        let reader = tokio::spawn(async move {
            let mut got = vec![0u8; 1016];
            far.read_exact(&mut got).await.map(|_| got)
        });
        write_all_vectored(&mut near, &header, &data).await.unwrap();
        assert_eq!(reader.await.unwrap().unwrap(), expected);
    }

    #[test]
    fn zero_length_requests_succeed_without_touching_the_device() {
        assert_eq!(check_rw(req(CMD_READ, 0, SIZE, 0)), Ok(Op::Nothing));
        assert_eq!(check_rw(req(CMD_WRITE, 0, 0, 0)), Ok(Op::Nothing));
        assert_eq!(check_rw(req(CMD_TRIM, 0, 0, 0)), Ok(Op::Nothing));
        assert_eq!(check_rw(req(CMD_WRITE_ZEROES, 0, 0, 0)), Ok(Op::Nothing));
    }

    #[test]
    fn structured_reads_look_up_holes_from_64_kib_unless_dont_fragment() {
        let n = negotiated();
        assert_eq!(
            check(&req(CMD_READ, 0, 0, HOLE_LOOKUP_MIN), &n),
            Ok(Op::Read {
                offset: 0,
                len: HOLE_LOOKUP_MIN,
                sparse: true
            })
        );
        assert_eq!(
            check(&req(CMD_READ, 0, 0, HOLE_LOOKUP_MIN - 1), &n),
            Ok(Op::Read {
                offset: 0,
                len: HOLE_LOOKUP_MIN - 1,
                sparse: false
            })
        );
        assert_eq!(
            check(&req(CMD_READ, CMD_FLAG_DF, 0, MAX), &n),
            Ok(Op::Read {
                offset: 0,
                len: MAX,
                sparse: false
            })
        );
        // Without structured replies: no hole chunks, and DF is refused.
        assert_eq!(
            check_rw(req(CMD_READ, 0, 0, MAX)),
            Ok(Op::Read {
                offset: 0,
                len: MAX,
                sparse: false
            })
        );
        assert_eq!(check_rw(req(CMD_READ, CMD_FLAG_DF, 0, 512)), Err(EINVAL));
    }

    #[test]
    fn block_status_needs_a_negotiated_context_and_a_range_within_the_device() {
        let structured_only = Limits {
            structured: true,
            ..limits()
        };
        assert_eq!(
            check(&req(CMD_BLOCK_STATUS, 0, 0, 4096), &structured_only),
            Err(EINVAL)
        );
        assert_eq!(check_rw(req(CMD_BLOCK_STATUS, 0, 0, 4096)), Err(EINVAL));
        let n = negotiated();
        assert_eq!(
            check(&req(CMD_BLOCK_STATUS, CMD_FLAG_REQ_ONE, 8, 4096), &n),
            Ok(Op::BlockStatus {
                offset: 8,
                len: 4096,
                req_one: true
            })
        );
        // Not bounded by max_payload: there is no payload.
        assert_eq!(
            check(&req(CMD_BLOCK_STATUS, 0, 0, SIZE as u32), &n),
            Ok(Op::BlockStatus {
                offset: 0,
                len: SIZE as u32,
                req_one: false
            })
        );
        assert_eq!(check(&req(CMD_BLOCK_STATUS, 0, SIZE, 1), &n), Err(EINVAL));
        assert_eq!(check(&req(CMD_BLOCK_STATUS, 0, 0, 0), &n), Err(EINVAL));
        // Read-only exports answer it too.
        let ro = Limits {
            read_only: true,
            ..n
        };
        assert!(check(&req(CMD_BLOCK_STATUS, 0, 0, 512), &ro).is_ok());
    }

    #[test]
    fn cache_requests_are_checked_like_reads_without_a_payload() {
        assert_eq!(
            check_rw(req(CMD_CACHE, 0, 4096, 1 << 20)),
            Err(EINVAL),
            "past the end"
        );
        assert_eq!(
            check_ro(req(CMD_CACHE, 0, 0, SIZE as u32)),
            Ok(Op::Cache {
                offset: 0,
                len: SIZE as u32
            })
        );
        assert_eq!(check_rw(req(CMD_CACHE, 0, 0, 0)), Ok(Op::Nothing));
    }

    #[test]
    fn fast_zeroes_are_served_only_when_the_device_makes_holes_quickly() {
        let fast = Limits {
            fast_zeroes: true,
            ..limits()
        };
        assert_eq!(
            check(&req(CMD_WRITE_ZEROES, CMD_FLAG_FAST_ZERO, 0, 4096), &fast),
            Ok(Op::WriteZeroes {
                offset: 0,
                len: 4096,
                fua: false,
                no_hole: false
            })
        );
        // Zeroes written as buffers are not fast.
        assert_eq!(
            check(
                &req(
                    CMD_WRITE_ZEROES,
                    CMD_FLAG_FAST_ZERO | CMD_FLAG_NO_HOLE,
                    0,
                    4096
                ),
                &fast
            ),
            Err(ENOTSUP)
        );
        assert_eq!(
            check_rw(req(CMD_WRITE_ZEROES, CMD_FLAG_FAST_ZERO, 0, 4096)),
            Err(ENOTSUP)
        );
        // Read-only and out of range keep their own errors.
        let ro_fast = Limits {
            read_only: true,
            ..fast
        };
        assert_eq!(
            check(
                &req(CMD_WRITE_ZEROES, CMD_FLAG_FAST_ZERO, 0, 4096),
                &ro_fast
            ),
            Err(EPERM)
        );
        assert_eq!(
            check(&req(CMD_WRITE_ZEROES, CMD_FLAG_FAST_ZERO, SIZE, 1), &fast),
            Err(ENOSPC)
        );
    }

    /// A device whose allocation is a fixed list of extents.
    struct Extents(Vec<Extent>);

    impl BlockDevice for Extents {
        fn size(&self) -> u64 {
            SIZE
        }
        fn read_only(&self) -> bool {
            true
        }
        fn read(&self, _offset: u64, buf: &mut [u8]) -> io::Result<()> {
            buf.fill(1);
            Ok(())
        }
        fn write(&self, _: u64, _: &[u8], _: bool) -> io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
        fn trim(&self, _: u64, _: u64) -> io::Result<()> {
            Ok(())
        }
        fn write_zeroes(&self, _: u64, _: u64, _: bool) -> io::Result<()> {
            Ok(())
        }
        fn extents(&self, _offset: u64, _len: u64) -> io::Result<Vec<Extent>> {
            Ok(self.0.clone())
        }
    }

    fn ext(len: u64, hole: bool) -> Extent {
        Extent { len, hole }
    }

    fn piece(start: usize, len: usize, hole: bool) -> Piece {
        Piece { start, len, hole }
    }

    #[test]
    fn read_pieces_merge_neighbours_and_stop_at_the_end_of_the_read() {
        let dev = Extents(vec![
            ext(100, false),
            ext(50, false),
            ext(200, true),
            ext(10, true),
            ext(1000, false),
        ]);
        assert_eq!(
            read_pieces(&dev, 0, 400),
            vec![
                piece(0, 150, false),
                piece(150, 210, true),
                piece(360, 40, false)
            ]
        );
        assert_eq!(read_pieces(&dev, 0, 120), vec![piece(0, 120, false)]);
    }

    #[test]
    fn read_pieces_ask_again_after_a_short_answer_and_fall_back_to_data() {
        // Each answer covers 64 bytes: asked again until the read is covered.
        let dev = Extents(vec![ext(64, true)]);
        assert_eq!(read_pieces(&dev, 0, 200), vec![piece(0, 200, true)]);
        // An answer without progress: the rest is read as data.
        let dev = Extents(vec![ext(0, true)]);
        assert_eq!(read_pieces(&dev, 0, 200), vec![piece(0, 200, false)]);
        let dev = Extents(vec![]);
        assert_eq!(read_pieces(&dev, 0, 10), vec![piece(0, 10, false)]);
    }

    #[test]
    fn a_sparse_read_reads_only_its_data_pieces() {
        let dev = Extents(vec![ext(4, false), ext(4, true), ext(4, false)]);
        let op = Op::Read {
            offset: 0,
            len: 12,
            sparse: true,
        };
        // A reused buffer: the hole's bytes stay stale (they are not sent).
        let buffers = BufferPool::new(POOLED_BUFFERS, POOLED_BYTES);
        buffers.give(vec![9; 12]);
        let Ok(Body::Data { buf, pieces, .. }) = execute(op, Vec::new(), &dev, &buffers) else {
            panic!("a read answers data");
        };
        assert_eq!(buf, [1, 1, 1, 1, 9, 9, 9, 9, 1, 1, 1, 1]);
        assert_eq!(
            pieces,
            vec![piece(0, 4, false), piece(4, 4, true), piece(8, 4, false)]
        );
    }

    #[test]
    fn block_status_without_an_answer_reports_the_range_allocated() {
        let dev = Extents(vec![]);
        let op = Op::BlockStatus {
            offset: 0,
            len: 4096,
            req_one: false,
        };
        let Ok(Body::Status(d)) = execute(
            op,
            Vec::new(),
            &dev,
            &BufferPool::new(POOLED_BUFFERS, POOLED_BYTES),
        ) else {
            panic!("block status answers descriptors");
        };
        assert_eq!(
            d,
            vec![protocol::Descriptor {
                length: 4096,
                status: 0
            }]
        );
    }
}
