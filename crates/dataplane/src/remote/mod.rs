//! Media of this host and media of storage nodes behind one data plane
//! ([`ClusterMedia`]): every [`DataPlane`] call on a node's medium goes to
//! that node over the slice protocol, and a volume opened here mixes local
//! slices (files, as [`LocalMedia`] serves them) and remote ones
//! ([`slice::RemoteSlice`]). Failures of remote slices are recorded and
//! reported exactly as local ones (`on_copy_failure`, `failed_media`,
//! `failed_copies`): a node that cannot be reached, or answers an I/O
//! error, fails its medium; a slice the node says is missing (ENOENT) is
//! that copy lost alone.
//!
//! Why a wrapper rather than more of `LocalMedia`: the local media stay as
//! they are (directories, snapshot budgets, probes of files), and routing
//! by medium is one `match` per call here instead of one in every local
//! path; the two share one record of health, so the service's existing
//! polls and listener see both.

mod copy;
mod link;
mod slice;

pub use link::NodeEndpoint;

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use svs_sliceproto::SliceClient;

use self::link::NodeLink;
use self::slice::{slice_name, RemoteSlice};
use crate::space::SpaceAccount;
use crate::volume::{
    is_media_failure, label, Front, LocalVolumeIo, NodeTarget, OpenedNodeTarget, SliceDevice,
    SliceMedia, VolumeIo, VolumeLayout,
};
use crate::{
    CopyFailureListener, CopyOptions, DataPlane, DataPlaneError, Digest, LocalMedia, LossRecord,
    SliceKey, StoredSlice,
};

/// The default time limit of every request to a storage node (and of
/// connecting to it): a node that stops answering is a failed medium
/// after this long.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The name a front gives itself in the hello.
const CALLER: &str = "svs front end";

/// This host's media and storage nodes' media. Clones share everything.
#[derive(Clone)]
pub struct ClusterMedia {
    local: LocalMedia,
    nodes: Arc<Nodes>,
}

struct Nodes {
    request_timeout: Duration,
    /// The node this process is, and its slice server's in-process client
    /// (a storage node's fronts reach their own copies so).
    own: RwLock<Option<(String, Arc<SliceClient>)>>,
    /// Node id → its connection.
    links: RwLock<HashMap<String, Arc<NodeLink>>>,
    /// Medium → the node holding it.
    media: RwLock<HashMap<String, String>>,
}

impl std::fmt::Debug for ClusterMedia {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterMedia")
            .field("local", &self.local)
            .field("node_media", &*self.nodes.media())
            .finish_non_exhaustive()
    }
}

impl Nodes {
    fn media(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, String>> {
        // Every update is one insert or remove: poisoning is ignored.
        self.media.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn links(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<NodeLink>>> {
        self.links.read().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A storage node's medium as a call finds it.
struct NodeMedium {
    node: String,
    link: Arc<NodeLink>,
}

impl ClusterMedia {
    /// Serves `local`'s media (shared with it: clones see the same media
    /// and health) and no node medium yet. `request_timeout` bounds every
    /// request to a node (see [`DEFAULT_REQUEST_TIMEOUT`]).
    pub fn new(local: LocalMedia, request_timeout: Duration) -> ClusterMedia {
        ClusterMedia {
            local,
            nodes: Arc::new(Nodes {
                request_timeout,
                own: RwLock::default(),
                links: RwLock::default(),
                media: RwLock::default(),
            }),
        }
    }

    /// The media of this host.
    pub fn local(&self) -> &LocalMedia {
        &self.local
    }

    /// This process is the storage node `node`, whose slice server
    /// `client` reaches in process (`SliceServer::in_process_client`): its
    /// media are reached through it, with the same epoch fence as over the
    /// network and without a socket. Called again with a new client when
    /// the slice server restarts.
    pub fn reach_in_process(&self, node: &str, client: SliceClient) {
        let client = Arc::new(client);
        *self
            .nodes
            .own
            .write()
            .unwrap_or_else(PoisonError::into_inner) =
            Some((node.to_string(), Arc::clone(&client)));
        if let Some(link) = self.nodes.links().get(node) {
            link.set_in_process(client);
        }
        tracing::info!(node, "this node's own media are reached in process");
    }

    /// Serves `medium` of the storage node `endpoint.node`, reached at
    /// `endpoint` (a node already known with other settings gets them, as
    /// by [`ClusterMedia::update_node`]), once the node proves it answers
    /// and holds the medium ([`DataPlane::check_medium`]); else the medium
    /// is not added. True when the medium is new. A medium of this host,
    /// or of another node, of that name is refused.
    pub fn add_node_medium(
        &self,
        medium: &str,
        endpoint: NodeEndpoint,
    ) -> Result<bool, DataPlaneError> {
        if let Ok(dir) = self.local.medium_dir(medium) {
            return Err(DataPlaneError::MediumExists {
                medium: medium.to_string(),
                dir,
            });
        }
        let node = endpoint.node.clone();
        let added = {
            let mut media = self
                .nodes
                .media
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            match media.get(medium) {
                Some(holder) if *holder != node => {
                    return Err(DataPlaneError::MediumOnNode {
                        medium: medium.to_string(),
                        node: holder.clone(),
                    })
                }
                Some(_) => false,
                None => {
                    media.insert(medium.to_string(), node.clone());
                    true
                }
            }
        };
        {
            let mut links = self
                .nodes
                .links
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            match links.get(&node) {
                Some(link) if link.reaches(&endpoint) => {}
                Some(link) => link.update(endpoint),
                None => {
                    let link = NodeLink::new(endpoint, self.nodes.request_timeout, CALLER);
                    let own = self
                        .nodes
                        .own
                        .read()
                        .unwrap_or_else(PoisonError::into_inner);
                    if let Some((_, client)) = own.as_ref().filter(|(n, _)| *n == node) {
                        link.set_in_process(Arc::clone(client));
                    }
                    links.insert(node.clone(), Arc::new(link));
                }
            }
        }
        match self.check_medium(medium) {
            Ok(()) => Ok(added),
            Err(e) => {
                if added {
                    self.remove_node_medium(medium);
                }
                Err(e)
            }
        }
    }

    /// Stops serving a node's medium without touching its slices (see
    /// [`DataPlane::remove_medium`] to delete them first); what was known
    /// of its health goes. The node's connection closes with its last
    /// medium. Unknown media are fine.
    pub fn remove_node_medium(&self, medium: &str) {
        let node = self
            .nodes
            .media
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(medium);
        let Some(node) = node else {
            return;
        };
        self.local.forget(medium);
        let still_used = self.nodes.media().values().any(|n| *n == node);
        if !still_used {
            let link = self
                .nodes
                .links
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&node);
            drop(link);
        }
    }

    /// A node's address, credential or TLS changed (see
    /// [`NodeEndpoint`]): connections from now on use them; a new address
    /// closes the open one.
    pub fn update_node(&self, endpoint: NodeEndpoint) -> Result<(), DataPlaneError> {
        let link = self
            .nodes
            .links()
            .get(&endpoint.node)
            .cloned()
            .ok_or_else(|| DataPlaneError::UnknownNode(endpoint.node.clone()))?;
        link.update(endpoint);
        Ok(())
    }

    /// The node holding `medium`, when it is a storage node's.
    pub fn node_of(&self, medium: &str) -> Option<String> {
        self.nodes.media().get(medium).cloned()
    }

    fn node_medium(&self, medium: &str) -> Option<NodeMedium> {
        let node = self.nodes.media().get(medium)?.clone();
        let link = Arc::clone(self.nodes.links().get(&node)?);
        Some(NodeMedium { node, link })
    }

    /// The connection of a node's medium, for a call on it.
    fn node_client(
        &self,
        at: &NodeMedium,
        medium: &str,
        op: &'static str,
    ) -> Result<Arc<SliceClient>, DataPlaneError> {
        at.link.client().map_err(|source| DataPlaneError::Node {
            medium: medium.to_string(),
            node: at.node.clone(),
            op,
            source,
        })
    }

    /// Runs a slice's management op on its node.
    fn on_node_slice<T>(
        &self,
        at: &NodeMedium,
        medium: &str,
        slice: &SliceKey,
        op: &'static str,
        run: impl FnOnce(&SliceClient, &svs_sliceproto::SliceName) -> io::Result<T>,
    ) -> Result<T, DataPlaneError> {
        let client = self.node_client(at, medium, op)?;
        run(&client, &slice_name(medium, slice)).map_err(|source| DataPlaneError::Io {
            medium: medium.to_string(),
            slice: label(slice),
            op,
            source,
        })
    }

    /// Runs a medium-wide op on its node.
    fn on_node<T>(
        &self,
        at: &NodeMedium,
        medium: &str,
        op: &'static str,
        run: impl FnOnce(&SliceClient) -> io::Result<T>,
    ) -> Result<T, DataPlaneError> {
        let client = self.node_client(at, medium, op)?;
        run(&client).map_err(|source| DataPlaneError::Node {
            medium: medium.to_string(),
            node: at.node.clone(),
            op,
            source,
        })
    }

    /// The slices on a node's medium (complete ones, or all).
    fn node_slices(
        &self,
        at: &NodeMedium,
        medium: &str,
    ) -> Result<Vec<StoredSlice>, DataPlaneError> {
        let stored = self.on_node(at, medium, "list slices", |c| c.stored_slices(medium))?;
        Ok(stored
            .into_iter()
            .map(|s| StoredSlice {
                key: SliceKey {
                    volume_id: s.volume,
                    copy: s.copy,
                    column: s.column,
                },
                partial: s.partial,
            })
            .collect())
    }

    /// A node's medium fails for anything but a missing slice (which is
    /// that copy lost alone), as a local medium does.
    fn record_node_failure(&self, medium: &str, key: &SliceKey, e: &io::Error) -> LossRecord {
        let medium_failed = e.raw_os_error() != Some(libc::ENOENT);
        self.local.record_failure(medium, key, medium_failed)
    }

    /// Opens slice `key` of a node's medium for `front`.
    fn open_remote(
        &self,
        at: &NodeMedium,
        medium: &str,
        key: &SliceKey,
        front: &Arc<Front>,
    ) -> RemoteSlice {
        RemoteSlice::new(
            Arc::clone(&at.link),
            slice_name(medium, key),
            Arc::clone(front),
        )
    }
}

impl DataPlane for ClusterMedia {
    fn add_node_medium(
        &self,
        medium: &str,
        endpoint: NodeEndpoint,
    ) -> Result<bool, DataPlaneError> {
        ClusterMedia::add_node_medium(self, medium, endpoint)
    }

    fn node_of(&self, medium: &str) -> Option<String> {
        ClusterMedia::node_of(self, medium)
    }

    fn serves_medium(&self, medium: &str) -> bool {
        self.node_of(medium).is_some() || self.local.serves_medium(medium)
    }

    /// Over the node's connection (the one its media's slices use).
    fn front_call(&self, node: &str, volume: &str, request: &[u8]) -> io::Result<Vec<u8>> {
        let link = self.nodes.links().get(node).cloned().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotConnected,
                format!("storage node '{node}' is not reached from here"),
            )
        })?;
        link.client()?.front_call(volume, request)
    }

    /// A node's medium: the node answers a listing of the medium.
    fn check_medium(&self, medium: &str) -> Result<(), DataPlaneError> {
        match self.node_medium(medium) {
            Some(at) => self.node_slices(&at, medium).map(drop),
            None => self.local.check_medium(medium),
        }
    }

    fn add_medium(&self, medium: &str, directory: &Path) -> Result<bool, DataPlaneError> {
        if let Some(node) = self.node_of(medium) {
            return Err(DataPlaneError::MediumOnNode {
                medium: medium.to_string(),
                node,
            });
        }
        self.local.add_medium(medium, directory)
    }

    fn forget_medium(&self, medium: &str) {
        if self.node_of(medium).is_some() {
            self.remove_node_medium(medium);
        } else {
            self.local.forget_medium(medium);
        }
    }

    /// A node's medium: every slice on it is deleted there, then it is
    /// forgotten (also when a deletion failed: that error is returned).
    fn remove_medium(&self, medium: &str) -> Result<(), DataPlaneError> {
        let Some(at) = self.node_medium(medium) else {
            return self.local.remove_medium(medium);
        };
        let cleaned = self.node_slices(&at, medium).and_then(|stored| {
            stored
                .iter()
                .try_for_each(|s| self.delete_slice(medium, &s.key))
        });
        self.remove_node_medium(medium);
        cleaned
    }

    fn create_slice(
        &self,
        medium: &str,
        slice: &SliceKey,
        size: u64,
    ) -> Result<(), DataPlaneError> {
        let Some(at) = self.node_medium(medium) else {
            return self.local.create_slice(medium, slice, size);
        };
        self.on_node_slice(&at, medium, slice, "create", |c, s| c.create_slice(s, size))?;
        self.local.forget_lost_copy(medium, slice);
        Ok(())
    }

    fn grow_slice(&self, medium: &str, slice: &SliceKey, size: u64) -> Result<(), DataPlaneError> {
        let Some(at) = self.node_medium(medium) else {
            return self.local.grow_slice(medium, slice, size);
        };
        self.on_node_slice(&at, medium, slice, "grow", |c, s| c.grow_slice(s, size))
    }

    fn delete_slice(&self, medium: &str, slice: &SliceKey) -> Result<(), DataPlaneError> {
        let Some(at) = self.node_medium(medium) else {
            return self.local.delete_slice(medium, slice);
        };
        self.local.forget_lost_copy(medium, slice);
        self.on_node_slice(&at, medium, slice, "delete", |c, s| c.delete_slice(s))
    }

    /// Between media of this host: [`LocalMedia::copy_slice`]. To or from
    /// a node's medium: see `copy::copy_with_node` (no snapshots, digest
    /// verified by reading the target back).
    fn copy_slice(
        &self,
        from_medium: &str,
        to_medium: &str,
        slice: &SliceKey,
        options: &CopyOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Digest, DataPlaneError> {
        if self.node_of(from_medium).is_none() && self.node_of(to_medium).is_none() {
            return self
                .local
                .copy_slice(from_medium, to_medium, slice, options, progress);
        }
        copy::copy_with_node(self, from_medium, to_medium, slice, options, progress)
    }

    /// A node's medium has no partial copies: a copy there is made under
    /// the slice's name and removed by the copy itself when it fails; one
    /// interrupted with a checkpoint is kept for its resume, and removed
    /// by the service's orphan reconciler once no job works on the volume
    /// and no placement names it.
    fn delete_partial_copy(&self, medium: &str, slice: &SliceKey) -> Result<(), DataPlaneError> {
        if self.node_of(medium).is_some() {
            return Ok(());
        }
        self.local.delete_partial_copy(medium, slice)
    }

    fn stored_slices(&self, medium: &str) -> Result<Vec<StoredSlice>, DataPlaneError> {
        match self.node_medium(medium) {
            Some(at) => self.node_slices(&at, medium),
            None => self.local.stored_slices(medium),
        }
    }

    /// A node's medium: the node counts them (its `Size`, then one
    /// `DataBytes` over the whole slice), so no byte travels.
    fn slice_data_bytes(&self, medium: &str, slice: &SliceKey) -> Result<u64, DataPlaneError> {
        let Some(at) = self.node_medium(medium) else {
            return self.local.slice_data_bytes(medium, slice);
        };
        self.on_node_slice(&at, medium, slice, "measure", |c, s| {
            let size = c.size(s)?;
            c.data_bytes(s, 0, size)
        })
    }

    fn open_volume(&self, layout: &VolumeLayout) -> Result<Arc<dyn VolumeIo>, DataPlaneError> {
        Ok(Arc::new(LocalVolumeIo::open(self, layout)?))
    }

    /// A node's medium: the node's own count of each snapshot's bytes (a
    /// request per slice on it).
    fn medium_snapshot_usage(
        &self,
        medium: &str,
    ) -> Result<BTreeMap<(String, u64), u64>, DataPlaneError> {
        let Some(at) = self.node_medium(medium) else {
            return self.local.medium_snapshot_usage(medium);
        };
        let mut usage = BTreeMap::new();
        for stored in self.node_slices(&at, medium)? {
            if stored.partial {
                continue;
            }
            let key = stored.key;
            let snapshots =
                self.on_node_slice(&at, medium, &key, "snapshots", |c, s| c.snapshots(s))?;
            for snapshot in snapshots {
                *usage
                    .entry((key.volume_id.clone(), snapshot.id))
                    .or_default() += snapshot.used_bytes;
            }
        }
        Ok(usage)
    }

    /// A node's medium: the data bytes of each slice on it plus its
    /// snapshots' bytes, as the node counts them (requests per slice).
    fn medium_written_bytes(&self, medium: &str) -> Result<u64, DataPlaneError> {
        let Some(at) = self.node_medium(medium) else {
            return self.local.medium_written_bytes(medium);
        };
        let mut total = 0u64;
        for stored in self.node_slices(&at, medium)? {
            let key = stored.key;
            total += self.on_node_slice(&at, medium, &key, "measure", |c, s| {
                let size = c.size(s)?;
                let data = c.data_bytes(s, 0, size)?;
                let snapshots: u64 = c.snapshots(s)?.iter().map(|x| x.used_bytes).sum();
                Ok(data + snapshots)
            })?;
        }
        Ok(total)
    }

    /// Media of this host only: a node keeps its own account (not set
    /// over the protocol yet).
    fn set_snapshot_budget(&self, medium: &str, bytes: Option<u64>) {
        self.local.set_snapshot_budget(medium, bytes);
    }

    fn set_medium_failed(&self, medium: &str, failed: bool) {
        self.local.set_medium_failed(medium, failed);
    }

    fn failed_media(&self) -> Vec<String> {
        self.local.failed_media()
    }

    fn failed_copies(&self) -> Vec<(String, SliceKey)> {
        self.local.failed_copies()
    }

    fn on_copy_failure(&self, listener: CopyFailureListener) {
        self.local.on_copy_failure(listener);
    }

    /// A node's medium: the node says the slice and each of `snapshots` is
    /// there.
    fn probe_slice(
        &self,
        medium: &str,
        slice: &SliceKey,
        snapshots: &[u64],
    ) -> Result<(), DataPlaneError> {
        let Some(at) = self.node_medium(medium) else {
            return self.local.probe_slice(medium, slice, snapshots);
        };
        let front = Arc::new(Front::new(&slice.volume_id, 0));
        let remote = self.open_remote(&at, medium, slice, &front);
        let probed = remote.check_present().and_then(|()| {
            if snapshots.is_empty() {
                return Ok(());
            }
            let ids = remote.snapshot_ids()?;
            match snapshots.iter().find(|id| !ids.contains(id)) {
                Some(_) => Err(io::Error::from_raw_os_error(libc::ENOENT)),
                None => Ok(()),
            }
        });
        probed.map_err(|source| {
            if source.kind() != io::ErrorKind::Interrupted {
                self.record_node_failure(medium, slice, &source);
            }
            DataPlaneError::Io {
                medium: medium.to_string(),
                slice: label(slice),
                op: "probe",
                source,
            }
        })
    }
}

impl SliceMedia for ClusterMedia {
    /// A node's slice: opened when the node says it is there; else it is
    /// lost (and reported) as a local slice that cannot be opened.
    fn open_slice(
        &self,
        medium: &str,
        key: &SliceKey,
        front: &Arc<Front>,
    ) -> Option<Arc<dyn SliceDevice>> {
        let Some(at) = self.node_medium(medium) else {
            return SliceMedia::open_slice(&self.local, medium, key, front);
        };
        if self.local.is_marked_failed(medium) {
            return None;
        }
        let remote = self.open_remote(&at, medium, key, front);
        match remote.check_present() {
            Ok(()) => Some(Arc::new(remote)),
            Err(e) => {
                if is_media_failure(&e) {
                    self.record_node_failure(medium, key, &e);
                }
                tracing::warn!(medium, node = %at.node, error = %e,
                    "slice on a storage node cannot be opened; it is lost");
                None
            }
        }
    }

    fn saw_io_error(&self, medium: &str, key: &SliceKey, e: &io::Error) -> LossRecord {
        if self.node_of(medium).is_some() {
            self.record_node_failure(medium, key, e)
        } else {
            self.local.saw_io_error(medium, key, e)
        }
    }

    fn pending_record(&self, medium: &str, key: &SliceKey) -> Option<LossRecord> {
        self.local.pending_record(medium, key)
    }

    fn serves(&self, medium: &str) -> bool {
        self.node_of(medium).is_some() || SliceMedia::serves(&self.local, medium)
    }

    fn slice_path(&self, medium: &str, key: &SliceKey) -> Result<PathBuf, DataPlaneError> {
        if self.node_of(medium).is_some() {
            return Err(not_here(medium, key));
        }
        self.local.slice_path(medium, key)
    }

    fn space_account(&self, medium: &str) -> Result<SpaceAccount, DataPlaneError> {
        self.local.space_account(medium)
    }

    fn snapshot_files_changed(&self, medium: &str) {
        if self.node_of(medium).is_none() {
            self.local.snapshot_files_changed(medium);
        }
    }

    fn is_node_medium(&self, medium: &str) -> bool {
        self.node_of(medium).is_some()
    }

    fn open_node_target(
        &self,
        medium: &str,
        key: &SliceKey,
        front: &Arc<Front>,
    ) -> Result<Option<OpenedNodeTarget>, DataPlaneError> {
        let at = self
            .node_medium(medium)
            .ok_or_else(|| DataPlaneError::UnknownMedium(medium.to_string()))?;
        let size = self.on_node_slice(&at, medium, key, "open", |c, s| match c.size(s) {
            Ok(size) => Ok(Some(size)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) || is_missing(&e) => Ok(None),
            Err(e) => Err(e),
        })?;
        Ok(size.map(|size| {
            let target: Arc<dyn NodeTarget> = Arc::new(self.open_remote(&at, medium, key, front));
            (target, size)
        }))
    }

    fn create_node_target(
        &self,
        medium: &str,
        key: &SliceKey,
        len: u64,
        front: &Arc<Front>,
    ) -> Result<Arc<dyn NodeTarget>, DataPlaneError> {
        let at = self
            .node_medium(medium)
            .ok_or_else(|| DataPlaneError::UnknownMedium(medium.to_string()))?;
        // A fresh slice: one left by an interrupted copy may hold bytes
        // where the source has holes (never written by the copy).
        self.on_node_slice(&at, medium, key, "create", |c, s| {
            c.delete_slice(s)?;
            c.create_slice(s, len)
        })?;
        Ok(Arc::new(self.open_remote(&at, medium, key, front)))
    }
}

/// The node answered that the slice is not there (ENOENT).
fn is_missing(e: &io::Error) -> bool {
    svs_sliceproto::remote_error(e)
        .and_then(|r| r.errno())
        .is_some_and(|errno| errno == libc::ENOENT)
}

/// A slice of a node's medium has no path on this host.
fn not_here(medium: &str, key: &SliceKey) -> DataPlaneError {
    DataPlaneError::Io {
        medium: medium.to_string(),
        slice: label(key),
        op: "open",
        source: io::Error::new(
            io::ErrorKind::Unsupported,
            "the slice is on a storage node, not on this host",
        ),
    }
}

#[cfg(test)]
mod pipelined_tests;
#[cfg(test)]
mod tests;
