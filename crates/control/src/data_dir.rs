//! The data directory `svs serve` owns: its lock, and the store it opens
//! (also used by the offline commands and backups).

use crate::config::{Config, StoreBackend};
use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use svs_store::{PgSettings, SqlStore, Store};

pub const DB_FILE: &str = "svs.db";
pub const LOCK_FILE: &str = "svs.lock";

/// Takes the data directory's lock, or explains who holds it.
pub fn lock_data_dir(dir: &Path) -> Result<File, String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create data directory {}: {e}", dir.display()))?;
    let path = dir.join(LOCK_FILE);
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open lock file {}: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(format!(
            "data directory {} is in use by another svs serve (lock {} is held)",
            dir.display(),
            path.display()
        )),
        Err(std::fs::TryLockError::Error(e)) => Err(format!("cannot lock {}: {e}", path.display())),
    }
}

/// Opens the configured store (creating it and applying migrations).
pub async fn open_store(config: &Config) -> Result<Arc<dyn Store>, String> {
    match &config.store {
        StoreBackend::Sqlite => {
            std::fs::create_dir_all(&config.data_dir).map_err(|e| {
                format!(
                    "cannot create data directory {}: {e}",
                    config.data_dir.display()
                )
            })?;
            let sqlite = SqlStore::open_sqlite(&config.data_dir.join(DB_FILE))
                .await
                .map_err(|e| format!("cannot open the database: {e}"))?;
            // `svs serve` owns the data directory (its lock) and makes every
            // change a volume read shows (`svs user add` only adds users), so
            // those reads may be cached.
            Ok(Arc::new(sqlite.with_volume_cache()))
        }
        StoreBackend::Postgres(url) => {
            let settings = PgSettings {
                pool_size: config.store_pool_size,
                acquire_timeout: config.store_acquire_timeout,
            };
            // No cache: the CLI (and, later, other instances) write to the
            // same database.
            let postgres = SqlStore::open_postgres(url, &settings)
                .await
                .map_err(|e| format!("cannot open the PostgreSQL database: {e}"))?;
            Ok(Arc::new(postgres))
        }
    }
}
