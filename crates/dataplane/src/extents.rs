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

/// The allocation of `[start, start + len)` of `file`, as `(length, hole)`
/// runs in order covering the range. Costs one `lseek(SEEK_HOLE)` when the
/// range is all data (the common case of a read), one more per change of
/// status after that. Bytes past the end of the file are a hole (they read
/// as zeroes); on a filesystem without SEEK_HOLE support everything is data.
pub(crate) fn allocation(file: &File, start: u64, len: u64) -> io::Result<Vec<(u64, bool)>> {
    let end = start.saturating_add(len);
    let mut runs: Vec<(u64, bool)> = Vec::new();
    let mut push = |n: u64, hole: bool| match runs.last_mut() {
        Some(last) if last.1 == hole => last.0 += n,
        _ => runs.push((n, hole)),
    };
    let mut at = start;
    while at < end {
        let data_end = match seek(file, at, libc::SEEK_HOLE) {
            Ok(Some(h)) => h.min(end),
            // At or past the end of the file: the rest reads as zeroes.
            Ok(None) => at,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => end,
            Err(e) => return Err(e),
        };
        if data_end > at {
            push(data_end - at, false);
            at = data_end;
            continue;
        }
        // `at` is in a hole: it ends where the next data starts.
        let hole_end = match seek(file, at, libc::SEEK_DATA)? {
            Some(d) => d.min(end),
            None => end,
        };
        if hole_end > at {
            push(hole_end - at, true);
            at = hole_end;
        } else {
            // Data appeared at `at` between the two seeks (a concurrent
            // write): call one block data and look again after it.
            let n = BLOCK.min(end - at);
            push(n, false);
            at += n;
        }
    }
    Ok(runs)
}

/// Deallocates `[offset, offset + len)` of `file` (reads as zeros after),
/// keeping its size.
pub(crate) fn punch_hole(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let (Ok(off), Ok(n)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "range too large",
        ));
    };
    // SAFETY: plain syscall on a valid, open descriptor; no memory is passed.
    let r = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            off,
            n,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Hints the kernel to read `[offset, offset + len)` of `file` ahead.
pub(crate) fn will_need(file: &File, offset: u64, len: u64) {
    let (Ok(off), Ok(n)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return;
    };
    // SAFETY: plain syscall on a valid, open descriptor; no memory is passed.
    // Only a hint: its result is ignored.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), off, n, libc::POSIX_FADV_WILLNEED);
    }
}

/// Reads `buf` at `offset` only if every byte is in the page cache
/// (`preadv2` with `RWF_NOWAIT`): `false`, with `buf` partly overwritten,
/// when some of it would wait for the disk, when the kernel or the
/// filesystem cannot tell, or at the end of the file (a plain read then
/// reports what is wrong).
pub(crate) fn read_cached_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<bool> {
    let mut done = 0;
    while done < buf.len() {
        let at = offset
            .checked_add(done as u64)
            .and_then(|at| libc::off_t::try_from(at).ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        let rest = &mut buf[done..];
        let iov = libc::iovec {
            iov_base: rest.as_mut_ptr().cast(),
            iov_len: rest.len(),
        };
        // SAFETY: one iovec over `rest`, a live slice borrowed mutably for
        // the whole call, so the kernel writes only bytes we own.
        let n = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, at, libc::RWF_NOWAIT) };
        match n {
            0 => return Ok(false),
            n if n > 0 => done += n as usize,
            _ => {
                let e = io::Error::last_os_error();
                return match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN | libc::EOPNOTSUPP | libc::EINVAL | libc::ENOSYS) => {
                        Ok(false)
                    }
                    _ => Err(e),
                };
            }
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn allocation_follows_the_holes_of_a_sparse_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .expect("file");
        file.set_len(1 << 20).expect("size");
        file.write_all_at(&[1; 8192], 64 * 1024).expect("write");
        file.write_all_at(&[2; 4096], 512 * 1024).expect("write");
        assert_eq!(
            allocation(&file, 0, 1 << 20).expect("allocation"),
            vec![
                (64 * 1024, true),
                (8192, false),
                (512 * 1024 - 72 * 1024, true),
                (4096, false),
                ((1 << 20) - 516 * 1024, true),
            ]
        );
        // Inside one data run: one run, clamped to the range.
        assert_eq!(
            allocation(&file, 64 * 1024 + 100, 1000).expect("allocation"),
            vec![(1000, false)]
        );
        assert_eq!(
            allocation(&file, 60 * 1024, 8192).expect("allocation"),
            vec![(4096, true), (4096, false)]
        );
        // Past the end of the file: zeroes, so a hole.
        assert_eq!(
            allocation(&file, 1 << 20, 4096).expect("allocation"),
            vec![(4096, true)]
        );
        assert_eq!(allocation(&file, 0, 0).expect("allocation"), vec![]);
    }

    #[test]
    fn a_cached_read_answers_from_the_page_cache_or_says_it_cannot() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 64 * 1024]).expect("write");
        let file = File::open(&path).expect("open");
        // Just written: in the page cache.
        let mut buf = vec![0u8; 64 * 1024];
        assert!(read_cached_at(&file, &mut buf, 0).expect("read"));
        assert!(buf.iter().all(|&b| b == 7));
        // Past the end: not answered here (a plain read reports it).
        let mut past = vec![0u8; 4096];
        assert!(!read_cached_at(&file, &mut past, 62 * 1024).expect("read"));
        assert!(!read_cached_at(&file, &mut past, 1 << 20).expect("read"));
        // Dropped from the cache, it would wait for the disk.
        file.sync_all().expect("sync");
        // SAFETY: plain syscall on a valid descriptor; a hint only.
        unsafe {
            libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
        let mut again = vec![0u8; 64 * 1024];
        if !read_cached_at(&file, &mut again, 0).expect("read") {
            file.read_exact_at(&mut again, 0).expect("plain read");
        }
        assert!(again.iter().all(|&b| b == 7));
    }
}
