//! Snapshots of volumes.

use super::jobs::claim_volume;
use super::{conflict_on_unique, snapshot_row, to_i64, SqliteStore};
use crate::records::{NewJob, NewSnapshot, Snapshot};
use crate::rows::SNAPSHOT_SELECT;
use crate::sql::duplicate_name;
use crate::{SnapshotStore, StoreError, StoreResult};
use async_trait::async_trait;
use serde_json::{Map, Value};
use svs_domain::SnapshotState;

#[async_trait]
impl SnapshotStore for SqliteStore {
    async fn create_snapshot(&self, s: &NewSnapshot, job: &NewJob) -> StoreResult<i64> {
        let mut tx = self.begin_write().await?;
        let inserted = sqlx::query(
            "INSERT INTO snapshots (id, volume_id, tenant_id, name, consistency, \
             volume_size_gib, state, attributes, created_ms) \
             VALUES (?, ?, ?, ?, ?, ?, 'Creating', ?, ?)",
        )
        .bind(&s.id)
        .bind(&s.volume_id)
        .bind(s.tenant_id)
        .bind(&s.name)
        .bind(s.consistency.as_str())
        .bind(to_i64(s.volume_size)?)
        .bind(Value::Object(s.attributes.clone()).to_string())
        .bind(s.now_ms)
        .execute(&mut *tx)
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
        let rows = sqlx::query(&format!(
            "{SNAPSHOT_SELECT} WHERE s.tenant_id = ? AND (? IS NULL OR s.volume_id = ?) \
             ORDER BY v.name, s.seq"
        ))
        .bind(tenant_id)
        .bind(volume_id)
        .bind(volume_id)
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(snapshot_row).collect()
    }

    async fn volume_snapshots(&self, volume_id: &str) -> StoreResult<Vec<Snapshot>> {
        let rows = sqlx::query(&format!(
            "{SNAPSHOT_SELECT} WHERE s.volume_id = ? ORDER BY s.seq"
        ))
        .bind(volume_id)
        .fetch_all(&self.writer)
        .await?;
        rows.iter().map(snapshot_row).collect()
    }

    async fn get_snapshot(
        &self,
        volume_id: &str,
        name_or_id: &str,
    ) -> StoreResult<Option<Snapshot>> {
        let row = sqlx::query(&format!(
            "{SNAPSHOT_SELECT} WHERE s.volume_id = ? AND (s.name = ? OR s.id = ?) \
             ORDER BY (s.name = ?) DESC LIMIT 1"
        ))
        .bind(volume_id)
        .bind(name_or_id)
        .bind(name_or_id)
        .bind(name_or_id)
        .fetch_optional(&self.writer)
        .await?;
        row.as_ref().map(snapshot_row).transpose()
    }

    async fn snapshot_by_id(&self, id: &str) -> StoreResult<Option<Snapshot>> {
        let row = sqlx::query(&format!("{SNAPSHOT_SELECT} WHERE s.id = ?"))
            .bind(id)
            .fetch_optional(&self.writer)
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
        let volume_id: Option<String> =
            sqlx::query_scalar("SELECT volume_id FROM snapshots WHERE id = ?")
                .bind(snapshot_id)
                .fetch_optional(&mut *tx)
                .await?;
        let volume_id = volume_id.ok_or(StoreError::NotFound)?;
        let job_id = claim_volume(&mut tx, &volume_id, None, job).await?;
        if let Some(state) = state {
            sqlx::query("UPDATE snapshots SET state = ? WHERE id = ?")
                .bind(state.as_str())
                .bind(snapshot_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(job_id)
    }

    async fn set_snapshot_state(&self, id: &str, state: SnapshotState) -> StoreResult<()> {
        sqlx::query("UPDATE snapshots SET state = ? WHERE id = ?")
            .bind(state.as_str())
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn update_snapshot(
        &self,
        id: &str,
        name: &str,
        attributes: &Map<String, Value>,
    ) -> StoreResult<()> {
        let updated = sqlx::query("UPDATE snapshots SET name = ?, attributes = ? WHERE id = ?")
            .bind(name)
            .bind(Value::Object(attributes.clone()).to_string())
            .bind(id)
            .execute(&self.writer)
            .await;
        let updated = conflict_on_unique(updated, duplicate_name(name))?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    async fn set_snapshot_usage(
        &self,
        per_snapshot: &[(String, u64)],
        per_medium: &[(String, u64)],
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        for (id, bytes) in per_snapshot {
            sqlx::query("UPDATE snapshots SET used_bytes = ? WHERE id = ?")
                .bind(to_i64(*bytes)?)
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        for (medium, bytes) in per_medium {
            sqlx::query("UPDATE media SET snapshot_bytes = ? WHERE id = ?")
                .bind(to_i64(*bytes)?)
                .bind(medium)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn delete_snapshot(&self, id: &str) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM attachments WHERE snapshot = ?")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM snapshots WHERE id = ?")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
