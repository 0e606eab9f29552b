//! The controller plugin's session with svs: signs in as its user at
//! start, renews the IdToken with the RefreshToken before it expires, and
//! signs in again when the refresh is refused (revoked, expired).

use svs_client::api::{Api, REFRESH_MARGIN_SECS};
use svs_client::credentials::now_secs;
use svs_client::Result;
use svs_wire::views::SignedInView;
use tokio::sync::Mutex;

/// The tokens of one sign-in.
struct Tokens {
    /// Authorized with the IdToken.
    api: Api,
    refresh_token: String,
    expires_at: u64,
}

pub struct Session {
    url: String,
    email: String,
    password: String,
    tokens: Mutex<Option<Tokens>>,
}

impl Session {
    /// Checks the URL; signs in on first use.
    pub fn new(url: &str, email: &str, password: &str) -> Result<Session> {
        let base = Api::new(url)?;
        Ok(Session {
            url: base.base().to_string(),
            email: email.to_string(),
            password: password.to_string(),
            tokens: Mutex::new(None),
        })
    }

    fn tokens_from(&self, answer: SignedInView) -> Result<Tokens> {
        Ok(Tokens {
            api: Api::new(&self.url)?.with_token(&answer.IdToken),
            refresh_token: answer.RefreshToken,
            expires_at: now_secs().saturating_add(answer.ExpiresIn),
        })
    }

    async fn sign_in(&self) -> Result<Tokens> {
        let answer = Api::new(&self.url)?
            .sign_in(&self.email, &self.password)
            .await?;
        self.tokens_from(answer)
    }

    /// A client with a valid IdToken: renewed when it expires within
    /// [`REFRESH_MARGIN_SECS`], or from a new sign-in when the refresh
    /// fails.
    pub async fn api(&self) -> Result<Api> {
        let mut guard = self.tokens.lock().await;
        let fresh = match guard.take() {
            None => self.sign_in().await?,
            Some(t) if now_secs().saturating_add(REFRESH_MARGIN_SECS) < t.expires_at => t,
            Some(t) => {
                let refreshed = match Api::new(&self.url)?.refresh(&t.refresh_token).await {
                    Ok(answer) => self.tokens_from(answer),
                    Err(e) => Err(e),
                };
                match refreshed {
                    Ok(t) => t,
                    Err(e) => {
                        tracing::info!(error = %e, "token refresh refused; signing in again");
                        self.sign_in().await?
                    }
                }
            }
        };
        let api = fresh.api.clone();
        *guard = Some(fresh);
        Ok(api)
    }

    /// Forgets the tokens (the server answered 401): the next call signs
    /// in again.
    pub async fn forget(&self) {
        *self.tokens.lock().await = None;
    }
}
