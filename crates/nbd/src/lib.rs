//! NBD server for svs: serves block devices to Network Block Device clients
//! (the Linux kernel's `nbd-client`, qemu, nbdkit's tools, ...). Beside it,
//! [`NbdClient`] (module [`client`]): the agent's own blocking client, which
//! the host side (`svs-hostdev`) uses where the kernel has no `nbd` module,
//! and [`ReconnectingClient`] (module [`reconnect`]) over it, which survives
//! a restart of the server.
//!
//! What it speaks, from the NBD protocol specification (`doc/proto.md` of the
//! NBD project):
//! - the fixed newstyle handshake only (no oldstyle), with the options
//!   `NBD_OPT_EXPORT_NAME`, `NBD_OPT_GO`, `NBD_OPT_INFO`, `NBD_OPT_LIST`,
//!   `NBD_OPT_ABORT` and, with [`NbdConfig::tls`], `NBD_OPT_STARTTLS` (TLS
//!   over the same connection, then haggling goes on inside it, as with
//!   qemu-nbd and nbdkit); every other option is answered
//!   `NBD_REP_ERR_UNSUP`. With TLS required, every option but STARTTLS and
//!   ABORT is answered `NBD_REP_ERR_TLS_REQD` before TLS (and
//!   `NBD_OPT_EXPORT_NAME`, which cannot be answered an error, closes the
//!   connection);
//! - `NBD_OPT_STRUCTURED_REPLY`, then `NBD_OPT_LIST_META_CONTEXT` /
//!   `NBD_OPT_SET_META_CONTEXT` with the one context `base:allocation`
//!   (meta context options before structured replies are
//!   `NBD_REP_ERR_INVALID`; a context counts only for the export it was
//!   selected for). Extended headers (`NBD_OPT_EXTENDED_HEADERS`) are
//!   answered `NBD_REP_ERR_UNSUP`: requests stay 32-bit;
//! - the commands `READ`, `WRITE`, `DISC`, `FLUSH`, `TRIM`, `WRITE_ZEROES`
//!   (with `NO_HOLE` and `FAST_ZERO`), `CACHE` and, with a selected context,
//!   `BLOCK_STATUS` (with `REQ_ONE`); the `FUA` flag; `DF` on reads with
//!   structured replies. Anything else is `EINVAL`; a fast zero the device
//!   cannot do fast is `ENOTSUP` at once.
//!
//! Only what the client negotiated is used. Without structured replies
//! every reply is simple (the kernel's client, [`NbdClient`]). With them,
//! reads and block status answer structured chunks, the other commands keep
//! simple replies (as the protocol allows): a read of 64 KiB or more asks
//! the device for its holes ([`BlockDevice::extents`], a few `lseek`s) and
//! sends them as hole chunks, the data as data chunks written straight from
//! the read buffer (a fully allocated range is one chunk); a failed read
//! answers an error chunk with the offset of the piece that failed. Block
//! status reports `base:allocation` (hole and zero, or data) from the same
//! extents. `NBD_FLAG_CAN_MULTI_CONN` is advertised for read-only exports and
//! devices whose flush covers every connection ([`BlockDevice::shared_flush`]).
//!
//! Requests of one connection are served concurrently (at most
//! [`MAX_IN_FLIGHT`] at once and [`IN_FLIGHT_BYTES`] bytes of payload), each
//! device call on tokio's blocking pool; replies go out through one writer,
//! possibly out of order, as the protocol allows.
//!
//! The service plugs in through two traits: [`BlockDevice`] (one export's
//! bytes) and [`Exports`] (which exports exist, who may open them, and which
//! peer addresses may connect at all). Admission happens at accept, before
//! any byte is exchanged: a peer [`Exports::admits`] refuses, one more
//! connection from a peer at `max_connections_per_peer`, or one more beyond
//! `max_connections` is closed at once; a handshake not finished within
//! `handshake_timeout` is closed.

pub mod client;
mod congestion;
pub mod protocol;
pub mod reconnect;

mod handshake;
mod server;
/// Test devices (feature `testing`).
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod transmission;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

pub use client::{ClientTls, ExportInfo, NbdClient};
pub use congestion::TcpCongestion;
pub use protocol::shutting_down;
pub use reconnect::{address_host, AddressSource, ReconnectOptions, ReconnectingClient};
pub use server::NbdServer;
pub use tokio_util::sync::CancellationToken;
pub use transmission::{IN_FLIGHT_BYTES, MAX_IN_FLIGHT};

/// A block device an export serves.
///
/// `read`, `write`, `flush`, `trim`, `write_zeroes`, `cache` and `extents`
/// are blocking calls: the server runs them on tokio's blocking pool
/// (`spawn_blocking`), several at once for one connection and from many
/// connections, so the device must be safe to call concurrently. Offsets and
/// lengths are already range-checked by the server (`offset + len <=
/// size()`), and lengths are never zero.
///
/// `size`, `read_only`, `shared_flush` and `fast_zeroes` are called on the
/// async workers (at negotiation and for every request's checks): they must
/// be cheap and must not block.
/// What [`BlockDevice::start_write`] calls with a write's outcome and its
/// buffer.
pub type WriteDone = Box<dyn FnOnce(std::io::Result<()>, Vec<u8>) + Send>;

pub trait BlockDevice: Send + Sync + 'static {
    /// Size of the device in bytes.
    fn size(&self) -> u64;
    /// Whether writes (write, trim, write zeroes) must be refused with `EPERM`.
    fn read_only(&self) -> bool;
    /// Fills `buf` with the bytes at `offset`: every byte of it (the server
    /// reuses buffers, which hold an earlier request's bytes).
    fn read(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()>;
    /// `read` if every byte is in memory and the call will not wait (for a
    /// disk, the network or a lock held long): `Ok(false)` otherwise, with
    /// `buf` partly written. The server tries it on its own task before
    /// handing a read to a blocking thread, so it must be cheap to refuse.
    /// Default: never.
    fn read_cached(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<bool> {
        let _ = (offset, buf);
        Ok(false)
    }
    /// Writes `data` at `offset`; with `fua`, returns only once it is durable.
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> std::io::Result<()>;
    /// Starts a plain (not FUA) write of `data` at `offset` whose outcome
    /// another thread may deliver: `done` gets it and `data` back, once,
    /// from whichever thread ends the write (possibly this one, before
    /// this returns). Called on the async workers, so it must not wait;
    /// `Err` gives both back, nothing done, when the write would wait to
    /// start: the server then runs [`BlockDevice::write`] on a blocking
    /// thread. Default: always `Err`.
    fn start_write(
        &self,
        offset: u64,
        data: Vec<u8>,
        done: WriteDone,
    ) -> Result<(), (Vec<u8>, WriteDone)> {
        let _ = offset;
        Err((data, done))
    }
    /// Makes every completed write durable.
    fn flush(&self) -> std::io::Result<()>;
    /// The client no longer needs these bytes; their content afterwards is
    /// unspecified (a device may punch a hole, zero them, or do nothing).
    fn trim(&self, offset: u64, len: u64) -> std::io::Result<()>;
    /// The range must read back as zeroes afterwards. It may become a hole.
    /// (When the client asks that no hole be made, `NBD_CMD_FLAG_NO_HOLE`, the
    /// server writes zero buffers through [`BlockDevice::write`] instead.)
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> std::io::Result<()>;

    /// Whether `flush` (and a call with `fua`) makes durable every write
    /// that completed before it, whichever connection issued it, with its
    /// effects visible to every connection: then the server advertises
    /// `NBD_FLAG_CAN_MULTI_CONN` and clients may spread their requests over
    /// several connections. Read-only exports advertise it anyway. Default:
    /// false.
    fn shared_flush(&self) -> bool {
        false
    }

    /// Whether a small read (`write` false) or write completes at once in
    /// this process (page cache, no network): the server may then run it
    /// inline (see `NbdConfig::inline_max`). A device whose requests wait
    /// on the network says false: each of them runs on a blocking thread,
    /// so a connection's requests overlap rather than wait for each other.
    /// Default: true.
    fn runs_inline(&self, write: bool) -> bool {
        let _ = write;
        true
    }

    /// Whether `write_zeroes` (which may make holes) is always much faster
    /// than writing the zeroes: requests with `NBD_CMD_FLAG_FAST_ZERO` are
    /// served when it is, else refused with `ENOTSUP` at once. Default: false.
    fn fast_zeroes(&self) -> bool {
        false
    }

    /// The client will soon access these bytes (`NBD_CMD_CACHE`): a device
    /// may start fetching them. Only a hint. Default: nothing.
    fn cache(&self, offset: u64, len: u64) -> std::io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }

    /// Allocation of the bytes from `offset`: extents in order, the first
    /// starting at `offset`, each non-empty, together covering at least
    /// one byte and at most `len` (a device may describe a prefix only; the
    /// server asks again for the rest). A hole must read as zeroes. Used
    /// for `NBD_CMD_BLOCK_STATUS` and to answer reads of holes with hole
    /// chunks, so it must be cheap (a few `lseek`s). Default: all data.
    fn extents(&self, offset: u64, len: u64) -> std::io::Result<Vec<Extent>> {
        let _ = offset;
        Ok(vec![Extent { len, hole: false }])
    }
}

/// A run of bytes of one allocation status (see [`BlockDevice::extents`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub len: u64,
    /// Not allocated, and reads as zeroes.
    pub hole: bool,
}

/// An export opened for one connection.
pub struct OpenedExport {
    pub device: Arc<dyn BlockDevice>,
    /// Cancelled by the service when the export goes away (volume detached,
    /// deleted, ...): the connection is closed at once, even while idle;
    /// device calls not yet started are skipped.
    pub closed: CancellationToken,
}

/// Looks exports up; the service decides who may open what.
///
/// Both calls run on the async workers during the handshake: they must be
/// quick and must not block (an in-memory lookup). `open` is also called for
/// `NBD_OPT_INFO`, whose `OpenedExport` is dropped at once.
pub trait Exports: Send + Sync + 'static {
    /// `None` when the export does not exist or this peer may not open it
    /// (indistinguishable to the client).
    fn open(&self, name: &str, peer: SocketAddr) -> Option<OpenedExport>;
    /// Names this peer may see (`NBD_OPT_LIST`).
    fn list(&self, peer: SocketAddr) -> Vec<String>;
    /// Whether a connection from this address may start a handshake at
    /// all. Called at accept, before any byte is exchanged: a peer refused
    /// here is closed at once, so it never holds a connection slot. It must
    /// be quick (an in-memory lookup). IPv4 peers on an IPv6 listener come
    /// as IPv4 addresses. Default: every peer (the exports then decide).
    fn admits(&self, peer: IpAddr) -> bool {
        let _ = peer;
        true
    }
}

/// Server limits.
#[derive(Debug, Clone)]
pub struct NbdConfig {
    /// Connections open at once (handshaking or transmitting); one more is
    /// closed as soon as it is accepted. Default 256.
    pub max_connections: usize,
    /// Connections open at once from one IP address; one more from it is
    /// closed as soon as it is accepted. With it below `max_connections`,
    /// no single peer can take every slot. Default 64.
    pub max_connections_per_peer: usize,
    /// A client must finish the handshake (choose its export) within this
    /// time, else its connection is closed. Default 10 s.
    pub handshake_timeout: Duration,
    /// Largest `READ`/`WRITE` length, advertised as the maximum block size.
    /// A longer read is answered `EINVAL`; a longer write closes the
    /// connection (its payload is never read). Default 32 MiB; values below
    /// 4096 are raised to 4096 (the protocol's preferred block size).
    pub max_payload: u32,
    /// Reads and (non-FUA) writes of at most this many bytes run directly on
    /// the connection's task instead of a blocking-pool thread: no thread
    /// hand-off per request, which dominates small page-cache I/O (only for
    /// devices that say they run inline, `BlockDevice::runs_inline`). With it
    /// above 0, so does a read or non-FUA write of any size that is the
    /// connection's only request in flight (queue depth 1). Such a call
    /// blocks a runtime worker while it runs, so only enable this when the
    /// server has a runtime of its own. Default 0: never.
    pub inline_max: u32,
    /// `NBD_OPT_STARTTLS` with this configuration. Default: none (the
    /// option is answered `NBD_REP_ERR_UNSUP`).
    pub tls: Option<ServerTls>,
    /// The TCP congestion control of accepted connections (set on the
    /// listener, see [`TcpCongestion`]); one the kernel refuses is logged and
    /// the kernel's default kept. Default: none (the kernel's default).
    pub tcp_congestion: Option<TcpCongestion>,
}

/// TLS of the NBD server.
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// The server's certificate and key (no ALPN).
    pub config: Arc<rustls::ServerConfig>,
    /// Nothing but STARTTLS (and ABORT) before TLS: no export is listed or
    /// served in plain text.
    pub required: bool,
}

impl Default for NbdConfig {
    fn default() -> Self {
        NbdConfig {
            max_connections: 256,
            max_connections_per_peer: 64,
            handshake_timeout: Duration::from_secs(10),
            max_payload: 32 * 1024 * 1024,
            inline_max: 0,
            tls: None,
            tcp_congestion: None,
        }
    }
}
