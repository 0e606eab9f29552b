//! Structured replies, metadata contexts and block status, cache and fast
//! zeroes, spoken by hand on the wire against the real server.

mod common;

use common::*;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use svs_nbd::protocol::*;
use svs_nbd::BlockDevice;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

fn meta_data(name: &str, queries: &[&str]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&(name.len() as u32).to_be_bytes());
    b.extend_from_slice(name.as_bytes());
    b.extend_from_slice(&(queries.len() as u32).to_be_bytes());
    for q in queries {
        b.extend_from_slice(&(q.len() as u32).to_be_bytes());
        b.extend_from_slice(q.as_bytes());
    }
    b
}

/// The replies to one meta context option: (id, name) per context, then the
/// final reply type.
async fn meta_context(
    s: &mut TcpStream,
    option: u32,
    name: &str,
    queries: &[&str],
) -> (Vec<(u32, String)>, u32) {
    send_option(s, option, &meta_data(name, queries)).await;
    let mut contexts = Vec::new();
    loop {
        let r = read_option_reply(s).await;
        assert_eq!(r.option, option);
        if r.reply_type != REP_META_CONTEXT {
            return (contexts, r.reply_type);
        }
        let id = u32::from_be_bytes(r.data[0..4].try_into().unwrap());
        contexts.push((id, String::from_utf8(r.data[4..].to_vec()).unwrap()));
    }
}

async fn structured_replies(s: &mut TcpStream) {
    send_option(s, OPT_STRUCTURED_REPLY, &[]).await;
    let r = read_option_reply(s).await;
    assert_eq!((r.option, r.reply_type), (OPT_STRUCTURED_REPLY, REP_ACK));
}

/// In transmission with `name`, structured replies negotiated, and
/// `base:allocation` selected when `allocation`. Returns the flags too.
async fn connect_structured(server: &TestServer, name: &str, allocation: bool) -> (TcpStream, u16) {
    let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    structured_replies(&mut s).await;
    if allocation {
        let (contexts, end) =
            meta_context(&mut s, OPT_SET_META_CONTEXT, name, &["base:allocation"]).await;
        assert_eq!(end, REP_ACK);
        assert_eq!(
            contexts,
            vec![(ALLOCATION_CONTEXT_ID, "base:allocation".to_string())]
        );
    }
    let r = info_or_go(&mut s, OPT_GO, name, &[]).await;
    assert_eq!(r.end, REP_ACK);
    (s, r.flags.unwrap())
}

#[derive(Debug)]
struct Chunk {
    flags: u16,
    kind: u16,
    payload: Vec<u8>,
}

impl Chunk {
    fn be32(&self, at: usize) -> u32 {
        u32::from_be_bytes(self.payload[at..at + 4].try_into().unwrap())
    }
    fn be64(&self, at: usize) -> u64 {
        u64::from_be_bytes(self.payload[at..at + 8].try_into().unwrap())
    }
}

/// The chunks of one structured reply, up to the one flagged DONE.
async fn read_chunks(s: &mut TcpStream, handle: u64) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    loop {
        let h = read_n(s, STRUCTURED_REPLY_LEN).await.unwrap();
        assert_eq!(
            u32::from_be_bytes(h[0..4].try_into().unwrap()),
            STRUCTURED_REPLY_MAGIC,
            "a structured reply"
        );
        assert_eq!(u64::from_be_bytes(h[8..16].try_into().unwrap()), handle);
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
        let chunk = Chunk {
            flags: u16::from_be_bytes([h[4], h[5]]),
            kind: u16::from_be_bytes([h[6], h[7]]),
            payload: read_n(s, len).await.unwrap(),
        };
        let done = chunk.flags & REPLY_FLAG_DONE != 0;
        chunks.push(chunk);
        if done {
            return chunks;
        }
    }
}

async fn send(s: &mut TcpStream, command: u16, flags: u16, handle: u64, offset: u64, len: u32) {
    s.write_all(&request(command, flags, handle, offset, len))
        .await
        .unwrap();
}

/// A read's content chunks as (offset, Some(data) | None for a hole of len).
fn content(chunks: &[Chunk]) -> Vec<(u64, u64, bool)> {
    chunks
        .iter()
        .map(|c| match c.kind {
            REPLY_TYPE_OFFSET_DATA => (c.be64(0), c.payload.len() as u64 - 8, false),
            REPLY_TYPE_OFFSET_HOLE => (c.be64(0), u64::from(c.be32(8)), true),
            other => panic!("unexpected chunk type {other}: {c:?}"),
        })
        .collect()
}

/// A 4 MiB sparse file with data at [64 KiB, 128 KiB) and [1 MiB, 1 MiB + 4 KiB).
fn sparse_device(dir: &tempfile::TempDir) -> Arc<FileDevice> {
    let dev = FileDevice::create(&dir.path().join("disk.img"), 4 * MIB).unwrap();
    dev.file.write_all_at(&[0xa1; 64 * 1024], 64 * KIB).unwrap();
    dev.file.write_all_at(&[0xb2; 4096], MIB).unwrap();
    dev
}

#[tokio::test]
async fn meta_contexts_are_listed_and_selected_once_structured_replies_are_negotiated() {
    let exports = TestExports::new();
    exports.add("vol", MemDevice::new(MIB as usize, 0));
    let server = TestServer::start(exports).await;
    let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;

    // Before structured replies: refused.
    let (contexts, end) = meta_context(&mut s, OPT_LIST_META_CONTEXT, "vol", &[]).await;
    assert_eq!((contexts.len(), end), (0, REP_ERR_INVALID));
    structured_replies(&mut s).await;

    let allocation = vec![(0, "base:allocation".to_string())];
    // Listing: everything, the base: wildcard, the context itself.
    for queries in [
        &[][..],
        &["base:"],
        &["base:allocation"],
        &["x-other:a", "base:"],
    ] {
        let (contexts, end) = meta_context(&mut s, OPT_LIST_META_CONTEXT, "vol", queries).await;
        assert_eq!(end, REP_ACK, "{queries:?}");
        assert_eq!(contexts, allocation, "{queries:?}");
    }
    // Other namespaces and unknown leaves select nothing, without error.
    for queries in [&["qemu:dirty-bitmap:b"][..], &["base:other"]] {
        let (contexts, end) = meta_context(&mut s, OPT_LIST_META_CONTEXT, "vol", queries).await;
        assert_eq!((contexts.len(), end), (0, REP_ACK), "{queries:?}");
    }
    // Setting: no query and the wildcard select nothing.
    for queries in [&[][..], &["base:"]] {
        let (contexts, end) = meta_context(&mut s, OPT_SET_META_CONTEXT, "vol", queries).await;
        assert_eq!((contexts.len(), end), (0, REP_ACK), "{queries:?}");
    }
    let (contexts, end) =
        meta_context(&mut s, OPT_SET_META_CONTEXT, "nope", &["base:allocation"]).await;
    assert_eq!((contexts.len(), end), (0, REP_ERR_UNKNOWN));
    let mut bad = meta_data("vol", &["base:allocation"]);
    bad.truncate(bad.len() - 2);
    send_option(&mut s, OPT_SET_META_CONTEXT, &bad).await;
    assert_eq!(read_option_reply(&mut s).await.reply_type, REP_ERR_INVALID);
    let (contexts, end) =
        meta_context(&mut s, OPT_SET_META_CONTEXT, "vol", &["base:allocation"]).await;
    assert_eq!(end, REP_ACK);
    assert_eq!(
        contexts,
        vec![(ALLOCATION_CONTEXT_ID, "base:allocation".to_string())]
    );

    let r = info_or_go(&mut s, OPT_GO, "vol", &[]).await;
    assert_eq!(r.end, REP_ACK);
    let flags = r.flags.unwrap();
    assert_ne!(flags & FLAG_SEND_DF, 0, "DF with structured replies");
    assert_ne!(flags & FLAG_SEND_CACHE, 0);
    assert_ne!(flags & FLAG_SEND_FAST_ZERO, 0);
    send(&mut s, CMD_BLOCK_STATUS, 0, 5, 0, 4096).await;
    let chunks = read_chunks(&mut s, 5).await;
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].kind, REPLY_TYPE_BLOCK_STATUS);
    disconnect(s).await;
}

#[tokio::test]
async fn reads_answer_holes_with_hole_chunks_and_data_with_data_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let dev = sparse_device(&dir);
    let exports = TestExports::new();
    exports.add("vol", dev.clone());
    let server = TestServer::start(exports).await;
    let (mut s, _) = connect_structured(&server, "vol", false).await;

    send(&mut s, CMD_READ, 0, 1, 0, 2 * MIB as u32).await;
    let chunks = read_chunks(&mut s, 1).await;
    assert_eq!(
        content(&chunks),
        vec![
            (0, 64 * KIB, true),
            (64 * KIB, 64 * KIB, false),
            (128 * KIB, MIB - 128 * KIB, true),
            (MIB, 4 * KIB, false),
            (MIB + 4 * KIB, MIB - 4 * KIB, true),
        ]
    );
    // Only the last chunk ends the reply.
    assert!(chunks[..4].iter().all(|c| c.flags & REPLY_FLAG_DONE == 0));
    assert!(chunks[1].payload[8..].iter().all(|&b| b == 0xa1));
    assert!(chunks[3].payload[8..].iter().all(|&b| b == 0xb2));

    // Fully allocated: one data chunk, which ends the reply.
    send(&mut s, CMD_READ, 0, 2, 64 * KIB, 64 * KIB as u32).await;
    let chunks = read_chunks(&mut s, 2).await;
    assert_eq!(content(&chunks), vec![(64 * KIB, 64 * KIB, false)]);
    assert_eq!(chunks[0].flags, REPLY_FLAG_DONE);

    // Don't fragment: one data chunk with the zeroes in it.
    send(&mut s, CMD_READ, CMD_FLAG_DF, 3, 0, 256 * KIB as u32).await;
    let chunks = read_chunks(&mut s, 3).await;
    assert_eq!(content(&chunks), vec![(0, 256 * KIB, false)]);
    let data = &chunks[0].payload[8..];
    assert!(data[..64 * 1024].iter().all(|&b| b == 0));
    assert!(data[64 * 1024..128 * 1024].iter().all(|&b| b == 0xa1));
    assert!(data[128 * 1024..].iter().all(|&b| b == 0));

    // A small read of a hole is sent as data; a zero-length read is NONE.
    send(&mut s, CMD_READ, 0, 4, 2 * MIB, 4096).await;
    let chunks = read_chunks(&mut s, 4).await;
    assert_eq!(content(&chunks), vec![(2 * MIB, 4096, false)]);
    send(&mut s, CMD_READ, 0, 5, 0, 0).await;
    let chunks = read_chunks(&mut s, 5).await;
    assert_eq!(
        (chunks[0].kind, chunks[0].flags),
        (REPLY_TYPE_NONE, REPLY_FLAG_DONE)
    );

    // Other commands keep simple replies.
    assert_eq!(nbd_write(&mut s, 3 * MIB, &[7; 4096]).await, 0);
    assert_eq!(roundtrip(&mut s, CMD_FLUSH, 0, 0, 0, &[]).await, 0);
    disconnect(s).await;
}

#[tokio::test]
async fn block_status_reports_the_holes_and_req_one_only_the_first_extent() {
    let dir = tempfile::tempdir().unwrap();
    let dev = sparse_device(&dir);
    let exports = TestExports::new();
    exports.add("vol", dev.clone());
    let server = TestServer::start(exports).await;
    let (mut s, _) = connect_structured(&server, "vol", true).await;

    let hole = STATE_HOLE | STATE_ZERO;
    let descriptors = |c: &Chunk| -> Vec<(u32, u32)> {
        assert_eq!(c.kind, REPLY_TYPE_BLOCK_STATUS);
        assert_eq!(c.be32(0), ALLOCATION_CONTEXT_ID);
        (4..c.payload.len())
            .step_by(8)
            .map(|at| (c.be32(at), c.be32(at + 4)))
            .collect()
    };
    send(&mut s, CMD_BLOCK_STATUS, 0, 1, 0, 4 * MIB as u32).await;
    let chunks = read_chunks(&mut s, 1).await;
    assert_eq!(chunks.len(), 1);
    assert_eq!(
        descriptors(&chunks[0]),
        vec![
            (64 * 1024, hole),
            (64 * 1024, 0),
            (MIB as u32 - 128 * 1024, hole),
            (4096, 0),
            (3 * MIB as u32 - 4096, hole),
        ]
    );
    // From inside an extent, up to the end of the request only.
    send(&mut s, CMD_BLOCK_STATUS, 0, 2, 96 * KIB, 64 * 1024).await;
    let chunks = read_chunks(&mut s, 2).await;
    assert_eq!(
        descriptors(&chunks[0]),
        vec![(32 * 1024, 0), (32 * 1024, hole)]
    );
    send(
        &mut s,
        CMD_BLOCK_STATUS,
        CMD_FLAG_REQ_ONE,
        3,
        0,
        4 * MIB as u32,
    )
    .await;
    let chunks = read_chunks(&mut s, 3).await;
    assert_eq!(descriptors(&chunks[0]), vec![(64 * 1024, hole)]);

    // Past the end: an error chunk.
    send(&mut s, CMD_BLOCK_STATUS, 0, 4, 4 * MIB - 512, 1024).await;
    let chunks = read_chunks(&mut s, 4).await;
    assert_eq!(chunks[0].kind, REPLY_TYPE_ERROR);
    assert_eq!(chunks[0].be32(0), EINVAL);
    disconnect(s).await;
}

#[tokio::test]
async fn block_status_is_einval_unless_a_context_was_selected_for_the_export() {
    let exports = TestExports::new();
    exports.add("vol", MemDevice::new(MIB as usize, 0));
    exports.add("other", MemDevice::new(MIB as usize, 0));
    let server = TestServer::start(exports).await;

    // Structured replies, but no context: an error chunk.
    let (mut s, _) = connect_structured(&server, "vol", false).await;
    send(&mut s, CMD_BLOCK_STATUS, 0, 1, 0, 4096).await;
    let chunks = read_chunks(&mut s, 1).await;
    assert_eq!(
        (chunks[0].kind, chunks[0].be32(0)),
        (REPLY_TYPE_ERROR, EINVAL)
    );
    disconnect(s).await;

    // The context was selected for another export than the one chosen.
    let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    structured_replies(&mut s).await;
    let (contexts, _) =
        meta_context(&mut s, OPT_SET_META_CONTEXT, "other", &["base:allocation"]).await;
    assert_eq!(contexts.len(), 1);
    assert_eq!(info_or_go(&mut s, OPT_GO, "vol", &[]).await.end, REP_ACK);
    send(&mut s, CMD_BLOCK_STATUS, 0, 2, 0, 4096).await;
    let chunks = read_chunks(&mut s, 2).await;
    assert_eq!(
        (chunks[0].kind, chunks[0].be32(0)),
        (REPLY_TYPE_ERROR, EINVAL)
    );
    disconnect(s).await;

    // No structured replies at all: a simple EINVAL, and reads stay simple.
    let mut s = connect(server.addr, "vol").await;
    assert_eq!(
        roundtrip(&mut s, CMD_BLOCK_STATUS, 0, 0, 4096, &[]).await,
        EINVAL
    );
    assert_eq!(
        nbd_read(&mut s, 0, 128 * 1024).await.unwrap(),
        vec![0; 128 * 1024]
    );
    disconnect(s).await;
}

#[tokio::test]
async fn a_failed_read_answers_an_error_chunk_with_its_offset() {
    let exports = TestExports::new();
    let dev = MemDevice::new(MIB as usize, 0);
    exports.add("vol", dev.clone());
    let server = TestServer::start(exports).await;
    let (mut s, _) = connect_structured(&server, "vol", false).await;

    *dev.fail_with.lock().unwrap() = Some(io::ErrorKind::Other);
    send(&mut s, CMD_READ, 0, 1, 8192, 8192).await;
    let chunks = read_chunks(&mut s, 1).await;
    assert_eq!(chunks.len(), 1);
    let c = &chunks[0];
    assert_eq!(
        (c.kind, c.flags),
        (REPLY_TYPE_ERROR_OFFSET, REPLY_FLAG_DONE)
    );
    assert_eq!(c.be32(0), EIO);
    let message_len = u16::from_be_bytes([c.payload[4], c.payload[5]]) as usize;
    assert_eq!(c.payload.len(), 6 + message_len + 8);
    assert_eq!(c.be64(6 + message_len), 8192);

    // A read past the end: EINVAL, with no offset to tell.
    *dev.fail_with.lock().unwrap() = None;
    send(&mut s, CMD_READ, 0, 2, MIB - 512, 1024).await;
    let chunks = read_chunks(&mut s, 2).await;
    assert_eq!(
        (chunks[0].kind, chunks[0].be32(0)),
        (REPLY_TYPE_ERROR, EINVAL)
    );
    // The connection goes on.
    send(&mut s, CMD_READ, 0, 3, 0, 512).await;
    assert_eq!(
        content(&read_chunks(&mut s, 3).await),
        vec![(0, 512, false)]
    );
    disconnect(s).await;
}

#[tokio::test]
async fn cache_succeeds_fast_zeroes_are_refused_when_slow_and_unknown_commands_are_einval() {
    let exports = TestExports::new();
    let dev = MemDevice::new(MIB as usize, 0x33);
    exports.add("vol", dev.clone());
    let server = TestServer::start(exports).await;
    let mut s = connect(server.addr, "vol").await;

    assert_eq!(roundtrip(&mut s, CMD_CACHE, 0, 0, MIB as u32, &[]).await, 0);
    assert_eq!(roundtrip(&mut s, CMD_CACHE, 0, MIB, 1, &[]).await, EINVAL);
    assert_eq!(
        roundtrip(&mut s, CMD_CACHE, CMD_FLAG_FUA, 0, 1, &[]).await,
        EINVAL
    );
    // The memory device's zeroes are not fast: refused, nothing changed.
    let r = roundtrip(&mut s, CMD_WRITE_ZEROES, CMD_FLAG_FAST_ZERO, 0, 4096, &[]).await;
    assert_eq!(r, ENOTSUP);
    assert!(dev.bytes(0, 4096).iter().all(|&b| b == 0x33));
    // Without the flag the same request zeroes.
    assert_eq!(
        roundtrip(&mut s, CMD_WRITE_ZEROES, 0, 0, 4096, &[]).await,
        0
    );
    assert!(dev.bytes(0, 4096).iter().all(|&b| b == 0));
    for command in [8, 99, u16::MAX] {
        assert_eq!(roundtrip(&mut s, command, 0, 0, 512, &[]).await, EINVAL);
    }
    // A DF read without structured replies: DF was not advertised.
    assert_eq!(
        roundtrip(&mut s, CMD_READ, CMD_FLAG_DF, 0, 512, &[]).await,
        EINVAL
    );
    disconnect(s).await;
}

/// A device whose flush covers only its own connection's writes.
struct PerConnection(Arc<MemDevice>);

impl BlockDevice for PerConnection {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn read_only(&self) -> bool {
        self.0.read_only()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.0.read(offset, buf)
    }
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        self.0.write(offset, data, fua)
    }
    fn flush(&self) -> io::Result<()> {
        self.0.flush()
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.0.trim(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        self.0.write_zeroes(offset, len, fua)
    }
}

#[tokio::test]
async fn multi_conn_is_advertised_only_with_a_shared_flush_or_read_only() {
    let exports = TestExports::new();
    exports.add("shared", MemDevice::new(MIB as usize, 0));
    exports.add(
        "own",
        Arc::new(PerConnection(MemDevice::new(MIB as usize, 0))),
    );
    exports.add(
        "own-ro",
        Arc::new(PerConnection(MemDevice::read_only(MIB as usize, 0))),
    );
    let server = TestServer::start(exports).await;
    for (name, multi_conn) in [("shared", true), ("own", false), ("own-ro", true)] {
        let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
        let r = info_or_go(&mut s, OPT_INFO, name, &[]).await;
        assert_eq!(r.end, REP_ACK);
        assert_eq!(
            r.flags.unwrap() & FLAG_CAN_MULTI_CONN != 0,
            multi_conn,
            "{name}"
        );
    }
}
