//! Requests a [`SliceClient`](crate::SliceClient) sent without waiting
//! for their replies (`send_write`, `send_discard`, `send_sync`), until
//! `collect` waits for them: a front sends a write to every copy's node
//! before it waits for any.

use std::io;
use std::time::Instant;

/// Requests sent and not yet waited for ([`SliceClient::send_write`]):
/// their ids, when their replies are due, and a failure met while sending
/// (the requests sent before it are still waited for).
#[must_use = "SliceClient::collect waits for the replies"]
pub struct Sent {
    pub(crate) ids: Ids,
    pub(crate) deadline: Instant,
    pub(crate) failed: Option<io::Error>,
}

/// The ids of a `Sent`: most are one request, which needs no allocation.
pub(crate) enum Ids {
    None,
    One(u64),
    Many(Vec<u64>),
}

impl Ids {
    pub(crate) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let (one, many): (Option<u64>, &[u64]) = match self {
            Ids::None => (None, &[]),
            Ids::One(id) => (Some(*id), &[]),
            Ids::Many(ids) => (None, ids),
        };
        one.into_iter().chain(many.iter().copied())
    }
}

impl Sent {
    pub(crate) fn new(deadline: Instant) -> Sent {
        Sent {
            ids: Ids::None,
            deadline,
            failed: None,
        }
    }

    /// Already answered: run in process, or refused before it was sent.
    pub fn done(result: io::Result<()>) -> Sent {
        Sent {
            failed: result.err(),
            ..Sent::new(Instant::now())
        }
    }

    /// Adds a sent request's id; false (send no more) on a failure to send.
    pub(crate) fn add(&mut self, id: io::Result<u64>) -> bool {
        match id {
            Ok(id) => {
                self.ids = match std::mem::replace(&mut self.ids, Ids::None) {
                    Ids::None => Ids::One(id),
                    Ids::One(first) => Ids::Many(vec![first, id]),
                    Ids::Many(mut ids) => {
                        ids.push(id);
                        Ids::Many(ids)
                    }
                };
                true
            }
            Err(e) => {
                self.failed = Some(e);
                false
            }
        }
    }
}
