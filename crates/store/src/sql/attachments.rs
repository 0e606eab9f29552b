//! Attachments of volumes to nodes.

use super::db::query;
use super::dialect::Dialect;
use super::jobs::claim_volume;
use super::{attachment_row, conflict_on_unique, SqlStore};
use crate::records::{Attachment, NewAttachment, NewJob};
use crate::{AttachmentStore, StoreResult};
use async_trait::async_trait;
use std::sync::LazyLock;

/// Attachments with their volume, snapshot, job and front (the dialect
/// spells how a job's arguments name the volume's size).
pub(super) fn attachment_select(dialect: Dialect) -> &'static str {
    // Built once per dialect: the agents' and fronts' long polls read it.
    static SQLITE: LazyLock<String> = LazyLock::new(|| build(Dialect::Sqlite));
    static POSTGRES: LazyLock<String> = LazyLock::new(|| build(Dialect::Postgres));
    fn build(dialect: Dialect) -> String {
        format!(
            "SELECT a.volume_id, v.name AS volume_name, a.node, \
        a.tenant_id, a.snapshot, COALESCE(s.name, a.snapshot) AS snapshot_name, a.readonly, \
        a.mountpoint, a.export_name, a.state, a.created_ms, \
        a.host_state, a.host_detail, a.host_device, a.host_mountpath, a.fs_bytes, a.fs_size_gib, \
        a.grow_error, a.grow_job, a.host_updated_ms, a.manager, \
        v.type AS volume_type, v.size_gib AS volume_size, v.attributes AS volume_attributes, \
        s.volume_size_gib AS snapshot_size, \
        v.job_id, j.progress AS job_progress, j.status AS job_status, \
        CASE WHEN j.type = 'volume_grow_filesystem' OR (j.type = 'volume_modify_extend' \
            AND {}) THEN j.id END AS volume_grow_job, \
        v.front_node, fnode.front_address AS front_address \
        FROM attachments a JOIN volumes v ON v.id = a.volume_id \
        LEFT JOIN snapshots s ON s.id = a.snapshot \
        LEFT JOIN jobs j ON j.id = v.job_id \
        LEFT JOIN nodes fnode ON fnode.name = v.front_node",
            dialect.job_asks_volume_size()
        )
    }
    match dialect {
        Dialect::Sqlite => &SQLITE,
        Dialect::Postgres => &POSTGRES,
    }
}

#[async_trait]
impl AttachmentStore for SqlStore {
    async fn create_attachment(&self, a: &NewAttachment, job: &NewJob) -> StoreResult<i64> {
        let mut tx = self.begin_write().await?;
        let inserted = query(
            "INSERT INTO attachments (volume_id, node, tenant_id, snapshot, readonly, mountpoint, \
             export_name, state, created_ms, manager) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'Attaching', $8, $9)",
        )
        .bind(&a.volume_id)
        .bind(&a.node)
        .bind(a.tenant_id)
        .bind(&a.snapshot)
        .bind(i64::from(a.readonly))
        .bind(&a.mountpoint)
        .bind(&a.export_name)
        .bind(a.now_ms)
        .bind(a.manager.as_str())
        .execute(&mut tx)
        .await;
        conflict_on_unique(inserted, || {
            if a.snapshot == svs_domain::LIVE_SNAPSHOT_NAME {
                format!("the volume is already attached to node '{}'", a.node)
            } else {
                format!("the snapshot is already attached to node '{}'", a.node)
            }
        })?;
        let job_id = claim_volume(&mut tx, &a.volume_id, None, job).await?;
        tx.commit().await?;
        Ok(job_id)
    }

    async fn list_attachments(
        &self,
        tenant_id: i64,
        volume_id: Option<&str>,
    ) -> StoreResult<Vec<Attachment>> {
        let rows = query(format!(
            "{select} WHERE a.tenant_id = $1 AND ($2 IS NULL OR a.volume_id = $3) \
             ORDER BY v.name, a.snapshot <> 'top', snapshot_name, a.node",
            select = attachment_select(self.dialect())
        ))
        .bind(tenant_id)
        .bind(volume_id)
        .bind(volume_id)
        .fetch_all(self.reader())
        .await?;
        rows.iter().map(attachment_row).collect()
    }

    async fn all_attachments(&self) -> StoreResult<Vec<Attachment>> {
        let rows = query(format!(
            "{select} ORDER BY a.volume_id, a.snapshot, a.node",
            select = attachment_select(self.dialect())
        ))
        .fetch_all(self.writer())
        .await?;
        rows.iter().map(attachment_row).collect()
    }

    async fn get_attachment(
        &self,
        volume_id: &str,
        snapshot: &str,
        node: &str,
    ) -> StoreResult<Option<Attachment>> {
        let row = query(format!(
            "{select} WHERE a.volume_id = $1 AND a.snapshot = $2 AND a.node = $3",
            select = attachment_select(self.dialect())
        ))
        .bind(volume_id)
        .bind(snapshot)
        .bind(node)
        .fetch_optional(self.writer())
        .await?;
        row.as_ref().map(attachment_row).transpose()
    }

    async fn set_attachment_state(
        &self,
        volume_id: &str,
        snapshot: &str,
        node: &str,
        state: &str,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        query(
            "UPDATE attachments SET state = $1 \
             WHERE volume_id = $2 AND snapshot = $3 AND node = $4",
        )
        .bind(state)
        .bind(volume_id)
        .bind(snapshot)
        .bind(node)
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn update_attachment(
        &self,
        volume_id: &str,
        snapshot: &str,
        node: &str,
        readonly: bool,
        mountpoint: &str,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        query(
            "UPDATE attachments SET readonly = $1, mountpoint = $2 \
             WHERE volume_id = $3 AND snapshot = $4 AND node = $5",
        )
        .bind(i64::from(readonly))
        .bind(mountpoint)
        .bind(volume_id)
        .bind(snapshot)
        .bind(node)
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn delete_attachment(
        &self,
        volume_id: &str,
        snapshot: &str,
        node: &str,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        query("DELETE FROM attachments WHERE volume_id = $1 AND snapshot = $2 AND node = $3")
            .bind(volume_id)
            .bind(snapshot)
            .bind(node)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
