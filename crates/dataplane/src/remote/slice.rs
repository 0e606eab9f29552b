//! A slice on a storage node as the volume front end sees it: a
//! [`SliceDevice`] whose every call is one request (or a few pipelined
//! ones) over the node's connection, fenced writes carrying the front's
//! epoch; and the same slice as the target of a copy.
//!
//! Errors keep the front end's rules (`volume::is_media_failure`): a lost
//! connection, a request that timed out or a node that cannot be reached
//! is a media failure (ENOTCONN / ETIMEDOUT); an error the node answered
//! with is its errno (ENOSPC stays "not a media failure", ENOENT loses this
//! copy alone); `StaleEpoch` fences the front ([`crate::FrontFenced`]),
//! which loses no copy.

use std::io;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use svs_sliceproto::{remote_error, SliceClient, SliceName, SnapshotPart, Status, WriteDigests};

use super::link::NodeLink;
use crate::copier::{CopySource, CopyTarget, SnapshotParts, VerifiedWrites};
use crate::digest::range_digest;
use crate::fsutil::RemoveOnDrop;
use crate::snapshot::MapTail;
use crate::volume::{Front, NodeTarget, SliceChange, SliceDevice, Started};
use crate::{Digest, SliceKey, SnapshotInfo};

/// An unthrottled copy's chunk to a slice on a node: 4 MiB, sent as
/// digested writes of 1 MiB in flight together (see
/// [`CopyTarget::verified_writes`]); 8 and 16 MiB were no faster
/// (docs/benchmarks.md). A live copy holds the slice's writes for one
/// chunk: a few milliseconds.
const REMOTE_COPY_CHUNK: usize = 4 << 20;

/// The name of slice `key` on `medium`, for the protocol.
pub(super) fn slice_name(medium: &str, key: &SliceKey) -> SliceName {
    SliceName::new(medium, &key.volume_id, key.copy, key.column)
}

/// The error a slice op that failed with `e` answers the front end with
/// (see the module docs); `front` is fenced by a `StaleEpoch`.
pub(super) fn device_error(front: &Front, slice: &SliceName, op: &str, e: io::Error) -> io::Error {
    let errno = match remote_error(&e) {
        Some(refused) => match refused.status {
            Status::Errno(errno) => i32::from(errno),
            Status::StaleEpoch => return front.fence(&refused.message),
            Status::BadRequest | Status::TooLarge => libc::EINVAL,
            // Refused credential, another protocol, the node going away:
            // the node cannot serve this front.
            _ => libc::ENOTCONN,
        },
        None => match e.kind() {
            io::ErrorKind::TimedOut => libc::ETIMEDOUT,
            // Refused before it was sent (a name over the protocol's bound).
            io::ErrorKind::InvalidInput => libc::EINVAL,
            _ => libc::ENOTCONN,
        },
    };
    tracing::warn!(%slice, op, error = %e, "request to a storage node failed");
    io::Error::from_raw_os_error(errno)
}

/// One slice on a storage node, opened by one front (its epoch).
pub(super) struct RemoteSlice {
    link: Arc<NodeLink>,
    name: SliceName,
    front: Arc<Front>,
    /// Whether the slice has snapshots ([`SNAPSHOTS_UNKNOWN`], ...): a
    /// slice without any needs no save before a write, and its writes skip
    /// that round trip. Only this front changes its snapshots while it
    /// writes (a newer front fences it), so what it learnt stays true until
    /// it creates or deletes one.
    snapshots: AtomicU8,
}

const SNAPSHOTS_UNKNOWN: u8 = 0;
const SNAPSHOTS_NONE: u8 = 1;
const SNAPSHOTS_SOME: u8 = 2;

impl RemoteSlice {
    pub(super) fn new(link: Arc<NodeLink>, name: SliceName, front: Arc<Front>) -> RemoteSlice {
        RemoteSlice {
            link,
            name,
            front,
            snapshots: AtomicU8::new(SNAPSHOTS_UNKNOWN),
        }
    }

    /// Whether the slice may have snapshots (asks the node the first time).
    fn may_have_snapshots(&self) -> io::Result<bool> {
        match self.snapshots.load(Ordering::Acquire) {
            SNAPSHOTS_NONE => Ok(false),
            SNAPSHOTS_SOME => Ok(true),
            _ => {
                let some = !self
                    .call("snapshot ids", |c, s, _| c.snapshot_ids(s))?
                    .is_empty();
                let learnt = if some { SNAPSHOTS_SOME } else { SNAPSHOTS_NONE };
                // A snapshot change meanwhile wins.
                let _ = self.snapshots.compare_exchange(
                    SNAPSHOTS_UNKNOWN,
                    learnt,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                Ok(some)
            }
        }
    }

    /// Runs `op` on the node's connection; errors as the module docs say.
    fn call<T>(
        &self,
        op: &str,
        run: impl FnOnce(&SliceClient, &SliceName, u64) -> io::Result<T>,
    ) -> io::Result<T> {
        let client = self
            .link
            .client()
            .map_err(|e| device_error(&self.front, &self.name, op, e))?;
        run(&client, &self.name, self.front.epoch)
            .map_err(|e| device_error(&self.front, &self.name, op, e))
    }
}

impl SliceDevice for RemoteSlice {
    fn size(&self) -> io::Result<u64> {
        self.call("size", |c, s, _| c.size(s))
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.call("read", |c, s, _| c.read(s, offset, buf))
    }

    /// From the node's page cache when this is the node's own slice (in
    /// process); never over the network.
    fn read_cached(&self, buf: &mut [u8], offset: u64) -> io::Result<bool> {
        if !self.link.is_in_process() {
            return Ok(false);
        }
        Ok(self
            .link
            .client()
            .is_ok_and(|client| client.read_cached(&self.name, offset, buf)))
    }

    fn prepare_write(&self, offset: u64, len: u64) -> io::Result<()> {
        if !self.may_have_snapshots()? {
            return Ok(());
        }
        self.call("prepare write", |c, s, epoch| {
            c.prepare_write(s, epoch, offset, len)
        })
    }

    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        self.call("write", |c, s, epoch| c.write(s, epoch, offset, data))
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.call("discard", |c, s, epoch| c.discard(s, epoch, offset, len))
    }

    fn sync(&self) -> io::Result<()> {
        self.call("sync", |c, s, epoch| c.sync(s, epoch))
    }

    fn allocation(&self, offset: u64, len: u64) -> io::Result<Vec<(u64, bool)>> {
        self.call("allocation", |c, s, _| c.allocation(s, offset, len))
    }

    /// A hint: sent, not waited for; a node that cannot be reached is
    /// left alone.
    fn will_need(&self, offset: u64, len: u64) {
        if let Ok(client) = self.link.client() {
            client.will_need(&self.name, offset, len);
        }
    }

    fn next_data(&self, from: u64, len: u64) -> io::Result<Option<(u64, u64)>> {
        self.call("next data", |c, s, _| c.next_data(s, from, len))
    }

    fn data_bytes(&self, from: u64, len: u64) -> io::Result<u64> {
        self.call("data bytes", |c, s, _| c.data_bytes(s, from, len))
    }

    fn check_present(&self) -> io::Result<()> {
        self.call("check present", |c, s, _| c.check_present(s))
    }

    fn snapshots(&self) -> io::Result<Vec<SnapshotInfo>> {
        let list = self.call("snapshots", |c, s, _| c.snapshots(s))?;
        Ok(list
            .into_iter()
            .map(|s| SnapshotInfo {
                id: s.id,
                size: s.size,
                used_bytes: s.used_bytes,
            })
            .collect())
    }

    fn create_snapshot(&self, id: u64) -> io::Result<()> {
        // Before: even a creation that fails may have left a snapshot.
        self.snapshots.store(SNAPSHOTS_SOME, Ordering::Release);
        self.call("create snapshot", |c, s, epoch| {
            c.create_snapshot(s, epoch, id)
        })
    }

    fn delete_snapshot(&self, id: u64) -> io::Result<()> {
        let deleted = self.call("delete snapshot", |c, s, epoch| {
            c.delete_snapshot(s, epoch, id)
        });
        // Others may be left: asked again at the next write.
        self.snapshots.store(SNAPSHOTS_UNKNOWN, Ordering::Release);
        deleted
    }

    fn rollback(&self, id: u64) -> io::Result<()> {
        self.call("rollback", |c, s, epoch| c.rollback(s, epoch, id))
    }

    fn read_snapshot(&self, id: u64, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.call("read snapshot", |c, s, _| {
            c.read_snapshot(s, id, offset, buf)
        })
    }

    fn snapshot_allocation(&self, id: u64, offset: u64, len: u64) -> io::Result<Vec<(u64, bool)>> {
        self.call("snapshot allocation", |c, s, _| {
            c.snapshot_allocation(s, id, offset, len)
        })
    }

    fn snapshot_ids(&self) -> io::Result<Vec<u64>> {
        self.call("snapshot ids", |c, s, _| c.snapshot_ids(s))
    }

    fn snapshot_map_since(&self, id: u64, from: u64) -> io::Result<MapTail> {
        let tail = self.call("snapshot map", |c, s, _| c.snapshot_map_since(s, id, from))?;
        Ok(MapTail::new(tail.bytes, from, tail.end))
    }

    fn read_snapshot_chunk(&self, id: u64, chunk: u64, buf: &mut [u8]) -> io::Result<()> {
        self.call("read snapshot chunk", |c, s, _| {
            c.read_snapshot_chunk(s, id, chunk, buf)
        })
    }

    fn is_near(&self) -> bool {
        self.link.is_in_process()
    }

    /// Known to have no snapshots (no save before a write) and connected.
    fn starts_at_once(&self) -> bool {
        self.snapshots.load(Ordering::Acquire) == SNAPSHOTS_NONE && self.link.is_connected()
    }

    /// Sent, not waited for: the front sends a write to every copy's node
    /// before it waits for any reply.
    fn start(&self, change: SliceChange<'_>) -> Started {
        let op = change.name();
        let client = match self.link.client() {
            Ok(client) => client,
            Err(e) => return Started::Done(Err(device_error(&self.front, &self.name, op, e))),
        };
        let (name, epoch) = (&self.name, self.front.epoch);
        let sent = match change {
            SliceChange::Write(data, offset) => client.send_write(name, epoch, offset, data),
            SliceChange::Discard(offset, len) => client.send_discard(name, epoch, offset, len),
            SliceChange::Sync => client.send_sync(name, epoch, false),
            SliceChange::CheckedSync => client.send_sync(name, epoch, true),
        };
        Started::Sent(client, sent, op)
    }

    fn finish(&self, started: Started) -> io::Result<()> {
        match started {
            Started::Done(outcome) => outcome,
            Started::Sent(client, sent, op) => client
                .collect(sent)
                .map_err(|e| device_error(&self.front, &self.name, op, e)),
        }
    }
}

/// The slice as a copy's target: written with the front's epoch, each
/// write verified on the node (digested writes; a resync's compare asks
/// for range digests).
impl CopyTarget for RemoteSlice {
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        SliceDevice::write_at(self, data, offset)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        SliceDevice::read_at(self, buf, offset)
    }

    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        SliceDevice::discard(self, offset, len)
    }

    fn sync_data(&self) -> io::Result<()> {
        SliceDevice::sync(self)
    }

    fn sync_all(&self) -> io::Result<()> {
        SliceDevice::sync(self)
    }

    fn digest(&self, buf: &mut [u8]) -> io::Result<Digest> {
        CopySource::digest(self as &dyn SliceDevice, buf)
    }

    /// A hint, as `will_need` is: sent, not waited for.
    fn start_writeback(&self, offset: u64, len: u64) {
        if let Ok(client) = self.link.client() {
            client.start_writeback(&self.name, offset, len);
        }
    }

    fn chunk(&self) -> usize {
        REMOTE_COPY_CHUNK
    }

    /// Each write answered with the node's digest of what it then holds
    /// there (with a seed drawn per request), the next piece read and sent
    /// meanwhile: one round trip per piece, both ends busy at once.
    fn verified_writes(&self) -> Option<Box<dyn VerifiedWrites + '_>> {
        let writes = self.link.client().map(|client| {
            let writes = client.write_digests(self.name.clone(), self.front.epoch);
            (writes, Vec::new())
        });
        Some(Box::new(NodeWrites {
            slice: self,
            writes,
        }))
    }

    /// Compares digests, not bytes: the node digests its range (at most a
    /// max payload per request) with a seed drawn for the request, and
    /// only the 16 bytes of each digest come back.
    fn holds(&self, data: &[u8], offset: u64, _scratch: &mut [u8]) -> io::Result<bool> {
        self.call("compare", |c, s, _| {
            let piece = usize::try_from(c.max_payload())
                .unwrap_or(usize::MAX)
                .max(1);
            let mut at = offset;
            for part in data.chunks(piece) {
                let seed = random_seed()?;
                let theirs = c.range_digest(s, at, part.len() as u64, seed)?;
                if theirs != range_digest(part, seed) {
                    return Ok(false);
                }
                at += part.len() as u64;
            }
            Ok(true)
        })
    }
}

/// Writes to a slice on a node in flight, with the digests expected of
/// them; or why none could be sent (the node could not be reached).
struct NodeWrites<'s> {
    slice: &'s RemoteSlice,
    writes: io::Result<(WriteDigests, Vec<u128>)>,
}

impl VerifiedWrites for NodeWrites<'_> {
    fn send(&mut self, data: &[u8], offset: u64) {
        let Ok((writes, expected)) = &mut self.writes else {
            return;
        };
        match random_seed() {
            Ok(seed) => {
                writes.send(offset, data, seed);
                // While the node writes it.
                expected.push(range_digest(data, seed));
            }
            Err(e) => self.writes = Err(e),
        }
    }

    fn finish(self: Box<Self>) -> io::Result<bool> {
        let NodeWrites { slice, writes } = *self;
        let fail = |e| device_error(&slice.front, &slice.name, "write", e);
        let (writes, expected) = writes.map_err(fail)?;
        let theirs = writes.finish().map_err(fail)?;
        Ok(theirs == expected)
    }
}

/// Eight bytes from the kernel's random source.
fn random_seed() -> io::Result<u64> {
    let mut seed = [0u8; 8];
    // SAFETY: writes at most 8 bytes into `seed`, which outlives the call.
    let got = unsafe { libc::getrandom(seed.as_mut_ptr().cast(), seed.len(), 0) };
    if got != seed.len() as isize {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::from_le_bytes(seed))
}

impl NodeTarget for RemoteSlice {
    fn grow(&self, len: u64) -> io::Result<()> {
        self.call("grow", |c, s, _| c.grow_slice(s, len))
    }

    fn remove(&self) -> io::Result<()> {
        self.call("delete", |c, s, _| c.delete_slice(s))
    }

    fn snapshot_parts(&self) -> Box<dyn SnapshotParts> {
        Box::new(NodeSnapshotParts {
            slice: RemoteSlice::new(
                Arc::clone(&self.link),
                self.name.clone(),
                Arc::clone(&self.front),
            ),
            placed: false,
        })
    }
}

/// A live copy's snapshot files of a slice on a storage node: written
/// there as parts (fenced with the front's epoch) and put in place by the
/// node at the switch; parts not placed are dropped with this.
struct NodeSnapshotParts {
    slice: RemoteSlice,
    placed: bool,
}

impl SnapshotParts for NodeSnapshotParts {
    fn start(&mut self, id: u64) -> io::Result<()> {
        for part in [SnapshotPart::Map, SnapshotPart::Delta] {
            // No bytes: the part is made again, empty.
            self.write(id, part, 0, &[])?;
        }
        Ok(())
    }

    fn write(&self, id: u64, part: SnapshotPart, offset: u64, data: &[u8]) -> io::Result<()> {
        self.slice.call("write snapshot part", |c, s, epoch| {
            c.write_snapshot_part(s, epoch, (id, part), offset, data)
        })
    }

    fn read(&self, id: u64, part: SnapshotPart, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.slice.call("read snapshot part", |c, s, _| {
            c.read_snapshot_part(s, (id, part), offset, buf)
        })
    }

    fn place(mut self: Box<Self>, ids: &[u64]) -> io::Result<Vec<RemoveOnDrop>> {
        self.slice.call("place snapshot parts", |c, s, epoch| {
            c.place_snapshot_parts(s, epoch, ids)
        })?;
        self.placed = true;
        // In place on the node: removing the slice there removes them.
        Ok(Vec::new())
    }
}

impl Drop for NodeSnapshotParts {
    fn drop(&mut self) {
        if self.placed {
            return;
        }
        let dropped = self.slice.call("drop snapshot parts", |c, s, epoch| {
            c.drop_snapshot_parts(s, epoch)
        });
        if let Err(e) = dropped {
            tracing::warn!(slice = %self.slice.name, error = %e,
                "the snapshot parts of an unfinished copy stay on the storage node; \
                 a later copy of the slice replaces them");
        }
    }
}
