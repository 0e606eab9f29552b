//! The embedded store: one SQLite file in the data directory.
//!
//! WAL journal with `synchronous = FULL`, so a committed change survives a
//! crash or power loss. All writes go through a single connection, reads
//! through a small pool that runs beside it. Write transactions start with
//! `BEGIN IMMEDIATE`: they take the database's write lock before reading, so
//! what a transaction checks (free space, say) cannot change before it
//! commits, even when another process (`svs user add`) writes to the same
//! file, and no transaction fails upgrading a read lock.
//!
//! One file per kind of object implements that object's trait; this one
//! opens the database, converts sqlx errors into [`StoreError`] and holds
//! the row helpers they share. The store keeps no cache: wrap it in
//! [`crate::CachedStore`] for that.

mod agents;
mod attachments;
mod backup;
mod fronts;
mod jobs;
mod lost;
mod media;
mod policies;
mod snapshots;
mod storage_nodes;
mod users;
mod volumes;

use crate::{StoreError, StoreLifecycle, StoreResult};
use async_trait::async_trait;
use serde_json::{Map, Value};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteQueryResult,
    SqliteRow, SqliteSynchronous,
};
use sqlx::{Row, Sqlite, Transaction};
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;
use svs_domain::{Gib, Resiliency};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

#[derive(Debug, Clone)]
pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
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
        Ok(SqliteStore { writer, reader })
    }

    /// A write transaction holding the database's write lock from its start
    /// (see the module doc).
    async fn begin_write(&self) -> StoreResult<Transaction<'static, Sqlite>> {
        Ok(self.writer.begin_with("BEGIN IMMEDIATE").await?)
    }
}

#[async_trait]
impl StoreLifecycle for SqliteStore {
    async fn close(&self) {
        self.reader.close().await;
        self.writer.close().await;
    }
}

// ---- errors ----

/// SQLite's primary result codes for "another connection holds the lock".
const SQLITE_BUSY: i32 = 5;
const SQLITE_LOCKED: i32 = 6;

// The conversion lives here, with the SQLite codes it knows; a second
// backend built on sqlx would classify its own codes in the same place.
impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> StoreError {
        StoreError::backend(is_transient(&e), e)
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(e: sqlx::migrate::MigrateError) -> StoreError {
        StoreError::Migrate(e.to_string())
    }
}

/// Whether the same call may succeed later: the database was busy or locked
/// (past the busy timeout), no pooled connection came free in time, or I/O
/// failed.
fn is_transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) => true,
        sqlx::Error::Database(db) => db
            .code()
            .and_then(|code| code.parse::<i32>().ok())
            // Extended result codes keep the primary code in the low byte.
            .is_some_and(|code| matches!(code & 0xff, SQLITE_BUSY | SQLITE_LOCKED)),
        _ => false,
    }
}

fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// A write's result, with a unique-constraint violation as
/// Conflict(`conflict()`).
fn conflict_on_unique(
    result: Result<SqliteQueryResult, sqlx::Error>,
    conflict: impl FnOnce() -> String,
) -> StoreResult<SqliteQueryResult> {
    match result {
        Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict(conflict())),
        other => Ok(other?),
    }
}

// ---- row helpers ----

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

/// The volume's current job (id, progress, status) from the joined columns
/// `job_id`, `job_progress` and `job_status`.
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
