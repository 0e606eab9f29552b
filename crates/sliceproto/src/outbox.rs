//! The sending side of a connection shared by threads: each message is
//! queued whole, and whoever holds the socket writes every message queued
//! meanwhile in the same `write` (one syscall, one TCP segment, one TLS
//! record for several requests or replies). A message sent while nobody
//! writes is written at once, by its own thread: coalescing never delays a
//! lone request (queue depth 1).
//!
//! The rule that makes it safe: a thread that holds the socket writes
//! until it finds the queue empty, under the socket's lock. A thread that
//! queues a message and finds the socket held leaves it to the holder,
//! which looks at the queue again after its write (or a later holder
//! does): a queued message is always written. A failed write is answered
//! to the thread that made it; the connection is then unusable and its
//! owner closes it, which tells everyone else.

use std::io::{self, Write};
use std::sync::{Mutex, MutexGuard, TryLockError};

pub(crate) struct Outbox<W> {
    queued: Mutex<Vec<u8>>,
    /// The socket, and the buffer last written from (swapped with the
    /// queue, so a busy connection allocates nothing).
    socket: Mutex<(W, Vec<u8>)>,
}

/// Poisoning is ignored: the queue is only ever appended to or swapped.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<W: Write> Outbox<W> {
    pub(crate) fn new(socket: W) -> Outbox<W> {
        Outbox {
            queued: Mutex::new(Vec::new()),
            socket: Mutex::new((socket, Vec::new())),
        }
    }

    /// Sends one message, `parts` in order, then `large` (a payload too big
    /// to copy into the queue, written from where it is: this thread then
    /// waits for the socket).
    pub(crate) fn send(&self, parts: &[&[u8]], large: &[u8]) -> io::Result<()> {
        if large.is_empty() {
            let mut queued = lock(&self.queued);
            for part in parts {
                queued.extend_from_slice(part);
            }
            drop(queued);
            return self.drain();
        }
        {
            let mut socket = lock(&self.socket);
            let (w, spare) = &mut *socket;
            // What was queued before this message goes first.
            take_queued(&self.queued, spare);
            for part in parts {
                spare.extend_from_slice(part);
            }
            let written = w.write_all(spare).and_then(|()| w.write_all(large));
            spare.clear();
            written?;
        }
        self.drain()
    }

    /// Writes what is queued, unless another thread holds the socket (it
    /// writes it then).
    fn drain(&self) -> io::Result<()> {
        loop {
            let mut socket = match self.socket.try_lock() {
                Ok(socket) => socket,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                Err(TryLockError::WouldBlock) => return Ok(()),
            };
            let (w, spare) = &mut *socket;
            take_queued(&self.queued, spare);
            if spare.is_empty() {
                return Ok(());
            }
            let written = w.write_all(spare);
            spare.clear();
            written?;
        }
    }
}

/// Moves the queue's bytes into `into` (empty), leaving `into`'s capacity
/// to the queue.
fn take_queued(queued: &Mutex<Vec<u8>>, into: &mut Vec<u8>) {
    let mut queued = lock(queued);
    std::mem::swap(&mut *queued, into);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier};

    /// Every write a recorder took, in order.
    type Writes = Arc<Mutex<Vec<Vec<u8>>>>;

    /// A socket that records each write, holding the first one until told.
    struct Recorder {
        writes: Writes,
        hold_first: Option<Arc<Barrier>>,
    }

    /// An outbox over a recorder, and the writes it records.
    fn recorded(hold_first: Option<Arc<Barrier>>) -> (Outbox<Recorder>, Writes) {
        let writes = Arc::new(Mutex::new(Vec::new()));
        let recorder = Recorder {
            writes: Arc::clone(&writes),
            hold_first,
        };
        (Outbox::new(recorder), writes)
    }

    impl Write for Recorder {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if let Some(hold) = self.hold_first.take() {
                hold.wait();
                hold.wait();
            }
            lock(&self.writes).push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_lone_message_is_written_at_once_and_whole() {
        let (outbox, writes) = recorded(None);
        outbox.send(&[b"head", b"-tail"], &[]).unwrap();
        assert_eq!(*lock(&writes), vec![b"head-tail".to_vec()]);
        outbox.send(&[b"big:"], b"payload").unwrap();
        assert_eq!(lock(&writes).concat(), b"head-tailbig:payload".to_vec());
    }

    #[test]
    fn messages_queued_while_the_socket_is_held_go_in_one_write_in_order() {
        let hold = Arc::new(Barrier::new(2));
        let (outbox, writes) = recorded(Some(Arc::clone(&hold)));
        let outbox = Arc::new(outbox);
        let first = {
            let outbox = Arc::clone(&outbox);
            std::thread::spawn(move || outbox.send(&[b"1"], &[]))
        };
        // The first write is under way: these queue behind it, and return
        // without waiting for the socket.
        hold.wait();
        outbox.send(&[b"2"], &[]).unwrap();
        outbox.send(&[b"3", b"3"], &[]).unwrap();
        hold.wait();
        first.join().unwrap().unwrap();
        assert_eq!(*lock(&writes), vec![b"1".to_vec(), b"233".to_vec()]);
    }

    #[test]
    fn a_large_message_follows_what_was_queued_before_it() {
        let (outbox, writes) = recorded(None);
        lock(&outbox.queued).extend_from_slice(b"queued;");
        outbox.send(&[b"head;"], b"large").unwrap();
        assert_eq!(lock(&writes).concat(), b"queued;head;large".to_vec());
    }
}
