//! Sign-in, sign-out and token refresh (seed: POST /signin, POST /signout).

use super::commands::{Refresh, SignIn, SignOut};
use super::throttle::{account_key, Locked};
use super::{Caller, ServiceError, ServiceResult, Services};
use crate::auth::{
    new_refresh_token, refresh_token_hash, CheckError, TokenSet, TokenSubject, TokenUse,
};
use std::net::IpAddr;
use svs_store::{NewRefreshToken, RefreshRotation, User};

/// The answer to a disabled user's sign-in (after its password checked
/// out) and to its tokens.
pub const ACCOUNT_DISABLED: &str = "This account is disabled; ask an administrator to enable it";

pub const BAD_CREDENTIALS: &str = "Incorrect email or password";
pub const BAD_TOKEN: &str = "The token is invalid or has expired";
pub const NOT_SIGNED_IN: &str =
    "Not signed in: send the IdToken from /signin in the authorization header";
pub const PASSWORD_CHECKS_BUSY: &str =
    "Too many sign-ins are being checked at the moment; try again in a second";

/// Tokens for a successful sign-in, or a rotating refresh (a new
/// RefreshToken that replaces the one presented).
pub struct SignedIn {
    pub tokens: TokenSet,
    pub refresh_token: String,
}

fn bad_token() -> ServiceError {
    ServiceError::Unauthorized(BAD_TOKEN.into())
}

/// The token of an `authorization` header value: raw, or after `Bearer `.
pub(crate) fn bearer_token(header: &str) -> &str {
    let header = header.trim();
    match header.split_once(' ') {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim(),
        _ => header,
    }
}

pub(crate) fn too_many(locked: Locked) -> ServiceError {
    svs_common::metrics::METRICS.signin_lockouts.inc();
    let secs = locked.retry_after_secs.max(1);
    ServiceError::TooManyAttempts {
        message: format!(
            "Too many failed attempts; try again in {secs} second{}",
            if secs == 1 { "" } else { "s" }
        ),
        retry_after_secs: secs,
    }
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
            generation: user.token_generation,
        };
        self.tokens
            .issue(&subject, self.clock.now_secs())
            .map_err(|e| ServiceError::Internal(format!("token signing failed: {e}")))
    }

    /// Checks the password on the bounded pool, unless the account or the
    /// client address is locked by earlier failures (then 429 at once,
    /// before any hashing). The attempt counts as a failure while its check
    /// waits, so a burst gets no more checks than guesses one at a time.
    pub async fn sign_in(
        &self,
        request: &SignIn,
        client: Option<IpAddr>,
    ) -> ServiceResult<SignedIn> {
        let account = account_key(&request.email);
        // Counted as a failure from here until the password proves right.
        let attempt = self
            .protection
            .throttle
            .reserve(Some(&account), client, self.clock.now_ms())
            .map_err(too_many)?;
        let user = self.store.user_by_email(request.email.trim()).await?;
        // Verify against a stand-in hash for unknown e-mails: same work, same time.
        let hash = user
            .as_ref()
            .map(|u| u.password_hash.as_str())
            .unwrap_or(self.dummy_hash.as_str());
        let matches = match self
            .protection
            .passwords
            .verify(&request.password, hash)
            .await
        {
            Ok(matches) => matches,
            Err(e) => {
                attempt.not_checked();
                return Err(match e {
                    CheckError::Busy => ServiceError::Busy(PASSWORD_CHECKS_BUSY.into()),
                    CheckError::Stopped => ServiceError::Internal(e.to_string()),
                });
            }
        };
        let user = match user {
            Some(user) if matches => user,
            _ => {
                attempt.failed(self.clock.now_ms());
                svs_common::metrics::METRICS.signin_failures.inc();
                tracing::info!(client = ?client, "sign-in failed");
                return Err(ServiceError::Unauthorized(BAD_CREDENTIALS.into()));
            }
        };
        attempt.succeeded();
        // Told only to whoever knows the password: no account probing.
        if user.disabled {
            tracing::info!(user = user.id, "sign-in of a disabled user refused");
            return Err(ServiceError::Forbidden(ACCOUNT_DISABLED.into()));
        }
        let session = self.start_session(&user).await?;
        tracing::info!(user = user.id, "signed in");
        Ok(session)
    }

    /// Tokens and a new refresh token family for the user (a sign-in).
    pub(crate) async fn start_session(&self, user: &User) -> ServiceResult<SignedIn> {
        let tokens = self.issue(user)?;
        let (refresh_token, token_hash) = new_refresh_token();
        let now = self.clock.now_ms();
        self.store
            .add_refresh_token(&NewRefreshToken {
                user_id: user.id,
                token_hash,
                family: uuid::Uuid::new_v4().simple().to_string(),
                issued_ms: now,
                expires_ms: now.saturating_add(self.refresh_lifetime_ms),
            })
            .await?;
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
            .await
            .ok_or_else(bad_token)?;
        let user_id = claims.user_id().ok_or_else(bad_token)?;
        let revoked = self.store.revoke_refresh_tokens(user_id).await?;
        tracing::info!(user = user_id, revoked, "signed out");
        Ok(())
    }

    /// `POST /refresh`: new IdToken and AccessToken (with the user's current
    /// role) and a new RefreshToken; the one presented is retired. Presenting
    /// a retired one again revokes every token of that sign-in (someone else
    /// holds a copy). Invalid tokens count as failures of the client address.
    pub async fn refresh(
        &self,
        request: &Refresh,
        client: Option<IpAddr>,
    ) -> ServiceResult<SignedIn> {
        // Counted as a failure of the address until the token proves valid.
        let attempt = self
            .protection
            .throttle
            .reserve(None, client, self.clock.now_ms())
            .map_err(too_many)?;
        let (refresh_token, new_hash) = new_refresh_token();
        let rotation = self
            .store
            .rotate_refresh_token(
                &refresh_token_hash(&request.refresh_token),
                &new_hash,
                self.clock.now_ms(),
            )
            .await?;
        let user_id = match rotation {
            RefreshRotation::Rotated { user_id } => user_id,
            RefreshRotation::Reused { user_id, revoked } => {
                tracing::warn!(
                    user = user_id,
                    revoked,
                    client = ?client,
                    "a retired refresh token was presented again: every refresh token of its sign-in is revoked"
                );
                attempt.failed(self.clock.now_ms());
                return Err(bad_token());
            }
            RefreshRotation::Invalid => {
                attempt.failed(self.clock.now_ms());
                return Err(bad_token());
            }
        };
        attempt.succeeded();
        let user = self
            .store
            .user_by_id(user_id)
            .await?
            .filter(|u| !u.disabled)
            .ok_or_else(bad_token)?;
        Ok(SignedIn {
            tokens: self.issue(&user)?,
            refresh_token,
        })
    }

    /// The Volumez refresh (`GET /tenant/apiaccess/credentials/refresh`): its
    /// answer has no RefreshToken, so it does not rotate (the client keeps
    /// using the one it has). A retired token is still reuse.
    pub async fn refresh_without_rotation(
        &self,
        request: &Refresh,
        client: Option<IpAddr>,
    ) -> ServiceResult<TokenSet> {
        let attempt = self
            .protection
            .throttle
            .reserve(None, client, self.clock.now_ms())
            .map_err(too_many)?;
        let now = self.clock.now_ms();
        let record = self
            .store
            .refresh_token(&refresh_token_hash(&request.refresh_token))
            .await?;
        let record = match record {
            Some(r) if !r.revoked && r.expires_ms > now && !r.retired => r,
            other => {
                if let Some(r) = other.filter(|r| r.retired && !r.revoked) {
                    let revoked = self.store.revoke_refresh_family(&r.family).await?;
                    tracing::warn!(
                        user = r.user_id,
                        revoked,
                        client = ?client,
                        "a retired refresh token was presented again: every refresh token of its sign-in is revoked"
                    );
                }
                attempt.failed(self.clock.now_ms());
                return Err(bad_token());
            }
        };
        attempt.succeeded();
        let user = self
            .store
            .user_by_id(record.user_id)
            .await?
            .filter(|u| !u.disabled)
            .ok_or_else(bad_token)?;
        self.issue(&user)
    }

    /// The caller behind an `authorization` header value (raw or `Bearer`).
    /// Only an IdToken is accepted, of a user that exists and is enabled
    /// now, issued since the user's sessions were last ended; the role is
    /// the user's current one (all read from memory: see `users.rs`).
    pub async fn authenticate(&self, header: Option<&str>) -> ServiceResult<Caller> {
        let raw = header
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .ok_or_else(|| ServiceError::Unauthorized(NOT_SIGNED_IN.into()))?;
        let token = bearer_token(raw);
        let claims = self
            .tokens
            .verify(token, TokenUse::Id, self.clock.now_secs())
            .await
            .ok_or_else(bad_token)?;
        let user_id = claims.user_id().ok_or_else(bad_token)?;
        let access = self.user_access(user_id).await?.ok_or_else(bad_token)?;
        if access.disabled {
            return Err(ServiceError::Unauthorized(ACCOUNT_DISABLED.into()));
        }
        if claims.generation < access.token_generation {
            return Err(bad_token());
        }
        Ok(Caller {
            user_id,
            tenant_id: claims.tenant_id,
            email: claims.email.clone(),
            name: claims.name.clone(),
            is_admin: access.is_admin,
        })
    }
}

/// The expiry rules on a clock the tests move (the integration tests in
/// tests/api/control/auth.rs check the same rules on the real binary, sleeping).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::{TestServices, START_MS};
    use std::time::Duration;
    use svs_common::clock::Clock;

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
            .sign_in(
                &SignIn {
                    email: email.into(),
                    password: password.into(),
                },
                None,
            )
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
            assert!(app.services.authenticate(Some(header)).await.is_ok());
        }
        app.advance(Duration::from_millis(1));
        for header in [&raw, &bearer] {
            assert!(is_bad_token(app.services.authenticate(Some(header)).await));
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
        assert!(app
            .services
            .refresh(&refresh_request(&s), None)
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn a_sign_in_can_be_refreshed_until_its_refresh_lifetime_ends() {
        let app = app().await;
        let s = sign_in(&app, "admin@example.com", "admin-password").await;
        app.advance(REFRESH_LIFETIME - Duration::from_millis(1));
        let rotated = app
            .services
            .refresh(&refresh_request(&s), None)
            .await
            .expect("refreshed");
        app.advance(Duration::from_millis(1));
        // The rotated token keeps the sign-in's expiry: no endless session.
        assert!(is_bad_token(
            app.services.refresh(&refresh_request(&rotated), None).await
        ));
    }

    #[tokio::test]
    async fn each_refresh_rotates_and_reusing_a_retired_token_ends_the_sign_in() {
        let app = app().await;
        let s = sign_in(&app, "admin@example.com", "admin-password").await;
        let other = sign_in(&app, "admin@example.com", "admin-password").await;
        let first = app
            .services
            .refresh(&refresh_request(&s), None)
            .await
            .expect("refreshed");
        assert_ne!(first.refresh_token, s.refresh_token);
        let second = app
            .services
            .refresh(&refresh_request(&first), None)
            .await
            .expect("the rotated token works");
        // The first token again: reuse. Every token of that sign-in dies.
        assert!(is_bad_token(
            app.services.refresh(&refresh_request(&s), None).await
        ));
        assert!(is_bad_token(
            app.services.refresh(&refresh_request(&second), None).await
        ));
        // Another sign-in of the same user is not affected.
        assert!(app
            .services
            .refresh(&refresh_request(&other), None)
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn the_volumez_refresh_does_not_rotate_but_detects_reuse() {
        let app = app().await;
        let s = sign_in(&app, "admin@example.com", "admin-password").await;
        for _ in 0..2 {
            let tokens = app
                .services
                .refresh_without_rotation(&refresh_request(&s), None)
                .await
                .expect("the same token works again");
            assert!(app
                .services
                .authenticate(Some(&tokens.id_token))
                .await
                .is_ok());
        }
        let rotated = app
            .services
            .refresh(&refresh_request(&s), None)
            .await
            .expect("refreshed");
        assert!(is_bad_token(
            app.services
                .refresh_without_rotation(&refresh_request(&s), None)
                .await
        ));
        assert!(
            is_bad_token(
                app.services
                    .refresh_without_rotation(&refresh_request(&rotated), None)
                    .await
            ),
            "the reuse revoked the rotated token too"
        );
    }

    #[tokio::test]
    async fn wrong_passwords_lock_the_account_before_any_hashing() {
        let app = app().await;
        let wrong = SignIn {
            email: "Admin@Example.com ".into(),
            password: "wrong-password".into(),
        };
        for _ in 0..6 {
            assert!(matches!(
                app.services.sign_in(&wrong, None).await,
                Err(ServiceError::Unauthorized(m)) if m == BAD_CREDENTIALS
            ));
        }
        let right = SignIn {
            email: "admin@example.com".into(),
            password: "admin-password".into(),
        };
        assert!(matches!(
            app.services.sign_in(&right, None).await,
            Err(ServiceError::TooManyAttempts {
                retry_after_secs: 1,
                ..
            })
        ));
        app.advance(Duration::from_secs(1));
        assert!(app.services.sign_in(&right, None).await.is_ok());
    }

    #[tokio::test]
    async fn invalid_refresh_tokens_lock_the_client_address() {
        let app = app().await;
        let s = sign_in(&app, "admin@example.com", "admin-password").await;
        let client = Some(IpAddr::from([192, 0, 2, 7]));
        let forged = Refresh {
            refresh_token: "not-a-token".into(),
        };
        for _ in 0..21 {
            assert!(is_bad_token(app.services.refresh(&forged, client).await));
        }
        assert!(matches!(
            app.services.refresh(&refresh_request(&s), client).await,
            Err(ServiceError::TooManyAttempts { .. })
        ));
        assert!(app
            .services
            .refresh(&refresh_request(&s), Some(IpAddr::from([192, 0, 2, 8])))
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn refreshed_tokens_are_issued_on_the_clock_and_expire_with_it() {
        let app = app().await;
        let s = sign_in(&app, "admin@example.com", "admin-password").await;
        // The first IdToken has expired; the refresh token still works.
        app.advance(Duration::from_secs(5));
        assert!(is_bad_token(
            app.services.authenticate(Some(&s.tokens.id_token)).await
        ));
        let fresh = app
            .services
            .refresh(&refresh_request(&s), None)
            .await
            .expect("refreshed");
        let now = app.clock.now_secs();
        let claims = app
            .services
            .tokens
            .verify(&fresh.tokens.id_token, TokenUse::Id, now)
            .await
            .expect("fresh IdToken verifies");
        assert_eq!(claims.iat, now);
        assert_eq!(claims.exp, now + 2);
        assert_eq!(u64::try_from(START_MS / 1000).ok(), Some(now - 5));
        assert!(app
            .services
            .authenticate(Some(&fresh.tokens.id_token))
            .await
            .is_ok());
        app.advance(TOKEN_LIFETIME);
        assert!(is_bad_token(
            app.services
                .authenticate(Some(&fresh.tokens.id_token))
                .await
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
                app.services.refresh(&refresh_request(session), None).await
            ));
            assert!(app
                .services
                .authenticate(Some(&session.tokens.id_token))
                .await
                .is_ok());
        }
        assert!(app
            .services
            .sign_out(&sign_out_request(&earlier))
            .await
            .is_ok());
        app.advance(TOKEN_LIFETIME);
        assert!(is_bad_token(
            app.services.authenticate(Some(&s.tokens.id_token)).await
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
        assert!(app
            .services
            .refresh(&refresh_request(&eve), None)
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn the_caller_is_an_administrator_only_if_the_user_is_one() {
        let app = app().await;
        let admin = sign_in(&app, "admin@example.com", "admin-password").await;
        let eve = sign_in(&app, "eve@acme.example", "eve-password").await;
        let admin = app
            .services
            .authenticate(Some(&admin.tokens.id_token))
            .await
            .expect("admin signed in");
        assert!(admin.is_admin);
        assert!(admin.require_admin().is_ok());
        let eve_caller = app
            .services
            .authenticate(Some(&eve.tokens.id_token))
            .await
            .expect("eve signed in");
        assert!(!eve_caller.is_admin);
        assert!(matches!(
            eve_caller.require_admin(),
            Err(ServiceError::Forbidden(m)) if m == crate::service::ADMIN_REQUIRED
        ));
        // Refreshed tokens carry the role too.
        let refreshed = app
            .services
            .refresh(&refresh_request(&eve), None)
            .await
            .expect("refreshed");
        let caller = app
            .services
            .authenticate(Some(&refreshed.tokens.id_token))
            .await
            .expect("eve signed in");
        assert!(!caller.is_admin);
    }
}
