//! Read-only views: media, nodes, jobs.

use super::{format_ms, Caller, ServiceError, ServiceResult, Services};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use svs_domain::JobState;
use svs_store::{Job, JobFilter, MediumUsage};

pub fn medium_json(m: &MediumUsage) -> Value {
    json!({
        "mediaid": m.record.medium.id,
        "media": m.record.directory,
        "model": "svs sparse-file medium",
        "bus": "file",
        "location": m.record.directory,
        "node": m.record.medium.node,
        "zone": m.record.medium.zone,
        "size": m.record.medium.size,
        "freesize": m.free(),
        "volumescount": m.volumes_count,
        "sectorsize": 4096,
        "sed": false,
        "assignment": "svs",
        "state": "Online",
        "status": "Ready",
        "progress": 100,
        "capacitygroup": "",
    })
}

pub fn job_json(j: &Job) -> Value {
    json!({
        "id": j.id,
        "type": j.kind,
        "object": j.object,
        "args": j.args,
        "state": j.state.as_str(),
        "status": j.status,
        "progress": j.progress,
        "starttime": j.starttime_ms.map(format_ms).unwrap_or_default(),
        "endtime": j.endtime_ms.map(format_ms).unwrap_or_default(),
        "username": j.username,
        "useremail": j.useremail,
        "details": j.details,
    })
}

/// Nodes (media nodes and configured client hosts) with their address, the
/// capacity of their media and the distinct volumes that have a slice there.
pub fn nodes_json(
    nodes: &[svs_store::NodeRecord],
    media: &[MediumUsage],
    volumes: &HashMap<String, u64>,
) -> Vec<Value> {
    nodes
        .iter()
        .map(|n| {
            let on_node = media.iter().filter(|m| m.record.medium.node == n.name);
            let (mut size, mut free, mut count) = (0u64, 0u64, 0usize);
            for m in on_node {
                size += m.record.medium.size;
                free += m.free();
                count += 1;
            }
            json!({
                "name": n.name,
                "zone": n.zone,
                "address": n.address.clone().unwrap_or_default(),
                "os": std::env::consts::OS,
                "state": "Online",
                "status": "Ready",
                "progress": 100,
                "mediacount": count,
                "size": size,
                "freesize": free,
                "volumescount": volumes.get(&n.name).copied().unwrap_or(0),
            })
        })
        .collect()
}

/// Page size of `GET /jobs` when `count` is not given, and its maximum.
pub const DEFAULT_JOB_PAGE: u32 = 100;
pub const MAX_JOB_PAGE: u32 = 1000;

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

    pub async fn list_nodes(&self) -> ServiceResult<Vec<Value>> {
        let nodes = self.store.list_nodes().await?;
        let media = self.list_media().await?;
        let volumes = self.store.node_volume_counts().await?;
        Ok(nodes_json(&nodes, &media, &volumes))
    }

    pub async fn get_node(&self, name: &str) -> ServiceResult<Value> {
        self.list_nodes()
            .await?
            .into_iter()
            .find(|n| n["name"] == name)
            .ok_or_else(|| ServiceError::NotFound(format!("node '{name}' not found")))
    }

    pub async fn list_jobs(
        &self,
        caller: &Caller,
        query: &BTreeMap<String, String>,
    ) -> ServiceResult<Vec<Job>> {
        let number = |key: &str, default: u32, max: u32| -> ServiceResult<u32> {
            match query.get(key) {
                None => Ok(default),
                Some(v) => v
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=max).contains(n))
                    .ok_or_else(|| {
                        ServiceError::BadRequest(format!(
                            "{key} must be a whole number from 1 to {max}"
                        ))
                    }),
            }
        };
        // An empty filter (`?type=`) filters nothing.
        let non_empty = |key: &str| query.get(key).filter(|v| !v.is_empty()).cloned();
        let state = match non_empty("state") {
            None => None,
            Some(s) => Some(JobState::parse(&s).ok_or_else(|| {
                ServiceError::BadRequest(
                    "state must be one of Pending, Running, Done, Error".into(),
                )
            })?),
        };
        let filter = JobFilter {
            kind: non_empty("type"),
            object: non_empty("object"),
            state,
            page: number("page", 1, u32::MAX / MAX_JOB_PAGE)?,
            count: number("count", DEFAULT_JOB_PAGE, MAX_JOB_PAGE)?,
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
