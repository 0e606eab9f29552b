//! Walking a file's data extents with `lseek(SEEK_DATA/SEEK_HOLE)`.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Digest and copy work on aligned blocks of this many bytes.
pub(crate) const BLOCK: u64 = 4096;

/// Hints the kernel that `file` will be read front to back (bigger readahead).
pub(crate) fn advise_sequential(file: &File) {
    // SAFETY: plain syscall on a valid, open descriptor; no memory is passed.
    // The advice is only a hint, so its result is ignored.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL);
    }
}

/// `lseek` returning `None` for ENXIO (no data/hole at or after `offset`).
fn seek(file: &File, offset: u64, whence: libc::c_int) -> io::Result<Option<u64>> {
    let off = libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
    // SAFETY: plain syscall on a valid, open descriptor; no memory is passed.
    // It moves the descriptor's file position, which nothing here relies on
    // (all I/O is positional).
    let r = unsafe { libc::lseek(file.as_raw_fd(), off, whence) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENXIO) {
            return Ok(None);
        }
        return Err(e);
    }
    Ok(Some(r as u64))
}

/// The ranges of a file of length `len` that may hold data, in order, as
/// `(start, end)`. Starts are rounded down and ends up to [`BLOCK`] (ends
/// clamped to `len`), and ranges never overlap, so every block that may hold
/// data lies in exactly one range and blocks keep their absolute alignment.
/// On a filesystem without SEEK_DATA support the whole rest of the file is
/// treated as data.
pub(crate) struct DataExtents<'a> {
    file: &'a File,
    pos: u64,
    len: u64,
}

impl<'a> DataExtents<'a> {
    pub(crate) fn new(file: &'a File, len: u64) -> Self {
        DataExtents { file, pos: 0, len }
    }

    /// The ranges at or after `pos` (a multiple of [`BLOCK`]).
    pub(crate) fn from(file: &'a File, pos: u64, len: u64) -> Self {
        DataExtents { file, pos, len }
    }

    fn next_extent(&mut self) -> io::Result<Option<(u64, u64)>> {
        if self.pos >= self.len {
            return Ok(None);
        }
        let unsupported = |e: &io::Error| e.raw_os_error() == Some(libc::EINVAL);
        let start = match seek(self.file, self.pos, libc::SEEK_DATA) {
            Ok(Some(s)) => s,
            Ok(None) => return Ok(None),
            Err(e) if unsupported(&e) => self.pos,
            Err(e) => return Err(e),
        };
        if start >= self.len {
            return Ok(None);
        }
        let end = match seek(self.file, start, libc::SEEK_HOLE) {
            Ok(Some(h)) => h,
            Ok(None) => self.len,
            Err(e) if unsupported(&e) => self.len,
            Err(e) => return Err(e),
        };
        let start = (start / BLOCK * BLOCK).max(self.pos);
        let end = end
            .max(start + 1)
            .div_ceil(BLOCK)
            .saturating_mul(BLOCK)
            .min(self.len);
        self.pos = end;
        Ok(Some((start, end)))
    }
}

impl Iterator for DataExtents<'_> {
    type Item = io::Result<(u64, u64)>;

    fn next(&mut self) -> Option<Self::Item> {
        let r = self.next_extent();
        if !matches!(r, Ok(Some(_))) {
            self.pos = self.len; // stop after the end or an error
        }
        r.transpose()
    }
}
