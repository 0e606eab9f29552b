//! Users, tenants and refresh tokens.

use super::db::{query, scalar, Tx};
use super::{conflict_on_unique, refresh_row, user_row, SqlStore};
use crate::records::{
    NewRefreshToken, NewUser, RefreshRotation, RefreshTokenRecord, User, UserChange, LAST_ADMIN,
};
use crate::rows::USER_SELECT;
use crate::{StoreError, StoreResult, UserStore};
use async_trait::async_trait;

/// Enabled administrators, counted inside the transaction that changes one.
async fn enabled_admins(tx: &mut Tx) -> StoreResult<i64> {
    Ok(
        scalar("SELECT COUNT(*) FROM users WHERE is_admin = 1 AND disabled = 0")
            .fetch_one(tx)
            .await?,
    )
}

const REFRESH_SELECT: &str = "SELECT user_id, family, expires_ms, revoked, retired \
    FROM refresh_tokens WHERE token_hash = $1";

#[async_trait]
impl UserStore for SqlStore {
    async fn user_count(&self) -> StoreResult<u64> {
        let n: i64 = scalar("SELECT COUNT(*) FROM users")
            .fetch_one(self.reader())
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn create_user(&self, user: &NewUser) -> StoreResult<User> {
        let mut tx = self.begin_write().await?;
        query(
            "INSERT INTO tenants (name, created_ms) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        )
        .bind(&user.tenant)
        .bind(user.now_ms)
        .execute(&mut tx)
        .await?;
        let tenant_id: i64 = scalar("SELECT id FROM tenants WHERE name = $1")
            .bind(&user.tenant)
            .fetch_one(&mut tx)
            .await?;
        let inserted = scalar(
            "INSERT INTO users (tenant_id, email, name, password_hash, is_admin, created_ms) \
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        )
        .bind(tenant_id)
        .bind(&user.email)
        .bind(&user.name)
        .bind(&user.password_hash)
        .bind(i64::from(user.is_admin))
        .bind(user.now_ms)
        .fetch_one(&mut tx)
        .await;
        let id: i64 = conflict_on_unique(inserted, || {
            format!("a user with email {} already exists", user.email)
        })?;
        tx.commit().await?;
        Ok(User {
            id,
            tenant_id,
            tenant: user.tenant.clone(),
            email: user.email.clone(),
            name: user.name.clone(),
            password_hash: user.password_hash.clone(),
            is_admin: user.is_admin,
            disabled: false,
            token_generation: 0,
            created_ms: user.now_ms,
        })
    }

    async fn list_users(&self) -> StoreResult<Vec<User>> {
        let rows = query(format!("{USER_SELECT} ORDER BY u.id"))
            .fetch_all(self.reader())
            .await?;
        rows.iter().map(user_row).collect()
    }

    async fn update_user(&self, id: i64, change: &UserChange) -> StoreResult<User> {
        let mut tx = self.begin_write().await?;
        let exists: Option<i64> = scalar("SELECT id FROM users WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut tx)
            .await?;
        if exists.is_none() {
            return Err(StoreError::NotFound);
        }
        let admins_before = enabled_admins(&mut tx).await?;
        query(
            "UPDATE users SET disabled = COALESCE($1, disabled), \
             is_admin = COALESCE($2, is_admin), password_hash = COALESCE($3, password_hash), \
             token_generation = token_generation + $4 WHERE id = $5",
        )
        .bind(change.disabled.map(i64::from))
        .bind(change.is_admin.map(i64::from))
        .bind(change.password_hash.as_deref())
        .bind(i64::from(change.end_sessions))
        .bind(id)
        .execute(&mut tx)
        .await?;
        // Only a change that removes the last one is refused: a service
        // that has none (users added without --admin) can still be changed.
        if admins_before > 0 && enabled_admins(&mut tx).await? == 0 {
            return Err(StoreError::Conflict(LAST_ADMIN.into()));
        }
        if change.end_sessions {
            query("UPDATE refresh_tokens SET revoked = 1 WHERE user_id = $1 AND revoked = 0")
                .bind(id)
                .execute(&mut tx)
                .await?;
        }
        let row = query(format!("{USER_SELECT} WHERE u.id = $1"))
            .bind(id)
            .fetch_one(&mut tx)
            .await?;
        let user = user_row(&row)?;
        tx.commit().await?;
        Ok(user)
    }

    async fn delete_user(&self, id: i64) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let admins_before = enabled_admins(&mut tx).await?;
        query("DELETE FROM refresh_tokens WHERE user_id = $1")
            .bind(id)
            .execute(&mut tx)
            .await?;
        let deleted = query("DELETE FROM users WHERE id = $1")
            .bind(id)
            .execute(&mut tx)
            .await?
            .rows_affected();
        if deleted == 0 {
            return Err(StoreError::NotFound);
        }
        if admins_before > 0 && enabled_admins(&mut tx).await? == 0 {
            return Err(StoreError::Conflict(LAST_ADMIN.into()));
        }
        tx.commit().await?;
        Ok(())
    }

    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>> {
        let row = query(format!("{USER_SELECT} WHERE lower(u.email) = lower($1)"))
            .bind(email)
            .fetch_optional(self.reader())
            .await?;
        row.as_ref().map(user_row).transpose()
    }

    async fn user_by_id(&self, id: i64) -> StoreResult<Option<User>> {
        let row = query(format!("{USER_SELECT} WHERE u.id = $1"))
            .bind(id)
            .fetch_optional(self.reader())
            .await?;
        row.as_ref().map(user_row).transpose()
    }

    async fn add_refresh_token(&self, token: &NewRefreshToken) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        query(
            "INSERT INTO refresh_tokens (user_id, token_hash, family, issued_ms, expires_ms) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(token.user_id)
        .bind(&token.token_hash)
        .bind(&token.family)
        .bind(token.issued_ms)
        .bind(token.expires_ms)
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn refresh_token(&self, token_hash: &str) -> StoreResult<Option<RefreshTokenRecord>> {
        // Every read sees what was committed before it started, so a
        // revocation just committed is always seen.
        let row = query(REFRESH_SELECT)
            .bind(token_hash)
            .fetch_optional(self.writer())
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
        let row = query(REFRESH_SELECT)
            .bind(token_hash)
            .fetch_optional(&mut tx)
            .await?;
        let Some(token) = row.as_ref().map(refresh_row).transpose()? else {
            return Ok(RefreshRotation::Invalid);
        };
        if token.revoked || token.expires_ms <= now_ms {
            return Ok(RefreshRotation::Invalid);
        }
        if token.retired {
            let revoked =
                query("UPDATE refresh_tokens SET revoked = 1 WHERE family = $1 AND revoked = 0")
                    .bind(&token.family)
                    .execute(&mut tx)
                    .await?
                    .rows_affected();
            tx.commit().await?;
            return Ok(RefreshRotation::Reused {
                user_id: token.user_id,
                revoked,
            });
        }
        query("UPDATE refresh_tokens SET retired = 1 WHERE token_hash = $1")
            .bind(token_hash)
            .execute(&mut tx)
            .await?;
        query(
            "INSERT INTO refresh_tokens (user_id, token_hash, family, issued_ms, expires_ms) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(token.user_id)
        .bind(new_hash)
        .bind(&token.family)
        .bind(now_ms)
        .bind(token.expires_ms)
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(RefreshRotation::Rotated {
            user_id: token.user_id,
        })
    }

    async fn revoke_refresh_family(&self, family: &str) -> StoreResult<u64> {
        let mut tx = self.begin_write().await?;
        let r = query("UPDATE refresh_tokens SET revoked = 1 WHERE family = $1 AND revoked = 0")
            .bind(family)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(r.rows_affected())
    }

    async fn purge_refresh_tokens(&self, now_ms: i64) -> StoreResult<u64> {
        let mut tx = self.begin_write().await?;
        let r = query("DELETE FROM refresh_tokens WHERE expires_ms <= $1 OR revoked = 1")
            .bind(now_ms)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(r.rows_affected())
    }

    async fn revoke_refresh_tokens(&self, user_id: i64) -> StoreResult<u64> {
        let mut tx = self.begin_write().await?;
        let r = query("UPDATE refresh_tokens SET revoked = 1 WHERE user_id = $1 AND revoked = 0")
            .bind(user_id)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(r.rows_affected())
    }
}
