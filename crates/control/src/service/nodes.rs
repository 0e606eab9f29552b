//! Nodes: the hosts that hold media or attach volumes. Listed with their
//! media's capacity; created, addressed and removed by administrators.
//! Their agents' credentials and desired state are in `agents`.

use super::commands::{CreateNode, SetNodeAddress};
use super::media::config_managed;
use super::{Administrator, ServiceError, ServiceResult, Services};
use svs_domain::{Gib, ManagedBy};
use svs_store::{CredentialRole, MediumUsage, NodeRecord, StorageNodeRecord, StoreError};

/// A node (media node or configured client host) with the capacity of its
/// media and the distinct volumes that have a slice there.
#[derive(Debug, Clone)]
pub struct NodeSummary {
    pub record: NodeRecord,
    pub media_count: usize,
    pub size: Gib,
    pub free: Gib,
    /// The parts of `size - free` on its media: slices placed, booked by
    /// running jobs, held by snapshots.
    pub allocated: Gib,
    pub booked: Gib,
    pub snapshots: Gib,
    /// Bytes its media's snapshots hold (`snapshots` is their GiB, each
    /// medium's rounded up, as its free space counts them).
    pub snapshot_bytes: u64,
    pub volumes_count: u64,
    /// The role of its live node credential (none: never issued, or revoked).
    pub credential_role: Option<CredentialRole>,
    /// When its agent last made an authenticated request.
    pub agent_seen_ms: Option<i64>,
    /// Set when it registered as a storage node.
    pub storage: Option<StorageNodeRecord>,
    /// Copies of slices on its media.
    pub copies: u64,
}

impl Services {
    pub async fn list_nodes(&self) -> ServiceResult<Vec<NodeSummary>> {
        let nodes = self.store.list_nodes().await?;
        let media = self.list_media().await?;
        let volumes = self.store.node_volume_counts().await?;
        let agents = self.store.node_agents().await?;
        let storage = self.store.storage_nodes().await?;
        let mut summaries = Vec::with_capacity(nodes.len());
        for record in nodes {
            let agent = agents.iter().find(|a| a.node == record.name);
            let on_node: Vec<&MediumUsage> = media
                .iter()
                .filter(|m| m.record.medium.node == record.name)
                .collect();
            let volumes_count = volumes.get(&record.name).copied().unwrap_or(0);
            let copies = if volumes_count == 0 {
                0
            } else {
                self.store.node_copies(&record.name).await?.len() as u64
            };
            summaries.push(NodeSummary {
                media_count: on_node.len(),
                size: on_node.iter().map(|m| m.record.medium.size).sum(),
                free: on_node.iter().map(|m| m.free()).sum(),
                allocated: on_node.iter().map(|m| m.allocated).sum(),
                booked: on_node.iter().map(|m| m.reserved).sum(),
                snapshots: on_node.iter().map(|m| m.snapshot_gib()).sum(),
                snapshot_bytes: on_node.iter().map(|m| m.snapshot_bytes).sum(),
                volumes_count,
                credential_role: agent.and_then(|a| a.credential_role),
                agent_seen_ms: agent.and_then(|a| a.last_seen_ms),
                storage: storage.iter().find(|s| s.name == record.name).cloned(),
                copies,
                record,
            });
        }
        Ok(summaries)
    }

    pub async fn get_node(&self, name: &str) -> ServiceResult<NodeSummary> {
        self.list_nodes()
            .await?
            .into_iter()
            .find(|n| n.record.name == name)
            .ok_or_else(|| node_not_found(name))
    }

    /// Adds a node that may attach volumes (and run an agent).
    pub async fn create_node(
        &self,
        admin: &Administrator,
        request: &CreateNode,
    ) -> ServiceResult<NodeSummary> {
        let name = request.name.as_str();
        self.store
            .create_node(&NodeRecord {
                name: name.to_string(),
                zone: request.zone.clone(),
                address: Some(request.address.to_string()),
                managed_by: svs_store::ManagedBy::Api,
            })
            .await?;
        self.exports.set_node_address(name, Some(request.address));
        tracing::info!(node = name, by = admin.caller().user_id, "node created");
        self.get_node(name).await
    }

    /// Sets the address a node attaches from: it decides who may open the
    /// node's NBD exports, so only an administrator may change it.
    pub async fn set_node_address(
        &self,
        admin: &Administrator,
        node: &str,
        request: &SetNodeAddress,
    ) -> ServiceResult<NodeRecord> {
        let address = request.address;
        let text = address.map(|a| a.to_string());
        self.store
            .set_node_address(node, text.as_deref())
            .await
            .map_err(|e| match e {
                svs_store::StoreError::NotFound => node_not_found(node),
                other => other.into(),
            })?;
        self.exports.set_node_address(node, address);
        tracing::info!(node, address = ?address, by = admin.caller().user_id, "node address set");
        self.store
            .list_nodes()
            .await?
            .into_iter()
            .find(|n| n.name == node)
            .ok_or_else(|| node_not_found(node))
    }

    /// `DELETE /nodes/{node}`: refused while the node has media (naming the
    /// volumes with slices on them) or attachments; its agent credential
    /// is revoked with it.
    pub async fn delete_node(&self, admin: &Administrator, name: &str) -> ServiceResult<()> {
        let node = self.get_node(name).await?;
        if node.record.managed_by == ManagedBy::Config {
            return Err(config_managed("node", name));
        }
        self.store.delete_node(name).await.map_err(|e| match e {
            StoreError::NotFound => node_not_found(name),
            other => other.into(),
        })?;
        self.exports.set_node_address(name, None);
        tracing::info!(node = name, by = admin.caller().user_id, "node removed");
        Ok(())
    }
}

pub fn node_not_found(node: &str) -> ServiceError {
    ServiceError::NotFound(format!("node '{node}' not found"))
}
