//! The svs slice protocol: how a volume front end (the fan-out point that
//! stripes and mirrors a volume) reaches the slices a storage node holds,
//! one network hop away. This crate holds the wire format, the epoch fence
//! and the blocking client ([`SliceClient`]) and server ([`SliceServer`])
//! cores; the storage node plugs its media in through [`SliceBackend`],
//! [`EpochStore`] and [`Authenticator`].
//!
//! # Wire format (version 1)
//!
//! Every integer is little-endian; strings are UTF-8 with their byte length
//! in front (in the fixed header of the message). With TLS the whole
//! connection is TLS from its first byte (no STARTTLS): the hello travels
//! inside it.
//!
//! ## Hello
//!
//! The client sends, once, right after connecting:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `b"SVSSLICE"` |
//! | 8 | 2 | protocol version (1) |
//! | 10 | 2 | flags (0) |
//! | 12 | 2 | credential length (≤ 4096) |
//! | 14 | 2 | caller name length (≤ 256) |
//! | 16 | … | credential, then caller name |
//!
//! The server checks the credential ([`Authenticator`]) and answers:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `b"SVSSLICE"` |
//! | 8 | 2 | protocol version the server speaks (1) |
//! | 10 | 2 | status (0: accepted; else a [`Status`] code) |
//! | 12 | 4 | max payload: largest write payload, read length or reply payload the server accepts or sends |
//! | 16 | 2 | message length (≤ 4096) |
//! | 18 | … | message for the operator (why it was refused) |
//!
//! A refused hello is followed by the server closing the connection. The
//! server gives the hello a time limit; a server at its connection limit
//! closes new connections without a word.
//!
//! ## Requests
//!
//! Then the client sends requests, any number in flight, each one frame:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `b"SVSQ"` |
//! | 4 | 2 | op code ([`Op`]) |
//! | 6 | 2 | flags (0) |
//! | 8 | 8 | request id (chosen by the client, unique among those in flight) |
//! | 16 | 8 | epoch (checked for fenced ops, see below; otherwise ignored) |
//! | 24 | 8 | arg0 |
//! | 32 | 8 | arg1 |
//! | 40 | 8 | arg2 |
//! | 48 | 4 | copy |
//! | 52 | 4 | column |
//! | 56 | 2 | medium length (≤ 255) |
//! | 58 | 2 | volume id length (≤ 255) |
//! | 60 | 4 | payload length (≤ max payload; only `Write` and `FrontCall` have one) |
//! | 64 | … | medium, volume id, payload |
//!
//! A slice is named by (medium, volume id, copy, column): a node holds
//! several media, and during a move within the node one slice is on two of
//! them. The args of each op are listed on [`Op`]; unused args are 0.
//!
//! ## Replies
//!
//! One reply per request, in any order:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `b"SVSR"` |
//! | 4 | 2 | status (0: done; else a [`Status`] code) |
//! | 6 | 2 | message length (≤ 4096; 0 when the status is 0) |
//! | 8 | 8 | request id |
//! | 16 | 4 | payload length (≤ max payload; exactly the length asked for by a successful read, 0 on failure) |
//! | 20 | 4 | reserved (0) |
//! | 24 | … | message, then payload |
//!
//! Payloads of replies (lists are records one after another, no count):
//! `Size`, `DataBytes`: u64. `Allocation`, `SnapshotAllocation`: runs of
//! (length u64, hole u8: 1 a hole, 0 data). `NextData`: empty (none) or
//! (start u64, end u64). `Snapshots`: (id u64, size u64, used bytes u64).
//! `SnapshotIds`, and the payload of `PlaceSnapshotParts`: u64 each. `SnapshotMapSince`: end u64, then the map
//! bytes. `Digest`, `RangeDigest`: u128. `StoredSlices`: (copy u32, column u32, partial u8,
//! volume id length u8, volume id). Reads: the bytes. `FrontCall`: the
//! node's answer, as opaque as the call (its medium is empty, its volume
//! id the volume whose front is called; the node's `FrontControl` reads
//! both, and refuses with `EOPNOTSUPP` while it runs no fronts).
//!
//! ## Bounds and errors
//!
//! Every length is checked against its bound before anything is allocated.
//! A frame whose fixed header is wrong (magic, flags, a length over its
//! bound) leaves the stream untrustworthy: the server answers it with
//! `BadRequest` (to the id in the header; 0 when the magic is wrong) and
//! closes the connection; a client that gets such a reply fails every
//! request in flight. A well-framed request the server
//! cannot run (unknown op, a payload on an op without one, a name that is
//! not UTF-8) gets `BadRequest` and the connection goes on.
//!
//! ## Epochs (fencing)
//!
//! `Write`, `PrepareWrite`, `Discard`, `Sync`, `CreateSnapshot`,
//! `DeleteSnapshot` and `Rollback` are fenced ([`Op::is_fenced`]): the
//! server keeps, per volume, the highest epoch it has accepted (durably,
//! through [`EpochStore`]). A fenced op with a lower epoch is refused with
//! `StaleEpoch` and not applied; a higher one is recorded durably before
//! its op is applied, and only once every op of older epochs in progress
//! on that volume has finished. Epoch 0 is what a volume starts at; fronts
//! use epochs from 1. Reads and the management ops (create, grow, delete a
//! slice, digest, stored slices) are not fenced: they come from the
//! control plane and from copies, not from a fan-out point.

mod backend;
mod client;
mod fence;
mod outbox;
mod sent;
mod server;
#[cfg(feature = "testing")]
pub mod testing;
mod wire;
mod write_digest;

pub use backend::{Authenticator, FrontControl, SliceBackend};

/// The two files of a slice's snapshot that a live copy writes on a node
/// ([`Op::WriteSnapshotPart`]): its map and its delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotPart {
    Map,
    Delta,
}

impl SnapshotPart {
    pub fn code(self) -> u64 {
        match self {
            SnapshotPart::Map => 0,
            SnapshotPart::Delta => 1,
        }
    }

    pub fn from_code(code: u64) -> Option<SnapshotPart> {
        match code {
            0 => Some(SnapshotPart::Map),
            1 => Some(SnapshotPart::Delta),
            _ => None,
        }
    }
}
pub use client::{remote_error, ClientTls, Replies, SliceClient};
pub use fence::{EpochFence, EpochStore, Fenced};
pub use sent::Sent;
pub use server::{ServerConfig, SliceServer};
pub use wire::{Op, RemoteError, Status, PROTOCOL_VERSION};
pub use write_digest::WriteDigests;

/// Names one slice on a storage node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SliceName {
    /// The medium (of the node) holding the slice.
    pub medium: String,
    pub volume: String,
    pub copy: u32,
    pub column: u32,
}

impl SliceName {
    pub fn new(medium: &str, volume: &str, copy: u32, column: u32) -> SliceName {
        SliceName {
            medium: medium.to_string(),
            volume: volume.to_string(),
            copy,
            column,
        }
    }
}

impl std::fmt::Display for SliceName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/c{}-k{} on {}",
            self.volume, self.copy, self.column, self.medium
        )
    }
}

/// One snapshot of a slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotInfo {
    pub id: u64,
    /// Bytes of the slice the snapshot covers (its size when taken).
    pub size: u64,
    /// Bytes allocated on disk by the snapshot's files.
    pub used_bytes: u64,
}

/// Part of a snapshot's map: the bytes from the offset asked for, and the
/// map's durable length after them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MapTail {
    pub bytes: Vec<u8>,
    pub end: u64,
}

/// A slice file found on a medium.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSlice {
    pub volume: String,
    pub copy: u32,
    pub column: u32,
    /// An unfinished copy, not a usable slice.
    pub partial: bool,
}
