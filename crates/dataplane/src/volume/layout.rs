//! Where a volume's bytes are: its layout, the striping and extents.

use crate::SliceKey;

/// Striping unit: 1 MiB (a GiB-sized column holds whole stripes).
pub const STRIPE: u64 = 1 << 20;

/// Where a volume's slices are: `media[copy][column]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeLayout {
    pub volume_id: String,
    /// Logical size in bytes.
    pub size: u64,
    pub media: Vec<Vec<String>>,
    /// The front epoch this opening of the volume writes with: every fenced
    /// request to a storage node carries it, and a node that has seen a
    /// higher one refuses it (see [`crate::FrontFenced`]). 0 for a volume
    /// whose slices are all local (no node checks it).
    pub epoch: u64,
}

/// A run of a volume's bytes of one allocation status (see
/// [`VolumeIo::extents`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub len: u64,
    /// Not allocated where reads come from: reads as zeroes.
    pub hole: bool,
}

/// Appends a run to `extents`, merged into the last one if of equal status.
pub(super) fn push_extent(extents: &mut Vec<Extent>, len: u64, hole: bool) {
    if len == 0 {
        return;
    }
    match extents.last_mut() {
        Some(last) if last.hole == hole => last.len += len,
        _ => extents.push(Extent { len, hole }),
    }
}

/// A piece of a request that falls in one stripe of one column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Segment {
    pub(super) column: usize,
    /// Offset inside the column's slice files.
    pub(super) slice_offset: u64,
    /// Offset inside the request's buffer.
    pub(super) buf_offset: usize,
    pub(super) len: usize,
}

/// Splits `[offset, offset + len)` into per-column segments.
pub(super) fn segments(columns: usize, offset: u64, len: usize) -> Vec<Segment> {
    let columns = columns.max(1) as u64;
    let mut out = Vec::new();
    let mut done = 0usize;
    while done < len {
        let at = offset + done as u64;
        let stripe = at / STRIPE;
        let within = at % STRIPE;
        let n = ((STRIPE - within) as usize).min(len - done);
        out.push(Segment {
            column: (stripe % columns) as usize,
            slice_offset: (stripe / columns) * STRIPE + within,
            buf_offset: done,
            len: n,
        });
        done += n;
    }
    out
}

pub(crate) fn label(key: &SliceKey) -> String {
    format!("{}/c{}-k{}", key.volume_id, key.copy, key.column)
}
