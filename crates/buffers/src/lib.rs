//! Payload buffers of one connection, reused from request to request: a
//! fresh `vec![0; len]` for every large request costs more than the I/O
//! into it (the allocator hands out fresh pages, each faulted in and
//! zeroed), a buffer used before is already there. Buffers never go from
//! one connection to another. The NBD server and the slice server keep one
//! pool per connection.

use std::sync::{Mutex, MutexGuard};

/// A connection's spare buffers: at most `max_buffers` of them, holding at
/// most `max_bytes` of capacity in all.
pub struct BufferPool {
    free: Mutex<Vec<Vec<u8>>>,
    max_buffers: usize,
    max_bytes: usize,
}

impl BufferPool {
    pub fn new(max_buffers: usize, max_bytes: usize) -> BufferPool {
        BufferPool {
            free: Mutex::new(Vec::new()),
            max_buffers,
            max_bytes,
        }
    }

    fn free(&self) -> MutexGuard<'_, Vec<Vec<u8>>> {
        // A poisoned lock only means a panic elsewhere; the list stays usable.
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A buffer of `len` bytes (their content is whatever the buffer held:
    /// the caller overwrites them all).
    pub fn take(&self, len: usize) -> Vec<u8> {
        let reused = {
            let mut free = self.free();
            // The shortest one at least as long (no zeroing at all, and the
            // longer ones stay for longer requests), else the longest one
            // with room enough (the least to zero).
            let fits = free
                .iter()
                .enumerate()
                .filter(|(_, b)| b.len() >= len)
                .min_by_key(|(_, b)| b.len());
            let room = || {
                free.iter()
                    .enumerate()
                    .filter(|(_, b)| b.capacity() >= len)
                    .max_by_key(|(_, b)| b.len())
            };
            let at = fits.or_else(room).map(|(i, _)| i);
            at.map(|i| free.swap_remove(i))
        };
        match reused {
            Some(mut buf) => {
                buf.resize(len, 0);
                buf
            }
            None => vec![0u8; len],
        }
    }

    /// Keeps `buf` for a later request, unless the pool is full or `buf`
    /// holds nothing (the empty payload of a request without data would
    /// only take the place of a buffer worth keeping).
    pub fn give(&self, buf: Vec<u8>) {
        if buf.capacity() == 0 {
            return;
        }
        let mut free = self.free();
        let held: usize = free.iter().map(Vec::capacity).sum();
        if free.len() < self.max_buffers && held + buf.capacity() <= self.max_bytes {
            free.push(buf);
        }
    }

    /// How many buffers are kept.
    pub fn kept(&self) -> usize {
        self.free().len()
    }
}

#[cfg(test)]
mod tests {
    use super::BufferPool;

    #[test]
    fn buffers_are_reused_at_the_length_asked_for() {
        let buffers = BufferPool::new(16, 4 << 20);
        buffers.give(vec![0xee; 4096]);
        buffers.give(vec![0xdd; 1 << 20]);
        // The shortest one long enough: the 4 KiB one, cut to 512 bytes.
        let small = buffers.take(512);
        assert_eq!((small.len(), small[0]), (512, 0xee));
        let large = buffers.take(1 << 20);
        assert_eq!((large.len(), large[0]), (1 << 20, 0xdd));
        // Nothing long enough left: a new, zeroed buffer.
        assert_eq!(buffers.take(8192), vec![0u8; 8192]);
        // A shorter buffer with room enough grows, the new bytes zeroed.
        buffers.give(small);
        let grown = buffers.take(4096);
        assert_eq!(grown.len(), 4096);
        assert!(grown[..512].iter().all(|&b| b == 0xee));
        assert!(grown[512..].iter().all(|&b| b == 0));
    }

    #[test]
    fn the_pool_keeps_at_most_its_bytes_and_buffers() {
        const BYTES: usize = 4 << 20;
        const BUFFERS: usize = 16;
        let buffers = BufferPool::new(BUFFERS, BYTES);
        buffers.give(vec![0; BYTES + 1]);
        assert_eq!(buffers.kept(), 0);
        for _ in 0..BUFFERS + 4 {
            buffers.give(vec![0; 512]);
        }
        assert_eq!(buffers.kept(), BUFFERS);
        buffers.give(vec![0; BYTES]);
        assert_eq!(buffers.kept(), BUFFERS);
    }

    #[test]
    fn empty_buffers_are_not_kept() {
        let buffers = BufferPool::new(2, 4 << 20);
        buffers.give(Vec::new());
        buffers.give(Vec::new());
        assert_eq!(buffers.kept(), 0);
        buffers.give(vec![0xab; 4096]);
        assert_eq!(buffers.take(4096)[0], 0xab);
    }
}
