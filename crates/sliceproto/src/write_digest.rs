//! Writes verified in their own round trip, several in flight: a copy to a
//! slice on a storage node sends each piece of a chunk as it reads it, and
//! the node writes it, reads it back and answers with its digest
//! ([`Op::WriteDigest`]), while the copy reads the next piece.

use std::io;
use std::sync::Arc;
use std::time::Instant;

use crate::client::{Expect, SliceClient};
use crate::wire::{self, Op};
use crate::SliceName;

/// Writes to one slice sent and not yet answered (see
/// [`SliceClient::write_digests`]). Dropped unfinished, it still waits for
/// the replies (none is left behind in the client), ignoring them.
pub struct WriteDigests {
    client: Arc<SliceClient>,
    slice: SliceName,
    epoch: u64,
    /// In the order sent: a request's id and when its reply is due, or
    /// its answer already (a client in process runs it at once; a request
    /// that could not be sent).
    sent: Vec<Sent>,
}

enum Sent {
    Waiting(u64, Instant),
    Answered(io::Result<u128>),
}

impl SliceClient {
    /// Starts writes to `slice` with `epoch` (fenced), each answered with
    /// the digest of what the node then holds there.
    pub fn write_digests(self: &Arc<Self>, slice: SliceName, epoch: u64) -> WriteDigests {
        WriteDigests {
            client: Arc::clone(self),
            slice,
            epoch,
            sent: Vec::new(),
        }
    }
}

impl WriteDigests {
    /// Sends `data` (at most the max payload) to be written at `offset`,
    /// its digest seeded with `seed`; does not wait. A request that cannot
    /// be sent fails at [`WriteDigests::finish`].
    pub fn send(&mut self, offset: u64, data: &[u8], seed: u64) {
        if data.len() > self.client.max_payload() as usize {
            let too_large = io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a write of {} bytes, over the node's max payload of {}",
                    data.len(),
                    self.client.max_payload()
                ),
            );
            self.sent.push(Sent::Answered(Err(too_large)));
            return;
        }
        let args = [offset, seed, 0];
        if let Some(server) = self.client.in_process_server() {
            let answer = server
                .call(Op::WriteDigest, &self.slice, self.epoch, args, data)
                .and_then(|reply| wire::decode_digest(&reply));
            self.sent.push(Sent::Answered(answer));
            return;
        }
        let deadline = self.client.deadline();
        let sent = self.client.send(
            Op::WriteDigest,
            &self.slice,
            self.epoch,
            args,
            data,
            Expect::Any,
        );
        self.sent.push(match sent {
            Ok(id) => Sent::Waiting(id, deadline),
            Err(e) => Sent::Answered(Err(e)),
        });
    }

    /// Waits for every write sent; returns the node's digests in the order
    /// sent, or the first error (every reply is waited for even so).
    pub fn finish(mut self) -> io::Result<Vec<u128>> {
        let mut digests = Vec::with_capacity(self.sent.len());
        let mut failed = None;
        for sent in std::mem::take(&mut self.sent) {
            let answer = match sent {
                Sent::Waiting(id, deadline) => self
                    .client
                    .wait(id, deadline)
                    .and_then(|reply| wire::decode_digest(&reply)),
                Sent::Answered(answer) => answer,
            };
            match answer {
                Ok(digest) => digests.push(digest),
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        failed.map_or(Ok(digests), Err)
    }
}

impl Drop for WriteDigests {
    fn drop(&mut self) {
        for sent in std::mem::take(&mut self.sent) {
            if let Sent::Waiting(id, deadline) = sent {
                let _ = self.client.wait(id, deadline);
            }
        }
    }
}
