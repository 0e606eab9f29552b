//! The one SQL store, on SQLite (embedded, one process) or PostgreSQL
//! (several `svs serve` instances on one database).
//!
//! Every store operation is written once (one file per kind of object),
//! in the query layer of [`db`]: `$N` placeholders and the SQL both
//! databases speak. What really differs lives in [`dialect`] (how a write
//! transaction begins, row locks, id lists, JSON, how a database is opened,
//! copied and migrated), in `sqlite.rs` and in `postgres/`.
//!
//! Writes are serialized on both: SQLite by its one writer connection and
//! `BEGIN IMMEDIATE`, PostgreSQL by one transaction-scoped advisory lock
//! (see `postgres/mod.rs`). So every rule a write transaction checks before
//! it writes (a medium's free space, the last administrator, a refresh token
//! not yet rotated) holds until it commits. Reads take no lock.
//!
//! Records are read from rows by `rows.rs`; sqlx errors become
//! [`crate::StoreError`]s in `errors.rs`.

mod agents;
mod attachments;
pub(crate) mod db;
pub(crate) mod dialect;
pub(crate) mod errors;
mod fronts;
mod jobs;
mod keys;
mod leases;
mod lost;
mod media;
mod policies;
pub(crate) mod postgres;
mod snapshots;
mod sqlite;
mod storage_nodes;
mod users;
mod volume_cache;
mod volumes;

use crate::rows::{
    attachment_row, gib, job_row, managed_by, medium_record, node_attachment, policy_row,
    refresh_row, resiliency, slice_row, snapshot_row, stale_generation, step_row, to_i64, user_row,
    volume_row,
};
use crate::{StoreLifecycle, StoreResult};
use async_trait::async_trait;
use db::{query, Target, Tx};
use dialect::Dialect;
use errors::conflict_on_unique;
use sqlx::postgres::PgPool;
use sqlx::sqlite::SqlitePool;
use std::sync::Arc;
use volume_cache::VolumeCache;

/// The store on either database. Cheap to clone (pools are shared).
#[derive(Debug, Clone)]
pub struct SqlStore {
    db: Db,
    /// `get_volume` answers kept in memory, dropped at every commit; only
    /// while one process owns the data (see [`SqlStore::with_volume_cache`]).
    volumes: Option<Arc<VolumeCache>>,
}

#[derive(Debug, Clone)]
enum Db {
    /// One writer connection, and a small pool of readers beside it.
    Sqlite {
        writer: SqlitePool,
        reader: SqlitePool,
    },
    Postgres {
        pool: PgPool,
    },
}

impl SqlStore {
    fn new(db: Db) -> SqlStore {
        SqlStore { db, volumes: None }
    }

    /// Serves `get_volume` (the hottest call of the API) from memory, the
    /// cache dropped after every write transaction this value commits.
    /// Correct only when every change to the data goes through this value
    /// in a single process: for SQLite, `svs serve` holds the data
    /// directory's lock, so it is the only writer of volumes, slices, jobs
    /// and policies (`svs user add` only adds users). A database shared by
    /// several instances must not be cached this way: an instance would
    /// never see the others' changes.
    pub fn with_volume_cache(mut self) -> SqlStore {
        self.volumes = Some(Arc::default());
        self
    }

    pub(crate) fn dialect(&self) -> Dialect {
        match self.db {
            Db::Sqlite { .. } => Dialect::Sqlite,
            Db::Postgres { .. } => Dialect::Postgres,
        }
    }

    /// Where reads go: SQLite's read pool, beside the writer.
    fn reader(&self) -> Target<'_> {
        match &self.db {
            Db::Sqlite { reader, .. } => Target::SqlitePool(reader),
            Db::Postgres { pool } => Target::PgPool(pool),
        }
    }

    /// Where reads that must follow this process's last write go (SQLite's
    /// writer connection).
    fn writer(&self) -> Target<'_> {
        match &self.db {
            Db::Sqlite { writer, .. } => Target::SqlitePool(writer),
            Db::Postgres { pool } => Target::PgPool(pool),
        }
    }

    /// A write transaction holding the database's write lock from its
    /// start (see the module doc), fenced on the current job's lease.
    async fn begin_write(&self) -> StoreResult<Tx> {
        let on_commit = self
            .volumes
            .clone()
            .map(|cache| cache as Arc<dyn db::OnCommit>);
        let mut tx = match &self.db {
            Db::Sqlite { writer, .. } => {
                // sqlx's begin with a statement of its own awaits once more
                // after the BEGIN ran and before the transaction exists: a
                // caller cancelled there (a client gone) would leave the one
                // writer connection inside a transaction nobody can end,
                // and every later write refused. Begun in a task of its own,
                // it always completes; one begun for a caller gone is
                // dropped there, so rolled back.
                let writer = writer.clone();
                let begun = tokio::spawn(async move { writer.begin_with("BEGIN IMMEDIATE").await })
                    .await
                    .map_err(|e| crate::StoreError::backend(true, e))?;
                Tx::sqlite(begun?, on_commit)
            }
            Db::Postgres { pool } => {
                let mut tx = Tx::postgres(pool.begin().await?, on_commit);
                query("SELECT pg_advisory_xact_lock($1)")
                    .bind(postgres::WRITE_LOCK)
                    .execute(&mut tx)
                    .await?;
                tx
            }
        };
        // A job's writes stop once its lease is taken over (`crate::fence`).
        jobs::check_fence(&mut tx).await?;
        Ok(tx)
    }
}

#[async_trait]
impl StoreLifecycle for SqlStore {
    async fn close(&self) {
        match &self.db {
            Db::Sqlite { writer, reader } => {
                reader.close().await;
                writer.close().await;
            }
            Db::Postgres { pool } => pool.close().await,
        }
    }

    async fn ping(&self) -> StoreResult<()> {
        query("SELECT 1").execute(self.reader()).await?;
        Ok(())
    }

    async fn announce(&self, topic: &str) -> StoreResult<()> {
        match &self.db {
            Db::Postgres { pool } => postgres::notify_topic(pool, topic).await,
            // One process: its waiters are woken in memory.
            Db::Sqlite { .. } => Ok(()),
        }
    }

    async fn announcements(&self, topics: &[&str]) -> StoreResult<Option<crate::Announcements>> {
        match &self.db {
            Db::Postgres { pool } => {
                Ok(Some(Box::new(postgres::listen_topics(pool, topics).await?)))
            }
            Db::Sqlite { .. } => Ok(None),
        }
    }
}
