//! The frames of the protocol (see the crate documentation): encoding,
//! and decoding that checks every length before it allocates.

use std::io::{self, Read};

use crate::{MapTail, SliceName, SnapshotInfo, StoredSlice};

pub const PROTOCOL_VERSION: u16 = 2;
pub(crate) const HELLO_MAGIC: [u8; 8] = *b"SVSSLICE";
pub(crate) const REQUEST_MAGIC: [u8; 4] = *b"SVSQ";
pub(crate) const REPLY_MAGIC: [u8; 4] = *b"SVSR";
pub(crate) const HELLO_LEN: usize = 16;
pub(crate) const HELLO_REPLY_LEN: usize = 18;
pub(crate) const REQUEST_LEN: usize = 64;
pub(crate) const REPLY_LEN: usize = 24;
pub(crate) const MAX_CREDENTIAL: usize = 4096;
pub(crate) const MAX_CALLER_NAME: usize = 256;
pub(crate) const MAX_NAME: usize = 255;
pub(crate) const MAX_MESSAGE: usize = 4096;
/// No server may announce a larger payload (what a client accepts).
pub(crate) const MAX_PAYLOAD_LIMIT: u32 = 64 * 1024 * 1024;

/// The largest payload copied into a message's one write (one segment, one
/// TLS record, several messages per write: see `outbox`); a larger one is
/// written from where it is, after its header.
pub(crate) const COPIED_PAYLOAD: usize = 64 * 1024;

/// What a connection's reader (the node's of requests, the client's of
/// replies) takes off the socket at once: a request or reply up to this
/// size (header, names and payload) costs one `read`; a larger payload is
/// read straight into its buffer.
pub(crate) const READ_BUFFER: usize = 128 << 10;

/// [`Op::Sync`]'s arg0: check that the slice is in place first.
pub const SYNC_CHECK_PRESENT: u64 = 1;

/// The operations, with their op codes and args (unused args are 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum Op {
    /// Reply: the slice's size (u64).
    Size = 1,
    /// arg0 offset, arg1 length (≤ max payload). Reply: the bytes.
    Read = 2,
    /// Fenced. arg0 offset, arg1 length: saves what snapshots need first.
    PrepareWrite = 3,
    /// Fenced. arg0 offset; the payload is the data.
    Write = 4,
    /// Fenced. arg0 offset, arg1 length: reads as zeros afterwards.
    Discard = 5,
    /// Fenced. Makes every write so far durable; with arg0 =
    /// [`SYNC_CHECK_PRESENT`], first fails (ENOENT) unless the slice is
    /// where it belongs, as [`Op::CheckPresent`] (a flush's two questions in
    /// one round trip).
    Sync = 6,
    /// arg0 offset, arg1 length. Reply: runs.
    Allocation = 7,
    /// arg0 offset, arg1 length: a hint; the client does not wait for it.
    WillNeed = 8,
    /// arg0 from, arg1 length. Reply: none, or (start, end).
    NextData = 9,
    /// arg0 from, arg1 length. Reply: u64.
    DataBytes = 10,
    /// Fails (ENOENT) unless the slice is where it belongs.
    CheckPresent = 11,
    /// Reply: the snapshots, oldest first.
    Snapshots = 12,
    /// Fenced. arg0 snapshot id.
    CreateSnapshot = 13,
    /// Fenced. arg0 snapshot id.
    DeleteSnapshot = 14,
    /// Fenced. arg0 snapshot id.
    Rollback = 15,
    /// arg0 snapshot id, arg1 offset, arg2 length. Reply: the bytes.
    ReadSnapshot = 16,
    /// arg0 snapshot id, arg1 offset, arg2 length. Reply: runs.
    SnapshotAllocation = 17,
    /// Reply: the ids of every snapshot with files, oldest first.
    SnapshotIds = 18,
    /// arg0 snapshot id, arg1 from. Reply: end, then the map bytes.
    SnapshotMapSince = 19,
    /// arg0 snapshot id, arg1 chunk, arg2 length. Reply: the bytes.
    ReadSnapshotChunk = 20,
    /// Fenced. arg0 snapshot id, arg1 part (0 map, 1 delta), arg2 offset;
    /// the payload is the bytes (none: the part's file is made, empty).
    /// Writes a live copy's snapshot file, not in place yet.
    WriteSnapshotPart = 21,
    /// arg0 snapshot id, arg1 offset, arg2 length. Reply: the bytes of the
    /// map part written so far (shorter at its end).
    ReadSnapshotMapPart = 22,
    /// As `ReadSnapshotMapPart`, of the delta part.
    ReadSnapshotDeltaPart = 23,
    /// Fenced. The payload: snapshot ids (u64 each). The parts written are
    /// made durable and put in place (deltas before maps), the slice's other
    /// snapshot files removed; the slice is opened again with them.
    PlaceSnapshotParts = 24,
    /// Fenced. Removes the slice's snapshot parts not in place.
    DropSnapshotParts = 25,
    /// Fenced. arg0 offset, arg1 seed; the payload is the data. Writes it,
    /// then reads the range back. Reply: its digest as
    /// [`Op::RangeDigest`] computes it with `seed` (u128): a copy verifies
    /// a chunk in the write's own round trip.
    WriteDigest = 26,
    /// arg0 offset, arg1 length: a hint to start writing the range back to
    /// the disk (a copy's final sync then has little left to do); the
    /// client does not wait for it.
    WriteBack = 27,
    /// arg0 size: creates the slice (or extends it). Durable on reply.
    CreateSlice = 32,
    /// arg0 size: extends the slice. Durable on reply.
    GrowSlice = 33,
    /// Removes the slice and its snapshot files.
    DeleteSlice = 34,
    /// Reply: the slice's digest (u128).
    Digest = 35,
    /// Only the medium is used. Reply: the slices stored on it.
    StoredSlices = 36,
    /// arg0 offset, arg1 length (≤ max payload), arg2 seed. Reply: the
    /// range's digest (u128), computed on the node: a resync compares a
    /// range without shipping the node's bytes.
    RangeDigest = 37,
    /// A call to the volume's front on the node (the control plane steering
    /// a job there). The volume name is the volume; the payload is the
    /// call and the reply its answer, both opaque to the protocol (the
    /// node's [`crate::FrontControl`] reads them). Not fenced: the call
    /// carries the front epoch it is meant for, and the front checks it.
    FrontCall = 48,
}

impl Op {
    const ALL: [Op; 34] = [
        Op::Size,
        Op::Read,
        Op::PrepareWrite,
        Op::Write,
        Op::Discard,
        Op::Sync,
        Op::Allocation,
        Op::WillNeed,
        Op::NextData,
        Op::DataBytes,
        Op::CheckPresent,
        Op::Snapshots,
        Op::CreateSnapshot,
        Op::DeleteSnapshot,
        Op::Rollback,
        Op::ReadSnapshot,
        Op::SnapshotAllocation,
        Op::SnapshotIds,
        Op::SnapshotMapSince,
        Op::ReadSnapshotChunk,
        Op::WriteSnapshotPart,
        Op::ReadSnapshotMapPart,
        Op::ReadSnapshotDeltaPart,
        Op::PlaceSnapshotParts,
        Op::DropSnapshotParts,
        Op::WriteDigest,
        Op::WriteBack,
        Op::CreateSlice,
        Op::GrowSlice,
        Op::DeleteSlice,
        Op::Digest,
        Op::StoredSlices,
        Op::RangeDigest,
        Op::FrontCall,
    ];

    pub fn code(self) -> u16 {
        self as u16
    }

    pub fn from_code(code: u16) -> Option<Op> {
        Op::ALL.into_iter().find(|op| op.code() == code)
    }

    /// Ops that change a slice on behalf of a fan-out point: they carry its
    /// epoch, and a stale one is refused.
    pub fn is_fenced(self) -> bool {
        matches!(
            self,
            Op::PrepareWrite
                | Op::Write
                | Op::Discard
                | Op::Sync
                | Op::CreateSnapshot
                | Op::DeleteSnapshot
                | Op::Rollback
                | Op::WriteSnapshotPart
                | Op::PlaceSnapshotParts
                | Op::DropSnapshotParts
                | Op::WriteDigest
        )
    }
}

/// The status of a reply or of the hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    Ok,
    /// The op failed on the node with this (Linux) errno, 1 to 4095.
    Errno(u16),
    /// A fenced op's epoch is below the volume's highest: not applied.
    StaleEpoch,
    /// The request was malformed or names an unknown op.
    BadRequest,
    /// The hello's credential was refused.
    Unauthorized,
    /// The hello's protocol version is not spoken by the server.
    UnsupportedVersion,
    /// The reply would exceed the max payload (ask for less).
    TooLarge,
    /// The server is shutting down.
    ShuttingDown,
    /// A code this version does not know.
    Unknown(u16),
}

impl Status {
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 0,
            Status::Errno(e) => e,
            Status::StaleEpoch => 0x1000,
            Status::BadRequest => 0x1001,
            Status::Unauthorized => 0x1002,
            Status::UnsupportedVersion => 0x1003,
            Status::TooLarge => 0x1004,
            Status::ShuttingDown => 0x1005,
            Status::Unknown(c) => c,
        }
    }

    pub fn from_code(code: u16) -> Status {
        match code {
            0 => Status::Ok,
            1..=0x0fff => Status::Errno(code),
            0x1000 => Status::StaleEpoch,
            0x1001 => Status::BadRequest,
            0x1002 => Status::Unauthorized,
            0x1003 => Status::UnsupportedVersion,
            0x1004 => Status::TooLarge,
            0x1005 => Status::ShuttingDown,
            c => Status::Unknown(c),
        }
    }

    /// The status an error of the backend is sent with: its errno, else
    /// one for its kind.
    pub(crate) fn of_error(e: &io::Error) -> Status {
        if let Some(code) = e.raw_os_error() {
            if let Ok(code) = u16::try_from(code) {
                if (1..=0x0fff).contains(&code) {
                    return Status::Errno(code);
                }
            }
        }
        let errno = match e.kind() {
            io::ErrorKind::NotFound => libc::ENOENT,
            io::ErrorKind::PermissionDenied => libc::EACCES,
            io::ErrorKind::InvalidInput | io::ErrorKind::InvalidData => libc::EINVAL,
            io::ErrorKind::AlreadyExists => libc::EEXIST,
            io::ErrorKind::TimedOut => libc::ETIMEDOUT,
            io::ErrorKind::Unsupported => libc::EOPNOTSUPP,
            io::ErrorKind::OutOfMemory => libc::ENOMEM,
            io::ErrorKind::Interrupted => libc::EINTR,
            // What the node's fronts answer for a front that is not (or no
            // longer) theirs: the caller may try again elsewhere.
            io::ErrorKind::NotConnected => libc::ENOTCONN,
            // A full medium is not a failed one: the front must not take
            // it for EIO (a storage node's snapshot budget says ENOSPC by
            // kind, without an errno).
            io::ErrorKind::StorageFull => libc::ENOSPC,
            io::ErrorKind::QuotaExceeded => libc::EDQUOT,
            io::ErrorKind::FileTooLarge => libc::EFBIG,
            io::ErrorKind::ReadOnlyFilesystem => libc::EROFS,
            _ => libc::EIO,
        };
        Status::Errno(errno as u16)
    }
}

/// A request the server refused or could not run: its status and the
/// server's message. Carried inside the `io::Error` the client returns
/// (see [`crate::remote_error`]), so the caller can tell it from a failure
/// of the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteError {
    pub status: Status,
    pub message: String,
}

impl RemoteError {
    /// The node's errno, when the op failed on the node.
    pub fn errno(&self) -> Option<i32> {
        match self.status {
            Status::Errno(e) => Some(i32::from(e)),
            _ => None,
        }
    }

    pub(crate) fn into_io(self) -> io::Error {
        let kind = match self.status {
            Status::Errno(e) => io::Error::from_raw_os_error(i32::from(e)).kind(),
            Status::StaleEpoch | Status::Unauthorized => io::ErrorKind::PermissionDenied,
            Status::BadRequest | Status::TooLarge => io::ErrorKind::InvalidInput,
            Status::UnsupportedVersion => io::ErrorKind::Unsupported,
            Status::ShuttingDown => io::ErrorKind::ConnectionAborted,
            Status::Ok | Status::Unknown(_) => io::ErrorKind::Other,
        };
        io::Error::new(kind, self)
    }
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.status {
            Status::Errno(e) => format!("errno {e}"),
            s => format!("{s:?}"),
        };
        write!(f, "storage node: {} ({what})", self.message)
    }
}

impl std::error::Error for RemoteError {}

pub(crate) fn protocol_error(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    let mut x = [0u8; 2];
    x.copy_from_slice(&b[at..at + 2]);
    u16::from_le_bytes(x)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// Reads `len` bytes (already checked against its bound).
pub(crate) fn read_bytes<R: Read>(r: &mut R, len: usize) -> io::Result<Vec<u8>> {
    let mut v = vec![0u8; len];
    r.read_exact(&mut v)?;
    Ok(v)
}

fn utf8(bytes: Vec<u8>, what: &str) -> io::Result<String> {
    String::from_utf8(bytes).map_err(|_| protocol_error(format!("{what} is not UTF-8")))
}

/// The client's hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hello {
    pub version: u16,
    pub credential: String,
    pub name: String,
}

impl Hello {
    pub fn encode(&self) -> io::Result<Vec<u8>> {
        if self.credential.len() > MAX_CREDENTIAL || self.name.len() > MAX_CALLER_NAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "credential over {MAX_CREDENTIAL} bytes or caller name over \
                     {MAX_CALLER_NAME} bytes"
                ),
            ));
        }
        let mut b = Vec::with_capacity(HELLO_LEN + self.credential.len() + self.name.len());
        b.extend_from_slice(&HELLO_MAGIC);
        b.extend_from_slice(&self.version.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&(self.credential.len() as u16).to_le_bytes());
        b.extend_from_slice(&(self.name.len() as u16).to_le_bytes());
        b.extend_from_slice(self.credential.as_bytes());
        b.extend_from_slice(self.name.as_bytes());
        Ok(b)
    }

    pub fn decode<R: Read>(r: &mut R) -> io::Result<Hello> {
        let mut h = [0u8; HELLO_LEN];
        r.read_exact(&mut h)?;
        if h[0..8] != HELLO_MAGIC {
            return Err(protocol_error("not an svs slice client (bad hello magic)"));
        }
        let version = u16_at(&h, 8);
        let credential_len = usize::from(u16_at(&h, 12));
        let name_len = usize::from(u16_at(&h, 14));
        if credential_len > MAX_CREDENTIAL || name_len > MAX_CALLER_NAME {
            return Err(protocol_error(format!(
                "hello with a credential of {credential_len} bytes or a name of \
                 {name_len} bytes (at most {MAX_CREDENTIAL} and {MAX_CALLER_NAME})"
            )));
        }
        let credential = utf8(read_bytes(r, credential_len)?, "the credential")?;
        let name = utf8(read_bytes(r, name_len)?, "the caller name")?;
        Ok(Hello {
            version,
            credential,
            name,
        })
    }
}

/// The server's answer to the hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HelloReply {
    pub version: u16,
    pub status: Status,
    pub max_payload: u32,
    pub message: String,
}

impl HelloReply {
    pub fn encode(&self) -> Vec<u8> {
        let message = truncated(&self.message);
        let mut b = Vec::with_capacity(HELLO_REPLY_LEN + message.len());
        b.extend_from_slice(&HELLO_MAGIC);
        b.extend_from_slice(&self.version.to_le_bytes());
        b.extend_from_slice(&self.status.code().to_le_bytes());
        b.extend_from_slice(&self.max_payload.to_le_bytes());
        b.extend_from_slice(&(message.len() as u16).to_le_bytes());
        b.extend_from_slice(message.as_bytes());
        b
    }

    pub fn decode<R: Read>(r: &mut R) -> io::Result<HelloReply> {
        let mut h = [0u8; HELLO_REPLY_LEN];
        r.read_exact(&mut h)?;
        if h[0..8] != HELLO_MAGIC {
            return Err(protocol_error("not an svs storage node (bad hello magic)"));
        }
        let message_len = usize::from(u16_at(&h, 16));
        if message_len > MAX_MESSAGE {
            return Err(protocol_error(format!(
                "hello reply message of {message_len} bytes"
            )));
        }
        let message = String::from_utf8_lossy(&read_bytes(r, message_len)?).into_owned();
        Ok(HelloReply {
            version: u16_at(&h, 8),
            status: Status::from_code(u16_at(&h, 10)),
            max_payload: u32_at(&h, 12),
            message,
        })
    }
}

/// A message cut to [`MAX_MESSAGE`] bytes at a character boundary.
pub(crate) fn truncated(message: &str) -> &str {
    if message.len() <= MAX_MESSAGE {
        return message;
    }
    let mut end = MAX_MESSAGE;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}

/// The fixed part of a request, as read (the op code not yet checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RequestHeader {
    pub op: u16,
    pub id: u64,
    pub epoch: u64,
    pub args: [u64; 3],
    pub copy: u32,
    pub column: u32,
    pub medium_len: u16,
    pub volume_len: u16,
    pub payload_len: u32,
}

impl RequestHeader {
    /// The header of request `id`: `op` on `slice` at `epoch`, with
    /// `payload_len` bytes of payload (names checked against the protocol's
    /// bound by the caller).
    pub fn for_slice(
        op: Op,
        id: u64,
        epoch: u64,
        args: [u64; 3],
        slice: &SliceName,
        payload_len: usize,
    ) -> RequestHeader {
        RequestHeader {
            op: op.code(),
            id,
            epoch,
            args,
            copy: slice.copy,
            column: slice.column,
            medium_len: slice.medium.len() as u16,
            volume_len: slice.volume.len() as u16,
            payload_len: payload_len as u32,
        }
    }

    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut b = [0u8; REQUEST_LEN];
        b[0..4].copy_from_slice(&REQUEST_MAGIC);
        b[4..6].copy_from_slice(&self.op.to_le_bytes());
        b[8..16].copy_from_slice(&self.id.to_le_bytes());
        b[16..24].copy_from_slice(&self.epoch.to_le_bytes());
        b[24..32].copy_from_slice(&self.args[0].to_le_bytes());
        b[32..40].copy_from_slice(&self.args[1].to_le_bytes());
        b[40..48].copy_from_slice(&self.args[2].to_le_bytes());
        b[48..52].copy_from_slice(&self.copy.to_le_bytes());
        b[52..56].copy_from_slice(&self.column.to_le_bytes());
        b[56..58].copy_from_slice(&self.medium_len.to_le_bytes());
        b[58..60].copy_from_slice(&self.volume_len.to_le_bytes());
        b[60..64].copy_from_slice(&self.payload_len.to_le_bytes());
        b
    }

    /// Parses and bounds a header. The error carries the id when the
    /// header got that far (to address the refusal).
    pub fn decode(b: &[u8; REQUEST_LEN], max_payload: u32) -> Result<RequestHeader, (u64, String)> {
        let id = u64_at(b, 8);
        if b[0..4] != REQUEST_MAGIC {
            return Err((0, "bad request magic: not a request frame".into()));
        }
        let h = RequestHeader {
            op: u16_at(b, 4),
            id,
            epoch: u64_at(b, 16),
            args: [u64_at(b, 24), u64_at(b, 32), u64_at(b, 40)],
            copy: u32_at(b, 48),
            column: u32_at(b, 52),
            medium_len: u16_at(b, 56),
            volume_len: u16_at(b, 58),
            payload_len: u32_at(b, 60),
        };
        if u16_at(b, 6) != 0 {
            return Err((id, "request flags must be 0".into()));
        }
        if usize::from(h.medium_len) > MAX_NAME || usize::from(h.volume_len) > MAX_NAME {
            return Err((
                id,
                format!("medium or volume name over {MAX_NAME} bytes in a request"),
            ));
        }
        if h.payload_len > max_payload {
            return Err((
                id,
                format!(
                    "request payload of {} bytes, over the max payload of {max_payload}",
                    h.payload_len
                ),
            ));
        }
        Ok(h)
    }
}

/// The fixed part of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReplyHeader {
    pub status: u16,
    pub message_len: u16,
    pub id: u64,
    pub payload_len: u32,
}

impl ReplyHeader {
    pub fn encode(&self) -> [u8; REPLY_LEN] {
        let mut b = [0u8; REPLY_LEN];
        b[0..4].copy_from_slice(&REPLY_MAGIC);
        b[4..6].copy_from_slice(&self.status.to_le_bytes());
        b[6..8].copy_from_slice(&self.message_len.to_le_bytes());
        b[8..16].copy_from_slice(&self.id.to_le_bytes());
        b[16..20].copy_from_slice(&self.payload_len.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; REPLY_LEN]) -> io::Result<ReplyHeader> {
        if b[0..4] != REPLY_MAGIC {
            return Err(protocol_error("bad reply magic: not a reply frame"));
        }
        let h = ReplyHeader {
            status: u16_at(b, 4),
            message_len: u16_at(b, 6),
            id: u64_at(b, 8),
            payload_len: u32_at(b, 16),
        };
        if usize::from(h.message_len) > MAX_MESSAGE {
            return Err(protocol_error(format!(
                "reply message of {} bytes",
                h.message_len
            )));
        }
        Ok(h)
    }
}

// Reply payloads.

pub(crate) fn encode_runs(runs: &[(u64, bool)]) -> Vec<u8> {
    let mut b = Vec::with_capacity(runs.len() * 9);
    for &(len, hole) in runs {
        b.extend_from_slice(&len.to_le_bytes());
        b.push(u8::from(hole));
    }
    b
}

pub(crate) fn decode_runs(b: &[u8]) -> io::Result<Vec<(u64, bool)>> {
    if !b.len().is_multiple_of(9) {
        return Err(protocol_error("allocation reply is not whole runs"));
    }
    b.chunks_exact(9)
        .map(|r| match r[8] {
            0 => Ok((u64_at(r, 0), false)),
            1 => Ok((u64_at(r, 0), true)),
            _ => Err(protocol_error("allocation run neither hole nor data")),
        })
        .collect()
}

pub(crate) fn decode_u64(b: &[u8]) -> io::Result<u64> {
    if b.len() != 8 {
        return Err(protocol_error("reply payload is not one u64"));
    }
    Ok(u64_at(b, 0))
}

pub(crate) fn encode_next_data(next: Option<(u64, u64)>) -> Vec<u8> {
    match next {
        None => Vec::new(),
        Some((start, end)) => [start.to_le_bytes(), end.to_le_bytes()].concat(),
    }
}

pub(crate) fn decode_next_data(b: &[u8]) -> io::Result<Option<(u64, u64)>> {
    match b.len() {
        0 => Ok(None),
        16 => Ok(Some((u64_at(b, 0), u64_at(b, 8)))),
        _ => Err(protocol_error("next-data reply of the wrong length")),
    }
}

pub(crate) fn encode_snapshots(list: &[SnapshotInfo]) -> Vec<u8> {
    let mut b = Vec::with_capacity(list.len() * 24);
    for s in list {
        b.extend_from_slice(&s.id.to_le_bytes());
        b.extend_from_slice(&s.size.to_le_bytes());
        b.extend_from_slice(&s.used_bytes.to_le_bytes());
    }
    b
}

pub(crate) fn decode_snapshots(b: &[u8]) -> io::Result<Vec<SnapshotInfo>> {
    if !b.len().is_multiple_of(24) {
        return Err(protocol_error("snapshot list is not whole records"));
    }
    Ok(b.chunks_exact(24)
        .map(|r| SnapshotInfo {
            id: u64_at(r, 0),
            size: u64_at(r, 8),
            used_bytes: u64_at(r, 16),
        })
        .collect())
}

pub(crate) fn encode_ids(ids: &[u64]) -> Vec<u8> {
    ids.iter().flat_map(|id| id.to_le_bytes()).collect()
}

pub(crate) fn decode_ids(b: &[u8]) -> io::Result<Vec<u64>> {
    if !b.len().is_multiple_of(8) {
        return Err(protocol_error("id list is not whole ids"));
    }
    Ok(b.chunks_exact(8).map(|r| u64_at(r, 0)).collect())
}

pub(crate) fn encode_map_tail(tail: &MapTail) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + tail.bytes.len());
    b.extend_from_slice(&tail.end.to_le_bytes());
    b.extend_from_slice(&tail.bytes);
    b
}

pub(crate) fn decode_map_tail(mut b: Vec<u8>) -> io::Result<MapTail> {
    if b.len() < 8 {
        return Err(protocol_error("map reply shorter than its end"));
    }
    let end = u64_at(&b, 0);
    b.drain(..8);
    Ok(MapTail { bytes: b, end })
}

pub(crate) fn decode_digest(b: &[u8]) -> io::Result<u128> {
    let d: [u8; 16] = b
        .try_into()
        .map_err(|_| protocol_error("digest reply is not 16 bytes"))?;
    Ok(u128::from_le_bytes(d))
}

pub(crate) fn encode_stored(list: &[StoredSlice]) -> io::Result<Vec<u8>> {
    let mut b = Vec::new();
    for s in list {
        let len = u8::try_from(s.volume.len())
            .map_err(|_| io::Error::other(format!("volume id {:?} too long", s.volume)))?;
        b.extend_from_slice(&s.copy.to_le_bytes());
        b.extend_from_slice(&s.column.to_le_bytes());
        b.push(u8::from(s.partial));
        b.push(len);
        b.extend_from_slice(s.volume.as_bytes());
    }
    Ok(b)
}

pub(crate) fn decode_stored(mut b: &[u8]) -> io::Result<Vec<StoredSlice>> {
    let mut list = Vec::new();
    while !b.is_empty() {
        if b.len() < 10 {
            return Err(protocol_error("stored-slice record cut short"));
        }
        let len = usize::from(b[9]);
        let Some(volume) = b.get(10..10 + len) else {
            return Err(protocol_error("stored-slice volume id cut short"));
        };
        list.push(StoredSlice {
            volume: utf8(volume.to_vec(), "a stored slice's volume id")?,
            copy: u32_at(b, 0),
            column: u32_at(b, 4),
            partial: b[8] != 0,
        });
        b = &b[10 + len..];
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_header_round_trips_and_bad_ones_are_refused() {
        let h = RequestHeader {
            op: Op::Write.code(),
            id: 7,
            epoch: 9,
            args: [1 << 40, 2, 3],
            copy: 1,
            column: 2,
            medium_len: 3,
            volume_len: 4,
            payload_len: 4096,
        };
        let b = h.encode();
        assert_eq!(RequestHeader::decode(&b, 4096), Ok(h));
        assert!(RequestHeader::decode(&b, 4095).is_err());
        let mut bad = b;
        bad[0] = b'X';
        assert!(RequestHeader::decode(&bad, 4096).is_err());
        let mut bad = b;
        bad[56] = 0;
        bad[57] = 1; // medium length 256
        assert_eq!(RequestHeader::decode(&bad, 4096).map_err(|e| e.0), Err(7));
    }

    #[test]
    fn payloads_round_trip() {
        let runs = vec![(4096, true), (1 << 33, false)];
        assert_eq!(decode_runs(&encode_runs(&runs)).unwrap(), runs);
        assert!(decode_runs(&[0; 10]).is_err());
        assert_eq!(decode_next_data(&encode_next_data(None)).unwrap(), None);
        assert_eq!(
            decode_next_data(&encode_next_data(Some((1, 2)))).unwrap(),
            Some((1, 2))
        );
        let stored = vec![StoredSlice {
            volume: "v".into(),
            copy: 1,
            column: 2,
            partial: true,
        }];
        assert_eq!(
            decode_stored(&encode_stored(&stored).unwrap()).unwrap(),
            stored
        );
        assert!(decode_stored(&[0; 11]).is_err());
        let tail = MapTail {
            bytes: vec![1, 2, 3],
            end: 99,
        };
        assert_eq!(decode_map_tail(encode_map_tail(&tail)).unwrap(), tail);
    }

    #[test]
    fn statuses_and_errors_keep_their_codes() {
        for code in [0, 5, 28, 0x1000, 0x1005, 0x2000] {
            assert_eq!(Status::from_code(code).code(), code);
        }
        let e = io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(Status::of_error(&e), Status::Errno(28));
        let e = io::Error::new(io::ErrorKind::NotFound, "gone");
        assert_eq!(Status::of_error(&e), Status::Errno(2));
        let e = io::Error::new(io::ErrorKind::StorageFull, "snapshot budget spent");
        assert_eq!(Status::of_error(&e), Status::Errno(28));
        assert_eq!(truncated(&"é".repeat(3000)).len(), 4096);
    }
}
