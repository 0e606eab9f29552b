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
    /// Every I/O on the slice fails with this errno (0: none), say ENOSPC,
    /// which is not a media failure.
    #[cfg(test)]
    pub(super) fail_with: std::sync::atomic::AtomicI32,
    /// Counts down at each I/O on the slice: the one that takes it to 0
    /// breaks the slice (`broken`), so a write can pass its copy-on-write
    /// save and fail after (0: off).
    #[cfg(test)]
    pub(super) breaks_in: std::sync::atomic::AtomicU32,
}

impl SliceHooks {
    /// Fails like a broken disk when a test asks for it.
    #[inline]
    pub(super) fn fault(&self) -> std::io::Result<()> {
        #[cfg(test)]
        if self
            .breaks_in
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            == Ok(1)
        {
            self.broken.store(true, Ordering::Release);
        }
        #[cfg(test)]
        if self.broken.load(Ordering::Acquire) {
            return Err(super::eio());
        }
        #[cfg(test)]
        match self.fail_with.load(Ordering::Acquire) {
            0 => {}
            errno => return Err(std::io::Error::from_raw_os_error(errno)),
        }
        Ok(())
    }
}

/// How a request's work on several copies runs.
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CopiesMode {
    /// One copy after another.
    Serial,
    /// At once where there is a sync to wait for (flushes, FUA writes).
    ParallelSyncs,
    /// At once, also plain writes (measured only: it does not pay).
    ParallelAll,
}

/// A volume's hooks.
#[derive(Default)]
pub(super) struct VolumeHooks {
    /// A pause between writing the copies and their mirrors, which widens
    /// the window a switch must not fall into.
    #[cfg(test)]
    pub(super) phase_gap_us: AtomicU64,
    /// How copies are written (a benchmark compares them in one run):
    /// 0 as in production, 1 one after another, 2 every copy's write in
    /// parallel, also without FUA.
    #[cfg(test)]
    pub(super) copies_mode: std::sync::atomic::AtomicU8,
}

impl VolumeHooks {
    /// How copies are written: [`CopiesMode::ParallelSyncs`] unless a test
    /// asks otherwise.
    #[inline]
    pub(super) fn copies_mode(&self) -> CopiesMode {
        #[cfg(test)]
        match self.copies_mode.load(Ordering::Relaxed) {
            1 => return CopiesMode::Serial,
            2 => return CopiesMode::ParallelAll,
            _ => {}
        }
        CopiesMode::ParallelSyncs
    }

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
