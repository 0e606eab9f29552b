//! The host side of an attached volume: where the kernel has no `nbd`
//! module, the agent's own NBD client ([`svs_nbd::NbdClient`], or
//! [`svs_nbd::ReconnectingClient`] to survive a server restart) serves the
//! volume as a single file in a FUSE mount ([`FuseFile`]), a loop device
//! ([`LoopDevice`]) turns that file into a block device, and the usual tools
//! make and grow filesystems on it ([`mkfs`], [`Mount`], [`resize2fs`],
//! [`xfs_growfs`]).
//! Where the kernel does have the `nbd` module, [`KernelNbd`] hands the
//! connection to a `/dev/nbdN` instead (untested here: no such module).
//!
//! Every FUSE mount, loop device and mount is owned by a guard that undoes
//! it on drop (also when a test fails), and touches nothing it did not
//! create: the FUSE mountpoint and the mount's target are the caller's, the
//! loop device is the one `losetup --find` gave this guard.
//!
//! What a host needs: root (or `CAP_SYS_ADMIN`), `/dev/fuse`, loop devices,
//! util-linux (`losetup`, `mount`, `umount`), e2fsprogs and xfsprogs.

mod command;
mod fs;
mod fuse;
pub mod host;
mod kernel_nbd;
mod loopdev;
mod superblock;

use std::io;

pub use fs::{mkfs, resize2fs, xfs_growfs, FsType, Mount};
pub use fuse::FuseFile;
pub use kernel_nbd::KernelNbd;
pub use loopdev::LoopDevice;
pub use superblock::{device_filesystem_size, filesystem_size, SUPERBLOCK_BYTES};

/// A block device the FUSE file exposes. Calls come from several FUSE
/// threads at once; offsets are within `size` of the file.
pub trait BlockDev: Send + Sync + 'static {
    /// Size in bytes when the FUSE file is mounted (grow it later with
    /// [`FuseFile::set_size`]).
    fn size(&self) -> u64;
    /// Whether writes must be refused.
    fn read_only(&self) -> bool;
    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// With `fua`, returns once the data is durable.
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()>;
    /// Makes every completed write durable.
    fn flush(&self) -> io::Result<()>;
    /// The bytes are no longer needed (discard).
    fn trim(&self, offset: u64, len: u64) -> io::Result<()>;
}

impl BlockDev for svs_nbd::NbdClient {
    fn size(&self) -> u64 {
        svs_nbd::NbdClient::size(self)
    }
    fn read_only(&self) -> bool {
        svs_nbd::NbdClient::read_only(self)
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        svs_nbd::NbdClient::read(self, offset, buf)
    }
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        svs_nbd::NbdClient::write(self, offset, data, fua)
    }
    fn flush(&self) -> io::Result<()> {
        svs_nbd::NbdClient::flush(self)
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        svs_nbd::NbdClient::trim(self, offset, len)
    }
}

/// The agent's device over a connection that survives a restart of the
/// server. `size` is the size known from the latest handshake: after
/// [`svs_nbd::ReconnectingClient::refresh_size`], grow the file with
/// [`FuseFile::set_size`].
impl BlockDev for svs_nbd::ReconnectingClient {
    fn size(&self) -> u64 {
        svs_nbd::ReconnectingClient::size(self)
    }
    fn read_only(&self) -> bool {
        svs_nbd::ReconnectingClient::read_only(self)
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        svs_nbd::ReconnectingClient::read(self, offset, buf)
    }
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        svs_nbd::ReconnectingClient::write(self, offset, data, fua)
    }
    fn flush(&self) -> io::Result<()> {
        svs_nbd::ReconnectingClient::flush(self)
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        svs_nbd::ReconnectingClient::trim(self, offset, len)
    }
}

/// What went wrong on the host side.
#[derive(Debug, thiserror::Error)]
pub enum HostDevError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("unexpected output from `{command}`: {output:?}")]
    Output { command: String, output: String },
}

impl HostDevError {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> HostDevError {
        HostDevError::Io {
            what: what.into(),
            source,
        }
    }
}

pub type Result<T> = std::result::Result<T, HostDevError>;
