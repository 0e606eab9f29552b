//! Jobs: what the caller's tenant started, read back.

use super::commands::ListJobs;
use super::{Caller, ServiceError, ServiceResult, Services};
use svs_store::{Job, JobFilter};

impl Services {
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
