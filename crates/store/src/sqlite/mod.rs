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

use crate::rows::{
    attachment_row, gib, job_row, managed_by, medium_record, node_attachment, policy_row,
    refresh_row, resiliency, slice_row, snapshot_row, stale_generation, step_row, to_i64, user_row,
    volume_row,
};
use crate::{StoreError, StoreLifecycle, StoreResult};
use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteQueryResult,
    SqliteSynchronous,
};
use sqlx::{Sqlite, Transaction};
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

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
