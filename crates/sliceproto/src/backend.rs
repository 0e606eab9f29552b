//! What the storage node plugs into the server core: the slices
//! ([`SliceBackend`]), the durable epochs ([`EpochStore`]) and the check of
//! credentials ([`Authenticator`]); and the dispatch of one request to them.

use std::io;
use std::net::SocketAddr;

use crate::fence::{EpochFence, Fenced};
use crate::wire::{self, Op, RequestHeader, Status};
use crate::{MapTail, SliceName, SnapshotInfo, SnapshotPart, StoredSlice};

/// Checks the hello of every connection.
pub trait Authenticator: Send + Sync + 'static {
    /// `Ok`: the caller may use the node. `Err(message)`: refused, and the
    /// message (no secret in it) is what the caller is told.
    fn authenticate(&self, credential: &str, caller: &str, peer: SocketAddr) -> Result<(), String>;
}

/// The slices of a node, one method per op (see [`Op`] for what each
/// does). Errors go to the caller with their errno (or one for their kind)
/// and their text. Called from many threads at once.
pub trait SliceBackend: Send + Sync + 'static {
    fn size(&self, slice: &SliceName) -> io::Result<u64>;
    /// Reads exactly `buf.len()` bytes at `offset`.
    fn read(&self, slice: &SliceName, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// [`SliceBackend::read`] if memory can answer it at once (the page
    /// cache, no disk): `false` when it cannot, `buf` then partly written.
    /// Only a client in the server's process asks (see
    /// [`SliceClient::read_cached`](crate::SliceClient::read_cached)).
    /// Default: never.
    fn read_cached(&self, slice: &SliceName, offset: u64, buf: &mut [u8]) -> io::Result<bool> {
        let _ = (slice, offset, buf);
        Ok(false)
    }
    fn prepare_write(&self, slice: &SliceName, offset: u64, len: u64) -> io::Result<()>;
    fn write(&self, slice: &SliceName, offset: u64, data: &[u8]) -> io::Result<()>;
    fn discard(&self, slice: &SliceName, offset: u64, len: u64) -> io::Result<()>;
    fn sync(&self, slice: &SliceName) -> io::Result<()>;
    /// Runs of `[offset, offset + len)`: `(length, hole)`, in order.
    fn allocation(&self, slice: &SliceName, offset: u64, len: u64) -> io::Result<Vec<(u64, bool)>>;
    fn will_need(&self, slice: &SliceName, offset: u64, len: u64);
    /// A hint that `[offset, offset + len)` is written and may go to the
    /// disk now.
    fn start_writeback(&self, slice: &SliceName, offset: u64, len: u64) {
        let _ = (slice, offset, len);
    }
    fn next_data(&self, slice: &SliceName, from: u64, len: u64) -> io::Result<Option<(u64, u64)>>;
    fn data_bytes(&self, slice: &SliceName, from: u64, len: u64) -> io::Result<u64>;
    fn check_present(&self, slice: &SliceName) -> io::Result<()>;
    fn snapshots(&self, slice: &SliceName) -> io::Result<Vec<SnapshotInfo>>;
    fn create_snapshot(&self, slice: &SliceName, id: u64) -> io::Result<()>;
    fn delete_snapshot(&self, slice: &SliceName, id: u64) -> io::Result<()>;
    fn rollback(&self, slice: &SliceName, id: u64) -> io::Result<()>;
    fn read_snapshot(
        &self,
        slice: &SliceName,
        id: u64,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<()>;
    fn snapshot_allocation(
        &self,
        slice: &SliceName,
        id: u64,
        offset: u64,
        len: u64,
    ) -> io::Result<Vec<(u64, bool)>>;
    fn snapshot_ids(&self, slice: &SliceName) -> io::Result<Vec<u64>>;
    fn snapshot_map_since(&self, slice: &SliceName, id: u64, from: u64) -> io::Result<MapTail>;
    fn read_snapshot_chunk(
        &self,
        slice: &SliceName,
        id: u64,
        chunk: u64,
        buf: &mut [u8],
    ) -> io::Result<()>;
    /// Writes `data` at `offset` of snapshot `id`'s `part`, a live copy's
    /// file not in place yet (made when missing).
    fn write_snapshot_part(
        &self,
        slice: &SliceName,
        id: u64,
        part: SnapshotPart,
        offset: u64,
        data: &[u8],
    ) -> io::Result<()> {
        let _ = (slice, id, part, offset, data);
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
    /// Reads what was written of snapshot `id`'s `part` at `offset` into
    /// `buf`: the bytes read (fewer at the part's end).
    fn read_snapshot_part(
        &self,
        slice: &SliceName,
        id: u64,
        part: SnapshotPart,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<usize> {
        let _ = (slice, id, part, offset, buf);
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
    /// Puts the parts of snapshots `ids` in place (see
    /// [`Op::PlaceSnapshotParts`]).
    fn place_snapshot_parts(&self, slice: &SliceName, ids: &[u64]) -> io::Result<()> {
        let _ = (slice, ids);
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
    /// Removes the slice's snapshot parts not in place.
    fn drop_snapshot_parts(&self, slice: &SliceName) -> io::Result<()> {
        let _ = slice;
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
    fn create_slice(&self, slice: &SliceName, size: u64) -> io::Result<()>;
    fn grow_slice(&self, slice: &SliceName, size: u64) -> io::Result<()>;
    fn delete_slice(&self, slice: &SliceName) -> io::Result<()>;
    fn digest(&self, slice: &SliceName) -> io::Result<u128>;
    /// The digest of the bytes of `[offset, offset + len)`, seeded with
    /// `seed` (the caller picks it per copy, so no stored bytes can be
    /// made to match a source's on purpose): what a resync compares with
    /// the same range of its source, computed the same way on its side
    /// (the data plane defines the function). Bytes past the end read as
    /// zeros.
    fn range_digest(&self, slice: &SliceName, offset: u64, len: u64, seed: u64)
        -> io::Result<u128>;
    /// Only `medium` is given.
    fn stored_slices(&self, medium: &str) -> io::Result<Vec<StoredSlice>>;
}

/// A refusal: status and message.
/// The node's fronts, for [`Op::FrontCall`]: the control plane steers a
/// job on the front that runs a volume (a snapshot, a live move). What a
/// call says is the node's business; the protocol only carries it.
pub trait FrontControl: Send + Sync + 'static {
    /// Answers `request` about `volume`'s front. An error is sent back as
    /// a refusal with its errno and message.
    fn call(&self, volume: &str, request: &[u8]) -> io::Result<Vec<u8>>;
}

pub(crate) type Refusal = (Status, String);

/// The refusal of `op` on `slice` that failed with `e` (its errno, and what
/// failed).
pub(crate) fn op_failed(op: Op, slice: &SliceName, e: &io::Error) -> Refusal {
    (Status::of_error(e), format!("{op:?} {slice}: {e}"))
}

fn bad_request(what: impl Into<String>) -> Refusal {
    (Status::BadRequest, what.into())
}

/// A length the reply will carry, checked against the max payload before
/// anything is allocated.
fn reply_len(len: u64, max_payload: u32) -> Result<usize, Refusal> {
    if len > u64::from(max_payload) {
        return Err((
            Status::TooLarge,
            format!("{len} bytes asked for, over the max payload of {max_payload}"),
        ));
    }
    usize::try_from(len).map_err(|_| bad_request("length does not fit in memory"))
}

/// Runs one well-framed request: its reply payload, or why not.
pub(crate) fn dispatch(
    backend: &dyn SliceBackend,
    front: Option<&dyn FrontControl>,
    fence: &EpochFence,
    h: &RequestHeader,
    slice: &SliceName,
    payload: &[u8],
    max_payload: u32,
) -> Result<Vec<u8>, Refusal> {
    let op = Op::from_code(h.op).ok_or_else(|| bad_request(format!("unknown op code {}", h.op)))?;
    if !payload.is_empty()
        && !matches!(
            op,
            Op::Write
                | Op::WriteDigest
                | Op::FrontCall
                | Op::WriteSnapshotPart
                | Op::PlaceSnapshotParts
        )
    {
        return Err(bad_request(format!("{op:?} carries no payload")));
    }
    let [a0, a1, a2] = h.args;
    let run = || -> Result<Vec<u8>, Refusal> {
        let done = |e: io::Error| op_failed(op, slice, &e);
        let b = backend;
        let s = slice;
        Ok(match op {
            Op::Size => b.size(s).map_err(done)?.to_le_bytes().to_vec(),
            Op::Read => {
                let mut buf = vec![0u8; reply_len(a1, max_payload)?];
                b.read(s, a0, &mut buf).map_err(done)?;
                buf
            }
            Op::PrepareWrite => b
                .prepare_write(s, a0, a1)
                .map(|()| Vec::new())
                .map_err(done)?,
            Op::Write => b.write(s, a0, payload).map(|()| Vec::new()).map_err(done)?,
            Op::Discard => b.discard(s, a0, a1).map(|()| Vec::new()).map_err(done)?,
            Op::Sync => {
                if a0 & wire::SYNC_CHECK_PRESENT != 0 {
                    b.check_present(s).map_err(done)?;
                }
                b.sync(s).map(|()| Vec::new()).map_err(done)?
            }
            Op::Allocation => wire::encode_runs(&b.allocation(s, a0, a1).map_err(done)?),
            Op::WillNeed => {
                b.will_need(s, a0, a1);
                Vec::new()
            }
            Op::WriteBack => {
                b.start_writeback(s, a0, a1);
                Vec::new()
            }
            Op::NextData => wire::encode_next_data(b.next_data(s, a0, a1).map_err(done)?),
            Op::DataBytes => b
                .data_bytes(s, a0, a1)
                .map_err(done)?
                .to_le_bytes()
                .to_vec(),
            Op::CheckPresent => b.check_present(s).map(|()| Vec::new()).map_err(done)?,
            Op::Snapshots => wire::encode_snapshots(&b.snapshots(s).map_err(done)?),
            Op::CreateSnapshot => b
                .create_snapshot(s, a0)
                .map(|()| Vec::new())
                .map_err(done)?,
            Op::DeleteSnapshot => b
                .delete_snapshot(s, a0)
                .map(|()| Vec::new())
                .map_err(done)?,
            Op::Rollback => b.rollback(s, a0).map(|()| Vec::new()).map_err(done)?,
            Op::ReadSnapshot => {
                let mut buf = vec![0u8; reply_len(a2, max_payload)?];
                b.read_snapshot(s, a0, a1, &mut buf).map_err(done)?;
                buf
            }
            Op::SnapshotAllocation => {
                wire::encode_runs(&b.snapshot_allocation(s, a0, a1, a2).map_err(done)?)
            }
            Op::SnapshotIds => wire::encode_ids(&b.snapshot_ids(s).map_err(done)?),
            Op::SnapshotMapSince => {
                wire::encode_map_tail(&b.snapshot_map_since(s, a0, a1).map_err(done)?)
            }
            Op::ReadSnapshotChunk => {
                let mut buf = vec![0u8; reply_len(a2, max_payload)?];
                b.read_snapshot_chunk(s, a0, a1, &mut buf).map_err(done)?;
                buf
            }
            Op::WriteSnapshotPart => {
                let part = SnapshotPart::from_code(a1)
                    .ok_or_else(|| bad_request(format!("unknown snapshot part {a1}")))?;
                b.write_snapshot_part(s, a0, part, a2, payload)
                    .map(|()| Vec::new())
                    .map_err(done)?
            }
            Op::ReadSnapshotMapPart | Op::ReadSnapshotDeltaPart => {
                let part = if op == Op::ReadSnapshotMapPart {
                    SnapshotPart::Map
                } else {
                    SnapshotPart::Delta
                };
                let mut buf = vec![0u8; reply_len(a2, max_payload)?];
                let n = b
                    .read_snapshot_part(s, a0, part, a1, &mut buf)
                    .map_err(done)?;
                buf.truncate(n);
                buf
            }
            Op::PlaceSnapshotParts => {
                let ids = wire::decode_ids(payload).map_err(done)?;
                b.place_snapshot_parts(s, &ids)
                    .map(|()| Vec::new())
                    .map_err(done)?
            }
            Op::WriteDigest => {
                b.write(s, a0, payload).map_err(done)?;
                b.range_digest(s, a0, payload.len() as u64, a1)
                    .map_err(done)?
                    .to_le_bytes()
                    .to_vec()
            }
            Op::DropSnapshotParts => b
                .drop_snapshot_parts(s)
                .map(|()| Vec::new())
                .map_err(done)?,
            Op::CreateSlice => b.create_slice(s, a0).map(|()| Vec::new()).map_err(done)?,
            Op::GrowSlice => b.grow_slice(s, a0).map(|()| Vec::new()).map_err(done)?,
            Op::DeleteSlice => b.delete_slice(s).map(|()| Vec::new()).map_err(done)?,
            Op::Digest => b.digest(s).map_err(done)?.to_le_bytes().to_vec(),
            Op::RangeDigest => {
                // As long as a read of it could be: the node reads it all.
                reply_len(a1, max_payload)?;
                b.range_digest(s, a0, a1, a2)
                    .map_err(done)?
                    .to_le_bytes()
                    .to_vec()
            }
            Op::StoredSlices => {
                wire::encode_stored(&b.stored_slices(&s.medium).map_err(done)?).map_err(done)?
            }
            Op::FrontCall => {
                let Some(front) = front else {
                    return Err((
                        Status::of_error(&io::Error::from(io::ErrorKind::Unsupported)),
                        "this node runs no volume fronts".into(),
                    ));
                };
                // The caller says whose front it called.
                front
                    .call(&s.volume, payload)
                    .map_err(|e| (Status::of_error(&e), e.to_string()))?
            }
        })
    };
    let reply = if op.is_fenced() {
        match fence.admit(&slice.volume, h.epoch, run) {
            Ok(Fenced::Ran(reply)) => reply,
            Ok(Fenced::Stale { highest }) => {
                return Err((
                    Status::StaleEpoch,
                    format!(
                        "{op:?} {slice}: epoch {} is stale, volume {} is at epoch {highest} \
                         on this node (another front end took the volume over)",
                        h.epoch, slice.volume
                    ),
                ))
            }
            Err(e) => {
                return Err((
                    Status::of_error(&e),
                    format!(
                        "{op:?} {slice}: recording epoch {} of volume {}: {e}",
                        h.epoch, slice.volume
                    ),
                ))
            }
        }
    } else {
        run()
    }?;
    if reply.len() > max_payload as usize {
        return Err((
            Status::TooLarge,
            format!(
                "{op:?} {slice}: the reply of {} bytes is over the max payload of {max_payload} \
                 (ask for a smaller range)",
                reply.len()
            ),
        ));
    }
    Ok(reply)
}
