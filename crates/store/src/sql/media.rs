//! Media with their usage, and nodes.

use super::db::{query, scalar, Tx};
use super::jobs::insert_job;
use super::lost::lose_slices_on;
use super::{conflict_on_unique, gib, managed_by, medium_record, to_i64, SqlStore};
use crate::records::{ManagedBy, MediumRecord, MediumUsage, NewJob, NodeRecord};
use crate::{MediaStore, StoreError, StoreResult};
use async_trait::async_trait;
use std::collections::{BTreeSet, HashMap};
use svs_domain::{
    check_medium_removal, check_medium_resize, check_node_removal, media_to_forget, Gib, JobKind,
    MediumSpace, StoredMedium,
};

/// Size, allocated and reserved space of each of `media` that exists, read
/// on the transaction's connection (for checking a booking before it is
/// written).
pub(super) async fn media_space(
    conn: &mut Tx,
    media: impl IntoIterator<Item = &str>,
) -> StoreResult<Vec<MediumSpace>> {
    let ids: BTreeSet<&str> = media.into_iter().collect();
    let mut space = Vec::with_capacity(ids.len());
    for id in ids {
        let row = query(
            "SELECT m.size_gib, \
             COALESCE((SELECT CAST(SUM(size_gib) AS BIGINT) FROM slices WHERE medium_id = m.id), 0) AS allocated, \
             COALESCE((SELECT CAST(SUM(gib) AS BIGINT) FROM reservations WHERE medium_id = m.id), 0) \
               + (m.snapshot_bytes + 1073741823) / 1073741824 AS reserved \
             FROM media m WHERE m.id = $1",
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

/// The medium's state (`Ready`, `Draining` or `Failed`); NotFound for an
/// unknown medium.
async fn medium_state(conn: &mut Tx, id: &str) -> StoreResult<String> {
    scalar("SELECT state FROM media WHERE id = $1")
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(StoreError::NotFound)
}

/// The unfinished `media_drain` of the medium, if any.
async fn unfinished_drain(conn: &mut Tx, id: &str) -> StoreResult<Option<i64>> {
    Ok(scalar(
        "SELECT id FROM jobs WHERE type = $1 AND object = $2 \
         AND state IN ('Pending', 'Running') ORDER BY id LIMIT 1",
    )
    .bind(JobKind::MediaDrain.as_str())
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?)
}

/// The first column of each row, as text.
async fn names(conn: &mut Tx, sql: &str, key: &str) -> StoreResult<Vec<String>> {
    Ok(scalar(sql).bind(key).fetch_all(&mut *conn).await?)
}

/// Refuses to remove a node while something depends on it: the volumes
/// with slices on its media, the volumes attached to it, its media.
async fn ensure_node_removable(conn: &mut Tx, node: &str) -> StoreResult<()> {
    let slice_volumes = names(
        conn,
        "SELECT DISTINCT v.name FROM slices s JOIN media m ON m.id = s.medium_id \
         JOIN volumes v ON v.id = s.volume_id WHERE m.node = $1 ORDER BY v.name",
        node,
    )
    .await?;
    let attached = names(
        conn,
        "SELECT DISTINCT v.name FROM attachments a JOIN volumes v ON v.id = a.volume_id \
         WHERE a.node = $1 ORDER BY v.name",
        node,
    )
    .await?;
    let media = names(
        conn,
        "SELECT id FROM media WHERE node = $1 ORDER BY id",
        node,
    )
    .await?;
    check_node_removal(node, &slice_volumes, &attached, &media)
        .map_err(|e| StoreError::InUse(e.to_string()))
}

/// Removes a node and its agent credential.
async fn remove_node(conn: &mut Tx, node: &str) -> StoreResult<u64> {
    query("DELETE FROM node_agents WHERE node = $1")
        .bind(node)
        .execute(&mut *conn)
        .await?;
    let removed = query("DELETE FROM nodes WHERE name = $1")
        .bind(node)
        .execute(&mut *conn)
        .await?;
    Ok(removed.rows_affected())
}

#[async_trait]
impl MediaStore for SqlStore {
    async fn sync_media(&self, media: &[MediumRecord]) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let rows = query(
            "SELECT m.id, m.directory, m.node, m.zone, m.size_gib, m.managed_by, \
             COALESCE((SELECT CAST(SUM(size_gib) AS BIGINT) FROM slices WHERE medium_id = m.id), 0) \
             + COALESCE((SELECT CAST(SUM(gib) AS BIGINT) FROM reservations WHERE medium_id = m.id), 0) \
             AS held FROM media m",
        )
        .fetch_all(&mut tx)
        .await?;
        let mut stored = Vec::new();
        for row in &rows {
            let record = medium_record(row)?;
            // A storage node's medium is that node's: the file may not take
            // it over.
            if managed_by(row)? == ManagedBy::Node
                && media.iter().any(|m| m.medium.id == record.medium.id)
            {
                return Err(StoreError::Conflict(format!(
                    "medium '{}' is registered by storage node '{}'; give the configuration's \
                     medium another name",
                    record.medium.id, record.medium.node
                )));
            }
            // API-managed media are the configuration's business only when
            // it lists them (it then takes them over).
            let listed = media.iter().any(|m| m.medium.id == record.medium.id);
            if managed_by(row)? == ManagedBy::Config || listed {
                stored.push(StoredMedium {
                    record,
                    held: gib(row, "held")?,
                });
            }
        }
        for id in media_to_forget(&stored, media)? {
            query("DELETE FROM media WHERE id = $1")
                .bind(&id)
                .execute(&mut tx)
                .await?;
        }
        for m in media {
            query(
                "INSERT INTO media (id, node, zone, directory, size_gib, managed_by) \
                 VALUES ($1, $2, $3, $4, $5, 'config') \
                 ON CONFLICT(id) DO UPDATE SET node = excluded.node, zone = excluded.zone, \
                 directory = excluded.directory, size_gib = excluded.size_gib, \
                 managed_by = 'config'",
            )
            .bind(&m.medium.id)
            .bind(&m.medium.node)
            .bind(&m.medium.zone)
            .bind(&m.directory)
            .bind(to_i64(m.medium.size)?)
            .execute(&mut tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn media_usage(&self) -> StoreResult<Vec<MediumUsage>> {
        let rows = query(
            "SELECT m.id, m.node, m.zone, m.directory, m.size_gib, \
             COALESCE((SELECT CAST(SUM(size_gib) AS BIGINT) FROM slices WHERE medium_id = m.id), 0) AS allocated, \
             COALESCE((SELECT CAST(SUM(gib) AS BIGINT) FROM reservations WHERE medium_id = m.id), 0) AS reserved, \
             (SELECT COUNT(DISTINCT volume_id) FROM slices WHERE medium_id = m.id) AS volumes, \
             m.snapshot_bytes, m.state, m.managed_by \
             FROM media m ORDER BY m.id",
        )
        .fetch_all(self.writer())
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
                    draining: row.try_get::<String, _>("state")? == "Draining",
                    managed_by: managed_by(row)?,
                })
            })
            .collect()
    }

    async fn node_volume_counts(&self) -> StoreResult<HashMap<String, u64>> {
        let rows = query(
            "SELECT m.node, COUNT(DISTINCT s.volume_id) AS volumes FROM slices s \
             JOIN media m ON m.id = s.medium_id GROUP BY m.node",
        )
        .fetch_all(self.reader())
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("node")?, gib(row, "volumes")?)))
            .collect()
    }

    async fn sync_nodes(&self, nodes: &[NodeRecord]) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        for n in nodes {
            query(
                "INSERT INTO nodes (name, zone, address, managed_by) VALUES ($1, $2, $3, 'config') \
                 ON CONFLICT(name) DO UPDATE SET zone = excluded.zone, \
                 address = COALESCE(excluded.address, nodes.address), managed_by = 'config'",
            )
            .bind(&n.name)
            .bind(&n.zone)
            .bind(&n.address)
            .execute(&mut tx)
            .await?;
        }
        let configured: Vec<String> =
            scalar("SELECT name FROM nodes WHERE managed_by = 'config' ORDER BY name")
                .fetch_all(&mut tx)
                .await?;
        let mut problems = Vec::new();
        for name in configured {
            if nodes.iter().any(|n| n.name == name) {
                continue;
            }
            match ensure_node_removable(&mut tx, &name).await {
                Ok(()) => {
                    remove_node(&mut tx, &name).await?;
                }
                Err(StoreError::InUse(why)) => problems.push(format!(
                    "node '{name}' is no longer in the configuration file, but {why}"
                )),
                Err(e) => return Err(e),
            }
        }
        if !problems.is_empty() {
            return Err(StoreError::InUse(problems.join("; ")));
        }
        tx.commit().await?;
        Ok(())
    }

    async fn list_nodes(&self) -> StoreResult<Vec<NodeRecord>> {
        let rows = query("SELECT name, zone, address, managed_by FROM nodes ORDER BY name")
            .fetch_all(self.reader())
            .await?;
        rows.iter()
            .map(|r| {
                Ok(NodeRecord {
                    name: r.try_get("name")?,
                    zone: r.try_get("zone")?,
                    address: r.try_get("address")?,
                    managed_by: managed_by(r)?,
                })
            })
            .collect()
    }

    async fn set_medium_failed(&self, id: &str, now_ms: i64) -> StoreResult<bool> {
        let mut tx = self.begin_write().await?;
        let current = query("SELECT state, managed_by FROM media WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut tx)
            .await?
            .ok_or(StoreError::NotFound)?;
        if current.try_get::<String, _>("state")? == "Failed" {
            return Ok(false);
        }
        query("UPDATE media SET state = 'Failed' WHERE id = $1")
            .bind(id)
            .execute(&mut tx)
            .await?;
        if current.try_get::<String, _>("managed_by")? == "node" {
            lose_slices_on(&mut tx, id, now_ms).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn create_node(&self, node: &NodeRecord) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let inserted =
            query("INSERT INTO nodes (name, zone, address, managed_by) VALUES ($1, $2, $3, 'api')")
                .bind(&node.name)
                .bind(&node.zone)
                .bind(&node.address)
                .execute(&mut tx)
                .await;
        conflict_on_unique(inserted, || format!("node '{}' already exists", node.name))?;
        tx.commit().await?;
        Ok(())
    }

    async fn set_node_address(&self, name: &str, address: Option<&str>) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let r = query("UPDATE nodes SET address = $1 WHERE name = $2")
            .bind(address)
            .bind(name)
            .execute(&mut tx)
            .await?;
        if r.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        tx.commit().await?;
        Ok(())
    }

    async fn create_medium(&self, m: &MediumRecord) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let id = &m.medium.id;
        let exists: Option<String> = scalar("SELECT id FROM media WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut tx)
            .await?;
        if exists.is_some() {
            return Err(StoreError::Conflict(format!(
                "medium '{id}' already exists"
            )));
        }
        let sharing: Option<String> = scalar("SELECT id FROM media WHERE directory = $1")
            .bind(&m.directory)
            .fetch_optional(&mut tx)
            .await?;
        if let Some(other) = sharing {
            return Err(StoreError::Conflict(format!(
                "medium '{other}' already uses directory {}; each medium needs its own",
                m.directory
            )));
        }
        let node_zone: Option<String> = scalar("SELECT zone FROM nodes WHERE name = $1")
            .bind(&m.medium.node)
            .fetch_optional(&mut tx)
            .await?;
        match node_zone.as_deref() {
            None => {
                query(
                    "INSERT INTO nodes (name, zone, address, managed_by) VALUES ($1, $2, NULL, 'api')",
                )
                .bind(&m.medium.node)
                .bind(&m.medium.zone)
                .execute(&mut tx)
                .await?;
            }
            // A node added without a zone learns it from its first medium.
            Some("") => {
                query("UPDATE nodes SET zone = $1 WHERE name = $2")
                    .bind(&m.medium.zone)
                    .bind(&m.medium.node)
                    .execute(&mut tx)
                    .await?;
            }
            Some(zone) if zone == m.medium.zone => {}
            Some(zone) => {
                return Err(StoreError::Conflict(format!(
                    "node '{}' is in zone '{zone}', not '{}'",
                    m.medium.node, m.medium.zone
                )))
            }
        }
        query(
            "INSERT INTO media (id, node, zone, directory, size_gib, managed_by) \
             VALUES ($1, $2, $3, $4, $5, 'api')",
        )
        .bind(id)
        .bind(&m.medium.node)
        .bind(&m.medium.zone)
        .bind(&m.directory)
        .bind(to_i64(m.medium.size)?)
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn set_medium_size(&self, id: &str, size: Gib) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let space = media_space(&mut tx, [id]).await?;
        let Some(space) = space.first() else {
            return Err(StoreError::NotFound);
        };
        check_medium_resize(id, size, space.allocated + space.reserved)
            .map_err(|e| StoreError::InUse(e.to_string()))?;
        query("UPDATE media SET size_gib = $1 WHERE id = $2")
            .bind(to_i64(size)?)
            .bind(id)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn delete_medium(&self, id: &str) -> StoreResult<MediumRecord> {
        let mut tx = self.begin_write().await?;
        let row = query("SELECT id, node, zone, directory, size_gib FROM media WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut tx)
            .await?
            .ok_or(StoreError::NotFound)?;
        let record = medium_record(&row)?;
        let volumes = names(
            &mut tx,
            "SELECT DISTINCT v.name FROM slices s JOIN volumes v ON v.id = s.volume_id \
             WHERE s.medium_id = $1 ORDER BY v.name",
            id,
        )
        .await?;
        let jobs: Vec<i64> =
            scalar("SELECT DISTINCT job_id FROM reservations WHERE medium_id = $1 ORDER BY job_id")
                .bind(id)
                .fetch_all(&mut tx)
                .await?;
        check_medium_removal(id, &volumes, &jobs).map_err(|e| StoreError::InUse(e.to_string()))?;
        query("DELETE FROM media WHERE id = $1")
            .bind(id)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(record)
    }

    async fn delete_node(&self, name: &str) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let exists: Option<String> = scalar("SELECT name FROM nodes WHERE name = $1")
            .bind(name)
            .fetch_optional(&mut tx)
            .await?;
        if exists.is_none() {
            return Err(StoreError::NotFound);
        }
        ensure_node_removable(&mut tx, name).await?;
        remove_node(&mut tx, name).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn drain_medium(&self, id: &str, job: &NewJob) -> StoreResult<(i64, bool)> {
        let mut tx = self.begin_write().await?;
        if medium_state(&mut tx, id).await? == "Failed" {
            return Err(StoreError::Conflict(format!(
                "medium '{id}' has failed; it holds nothing to drain"
            )));
        }
        if let Some(running) = unfinished_drain(&mut tx, id).await? {
            return Ok((running, false));
        }
        query("UPDATE media SET state = 'Draining' WHERE id = $1")
            .bind(id)
            .execute(&mut tx)
            .await?;
        let job_id = insert_job(&mut tx, job).await?;
        tx.commit().await?;
        Ok((job_id, true))
    }

    async fn undrain_medium(&self, id: &str) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        if medium_state(&mut tx, id).await? == "Failed" {
            return Err(StoreError::Conflict(format!("medium '{id}' has failed")));
        }
        if let Some(n) = unfinished_drain(&mut tx, id).await? {
            return Err(StoreError::Conflict(format!(
                "medium '{id}' is being drained by job {n}; cancel it first with DELETE /jobs/{n}"
            )));
        }
        query("UPDATE media SET state = 'Ready' WHERE id = $1")
            .bind(id)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
