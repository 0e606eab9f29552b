//! The commands that work on the data directory, with or without a
//! running service: `user add`, `keys rotate`, `backup`, `restore`.

use super::passwords::read_password;
use super::CommonArgs;
use crate::app::open_store;
use crate::clock::SystemClock;
use crate::config::{Config, StoreBackend};
use crate::service::users::add_user;
use clap::Subcommand;
use std::path::Path;

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Start signing tokens with a new key. The previous key keeps verifying
    /// the tokens it signed until they expire (token_lifetime), and stays in
    /// the JWKS until then; a running service picks the new key up within
    /// 2 seconds.
    Rotate {
        #[command(flatten)]
        common: CommonArgs,
    },
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

pub(super) fn keys_rotate(common: CommonArgs) -> Result<(), String> {
    let config = common.offline_config()?;
    let now = crate::clock::Clock::now_secs(&SystemClock);
    let lifetime = config.token_lifetime.as_secs();
    let ring = crate::auth::KeyRing::rotate(&config.data_dir, now, lifetime)?;
    println!("new signing key {}", ring.current.kid);
    for r in &ring.retired {
        println!(
            "retired key {} verifies tokens until {}",
            r.key.kid,
            crate::service::format_ms(
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
    let manifest = crate::backup::backup(&config.data_dir, out).await?;
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
    let manifest = crate::backup::restore(&config.data_dir, from).await?;
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
             state in PostgreSQL: back the database up with pg_dump and the data directory \
             (signing keys, TLS files) as files (see docs/postgresql.md)"
                .into(),
        ),
    }
}
