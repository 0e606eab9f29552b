//! The transmission phase: requests are read one after the other, checked,
//! and run concurrently on the blocking pool; simple replies go out through a
//! single writer task in completion order.

use std::future::Future;
use std::io::{self, IoSlice};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
/// Zero buffer used for `WRITE_ZEROES` with `NO_HOLE`.
const ZERO_CHUNK: usize = 256 * 1024;
/// Payload buffers one connection keeps for its next requests (see
/// [`Buffers`]): at most this many bytes of capacity, and this many buffers.
const POOLED_BYTES: usize = 4 * 1024 * 1024;
const POOLED_BUFFERS: usize = 16;
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

/// A checked request, ready for the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Read {
        offset: u64,
        len: u32,
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
    /// A zero-length read, write, trim or write zeroes: succeeds untouched.
    Nothing,
}

/// Checks a request (other than `DISC`) against the export: the `Op` to run,
/// or the NBD error value to answer.
pub(crate) fn check(
    req: &Request,
    size: u64,
    read_only: bool,
    max_payload: u32,
) -> Result<Op, u32> {
    use protocol::*;
    let allowed = match req.command {
        CMD_READ | CMD_WRITE | CMD_FLUSH | CMD_TRIM => CMD_FLAG_FUA,
        CMD_WRITE_ZEROES => CMD_FLAG_FUA | CMD_FLAG_NO_HOLE,
        // Unknown, and the known ones we do not advertise (CACHE,
        // BLOCK_STATUS, ...).
        _ => return Err(EINVAL),
    };
    // Unknown flags, or flags not applicable to the command (DF without
    // structured replies, FAST_ZERO that we do not advertise, ...).
    if req.flags & !allowed != 0 {
        return Err(EINVAL);
    }
    let fua = req.flags & CMD_FLAG_FUA != 0;
    let (offset, len) = (req.offset, req.length);
    let in_range = range_ok(offset, len, size);
    match req.command {
        CMD_READ => {
            if len > max_payload || !in_range {
                return Err(EINVAL);
            }
            Ok(if len == 0 {
                Op::Nothing
            } else {
                Op::Read { offset, len }
            })
        }
        CMD_WRITE => {
            if read_only {
                return Err(EPERM);
            }
            if len > max_payload {
                return Err(EINVAL);
            }
            if !in_range {
                return Err(ENOSPC);
            }
            Ok(if len == 0 {
                Op::Nothing
            } else {
                Op::Write { offset, fua }
            })
        }
        CMD_FLUSH => Ok(Op::Flush),
        CMD_TRIM => {
            if read_only {
                return Err(EPERM);
            }
            if !in_range {
                return Err(EINVAL);
            }
            Ok(if len == 0 {
                Op::Nothing
            } else {
                Op::Trim { offset, len, fua }
            })
        }
        CMD_WRITE_ZEROES => {
            if read_only {
                return Err(EPERM);
            }
            if !in_range {
                return Err(ENOSPC);
            }
            let no_hole = req.flags & CMD_FLAG_NO_HOLE != 0;
            Ok(if len == 0 {
                Op::Nothing
            } else {
                Op::WriteZeroes {
                    offset,
                    len,
                    fua,
                    no_hole,
                }
            })
        }
        _ => Err(EINVAL),
    }
}

/// Read and write payload buffers of one connection, reused from request to
/// request: a fresh `vec![0; len]` of a large read costs more than reading
/// the page cache into it (the allocator hands out fresh pages, each faulted
/// in and zeroed), a buffer used before is already there. Buffers never go
/// from one connection to another.
#[derive(Default)]
struct Buffers {
    free: Mutex<Vec<Vec<u8>>>,
}

impl Buffers {
    fn free(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
        // A poisoned lock only means a panic elsewhere; the list stays usable.
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A buffer of `len` bytes (their content is whatever the buffer held).
    fn take(&self, len: usize) -> Vec<u8> {
        let reused = {
            let mut free = self.free();
            // The shortest one at least as long (no zeroing at all, and the
            // longer ones stay for longer requests), else the longest one
            // with room enough (the least to zero).
            let fits = free
                .iter()
                .enumerate()
                .filter(|(_, b)| b.len() >= len)
                .min_by_key(|(_, b)| b.len());
            let room = || {
                free.iter()
                    .enumerate()
                    .filter(|(_, b)| b.capacity() >= len)
                    .max_by_key(|(_, b)| b.len())
            };
            let at = fits.or_else(room).map(|(i, _)| i);
            at.map(|i| free.swap_remove(i))
        };
        match reused {
            Some(mut buf) => {
                buf.resize(len, 0);
                buf
            }
            None => vec![0u8; len],
        }
    }

    /// Keeps `buf` for a later request, unless the pool is full.
    fn give(&self, buf: Vec<u8>) {
        let mut free = self.free();
        let held: usize = free.iter().map(Vec::capacity).sum();
        if free.len() < POOLED_BUFFERS && held + buf.capacity() <= POOLED_BYTES {
            free.push(buf);
        }
    }
}

/// Runs a checked request on the device (blocking). `payload` is the data of
/// a write, empty otherwise (given back to `buffers` once written). Returns
/// the data of a read, in a buffer of `buffers`.
fn execute(
    op: Op,
    payload: Vec<u8>,
    device: &dyn BlockDevice,
    buffers: &Buffers,
) -> io::Result<Option<Vec<u8>>> {
    match op {
        Op::Read { offset, len } => {
            let mut buf = buffers.take(len as usize);
            if let Err(e) = device.read(offset, &mut buf) {
                buffers.give(buf);
                return Err(e);
            }
            Ok(Some(buf))
        }
        Op::Write { offset, fua } => {
            let written = device.write(offset, &payload, fua);
            buffers.give(payload);
            written.map(|()| None)
        }
        Op::Flush => device.flush().map(|()| None),
        Op::Trim { offset, len, fua } => {
            device.trim(offset, u64::from(len))?;
            // The trait's trim has no FUA: make it durable before replying.
            if fua {
                device.flush()?;
            }
            Ok(None)
        }
        Op::WriteZeroes {
            offset,
            len,
            fua,
            no_hole: false,
        } => device
            .write_zeroes(offset, u64::from(len), fua)
            .map(|()| None),
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
            Ok(None)
        }
        Op::Nothing => Ok(None),
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
    error: u32,
    data: Option<Vec<u8>>,
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
            buffers: Arc::new(Buffers::default()),
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
            let op = match check(&req, device.size(), device.read_only(), self.max_payload) {
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
                        error,
                        data: None,
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
                    Op::Read { len, .. } => alone || len <= self.inline_max,
                    Op::Write { fua: false, .. } => {
                        alone || payload.len() <= self.inline_max as usize
                    }
                    _ => false,
                };
            if inline {
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    execute(op, payload, &**device, &budget.buffers)
                }));
                let reply = Reply {
                    handle,
                    error: 0,
                    data: None,
                    _permits: permits,
                };
                let reply = match outcome {
                    Ok(Ok(data)) => Reply { data, ..reply },
                    Ok(Err(e)) => {
                        let value = protocol::io_error_value(&e);
                        warn!(handle, ?op, error = %e, nbd_error = value, "device call failed");
                        Reply {
                            error: value,
                            ..reply
                        }
                    }
                    Err(_) => {
                        warn!(handle, ?op, "device call panicked");
                        Reply {
                            error: protocol::EIO,
                            ..reply
                        }
                    }
                };
                if guard!(tx.send(reply)).is_err() {
                    return Ok(End::WriteFailed);
                }
                continue;
            }
            let device = Arc::clone(device);
            let buffers = Arc::clone(&budget.buffers);
            let closed = self.closed.clone();
            let abandoned = abandoned.clone();
            let tx = tx.clone();
            tasks.spawn(
                async move {
                    let outcome = tokio::task::spawn_blocking(move || {
                        // A request queued behind others when its export went
                        // away, or its connection was abandoned, does not
                        // touch the device any more.
                        if closed.is_cancelled() {
                            return Err(io::Error::other("export closed"));
                        }
                        if abandoned.is_cancelled() {
                            return Err(io::Error::other("connection gone"));
                        }
                        execute(op, payload, &*device, &buffers)
                    })
                    .await;
                    let (error, data) = match outcome {
                        Ok(Ok(data)) => (0, data),
                        Ok(Err(e)) => {
                            let value = protocol::io_error_value(&e);
                            warn!(handle, ?op, error = %e, nbd_error = value, "device call failed");
                            (value, None)
                        }
                        Err(e) => {
                            warn!(handle, ?op, error = %e, "device call panicked");
                            (protocol::EIO, None)
                        }
                    };
                    let _ = tx
                        .send(Reply {
                            handle,
                            error,
                            data,
                            _permits: permits,
                        })
                        .await;
                }
                .instrument(tracing::Span::current()),
            );
        }
    }
}

/// The requests (and their payload bytes) one connection may have in
/// flight, and the buffers their payloads reuse.
struct Budget {
    count: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
    buffers: Arc<Buffers>,
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
    buffers: Arc<Buffers>,
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

async fn write_reply<W: AsyncWrite + Unpin>(
    writer: &mut W,
    reply: Reply,
    buffers: &Buffers,
) -> io::Result<()> {
    let header = protocol::simple_reply(reply.error, reply.handle);
    match reply.data {
        Some(data) if reply.error == 0 => {
            write_all_vectored(writer, &header, &data).await?;
            buffers.give(data);
        }
        _ => writer.write_all(&header).await?,
    }
    Ok(())
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

    fn check_rw(r: Request) -> Result<Op, u32> {
        check(&r, SIZE, false, MAX)
    }

    fn check_ro(r: Request) -> Result<Op, u32> {
        check(&r, SIZE, true, MAX)
    }

    #[test]
    fn reads_within_the_device_become_read_ops() {
        assert_eq!(
            check_rw(req(CMD_READ, 0, 4096, 512)),
            Ok(Op::Read {
                offset: 4096,
                len: 512
            })
        );
        assert_eq!(
            check_rw(req(CMD_READ, CMD_FLAG_FUA, 0, MAX)),
            Ok(Op::Read {
                offset: 0,
                len: MAX
            })
        );
        assert_eq!(
            check_ro(req(CMD_READ, 0, 0, 1)),
            Ok(Op::Read { offset: 0, len: 1 })
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
        for command in [CMD_CACHE, CMD_BLOCK_STATUS, 8, 99, u16::MAX] {
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
            check_rw(req(CMD_WRITE_ZEROES, CMD_FLAG_FAST_ZERO, 0, 512)),
            Err(EINVAL)
        );
        assert_eq!(check_rw(req(CMD_TRIM, 1 << 15, 0, 512)), Err(EINVAL));
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

    #[test]
    fn buffers_are_reused_at_the_length_asked_for() {
        let buffers = Buffers::default();
        buffers.give(vec![0xee; 4096]);
        buffers.give(vec![0xdd; 1 << 20]);
        // The shortest one long enough: the 4 KiB one, cut to 512 bytes.
        let small = buffers.take(512);
        assert_eq!((small.len(), small[0]), (512, 0xee));
        let large = buffers.take(1 << 20);
        assert_eq!((large.len(), large[0]), (1 << 20, 0xdd));
        // Nothing long enough left: a new, zeroed buffer.
        assert_eq!(buffers.take(8192), vec![0u8; 8192]);
        // A shorter buffer with room enough grows, the new bytes zeroed.
        buffers.give(small);
        let grown = buffers.take(4096);
        assert_eq!(grown.len(), 4096);
        assert!(grown[..512].iter().all(|&b| b == 0xee));
        assert!(grown[512..].iter().all(|&b| b == 0));
    }

    #[test]
    fn the_pool_keeps_at_most_its_bytes_and_buffers() {
        let buffers = Buffers::default();
        buffers.give(vec![0; POOLED_BYTES + 1]);
        assert!(buffers.free().is_empty());
        for _ in 0..POOLED_BUFFERS + 4 {
            buffers.give(vec![0; 512]);
        }
        assert_eq!(buffers.free().len(), POOLED_BUFFERS);
        buffers.give(vec![0; POOLED_BYTES]);
        assert_eq!(buffers.free().len(), POOLED_BUFFERS);
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
}
