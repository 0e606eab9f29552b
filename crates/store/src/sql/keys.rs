//! The keys that sign tokens: `signing_keys`, the current one (`retired_ms`
//! NULL; a unique index allows one) and retired ones, shared by every
//! instance on the database.

use super::db::{query, Tx};
use super::{conflict_on_unique, SqlStore};
use crate::records::SigningKeyRecord;
use crate::rows::Columns;
use crate::{SigningKeyStore, StoreResult};
use async_trait::async_trait;

const KEY_SELECT: &str = "SELECT kid, seed, created_ms, retired_ms FROM signing_keys";

fn key_row(row: &impl Columns) -> StoreResult<SigningKeyRecord> {
    Ok(SigningKeyRecord {
        kid: row.try_get("kid")?,
        seed: row.try_get("seed")?,
        created_ms: row.try_get("created_ms")?,
        retired_ms: row.try_get("retired_ms")?,
    })
}

fn existing_kid(kid: &str) -> impl FnOnce() -> String + '_ {
    move || format!("a signing key with kid {kid} is stored already")
}

/// Stores `key` as the current key (the caller retired the one before).
async fn insert_current(conn: &mut Tx, key: &SigningKeyRecord) -> StoreResult<()> {
    conflict_on_unique(
        query(
            "INSERT INTO signing_keys (kid, seed, created_ms, retired_ms) VALUES ($1, $2, $3, NULL)",
        )
        .bind(&key.kid)
        .bind(&key.seed)
        .bind(key.created_ms)
        .execute(&mut *conn)
        .await,
        existing_kid(&key.kid),
    )?;
    Ok(())
}

#[async_trait]
impl SigningKeyStore for SqlStore {
    async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRecord>> {
        let rows = query(format!(
            "{KEY_SELECT} ORDER BY retired_ms IS NOT NULL, retired_ms DESC, kid"
        ))
        .fetch_all(self.reader())
        .await?;
        rows.iter().map(key_row).collect()
    }

    async fn ensure_signing_key(&self, key: &SigningKeyRecord) -> StoreResult<SigningKeyRecord> {
        // Under the write lock: two instances starting at once cannot both
        // find no current key and both insert one.
        let mut tx = self.begin_write().await?;
        let current = query(format!("{KEY_SELECT} WHERE retired_ms IS NULL"))
            .fetch_optional(&mut tx)
            .await?;
        if let Some(row) = current {
            return key_row(&row);
        }
        insert_current(&mut tx, key).await?;
        tx.commit().await?;
        Ok(SigningKeyRecord {
            retired_ms: None,
            ..key.clone()
        })
    }

    async fn rotate_signing_key(
        &self,
        key: &SigningKeyRecord,
        drop_before_ms: i64,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        query("UPDATE signing_keys SET retired_ms = $1 WHERE retired_ms IS NULL")
            .bind(key.created_ms)
            .execute(&mut tx)
            .await?;
        insert_current(&mut tx, key).await?;
        query("DELETE FROM signing_keys WHERE retired_ms < $1")
            .bind(drop_before_ms)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
