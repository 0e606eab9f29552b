//! Volumes, their slices, and resize plans and steps.

use super::db::{query, scalar, Tx};
use super::jobs::{append_detail, claim_volume, finish_job_tx};
use super::media::media_space;
use super::volume_cache::VolumeCache;
use super::{conflict_on_unique, gib, slice_row, step_row, to_i64, volume_row, SqlStore};
use crate::records::{
    CopyCheckpoint, JobEnd, NewJob, NewVolume, Page, PlacedVolume, ResizeStep, SliceRow, Volume,
};
use crate::rows::{holds_source, placed_volumes, SLICE_COLUMNS, STALE_GENERATION};
use crate::{StoreError, StoreResult, VolumeStore};
use async_trait::async_trait;
use serde_json::Value;
use svs_domain::{
    check_room, placement_bookings, reservation_after_switch, Gib, Reservation, ResizePlan,
    SliceMove, SlicePlacement, VolumeState,
};

/// One volume by name, else by id, in a tenant (binds: tenant, then the
/// name or id three times).
fn get_volume_sql() -> String {
    format!(
        "{VOLUME_SELECT} WHERE v.tenant_id = $1 AND (v.name = $2 OR v.id = $3) \
         ORDER BY (v.name = $4) DESC LIMIT 1"
    )
}

const VOLUME_SELECT: &str = "SELECT v.id, v.tenant_id, v.name, v.type, v.size_gib, v.zone, \
    v.attributes, v.state, v.job_id, v.created_ms, v.fs_size_gib, v.fs_error, \
    p.name AS policy_name, \
    p.resiliency_media, p.resiliency_node, p.resiliency_zone, \
    j.progress AS job_progress, j.status AS job_status, \
    (SELECT m.node FROM slices s JOIN media m ON m.id = s.medium_id \
        WHERE s.volume_id = v.id ORDER BY s.copy, s.col LIMIT 1) AS first_node, \
    (SELECT m.zone FROM slices s JOIN media m ON m.id = s.medium_id \
        WHERE s.volume_id = v.id ORDER BY s.copy, s.col LIMIT 1) AS first_zone, \
    (SELECT COUNT(*) FROM slices s JOIN media m ON m.id = s.medium_id \
        WHERE s.volume_id = v.id AND (m.state = 'Failed' OR s.lost_ms IS NOT NULL)) \
        AS lost_slices, \
    (SELECT COUNT(*) FROM (SELECT s.col FROM slices s JOIN media m ON m.id = s.medium_id \
        WHERE s.volume_id = v.id GROUP BY s.col \
        HAVING COUNT(*) FILTER (WHERE m.state <> 'Failed' AND s.lost_ms IS NULL) = 0) \
        AS lost_cols) AS lost_columns, \
    CASE WHEN j.type = 'volume_recovery' THEN j.id END AS recovery_job \
    FROM volumes v JOIN policies p ON p.id = v.policy_id \
    LEFT JOIN jobs j ON j.id = v.job_id";

/// Refuses `bookings` (InsufficientSpace) unless every medium they touch has
/// room for them, as stored now. Run inside the transaction that writes
/// them, which holds the database's write lock from its start (see the
/// module doc of `sql/mod.rs`), so the answer stays true until commit,
/// whichever process commits other bookings.
async fn ensure_room(conn: &mut Tx, bookings: &[Reservation]) -> StoreResult<()> {
    let space = media_space(conn, bookings.iter().map(|b| b.medium.as_str())).await?;
    check_room(&space, bookings)?;
    Ok(())
}

#[async_trait]
impl VolumeStore for SqlStore {
    async fn create_volume(&self, v: &NewVolume, job: &NewJob) -> StoreResult<i64> {
        let mut tx = self.begin_write().await?;
        let inserted = query(
            "INSERT INTO volumes (id, tenant_id, name, type, size_gib, policy_id, zone, \
             attributes, state, created_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'Creating', $9)",
        )
        .bind(&v.id)
        .bind(v.tenant_id)
        .bind(&v.name)
        .bind(v.kind.as_str())
        .bind(to_i64(v.size)?)
        .bind(v.policy_id)
        .bind(&v.zone)
        .bind(Value::Object(v.attributes.clone()).to_string())
        .bind(v.now_ms)
        .execute(&mut tx)
        .await;
        let inserted = match inserted {
            Err(sqlx::Error::Database(db)) if db.is_foreign_key_violation() => {
                return Err(StoreError::Conflict(
                    "the volume's policy was deleted meanwhile".into(),
                ))
            }
            other => other,
        };
        conflict_on_unique(inserted, || {
            format!("a volume named '{}' already exists", v.name)
        })?;
        let job_id = claim_volume(&mut tx, &v.id, None, job).await?;
        tx.commit().await?;
        Ok(job_id)
    }

    async fn get_volume(&self, tenant_id: i64, name_or_id: &str) -> StoreResult<Option<Volume>> {
        let cache = self.volumes.as_deref();
        if let Some(volume) = cache.and_then(|c| c.get(tenant_id, name_or_id)) {
            return Ok(Some(volume));
        }
        let seen = cache.map(VolumeCache::generation);
        let row = query(get_volume_sql())
            .bind(tenant_id)
            .bind(name_or_id)
            .bind(name_or_id)
            .bind(name_or_id)
            .fetch_optional(self.reader())
            .await?;
        let volume = row.as_ref().map(volume_row).transpose()?;
        if let (Some(cache), Some(seen), Some(v)) = (cache, seen, &volume) {
            cache.insert(seen, tenant_id, name_or_id, v);
        }
        Ok(volume)
    }

    async fn volume_by_id(&self, id: &str) -> StoreResult<Option<Volume>> {
        let row = query(format!("{VOLUME_SELECT} WHERE v.id = $1"))
            .bind(id)
            .fetch_optional(self.writer())
            .await?;
        row.as_ref().map(volume_row).transpose()
    }

    async fn list_volumes(&self, tenant_id: i64, page: Option<Page>) -> StoreResult<Vec<Volume>> {
        // No page: no limit (PostgreSQL refuses SQLite's LIMIT -1).
        let (limit, offset) = page.map_or((i64::MAX, 0), Page::limit_offset);
        let rows = query(format!(
            "{VOLUME_SELECT} WHERE v.tenant_id = $1 ORDER BY v.name LIMIT $2 OFFSET $3"
        ))
        .bind(tenant_id)
        .bind(limit)
        .bind(offset)
        .fetch_all(self.reader())
        .await?;
        rows.iter().map(volume_row).collect()
    }

    async fn all_volumes(&self) -> StoreResult<Vec<Volume>> {
        let rows = query(format!("{VOLUME_SELECT} ORDER BY v.tenant_id, v.name"))
            .fetch_all(self.reader())
            .await?;
        rows.iter().map(volume_row).collect()
    }

    async fn volume_slices(&self, volume_id: &str) -> StoreResult<Vec<SliceRow>> {
        let rows = query(format!(
            "SELECT {SLICE_COLUMNS} FROM slices s JOIN media m ON m.id = s.medium_id \
             WHERE s.volume_id = $1 ORDER BY s.copy, s.col"
        ))
        .bind(volume_id)
        .fetch_all(self.writer())
        .await?;
        rows.iter().map(slice_row).collect()
    }

    async fn placed_volumes_on(&self, media: &[String]) -> StoreResult<Vec<PlacedVolume>> {
        if media.is_empty() {
            return Ok(Vec::new());
        }
        // One query: the volumes and their slices read at one instant.
        let rows = query(format!(
            "SELECT {SLICE_COLUMNS}, s.volume_id, v.name AS volume_name, \
             v.zone AS volume_zone, p.resiliency_media, p.resiliency_node, p.resiliency_zone \
             FROM slices s JOIN media m ON m.id = s.medium_id \
             JOIN volumes v ON v.id = s.volume_id JOIN policies p ON p.id = v.policy_id \
             WHERE s.volume_id IN (SELECT o.volume_id FROM slices o WHERE {}) \
             ORDER BY s.volume_id, s.copy, s.col",
            self.dialect().in_list("o.medium_id", 1)
        ))
        .bind(media)
        .fetch_all(self.writer())
        .await?;
        placed_volumes(&rows)
    }

    async fn start_volume_job(
        &self,
        volume_id: &str,
        state: VolumeState,
        job: &NewJob,
    ) -> StoreResult<i64> {
        let mut tx = self.begin_write().await?;
        let job_id = claim_volume(&mut tx, volume_id, Some(state), job).await?;
        tx.commit().await?;
        Ok(job_id)
    }

    async fn place_slices(
        &self,
        volume_id: &str,
        placements: &[SlicePlacement],
    ) -> StoreResult<Vec<SliceRow>> {
        let mut tx = self.begin_write().await?;
        let existing: i64 = scalar("SELECT COUNT(*) FROM slices WHERE volume_id = $1")
            .bind(volume_id)
            .fetch_one(&mut tx)
            .await?;
        if existing == 0 {
            ensure_room(&mut tx, &placement_bookings(placements)).await?;
            for p in placements {
                query(
                    "INSERT INTO slices (volume_id, copy, col, medium_id, size_gib) \
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(volume_id)
                .bind(i64::from(p.copy))
                .bind(i64::from(p.column))
                .bind(&p.medium)
                .bind(to_i64(p.size)?)
                .execute(&mut tx)
                .await?;
            }
        }
        tx.commit().await?;
        self.volume_slices(volume_id).await
    }

    async fn set_volume_filesystem(
        &self,
        volume_id: &str,
        size: Option<Gib>,
        error: Option<&str>,
    ) -> StoreResult<()> {
        let fs_size = size.map(to_i64).transpose()?;
        let mut tx = self.begin_write().await?;
        let updated = query("UPDATE volumes SET fs_size_gib = $1, fs_error = $2 WHERE id = $3")
            .bind(fs_size)
            .bind(error)
            .bind(volume_id)
            .execute(&mut tx)
            .await?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        tx.commit().await?;
        Ok(())
    }

    async fn set_volume_attributes(
        &self,
        volume_id: &str,
        attributes: &serde_json::Map<String, Value>,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let updated = query("UPDATE volumes SET attributes = $1 WHERE id = $2")
            .bind(Value::Object(attributes.clone()).to_string())
            .bind(volume_id)
            .execute(&mut tx)
            .await?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        tx.commit().await?;
        Ok(())
    }

    async fn delete_volume(&self, volume_id: &str) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        query("DELETE FROM attachments WHERE volume_id = $1")
            .bind(volume_id)
            .execute(&mut tx)
            .await?;
        query("DELETE FROM snapshots WHERE volume_id = $1")
            .bind(volume_id)
            .execute(&mut tx)
            .await?;
        query("DELETE FROM slices WHERE volume_id = $1")
            .bind(volume_id)
            .execute(&mut tx)
            .await?;
        query("DELETE FROM volumes WHERE id = $1")
            .bind(volume_id)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn save_resize_plan(
        &self,
        job_id: i64,
        plan: &ResizePlan,
        detail: Option<&str>,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let existing: i64 = scalar("SELECT COUNT(*) FROM resize_steps WHERE job_id = $1")
            .bind(job_id)
            .fetch_one(&mut tx)
            .await?;
        if existing > 0 {
            return Ok(());
        }
        ensure_room(&mut tx, &plan.reservations).await?;
        if let Some(detail) = detail {
            append_detail(&mut tx, job_id, detail).await?;
        }
        for r in &plan.reservations {
            query("INSERT INTO reservations (job_id, medium_id, gib) VALUES ($1, $2, $3)")
                .bind(job_id)
                .bind(&r.medium)
                .bind(to_i64(r.gib)?)
                .execute(&mut tx)
                .await?;
        }
        for g in &plan.growths {
            query(
                "INSERT INTO resize_steps (job_id, slice_id, from_medium, to_medium, old_size, \
                 new_size, state) VALUES ($1, $2, $3, NULL, $4, $5, 'planned')",
            )
            .bind(job_id)
            .bind(g.slice_id)
            .bind(&g.medium)
            .bind(to_i64(g.from)?)
            .bind(to_i64(g.to)?)
            .execute(&mut tx)
            .await?;
        }
        for m in &plan.moves {
            insert_move_step(&mut tx, job_id, m, false).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn resize_steps(&self, job_id: i64) -> StoreResult<Vec<ResizeStep>> {
        let rows = query("SELECT * FROM resize_steps WHERE job_id = $1 ORDER BY id")
            .bind(job_id)
            .fetch_all(self.writer())
            .await?;
        rows.iter().map(step_row).collect()
    }

    async fn switch_slice(&self, step: &ResizeStep, details: &[String]) -> StoreResult<()> {
        let target = step
            .to_medium
            .as_deref()
            .ok_or_else(|| StoreError::Corrupt(format!("step {} is not a move", step.id)))?;
        let mut tx = self.begin_write().await?;
        let source_lost: Option<Option<i64>> = scalar("SELECT lost_ms FROM slices WHERE id = $1")
            .bind(step.slice_id)
            .fetch_optional(&mut tx)
            .await?;
        // The copy on the target is a fresh one, verified: not lost.
        let moved = query(
            "UPDATE slices SET medium_id = $1, lost_ms = NULL, stale_generation = NULL \
             WHERE id = $2 AND medium_id = $3",
        )
        .bind(target)
        .bind(step.slice_id)
        .bind(&step.from_medium)
        .execute(&mut tx)
        .await?;
        if moved.rows_affected() != 1 {
            return Err(StoreError::Corrupt(format!(
                "slice {} is not on medium '{}'",
                step.slice_id, step.from_medium
            )));
        }
        let booked = query("SELECT gib FROM reservations WHERE job_id = $1 AND medium_id = $2")
            .bind(step.job_id)
            .bind(target)
            .fetch_optional(&mut tx)
            .await?;
        if let Some(booked) = booked {
            let left = reservation_after_switch(gib(&booked, "gib")?, step.old_size);
            query("UPDATE reservations SET gib = $1 WHERE job_id = $2 AND medium_id = $3")
                .bind(to_i64(left)?)
                .bind(step.job_id)
                .bind(target)
                .execute(&mut tx)
                .await?;
        }
        if holds_source(step, source_lost.flatten()) {
            query(
                "INSERT INTO reservations (job_id, medium_id, gib) VALUES ($1, $2, $3) \
                 ON CONFLICT (job_id, medium_id) DO UPDATE SET gib = reservations.gib + excluded.gib",
            )
            .bind(step.job_id)
            .bind(&step.from_medium)
            .bind(to_i64(step.old_size)?)
            .execute(&mut tx)
            .await?;
        }
        query("UPDATE resize_steps SET state = 'switched' WHERE id = $1")
            .bind(step.id)
            .execute(&mut tx)
            .await?;
        for detail in details {
            append_detail(&mut tx, step.job_id, detail).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn record_step_failure(&self, step_id: i64, cause: &str) -> StoreResult<u32> {
        let mut tx = self.begin_write().await?;
        let failures: Option<i64> = scalar(
            "UPDATE resize_steps SET failure = $1, failures = failures + 1 WHERE id = $2 \
             RETURNING failures",
        )
        .bind(cause)
        .bind(step_id)
        .fetch_optional(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(failures.map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX)))
    }

    async fn save_undo_steps(&self, job_id: i64, moves: &[SliceMove]) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        // One writer at a time for this job's steps.
        query(format!(
            "SELECT id FROM jobs WHERE id = $1{}",
            self.dialect().for_update()
        ))
        .bind(job_id)
        .execute(&mut tx)
        .await?;
        let existing: i64 =
            scalar("SELECT COUNT(*) FROM resize_steps WHERE job_id = $1 AND undo = 1")
                .bind(job_id)
                .fetch_one(&mut tx)
                .await?;
        if existing > 0 {
            return Ok(());
        }
        for m in moves {
            insert_move_step(&mut tx, job_id, m, true).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn mark_slice_lost(
        &self,
        volume_id: &str,
        copy: u32,
        column: u32,
        medium: &str,
        now_ms: i64,
    ) -> StoreResult<bool> {
        let mut tx = self.begin_write().await?;
        let marked = query(format!(
            "UPDATE slices SET lost_ms = $1, stale_generation = {STALE_GENERATION} \
             WHERE volume_id = $2 AND copy = $3 AND col = $4 AND medium_id = $5 AND lost_ms IS NULL"
        ))
        .bind(now_ms)
        .bind(volume_id)
        .bind(i64::from(copy))
        .bind(i64::from(column))
        .bind(medium)
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(marked.rows_affected() == 1)
    }

    async fn next_front_epoch(&self, volume_id: &str) -> StoreResult<u64> {
        // One statement under the write lock: read and raise together.
        let mut tx = self.begin_write().await?;
        let epoch: Option<i64> = scalar(
            "UPDATE volumes SET front_epoch = front_epoch + 1 WHERE id = $1 RETURNING front_epoch",
        )
        .bind(volume_id)
        .fetch_optional(&mut tx)
        .await?;
        tx.commit().await?;
        let epoch = epoch.ok_or(StoreError::NotFound)?;
        u64::try_from(epoch).map_err(|_| StoreError::Corrupt(format!("front epoch {epoch}")))
    }

    async fn record_copy_checkpoint(
        &self,
        step_id: i64,
        checkpoint: Option<CopyCheckpoint>,
    ) -> StoreResult<()> {
        let (offset, live) = checkpoint.map_or((0, false), |c| (c.offset, c.live));
        let offset = i64::try_from(offset)
            .map_err(|_| StoreError::Corrupt(format!("copy checkpoint {offset}")))?;
        let mut tx = self.begin_write().await?;
        query(
            "UPDATE resize_steps SET copy_checkpoint = $1, copy_checkpoint_live = $2 \
             WHERE id = $3 AND state = 'planned'",
        )
        .bind(offset)
        .bind(i64::from(live))
        .bind(step_id)
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn finish_step(&self, step_id: i64) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        query("UPDATE resize_steps SET state = 'done' WHERE id = $1")
            .bind(step_id)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn record_resize(
        &self,
        job_id: i64,
        volume_id: &str,
        new_size: Gib,
        new_slice_size: Gib,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        record_resize_tx(&mut tx, job_id, volume_id, new_size, new_slice_size).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn complete_resize(
        &self,
        job_id: i64,
        volume_id: &str,
        new_size: Gib,
        new_slice_size: Gib,
        end: &JobEnd,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        record_resize_tx(&mut tx, job_id, volume_id, new_size, new_slice_size).await?;
        finish_job_tx(&mut tx, job_id, end).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// Records a planned move of a job's resize (a cancel's move back: `undo`).
async fn insert_move_step(
    conn: &mut Tx,
    job_id: i64,
    m: &SliceMove,
    undo: bool,
) -> StoreResult<()> {
    query(
        "INSERT INTO resize_steps (job_id, slice_id, from_medium, to_medium, old_size, \
         new_size, state, undo) VALUES ($1, $2, $3, $4, $5, $6, 'planned', $7)",
    )
    .bind(job_id)
    .bind(m.slice_id)
    .bind(&m.from_medium)
    .bind(&m.to_medium)
    .bind(to_i64(m.old_size)?)
    .bind(to_i64(m.new_size)?)
    .bind(i64::from(undo))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The volume and its slices take their new sizes; the job's steps are done.
async fn record_resize_tx(
    conn: &mut Tx,
    job_id: i64,
    volume_id: &str,
    new_size: Gib,
    new_slice_size: Gib,
) -> StoreResult<()> {
    query("UPDATE slices SET size_gib = $1 WHERE volume_id = $2")
        .bind(to_i64(new_slice_size)?)
        .bind(volume_id)
        .execute(&mut *conn)
        .await?;
    query("UPDATE volumes SET size_gib = $1 WHERE id = $2")
        .bind(to_i64(new_size)?)
        .bind(volume_id)
        .execute(&mut *conn)
        .await?;
    query("UPDATE resize_steps SET state = 'done' WHERE job_id = $1")
        .bind(job_id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A single-volume read costs the same with 3 or 3,000 volumes: each
    /// table it reads is searched through an index, never scanned.
    #[tokio::test]
    async fn a_single_volume_read_searches_indexes_and_scans_no_table() {
        let (_dir, store) = crate::testing::temp_sqlite().await;
        let reader = store.sqlite_reader().expect("a SQLite store");
        let plan: Vec<String> = sqlx::query(&format!("EXPLAIN QUERY PLAN {}", get_volume_sql()))
            .bind(1)
            .bind("v")
            .bind("v")
            .bind("v")
            .fetch_all(reader)
            .await
            .expect("plan")
            .iter()
            .map(|row| sqlx::Row::get::<String, _>(row, "detail"))
            .collect();
        assert!(!plan.is_empty());
        // "SCAN (subquery-N)" and "SCAN lost_cols" read the rows of one
        // volume's own subquery.
        let scans: Vec<&String> = plan
            .iter()
            .filter(|d| {
                d.starts_with("SCAN ") && !d.starts_with("SCAN (subquery") && *d != "SCAN lost_cols"
            })
            .collect();
        assert!(scans.is_empty(), "{plan:#?}");
    }
}
