//! Users, tenants and refresh tokens.

use super::{conflict_on_unique, SqliteStore};
use crate::records::{NewRefreshToken, NewUser, RefreshRotation, RefreshTokenRecord, User};
use crate::{StoreResult, UserStore};
use async_trait::async_trait;
use sqlx::sqlite::SqliteRow;
use sqlx::Row;

const USER_SELECT: &str = "SELECT u.id, u.tenant_id, t.name AS tenant, u.email, u.name, \
    u.password_hash, u.is_admin FROM users u JOIN tenants t ON t.id = u.tenant_id";

fn user_row(row: &SqliteRow) -> StoreResult<User> {
    Ok(User {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        tenant: row.try_get("tenant")?,
        email: row.try_get("email")?,
        name: row.try_get("name")?,
        password_hash: row.try_get("password_hash")?,
        is_admin: row.try_get::<i64, _>("is_admin")? != 0,
    })
}

const REFRESH_SELECT: &str = "SELECT user_id, family, expires_ms, revoked, retired \
    FROM refresh_tokens WHERE token_hash = ?";

fn refresh_row(r: &SqliteRow) -> StoreResult<RefreshTokenRecord> {
    Ok(RefreshTokenRecord {
        user_id: r.try_get("user_id")?,
        family: r.try_get("family")?,
        expires_ms: r.try_get("expires_ms")?,
        revoked: r.try_get::<i64, _>("revoked")? != 0,
        retired: r.try_get::<i64, _>("retired")? != 0,
    })
}

#[async_trait]
impl UserStore for SqliteStore {
    async fn user_count(&self) -> StoreResult<u64> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users")
            .fetch_one(&self.reader)
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn create_user(&self, user: &NewUser) -> StoreResult<User> {
        let mut tx = self.begin_write().await?;
        sqlx::query("INSERT OR IGNORE INTO tenants (name, created_ms) VALUES (?, ?)")
            .bind(&user.tenant)
            .bind(user.now_ms)
            .execute(&mut *tx)
            .await?;
        let tenant_id: i64 = sqlx::query_scalar("SELECT id FROM tenants WHERE name = ?")
            .bind(&user.tenant)
            .fetch_one(&mut *tx)
            .await?;
        let inserted = sqlx::query(
            "INSERT INTO users (tenant_id, email, name, password_hash, is_admin, created_ms) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(tenant_id)
        .bind(&user.email)
        .bind(&user.name)
        .bind(&user.password_hash)
        .bind(i64::from(user.is_admin))
        .bind(user.now_ms)
        .execute(&mut *tx)
        .await;
        let id = conflict_on_unique(inserted, || {
            format!("a user with email {} already exists", user.email)
        })?
        .last_insert_rowid();
        tx.commit().await?;
        Ok(User {
            id,
            tenant_id,
            tenant: user.tenant.clone(),
            email: user.email.clone(),
            name: user.name.clone(),
            password_hash: user.password_hash.clone(),
            is_admin: user.is_admin,
        })
    }

    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>> {
        let row = sqlx::query(&format!("{USER_SELECT} WHERE u.email = ?"))
            .bind(email)
            .fetch_optional(&self.reader)
            .await?;
        row.as_ref().map(user_row).transpose()
    }

    async fn user_by_id(&self, id: i64) -> StoreResult<Option<User>> {
        let row = sqlx::query(&format!("{USER_SELECT} WHERE u.id = ?"))
            .bind(id)
            .fetch_optional(&self.reader)
            .await?;
        row.as_ref().map(user_row).transpose()
    }

    async fn add_refresh_token(&self, token: &NewRefreshToken) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO refresh_tokens (user_id, token_hash, family, issued_ms, expires_ms) \
             VALUES (?, ?, ?, ?, ?)",
        )
        .bind(token.user_id)
        .bind(&token.token_hash)
        .bind(&token.family)
        .bind(token.issued_ms)
        .bind(token.expires_ms)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    async fn refresh_token(&self, token_hash: &str) -> StoreResult<Option<RefreshTokenRecord>> {
        // Read through the writer so a revocation just committed is always seen.
        let row = sqlx::query(REFRESH_SELECT)
            .bind(token_hash)
            .fetch_optional(&self.writer)
            .await?;
        row.as_ref().map(refresh_row).transpose()
    }

    async fn rotate_refresh_token(
        &self,
        token_hash: &str,
        new_hash: &str,
        now_ms: i64,
    ) -> StoreResult<RefreshRotation> {
        let mut tx = self.begin_write().await?;
        let row = sqlx::query(REFRESH_SELECT)
            .bind(token_hash)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(token) = row.as_ref().map(refresh_row).transpose()? else {
            return Ok(RefreshRotation::Invalid);
        };
        if token.revoked || token.expires_ms <= now_ms {
            return Ok(RefreshRotation::Invalid);
        }
        if token.retired {
            let revoked = sqlx::query(
                "UPDATE refresh_tokens SET revoked = 1 WHERE family = ? AND revoked = 0",
            )
            .bind(&token.family)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            tx.commit().await?;
            return Ok(RefreshRotation::Reused {
                user_id: token.user_id,
                revoked,
            });
        }
        sqlx::query("UPDATE refresh_tokens SET retired = 1 WHERE token_hash = ?")
            .bind(token_hash)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO refresh_tokens (user_id, token_hash, family, issued_ms, expires_ms) \
             VALUES (?, ?, ?, ?, ?)",
        )
        .bind(token.user_id)
        .bind(new_hash)
        .bind(&token.family)
        .bind(now_ms)
        .bind(token.expires_ms)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(RefreshRotation::Rotated {
            user_id: token.user_id,
        })
    }

    async fn revoke_refresh_family(&self, family: &str) -> StoreResult<u64> {
        let r =
            sqlx::query("UPDATE refresh_tokens SET revoked = 1 WHERE family = ? AND revoked = 0")
                .bind(family)
                .execute(&self.writer)
                .await?;
        Ok(r.rows_affected())
    }

    async fn purge_refresh_tokens(&self, now_ms: i64) -> StoreResult<u64> {
        let r = sqlx::query("DELETE FROM refresh_tokens WHERE expires_ms <= ? OR revoked = 1")
            .bind(now_ms)
            .execute(&self.writer)
            .await?;
        Ok(r.rows_affected())
    }

    async fn revoke_refresh_tokens(&self, user_id: i64) -> StoreResult<u64> {
        let r =
            sqlx::query("UPDATE refresh_tokens SET revoked = 1 WHERE user_id = ? AND revoked = 0")
                .bind(user_id)
                .execute(&self.writer)
                .await?;
        Ok(r.rows_affected())
    }
}
