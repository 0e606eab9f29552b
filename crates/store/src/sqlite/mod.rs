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
mod keys;
mod leases;
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
use crate::sql::conflict_on_unique;
use crate::{StoreLifecycle, StoreResult};
use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
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

    /// The read pool, for a copy of the whole database (`svs store migrate`).
    pub(crate) fn reader(&self) -> &SqlitePool {
        &self.reader
    }

    /// A write transaction holding the database's write lock from its start
    /// (see the module doc).
    async fn begin_write(&self) -> StoreResult<Transaction<'static, Sqlite>> {
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        // A job's writes stop once its lease is taken over (`crate::fence`).
        SqliteStore::check_fence(&mut tx).await?;
        Ok(tx)
    }
}

#[async_trait]
impl StoreLifecycle for SqliteStore {
    async fn close(&self) {
        self.reader.close().await;
        self.writer.close().await;
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.reader).await?;
        Ok(())
    }
}
