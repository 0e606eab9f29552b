//! Test builds: a live move or rebuild driven through its phases the way
//! the service drives them, with `commit` standing for the store's commit.

use super::io::LocalVolumeIo;
use super::{SliceCopyKind, VolumeIo};
use crate::{CopyOptions, DataPlaneError};
use std::sync::Arc;

impl LocalVolumeIo {
    /// Moves slice (`copy`, `column`) to `to_medium`: begin, forget the
    /// checkpoint when starting again, fill, switch, `commit`, then finish
    /// (or abort when a phase or `commit` fails).
    pub(crate) fn move_slice(
        self: &Arc<Self>,
        copy: u32,
        column: u32,
        to_medium: &str,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
        commit: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), DataPlaneError> {
        self.copy_in_phases(
            SliceCopyKind::Move,
            (copy, column, to_medium),
            options,
            progress,
            commit,
        )
    }

    /// [`LocalVolumeIo::move_slice`] for either kind of copy (a rebuild's
    /// `copy` is the lost slice's).
    pub(crate) fn copy_in_phases(
        self: &Arc<Self>,
        kind: SliceCopyKind,
        (copy, column, to_medium): (u32, u32, &str),
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
        commit: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), DataPlaneError> {
        let mut copying = Arc::clone(self).begin_slice_copy(
            kind,
            copy,
            column,
            to_medium,
            options.resume.from,
        )?;
        if copying.in_place() {
            return copying.finish();
        }
        let failed = |e: std::io::Error| DataPlaneError::Io {
            medium: to_medium.to_string(),
            slice: format!("{}/c{copy}-k{column}", self.volume_id),
            op: "commit",
            source: e,
        };
        if copying.starts_at() == 0 {
            options.resume.restart().map_err(failed)?;
        }
        if let Err(e) = copying.fill(options, progress) {
            copying.abort()?;
            return Err(e);
        }
        if let Err(e) = copying.switch() {
            copying.abort()?;
            return Err(e);
        }
        match commit() {
            Ok(()) => copying.finish(),
            Err(message) => {
                copying.abort()?;
                Err(failed(std::io::Error::other(message)))
            }
        }
    }
}
