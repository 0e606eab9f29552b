//! Snapshots of volumes.

use super::db::{query, scalar};
use super::jobs::claim_volume;
use super::{conflict_on_unique, snapshot_row, to_i64, SqlStore};
use crate::records::{NewJob, NewSnapshot, Snapshot};
use crate::rows::SNAPSHOT_SELECT;
use crate::sql::errors::duplicate_name;
use crate::{SnapshotStore, StoreError, StoreResult};
use async_trait::async_trait;
use serde_json::{Map, Value};
use svs_domain::SnapshotState;

#[async_trait]
impl SnapshotStore for SqlStore {
    async fn create_snapshot(&self, s: &NewSnapshot, job: &NewJob) -> StoreResult<i64> {
        let mut tx = self.begin_write().await?;
        let inserted = query(
            "INSERT INTO snapshots (id, volume_id, tenant_id, name, consistency, \
             volume_size_gib, state, attributes, created_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, 'Creating', $7, $8)",
        )
        .bind(&s.id)
        .bind(&s.volume_id)
        .bind(s.tenant_id)
        .bind(&s.name)
        .bind(s.consistency.as_str())
        .bind(to_i64(s.volume_size)?)
        .bind(Value::Object(s.attributes.clone()).to_string())
        .bind(s.now_ms)
        .execute(&mut tx)
        .await;
        conflict_on_unique(inserted, duplicate_name(&s.name))?;
        let job_id = claim_volume(&mut tx, &s.volume_id, None, job).await?;
        tx.commit().await?;
        Ok(job_id)
    }

    async fn list_snapshots(
        &self,
        tenant_id: i64,
        volume_id: Option<&str>,
    ) -> StoreResult<Vec<Snapshot>> {
        let rows = query(format!(
            "{SNAPSHOT_SELECT} WHERE s.tenant_id = $1 AND ($2 IS NULL OR s.volume_id = $3) \
             ORDER BY v.name, s.seq"
        ))
        .bind(tenant_id)
        .bind(volume_id)
        .bind(volume_id)
        .fetch_all(self.reader())
        .await?;
        rows.iter().map(snapshot_row).collect()
    }

    async fn volume_snapshots(&self, volume_id: &str) -> StoreResult<Vec<Snapshot>> {
        let rows = query(format!(
            "{SNAPSHOT_SELECT} WHERE s.volume_id = $1 ORDER BY s.seq"
        ))
        .bind(volume_id)
        .fetch_all(self.writer())
        .await?;
        rows.iter().map(snapshot_row).collect()
    }

    async fn get_snapshot(
        &self,
        volume_id: &str,
        name_or_id: &str,
    ) -> StoreResult<Option<Snapshot>> {
        let row = query(format!(
            "{SNAPSHOT_SELECT} WHERE s.volume_id = $1 AND (s.name = $2 OR s.id = $3) \
             ORDER BY (s.name = $4) DESC LIMIT 1"
        ))
        .bind(volume_id)
        .bind(name_or_id)
        .bind(name_or_id)
        .bind(name_or_id)
        .fetch_optional(self.writer())
        .await?;
        row.as_ref().map(snapshot_row).transpose()
    }

    async fn snapshot_by_id(&self, id: &str) -> StoreResult<Option<Snapshot>> {
        let row = query(format!("{SNAPSHOT_SELECT} WHERE s.id = $1"))
            .bind(id)
            .fetch_optional(self.writer())
            .await?;
        row.as_ref().map(snapshot_row).transpose()
    }

    async fn start_snapshot_job(
        &self,
        snapshot_id: &str,
        state: Option<SnapshotState>,
        job: &NewJob,
    ) -> StoreResult<i64> {
        let mut tx = self.begin_write().await?;
        let volume_id: Option<String> = scalar("SELECT volume_id FROM snapshots WHERE id = $1")
            .bind(snapshot_id)
            .fetch_optional(&mut tx)
            .await?;
        let volume_id = volume_id.ok_or(StoreError::NotFound)?;
        let job_id = claim_volume(&mut tx, &volume_id, None, job).await?;
        if let Some(state) = state {
            query("UPDATE snapshots SET state = $1 WHERE id = $2")
                .bind(state.as_str())
                .bind(snapshot_id)
                .execute(&mut tx)
                .await?;
        }
        tx.commit().await?;
        Ok(job_id)
    }

    async fn set_snapshot_state(&self, id: &str, state: SnapshotState) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        query("UPDATE snapshots SET state = $1 WHERE id = $2")
            .bind(state.as_str())
            .bind(id)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn update_snapshot(
        &self,
        id: &str,
        name: &str,
        attributes: &Map<String, Value>,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let updated = query("UPDATE snapshots SET name = $1, attributes = $2 WHERE id = $3")
            .bind(name)
            .bind(Value::Object(attributes.clone()).to_string())
            .bind(id)
            .execute(&mut tx)
            .await;
        let updated = conflict_on_unique(updated, duplicate_name(name))?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        tx.commit().await?;
        Ok(())
    }

    async fn set_snapshot_usage(
        &self,
        per_snapshot: &[(String, u64)],
        per_medium: &[(String, u64)],
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        for (id, bytes) in per_snapshot {
            query("UPDATE snapshots SET used_bytes = $1 WHERE id = $2")
                .bind(to_i64(*bytes)?)
                .bind(id)
                .execute(&mut tx)
                .await?;
        }
        for (medium, bytes) in per_medium {
            query("UPDATE media SET snapshot_bytes = $1 WHERE id = $2")
                .bind(to_i64(*bytes)?)
                .bind(medium)
                .execute(&mut tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn delete_snapshot(&self, id: &str) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        query("DELETE FROM attachments WHERE snapshot = $1")
            .bind(id)
            .execute(&mut tx)
            .await?;
        query("DELETE FROM snapshots WHERE id = $1")
            .bind(id)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
