//! Sign-in, sign-out and token refresh (seed: POST /signin, POST /signout).

use super::{now_ms, Caller, ServiceError, ServiceResult, Services};
use crate::auth::{new_refresh_token, refresh_token_hash, verify_password, TokenSet, TokenUse};
use svs_store::{NewRefreshToken, User};

pub const BAD_CREDENTIALS: &str = "Incorrect email or password";
pub const BAD_TOKEN: &str = "The token is invalid or has expired";
pub const NOT_SIGNED_IN: &str =
    "Not signed in: send the IdToken from /signin in the authorization header";

/// Tokens for a successful sign-in.
pub struct SignIn {
    pub tokens: TokenSet,
    pub refresh_token: String,
}

impl Services {
    fn issue(&self, user: &User) -> ServiceResult<TokenSet> {
        let now = u64::try_from(now_ms() / 1000).unwrap_or(0);
        self.tokens
            .issue(
                user.id,
                &user.email,
                &user.name,
                &user.tenant,
                user.tenant_id,
                now,
            )
            .map_err(|e| ServiceError::Internal(format!("token signing failed: {e}")))
    }

    pub async fn sign_in(&self, email: &str, password: &str) -> ServiceResult<SignIn> {
        let user = self.store.user_by_email(email.trim()).await?;
        // Verify against a stand-in hash for unknown e-mails: same work, same time.
        let hash = user
            .as_ref()
            .map(|u| u.password_hash.clone())
            .unwrap_or_else(|| self.dummy_hash.clone());
        let password = password.to_string();
        let matches = tokio::task::spawn_blocking(move || verify_password(&password, &hash))
            .await
            .map_err(|e| ServiceError::Internal(e.to_string()))?;
        let user = match user {
            Some(user) if matches => user,
            _ => return Err(ServiceError::Unauthorized(BAD_CREDENTIALS.into())),
        };
        let tokens = self.issue(&user)?;
        let (refresh_token, token_hash) = new_refresh_token();
        let now = now_ms();
        self.store
            .add_refresh_token(&NewRefreshToken {
                user_id: user.id,
                token_hash,
                issued_ms: now,
                expires_ms: now.saturating_add(self.refresh_lifetime_ms),
            })
            .await?;
        tracing::info!(user = user.id, "signed in");
        Ok(SignIn {
            tokens,
            refresh_token,
        })
    }

    /// Seed rules: every refresh token of the user is invalidated; the current
    /// AccessToken and IdToken stay valid until they expire.
    pub async fn sign_out(&self, access_token: &str) -> ServiceResult<()> {
        let now = u64::try_from(now_ms() / 1000).unwrap_or(0);
        let claims = self
            .tokens
            .verify(access_token, TokenUse::Access, now)
            .ok_or_else(|| ServiceError::Unauthorized(BAD_TOKEN.into()))?;
        let user_id = claims
            .user_id()
            .ok_or_else(|| ServiceError::Unauthorized(BAD_TOKEN.into()))?;
        let revoked = self.store.revoke_refresh_tokens(user_id).await?;
        tracing::info!(user = user_id, revoked, "signed out");
        Ok(())
    }

    pub async fn refresh(&self, refresh_token: &str) -> ServiceResult<TokenSet> {
        let record = self
            .store
            .refresh_token(&refresh_token_hash(refresh_token))
            .await?
            .filter(|r| !r.revoked && r.expires_ms > now_ms())
            .ok_or_else(|| ServiceError::Unauthorized(BAD_TOKEN.into()))?;
        let user = self
            .store
            .user_by_id(record.user_id)
            .await?
            .ok_or_else(|| ServiceError::Unauthorized(BAD_TOKEN.into()))?;
        self.issue(&user)
    }

    /// The caller behind an `authorization` header value (raw or `Bearer`).
    /// Only an IdToken is accepted.
    pub fn authenticate(&self, header: Option<&str>) -> ServiceResult<Caller> {
        let raw = header
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .ok_or_else(|| ServiceError::Unauthorized(NOT_SIGNED_IN.into()))?;
        let token = match raw.split_once(' ') {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim(),
            _ => raw,
        };
        let now = u64::try_from(now_ms() / 1000).unwrap_or(0);
        let claims = self
            .tokens
            .verify(token, TokenUse::Id, now)
            .ok_or_else(|| ServiceError::Unauthorized(BAD_TOKEN.into()))?;
        Ok(Caller {
            user_id: claims
                .user_id()
                .ok_or_else(|| ServiceError::Unauthorized(BAD_TOKEN.into()))?,
            tenant_id: claims.tenant_id,
            email: claims.email.clone(),
            name: claims.name.clone(),
        })
    }
}
