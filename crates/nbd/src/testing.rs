//! Test devices for this crate's tests and, with feature `testing`, for the
//! tests of the crates that serve or consume NBD (the host block path).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::{BlockDevice, Extent};

/// A device over a sparse file: pread/pwrite, fdatasync, holes punched for
/// trim and write zeroes, extents from SEEK_DATA / SEEK_HOLE. It can grow,
/// and a read-only view shares its bytes.
pub struct FileDevice {
    pub file: File,
    size: AtomicU64,
    read_only: bool,
}

impl FileDevice {
    /// A new file of `size` bytes at `path` (an existing file is emptied).
    pub fn create(path: &Path, size: u64) -> io::Result<Arc<FileDevice>> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        file.set_len(size)?;
        Ok(Arc::new(FileDevice {
            file,
            size: AtomicU64::new(size),
            read_only: false,
        }))
    }

    /// The same bytes, refusing writes.
    pub fn read_only_view(&self) -> io::Result<Arc<FileDevice>> {
        Ok(Arc::new(FileDevice {
            file: self.file.try_clone()?,
            size: AtomicU64::new(self.size()),
            read_only: true,
        }))
    }

    pub fn grow(&self, size: u64) -> io::Result<()> {
        self.file.set_len(size)?;
        self.size.store(size, Ordering::SeqCst);
        Ok(())
    }

    fn punch(&self, offset: u64, len: u64) -> io::Result<()> {
        // SAFETY: fallocate on a file descriptor this device owns.
        let rc = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EOPNOTSUPP) {
            return Err(err);
        }
        // No hole punching here: write the zeroes.
        let zeroes = vec![0u8; 64 * 1024];
        let mut at = offset;
        while at < offset + len {
            let n = (offset + len - at).min(zeroes.len() as u64) as usize;
            self.file.write_all_at(&zeroes[..n], at)?;
            at += n as u64;
        }
        Ok(())
    }
}

impl BlockDevice for FileDevice {
    fn size(&self) -> u64 {
        self.size.load(Ordering::SeqCst)
    }
    fn read_only(&self) -> bool {
        self.read_only
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        self.file.write_all_at(data, offset)?;
        if fua {
            self.file.sync_data()?;
        }
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.punch(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        self.punch(offset, len)?;
        if fua {
            self.file.sync_data()?;
        }
        Ok(())
    }
    /// One file serves every connection: its fsync covers them all.
    fn shared_flush(&self) -> bool {
        true
    }
    /// The file's holes, from SEEK_DATA / SEEK_HOLE.
    fn extents(&self, offset: u64, len: u64) -> io::Result<Vec<Extent>> {
        let end = offset + len;
        let seek = |at: u64, whence| {
            // SAFETY: lseek on a file descriptor this device owns.
            let r = unsafe { libc::lseek(self.file.as_raw_fd(), at as libc::off_t, whence) };
            if r < 0 {
                let e = io::Error::last_os_error();
                // ENXIO: no data at or after `at`.
                return if e.raw_os_error() == Some(libc::ENXIO) {
                    Ok(end)
                } else {
                    Err(e)
                };
            }
            Ok((r as u64).min(end))
        };
        let mut out = Vec::new();
        let mut at = offset;
        while at < end {
            let data = seek(at, libc::SEEK_DATA)?;
            if data > at {
                out.push(Extent {
                    len: data - at,
                    hole: true,
                });
                at = data;
                continue;
            }
            let hole = seek(at, libc::SEEK_HOLE)?.max(at + 1);
            out.push(Extent {
                len: hole - at,
                hole: false,
            });
            at = hole;
        }
        Ok(out)
    }
}
