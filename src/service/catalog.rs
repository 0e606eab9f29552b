//! Read-only queries: media, nodes, jobs.

use super::attachments::node_not_found;
use super::commands::ListJobs;
use super::{Caller, ServiceError, ServiceResult, Services};
use svs_domain::Gib;
use svs_store::{Job, JobFilter, MediumUsage, NodeRecord};

/// A node (media node or configured client host) with the capacity of its
/// media and the distinct volumes that have a slice there.
#[derive(Debug, Clone)]
pub struct NodeSummary {
    pub record: NodeRecord,
    pub media_count: usize,
    pub size: Gib,
    pub free: Gib,
    pub volumes_count: u64,
    /// Its host agent has a live credential.
    pub agent_credential: bool,
    /// When its agent last made an authenticated request.
    pub agent_seen_ms: Option<i64>,
}

impl Services {
    pub async fn list_media(&self) -> ServiceResult<Vec<MediumUsage>> {
        Ok(self.store.media_usage().await?)
    }

    pub async fn get_medium(&self, id: &str) -> ServiceResult<MediumUsage> {
        self.list_media()
            .await?
            .into_iter()
            .find(|m| m.record.medium.id == id)
            .ok_or_else(|| ServiceError::NotFound(format!("media '{id}' not found")))
    }

    pub async fn list_nodes(&self) -> ServiceResult<Vec<NodeSummary>> {
        let nodes = self.store.list_nodes().await?;
        let media = self.list_media().await?;
        let volumes = self.store.node_volume_counts().await?;
        let agents = self.store.node_agents().await?;
        Ok(nodes
            .into_iter()
            .map(|record| {
                let agent = agents.iter().find(|a| a.node == record.name);
                let on_node: Vec<&MediumUsage> = media
                    .iter()
                    .filter(|m| m.record.medium.node == record.name)
                    .collect();
                NodeSummary {
                    media_count: on_node.len(),
                    size: on_node.iter().map(|m| m.record.medium.size).sum(),
                    free: on_node.iter().map(|m| m.free()).sum(),
                    volumes_count: volumes.get(&record.name).copied().unwrap_or(0),
                    agent_credential: agent.is_some_and(|a| a.has_credential),
                    agent_seen_ms: agent.and_then(|a| a.last_seen_ms),
                    record,
                }
            })
            .collect())
    }

    pub async fn get_node(&self, name: &str) -> ServiceResult<NodeSummary> {
        self.list_nodes()
            .await?
            .into_iter()
            .find(|n| n.record.name == name)
            .ok_or_else(|| node_not_found(name))
    }

    pub async fn list_jobs(&self, caller: &Caller, request: &ListJobs) -> ServiceResult<Vec<Job>> {
        let filter = JobFilter {
            kind: request.kind.clone(),
            object: request.object.clone(),
            state: request.state,
            page: request.page,
            count: request.count,
        };
        Ok(self.store.list_jobs(caller.tenant_id, &filter).await?)
    }

    pub async fn get_job(&self, caller: &Caller, id: &str) -> ServiceResult<Job> {
        let not_found = || ServiceError::NotFound(format!("job '{id}' not found"));
        let id: i64 = id.parse().map_err(|_| not_found())?;
        self.store
            .get_job(caller.tenant_id, id)
            .await?
            .ok_or_else(not_found)
    }
}
