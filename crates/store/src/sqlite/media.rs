//! Media with their usage, and nodes.

use super::{conflict_on_unique, gib, to_i64, SqliteStore};
use crate::records::{MediumRecord, MediumUsage, NodeRecord};
use crate::{MediaStore, StoreError, StoreResult};
use async_trait::async_trait;
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use std::collections::{BTreeSet, HashMap};
use svs_domain::{media_to_forget, Medium, MediumSpace, StoredMedium};

/// Size, allocated and reserved space of each of `media` that exists, read
/// on the transaction's connection (for checking a booking before it is
/// written).
pub(super) async fn media_space(
    conn: &mut SqliteConnection,
    media: impl IntoIterator<Item = &str>,
) -> StoreResult<Vec<MediumSpace>> {
    let ids: BTreeSet<&str> = media.into_iter().collect();
    let mut space = Vec::with_capacity(ids.len());
    for id in ids {
        let row = sqlx::query(
            "SELECT m.size_gib, \
             COALESCE((SELECT SUM(size_gib) FROM slices WHERE medium_id = m.id), 0) AS allocated, \
             COALESCE((SELECT SUM(gib) FROM reservations WHERE medium_id = m.id), 0) \
               + (m.snapshot_bytes + 1073741823) / 1073741824 AS reserved \
             FROM media m WHERE m.id = ?",
        )
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
        if let Some(row) = row {
            space.push(MediumSpace {
                medium: id.to_string(),
                size: gib(&row, "size_gib")?,
                allocated: gib(&row, "allocated")?,
                reserved: gib(&row, "reserved")?,
            });
        }
    }
    Ok(space)
}

/// A medium's record from a row with its `id`, `node`, `zone`, `directory`
/// and `size_gib` columns.
fn medium_record(row: &SqliteRow) -> StoreResult<MediumRecord> {
    Ok(MediumRecord {
        medium: Medium {
            id: row.try_get("id")?,
            node: row.try_get("node")?,
            zone: row.try_get("zone")?,
            size: gib(row, "size_gib")?,
        },
        directory: row.try_get("directory")?,
    })
}

#[async_trait]
impl MediaStore for SqliteStore {
    async fn sync_media(&self, media: &[MediumRecord]) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let rows = sqlx::query(
            "SELECT m.id, m.directory, m.node, m.zone, m.size_gib, \
             COALESCE((SELECT SUM(size_gib) FROM slices WHERE medium_id = m.id), 0) \
             + COALESCE((SELECT SUM(gib) FROM reservations WHERE medium_id = m.id), 0) \
             AS held FROM media m",
        )
        .fetch_all(&mut *tx)
        .await?;
        let stored = rows
            .iter()
            .map(|row| {
                Ok(StoredMedium {
                    record: medium_record(row)?,
                    held: gib(row, "held")?,
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        for id in media_to_forget(&stored, media)? {
            sqlx::query("DELETE FROM media WHERE id = ?")
                .bind(&id)
                .execute(&mut *tx)
                .await?;
        }
        for m in media {
            sqlx::query(
                "INSERT INTO media (id, node, zone, directory, size_gib) VALUES (?, ?, ?, ?, ?) \
                 ON CONFLICT(id) DO UPDATE SET node = excluded.node, zone = excluded.zone, \
                 directory = excluded.directory, size_gib = excluded.size_gib",
            )
            .bind(&m.medium.id)
            .bind(&m.medium.node)
            .bind(&m.medium.zone)
            .bind(&m.directory)
            .bind(to_i64(m.medium.size)?)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn media_usage(&self) -> StoreResult<Vec<MediumUsage>> {
        let rows = sqlx::query(
            "SELECT m.id, m.node, m.zone, m.directory, m.size_gib, \
             COALESCE((SELECT SUM(size_gib) FROM slices WHERE medium_id = m.id), 0) AS allocated, \
             COALESCE((SELECT SUM(gib) FROM reservations WHERE medium_id = m.id), 0) AS reserved, \
             (SELECT COUNT(DISTINCT volume_id) FROM slices WHERE medium_id = m.id) AS volumes, \
             m.snapshot_bytes, m.state \
             FROM media m ORDER BY m.id",
        )
        .fetch_all(&self.writer)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(MediumUsage {
                    record: medium_record(row)?,
                    allocated: gib(row, "allocated")?,
                    reserved: gib(row, "reserved")?,
                    volumes_count: gib(row, "volumes")?,
                    snapshot_bytes: gib(row, "snapshot_bytes")?,
                    failed: row.try_get::<String, _>("state")? == "Failed",
                })
            })
            .collect()
    }

    async fn node_volume_counts(&self) -> StoreResult<HashMap<String, u64>> {
        let rows = sqlx::query(
            "SELECT m.node, COUNT(DISTINCT s.volume_id) AS volumes FROM slices s \
             JOIN media m ON m.id = s.medium_id GROUP BY m.node",
        )
        .fetch_all(&self.reader)
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("node")?, gib(row, "volumes")?)))
            .collect()
    }

    async fn sync_nodes(&self, nodes: &[NodeRecord]) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        for n in nodes {
            sqlx::query(
                "INSERT INTO nodes (name, zone, address) VALUES (?, ?, ?) \
                 ON CONFLICT(name) DO UPDATE SET zone = excluded.zone, \
                 address = COALESCE(excluded.address, nodes.address)",
            )
            .bind(&n.name)
            .bind(&n.zone)
            .bind(&n.address)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn list_nodes(&self) -> StoreResult<Vec<NodeRecord>> {
        let rows = sqlx::query("SELECT name, zone, address FROM nodes ORDER BY name")
            .fetch_all(&self.reader)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(NodeRecord {
                    name: r.try_get("name")?,
                    zone: r.try_get("zone")?,
                    address: r.try_get("address")?,
                })
            })
            .collect()
    }

    async fn set_medium_failed(&self, id: &str) -> StoreResult<bool> {
        let current: Option<String> = sqlx::query_scalar("SELECT state FROM media WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.writer)
            .await?;
        match current.as_deref() {
            None => Err(StoreError::NotFound),
            Some("Failed") => Ok(false),
            Some(_) => {
                sqlx::query("UPDATE media SET state = 'Failed' WHERE id = ?")
                    .bind(id)
                    .execute(&self.writer)
                    .await?;
                Ok(true)
            }
        }
    }

    async fn create_node(&self, node: &NodeRecord) -> StoreResult<()> {
        let inserted = sqlx::query("INSERT INTO nodes (name, zone, address) VALUES (?, ?, ?)")
            .bind(&node.name)
            .bind(&node.zone)
            .bind(&node.address)
            .execute(&self.writer)
            .await;
        conflict_on_unique(inserted, || format!("node '{}' already exists", node.name))?;
        Ok(())
    }

    async fn set_node_address(&self, name: &str, address: Option<&str>) -> StoreResult<()> {
        let r = sqlx::query("UPDATE nodes SET address = ? WHERE name = ?")
            .bind(address)
            .bind(name)
            .execute(&self.writer)
            .await?;
        if r.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }
}
