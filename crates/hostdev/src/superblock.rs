//! The size a filesystem really has, read from its superblock: the
//! recorded "grown to" size says what svs asked for, not what happened
//! (a growth that failed leaves the filesystem smaller than its volume).
//! No tool is run: ext4 and XFS both keep their size at a fixed place in
//! the first 2 KiB of the device.

use crate::fs::FsType;
use std::io::{self, Read};
use std::path::Path;

/// Bytes to read from the start of a device to find either superblock.
pub const SUPERBLOCK_BYTES: usize = 2048;

const EXT4_OFFSET: usize = 1024;
const EXT4_MAGIC: u16 = 0xEF53;
const EXT4_INCOMPAT_64BIT: u32 = 0x80;
const XFS_MAGIC: &[u8; 4] = b"XFSB";

fn le32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The filesystem on a device and its size in bytes, from the device's
/// first [`SUPERBLOCK_BYTES`]; None when neither superblock is there.
pub fn filesystem_size(head: &[u8]) -> Option<(FsType, u64)> {
    if head.get(..4) == Some(XFS_MAGIC.as_slice()) {
        let block = u32::from_be_bytes(head.get(4..8)?.try_into().ok()?);
        let blocks = u64::from_be_bytes(head.get(8..16)?.try_into().ok()?);
        return Some((FsType::Xfs, blocks.checked_mul(u64::from(block))?));
    }
    let sb = head.get(EXT4_OFFSET..)?;
    let magic = u16::from_le_bytes(sb.get(0x38..0x3A)?.try_into().ok()?);
    if magic != EXT4_MAGIC {
        return None;
    }
    let log = le32(sb, 0x18)?;
    let block = 1024u64.checked_shl(log).filter(|b| *b <= 1 << 16)?;
    let mut blocks = u64::from(le32(sb, 0x04)?);
    if le32(sb, 0x60)? & EXT4_INCOMPAT_64BIT != 0 {
        blocks |= u64::from(le32(sb, 0x150)?) << 32;
    }
    Some((FsType::Ext4, blocks.checked_mul(block)?))
}

/// [`filesystem_size`] of a device or file on this host.
pub fn device_filesystem_size(device: &Path) -> io::Result<Option<(FsType, u64)>> {
    let mut head = vec![0u8; SUPERBLOCK_BYTES];
    std::fs::File::open(device)?.read_exact(&mut head)?;
    Ok(filesystem_size(&head))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ext4_superblock_gives_blocks_times_block_size() {
        let mut head = vec![0u8; SUPERBLOCK_BYTES];
        let sb = &mut head[EXT4_OFFSET..];
        sb[0x04..0x08].copy_from_slice(&524_288u32.to_le_bytes());
        sb[0x18..0x1C].copy_from_slice(&2u32.to_le_bytes());
        sb[0x38..0x3A].copy_from_slice(&EXT4_MAGIC.to_le_bytes());
        assert_eq!(filesystem_size(&head), Some((FsType::Ext4, 2 << 30)));
        // The high word counts only with the 64bit feature.
        sb_set(&mut head, 0x150, 1);
        assert_eq!(filesystem_size(&head), Some((FsType::Ext4, 2 << 30)));
        sb_set(&mut head, 0x60, EXT4_INCOMPAT_64BIT);
        assert_eq!(
            filesystem_size(&head),
            Some((FsType::Ext4, (2 << 30) + (4096u64 << 32)))
        );
    }

    fn sb_set(head: &mut [u8], at: usize, v: u32) {
        head[EXT4_OFFSET + at..EXT4_OFFSET + at + 4].copy_from_slice(&v.to_le_bytes());
    }

    #[test]
    fn an_xfs_superblock_is_big_endian() {
        let mut head = vec![0u8; SUPERBLOCK_BYTES];
        head[..4].copy_from_slice(XFS_MAGIC);
        head[4..8].copy_from_slice(&4096u32.to_be_bytes());
        head[8..16].copy_from_slice(&786_432u64.to_be_bytes());
        assert_eq!(filesystem_size(&head), Some((FsType::Xfs, 3 << 30)));
    }

    #[test]
    fn no_superblock_is_none() {
        assert_eq!(filesystem_size(&[0u8; SUPERBLOCK_BYTES]), None);
        assert_eq!(filesystem_size(&[0u8; 10]), None);
    }
}
