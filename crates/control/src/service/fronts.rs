//! Fronts on storage nodes (setting `fronts = "nodes"`), the control
//! plane's side: a node's long poll (`POST /nodes/{node}/storage/fronts`)
//! records what it has open (attach jobs wait on it) and answers the
//! fronts wanted of it; its fronts' copy failures
//! (`POST /nodes/{node}/storage/failures`) are recorded as those of svs
//! serve's own data plane are.

use super::attachments::TOP;
use super::storage_nodes::StorageNode;
use super::{ServiceResult, Services};
use crate::front_layout::volume_layout;
use crate::media_health::record_failure;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use svs_dataplane::{CopyFailure, SliceKey};
use svs_domain::GIB;
use svs_front::wire::{
    FailuresBody, FailuresRecorded, FrontExport, FrontNode, FrontSnapshot, FrontSpec, FrontsAnswer,
    FrontsPoll,
};
use svs_store::{NodeFront, StorageNodeRecord};

/// How long a fronts poll waits for a change before answering the same.
pub const FRONTS_WAIT: Duration = Duration::from_secs(20);
/// A waiting poll reads the store at least this often: a copy lost or a
/// node's address changed raise no change signal.
const FRONTS_RECHECK: Duration = Duration::from_secs(2);

/// The version of an answer: a digest of its fronts.
fn version(fronts: &[FrontSpec]) -> String {
    // Serialising plain structs of strings and numbers cannot fail; an
    // empty digest would only make the node ask again.
    let bytes = serde_json::to_vec(fronts).unwrap_or_default();
    hex::encode(&Sha256::digest(&bytes)[..16])
}

impl Services {
    /// `POST /nodes/{node}/storage/fronts`: records what the node has open,
    /// then answers the fronts wanted of it once they differ from the
    /// version it holds, or after [`FRONTS_WAIT`] with the same.
    pub async fn poll_fronts(
        &self,
        caller: &StorageNode,
        node: &str,
        poll: FrontsPoll,
    ) -> ServiceResult<FrontsAnswer> {
        caller.require_node(node)?;
        for o in &poll.open {
            if !o.error.is_empty() {
                tracing::warn!(
                    node,
                    volume = o.volume,
                    epoch = o.epoch,
                    error = o.error,
                    "a storage node could not open a volume's front"
                );
            }
        }
        self.jobs.fronts().report(node, poll.open).await;
        self.long_poll(
            FRONTS_WAIT,
            FRONTS_RECHECK,
            || self.fronts_of(node),
            |answer| answer.version != poll.version,
        )
        .await
    }

    /// The fronts wanted of a node now, with their version.
    pub async fn fronts_of(&self, node: &str) -> ServiceResult<FrontsAnswer> {
        let wanted = self.store.node_fronts(node).await?;
        let mut fronts = Vec::with_capacity(wanted.len());
        if !wanted.is_empty() {
            let storage = self.store.storage_nodes().await?;
            let hosts: BTreeMap<String, String> = self
                .store
                .list_nodes()
                .await?
                .into_iter()
                .filter_map(|n| n.address.map(|a| (n.name, a)))
                .collect();
            for front in &wanted {
                if let Some(spec) = self.front_spec(front, &storage, &hosts).await? {
                    fronts.push(spec);
                }
            }
        }
        Ok(FrontsAnswer {
            version: version(&fronts),
            fronts,
        })
    }

    /// One volume's front as its node runs it; None for a volume deleted
    /// meanwhile.
    async fn front_spec(
        &self,
        front: &NodeFront,
        storage: &[StorageNodeRecord],
        hosts: &BTreeMap<String, String>,
    ) -> ServiceResult<Option<FrontSpec>> {
        let Some(volume) = self.store.volume_by_id(&front.volume_id).await? else {
            return Ok(None);
        };
        let slices = self.store.volume_slices(&volume.id).await?;
        let layout = volume_layout(&volume, &slices);
        let lostmedia: Vec<String> = slices
            .iter()
            .filter(|r| r.lost)
            .map(|r| r.slice.medium.clone())
            .collect();
        let mut by_node: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for r in &slices {
            by_node
                .entry(r.node.as_str())
                .or_default()
                .insert(r.slice.medium.as_str());
        }
        let mut nodes = Vec::with_capacity(by_node.len());
        for (name, media) in by_node {
            let Some(n) = storage.iter().find(|n| n.name == name) else {
                tracing::warn!(node = name, volume = %volume.id,
                    "a medium of a volume fronted on a storage node is not a storage node's");
                continue;
            };
            nodes.push(FrontNode {
                node: name.to_string(),
                sliceaddress: n.slice_address.clone(),
                // None until the node registers again after its credential
                // changed: its slice server refuses every front meanwhile.
                slicecredential: n.slice_credential.clone().unwrap_or_default(),
                media: media.into_iter().map(str::to_string).collect(),
            });
        }
        let mut exports = Vec::with_capacity(front.attachments.len());
        for a in &front.attachments {
            let snapshot = if a.snapshot == TOP {
                None
            } else {
                match self.store.snapshot_by_id(&a.snapshot).await? {
                    Some(s) => Some(FrontSnapshot {
                        seq: s.seq,
                        size: s.volume_size * GIB,
                    }),
                    // Its deletion removes the attachment too.
                    None => continue,
                }
            };
            exports.push(FrontExport {
                name: a.export_name.clone(),
                host: a.node.clone(),
                hostaddress: hosts.get(&a.node).cloned().unwrap_or_default(),
                readonly: a.readonly,
                snapshot,
            });
        }
        Ok(Some(FrontSpec {
            volume: volume.id.clone(),
            epoch: front.epoch,
            size: layout.size,
            media: layout.media,
            lostmedia,
            nodes,
            slicetlsroots: self.slice_tls.roots_pem().to_vec(),
            exports,
        }))
    }

    /// `POST /nodes/{node}/storage/failures`: records each failure a
    /// node's front met, as one met by svs serve's own data plane. Only
    /// those of volumes whose front the node runs, on media of the volume,
    /// count: a node cannot fail what it does not write to. How many
    /// changed the store (the others were known already, or not the
    /// node's to report), and those refused: of a volume gone or whose
    /// front is not the node's (the node fails the writes waiting for
    /// them). A failure of a medium the volume has no copy on any more is
    /// taken without a change: no opening reads that copy.
    pub async fn record_front_failures(
        &self,
        caller: &StorageNode,
        node: &str,
        body: FailuresBody,
    ) -> ServiceResult<FailuresRecorded> {
        caller.require_node(node)?;
        let mut recorded = 0u64;
        let mut refused = Vec::new();
        for f in body.failures {
            let front = match self.store.volume_front(&f.volume).await {
                Ok(front) => front,
                Err(svs_store::StoreError::NotFound) => {
                    refused.push(f);
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let on_volume = self
                .store
                .volume_slices(&f.volume)
                .await?
                .iter()
                .any(|r| r.slice.medium == f.medium);
            if front.node.as_deref() != Some(node) || !on_volume {
                tracing::warn!(
                    node,
                    volume = f.volume,
                    medium = f.medium,
                    "a storage node reported a failure of a volume whose front it does not run, \
                     or of a medium the volume has no copy on: ignored"
                );
                if front.node.as_deref() != Some(node) {
                    refused.push(f);
                }
                continue;
            }
            tracing::warn!(
                node,
                volume = f.volume,
                medium = f.medium,
                copy = f.copy,
                column = f.column,
                medium_failed = f.mediumfailed,
                "a front on a storage node met a copy failure"
            );
            let failure = CopyFailure {
                medium: f.medium,
                slice: SliceKey {
                    volume_id: f.volume,
                    copy: f.copy,
                    column: f.column,
                },
                medium_failed: f.mediumfailed,
            };
            let changed = record_failure(self.store.as_ref(), &self.exports, failure).await?;
            recorded += changed as u64;
        }
        if recorded > 0 {
            // The fronts' specs list the lost media now.
            self.jobs.changes().notify();
        }
        Ok(FailuresRecorded { recorded, refused })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_changes_with_the_fronts_and_only_with_them() {
        let spec = FrontSpec {
            volume: "v1".into(),
            epoch: 1,
            size: GIB,
            media: vec![vec!["d1".into()]],
            lostmedia: Vec::new(),
            nodes: Vec::new(),
            slicetlsroots: Vec::new(),
            exports: Vec::new(),
        };
        let empty = version(&[]);
        assert_eq!(empty.len(), 32);
        let one = std::slice::from_ref(&spec);
        assert_eq!(version(one), version(one));
        assert_ne!(version(one), empty);
        let mut later = spec.clone();
        later.epoch = 2;
        assert_ne!(version(&[spec]), version(&[later]));
    }
}
