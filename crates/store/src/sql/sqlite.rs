//! What only SQLite does: opening the embedded database, and the online
//! copies of it for `svs backup` / `svs restore`.
//!
//! WAL journal with `synchronous = FULL`, so a committed change survives a
//! crash or power loss. All writes go through a single connection, reads
//! through a small pool that runs beside it. Write transactions start with
//! `BEGIN IMMEDIATE`: they take the database's write lock before reading, so
//! what a transaction checks (free space, say) cannot change before it
//! commits, even when another process (`svs user add`) writes to the same
//! file, and no transaction fails upgrading a read lock.
//!
//! `VACUUM INTO` writes a new database file from one read transaction of
//! the source: a consistent snapshot even while `svs serve` keeps writing
//! (WAL mode lets the copy read beside the writer, and the writer is never
//! blocked for the length of the copy). The copy is compact and has no
//! `-wal` file beside it, so it travels as one file.

use super::{Db, SqlStore};
use crate::{StoreError, StoreResult};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use sqlx::{ConnectOptions, Connection, Row};
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

impl SqlStore {
    /// Opens (creating if needed) the SQLite database file and applies
    /// migrations.
    pub async fn open_sqlite(path: &Path) -> StoreResult<SqlStore> {
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
            .before_acquire(|conn, _| Box::pin(out_of_transaction(conn)))
            .connect_with(options.clone())
            .await?;
        MIGRATOR.run(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(4)
            .min_connections(1)
            .connect_with(options.read_only(true))
            .await?;
        Ok(SqlStore::new(Db::Sqlite { writer, reader }))
    }

    /// The read pool of a SQLite store, for a copy of the whole database
    /// (`svs store migrate`).
    pub(crate) fn sqlite_reader(&self) -> Option<&SqlitePool> {
        match &self.db {
            Db::Sqlite { reader, .. } => Some(reader),
            Db::Postgres { .. } => None,
        }
    }

    /// The schema version this build migrates a database to: its newest
    /// migration.
    pub fn sqlite_schema_version() -> i64 {
        MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
    }

    /// Copies the database at `db` (possibly in use by a running service)
    /// into the new file `out`, and answers the copy's schema version.
    /// Neither migrates nor writes to `db`.
    pub async fn copy_sqlite_database(db: &Path, out: &Path) -> StoreResult<i64> {
        let out_name = out
            .to_str()
            .ok_or_else(|| StoreError::Corrupt(format!("path {} is not UTF-8", out.display())))?;
        let mut source = connect(db, true).await?;
        let copied = sqlx::query("VACUUM INTO ?")
            .bind(out_name)
            .execute(&mut source)
            .await;
        source.close().await?;
        copied?;
        SqlStore::check_sqlite_copy(out).await
    }

    /// The schema version of a database file that nothing else uses (a
    /// copy), after SQLite's integrity check passed on it.
    pub async fn check_sqlite_copy(db: &Path) -> StoreResult<i64> {
        let mut conn = connect(db, true).await?;
        let checked = check(&mut conn).await;
        conn.close().await?;
        checked
    }
}

/// Whether the writer connection may serve the next caller: not when sqlx
/// still counts it inside a transaction nobody holds (one whose ROLLBACK
/// failed after SQLite had already ended it, say), which would refuse every
/// later `BEGIN`. Such a connection is closed and the pool opens a fresh
/// one. A connection counted inside one is pinged first: the ping waits for
/// any rollback a dropped transaction queued (the common case, which then
/// leaves it out of the transaction); one counted outside costs nothing.
async fn out_of_transaction(conn: &mut SqliteConnection) -> Result<bool, sqlx::Error> {
    if !conn.is_in_transaction() {
        return Ok(true);
    }
    conn.ping().await?;
    if conn.is_in_transaction() {
        tracing::warn!("the store's writer connection was left inside a transaction; reopened");
        return Ok(false);
    }
    Ok(true)
}

async fn connect(db: &Path, read_only: bool) -> StoreResult<SqliteConnection> {
    Ok(SqliteConnectOptions::from_str("sqlite://")?
        .filename(db)
        .create_if_missing(false)
        .read_only(read_only)
        .busy_timeout(Duration::from_secs(10))
        .connect()
        .await?)
}

async fn check(conn: &mut SqliteConnection) -> StoreResult<i64> {
    let verdict: String = sqlx::query("PRAGMA integrity_check")
        .fetch_one(&mut *conn)
        .await?
        .try_get(0)?;
    if verdict != "ok" {
        return Err(StoreError::Corrupt(format!(
            "the database copy fails SQLite's integrity check: {verdict}"
        )));
    }
    let version: Option<i64> =
        sqlx::query("SELECT MAX(version) FROM _sqlx_migrations WHERE success")
            .fetch_one(&mut *conn)
            .await?
            .try_get(0)?;
    version.ok_or_else(|| StoreError::Corrupt("the database has no migration applied".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    #[tokio::test]
    async fn a_copy_has_the_latest_schema_and_the_rows_and_leaves_the_source_in_use() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("svs.db");
        let store = SqlStore::open_sqlite(&db).await.unwrap();
        let (user, _) = crate::testing::user_and_policy(&store).await;
        let out = dir.path().join("copy.db");
        let version = SqlStore::copy_sqlite_database(&db, &out).await.unwrap();
        assert_eq!(version, SqlStore::sqlite_schema_version());
        assert!(version >= 6, "{version}");
        // The source keeps working; the copy opens as a store of its own.
        assert_eq!(store.user_count().await.unwrap(), 1);
        store.close().await;
        let copy = SqlStore::open_sqlite(&out).await.unwrap();
        let policies = copy.list_policies(user.tenant_id).await.unwrap();
        assert_eq!(policies.len(), 1);
        assert_eq!(copy.user_count().await.unwrap(), 1);
        copy.close().await;
    }

    /// Polls `write` `polls` times (or until it is done), then drops it: a
    /// request whose client went away at that point.
    async fn cancel_after<F: std::future::Future>(write: F, polls: usize) {
        use std::task::Poll;
        let mut write = std::pin::pin!(write);
        for _ in 0..polls {
            let done =
                std::future::poll_fn(|cx| Poll::Ready(write.as_mut().poll(cx).is_ready())).await;
            if done {
                return;
            }
            tokio::task::yield_now().await;
        }
    }

    /// A new store in a temporary directory (kept while the store is used).
    async fn temporary_store() -> (tempfile::TempDir, SqlStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqlStore::open_sqlite(&dir.path().join("svs.db"))
            .await
            .unwrap();
        (dir, store)
    }

    #[tokio::test]
    async fn a_write_cancelled_anywhere_leaves_the_writer_usable() {
        let (_dir, store) = temporary_store().await;
        for attempt in 0..400 {
            let user = crate::testing::new_user("t", &format!("c{attempt}@example.com"), true, 1);
            cancel_after(store.create_user(&user), 1 + attempt % 40).await;
            // The next write is never refused for a transaction the cancelled
            // one left open.
            let next = crate::testing::new_user("t", &format!("n{attempt}@example.com"), true, 1);
            store.create_user(&next).await.unwrap();
        }
        store.close().await;
    }

    #[tokio::test]
    async fn a_writer_connection_left_in_a_transaction_is_replaced() {
        let (_dir, store) = temporary_store().await;
        let Db::Sqlite { writer, .. } = &store.db else {
            unreachable!("a SQLite store")
        };
        // A transaction begun and never ended: its connection goes back to
        // the pool still inside it.
        let mut conn = writer.acquire().await.unwrap();
        std::mem::forget(conn.begin_with("BEGIN IMMEDIATE").await.unwrap());
        drop(conn);
        let user = crate::testing::new_user("t", "u@example.com", true, 1);
        store.create_user(&user).await.unwrap();
        assert_eq!(store.user_count().await.unwrap(), 1);
        store.close().await;
    }

    #[tokio::test]
    async fn a_missing_database_is_an_error_and_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("svs.db");
        let out = dir.path().join("copy.db");
        assert!(SqlStore::copy_sqlite_database(&db, &out).await.is_err());
        assert!(!db.exists());
        assert!(!out.exists());
    }
}
