//! Fronts of volumes on storage nodes: `volumes.front_node`.

use super::attachments::attachment_select;
use super::db::query;
use super::{attachment_row, gib, SqlStore};
use crate::records::{NodeFront, VolumeFront};
use crate::{FrontStore, StoreError, StoreResult};
use async_trait::async_trait;
use std::collections::HashMap;

#[async_trait]
impl FrontStore for SqlStore {
    async fn set_front_node(&self, volume_id: &str, node: Option<&str>) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let changed = query("UPDATE volumes SET front_node = $1 WHERE id = $2")
            .bind(node)
            .bind(volume_id)
            .execute(&mut tx)
            .await?;
        if changed.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        tx.commit().await?;
        Ok(())
    }

    async fn volume_front(&self, volume_id: &str) -> StoreResult<VolumeFront> {
        let row = query("SELECT front_node, front_epoch FROM volumes WHERE id = $1")
            .bind(volume_id)
            .fetch_optional(self.writer())
            .await?
            .ok_or(StoreError::NotFound)?;
        let epoch: i64 = row.try_get("front_epoch")?;
        Ok(VolumeFront {
            node: row.try_get("front_node")?,
            epoch: u64::try_from(epoch)
                .map_err(|_| StoreError::Corrupt(format!("front epoch {epoch}")))?,
        })
    }

    async fn clear_unattached_front(&self, volume_id: &str) -> StoreResult<bool> {
        let mut tx = self.begin_write().await?;
        let changed = query(
            "UPDATE volumes SET front_node = NULL WHERE id = $1 AND front_node IS NOT NULL \
             AND NOT EXISTS (SELECT 1 FROM attachments WHERE volume_id = volumes.id)",
        )
        .bind(volume_id)
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(changed.rows_affected() == 1)
    }

    async fn node_fronts(&self, node: &str) -> StoreResult<Vec<NodeFront>> {
        // The pool: every write is committed before its call returns, so a
        // poll answering right after an attach sees it.
        let volumes = query(
            "SELECT id, front_epoch, size_gib FROM volumes WHERE front_node = $1 ORDER BY id",
        )
        .bind(node)
        .fetch_all(self.writer())
        .await?;
        let mut fronts = Vec::with_capacity(volumes.len());
        for v in &volumes {
            let volume_id: String = v.try_get("id")?;
            let epoch: i64 = v.try_get("front_epoch")?;
            let rows = query(format!(
                "{select} WHERE a.volume_id = $1 ORDER BY a.snapshot, a.node",
                select = attachment_select(self.dialect())
            ))
            .bind(&volume_id)
            .fetch_all(self.writer())
            .await?;
            fronts.push(NodeFront {
                epoch: u64::try_from(epoch)
                    .map_err(|_| StoreError::Corrupt(format!("front epoch {epoch}")))?,
                size: gib(v, "size_gib")?,
                attachments: rows
                    .iter()
                    .map(attachment_row)
                    .collect::<StoreResult<_>>()?,
                volume_id,
            });
        }
        Ok(fronts)
    }

    async fn unattached_fronts(&self) -> StoreResult<Vec<String>> {
        let rows = query(
            "SELECT id FROM volumes v WHERE front_node IS NOT NULL \
             AND NOT EXISTS (SELECT 1 FROM attachments a WHERE a.volume_id = v.id) ORDER BY id",
        )
        .fetch_all(self.writer())
        .await?;
        rows.iter()
            .map(|r| r.try_get("id").map_err(StoreError::from))
            .collect()
    }

    async fn front_counts(&self) -> StoreResult<HashMap<String, u64>> {
        let rows = query(
            "SELECT front_node, COUNT(*) AS n FROM volumes WHERE front_node IS NOT NULL \
             GROUP BY front_node",
        )
        .fetch_all(self.writer())
        .await?;
        rows.iter()
            .map(|r| {
                let n: i64 = r.try_get("n")?;
                Ok((
                    r.try_get("front_node")?,
                    u64::try_from(n).map_err(|_| StoreError::Corrupt(format!("count {n}")))?,
                ))
            })
            .collect()
    }

    async fn set_front_report(&self, node: &str, open: &str, now_ms: i64) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        query(
            "INSERT INTO front_reports (node, open, reported_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (node) DO UPDATE SET open = excluded.open, \
             reported_ms = excluded.reported_ms",
        )
        .bind(node)
        .bind(open)
        .bind(now_ms)
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn front_reports(&self) -> StoreResult<Vec<(String, String)>> {
        let rows = query("SELECT node, open FROM front_reports ORDER BY node")
            .fetch_all(self.reader())
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("node")?, r.try_get("open")?)))
            .collect()
    }
}
