//! Fault hooks for tests, kept out of the production structs: a slice and a
//! volume each hold one of these, which is empty (zero-sized) outside test
//! builds, so its checks compile to nothing.

#[cfg(test)]
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A slice's hooks.
#[derive(Default)]
pub(super) struct SliceHooks {
    /// Every I/O on the slice fails with EIO, like a dying disk.
    #[cfg(test)]
    pub(super) broken: AtomicBool,
}

impl SliceHooks {
    /// Fails like a broken disk when a test asks for it.
    #[inline]
    pub(super) fn fault(&self) -> std::io::Result<()> {
        #[cfg(test)]
        if self.broken.load(Ordering::Acquire) {
            return Err(super::eio());
        }
        Ok(())
    }
}

/// A volume's hooks.
#[derive(Default)]
pub(super) struct VolumeHooks {
    /// A pause between writing the copies and their mirrors, which widens
    /// the window a switch must not fall into.
    #[cfg(test)]
    pub(super) phase_gap_us: AtomicU64,
}

impl VolumeHooks {
    /// Between a write's copies and its mirrors.
    #[inline]
    pub(super) fn between_copies_and_mirrors(&self) {
        #[cfg(test)]
        {
            let gap = self.phase_gap_us.load(Ordering::Relaxed);
            if gap > 0 {
                std::thread::sleep(std::time::Duration::from_micros(gap));
            }
        }
    }
}
