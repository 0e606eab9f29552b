//! What the SQL backends share besides their rows (`rows.rs`): how sqlx's
//! errors become [`StoreError`]s, transient or not, on either database.

use crate::rows::to_i64;
use crate::{StoreError, StoreResult};
use sqlx::postgres::PgDatabaseError;
use sqlx::sqlite::SqliteError;

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

/// SQLite's primary result codes for "another connection holds the lock".
const SQLITE_BUSY: i32 = 5;
const SQLITE_LOCKED: i32 = 6;

/// Whether the same call may succeed later: no pooled connection came free
/// in time, I/O failed (the database went away), or the database said so
/// (SQLite: busy or locked past the busy timeout; PostgreSQL: a
/// serialization failure or deadlock, a lost connection, a server shutting
/// down or starting, too many connections, a database closed to new
/// connections).
pub(crate) fn is_transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => true,
        sqlx::Error::Database(db) => {
            if let Some(pg) = db.try_downcast_ref::<PgDatabaseError>() {
                let code = pg.code();
                // 08: connection exception; 40001 serialization failure;
                // 40P01 deadlock; 53300 too many connections; 57P01-57P03
                // admin shutdown, crash shutdown, cannot connect now.
                code.starts_with("08")
                    || matches!(
                        code,
                        "40001" | "40P01" | "53300" | "57P01" | "57P02" | "57P03"
                    )
                    // A database closed to connections for a while
                    // (ALLOW_CONNECTIONS false).
                    || (code == "55000"
                        && pg.message().contains("not currently accepting connections"))
            } else if db.try_downcast_ref::<SqliteError>().is_some() {
                db.code()
                    .and_then(|code| code.parse::<i32>().ok())
                    // Extended result codes keep the primary code in the low byte.
                    .is_some_and(|code| matches!(code & 0xff, SQLITE_BUSY | SQLITE_LOCKED))
            } else {
                false
            }
        }
        _ => false,
    }
}

pub(crate) fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// A write's result, with a unique-constraint violation as
/// Conflict(`conflict()`).
pub(crate) fn conflict_on_unique<R>(
    result: Result<R, sqlx::Error>,
    conflict: impl FnOnce() -> String,
) -> StoreResult<R> {
    match result {
        Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict(conflict())),
        other => Ok(other?),
    }
}

pub(crate) fn optional_i64(v: Option<u64>) -> StoreResult<Option<i64>> {
    v.map(to_i64).transpose()
}

pub(crate) fn duplicate_name(name: &str) -> impl FnOnce() -> String + '_ {
    move || format!("a snapshot named '{name}' already exists on the volume")
}

/// The directory column of a node's medium: the node's name and its own
/// path, so that it never reads like a directory of the control plane's.
pub(crate) fn node_directory(node: &str, directory: &str) -> String {
    format!("{node}:{directory}")
}

/// Who owns an existing medium, for the 409 of a claim.
pub(crate) fn owner(managed_by: &str, node: &str) -> String {
    match managed_by {
        "node" => format!("storage node '{node}'"),
        "config" => "the configuration file".to_string(),
        _ => "the API".to_string(),
    }
}
