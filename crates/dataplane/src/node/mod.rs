//! A storage node's side of the slice protocol (issue 21): this node's
//! media served to the fronts of other nodes, with the local data plane's
//! own slice files and snapshots ([`NodeSlices`]), epochs kept in files
//! ([`FileEpochStore`]) and one shared secret ([`SharedSecret`]).
//! [`start_slice_server`] puts them together.
//!
//! Names: a volume id or medium name must be one plain file-name component
//! (not empty, at most 255 bytes, not `.` or `..`, no `/`, no control
//! character), else EINVAL: every id the control plane makes (UUIDs, media
//! names of `[A-Za-z0-9._-]`) passes, and nothing can reach outside a
//! medium's or the state directory.

mod epochs;
mod names;
mod secret;
mod slices;
mod snapshot_parts;

pub use epochs::FileEpochStore;
pub use secret::SharedSecret;
pub use slices::{NodeSlices, MAP_PAGE_BYTES};

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use svs_sliceproto::{Authenticator, ServerConfig, SliceServer};

/// Serves this node's `media` (medium name, directory) over the slice
/// protocol on `listen`, with the epochs in `state_dir` (created if
/// needed), `authenticator` checking each connection's hello (a
/// [`SharedSecret`], say) and TLS from the first byte when `tls` is given;
/// the server's other settings are [`ServerConfig::default`]. Fails before
/// listening when a medium's directory cannot be created or written, a
/// medium name is not a plain file name, or an epoch file is damaged (see
/// [`FileEpochStore`]). Dropping the server (or
/// [`SliceServer::shutdown`]) stops it.
pub fn start_slice_server(
    media: Vec<(String, PathBuf)>,
    state_dir: &Path,
    listen: SocketAddr,
    authenticator: Arc<dyn Authenticator>,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> io::Result<SliceServer> {
    let slices = Arc::new(NodeSlices::open(media)?);
    let epochs = Arc::new(FileEpochStore::open(state_dir)?);
    let listener = TcpListener::bind(listen).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("slice server: listening on {listen}: {e}"),
        )
    })?;
    let config = ServerConfig {
        tls,
        ..ServerConfig::default()
    };
    SliceServer::start(listener, config, slices, authenticator, epochs)
}
