//! Jobs, and the steps shared by every write that starts or ends one.

use super::db::{query, scalar, Tx};
use super::{job_row, SqlStore};
use crate::records::{
    Job, JobControl, JobEnd, JobFilter, JobLease, JobSteering, LeaseTerms, NewJob, Page, StepSlice,
};
use crate::rows::JOB_COLUMNS;
use crate::rows::{job_control_row, step_slice_row};
use crate::{JobStore, StoreError, StoreResult};
use async_trait::async_trait;
use svs_domain::{volume_state_after_job, JobState, VolumeState};

/// Records `job` Pending. A job keeps its volume's name, so that it is
/// still shown and found by name after the volume is gone; a job whose
/// object is no volume (a drain's medium, a rebalance's scope) is named
/// by the object itself.
pub(super) async fn insert_job(conn: &mut Tx, job: &NewJob) -> StoreResult<i64> {
    let id: i64 = scalar(
        "INSERT INTO jobs (tenant_id, type, object, object_name, args, state, status, progress, \
         user_id, username, useremail, details, data_movement, created_ms) \
         VALUES ($1, $2, $3, COALESCE((SELECT name FROM volumes WHERE id = $4), $4), $5, \
         'Pending', 'Pending', 0, $6, $7, $8, '[]', $9, $10) RETURNING id",
    )
    .bind(job.tenant_id)
    .bind(job.spec.kind().as_str())
    .bind(&job.object)
    .bind(&job.object)
    .bind(job.spec.args_json().to_string())
    .bind(job.user_id)
    .bind(&job.username)
    .bind(&job.useremail)
    .bind(i64::from(job.spec.is_data_movement()))
    .bind(job.now_ms)
    .fetch_one(&mut *conn)
    .await?;
    Ok(id)
}

/// Records `job` and makes it the volume's current job (setting the volume's
/// state when given), unless another job holds the volume: then Conflict and,
/// the transaction being dropped, nothing is recorded.
pub(super) async fn claim_volume(
    conn: &mut Tx,
    volume_id: &str,
    state: Option<VolumeState>,
    job: &NewJob,
) -> StoreResult<i64> {
    let job_id = insert_job(conn, job).await?;
    let r = query(
        "UPDATE volumes SET job_id = $1, state = COALESCE($2, state) \
         WHERE id = $3 AND job_id IS NULL",
    )
    .bind(job_id)
    .bind(state.map(|s| s.as_str()))
    .bind(volume_id)
    .execute(&mut *conn)
    .await?;
    if r.rows_affected() == 0 {
        return Err(StoreError::Conflict(
            "the volume is busy with another job or no longer exists".into(),
        ));
    }
    Ok(job_id)
}

pub(super) async fn append_detail(conn: &mut Tx, id: i64, detail: &str) -> StoreResult<()> {
    query(conn.dialect().append_job_detail())
        .bind(detail)
        .bind(id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Ends the job, releases every reservation it booked, and frees the volume
/// it worked on, which takes its state after the job.
pub(super) async fn finish_job_tx(conn: &mut Tx, id: i64, end: &JobEnd) -> StoreResult<()> {
    if let Some(detail) = &end.detail {
        append_detail(conn, id, detail).await?;
    }
    let done = end.state == JobState::Done;
    query(
        "UPDATE jobs SET state = $1, status = $2, endtime_ms = $3, \
         starttime_ms = COALESCE(starttime_ms, $4), \
         progress = CASE WHEN $5 THEN 100 ELSE progress END WHERE id = $6",
    )
    .bind(end.state.as_str())
    .bind(&end.status)
    .bind(end.now_ms)
    .bind(end.now_ms)
    .bind(done)
    .bind(id)
    .execute(&mut *conn)
    .await?;
    query("DELETE FROM reservations WHERE job_id = $1")
        .bind(id)
        .execute(&mut *conn)
        .await?;
    let volumes = query("SELECT id, state FROM volumes WHERE job_id = $1")
        .bind(id)
        .fetch_all(&mut *conn)
        .await?;
    for volume in &volumes {
        let volume_id: String = volume.try_get("id")?;
        let state: String = volume.try_get("state")?;
        let state = VolumeState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("volume state {state:?}")))?;
        query("UPDATE volumes SET job_id = NULL, state = $1 WHERE id = $2")
            .bind(volume_state_after_job(state, end.state).as_str())
            .bind(&volume_id)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

#[async_trait]
impl JobStore for SqlStore {
    async fn get_job(&self, tenant_id: i64, id: i64) -> StoreResult<Option<Job>> {
        let row = query(format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE tenant_id = $1 AND id = $2"
        ))
        .bind(tenant_id)
        .bind(id)
        .fetch_optional(self.reader())
        .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn list_jobs(&self, tenant_id: i64, f: &JobFilter) -> StoreResult<Vec<Job>> {
        let (count, offset) = Page {
            page: f.page,
            count: f.count,
        }
        .limit_offset();
        let rows = query(format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE tenant_id = $1 \
             AND ($2 IS NULL OR type = $3) AND ($4 IS NULL OR object = $5 OR object_name = $6) \
             AND ($7 IS NULL OR state = $8) ORDER BY id DESC LIMIT $9 OFFSET $10"
        ))
        .bind(tenant_id)
        .bind(&f.kind)
        .bind(&f.kind)
        .bind(&f.object)
        .bind(&f.object)
        .bind(&f.object)
        .bind(f.state.map(|s| s.as_str()))
        .bind(f.state.map(|s| s.as_str()))
        .bind(count)
        .bind(offset)
        .fetch_all(self.reader())
        .await?;
        rows.iter().map(job_row).collect()
    }

    async fn job_by_id(&self, id: i64) -> StoreResult<Option<Job>> {
        let row = query(format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1"))
            .bind(id)
            .fetch_optional(self.writer())
            .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn unfinished_jobs(&self) -> StoreResult<Vec<Job>> {
        let rows = query(format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE state IN ('Pending', 'Running') ORDER BY id"
        ))
        .fetch_all(self.writer())
        .await?;
        rows.iter().map(job_row).collect()
    }

    async fn active_volume_job(&self, volume_id: &str) -> StoreResult<Option<Job>> {
        // A job holding the volume (`hold_volume`) has another object.
        let row = query(format!(
            "SELECT {JOB_COLUMNS} FROM jobs \
             WHERE (object = $1 OR id = (SELECT job_id FROM volumes WHERE id = $1)) \
             AND state IN ('Pending', 'Running') ORDER BY id LIMIT 1"
        ))
        .bind(volume_id)
        .fetch_optional(self.writer())
        .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn create_job(&self, job: &NewJob) -> StoreResult<i64> {
        let mut tx = self.begin_write().await?;
        let id = insert_job(&mut tx, job).await?;
        tx.commit().await?;
        Ok(id)
    }

    async fn hold_volume(&self, volume_id: &str, job_id: i64) -> StoreResult<bool> {
        let mut tx = self.begin_write().await?;
        let held = query(
            "UPDATE volumes SET job_id = $1 WHERE id = $2 AND (job_id IS NULL OR job_id = $1)",
        )
        .bind(job_id)
        .bind(volume_id)
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(held.rows_affected() > 0)
    }

    async fn release_volume(&self, volume_id: &str, job_id: i64) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        query("UPDATE volumes SET job_id = NULL WHERE id = $1 AND job_id = $2")
            .bind(volume_id)
            .bind(job_id)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn step_slices(&self, job_id: i64) -> StoreResult<Vec<StepSlice>> {
        let rows = query(
            "SELECT s.id AS slice_id, s.volume_id, v.name AS volume_name, s.copy, s.col \
             FROM (SELECT slice_id, MIN(id) AS first_step FROM resize_steps \
                   WHERE job_id = $1 GROUP BY slice_id) r \
             JOIN slices s ON s.id = r.slice_id JOIN volumes v ON v.id = s.volume_id \
             ORDER BY r.first_step",
        )
        .bind(job_id)
        .fetch_all(self.writer())
        .await?;
        rows.iter().map(step_slice_row).collect()
    }

    async fn set_job_running(&self, id: i64, now_ms: i64) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        query(
            "UPDATE jobs SET state = 'Running', status = 'Running', \
             starttime_ms = COALESCE(starttime_ms, $1) WHERE id = $2",
        )
        .bind(now_ms)
        .bind(id)
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn set_job_progress(&self, id: i64, progress: u8, status: &str) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        query("UPDATE jobs SET progress = $1, status = $2 WHERE id = $3")
            .bind(i64::from(progress.min(100)))
            .bind(status)
            .bind(id)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn add_job_detail(&self, id: i64, detail: &str) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        append_detail(&mut tx, id, detail).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn finish_job(&self, id: i64, end: &JobEnd) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        finish_job_tx(&mut tx, id, end).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn request_job_cancel(
        &self,
        tenant_id: i64,
        id: i64,
        now_ms: i64,
    ) -> StoreResult<Option<Job>> {
        let mut tx = self.begin_write().await?;
        query(
            "UPDATE jobs SET cancel_ms = COALESCE(cancel_ms, $1) WHERE tenant_id = $2 AND id = $3 \
             AND state IN ('Pending', 'Running') AND committed = 0",
        )
        .bind(now_ms)
        .bind(tenant_id)
        .bind(id)
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        self.job_by_id(id)
            .await
            .map(|job| job.filter(|j| j.tenant_id == tenant_id))
    }

    async fn commit_job(&self, id: i64) -> StoreResult<bool> {
        let mut tx = self.begin_write().await?;
        // The row's lock orders this against a cancel asked for meanwhile.
        let committed: Option<i64> = scalar(
            "UPDATE jobs SET committed = CASE WHEN cancel_ms IS NULL THEN 1 ELSE committed END \
             WHERE id = $1 RETURNING committed",
        )
        .bind(id)
        .fetch_optional(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(committed == Some(1))
    }

    async fn job_controls(&self, ids: &[i64]) -> StoreResult<Vec<JobControl>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = query(format!(
            "SELECT id, cancel_ms, paused_ms, movement_rate FROM jobs WHERE {} ORDER BY id",
            self.dialect().in_list("id", 1)
        ))
        .bind(ids)
        .fetch_all(self.writer())
        .await?;
        rows.iter().map(job_control_row).collect()
    }

    async fn steer_job(
        &self,
        tenant_id: i64,
        id: i64,
        steering: &JobSteering,
        now_ms: i64,
    ) -> StoreResult<Option<Job>> {
        let mut tx = self.begin_write().await?;
        if let Some(paused) = steering.paused {
            query(
                "UPDATE jobs SET paused_ms = CASE WHEN $1 THEN COALESCE(paused_ms, $2) END \
                 WHERE tenant_id = $3 AND id = $4 AND state IN ('Pending', 'Running')",
            )
            .bind(paused)
            .bind(now_ms)
            .bind(tenant_id)
            .bind(id)
            .execute(&mut tx)
            .await?;
        }
        if let Some(rate) = steering.movement_rate {
            query(
                "UPDATE jobs SET movement_rate = $1 \
                 WHERE tenant_id = $2 AND id = $3 AND state IN ('Pending', 'Running')",
            )
            .bind(
                rate.map(i64::try_from)
                    .transpose()
                    .map_err(|_| StoreError::Corrupt("movement rate beyond i64".into()))?,
            )
            .bind(tenant_id)
            .bind(id)
            .execute(&mut tx)
            .await?;
        }
        tx.commit().await?;
        self.job_by_id(id)
            .await
            .map(|job| job.filter(|j| j.tenant_id == tenant_id))
    }

    async fn delete_job(&self, tenant_id: i64, id: i64) -> StoreResult<bool> {
        let mut tx = self.begin_write().await?;
        let ended: Option<i64> = scalar(format!(
            "SELECT id FROM jobs WHERE tenant_id = $1 AND id = $2 AND state IN ('Done', 'Error'){}",
            self.dialect().for_update()
        ))
        .bind(tenant_id)
        .bind(id)
        .fetch_optional(&mut tx)
        .await?;
        if ended.is_none() {
            return Ok(false);
        }
        for table in ["resize_steps", "reservations"] {
            query(format!("DELETE FROM {table} WHERE job_id = $1"))
                .bind(id)
                .execute(&mut tx)
                .await?;
        }
        query("DELETE FROM jobs WHERE id = $1")
            .bind(id)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn claim_jobs(&self, terms: &LeaseTerms<'_>, limit: usize) -> StoreResult<Vec<JobLease>> {
        self.claim(None, terms, limit).await
    }

    async fn claim_job(&self, id: i64, terms: &LeaseTerms<'_>) -> StoreResult<Option<JobLease>> {
        Ok(self.claim(Some(id), terms, 1).await?.pop())
    }

    async fn renew_job_leases(
        &self,
        leases: &[JobLease],
        terms: &LeaseTerms<'_>,
    ) -> StoreResult<Vec<i64>> {
        let mut tx = self.begin_write().await?;
        let mut lost = Vec::new();
        for lease in leases {
            let renewed = query(
                "UPDATE jobs SET lease_expires_ms = $1 WHERE id = $2 AND lease_owner = $3 \
                 AND lease_epoch = $4 AND state IN ('Pending', 'Running')",
            )
            .bind(terms.now_ms.saturating_add(terms.ttl_ms))
            .bind(lease.job_id)
            .bind(terms.owner)
            .bind(lease.epoch)
            .execute(&mut tx)
            .await?;
            if renewed.rows_affected() == 0 {
                lost.push(lease.job_id);
            }
        }
        tx.commit().await?;
        Ok(lost)
    }

    async fn release_job_lease(&self, lease: &JobLease) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        query(
            "UPDATE jobs SET lease_owner = NULL, lease_expires_ms = NULL \
             WHERE id = $1 AND lease_owner = $2 AND lease_epoch = $3",
        )
        .bind(lease.job_id)
        .bind(&lease.owner)
        .bind(lease.epoch)
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn end_all_job_leases(&self) -> StoreResult<u64> {
        let mut tx = self.begin_write().await?;
        let ended = query(
            "UPDATE jobs SET lease_owner = NULL, lease_expires_ms = NULL \
             WHERE lease_owner IS NOT NULL",
        )
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(ended.rows_affected())
    }
}

impl SqlStore {
    /// Claims unfinished jobs nobody holds (`only`: that one job), oldest
    /// first. `SKIP LOCKED` passes over rows another transaction is
    /// claiming; the write lock already orders claims against the fence
    /// checks of jobs' writes, so a claim and a fenced write never overlap.
    async fn claim(
        &self,
        only: Option<i64>,
        terms: &LeaseTerms<'_>,
        limit: usize,
    ) -> StoreResult<Vec<JobLease>> {
        let mut tx = self.begin_write().await?;
        let picked = query(format!(
            "SELECT id, lease_owner FROM jobs WHERE state IN ('Pending', 'Running') \
             AND (lease_owner IS NULL OR lease_expires_ms < $1) \
             AND (CAST($2 AS BIGINT) IS NULL OR id = $2) ORDER BY id LIMIT $3{}",
            self.dialect().for_update_skip_locked()
        ))
        .bind(terms.now_ms)
        .bind(only)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&mut tx)
        .await?;
        let mut leases = Vec::with_capacity(picked.len());
        for row in &picked {
            let job_id: i64 = row.try_get("id")?;
            let epoch: i64 = scalar(
                "UPDATE jobs SET lease_owner = $1, lease_epoch = lease_epoch + 1, \
                 lease_expires_ms = $2 WHERE id = $3 RETURNING lease_epoch",
            )
            .bind(terms.owner)
            .bind(terms.now_ms.saturating_add(terms.ttl_ms))
            .bind(job_id)
            .fetch_one(&mut tx)
            .await?;
            leases.push(JobLease {
                job_id,
                owner: terms.owner.to_string(),
                epoch,
                taken_over_from: row.try_get("lease_owner")?,
            });
        }
        tx.commit().await?;
        leases.sort_by_key(|l| l.job_id);
        Ok(leases)
    }
}

/// Refuses a write made under a lease that was taken over (see
/// `crate::fence`), inside the write transaction, under the write lock.
pub(super) async fn check_fence(conn: &mut Tx) -> StoreResult<()> {
    let Some(lease) = crate::fence::current() else {
        return Ok(());
    };
    let held: Option<i32> =
        scalar("SELECT 1 FROM jobs WHERE id = $1 AND lease_owner = $2 AND lease_epoch = $3")
            .bind(lease.job_id)
            .bind(&lease.owner)
            .bind(lease.epoch)
            .fetch_optional(&mut *conn)
            .await?;
    match held {
        Some(_) => Ok(()),
        None => Err(crate::fence::taken_over(&lease)),
    }
}
