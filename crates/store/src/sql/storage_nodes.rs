//! Storage nodes: registrations and heartbeats, liveness, their copies.

use super::db::{query, scalar, Tx};
use super::lost::lose_slices_on;
use super::media::media_space;
use super::{gib, stale_generation, to_i64, SqlStore};
use crate::records::{
    NodeCopy, StorageNodeRecord, StorageNodeState, StorageRegistered, StorageRegistration,
};
use crate::sql::errors::node_directory;
use crate::sql::errors::owner;
use crate::{StorageNodeStore, StoreError, StoreResult};
use async_trait::async_trait;

/// Volumes (ids) with a lost copy on one of the node's media.
async fn volumes_with_lost_copies(conn: &mut Tx, node: &str) -> StoreResult<Vec<String>> {
    Ok(scalar(
        "SELECT DISTINCT s.volume_id FROM slices s JOIN media m ON m.id = s.medium_id \
         WHERE m.node = $1 AND m.managed_by = 'node' \
         AND (s.lost_ms IS NOT NULL OR m.state = 'Failed') ORDER BY s.volume_id",
    )
    .bind(node)
    .fetch_all(&mut *conn)
    .await?)
}

#[async_trait]
impl StorageNodeStore for SqlStore {
    async fn register_storage_node(
        &self,
        r: &StorageRegistration,
    ) -> StoreResult<StorageRegistered> {
        let mut tx = self.begin_write().await?;
        let node = query("SELECT zone, storage_state, slice_credential FROM nodes WHERE name = $1")
            .bind(&r.node)
            .fetch_optional(&mut tx)
            .await?
            .ok_or(StoreError::NotFound)?;
        let zone: String = node.try_get("zone")?;
        let was_offline = node
            .try_get::<Option<String>, _>("storage_state")?
            .as_deref()
            == Some("Offline");
        let kept_credential: Option<String> = node.try_get("slice_credential")?;
        // Every claim is checked before anything changes: the whole
        // registration is refused when one medium is not the node's.
        let mut refused = Vec::new();
        for m in &r.media {
            let row = query("SELECT node, managed_by FROM media WHERE id = $1")
                .bind(&m.id)
                .fetch_optional(&mut tx)
                .await?;
            if let Some(row) = row {
                let (owner_node, managed_by): (String, String) =
                    (row.try_get("node")?, row.try_get("managed_by")?);
                if managed_by != "node" || owner_node != r.node {
                    refused.push(format!(
                        "medium '{}' already exists, managed by {}",
                        m.id,
                        owner(&managed_by, &owner_node)
                    ));
                }
            }
        }
        if !refused.is_empty() {
            return Err(StoreError::Conflict(format!(
                "node '{}' cannot claim: {}",
                r.node,
                refused.join("; ")
            )));
        }
        let mut done = StorageRegistered::default();
        let stored = query(
            "SELECT id, state, node_dropped_ms FROM media WHERE node = $1 AND managed_by = 'node' \
             ORDER BY id",
        )
        .bind(&r.node)
        .fetch_all(&mut tx)
        .await?;
        for row in &stored {
            let id: String = row.try_get("id")?;
            let failed = row.try_get::<String, _>("state")? == "Failed";
            let dropped = row.try_get::<Option<i64>, _>("node_dropped_ms")?.is_some();
            if let Some(listed) = r.media.iter().find(|m| m.id == id) {
                // Never below what it holds: a node's report must not make
                // the store over-booked (the planner simply finds no room).
                let held = media_space(&mut tx, [id.as_str()])
                    .await?
                    .first()
                    .map_or(0, |s| s.allocated + s.reserved);
                query(
                    "UPDATE media SET size_gib = $1, zone = $2, directory = $3, \
                     node_dropped_ms = NULL WHERE id = $4",
                )
                .bind(to_i64(listed.size.max(held))?)
                .bind(&zone)
                .bind(node_directory(&r.node, &listed.directory))
                .bind(&id)
                .execute(&mut tx)
                .await?;
                if failed && (was_offline || dropped) {
                    // Whatever it held missed writes while it was away.
                    lose_slices_on(&mut tx, &id, r.now_ms).await?;
                    query("UPDATE media SET state = 'Ready' WHERE id = $1")
                        .bind(&id)
                        .execute(&mut tx)
                        .await?;
                    done.restored_media.push(id);
                }
                continue;
            }
            let holds: i64 = scalar(
                "SELECT (SELECT COUNT(*) FROM slices WHERE medium_id = $1) \
                 + (SELECT COUNT(*) FROM reservations WHERE medium_id = $1)",
            )
            .bind(&id)
            .fetch_one(&mut tx)
            .await?;
            if holds == 0 {
                query("DELETE FROM media WHERE id = $1")
                    .bind(&id)
                    .execute(&mut tx)
                    .await?;
                done.removed_media.push(id);
            } else if !dropped {
                lose_slices_on(&mut tx, &id, r.now_ms).await?;
                query("UPDATE media SET state = 'Failed', node_dropped_ms = $1 WHERE id = $2")
                    .bind(r.now_ms)
                    .bind(&id)
                    .execute(&mut tx)
                    .await?;
                done.failed_media.push(id);
            }
        }
        for m in &r.media {
            if stored
                .iter()
                .any(|row| row.try_get::<String, _>("id").is_ok_and(|id| id == m.id))
            {
                continue;
            }
            query(
                "INSERT INTO media (id, node, zone, directory, size_gib, managed_by) \
                 VALUES ($1, $2, $3, $4, $5, 'node')",
            )
            .bind(&m.id)
            .bind(&r.node)
            .bind(&zone)
            .bind(node_directory(&r.node, &m.directory))
            .bind(to_i64(m.size)?)
            .execute(&mut tx)
            .await?;
            done.added_media.push(m.id.clone());
        }
        let slice_credential = kept_credential.unwrap_or_else(|| r.new_slice_credential.clone());
        query(
            "UPDATE nodes SET role = 'storage', slice_address = $1, front_address = $2, \
             last_heartbeat_ms = $3, storage_state = 'Online', slice_credential = $4 WHERE name = $5",
        )
        .bind(&r.slice_address)
        .bind(&r.front_address)
        .bind(r.now_ms)
        .bind(&slice_credential)
        .bind(&r.node)
        .execute(&mut tx)
        .await?;
        if was_offline || !done.restored_media.is_empty() {
            done.volumes_to_recover = volumes_with_lost_copies(&mut tx, &r.node).await?;
        }
        tx.commit().await?;
        done.slice_credential = slice_credential;
        done.came_back = was_offline;
        Ok(done)
    }

    async fn storage_nodes(&self) -> StoreResult<Vec<StorageNodeRecord>> {
        let rows = query(
            "SELECT name, zone, slice_address, last_heartbeat_ms, storage_state, \
             slice_credential, front_address FROM nodes WHERE role = 'storage' ORDER BY name",
        )
        .fetch_all(self.writer())
        .await?;
        rows.iter()
            .map(|r| {
                let state: String = r.try_get("storage_state")?;
                Ok(StorageNodeRecord {
                    name: r.try_get("name")?,
                    zone: r.try_get("zone")?,
                    slice_address: r
                        .try_get::<Option<String>, _>("slice_address")?
                        .unwrap_or_default(),
                    last_heartbeat_ms: r
                        .try_get::<Option<i64>, _>("last_heartbeat_ms")?
                        .unwrap_or(0),
                    state: StorageNodeState::parse(&state)
                        .ok_or_else(|| StoreError::Corrupt(format!("storage state '{state}'")))?,
                    slice_credential: r.try_get("slice_credential")?,
                    front_address: r.try_get("front_address")?,
                })
            })
            .collect()
    }

    async fn mark_storage_node_offline(
        &self,
        node: &str,
        heard_before_ms: i64,
        now_ms: i64,
    ) -> StoreResult<Option<Vec<String>>> {
        let mut tx = self.begin_write().await?;
        let changed = query(
            "UPDATE nodes SET storage_state = 'Offline' WHERE name = $1 AND role = 'storage' \
             AND storage_state = 'Online' AND last_heartbeat_ms < $2",
        )
        .bind(node)
        .bind(heard_before_ms)
        .execute(&mut tx)
        .await?;
        if changed.rows_affected() == 0 {
            return Ok(None);
        }
        let media: Vec<String> =
            scalar("SELECT id FROM media WHERE node = $1 AND managed_by = 'node' ORDER BY id")
                .bind(node)
                .fetch_all(&mut tx)
                .await?;
        for id in &media {
            lose_slices_on(&mut tx, id, now_ms).await?;
            query("UPDATE media SET state = 'Failed' WHERE id = $1")
                .bind(id)
                .execute(&mut tx)
                .await?;
        }
        tx.commit().await?;
        Ok(Some(media))
    }

    async fn node_copies(&self, node: &str) -> StoreResult<Vec<NodeCopy>> {
        let rows = query(
            "SELECT s.volume_id, v.name AS volume_name, v.tenant_id, s.copy, s.col, \
             s.medium_id, s.size_gib, (m.state = 'Failed' OR s.lost_ms IS NOT NULL) AS lost, \
             s.stale_generation \
             FROM slices s JOIN media m ON m.id = s.medium_id \
             JOIN volumes v ON v.id = s.volume_id WHERE m.node = $1 \
             ORDER BY v.name, s.copy, s.col",
        )
        .bind(node)
        .fetch_all(self.writer())
        .await?;
        let small = |r: &super::db::Row, col: &str| -> StoreResult<u32> {
            let v: i64 = r.try_get(col)?;
            u32::try_from(v).map_err(|_| StoreError::Corrupt(format!("{col} {v}")))
        };
        rows.iter()
            .map(|r| {
                Ok(NodeCopy {
                    volume_id: r.try_get("volume_id")?,
                    volume_name: r.try_get("volume_name")?,
                    tenant_id: r.try_get("tenant_id")?,
                    copy: small(r, "copy")?,
                    column: small(r, "col")?,
                    medium: r.try_get("medium_id")?,
                    size: gib(r, "size_gib")?,
                    lost: r.try_get::<bool, _>("lost")?,
                    stale_generation: stale_generation(r)?,
                })
            })
            .collect()
    }
}
