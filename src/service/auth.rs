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

/// The expiry rules on a clock the tests move (the integration tests in
/// tests/api/auth.rs check the same rules on the real binary, sleeping).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::service::testing::{TestServices, START_MS};
    use std::time::Duration;

    const TOKEN_LIFETIME: Duration = Duration::from_secs(2);
    const REFRESH_LIFETIME: Duration = Duration::from_secs(10);

    async fn app() -> TestServices {
        let app = TestServices::new(TOKEN_LIFETIME, REFRESH_LIFETIME).await;
        app.add_user("default", "admin@example.com", "admin-password", true)
            .await;
        app.add_user("acme", "eve@acme.example", "eve-password", false)
            .await;
        app
    }

    async fn sign_in(app: &TestServices, email: &str, password: &str) -> SignedIn {
        app.services
            .sign_in(&SignIn {
                email: email.into(),
                password: password.into(),
            })
            .await
            .expect("signed in")
    }

    fn is_bad_token<T>(result: ServiceResult<T>) -> bool {
        matches!(result, Err(ServiceError::Unauthorized(m)) if m == BAD_TOKEN)
    }

    fn sign_out_request(s: &SignedIn) -> SignOut {
        SignOut {
            access_token: s.tokens.access_token.clone(),
        }
    }

    fn refresh_request(s: &SignedIn) -> Refresh {
        Refresh {
            refresh_token: s.refresh_token.clone(),
        }
    }

    #[tokio::test]
    async fn an_id_token_opens_protected_routes_until_its_expiry_second() {
        let app = app().await;
        let s = sign_in(&app, "admin@example.com", "admin-password").await;
        assert_eq!(s.tokens.expires_in, 2);
        let raw = s.tokens.id_token.clone();
        let bearer = format!("Bearer {raw}");
        app.advance(Duration::from_millis(1999));
        for header in [&raw, &bearer] {
            assert!(app.services.authenticate(Some(header)).is_ok());
        }
        app.advance(Duration::from_millis(1));
        for header in [&raw, &bearer] {
            assert!(is_bad_token(app.services.authenticate(Some(header))));
        }
    }

    #[tokio::test]
    async fn an_expired_access_token_cannot_sign_out_and_revokes_nothing() {
        let app = app().await;
        let s = sign_in(&app, "admin@example.com", "admin-password").await;
        app.advance(TOKEN_LIFETIME);
        assert!(is_bad_token(
            app.services.sign_out(&sign_out_request(&s)).await
        ));
        // The refresh token (longer-lived) was not revoked.
        assert!(app.services.refresh(&refresh_request(&s)).await.is_ok());
    }

    #[tokio::test]
    async fn a_refresh_token_works_until_its_lifetime_ends() {
        let app = app().await;
        let s = sign_in(&app, "admin@example.com", "admin-password").await;
        app.advance(REFRESH_LIFETIME - Duration::from_millis(1));
        assert!(app.services.refresh(&refresh_request(&s)).await.is_ok());
        app.advance(Duration::from_millis(1));
        assert!(is_bad_token(
            app.services.refresh(&refresh_request(&s)).await
        ));
    }

    #[tokio::test]
    async fn refreshed_tokens_are_issued_on_the_clock_and_expire_with_it() {
        let app = app().await;
        let s = sign_in(&app, "admin@example.com", "admin-password").await;
        // The first IdToken has expired; the refresh token still works.
        app.advance(Duration::from_secs(5));
        assert!(is_bad_token(
            app.services.authenticate(Some(&s.tokens.id_token))
        ));
        let fresh = app
            .services
            .refresh(&refresh_request(&s))
            .await
            .expect("refreshed");
        let now = app.clock.now_secs();
        let claims = app
            .services
            .tokens
            .verify(&fresh.id_token, TokenUse::Id, now)
            .expect("fresh IdToken verifies");
        assert_eq!(claims.iat, now);
        assert_eq!(claims.exp, now + 2);
        assert_eq!(u64::try_from(START_MS / 1000).ok(), Some(now - 5));
        assert!(app.services.authenticate(Some(&fresh.id_token)).is_ok());
        app.advance(TOKEN_LIFETIME);
        assert!(is_bad_token(
            app.services.authenticate(Some(&fresh.id_token))
        ));
    }

    #[tokio::test]
    async fn after_sign_out_the_id_and_access_tokens_work_only_until_they_expire() {
        let app = app().await;
        let s = sign_in(&app, "admin@example.com", "admin-password").await;
        let earlier = sign_in(&app, "admin@example.com", "admin-password").await;
        app.services
            .sign_out(&sign_out_request(&s))
            .await
            .expect("signed out");
        // Every refresh token of the user is revoked; the tokens still work.
        for session in [&s, &earlier] {
            assert!(is_bad_token(
                app.services.refresh(&refresh_request(session)).await
            ));
            assert!(app
                .services
                .authenticate(Some(&session.tokens.id_token))
                .is_ok());
        }
        assert!(app
            .services
            .sign_out(&sign_out_request(&earlier))
            .await
            .is_ok());
        app.advance(TOKEN_LIFETIME);
        assert!(is_bad_token(
            app.services.authenticate(Some(&s.tokens.id_token))
        ));
        assert!(is_bad_token(
            app.services.sign_out(&sign_out_request(&s)).await
        ));
    }

    #[tokio::test]
    async fn signing_out_revokes_only_the_users_own_refresh_tokens() {
        let app = app().await;
        let admin = sign_in(&app, "admin@example.com", "admin-password").await;
        let eve = sign_in(&app, "eve@acme.example", "eve-password").await;
        app.services
            .sign_out(&sign_out_request(&admin))
            .await
            .expect("signed out");
        assert!(app.services.refresh(&refresh_request(&eve)).await.is_ok());
    }

    #[tokio::test]
    async fn the_caller_is_an_administrator_only_if_the_user_is_one() {
        let app = app().await;
        let admin = sign_in(&app, "admin@example.com", "admin-password").await;
        let eve = sign_in(&app, "eve@acme.example", "eve-password").await;
        let admin = app
            .services
            .authenticate(Some(&admin.tokens.id_token))
            .expect("admin signed in");
        assert!(admin.is_admin);
        assert!(admin.require_admin().is_ok());
        let eve_caller = app
            .services
            .authenticate(Some(&eve.tokens.id_token))
            .expect("eve signed in");
        assert!(!eve_caller.is_admin);
        assert!(matches!(
            eve_caller.require_admin(),
            Err(ServiceError::Forbidden(m)) if m == crate::service::ADMIN_REQUIRED
        ));
        // Refreshed tokens carry the role too.
        let refreshed = app
            .services
            .refresh(&refresh_request(&eve))
            .await
            .expect("refreshed");
        let caller = app
            .services
            .authenticate(Some(&refreshed.id_token))
            .expect("eve signed in");
        assert!(!caller.is_admin);
    }
}
