//! The commands that work on the data directory, with or without a
//! running service: `user add`, `keys rotate`, `backup`, `restore`.

use super::passwords::read_password;
use super::CommonArgs;
use clap::Subcommand;
use std::path::{Path, PathBuf};
use svs_common::clock::SystemClock;
use svs_control::config::{Config, StoreBackend};
use svs_control::data_dir::{lock_data_dir, open_store, DB_FILE};
use svs_control::service::users::add_user;
use svs_store::{PgSettings, SqlStore, StoreLifecycle};

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Start signing tokens with a new key, in the configured store. The
    /// previous key keeps verifying the tokens it signed until they expire
    /// (token_lifetime), and stays in the JWKS until then; every service on
    /// the store signs with the new key within 2 seconds (and verifies its
    /// tokens at once).
    Rotate {
        #[command(flatten)]
        common: CommonArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Copy a stopped service's whole SQLite store (users, policies, media,
    /// nodes, volumes, jobs, attachments, snapshots, checkpoints) into an
    /// empty PostgreSQL database, ids kept, each table's rows counted on
    /// both sides, token signing keys included. Then start `svs serve` with
    /// `store` set to that database and the same data directory (its TLS
    /// files stay there, and key files of an older svs are imported).
    Migrate {
        /// The stopped service's data directory (holding `svs.db`).
        #[arg(long)]
        from: PathBuf,
        /// The PostgreSQL database: `postgres://user:password@host:port/db`
        /// (or in `SVS_MIGRATE_TO`, keeping the password off the command line).
        #[arg(long, env = "SVS_MIGRATE_TO", hide_env_values = true)]
        to: String,
    },
}

/// `svs store migrate`.
pub(super) async fn store_migrate(from: &Path, to: &str) -> Result<(), String> {
    let db = from.join(DB_FILE);
    if !db.exists() {
        return Err(format!(
            "{} holds no database ({DB_FILE}): nothing to migrate",
            from.display()
        ));
    }
    // The service must be stopped: a copy of a database still written to
    // would miss what comes after it.
    let _lock = lock_data_dir(from)?;
    if !(to.starts_with("postgres://") || to.starts_with("postgresql://")) {
        return Err(
            "--to must be a PostgreSQL URL: postgres://user:password@host:port/database".into(),
        );
    }
    let sqlite = SqlStore::open_sqlite(&db)
        .await
        .map_err(|e| format!("cannot open {}: {e}", db.display()))?;
    let postgres = SqlStore::open_postgres(to, &PgSettings::default())
        .await
        .map_err(|e| format!("cannot open the PostgreSQL database: {e}"))?;
    let copied = postgres.copy_from_sqlite(&sqlite).await;
    postgres.close().await;
    sqlite.close().await;
    let copied = copied.map_err(|e| format!("nothing was migrated: {e}"))?;
    for table in &copied {
        println!("{}: {} rows", table.table, table.rows);
    }
    println!(
        "migrated {} to PostgreSQL; start svs serve with that store and --data-dir {}",
        from.display(),
        from.display()
    );
    Ok(())
}

pub(super) async fn user_add(
    common: CommonArgs,
    email: &str,
    tenant: &str,
    name: Option<&str>,
    admin: bool,
) -> Result<(), String> {
    let config = common.offline_config()?;
    let password = read_password(true)?;
    let store = open_store(&config).await?;
    add_user(&*store, &SystemClock, tenant, email, name, &password, admin).await?;
    store.close().await;
    println!("added user {email} to tenant {tenant}");
    Ok(())
}

/// `svs keys rotate`: in the configured store (SQLite in the data
/// directory, or PostgreSQL), beside running services or not: they follow
/// the store, and rotations take turns in its write transaction.
pub(super) async fn keys_rotate(common: CommonArgs) -> Result<(), String> {
    let config = common.offline_config()?;
    let now_ms = svs_common::clock::Clock::now_ms(&SystemClock);
    let lifetime = config.token_lifetime.as_secs();
    let store = open_store(&config).await?;
    let ring =
        svs_control::auth::rotate_keys(store.as_ref(), &config.data_dir, now_ms, lifetime).await;
    store.close().await;
    let ring = ring?;
    println!("new signing key {}", ring.current.kid);
    for r in &ring.retired {
        println!(
            "retired key {} verifies tokens until {}",
            r.key.kid,
            svs_control::service::format_ms(
                i64::try_from(r.live_until_secs(lifetime))
                    .unwrap_or(i64::MAX / 1000)
                    .saturating_mul(1000)
            )
        );
    }
    Ok(())
}

pub(super) async fn backup(common: CommonArgs, out: &Path) -> Result<(), String> {
    let config = common.offline_config()?;
    refuse_postgres(&config)?;
    let manifest = svs_control::backup::backup(&config.data_dir, out).await?;
    println!(
        "backed up {} to {} (database schema {}; {})",
        config.data_dir.display(),
        out.display(),
        manifest.schema_version,
        manifest
            .files
            .iter()
            .map(|f| f.path.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

pub(super) async fn restore(common: CommonArgs, from: &Path) -> Result<(), String> {
    let config = common.offline_config()?;
    refuse_postgres(&config)?;
    let manifest = svs_control::backup::restore(&config.data_dir, from).await?;
    println!(
        "restored {} (taken {} by svs {}, database schema {}) into {}",
        from.display(),
        manifest.created,
        manifest.svs_version,
        manifest.schema_version,
        config.data_dir.display()
    );
    Ok(())
}

/// `svs backup` and `svs restore` carry the SQLite store: a PostgreSQL one
/// is backed up with PostgreSQL's own tools.
fn refuse_postgres(config: &Config) -> Result<(), String> {
    match config.store {
        StoreBackend::Sqlite => Ok(()),
        StoreBackend::Postgres(_) => Err(
            "svs backup and svs restore copy the embedded SQLite store; this service keeps its \
             state in PostgreSQL: back the database up with pg_dump (the signing keys are in it) \
             and the data directory (TLS files) as files (see docs/postgresql.md)"
                .into(),
        ),
    }
}
