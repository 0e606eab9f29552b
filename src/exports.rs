//! NBD exports of attached volumes: which export names exist, which node
//! (by address) may open each, and the one `VolumeIo` per attached volume
//! that every connection and every live slice move shares.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use svs_dataplane::{DataPlane, DataPlaneError, VolumeIo, VolumeLayout};
use svs_domain::GIB;
use svs_nbd::{BlockDevice, Exports, OpenedExport};
use svs_store::{SliceRow, Volume};
use tokio_util::sync::CancellationToken;

struct Export {
    volume_id: String,
    node: String,
    readonly: bool,
    /// Cancelled to close this export's connections (detach, modify).
    closed: CancellationToken,
}

#[derive(Default)]
struct State {
    exports: HashMap<String, Export>,
    volumes: HashMap<String, Arc<dyn VolumeIo>>,
    addresses: HashMap<String, IpAddr>,
}

pub struct ExportRegistry {
    media: Arc<dyn DataPlane>,
    state: Mutex<State>,
}

impl ExportRegistry {
    pub fn new(media: Arc<dyn DataPlane>) -> ExportRegistry {
        ExportRegistry {
            media,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere; the maps stay usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes the export available, opening the volume for I/O if needed.
    pub fn attach(
        &self,
        export_name: &str,
        node: &str,
        readonly: bool,
        layout: &VolumeLayout,
    ) -> Result<(), DataPlaneError> {
        let mut state = self.state();
        if !state.volumes.contains_key(&layout.volume_id) {
            let io = self.media.open_volume(layout)?;
            state.volumes.insert(layout.volume_id.clone(), io);
        }
        let replaced = state.exports.insert(
            export_name.to_string(),
            Export {
                volume_id: layout.volume_id.clone(),
                node: node.to_string(),
                readonly,
                closed: CancellationToken::new(),
            },
        );
        // Attaching again (a retried job) must not orphan the connections
        // of the export it replaces: a detach could no longer close them.
        if let Some(old) = replaced {
            old.closed.cancel();
        }
        Ok(())
    }

    /// Removes the export and closes its connections; the volume is closed
    /// for I/O when no export of it is left.
    pub fn detach(&self, export_name: &str) {
        let mut state = self.state();
        if let Some(export) = state.exports.remove(export_name) {
            export.closed.cancel();
            let still_used = state
                .exports
                .values()
                .any(|e| e.volume_id == export.volume_id);
            if !still_used {
                state.volumes.remove(&export.volume_id);
            }
        }
    }

    /// Changes read-only mode; open connections are closed so clients
    /// reconnect with the new flags.
    pub fn set_readonly(&self, export_name: &str, readonly: bool) {
        let mut state = self.state();
        if let Some(export) = state.exports.get_mut(export_name) {
            if export.readonly != readonly {
                export.readonly = readonly;
                export.closed.cancel();
                export.closed = CancellationToken::new();
            }
        }
    }

    pub fn set_node_address(&self, node: &str, address: Option<IpAddr>) {
        let mut state = self.state();
        match address {
            Some(ip) => state.addresses.insert(node.to_string(), ip),
            None => state.addresses.remove(node),
        };
    }

    /// The open I/O of a volume, when it is attached.
    pub fn volume_io(&self, volume_id: &str) -> Option<Arc<dyn VolumeIo>> {
        self.state().volumes.get(volume_id).cloned()
    }

    /// Whether the export is open (its volume attached for I/O).
    pub fn is_exported(&self, export_name: &str) -> bool {
        self.state().exports.contains_key(export_name)
    }

    /// After a resize: new connections see the new size.
    pub fn set_size(&self, volume_id: &str, bytes: u64) {
        if let Some(io) = self.state().volumes.get(volume_id) {
            io.set_size(bytes);
        }
    }

    fn allowed(state: &State, export: &Export, peer: SocketAddr) -> bool {
        let peer_ip = match peer.ip() {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        state.addresses.get(&export.node) == Some(&peer_ip)
    }
}

impl Exports for ExportRegistry {
    fn open(&self, name: &str, peer: SocketAddr) -> Option<OpenedExport> {
        let state = self.state();
        let export = state.exports.get(name)?;
        if !Self::allowed(&state, export, peer) {
            tracing::warn!(%peer, node = %export.node, "NBD client refused: not the attached node");
            return None;
        }
        let io = state.volumes.get(&export.volume_id)?;
        Some(OpenedExport {
            device: Arc::new(AttachedVolume {
                io: Arc::clone(io),
                readonly: export.readonly,
            }),
            closed: export.closed.clone(),
        })
    }

    /// Only the address of a node with an attached export may even start a
    /// handshake: any other peer is closed at accept, so strangers cannot
    /// hold the NBD server's connection slots (see `svs_nbd::Exports::admits`).
    fn admits(&self, peer: IpAddr) -> bool {
        let state = self.state();
        state
            .exports
            .values()
            .any(|e| state.addresses.get(&e.node) == Some(&peer))
    }

    fn list(&self, peer: SocketAddr) -> Vec<String> {
        let state = self.state();
        let mut names: Vec<String> = state
            .exports
            .iter()
            .filter(|(_, e)| Self::allowed(&state, e, peer))
            .map(|(n, _)| n.clone())
            .collect();
        names.sort();
        names
    }
}

/// What one NBD connection sees: the volume, possibly read-only.
struct AttachedVolume {
    io: Arc<dyn VolumeIo>,
    readonly: bool,
}

impl AttachedVolume {
    /// The NBD layer already refuses writes on a read-only export; this
    /// keeps the rule even if a caller bypasses it.
    fn refuse_if_readonly(&self) -> io::Result<()> {
        if self.readonly {
            Err(io::Error::from(io::ErrorKind::PermissionDenied))
        } else {
            Ok(())
        }
    }
}

impl BlockDevice for AttachedVolume {
    fn size(&self) -> u64 {
        self.io.size()
    }

    fn read_only(&self) -> bool {
        self.readonly
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.io.read(offset, buf)
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        self.refuse_if_readonly()?;
        self.io.write(offset, data, fua)
    }

    fn flush(&self) -> io::Result<()> {
        self.io.flush()
    }

    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.refuse_if_readonly()?;
        self.io.discard(offset, len, false)
    }

    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        self.refuse_if_readonly()?;
        self.io.discard(offset, len, fua)
    }
}

/// Where each slice of a volume is, for opening it for I/O.
pub fn volume_layout(volume: &Volume, slices: &[SliceRow]) -> VolumeLayout {
    let copies = slices.iter().map(|r| r.slice.copy + 1).max().unwrap_or(0) as usize;
    let columns = slices.iter().map(|r| r.slice.column + 1).max().unwrap_or(0) as usize;
    let mut media = vec![vec![String::new(); columns]; copies];
    for r in slices {
        media[r.slice.copy as usize][r.slice.column as usize] = r.slice.medium.clone();
    }
    VolumeLayout {
        volume_id: volume.id.clone(),
        size: volume.size * GIB,
        media,
    }
}
