//! What an open volume needs from the media its slices are on: it opens
//! its slices through this and reports their failures to it, so the volume
//! front end does not depend on how media are served
//! ([`LocalMedia`](crate::LocalMedia) implements it).

use super::device::SliceDevice;
use crate::space::SpaceAccount;
use crate::{DataPlaneError, SliceKey};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

pub(crate) trait SliceMedia: Send + Sync + 'static {
    /// Opens a slice for I/O; `None` (the slice is lost) when its medium is
    /// marked failed or the slice cannot be opened.
    fn open_slice(&self, medium: &str, key: &SliceKey) -> Option<Arc<dyn SliceDevice>>;

    /// I/O on the slice `key` of the medium failed with `e`.
    fn saw_io_error(&self, medium: &str, key: &SliceKey, e: &io::Error);

    /// Where the slice's file is (or goes) on the medium.
    fn slice_path(&self, medium: &str, key: &SliceKey) -> Result<PathBuf, DataPlaneError>;

    /// The snapshot space account of the medium.
    fn space_account(&self, medium: &str) -> Result<SpaceAccount, DataPlaneError>;

    /// Snapshot files came to or left the medium other than by saves.
    fn snapshot_files_changed(&self, medium: &str);
}
