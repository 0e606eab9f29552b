//! NBD wire format: constants, frame parsing (always check, then parse) and
//! encoding. Pure functions over byte slices, no I/O. All integers are
//! big-endian on the wire.

use std::io;
use thiserror::Error;

// ---- Magic numbers -------------------------------------------------------

/// `NBDMAGIC`, the first 8 bytes the server sends.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: newstyle magic (server greeting) and option request magic.
pub const IHAVEOPT: u64 = 0x4948_4156_454F_5054;
/// Magic of every option reply.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Magic of every transmission request.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic of a simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// Magic of a structured reply chunk.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

// ---- Handshake flags -----------------------------------------------------

/// Server handshake flag: fixed newstyle negotiation.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Server handshake flag: may omit the 124 zeroes after `NBD_OPT_EXPORT_NAME`.
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Handshake flags this server sends.
pub const HANDSHAKE_FLAGS: u16 = FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES;

/// Client flag: the client speaks fixed newstyle.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flag: no 124 zeroes after `NBD_OPT_EXPORT_NAME`'s reply.
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;
/// Every client flag this server knows (it advertises both).
pub const KNOWN_CLIENT_FLAGS: u32 = FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES;

// ---- Transmission flags --------------------------------------------------

pub const FLAG_HAS_FLAGS: u16 = 1 << 0;
pub const FLAG_READ_ONLY: u16 = 1 << 1;
pub const FLAG_SEND_FLUSH: u16 = 1 << 2;
pub const FLAG_SEND_FUA: u16 = 1 << 3;
pub const FLAG_ROTATIONAL: u16 = 1 << 4;
pub const FLAG_SEND_TRIM: u16 = 1 << 5;
pub const FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const FLAG_SEND_DF: u16 = 1 << 7;
pub const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;
pub const FLAG_SEND_RESIZE: u16 = 1 << 9;
pub const FLAG_SEND_CACHE: u16 = 1 << 10;
pub const FLAG_SEND_FAST_ZERO: u16 = 1 << 11;

// ---- Options -------------------------------------------------------------

pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_PEEK_EXPORT: u32 = 4;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;
pub const OPT_LIST_META_CONTEXT: u32 = 9;
pub const OPT_SET_META_CONTEXT: u32 = 10;
pub const OPT_EXTENDED_HEADERS: u32 = 11;

// ---- Option replies ------------------------------------------------------

pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_META_CONTEXT: u32 = 4;
const REP_ERR: u32 = 1 << 31;
pub const REP_ERR_UNSUP: u32 = REP_ERR | 1;
pub const REP_ERR_POLICY: u32 = REP_ERR | 2;
pub const REP_ERR_INVALID: u32 = REP_ERR | 3;
pub const REP_ERR_PLATFORM: u32 = REP_ERR | 4;
pub const REP_ERR_TLS_REQD: u32 = REP_ERR | 5;
pub const REP_ERR_UNKNOWN: u32 = REP_ERR | 6;
pub const REP_ERR_SHUTDOWN: u32 = REP_ERR | 7;
pub const REP_ERR_BLOCK_SIZE_REQD: u32 = REP_ERR | 8;
pub const REP_ERR_TOO_BIG: u32 = REP_ERR | 9;

// ---- NBD_REP_INFO types --------------------------------------------------

pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

// ---- Commands and command flags ------------------------------------------

pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_CACHE: u16 = 5;
pub const CMD_WRITE_ZEROES: u16 = 6;
pub const CMD_BLOCK_STATUS: u16 = 7;

pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
pub const CMD_FLAG_DF: u16 = 1 << 2;
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;
pub const CMD_FLAG_FAST_ZERO: u16 = 1 << 4;

// ---- Structured replies --------------------------------------------------

/// Structured reply flag: the last chunk of the reply.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;

pub const REPLY_TYPE_NONE: u16 = 0;
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
pub const REPLY_TYPE_OFFSET_HOLE: u16 = 2;
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
pub const REPLY_TYPE_ERROR: u16 = (1 << 15) + 1;
pub const REPLY_TYPE_ERROR_OFFSET: u16 = (1 << 15) + 2;

/// Bytes of a structured reply chunk header: magic, flags, type, handle,
/// length.
pub const STRUCTURED_REPLY_LEN: usize = 20;

// ---- Metadata contexts ---------------------------------------------------

/// The one metadata context this server knows: allocation (holes, zeroes).
pub const CONTEXT_BASE_ALLOCATION: &str = "base:allocation";
/// The id `base:allocation` gets from `NBD_OPT_SET_META_CONTEXT`.
pub const ALLOCATION_CONTEXT_ID: u32 = 1;
/// `base:allocation` status: the extent is not allocated.
pub const STATE_HOLE: u32 = 1 << 0;
/// `base:allocation` status: the extent reads as zeroes.
pub const STATE_ZERO: u32 = 1 << 1;

// ---- Error values (simple reply error field) -----------------------------

pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const ENOMEM: u32 = 12;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const EOVERFLOW: u32 = 75;
pub const ENOTSUP: u32 = 95;
pub const ESHUTDOWN: u32 = 108;

// ---- Sizes and bounds ----------------------------------------------------

/// Bytes of the server greeting: NBDMAGIC, IHAVEOPT, handshake flags.
pub const GREETING_LEN: usize = 18;
/// Bytes of an option request header: magic, option, length.
pub const OPTION_HEADER_LEN: usize = 16;
/// Bytes of a transmission request header.
pub const REQUEST_LEN: usize = 28;
/// Bytes of a simple reply header.
pub const SIMPLE_REPLY_LEN: usize = 16;
/// Zero padding after `NBD_OPT_EXPORT_NAME`'s reply without `NO_ZEROES`.
pub const EXPORT_NAME_PADDING: usize = 124;
/// Largest option data the server reads; a longer option closes the
/// connection (the longest legitimate one, `NBD_OPT_GO`, carries a string
/// of at most 4096 bytes and a short list).
pub const MAX_OPTION_DATA: u32 = 64 * 1024;
/// Longest string (export name) the protocol allows.
pub const MAX_STRING: usize = 4096;
/// Block sizes advertised with `NBD_INFO_BLOCK_SIZE` (maximum: max_payload).
pub const MIN_BLOCK_SIZE: u32 = 1;
pub const PREFERRED_BLOCK_SIZE: u32 = 4096;

/// A frame the peer sent that breaks the protocol.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ProtocolError {
    #[error("unknown client flags {0:#x}")]
    UnknownClientFlags(u32),
    #[error("bad option magic {0:#018x}")]
    BadOptionMagic(u64),
    #[error("option {option} data of {length} bytes is over the {MAX_OPTION_DATA} byte bound")]
    OptionTooLarge { option: u32, length: u32 },
    #[error("bad request magic {0:#010x}")]
    BadRequestMagic(u32),
    #[error("malformed option data: {0}")]
    Malformed(&'static str),
    #[error("invalid export name: {0}")]
    InvalidName(&'static str),
}

fn be_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// The client's flags, after the greeting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientFlags {
    pub fixed_newstyle: bool,
    pub no_zeroes: bool,
}

/// Parses the client flags; any bit the server does not know is refused.
pub fn parse_client_flags(buf: &[u8; 4]) -> Result<ClientFlags, ProtocolError> {
    let flags = u32::from_be_bytes(*buf);
    if flags & !KNOWN_CLIENT_FLAGS != 0 {
        return Err(ProtocolError::UnknownClientFlags(flags));
    }
    Ok(ClientFlags {
        fixed_newstyle: flags & FLAG_C_FIXED_NEWSTYLE != 0,
        no_zeroes: flags & FLAG_C_NO_ZEROES != 0,
    })
}

/// An option request header; its `length` bytes of data follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionHeader {
    pub option: u32,
    pub length: u32,
}

/// Parses an option request header: the magic must be `IHAVEOPT` and the
/// data no longer than [`MAX_OPTION_DATA`].
pub fn parse_option_header(buf: &[u8; OPTION_HEADER_LEN]) -> Result<OptionHeader, ProtocolError> {
    let magic = be_u64(buf, 0);
    if magic != IHAVEOPT {
        return Err(ProtocolError::BadOptionMagic(magic));
    }
    let option = be_u32(buf, 8);
    let length = be_u32(buf, 12);
    if length > MAX_OPTION_DATA {
        return Err(ProtocolError::OptionTooLarge { option, length });
    }
    Ok(OptionHeader { option, length })
}

/// Checks an export name: UTF-8, no NUL, at most [`MAX_STRING`] bytes.
pub fn parse_name(bytes: &[u8]) -> Result<String, ProtocolError> {
    if bytes.len() > MAX_STRING {
        return Err(ProtocolError::InvalidName("longer than 4096 bytes"));
    }
    if bytes.contains(&0) {
        return Err(ProtocolError::InvalidName("contains NUL"));
    }
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(s.to_owned()),
        Err(_) => Err(ProtocolError::InvalidName("not UTF-8")),
    }
}

/// The data of `NBD_OPT_INFO` / `NBD_OPT_GO`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoRequest {
    pub name: String,
    /// `NBD_INFO_*` items the client asks for.
    pub requests: Vec<u16>,
}

/// Parses `NBD_OPT_INFO` / `NBD_OPT_GO` data: 32-bit name length, name,
/// 16-bit count, count × 16-bit info types, and nothing else.
pub fn parse_info_request(data: &[u8]) -> Result<InfoRequest, ProtocolError> {
    if data.len() < 6 {
        return Err(ProtocolError::Malformed("shorter than 6 bytes"));
    }
    let name_len = be_u32(data, 0) as usize;
    // Check before slicing: the name plus the 16-bit count must fit.
    if name_len > data.len() - 6 {
        return Err(ProtocolError::Malformed(
            "name length beyond the option data",
        ));
    }
    let name = parse_name(&data[4..4 + name_len])?;
    let rest = &data[4 + name_len..];
    let count = be_u16(rest, 0) as usize;
    let list = &rest[2..];
    if list.len() != count * 2 {
        return Err(ProtocolError::Malformed(
            "information request count does not match the data length",
        ));
    }
    let requests = list
        .chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect();
    Ok(InfoRequest { name, requests })
}

/// A transmission request header (the payload of `WRITE` follows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub flags: u16,
    pub command: u16,
    pub handle: u64,
    pub offset: u64,
    pub length: u32,
}

/// Parses a request header; the magic must be [`REQUEST_MAGIC`].
pub fn parse_request(buf: &[u8; REQUEST_LEN]) -> Result<Request, ProtocolError> {
    let magic = be_u32(buf, 0);
    if magic != REQUEST_MAGIC {
        return Err(ProtocolError::BadRequestMagic(magic));
    }
    Ok(Request {
        flags: be_u16(buf, 4),
        command: be_u16(buf, 6),
        handle: be_u64(buf, 8),
        offset: be_u64(buf, 16),
        length: be_u32(buf, 24),
    })
}

/// Whether `[offset, offset + length)` lies within a device of `size` bytes
/// (false on overflow).
pub fn range_ok(offset: u64, length: u32, size: u64) -> bool {
    match offset.checked_add(u64::from(length)) {
        Some(end) => end <= size,
        None => false,
    }
}

/// What the transmission flags of an export depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportTraits {
    pub read_only: bool,
    /// The client negotiated structured replies (`NBD_FLAG_SEND_DF` then).
    pub structured: bool,
    /// A flush on one connection covers every connection's completed
    /// writes (`NBD_FLAG_CAN_MULTI_CONN`; read-only exports always can).
    pub shared_flush: bool,
}

/// The transmission flags of an export. `CACHE` and `FAST_ZERO` are always
/// advertised: a cache request is a hint, and a write zeroes that would not
/// be fast is answered `ENOTSUP` at once, as the protocol allows.
pub fn transmission_flags(export: ExportTraits) -> u16 {
    let mut flags = FLAG_HAS_FLAGS
        | FLAG_SEND_FLUSH
        | FLAG_SEND_FUA
        | FLAG_SEND_TRIM
        | FLAG_SEND_WRITE_ZEROES
        | FLAG_SEND_CACHE
        | FLAG_SEND_FAST_ZERO;
    if export.read_only {
        flags |= FLAG_READ_ONLY;
    }
    if export.structured {
        flags |= FLAG_SEND_DF;
    }
    if export.read_only || export.shared_flush {
        flags |= FLAG_CAN_MULTI_CONN;
    }
    flags
}

/// The NBD error value for a device error: `ENOSPC` for a full device, a
/// quota or a too-large file (as the protocol asks), `ESHUTDOWN` for a
/// device going away (the OS error, see [`shutting_down`]), `EIO`
/// otherwise.
pub fn io_error_value(err: &io::Error) -> u32 {
    if err.raw_os_error() == Some(ESHUTDOWN as i32) {
        return ESHUTDOWN;
    }
    match err.kind() {
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded | io::ErrorKind::FileTooLarge => {
            ENOSPC
        }
        _ => EIO,
    }
}

/// The error a device answers when it is going away (the server shuts down,
/// or the volume is now served elsewhere): clients answered `ESHUTDOWN`
/// send the request again on a new connection.
pub fn shutting_down() -> io::Error {
    io::Error::from_raw_os_error(ESHUTDOWN as i32)
}

/// The server greeting: NBDMAGIC, IHAVEOPT, handshake flags.
pub fn greeting() -> [u8; GREETING_LEN] {
    let mut b = [0u8; GREETING_LEN];
    b[0..8].copy_from_slice(&NBDMAGIC.to_be_bytes());
    b[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    b[16..18].copy_from_slice(&HANDSHAKE_FLAGS.to_be_bytes());
    b
}

/// An option reply: magic, option, reply type, length, data.
pub fn option_reply(option: u32, reply_type: u32, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + data.len());
    b.extend_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&reply_type.to_be_bytes());
    // Replies are built from bounded data (names ≤ 4 KiB, fixed infos).
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    b
}

/// `NBD_REP_SERVER` data: name length, name.
pub fn rep_server_data(name: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(4 + name.len());
    b.extend_from_slice(&(name.len() as u32).to_be_bytes());
    b.extend_from_slice(name.as_bytes());
    b
}

/// `NBD_INFO_EXPORT` data: type, size, transmission flags.
pub fn info_export(size: u64, flags: u16) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[0..2].copy_from_slice(&INFO_EXPORT.to_be_bytes());
    b[2..10].copy_from_slice(&size.to_be_bytes());
    b[10..12].copy_from_slice(&flags.to_be_bytes());
    b
}

/// `NBD_INFO_BLOCK_SIZE` data: type, minimum, preferred, maximum.
pub fn info_block_size(min: u32, preferred: u32, max: u32) -> [u8; 14] {
    let mut b = [0u8; 14];
    b[0..2].copy_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    b[2..6].copy_from_slice(&min.to_be_bytes());
    b[6..10].copy_from_slice(&preferred.to_be_bytes());
    b[10..14].copy_from_slice(&max.to_be_bytes());
    b
}

/// `NBD_INFO_NAME` data: type, name.
pub fn info_name(name: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(2 + name.len());
    b.extend_from_slice(&INFO_NAME.to_be_bytes());
    b.extend_from_slice(name.as_bytes());
    b
}

/// The reply to `NBD_OPT_EXPORT_NAME`: size, transmission flags, and 124
/// zeroes unless the client negotiated `NO_ZEROES`.
pub fn export_name_reply(size: u64, flags: u16, no_zeroes: bool) -> Vec<u8> {
    let mut b = Vec::with_capacity(10 + EXPORT_NAME_PADDING);
    b.extend_from_slice(&size.to_be_bytes());
    b.extend_from_slice(&flags.to_be_bytes());
    if !no_zeroes {
        b.resize(10 + EXPORT_NAME_PADDING, 0);
    }
    b
}

/// A simple reply header: magic, error, handle (READ data follows on success).
pub fn simple_reply(error: u32, handle: u64) -> [u8; SIMPLE_REPLY_LEN] {
    let mut b = [0u8; SIMPLE_REPLY_LEN];
    b[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&error.to_be_bytes());
    b[8..16].copy_from_slice(&handle.to_be_bytes());
    b
}

/// The data of `NBD_OPT_LIST_META_CONTEXT` / `NBD_OPT_SET_META_CONTEXT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaContextRequest {
    pub name: String,
    pub queries: Vec<String>,
}

/// Splits a 32-bit length and that many bytes (a string) off `data`.
fn take_string<'a>(
    data: &'a [u8],
    what: &'static str,
) -> Result<(String, &'a [u8]), ProtocolError> {
    if data.len() < 4 {
        return Err(ProtocolError::Malformed(what));
    }
    let len = be_u32(data, 0) as usize;
    // Check before slicing: the string must fit in what is left.
    if len > data.len() - 4 {
        return Err(ProtocolError::Malformed(what));
    }
    Ok((parse_name(&data[4..4 + len])?, &data[4 + len..]))
}

/// Parses meta context option data: 32-bit export name length, name,
/// 32-bit query count, then each query as 32-bit length and string; nothing
/// may follow.
pub fn parse_meta_context_request(data: &[u8]) -> Result<MetaContextRequest, ProtocolError> {
    let (name, rest) = take_string(data, "export name length beyond the option data")?;
    if rest.len() < 4 {
        return Err(ProtocolError::Malformed("no query count"));
    }
    let count = be_u32(rest, 0);
    let mut rest = &rest[4..];
    // Each query takes at least 4 bytes: a count beyond that is a lie, and
    // must not size an allocation.
    if count as usize > rest.len() / 4 {
        return Err(ProtocolError::Malformed("more queries counted than sent"));
    }
    let mut queries = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let (query, after) = take_string(rest, "query length beyond the option data")?;
        queries.push(query);
        rest = after;
    }
    if !rest.is_empty() {
        return Err(ProtocolError::Malformed("data after the last query"));
    }
    Ok(MetaContextRequest { name, queries })
}

/// The contexts this server has that a query names: `base:allocation` for
/// itself, and (only when listing) for the `base:` wildcard. Queries of
/// other namespaces select nothing, as the protocol requires.
pub fn query_matches_allocation(query: &str, listing: bool) -> bool {
    query == CONTEXT_BASE_ALLOCATION || (listing && query == "base:")
}

/// `NBD_REP_META_CONTEXT` data: context id, name.
pub fn rep_meta_context_data(id: u32, name: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(4 + name.len());
    b.extend_from_slice(&id.to_be_bytes());
    b.extend_from_slice(name.as_bytes());
    b
}

/// A structured reply chunk header: magic, flags, type, handle, length.
pub fn structured_header(
    flags: u16,
    reply_type: u16,
    handle: u64,
    length: u32,
) -> [u8; STRUCTURED_REPLY_LEN] {
    let mut b = [0u8; STRUCTURED_REPLY_LEN];
    b[0..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&flags.to_be_bytes());
    b[6..8].copy_from_slice(&reply_type.to_be_bytes());
    b[8..16].copy_from_slice(&handle.to_be_bytes());
    b[16..20].copy_from_slice(&length.to_be_bytes());
    b
}

fn done_flag(done: bool) -> u16 {
    if done {
        REPLY_FLAG_DONE
    } else {
        0
    }
}

/// `NBD_REPLY_TYPE_NONE` with `DONE`: the end of a successful reply.
pub fn none_chunk(handle: u64) -> [u8; STRUCTURED_REPLY_LEN] {
    structured_header(REPLY_FLAG_DONE, REPLY_TYPE_NONE, handle, 0)
}

/// The header and offset of an `NBD_REPLY_TYPE_OFFSET_DATA` chunk; its
/// `data_len` bytes of data follow (written from the read buffer as they
/// are, never copied into the chunk). `data_len` is at most `max_payload`,
/// far below `u32::MAX - 8`.
pub fn offset_data_header(handle: u64, offset: u64, data_len: u32, done: bool) -> [u8; 28] {
    let mut b = [0u8; 28];
    b[..20].copy_from_slice(&structured_header(
        done_flag(done),
        REPLY_TYPE_OFFSET_DATA,
        handle,
        data_len + 8,
    ));
    b[20..28].copy_from_slice(&offset.to_be_bytes());
    b
}

/// An `NBD_REPLY_TYPE_OFFSET_HOLE` chunk: `len` zero bytes at `offset`.
pub fn offset_hole_chunk(handle: u64, offset: u64, len: u32, done: bool) -> [u8; 32] {
    let mut b = [0u8; 32];
    b[..20].copy_from_slice(&structured_header(
        done_flag(done),
        REPLY_TYPE_OFFSET_HOLE,
        handle,
        12,
    ));
    b[20..28].copy_from_slice(&offset.to_be_bytes());
    b[28..32].copy_from_slice(&len.to_be_bytes());
    b
}

/// The final error chunk of a reply: `NBD_REPLY_TYPE_ERROR_OFFSET` when the
/// offset is known, else `NBD_REPLY_TYPE_ERROR`; the message is cut to the
/// protocol's 4096 bytes.
pub fn error_chunk(handle: u64, error: u32, message: &str, offset: Option<u64>) -> Vec<u8> {
    let mut end = message.len().min(MAX_STRING);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    let message = &message.as_bytes()[..end];
    let (reply_type, extra) = match offset {
        Some(_) => (REPLY_TYPE_ERROR_OFFSET, 8),
        None => (REPLY_TYPE_ERROR, 0),
    };
    let length = 6 + message.len() + extra;
    let mut b = Vec::with_capacity(STRUCTURED_REPLY_LEN + length);
    b.extend_from_slice(&structured_header(
        REPLY_FLAG_DONE,
        reply_type,
        handle,
        length as u32,
    ));
    b.extend_from_slice(&error.to_be_bytes());
    b.extend_from_slice(&(message.len() as u16).to_be_bytes());
    b.extend_from_slice(message);
    if let Some(offset) = offset {
        b.extend_from_slice(&offset.to_be_bytes());
    }
    b
}

/// One `NBD_REPLY_TYPE_BLOCK_STATUS` descriptor: extent length, status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor {
    pub length: u32,
    pub status: u32,
}

/// Most descriptors one block status reply carries (64 KiB of them); the
/// protocol lets a server describe less than asked, and clients ask again
/// from where the reply ended.
pub const MAX_DESCRIPTORS: usize = 8192;

/// The `base:allocation` descriptors for a block status request of `len`
/// bytes from the device's extents (which start at the request's offset):
/// neighbours of equal status merged, nothing past `len`, at most
/// [`MAX_DESCRIPTORS`], and only the first with `req_one`.
pub fn allocation_descriptors(
    extents: &[crate::Extent],
    len: u32,
    req_one: bool,
) -> Vec<Descriptor> {
    let limit = if req_one { 1 } else { MAX_DESCRIPTORS };
    let mut out: Vec<Descriptor> = Vec::new();
    let mut left = u64::from(len);
    for e in extents {
        if left == 0 {
            break;
        }
        // Never beyond the request: `take` fits in u32 as `left` does.
        let take = e.len.min(left);
        if take == 0 {
            continue;
        }
        left -= take;
        let status = if e.hole { STATE_HOLE | STATE_ZERO } else { 0 };
        if let Some(last) = out.last_mut().filter(|l| l.status == status) {
            last.length += take as u32;
        } else if out.len() == limit {
            break;
        } else {
            out.push(Descriptor {
                length: take as u32,
                status,
            });
        }
    }
    out
}

/// The final `NBD_REPLY_TYPE_BLOCK_STATUS` chunk for one context.
pub fn block_status_chunk(handle: u64, context: u32, descriptors: &[Descriptor]) -> Vec<u8> {
    let length = 4 + 8 * descriptors.len();
    let mut b = Vec::with_capacity(STRUCTURED_REPLY_LEN + length);
    b.extend_from_slice(&structured_header(
        REPLY_FLAG_DONE,
        REPLY_TYPE_BLOCK_STATUS,
        handle,
        length as u32,
    ));
    b.extend_from_slice(&context.to_be_bytes());
    for d in descriptors {
        b.extend_from_slice(&d.length.to_be_bytes());
        b.extend_from_slice(&d.status.to_be_bytes());
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn option_header(magic: u64, option: u32, length: u32) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..8].copy_from_slice(&magic.to_be_bytes());
        b[8..12].copy_from_slice(&option.to_be_bytes());
        b[12..16].copy_from_slice(&length.to_be_bytes());
        b
    }

    fn info_data(name: &[u8], declared_len: u32, requests: &[u16], count: u16) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&declared_len.to_be_bytes());
        b.extend_from_slice(name);
        b.extend_from_slice(&count.to_be_bytes());
        for r in requests {
            b.extend_from_slice(&r.to_be_bytes());
        }
        b
    }

    #[test]
    fn client_flags_with_known_bits_are_accepted() {
        assert_eq!(
            parse_client_flags(&3u32.to_be_bytes()),
            Ok(ClientFlags {
                fixed_newstyle: true,
                no_zeroes: true
            })
        );
        assert_eq!(
            parse_client_flags(&0u32.to_be_bytes()),
            Ok(ClientFlags {
                fixed_newstyle: false,
                no_zeroes: false
            })
        );
    }

    #[test]
    fn client_flags_with_an_unknown_bit_are_refused() {
        assert_eq!(
            parse_client_flags(&4u32.to_be_bytes()),
            Err(ProtocolError::UnknownClientFlags(4))
        );
        assert_eq!(
            parse_client_flags(&0x8000_0001u32.to_be_bytes()),
            Err(ProtocolError::UnknownClientFlags(0x8000_0001))
        );
    }

    #[test]
    fn an_option_header_with_the_right_magic_parses() {
        let h = parse_option_header(&option_header(IHAVEOPT, OPT_GO, 12)).unwrap();
        assert_eq!(
            h,
            OptionHeader {
                option: OPT_GO,
                length: 12
            }
        );
    }

    #[test]
    fn an_option_header_with_a_wrong_magic_is_refused() {
        assert_eq!(
            parse_option_header(&option_header(NBDMAGIC, OPT_GO, 0)),
            Err(ProtocolError::BadOptionMagic(NBDMAGIC))
        );
    }

    #[test]
    fn option_data_over_the_bound_is_refused_before_any_allocation() {
        assert!(parse_option_header(&option_header(IHAVEOPT, OPT_LIST, MAX_OPTION_DATA)).is_ok());
        assert_eq!(
            parse_option_header(&option_header(IHAVEOPT, OPT_LIST, MAX_OPTION_DATA + 1)),
            Err(ProtocolError::OptionTooLarge {
                option: OPT_LIST,
                length: MAX_OPTION_DATA + 1
            })
        );
        assert_eq!(
            parse_option_header(&option_header(IHAVEOPT, 99, u32::MAX)),
            Err(ProtocolError::OptionTooLarge {
                option: 99,
                length: u32::MAX
            })
        );
    }

    #[test]
    fn an_info_request_with_a_name_and_requests_parses() {
        let data = info_data(b"vol1", 4, &[INFO_BLOCK_SIZE, INFO_NAME], 2);
        assert_eq!(
            parse_info_request(&data),
            Ok(InfoRequest {
                name: "vol1".into(),
                requests: vec![INFO_BLOCK_SIZE, INFO_NAME]
            })
        );
    }

    #[test]
    fn an_info_request_with_an_empty_name_and_no_requests_parses() {
        let data = info_data(b"", 0, &[], 0);
        assert_eq!(
            parse_info_request(&data),
            Ok(InfoRequest {
                name: String::new(),
                requests: vec![]
            })
        );
    }

    #[test]
    fn an_info_request_shorter_than_six_bytes_is_malformed() {
        assert!(matches!(
            parse_info_request(&[0, 0, 0, 0, 0]),
            Err(ProtocolError::Malformed(_))
        ));
        assert!(matches!(
            parse_info_request(&[]),
            Err(ProtocolError::Malformed(_))
        ));
    }

    #[test]
    fn an_info_request_whose_name_length_overruns_the_data_is_malformed() {
        // Declares 5 bytes of name but only 4 are there before the count.
        let data = info_data(b"vol1", 5, &[], 0);
        assert!(matches!(
            parse_info_request(&data),
            Err(ProtocolError::Malformed(_))
        ));
        let data = info_data(b"vol1", u32::MAX, &[], 0);
        assert!(matches!(
            parse_info_request(&data),
            Err(ProtocolError::Malformed(_))
        ));
    }

    #[test]
    fn an_info_request_whose_count_disagrees_with_the_data_is_malformed() {
        let data = info_data(b"v", 1, &[INFO_EXPORT], 2);
        assert!(matches!(
            parse_info_request(&data),
            Err(ProtocolError::Malformed(_))
        ));
        let data = info_data(b"v", 1, &[INFO_EXPORT, INFO_NAME], 1);
        assert!(matches!(
            parse_info_request(&data),
            Err(ProtocolError::Malformed(_))
        ));
        let mut data = info_data(b"v", 1, &[], 0);
        data.push(0); // a stray odd byte
        assert!(matches!(
            parse_info_request(&data),
            Err(ProtocolError::Malformed(_))
        ));
    }

    #[test]
    fn names_must_be_utf8_without_nul_and_at_most_4096_bytes() {
        assert_eq!(parse_name("disk-é".as_bytes()), Ok("disk-é".into()));
        assert!(matches!(
            parse_name(&[0xff, 0xfe]),
            Err(ProtocolError::InvalidName(_))
        ));
        assert!(matches!(
            parse_name(b"a\0b"),
            Err(ProtocolError::InvalidName(_))
        ));
        assert!(parse_name(&[b'a'; MAX_STRING]).is_ok());
        assert!(matches!(
            parse_name(&[b'a'; MAX_STRING + 1]),
            Err(ProtocolError::InvalidName(_))
        ));
    }

    #[test]
    fn a_request_header_parses_every_field() {
        let mut b = [0u8; REQUEST_LEN];
        b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&CMD_FLAG_FUA.to_be_bytes());
        b[6..8].copy_from_slice(&CMD_WRITE.to_be_bytes());
        b[8..16].copy_from_slice(&0x0102_0304_0506_0708u64.to_be_bytes());
        b[16..24].copy_from_slice(&(1u64 << 40).to_be_bytes());
        b[24..28].copy_from_slice(&65536u32.to_be_bytes());
        assert_eq!(
            parse_request(&b),
            Ok(Request {
                flags: CMD_FLAG_FUA,
                command: CMD_WRITE,
                handle: 0x0102_0304_0506_0708,
                offset: 1 << 40,
                length: 65536,
            })
        );
    }

    #[test]
    fn a_request_header_with_a_wrong_magic_is_refused() {
        let mut b = [0u8; REQUEST_LEN];
        b[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
        assert_eq!(
            parse_request(&b),
            Err(ProtocolError::BadRequestMagic(SIMPLE_REPLY_MAGIC))
        );
    }

    #[test]
    fn ranges_past_the_end_or_overflowing_are_rejected() {
        assert!(range_ok(0, 4096, 4096));
        assert!(range_ok(4096, 0, 4096));
        assert!(!range_ok(4096, 1, 4096));
        assert!(!range_ok(4097, 0, 4096));
        assert!(!range_ok(u64::MAX, 1, u64::MAX));
        assert!(!range_ok(u64::MAX - 10, u32::MAX, u64::MAX));
    }

    fn traits(read_only: bool, structured: bool, shared_flush: bool) -> ExportTraits {
        ExportTraits {
            read_only,
            structured,
            shared_flush,
        }
    }

    #[test]
    fn transmission_flags_advertise_the_supported_commands_and_read_only() {
        let rw = transmission_flags(traits(false, false, true));
        assert_eq!(rw, 0b1101_0110_1101);
        assert_eq!(rw & FLAG_READ_ONLY, 0);
        assert_eq!(
            transmission_flags(traits(true, false, true)),
            rw | FLAG_READ_ONLY
        );
        assert_eq!(rw & (FLAG_SEND_DF | FLAG_ROTATIONAL | FLAG_SEND_RESIZE), 0);
    }

    #[test]
    fn dont_fragment_is_advertised_only_with_structured_replies() {
        assert_eq!(
            transmission_flags(traits(false, false, true)) & FLAG_SEND_DF,
            0
        );
        assert_ne!(
            transmission_flags(traits(false, true, true)) & FLAG_SEND_DF,
            0
        );
    }

    #[test]
    fn multi_conn_is_advertised_with_a_shared_flush_or_read_only() {
        assert_eq!(
            transmission_flags(traits(false, true, false)) & FLAG_CAN_MULTI_CONN,
            0
        );
        assert_ne!(
            transmission_flags(traits(false, false, true)) & FLAG_CAN_MULTI_CONN,
            0
        );
        assert_ne!(
            transmission_flags(traits(true, false, false)) & FLAG_CAN_MULTI_CONN,
            0
        );
    }

    fn meta_data(name: &str, queries: &[&str], count: u32) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&(name.len() as u32).to_be_bytes());
        b.extend_from_slice(name.as_bytes());
        b.extend_from_slice(&count.to_be_bytes());
        for q in queries {
            b.extend_from_slice(&(q.len() as u32).to_be_bytes());
            b.extend_from_slice(q.as_bytes());
        }
        b
    }

    #[test]
    fn a_meta_context_request_parses_its_name_and_queries() {
        assert_eq!(
            parse_meta_context_request(&meta_data("vol", &["base:allocation", "qemu:x"], 2)),
            Ok(MetaContextRequest {
                name: "vol".into(),
                queries: vec!["base:allocation".into(), "qemu:x".into()],
            })
        );
        assert_eq!(
            parse_meta_context_request(&meta_data("", &[], 0)),
            Ok(MetaContextRequest {
                name: String::new(),
                queries: vec![],
            })
        );
    }

    #[test]
    fn malformed_meta_context_requests_are_refused() {
        let malformed = |d: &[u8]| {
            matches!(
                parse_meta_context_request(d),
                Err(ProtocolError::Malformed(_))
            )
        };
        // More queries counted than sent (also a huge count).
        assert!(malformed(&meta_data("vol", &["base:allocation"], 2)));
        assert!(malformed(&meta_data("vol", &[], u32::MAX)));
        // Fewer counted than sent: data after the last query.
        assert!(malformed(&meta_data("vol", &["base:allocation"], 0)));
        // No count at all; a name length beyond the data.
        assert!(malformed(&[0, 0, 0, 1, b'v']));
        assert!(malformed(&[0, 0, 0, 9, b'v', 0, 0, 0, 0]));
        let mut d = meta_data("vol", &["base:allocation"], 1);
        d.truncate(d.len() - 1); // a query cut short
        assert!(malformed(&d));
        // Strings must be UTF-8 without NUL.
        assert!(matches!(
            parse_meta_context_request(&meta_data("v\0l", &[], 0)),
            Err(ProtocolError::InvalidName(_))
        ));
    }

    #[test]
    fn only_base_allocation_matches_and_the_base_wildcard_only_when_listing() {
        assert!(query_matches_allocation("base:allocation", false));
        assert!(query_matches_allocation("base:allocation", true));
        assert!(query_matches_allocation("base:", true));
        assert!(!query_matches_allocation("base:", false));
        assert!(!query_matches_allocation("base:other", true));
        assert!(!query_matches_allocation("qemu:dirty-bitmap:x", true));
    }

    #[test]
    fn structured_chunks_carry_magic_flags_type_handle_and_length() {
        let h = structured_header(REPLY_FLAG_DONE, REPLY_TYPE_OFFSET_DATA, 7, 100);
        assert_eq!(&h[0..4], &[0x66, 0x8e, 0x33, 0xef]);
        assert_eq!(&h[4..6], &[0, 1]);
        assert_eq!(&h[6..8], &[0, 1]);
        assert_eq!(&h[8..16], &7u64.to_be_bytes());
        assert_eq!(&h[16..20], &100u32.to_be_bytes());
        assert_eq!(none_chunk(9), structured_header(1, 0, 9, 0));
    }

    #[test]
    fn data_and_hole_chunks_carry_their_offset() {
        let d = offset_data_header(3, 1 << 33, 4096, false);
        assert_eq!(
            &d[..20],
            &structured_header(0, REPLY_TYPE_OFFSET_DATA, 3, 4104)
        );
        assert_eq!(&d[20..], &(1u64 << 33).to_be_bytes());
        let h = offset_hole_chunk(3, 512, 65536, true);
        assert_eq!(
            &h[..20],
            &structured_header(1, REPLY_TYPE_OFFSET_HOLE, 3, 12)
        );
        assert_eq!(&h[20..28], &512u64.to_be_bytes());
        assert_eq!(&h[28..32], &65536u32.to_be_bytes());
    }

    #[test]
    fn error_chunks_carry_the_error_the_message_and_the_offset_when_known() {
        let e = error_chunk(5, EIO, "bad", Some(4096));
        assert_eq!(
            &e[..20],
            &structured_header(1, REPLY_TYPE_ERROR_OFFSET, 5, 17)
        );
        assert_eq!(&e[20..24], &EIO.to_be_bytes());
        assert_eq!(&e[24..26], &3u16.to_be_bytes());
        assert_eq!(&e[26..29], b"bad");
        assert_eq!(&e[29..37], &4096u64.to_be_bytes());
        let e = error_chunk(5, EINVAL, "", None);
        assert_eq!(&e[..20], &structured_header(1, REPLY_TYPE_ERROR, 5, 6));
        assert_eq!(e.len(), 26);
        // Messages are cut to 4096 bytes, on a character boundary.
        let long = "é".repeat(3000);
        let e = error_chunk(5, EIO, &long, None);
        let len = u16::from_be_bytes([e[24], e[25]]) as usize;
        assert_eq!(len, 4096);
        assert!(std::str::from_utf8(&e[26..26 + len]).is_ok());
    }

    #[test]
    fn a_block_status_chunk_lists_context_and_descriptors() {
        let d = [
            Descriptor {
                length: 4096,
                status: 0,
            },
            Descriptor {
                length: 8192,
                status: STATE_HOLE | STATE_ZERO,
            },
        ];
        let c = block_status_chunk(2, ALLOCATION_CONTEXT_ID, &d);
        assert_eq!(
            &c[..20],
            &structured_header(1, REPLY_TYPE_BLOCK_STATUS, 2, 20)
        );
        assert_eq!(&c[20..24], &1u32.to_be_bytes());
        assert_eq!(&c[24..32], &[0, 0, 0x10, 0, 0, 0, 0, 0]);
        assert_eq!(&c[32..40], &[0, 0, 0x20, 0, 0, 0, 0, 3]);
    }

    fn ext(len: u64, hole: bool) -> crate::Extent {
        crate::Extent { len, hole }
    }

    fn desc(length: u32, hole: bool) -> Descriptor {
        let status = if hole { STATE_HOLE | STATE_ZERO } else { 0 };
        Descriptor { length, status }
    }

    #[test]
    fn allocation_descriptors_merge_equal_neighbours_and_end_at_the_request() {
        let extents = [
            ext(100, false),
            ext(50, false),
            ext(200, true),
            ext(1 << 40, false),
        ];
        assert_eq!(
            allocation_descriptors(&extents, 1000, false),
            vec![desc(150, false), desc(200, true), desc(650, false)]
        );
        assert_eq!(
            allocation_descriptors(&extents, 120, false),
            vec![desc(120, false)]
        );
        assert_eq!(
            allocation_descriptors(&[ext(0, true), ext(10, true)], 100, false),
            vec![desc(10, true)]
        );
    }

    #[test]
    fn with_req_one_only_the_first_extent_is_described() {
        let extents = [ext(100, false), ext(50, false), ext(200, true)];
        assert_eq!(
            allocation_descriptors(&extents, 1000, true),
            vec![desc(150, false)]
        );
        assert_eq!(
            allocation_descriptors(&extents, 10, true),
            vec![desc(10, false)]
        );
    }

    #[test]
    fn allocation_descriptors_are_bounded() {
        let extents: Vec<_> = (0..MAX_DESCRIPTORS as u64 + 10)
            .map(|i| ext(1, i % 2 == 0))
            .collect();
        let d = allocation_descriptors(&extents, u32::MAX, false);
        assert_eq!(d.len(), MAX_DESCRIPTORS);
    }

    #[test]
    fn storage_full_maps_to_enospc_and_other_errors_to_eio() {
        assert_eq!(
            io_error_value(&io::Error::from(io::ErrorKind::StorageFull)),
            ENOSPC
        );
        assert_eq!(
            io_error_value(&io::Error::from(io::ErrorKind::QuotaExceeded)),
            ENOSPC
        );
        assert_eq!(
            io_error_value(&io::Error::from(io::ErrorKind::FileTooLarge)),
            ENOSPC
        );
        assert_eq!(io_error_value(&io::Error::from_raw_os_error(28)), ENOSPC);
        assert_eq!(io_error_value(&io::Error::other("boom")), EIO);
        // What a volume with no healthy copy of a range answers.
        assert_eq!(io_error_value(&io::Error::from_raw_os_error(5)), EIO);
        assert_eq!(io_error_value(&shutting_down()), ESHUTDOWN);
        assert_eq!(
            io_error_value(&io::Error::from(io::ErrorKind::UnexpectedEof)),
            EIO
        );
    }

    #[test]
    fn the_greeting_is_nbdmagic_ihaveopt_and_the_handshake_flags() {
        assert_eq!(&greeting(), b"NBDMAGICIHAVEOPT\x00\x03");
    }

    #[test]
    fn option_replies_carry_magic_option_type_length_and_data() {
        let r = option_reply(OPT_LIST, REP_SERVER, &rep_server_data("ab"));
        assert_eq!(
            r,
            [
                &OPTION_REPLY_MAGIC.to_be_bytes()[..],
                &3u32.to_be_bytes(),
                &2u32.to_be_bytes(),
                &6u32.to_be_bytes(),
                &2u32.to_be_bytes(),
                b"ab",
            ]
            .concat()
        );
    }

    #[test]
    fn info_replies_have_the_lengths_the_protocol_requires() {
        let e = info_export(1 << 30, 0x1ed);
        assert_eq!(e.len(), 12);
        assert_eq!(&e[0..2], &[0, 0]);
        assert_eq!(&e[2..10], &(1u64 << 30).to_be_bytes());
        assert_eq!(&e[10..12], &0x1edu16.to_be_bytes());
        let b = info_block_size(1, 4096, 1 << 25);
        assert_eq!(b.len(), 14);
        assert_eq!(&b[0..2], &[0, 3]);
        assert_eq!(&b[10..14], &(1u32 << 25).to_be_bytes());
        assert_eq!(info_name("x"), vec![0, 1, b'x']);
    }

    #[test]
    fn the_export_name_reply_pads_with_zeroes_unless_no_zeroes() {
        assert_eq!(export_name_reply(512, 1, true).len(), 10);
        let padded = export_name_reply(512, 1, false);
        assert_eq!(padded.len(), 134);
        assert!(padded[10..].iter().all(|&b| b == 0));
    }

    #[test]
    fn a_simple_reply_is_magic_error_handle() {
        let r = simple_reply(EINVAL, 7);
        assert_eq!(&r[0..4], &SIMPLE_REPLY_MAGIC.to_be_bytes());
        assert_eq!(&r[4..8], &22u32.to_be_bytes());
        assert_eq!(&r[8..16], &7u64.to_be_bytes());
    }
}
