//! What only PostgreSQL does: opening and migrating a shared database, the
//! instance lock, announcements between instances (`announce.rs`) and the
//! copy of a SQLite database into an empty one (`copy.rs`).
//!
//! Every write transaction starts by taking one transaction-scoped advisory
//! lock (`pg_advisory_xact_lock`, [`WRITE_LOCK`]): writes are serialized, as
//! SQLite's single writer serializes them, whichever instance runs them.
//! Reads take no lock and run in parallel on the pool. Row locks (or
//! SERIALIZABLE with retries) would let unrelated writes run at once; the
//! control plane's writes are small and short, so one lock keeps every rule
//! obviously safe at a cost measured in `bench/` (see docs/postgresql.md).

mod announce;
mod copy;

pub(super) use announce::{listen_topics, notify_topic};
pub use copy::CopiedTable;

use super::{Db, SqlStore};
use crate::{StoreError, StoreResult};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::str::FromStr;
use std::time::Duration;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations-postgres");

/// The advisory lock every write transaction holds ("svsw").
pub(super) const WRITE_LOCK: i64 = 0x7376_7377;

/// The advisory lock every `svs serve` holds for as long as it runs
/// ("svsi"): shared by instances that keep no volume bytes, exclusive for
/// one that does (see [`InstanceLock`]).
const INSTANCE_LOCK: i64 = 0x7376_7369;

/// How an instance shares its database with others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceRole {
    /// One of several instances: it keeps no volume bytes (every copy on
    /// storage nodes, fronts on them), so any number may run at once.
    Clustered,
    /// The only instance: it keeps volume bytes itself (media of its host, or
    /// fronts in svs serve), which no other instance could reach.
    Alone,
}

/// Held by `svs serve` for the life of the process: a connection of its own
/// holding a session advisory lock, released when the process ends (or its
/// connection does). Clustered instances hold it shared, an instance that
/// must be alone holds it exclusive, so neither starts beside the other.
/// Session locks need a direct connection (or session pooling), not a
/// transaction-pooling PgBouncer.
pub struct InstanceLock {
    _conn: sqlx::PgConnection,
}

impl InstanceLock {
    /// Takes the lock, or `Ok(None)` when instances that cannot run beside
    /// one of this `role` hold it.
    pub async fn take(url: &str, role: InstanceRole) -> StoreResult<Option<InstanceLock>> {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect_with(
            &PgConnectOptions::from_str(url)?.application_name("svs instance lock"),
        )
        .await?;
        let take = match role {
            InstanceRole::Clustered => "SELECT pg_try_advisory_lock_shared($1)",
            InstanceRole::Alone => "SELECT pg_try_advisory_lock($1)",
        };
        let taken: bool = sqlx::query_scalar(take)
            .bind(INSTANCE_LOCK)
            .fetch_one(&mut conn)
            .await?;
        Ok(taken.then_some(InstanceLock { _conn: conn }))
    }
}

/// How the store connects (settings `store_pool_size`, `store_acquire_timeout`).
#[derive(Debug, Clone)]
pub struct PgSettings {
    /// Connections kept at most by this instance.
    pub pool_size: u32,
    /// How long a request waits for a connection (a free one of the pool, or
    /// a new one to the server) before it fails as transient (503).
    pub acquire_timeout: Duration,
}

impl Default for PgSettings {
    fn default() -> Self {
        PgSettings {
            pool_size: 10,
            acquire_timeout: Duration::from_secs(5),
        }
    }
}

impl SqlStore {
    /// Connects to the PostgreSQL database at `url` (`postgres://…`) and
    /// brings its schema up to date. Several instances may start at once:
    /// one migrates while the others wait on the migrator's lock. A
    /// database whose schema is newer than this build is refused, untouched.
    pub async fn open_postgres(url: &str, settings: &PgSettings) -> StoreResult<SqlStore> {
        let options = PgConnectOptions::from_str(url)?.application_name("svs");
        let pool = PgPoolOptions::new()
            .max_connections(settings.pool_size.max(1))
            .min_connections(1)
            .acquire_timeout(settings.acquire_timeout)
            .connect_with(options)
            .await?;
        if let Err(e) = MIGRATOR.run(&pool).await {
            pool.close().await;
            return Err(match e {
                sqlx::migrate::MigrateError::VersionMissing(version) => {
                    StoreError::Migrate(format!(
                    "the database's schema is newer than this svs (it has migration {version}, \
                     which this build does not know): run a newer svs, or another database"
                ))
                }
                other => other.into(),
            });
        }
        Ok(SqlStore::new(Db::Postgres { pool }))
    }

    /// The schema version this build migrates a PostgreSQL database to.
    pub fn postgres_schema_version() -> i64 {
        MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
    }
}
