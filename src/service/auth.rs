//! Sign-in, sign-out and token refresh (seed: POST /signin, POST /signout).

use super::commands::{Refresh, SignIn, SignOut};
use super::{Caller, ServiceError, ServiceResult, Services};
use crate::auth::{
    new_refresh_token, refresh_token_hash, verify_password, TokenSet, TokenSubject, TokenUse,
};
use svs_store::{NewRefreshToken, User};

pub const BAD_CREDENTIALS: &str = "Incorrect email or password";
pub const BAD_TOKEN: &str = "The token is invalid or has expired";
pub const NOT_SIGNED_IN: &str =
    "Not signed in: send the IdToken from /signin in the authorization header";

/// Tokens for a successful sign-in.
pub struct SignedIn {
    pub tokens: TokenSet,
    pub refresh_token: String,
}

fn bad_token() -> ServiceError {
    ServiceError::Unauthorized(BAD_TOKEN.into())
}

impl Services {
    /// Signs tokens for the user as the store has them now (role included).
    fn issue(&self, user: &User) -> ServiceResult<TokenSet> {
        let subject = TokenSubject {
            user_id: user.id,
            email: &user.email,
            name: &user.name,
            tenant: &user.tenant,
            tenant_id: user.tenant_id,
            admin: user.is_admin,
        };
        self.tokens
            .issue(&subject, self.clock.now_secs())
            .map_err(|e| ServiceError::Internal(format!("token signing failed: {e}")))
    }

    pub async fn sign_in(&self, request: &SignIn) -> ServiceResult<SignedIn> {
        let user = self.store.user_by_email(request.email.trim()).await?;
        // Verify against a stand-in hash for unknown e-mails: same work, same time.
        let hash = user
            .as_ref()
            .map(|u| u.password_hash.clone())
            .unwrap_or_else(|| self.dummy_hash.clone());
        let password = request.password.clone();
        let matches = tokio::task::spawn_blocking(move || verify_password(&password, &hash))
            .await
            .map_err(|e| ServiceError::Internal(e.to_string()))?;
        let user = match user {
            Some(user) if matches => user,
            _ => return Err(ServiceError::Unauthorized(BAD_CREDENTIALS.into())),
        };
        let tokens = self.issue(&user)?;
        let (refresh_token, token_hash) = new_refresh_token();
        let now = self.clock.now_ms();
        self.store
            .add_refresh_token(&NewRefreshToken {
                user_id: user.id,
                token_hash,
                issued_ms: now,
                expires_ms: now.saturating_add(self.refresh_lifetime_ms),
            })
            .await?;
        tracing::info!(user = user.id, "signed in");
        Ok(SignedIn {
            tokens,
            refresh_token,
        })
    }

    /// Seed rules: every refresh token of the user is invalidated; the current
    /// AccessToken and IdToken stay valid until they expire.
    pub async fn sign_out(&self, request: &SignOut) -> ServiceResult<()> {
        let claims = self
            .tokens
            .verify(
                &request.access_token,
                TokenUse::Access,
                self.clock.now_secs(),
            )
            .ok_or_else(bad_token)?;
        let user_id = claims.user_id().ok_or_else(bad_token)?;
        let revoked = self.store.revoke_refresh_tokens(user_id).await?;
        tracing::info!(user = user_id, revoked, "signed out");
        Ok(())
    }

    /// New IdToken and AccessToken for a valid refresh token, reflecting the
    /// user's current role.
    pub async fn refresh(&self, request: &Refresh) -> ServiceResult<TokenSet> {
        let now = self.clock.now_ms();
        let record = self
            .store
            .refresh_token(&refresh_token_hash(&request.refresh_token))
            .await?
            .filter(|r| !r.revoked && r.expires_ms > now)
            .ok_or_else(bad_token)?;
        let user = self
            .store
            .user_by_id(record.user_id)
            .await?
            .ok_or_else(bad_token)?;
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
        let claims = self
            .tokens
            .verify(token, TokenUse::Id, self.clock.now_secs())
            .ok_or_else(bad_token)?;
        Ok(Caller {
            user_id: claims.user_id().ok_or_else(bad_token)?,
            tenant_id: claims.tenant_id,
            email: claims.email.clone(),
            name: claims.name.clone(),
            is_admin: claims.admin,
        })
    }
}
