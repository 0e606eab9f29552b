//! Draining a medium and rebalancing media (administrators only). Each is
//! one job that moves slices of many volumes with the mover a resize uses
//! (`jobs::relocate`); pause, rate, window and cancel apply to it as to any
//! data movement.

use super::media::medium_error;
use super::volumes::Started;
use super::{Administrator, ServiceError, ServiceResult, Services};
use crate::jobs::{PlannedRelocation, RelocationScope};
use svs_domain::{DrainArgs, JobSpec, RebalanceArgs};
use svs_store::MediumUsage;

/// A drain or a rebalance planned without being started (a dry run).
#[derive(Debug, Clone)]
pub struct RelocationPreview {
    pub scope: RelocationScope,
    pub planned: PlannedRelocation,
    /// `movement_rate` in bytes per second (None: unthrottled).
    pub rate: Option<u64>,
}

/// A drain asked for: its job, and whether this request started it (false:
/// the medium was already draining under it).
#[derive(Debug, Clone)]
pub struct DrainStarted {
    pub job_id: i64,
    pub started: bool,
}

impl Services {
    /// The medium, or 404; a failed one cannot be drained (409).
    async fn drainable(&self, id: &str) -> ServiceResult<MediumUsage> {
        let medium = self.get_medium(id).await?;
        if medium.failed {
            return Err(ServiceError::Conflict(format!(
                "medium '{id}' has failed; it holds nothing to drain"
            )));
        }
        Ok(medium)
    }

    /// `PATCH /media/{m}` `{"state": "Draining"}`: from now on nothing new
    /// is placed on the medium, and one `media_drain` job moves every slice
    /// off it. Asked again while that job is unfinished: that job.
    pub async fn drain_medium(
        &self,
        admin: &Administrator,
        id: &str,
    ) -> ServiceResult<DrainStarted> {
        // The store checks the medium (unknown, failed) in the drain's
        // transaction.
        let spec = JobSpec::MediaDrain(DrainArgs {
            medium: id.to_string(),
        });
        let job = self.new_job(admin.caller(), spec, id);
        let (job_id, started) = self
            .store
            .drain_medium(id, &job)
            .await
            .map_err(|e| medium_error(e, id))?;
        if started {
            self.jobs.submit(job_id);
            tracing::info!(
                medium = id,
                job = job_id,
                by = admin.caller().user_id,
                "medium draining"
            );
        }
        Ok(DrainStarted { job_id, started })
    }

    /// `PATCH /media/{m}` `{"state": "Ready"}`: a drained (or draining,
    /// once its job ended) medium takes slices again.
    pub async fn undrain_medium(
        &self,
        admin: &Administrator,
        id: &str,
    ) -> ServiceResult<MediumUsage> {
        self.store
            .undrain_medium(id)
            .await
            .map_err(|e| medium_error(e, id))?;
        tracing::info!(medium = id, by = admin.caller().user_id, "medium ready");
        self.get_medium(id).await
    }

    /// `PATCH /media/{m}?dryrun=true` `{"state": "Draining"}`: what the
    /// drain would move now, changing nothing.
    pub async fn preview_drain(
        &self,
        _admin: &Administrator,
        id: &str,
    ) -> ServiceResult<RelocationPreview> {
        self.drainable(id).await?;
        self.preview_relocation(RelocationScope::Drain(id.to_string()))
            .await
    }

    /// `POST /media/rebalance`: one `media_rebalance` job evening the
    /// usage of the media of a node, of a zone, or of every medium.
    pub async fn rebalance_media(
        &self,
        admin: &Administrator,
        args: &RebalanceArgs,
    ) -> ServiceResult<Started> {
        self.check_rebalance(args).await?;
        let scope = args.scope();
        let job = self.new_job(
            admin.caller(),
            JobSpec::MediaRebalance(args.clone()),
            &scope,
        );
        let job_id = self.store.create_job(&job).await?;
        self.jobs.submit(job_id);
        tracing::info!(scope = %scope, job = job_id, by = admin.caller().user_id, "rebalance started");
        Ok(Started {
            job_id,
            object_id: scope,
        })
    }

    /// `POST /media/rebalance?dryrun=true`.
    pub async fn preview_rebalance(
        &self,
        _admin: &Administrator,
        args: &RebalanceArgs,
    ) -> ServiceResult<RelocationPreview> {
        self.check_rebalance(args).await?;
        self.preview_relocation(RelocationScope::Rebalance(args.clone()))
            .await
    }

    /// A node or a zone with media (404 otherwise: nothing of that name to
    /// rebalance).
    async fn check_rebalance(&self, args: &RebalanceArgs) -> ServiceResult<()> {
        let media = self.store.media_usage().await?;
        let has = |f: &dyn Fn(&MediumUsage) -> bool| media.iter().any(f);
        if let Some(node) = &args.node {
            if !has(&|m| &m.record.medium.node == node) {
                return Err(ServiceError::NotFound(format!(
                    "node '{node}' has no media"
                )));
            }
        }
        if let Some(zone) = &args.zone {
            if !has(&|m| &m.record.medium.zone == zone) {
                return Err(ServiceError::NotFound(format!(
                    "zone '{zone}' has no media"
                )));
            }
        }
        Ok(())
    }

    async fn preview_relocation(&self, scope: RelocationScope) -> ServiceResult<RelocationPreview> {
        let planned = crate::planning::plan_relocation(self.store.as_ref(), &scope).await?;
        Ok(RelocationPreview {
            scope,
            planned,
            rate: self.jobs.movement_rate(),
        })
    }
}
