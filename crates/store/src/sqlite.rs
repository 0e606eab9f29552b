//! The embedded store: one SQLite file in the data directory.
//!
//! WAL journal with `synchronous = FULL`, so a committed change survives a
//! crash or power loss. All writes go through a single connection (SQLite has
//! one writer anyway; one connection means no lock upgrades that fail with
//! SQLITE_BUSY), reads through a small pool that runs beside it.
//!
//! Volume reads (the hottest call of the API) are served from memory. That is
//! only sound because one process owns the database: `svs serve` holds the
//! data directory's lock, and every change to volumes, slices, jobs and
//! policies goes through this struct, which drops the cache after committing
//! (refresh tokens, which no volume read shows, do not).

use crate::records::*;
use crate::{JobEnd, Store, StoreError, StoreResult};
use async_trait::async_trait;
use serde_json::{Map, Value};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{Row, Sqlite, Transaction};
use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use svs_domain::{
    Gib, JobState, Medium, Resiliency, ResizePlan, Slice, SlicePlacement, VolumeState, VolumeType,
};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

#[derive(Debug, Clone)]
pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
    volumes: Arc<VolumeCache>,
}

/// `get_volume` results by (tenant, name or id). A read that raced a write
/// must not store what it read: entries are only added while the generation
/// is the one seen before the query.
#[derive(Debug, Default)]
struct VolumeCache {
    generation: AtomicU64,
    entries: RwLock<HashMap<(i64, String), Volume>>,
}

/// Bound on cached volumes; the cache is emptied when it is full.
const VOLUME_CACHE_MAX: usize = 100_000;

impl VolumeCache {
    fn get(&self, key: &(i64, String)) -> Option<Volume> {
        self.entries.read().ok()?.get(key).cloned()
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn insert(&self, seen: u64, key: (i64, String), volume: &Volume) {
        if let Ok(mut entries) = self.entries.write() {
            // Checked under the lock: `invalidate` bumps it under the same lock.
            if self.generation.load(Ordering::Acquire) != seen {
                return;
            }
            if entries.len() >= VOLUME_CACHE_MAX {
                entries.clear();
            }
            entries.insert(key, volume.clone());
        }
    }

    /// Called after every committed change that a volume read can see.
    fn invalidate(&self) {
        if let Ok(mut entries) = self.entries.write() {
            self.generation.fetch_add(1, Ordering::AcqRel);
            entries.clear();
        }
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database file and applies migrations.
    pub async fn open(path: &Path) -> StoreResult<SqliteStore> {
        let options = SqliteConnectOptions::from_str("sqlite://")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .connect_with(options.clone())
            .await?;
        MIGRATOR.run(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(4)
            .min_connections(1)
            .connect_with(options.read_only(true))
            .await?;
        Ok(SqliteStore {
            writer,
            reader,
            volumes: Arc::default(),
        })
    }

    /// Commits, then drops cached volume reads (see the module doc).
    async fn commit(&self, tx: Transaction<'_, Sqlite>) -> StoreResult<()> {
        tx.commit().await?;
        self.volumes.invalidate();
        Ok(())
    }

    pub async fn close(&self) {
        self.reader.close().await;
        self.writer.close().await;
    }
}

fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

fn json_map(text: &str) -> StoreResult<Map<String, Value>> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(StoreError::Corrupt(format!(
            "expected a JSON object, got {text:?}"
        ))),
    }
}

fn gib(row: &SqliteRow, col: &str) -> StoreResult<Gib> {
    let v: i64 = row.try_get(col)?;
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("negative {col}: {v}")))
}

fn to_i64(v: Gib) -> StoreResult<i64> {
    i64::try_from(v).map_err(|_| StoreError::Corrupt(format!("size out of range: {v}")))
}

fn small(row: &SqliteRow, col: &str) -> StoreResult<u8> {
    let v: i64 = row.try_get(col)?;
    u8::try_from(v).map_err(|_| StoreError::Corrupt(format!("{col} out of range: {v}")))
}

fn resiliency(row: &SqliteRow) -> StoreResult<Resiliency> {
    Ok(Resiliency {
        media: small(row, "resiliency_media")?,
        node: small(row, "resiliency_node")?,
        zone: small(row, "resiliency_zone")?,
    })
}

fn user_row(row: &SqliteRow) -> StoreResult<User> {
    Ok(User {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        tenant: row.try_get("tenant")?,
        email: row.try_get("email")?,
        name: row.try_get("name")?,
        password_hash: row.try_get("password_hash")?,
        is_admin: row.try_get::<i64, _>("is_admin")? != 0,
    })
}

fn policy_row(row: &SqliteRow) -> StoreResult<Policy> {
    Ok(Policy {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        resiliency: resiliency(row)?,
        attributes: json_map(row.try_get("attributes")?)?,
        created_ms: row.try_get("created_ms")?,
        created_by_name: row.try_get("created_by_name")?,
        created_by_email: row.try_get("created_by_email")?,
        updated_ms: row.try_get("updated_ms")?,
        updated_by_name: row.try_get("updated_by_name")?,
        updated_by_email: row.try_get("updated_by_email")?,
    })
}

const VOLUME_SELECT: &str = "SELECT v.id, v.tenant_id, v.name, v.type, v.size_gib, v.zone, \
    v.attributes, v.state, v.job_id, v.created_ms, p.name AS policy_name, \
    p.resiliency_media, p.resiliency_node, p.resiliency_zone, \
    j.progress AS job_progress, j.status AS job_status, \
    (SELECT m.node FROM slices s JOIN media m ON m.id = s.medium_id \
        WHERE s.volume_id = v.id ORDER BY s.copy, s.col LIMIT 1) AS first_node, \
    (SELECT m.zone FROM slices s JOIN media m ON m.id = s.medium_id \
        WHERE s.volume_id = v.id ORDER BY s.copy, s.col LIMIT 1) AS first_zone \
    FROM volumes v JOIN policies p ON p.id = v.policy_id \
    LEFT JOIN jobs j ON j.id = v.job_id";

/// The volume's current job (id, progress, status) from the joined columns.
fn active_job(row: &SqliteRow) -> StoreResult<Option<(i64, u8, String)>> {
    let Some(id) = row.try_get::<Option<i64>, _>("job_id")? else {
        return Ok(None);
    };
    let progress: Option<i64> = row.try_get("job_progress")?;
    let status: Option<String> = row.try_get("job_status")?;
    Ok(Some((
        id,
        u8::try_from(progress.unwrap_or(0).clamp(0, 100)).unwrap_or(0),
        status.unwrap_or_default(),
    )))
}

fn volume_row(row: &SqliteRow) -> StoreResult<Volume> {
    let kind: String = row.try_get("type")?;
    let state: String = row.try_get("state")?;
    let job = active_job(row)?;
    Ok(Volume {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        name: row.try_get("name")?,
        kind: VolumeType::parse(&kind)
            .ok_or_else(|| StoreError::Corrupt(format!("volume type {kind:?}")))?,
        size: gib(row, "size_gib")?,
        policy: row.try_get("policy_name")?,
        resiliency: resiliency(row)?,
        zone: row.try_get("zone")?,
        attributes: json_map(row.try_get("attributes")?)?,
        state: VolumeState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("volume state {state:?}")))?,
        job,
        first_node: row.try_get("first_node")?,
        first_zone: row.try_get("first_zone")?,
        created_ms: row.try_get("created_ms")?,
    })
}

fn slice_row(row: &SqliteRow) -> StoreResult<SliceRow> {
    Ok(SliceRow {
        slice: Slice {
            id: row.try_get("id")?,
            copy: u32::try_from(row.try_get::<i64, _>("copy")?)
                .map_err(|_| StoreError::Corrupt("slice copy".into()))?,
            column: u32::try_from(row.try_get::<i64, _>("col")?)
                .map_err(|_| StoreError::Corrupt("slice column".into()))?,
            medium: row.try_get("medium_id")?,
            size: gib(row, "size_gib")?,
        },
        node: row.try_get("node")?,
        zone: row.try_get("zone")?,
    })
}

fn job_row(row: &SqliteRow) -> StoreResult<Job> {
    let state: String = row.try_get("state")?;
    let args: String = row.try_get("args")?;
    let details: String = row.try_get("details")?;
    Ok(Job {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        kind: row.try_get("type")?,
        object: row.try_get("object")?,
        args: serde_json::from_str(&args)
            .map_err(|e| StoreError::Corrupt(format!("job args: {e}")))?,
        state: JobState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("job state {state:?}")))?,
        status: row.try_get("status")?,
        progress: small(row, "progress")?,
        starttime_ms: row.try_get("starttime_ms")?,
        endtime_ms: row.try_get("endtime_ms")?,
        user_id: row.try_get("user_id")?,
        username: row.try_get("username")?,
        useremail: row.try_get("useremail")?,
        details: serde_json::from_str(&details)
            .map_err(|e| StoreError::Corrupt(format!("job details: {e}")))?,
        data_movement: row.try_get::<i64, _>("data_movement")? != 0,
        created_ms: row.try_get("created_ms")?,
    })
}

fn step_row(row: &SqliteRow) -> StoreResult<ResizeStep> {
    let state: String = row.try_get("state")?;
    Ok(ResizeStep {
        id: row.try_get("id")?,
        job_id: row.try_get("job_id")?,
        slice_id: row.try_get("slice_id")?,
        from_medium: row.try_get("from_medium")?,
        to_medium: row.try_get("to_medium")?,
        old_size: gib(row, "old_size")?,
        new_size: gib(row, "new_size")?,
        state: StepState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("step state {state:?}")))?,
    })
}

const ATTACHMENT_SELECT: &str = "SELECT a.volume_id, v.name AS volume_name, a.node, a.tenant_id, \
    a.snapshot, a.readonly, a.mountpoint, a.export_name, a.state, a.created_ms, \
    v.job_id, j.progress AS job_progress, j.status AS job_status \
    FROM attachments a JOIN volumes v ON v.id = a.volume_id \
    LEFT JOIN jobs j ON j.id = v.job_id";

fn attachment_row(row: &SqliteRow) -> StoreResult<Attachment> {
    let job = active_job(row)?;
    Ok(Attachment {
        volume_id: row.try_get("volume_id")?,
        volume_name: row.try_get("volume_name")?,
        node: row.try_get("node")?,
        tenant_id: row.try_get("tenant_id")?,
        snapshot: row.try_get("snapshot")?,
        readonly: row.try_get::<i64, _>("readonly")? != 0,
        mountpoint: row.try_get("mountpoint")?,
        export_name: row.try_get("export_name")?,
        state: row.try_get("state")?,
        job,
        created_ms: row.try_get("created_ms")?,
    })
}

const USER_SELECT: &str = "SELECT u.id, u.tenant_id, t.name AS tenant, u.email, u.name, \
    u.password_hash, u.is_admin FROM users u JOIN tenants t ON t.id = u.tenant_id";

const JOB_COLUMNS: &str = "id, tenant_id, type, object, args, state, status, progress, \
    starttime_ms, endtime_ms, user_id, username, useremail, details, data_movement, created_ms";

async fn insert_job(tx: &mut Transaction<'_, Sqlite>, job: &NewJob) -> StoreResult<i64> {
    let id = sqlx::query(
        "INSERT INTO jobs (tenant_id, type, object, args, state, status, progress, user_id, \
         username, useremail, details, data_movement, created_ms) \
         VALUES (?, ?, ?, ?, 'Pending', 'Pending', 0, ?, ?, ?, '[]', ?, ?)",
    )
    .bind(job.tenant_id)
    .bind(job.spec.kind().as_str())
    .bind(&job.object)
    .bind(job.spec.args_json().to_string())
    .bind(job.user_id)
    .bind(&job.username)
    .bind(&job.useremail)
    .bind(i64::from(job.spec.is_data_movement()))
    .bind(job.now_ms)
    .execute(&mut **tx)
    .await?
    .last_insert_rowid();
    Ok(id)
}

/// Records `job` and makes it the volume's current job (setting the volume's
/// state when given), unless another job holds the volume: then Conflict and,
/// the transaction being dropped, nothing is recorded.
async fn claim_volume(
    tx: &mut Transaction<'_, Sqlite>,
    volume_id: &str,
    state: Option<VolumeState>,
    job: &NewJob,
) -> StoreResult<i64> {
    let job_id = insert_job(tx, job).await?;
    let r = sqlx::query(
        "UPDATE volumes SET job_id = ?, state = COALESCE(?, state) \
         WHERE id = ? AND job_id IS NULL",
    )
    .bind(job_id)
    .bind(state.map(|s| s.as_str()))
    .bind(volume_id)
    .execute(&mut **tx)
    .await?;
    if r.rows_affected() == 0 {
        return Err(StoreError::Conflict(
            "the volume is busy with another job or no longer exists".into(),
        ));
    }
    Ok(job_id)
}

async fn append_detail(tx: &mut Transaction<'_, Sqlite>, id: i64, detail: &str) -> StoreResult<()> {
    sqlx::query("UPDATE jobs SET details = json_insert(details, '$[#]', ?) WHERE id = ?")
        .bind(detail)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

async fn finish_job_tx(tx: &mut Transaction<'_, Sqlite>, id: i64, end: &JobEnd) -> StoreResult<()> {
    if let Some(detail) = &end.detail {
        append_detail(tx, id, detail).await?;
    }
    let done = end.state == JobState::Done;
    sqlx::query(
        "UPDATE jobs SET state = ?, status = ?, endtime_ms = ?, \
         starttime_ms = COALESCE(starttime_ms, ?), \
         progress = CASE WHEN ? THEN 100 ELSE progress END WHERE id = ?",
    )
    .bind(end.state.as_str())
    .bind(&end.status)
    .bind(end.now_ms)
    .bind(end.now_ms)
    .bind(done)
    .bind(id)
    .execute(&mut **tx)
    .await?;
    sqlx::query("DELETE FROM reservations WHERE job_id = ?")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    sqlx::query(
        "UPDATE volumes SET job_id = NULL, \
         state = CASE WHEN state = 'Resizing' OR (state = 'Creating' AND ?) \
         THEN 'Ready' ELSE state END WHERE job_id = ?",
    )
    .bind(done)
    .bind(id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[async_trait]
impl Store for SqliteStore {
    async fn user_count(&self) -> StoreResult<u64> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users")
            .fetch_one(&self.reader)
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn create_user(&self, user: &NewUser) -> StoreResult<User> {
        let mut tx = self.writer.begin().await?;
        sqlx::query("INSERT OR IGNORE INTO tenants (name, created_ms) VALUES (?, ?)")
            .bind(&user.tenant)
            .bind(user.now_ms)
            .execute(&mut *tx)
            .await?;
        let tenant_id: i64 = sqlx::query_scalar("SELECT id FROM tenants WHERE name = ?")
            .bind(&user.tenant)
            .fetch_one(&mut *tx)
            .await?;
        let inserted = sqlx::query(
            "INSERT INTO users (tenant_id, email, name, password_hash, is_admin, created_ms) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(tenant_id)
        .bind(&user.email)
        .bind(&user.name)
        .bind(&user.password_hash)
        .bind(i64::from(user.is_admin))
        .bind(user.now_ms)
        .execute(&mut *tx)
        .await;
        let id = match inserted {
            Ok(r) => r.last_insert_rowid(),
            Err(e) if is_unique_violation(&e) => {
                return Err(StoreError::Conflict(format!(
                    "a user with email {} already exists",
                    user.email
                )))
            }
            Err(e) => return Err(e.into()),
        };
        self.commit(tx).await?;
        Ok(User {
            id,
            tenant_id,
            tenant: user.tenant.clone(),
            email: user.email.clone(),
            name: user.name.clone(),
            password_hash: user.password_hash.clone(),
            is_admin: user.is_admin,
        })
    }

    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>> {
        let row = sqlx::query(&format!("{USER_SELECT} WHERE u.email = ?"))
            .bind(email)
            .fetch_optional(&self.reader)
            .await?;
        row.as_ref().map(user_row).transpose()
    }

    async fn user_by_id(&self, id: i64) -> StoreResult<Option<User>> {
        let row = sqlx::query(&format!("{USER_SELECT} WHERE u.id = ?"))
            .bind(id)
            .fetch_optional(&self.reader)
            .await?;
        row.as_ref().map(user_row).transpose()
    }

    async fn add_refresh_token(&self, token: &NewRefreshToken) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO refresh_tokens (user_id, token_hash, issued_ms, expires_ms) \
             VALUES (?, ?, ?, ?)",
        )
        .bind(token.user_id)
        .bind(&token.token_hash)
        .bind(token.issued_ms)
        .bind(token.expires_ms)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    async fn refresh_token(&self, token_hash: &str) -> StoreResult<Option<RefreshTokenRecord>> {
        // Read through the writer so a revocation just committed is always seen.
        let row = sqlx::query(
            "SELECT user_id, expires_ms, revoked FROM refresh_tokens WHERE token_hash = ?",
        )
        .bind(token_hash)
        .fetch_optional(&self.writer)
        .await?;
        row.map(|r| {
            Ok(RefreshTokenRecord {
                user_id: r.try_get("user_id")?,
                expires_ms: r.try_get("expires_ms")?,
                revoked: r.try_get::<i64, _>("revoked")? != 0,
            })
        })
        .transpose()
    }

    async fn revoke_refresh_tokens(&self, user_id: i64) -> StoreResult<u64> {
        let r =
            sqlx::query("UPDATE refresh_tokens SET revoked = 1 WHERE user_id = ? AND revoked = 0")
                .bind(user_id)
                .execute(&self.writer)
                .await?;
        Ok(r.rows_affected())
    }

    async fn sync_media(&self, media: &[MediumRecord]) -> StoreResult<()> {
        let mut tx = self.writer.begin().await?;
        let rows = sqlx::query(
            "SELECT m.id, m.directory, m.node, m.zone, \
             COALESCE((SELECT SUM(size_gib) FROM slices WHERE medium_id = m.id), 0) \
             + COALESCE((SELECT SUM(gib) FROM reservations WHERE medium_id = m.id), 0) \
             AS allocated FROM media m",
        )
        .fetch_all(&mut *tx)
        .await?;
        let mut problems = Vec::new();
        for row in &rows {
            let id: String = row.try_get("id")?;
            let allocated = gib(row, "allocated")?;
            let directory: String = row.try_get("directory")?;
            let node: String = row.try_get("node")?;
            let zone: String = row.try_get("zone")?;
            match media.iter().find(|m| m.medium.id == id) {
                Some(m) if allocated > 0 && (m.medium.node != node || m.medium.zone != zone) => {
                    problems.push(format!(
                        "medium '{id}' holds slices on node '{node}' in zone '{zone}' \
                         and cannot move to node '{}' in zone '{}'",
                        m.medium.node, m.medium.zone
                    ))
                }
                Some(m) if allocated > 0 && m.directory != directory => problems.push(format!(
                    "medium '{id}' holds slices in {directory} but is now configured at {}",
                    m.directory
                )),
                None if allocated > 0 => problems.push(format!(
                    "medium '{id}' holds {allocated} GiB of slices but is no longer configured"
                )),
                Some(m) if m.medium.size < allocated => problems.push(format!(
                    "medium '{id}' is configured with {} GiB but holds {allocated} GiB of slices",
                    m.medium.size
                )),
                None => {
                    sqlx::query("DELETE FROM media WHERE id = ?")
                        .bind(&id)
                        .execute(&mut *tx)
                        .await?;
                }
                Some(_) => {}
            }
        }
        if !problems.is_empty() {
            return Err(StoreError::InUse(problems.join("; ")));
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
        self.commit(tx).await?;
        Ok(())
    }

    async fn media_usage(&self) -> StoreResult<Vec<MediumUsage>> {
        let rows = sqlx::query(
            "SELECT m.id, m.node, m.zone, m.directory, m.size_gib, \
             COALESCE((SELECT SUM(size_gib) FROM slices WHERE medium_id = m.id), 0) AS allocated, \
             COALESCE((SELECT SUM(gib) FROM reservations WHERE medium_id = m.id), 0) AS reserved, \
             (SELECT COUNT(DISTINCT volume_id) FROM slices WHERE medium_id = m.id) AS volumes \
             FROM media m ORDER BY m.id",
        )
        .fetch_all(&self.writer)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(MediumUsage {
                    record: MediumRecord {
                        medium: Medium {
                            id: row.try_get("id")?,
                            node: row.try_get("node")?,
                            zone: row.try_get("zone")?,
                            size: gib(row, "size_gib")?,
                        },
                        directory: row.try_get("directory")?,
                    },
                    allocated: gib(row, "allocated")?,
                    reserved: gib(row, "reserved")?,
                    volumes_count: gib(row, "volumes")?,
                })
            })
            .collect()
    }

    async fn node_volume_counts(&self) -> StoreResult<std::collections::HashMap<String, u64>> {
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
        let mut tx = self.writer.begin().await?;
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
        self.commit(tx).await
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

    async fn create_attachment(&self, a: &NewAttachment, job: &NewJob) -> StoreResult<i64> {
        let mut tx = self.writer.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO attachments (volume_id, node, tenant_id, snapshot, readonly, mountpoint, \
             export_name, state, created_ms) VALUES (?, ?, ?, 'top', ?, ?, ?, 'Attaching', ?)",
        )
        .bind(&a.volume_id)
        .bind(&a.node)
        .bind(a.tenant_id)
        .bind(i64::from(a.readonly))
        .bind(&a.mountpoint)
        .bind(&a.export_name)
        .bind(a.now_ms)
        .execute(&mut *tx)
        .await;
        match inserted {
            Ok(_) => {}
            Err(e) if is_unique_violation(&e) => {
                return Err(StoreError::Conflict(format!(
                    "the volume is already attached to node '{}'",
                    a.node
                )))
            }
            Err(e) => return Err(e.into()),
        }
        let job_id = claim_volume(&mut tx, &a.volume_id, None, job).await?;
        self.commit(tx).await?;
        Ok(job_id)
    }

    async fn list_attachments(
        &self,
        tenant_id: i64,
        volume_id: Option<&str>,
    ) -> StoreResult<Vec<Attachment>> {
        let rows = sqlx::query(&format!(
            "{ATTACHMENT_SELECT} WHERE a.tenant_id = ? AND (? IS NULL OR a.volume_id = ?) \
             ORDER BY v.name, a.node"
        ))
        .bind(tenant_id)
        .bind(volume_id)
        .bind(volume_id)
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(attachment_row).collect()
    }

    async fn all_attachments(&self) -> StoreResult<Vec<Attachment>> {
        let rows = sqlx::query(&format!("{ATTACHMENT_SELECT} ORDER BY a.volume_id, a.node"))
            .fetch_all(&self.writer)
            .await?;
        rows.iter().map(attachment_row).collect()
    }

    async fn get_attachment(&self, volume_id: &str, node: &str) -> StoreResult<Option<Attachment>> {
        let row = sqlx::query(&format!(
            "{ATTACHMENT_SELECT} WHERE a.volume_id = ? AND a.node = ?"
        ))
        .bind(volume_id)
        .bind(node)
        .fetch_optional(&self.writer)
        .await?;
        row.as_ref().map(attachment_row).transpose()
    }

    async fn set_attachment_state(
        &self,
        volume_id: &str,
        node: &str,
        state: &str,
    ) -> StoreResult<()> {
        sqlx::query("UPDATE attachments SET state = ? WHERE volume_id = ? AND node = ?")
            .bind(state)
            .bind(volume_id)
            .bind(node)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn update_attachment(
        &self,
        volume_id: &str,
        node: &str,
        readonly: bool,
        mountpoint: &str,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE attachments SET readonly = ?, mountpoint = ? WHERE volume_id = ? AND node = ?",
        )
        .bind(i64::from(readonly))
        .bind(mountpoint)
        .bind(volume_id)
        .bind(node)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    async fn delete_attachment(&self, volume_id: &str, node: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM attachments WHERE volume_id = ? AND node = ?")
            .bind(volume_id)
            .bind(node)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn create_policy(&self, tenant_id: i64, p: &PolicyWrite) -> StoreResult<Policy> {
        let attributes = Value::Object(p.attributes.clone()).to_string();
        let inserted = sqlx::query(
            "INSERT INTO policies (tenant_id, name, resiliency_media, resiliency_node, \
             resiliency_zone, attributes, created_ms, created_by_name, created_by_email) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(tenant_id)
        .bind(&p.name)
        .bind(i64::from(p.resiliency.media))
        .bind(i64::from(p.resiliency.node))
        .bind(i64::from(p.resiliency.zone))
        .bind(attributes)
        .bind(p.now_ms)
        .bind(&p.by_name)
        .bind(&p.by_email)
        .execute(&self.writer)
        .await;
        match inserted {
            Ok(r) => Ok(Policy {
                id: r.last_insert_rowid(),
                name: p.name.clone(),
                resiliency: p.resiliency,
                attributes: p.attributes.clone(),
                created_ms: p.now_ms,
                created_by_name: p.by_name.clone(),
                created_by_email: p.by_email.clone(),
                updated_ms: None,
                updated_by_name: None,
                updated_by_email: None,
            }),
            Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict(format!(
                "a policy named '{}' already exists",
                p.name
            ))),
            Err(e) => Err(e.into()),
        }
    }

    async fn list_policies(&self, tenant_id: i64) -> StoreResult<Vec<Policy>> {
        let rows = sqlx::query("SELECT * FROM policies WHERE tenant_id = ? ORDER BY name")
            .bind(tenant_id)
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(policy_row).collect()
    }

    async fn get_policy(&self, tenant_id: i64, name: &str) -> StoreResult<Option<Policy>> {
        let row = sqlx::query("SELECT * FROM policies WHERE tenant_id = ? AND name = ?")
            .bind(tenant_id)
            .bind(name)
            .fetch_optional(&self.writer)
            .await?;
        row.as_ref().map(policy_row).transpose()
    }

    async fn update_policy(
        &self,
        tenant_id: i64,
        name: &str,
        p: &PolicyWrite,
    ) -> StoreResult<Policy> {
        let mut tx = self.writer.begin().await?;
        // Resiliency decides copies: it may not change under existing volumes.
        let current = sqlx::query(
            "SELECT p.resiliency_media, p.resiliency_node, p.resiliency_zone, \
             (SELECT COUNT(*) FROM volumes v WHERE v.policy_id = p.id) AS users \
             FROM policies p WHERE p.tenant_id = ? AND p.name = ?",
        )
        .bind(tenant_id)
        .bind(name)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(StoreError::NotFound)?;
        let users: i64 = current.try_get("users")?;
        if users > 0 && resiliency(&current)? != p.resiliency {
            return Err(StoreError::InUse(format!(
                "policy '{name}' is used by {users} volume(s); its resiliency cannot change"
            )));
        }
        let updated = sqlx::query(
            "UPDATE policies SET name = ?, resiliency_media = ?, resiliency_node = ?, \
             resiliency_zone = ?, attributes = ?, updated_ms = ?, updated_by_name = ?, \
             updated_by_email = ? WHERE tenant_id = ? AND name = ?",
        )
        .bind(&p.name)
        .bind(i64::from(p.resiliency.media))
        .bind(i64::from(p.resiliency.node))
        .bind(i64::from(p.resiliency.zone))
        .bind(Value::Object(p.attributes.clone()).to_string())
        .bind(p.now_ms)
        .bind(&p.by_name)
        .bind(&p.by_email)
        .bind(tenant_id)
        .bind(name)
        .execute(&mut *tx)
        .await;
        match updated {
            Ok(r) if r.rows_affected() == 0 => return Err(StoreError::NotFound),
            Ok(_) => {}
            Err(e) if is_unique_violation(&e) => {
                return Err(StoreError::Conflict(format!(
                    "a policy named '{}' already exists",
                    p.name
                )))
            }
            Err(e) => return Err(e.into()),
        }
        let row = sqlx::query("SELECT * FROM policies WHERE tenant_id = ? AND name = ?")
            .bind(tenant_id)
            .bind(&p.name)
            .fetch_one(&mut *tx)
            .await?;
        let policy = policy_row(&row)?;
        self.commit(tx).await?;
        Ok(policy)
    }

    async fn delete_policy(&self, tenant_id: i64, name: &str) -> StoreResult<()> {
        let mut tx = self.writer.begin().await?;
        let id: Option<i64> =
            sqlx::query_scalar("SELECT id FROM policies WHERE tenant_id = ? AND name = ?")
                .bind(tenant_id)
                .bind(name)
                .fetch_optional(&mut *tx)
                .await?;
        let id = id.ok_or(StoreError::NotFound)?;
        let users: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM volumes WHERE policy_id = ?")
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        if users > 0 {
            return Err(StoreError::InUse(format!(
                "policy '{name}' is used by {users} volume(s)"
            )));
        }
        sqlx::query("DELETE FROM policies WHERE id = ?")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        self.commit(tx).await?;
        Ok(())
    }

    async fn create_volume(&self, v: &NewVolume, job: &NewJob) -> StoreResult<i64> {
        let mut tx = self.writer.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO volumes (id, tenant_id, name, type, size_gib, policy_id, zone, \
             attributes, state, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'Creating', ?)",
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
        .execute(&mut *tx)
        .await;
        match inserted {
            Ok(_) => {}
            Err(e) if is_unique_violation(&e) => {
                return Err(StoreError::Conflict(format!(
                    "a volume named '{}' already exists",
                    v.name
                )))
            }
            Err(sqlx::Error::Database(db)) if db.is_foreign_key_violation() => {
                return Err(StoreError::Conflict(
                    "the volume's policy was deleted meanwhile".into(),
                ))
            }
            Err(e) => return Err(e.into()),
        }
        let job_id = claim_volume(&mut tx, &v.id, None, job).await?;
        self.commit(tx).await?;
        Ok(job_id)
    }

    async fn get_volume(&self, tenant_id: i64, name_or_id: &str) -> StoreResult<Option<Volume>> {
        let key = (tenant_id, name_or_id.to_string());
        if let Some(volume) = self.volumes.get(&key) {
            return Ok(Some(volume));
        }
        let seen = self.volumes.generation();
        let row = sqlx::query(&format!(
            "{VOLUME_SELECT} WHERE v.tenant_id = ? AND (v.name = ? OR v.id = ?) \
             ORDER BY (v.name = ?) DESC LIMIT 1"
        ))
        .bind(tenant_id)
        .bind(name_or_id)
        .bind(name_or_id)
        .bind(name_or_id)
        .fetch_optional(&self.reader)
        .await?;
        let volume = row.as_ref().map(volume_row).transpose()?;
        if let Some(v) = &volume {
            self.volumes.insert(seen, key, v);
        }
        Ok(volume)
    }

    async fn volume_by_id(&self, id: &str) -> StoreResult<Option<Volume>> {
        let row = sqlx::query(&format!("{VOLUME_SELECT} WHERE v.id = ?"))
            .bind(id)
            .fetch_optional(&self.writer)
            .await?;
        row.as_ref().map(volume_row).transpose()
    }

    async fn list_volumes(&self, tenant_id: i64) -> StoreResult<Vec<Volume>> {
        let rows = sqlx::query(&format!(
            "{VOLUME_SELECT} WHERE v.tenant_id = ? ORDER BY v.name"
        ))
        .bind(tenant_id)
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(volume_row).collect()
    }

    async fn volume_slices(&self, volume_id: &str) -> StoreResult<Vec<SliceRow>> {
        let rows = sqlx::query(
            "SELECT s.id, s.copy, s.col, s.medium_id, s.size_gib, m.node, m.zone \
             FROM slices s JOIN media m ON m.id = s.medium_id \
             WHERE s.volume_id = ? ORDER BY s.copy, s.col",
        )
        .bind(volume_id)
        .fetch_all(&self.writer)
        .await?;
        rows.iter().map(slice_row).collect()
    }

    async fn start_volume_job(
        &self,
        volume_id: &str,
        state: VolumeState,
        job: &NewJob,
    ) -> StoreResult<i64> {
        let mut tx = self.writer.begin().await?;
        let job_id = claim_volume(&mut tx, volume_id, Some(state), job).await?;
        self.commit(tx).await?;
        Ok(job_id)
    }

    async fn place_slices(
        &self,
        volume_id: &str,
        placements: &[SlicePlacement],
    ) -> StoreResult<Vec<SliceRow>> {
        let mut tx = self.writer.begin().await?;
        let existing: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM slices WHERE volume_id = ?")
            .bind(volume_id)
            .fetch_one(&mut *tx)
            .await?;
        if existing == 0 {
            for p in placements {
                sqlx::query(
                    "INSERT INTO slices (volume_id, copy, col, medium_id, size_gib) \
                     VALUES (?, ?, ?, ?, ?)",
                )
                .bind(volume_id)
                .bind(i64::from(p.copy))
                .bind(i64::from(p.column))
                .bind(&p.medium)
                .bind(to_i64(p.size)?)
                .execute(&mut *tx)
                .await?;
            }
        }
        self.commit(tx).await?;
        self.volume_slices(volume_id).await
    }

    async fn delete_volume(&self, volume_id: &str) -> StoreResult<()> {
        let mut tx = self.writer.begin().await?;
        sqlx::query("DELETE FROM attachments WHERE volume_id = ?")
            .bind(volume_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM slices WHERE volume_id = ?")
            .bind(volume_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM volumes WHERE id = ?")
            .bind(volume_id)
            .execute(&mut *tx)
            .await?;
        self.commit(tx).await?;
        Ok(())
    }

    async fn get_job(&self, tenant_id: i64, id: i64) -> StoreResult<Option<Job>> {
        let row = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE tenant_id = ? AND id = ?"
        ))
        .bind(tenant_id)
        .bind(id)
        .fetch_optional(&self.reader)
        .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn list_jobs(&self, tenant_id: i64, f: &JobFilter) -> StoreResult<Vec<Job>> {
        let count = i64::from(f.count.max(1));
        let offset = i64::from(f.page.max(1) - 1) * count;
        let rows = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE tenant_id = ? \
             AND (? IS NULL OR type = ?) AND (? IS NULL OR object = ?) \
             AND (? IS NULL OR state = ?) ORDER BY id DESC LIMIT ? OFFSET ?"
        ))
        .bind(tenant_id)
        .bind(&f.kind)
        .bind(&f.kind)
        .bind(&f.object)
        .bind(&f.object)
        .bind(f.state.map(|s| s.as_str()))
        .bind(f.state.map(|s| s.as_str()))
        .bind(count)
        .bind(offset)
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(job_row).collect()
    }

    async fn job_by_id(&self, id: i64) -> StoreResult<Option<Job>> {
        let row = sqlx::query(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?"))
            .bind(id)
            .fetch_optional(&self.writer)
            .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn unfinished_jobs(&self) -> StoreResult<Vec<Job>> {
        let rows = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE state IN ('Pending', 'Running') ORDER BY id"
        ))
        .fetch_all(&self.writer)
        .await?;
        rows.iter().map(job_row).collect()
    }

    async fn active_volume_job(&self, volume_id: &str) -> StoreResult<Option<Job>> {
        let row = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE object = ? \
             AND state IN ('Pending', 'Running') ORDER BY id LIMIT 1"
        ))
        .bind(volume_id)
        .fetch_optional(&self.writer)
        .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn set_job_running(&self, id: i64, now_ms: i64) -> StoreResult<()> {
        sqlx::query(
            "UPDATE jobs SET state = 'Running', status = 'Running', \
             starttime_ms = COALESCE(starttime_ms, ?) WHERE id = ?",
        )
        .bind(now_ms)
        .bind(id)
        .execute(&self.writer)
        .await?;
        self.volumes.invalidate();
        Ok(())
    }

    async fn set_job_progress(&self, id: i64, progress: u8, status: &str) -> StoreResult<()> {
        sqlx::query("UPDATE jobs SET progress = ?, status = ? WHERE id = ?")
            .bind(i64::from(progress.min(100)))
            .bind(status)
            .bind(id)
            .execute(&self.writer)
            .await?;
        self.volumes.invalidate();
        Ok(())
    }

    async fn add_job_detail(&self, id: i64, detail: &str) -> StoreResult<()> {
        let mut tx = self.writer.begin().await?;
        append_detail(&mut tx, id, detail).await?;
        self.commit(tx).await?;
        Ok(())
    }

    async fn finish_job(&self, id: i64, end: &JobEnd) -> StoreResult<()> {
        let mut tx = self.writer.begin().await?;
        finish_job_tx(&mut tx, id, end).await?;
        self.commit(tx).await?;
        Ok(())
    }

    async fn save_resize_plan(
        &self,
        job_id: i64,
        plan: &ResizePlan,
        detail: Option<&str>,
    ) -> StoreResult<()> {
        let mut tx = self.writer.begin().await?;
        let existing: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM resize_steps WHERE job_id = ?")
                .bind(job_id)
                .fetch_one(&mut *tx)
                .await?;
        if existing > 0 {
            return Ok(());
        }
        if let Some(detail) = detail {
            append_detail(&mut tx, job_id, detail).await?;
        }
        for r in &plan.reservations {
            sqlx::query("INSERT INTO reservations (job_id, medium_id, gib) VALUES (?, ?, ?)")
                .bind(job_id)
                .bind(&r.medium)
                .bind(to_i64(r.gib)?)
                .execute(&mut *tx)
                .await?;
        }
        for g in &plan.growths {
            sqlx::query(
                "INSERT INTO resize_steps (job_id, slice_id, from_medium, to_medium, old_size, \
                 new_size, state) VALUES (?, ?, ?, NULL, ?, ?, 'planned')",
            )
            .bind(job_id)
            .bind(g.slice_id)
            .bind(&g.medium)
            .bind(to_i64(g.from)?)
            .bind(to_i64(g.to)?)
            .execute(&mut *tx)
            .await?;
        }
        for m in &plan.moves {
            sqlx::query(
                "INSERT INTO resize_steps (job_id, slice_id, from_medium, to_medium, old_size, \
                 new_size, state) VALUES (?, ?, ?, ?, ?, ?, 'planned')",
            )
            .bind(job_id)
            .bind(m.slice_id)
            .bind(&m.from_medium)
            .bind(&m.to_medium)
            .bind(to_i64(m.old_size)?)
            .bind(to_i64(m.new_size)?)
            .execute(&mut *tx)
            .await?;
        }
        self.commit(tx).await?;
        Ok(())
    }

    async fn resize_steps(&self, job_id: i64) -> StoreResult<Vec<ResizeStep>> {
        let rows = sqlx::query("SELECT * FROM resize_steps WHERE job_id = ? ORDER BY id")
            .bind(job_id)
            .fetch_all(&self.writer)
            .await?;
        rows.iter().map(step_row).collect()
    }

    async fn switch_slice(&self, step: &ResizeStep) -> StoreResult<()> {
        let target = step
            .to_medium
            .as_deref()
            .ok_or_else(|| StoreError::Corrupt(format!("step {} is not a move", step.id)))?;
        let mut tx = self.writer.begin().await?;
        let moved = sqlx::query("UPDATE slices SET medium_id = ? WHERE id = ? AND medium_id = ?")
            .bind(target)
            .bind(step.slice_id)
            .bind(&step.from_medium)
            .execute(&mut *tx)
            .await?;
        if moved.rows_affected() != 1 {
            return Err(StoreError::Corrupt(format!(
                "slice {} is not on medium '{}'",
                step.slice_id, step.from_medium
            )));
        }
        // The slice now occupies its old size on the target; keep only the
        // growth booked there.
        sqlx::query(
            "UPDATE reservations SET gib = MAX(gib - ?, 0) WHERE job_id = ? AND medium_id = ?",
        )
        .bind(to_i64(step.old_size)?)
        .bind(step.job_id)
        .bind(target)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE resize_steps SET state = 'switched' WHERE id = ?")
            .bind(step.id)
            .execute(&mut *tx)
            .await?;
        self.commit(tx).await?;
        Ok(())
    }

    async fn finish_step(&self, step_id: i64) -> StoreResult<()> {
        sqlx::query("UPDATE resize_steps SET state = 'done' WHERE id = ?")
            .bind(step_id)
            .execute(&self.writer)
            .await?;
        self.volumes.invalidate();
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
        let mut tx = self.writer.begin().await?;
        sqlx::query("UPDATE slices SET size_gib = ? WHERE volume_id = ?")
            .bind(to_i64(new_slice_size)?)
            .bind(volume_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE volumes SET size_gib = ? WHERE id = ?")
            .bind(to_i64(new_size)?)
            .bind(volume_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE resize_steps SET state = 'done' WHERE job_id = ?")
            .bind(job_id)
            .execute(&mut *tx)
            .await?;
        finish_job_tx(&mut tx, job_id, end).await?;
        self.commit(tx).await?;
        Ok(())
    }
}
