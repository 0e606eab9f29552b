//! The kernel's NBD driver, where the host has it: our client does the
//! newstyle handshake ([`svs_nbd::NbdClient::negotiate`]), then hands the
//! connected socket to a free `/dev/nbdN` with the driver's ioctls
//! (`linux/nbd.h`), and the kernel speaks transmission from then on. No FUSE
//! file and no loop device are needed on that path.
//!
//! NOT TESTED AGAINST A KERNEL: the machine this was written on has no `nbd`
//! module, so only [`KernelNbd::available`] (false there) and compilation
//! are checked. The ioctl sequence is the one `nbd-client` and `qemu-nbd -c`
//! use: `SET_SOCK` (first, as `qemu-nbd -c` does: it claims the device),
//! `SET_BLKSIZE`, `SET_SIZE`, `SET_FLAGS`, `SET_TIMEOUT`, then `DO_IT`, all
//! on one thread of its own (`DO_IT` blocks while the device is connected);
//! teardown is `DISCONNECT`, wait for `DO_IT` to return, `CLEAR_QUE`,
//! `CLEAR_SOCK`.
//!
//! The kernel does not reconnect: when the server goes away, requests fail
//! after the timeout given here. Surviving a server restart is the FUSE
//! path's job ([`svs_nbd::ReconnectingClient`]).

use std::fs::File;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use svs_nbd::ExportInfo;
use tracing::{debug, warn};

use crate::{HostDevError, Result};

// `_IO(0xab, n)` of `linux/nbd.h`: no direction, no size, so 0xab00 + n.
const NBD_SET_SOCK: u64 = 0xab00;
const NBD_SET_BLKSIZE: u64 = 0xab01;
const NBD_SET_SIZE: u64 = 0xab02;
const NBD_DO_IT: u64 = 0xab03;
const NBD_CLEAR_SOCK: u64 = 0xab04;
const NBD_CLEAR_QUE: u64 = 0xab05;
const NBD_DISCONNECT: u64 = 0xab08;
const NBD_SET_TIMEOUT: u64 = 0xab09;
const NBD_SET_FLAGS: u64 = 0xab0a;

/// Logical block size given to the driver (volumes are whole GiB).
const BLOCK_SIZE: u64 = 4096;

/// One ioctl whose argument is a plain value (every NBD ioctl's is).
fn ioctl(fd: RawFd, request: u64, arg: u64) -> io::Result<()> {
    // SAFETY: the NBD ioctls take their argument by value, never as a
    // pointer, so no memory is shared with the kernel; `fd` is open.
    let rc = unsafe { libc::ioctl(fd, request as _, arg as libc::c_ulong) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A `/dev/nbdN` connected to an export; disconnected on drop.
pub struct KernelNbd {
    device: PathBuf,
    /// The device, opened for the ioctls.
    file: File,
    info: ExportInfo,
    /// Runs `NBD_DO_IT` until the device is disconnected.
    worker: Option<JoinHandle<io::Result<()>>>,
    /// Ours until the driver lets go of it (after `DO_IT` returns).
    socket: Option<TcpStream>,
}

impl KernelNbd {
    /// Whether this host has the kernel's NBD driver.
    pub fn available() -> bool {
        Path::new("/sys/module/nbd").exists() || Path::new("/dev/nbd0").exists()
    }

    /// Opens `export` at `addr` (handshake within `timeout`) and connects
    /// it to the first free `/dev/nbdN`. `timeout` is also the driver's
    /// request timeout: a request unanswered that long fails with EIO.
    pub fn connect(addr: &SocketAddr, export: &str, timeout: Duration) -> Result<KernelNbd> {
        let (socket, info) = svs_nbd::NbdClient::negotiate(addr, export, timeout)
            .map_err(|e| HostDevError::io(format!("NBD handshake with {addr}"), e))?;
        for device in free_devices()? {
            let file = match File::options().read(true).write(true).open(&device) {
                Ok(f) => f,
                Err(e) => {
                    debug!(device = %device.display(), error = %e, "cannot open NBD device");
                    continue;
                }
            };
            let worker_file = file
                .try_clone()
                .map_err(|e| HostDevError::io("duplicating the NBD device handle", e))?;
            let socket_fd = socket.as_raw_fd();
            let (set_up_tx, set_up_rx) = mpsc::channel();
            // One thread does every ioctl of the setup and then DO_IT: the
            // driver ties the device to the task that gave it the socket.
            let worker = std::thread::Builder::new()
                .name("nbd-do-it".into())
                .spawn(move || {
                    let fd = worker_file.as_raw_fd();
                    let set_up = setup(fd, socket_fd, &info, timeout);
                    let ok = set_up.is_ok();
                    let _ = set_up_tx.send(set_up);
                    if !ok {
                        return Ok(());
                    }
                    ioctl(fd, NBD_DO_IT, 0)
                })
                .map_err(|e| HostDevError::io("starting the NBD thread", e))?;
            let set_up = set_up_rx
                .recv()
                .unwrap_or_else(|_| Err(io::Error::other("the NBD thread ended before the setup")));
            match set_up {
                Ok(()) => {
                    return Ok(KernelNbd {
                        device,
                        file,
                        info,
                        worker: Some(worker),
                        socket: Some(socket),
                    })
                }
                Err(e) => {
                    let _ = worker.join();
                    // Taken by another task between the look and now.
                    if e.raw_os_error() == Some(libc::EBUSY) {
                        continue;
                    }
                    return Err(HostDevError::io(
                        format!("setting up {}", device.display()),
                        e,
                    ));
                }
            }
        }
        Err(HostDevError::io(
            "finding a free /dev/nbdN",
            io::Error::new(io::ErrorKind::NotFound, "every NBD device is in use"),
        ))
    }

    /// The block device, e.g. `/dev/nbd0`.
    pub fn device(&self) -> &Path {
        &self.device
    }

    /// The export's size at the handshake.
    pub fn size(&self) -> u64 {
        self.info.size
    }

    /// Disconnects the device (the kernel sends `NBD_CMD_DISC`) and waits
    /// for the driver to let go of it.
    pub fn disconnect(mut self) -> Result<()> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<()> {
        let Some(worker) = self.worker.take() else {
            return Ok(());
        };
        let fd = self.file.as_raw_fd();
        let disconnected = ioctl(fd, NBD_DISCONNECT, 0);
        if let Err(e) = &disconnected {
            warn!(device = %self.device.display(), error = %e, "NBD_DISCONNECT failed; clearing the socket");
            // Without a disconnect, clearing the socket is what ends DO_IT.
            let _ = ioctl(fd, NBD_CLEAR_SOCK, 0);
        }
        match worker.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => debug!(device = %self.device.display(), error = %e, "NBD_DO_IT ended"),
            Err(_) => warn!(device = %self.device.display(), "NBD_DO_IT thread panicked"),
        }
        let _ = ioctl(fd, NBD_CLEAR_QUE, 0);
        let _ = ioctl(fd, NBD_CLEAR_SOCK, 0);
        self.socket = None;
        disconnected
            .map_err(|e| HostDevError::io(format!("disconnecting {}", self.device.display()), e))
    }
}

impl Drop for KernelNbd {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            warn!(error = %e, "NBD device teardown");
        }
    }
}

/// The ioctls before `DO_IT`. The socket comes first, as `qemu-nbd -c`
/// does it: it claims the device (`EBUSY` if another task has it), so
/// nothing of another task's device is touched; a later failure releases it.
fn setup(fd: RawFd, socket: RawFd, info: &ExportInfo, timeout: Duration) -> io::Result<()> {
    ioctl(fd, NBD_SET_SOCK, socket as u64)?;
    let configured = ioctl(fd, NBD_SET_BLKSIZE, BLOCK_SIZE)
        .and_then(|()| ioctl(fd, NBD_SET_SIZE, info.size))
        .and_then(|()| ioctl(fd, NBD_SET_FLAGS, u64::from(info.flags)))
        .and_then(|()| ioctl(fd, NBD_SET_TIMEOUT, timeout.as_secs().max(1)));
    if configured.is_err() {
        let _ = ioctl(fd, NBD_CLEAR_SOCK, 0);
    }
    configured
}

/// `/dev/nbdN` without a connection (no `/sys/block/nbdN/pid`), in order.
fn free_devices() -> Result<Vec<PathBuf>> {
    let entries =
        std::fs::read_dir("/sys/block").map_err(|e| HostDevError::io("listing /sys/block", e))?;
    let mut numbers: Vec<u32> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_prefix("nbd")?.parse().ok()
        })
        .filter(|n| !Path::new(&format!("/sys/block/nbd{n}/pid")).exists())
        .collect();
    numbers.sort_unstable();
    Ok(numbers
        .into_iter()
        .map(|n| PathBuf::from(format!("/dev/nbd{n}")))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ioctl_numbers_are_io_0xab_n() {
        let io = |n: u64| (0xab << 8) | n;
        assert_eq!(NBD_SET_SOCK, io(0));
        assert_eq!(NBD_SET_BLKSIZE, io(1));
        assert_eq!(NBD_SET_SIZE, io(2));
        assert_eq!(NBD_DO_IT, io(3));
        assert_eq!(NBD_CLEAR_SOCK, io(4));
        assert_eq!(NBD_CLEAR_QUE, io(5));
        assert_eq!(NBD_DISCONNECT, io(8));
        assert_eq!(NBD_SET_TIMEOUT, io(9));
        assert_eq!(NBD_SET_FLAGS, io(10));
    }

    /// This machine has no `nbd` module: the driver path cannot run here.
    #[test]
    fn the_driver_is_not_available_here() {
        if Path::new("/sys/module/nbd").exists() || Path::new("/dev/nbd0").exists() {
            eprintln!("this host has the nbd module; nothing to check");
            return;
        }
        assert!(!KernelNbd::available());
        assert!(free_devices().unwrap().is_empty());
    }
}
