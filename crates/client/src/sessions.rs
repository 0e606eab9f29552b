//! `svs login` and `svs logout`: the stored sessions every other command
//! signs in with.

use super::api::{sign_in, Api};
use super::context::{emit, Context};
use super::error::{ClientError, Result};
use super::output::{self, OutputFormat};
use serde_json::json;

impl Context {
    pub async fn login(&self, url: &str, email: &str, password: &str) -> Result<()> {
        let profile = sign_in(url, email, password).await?;
        let base = profile.url.clone();
        self.store.put(&self.profile, profile)?;
        match self.output {
            OutputFormat::Json => emit(&output::render_json(
                &json!({"url": base, "email": email, "profile": self.profile}),
            )),
            OutputFormat::Table => emit(&format!(
                "Signed in to {base} as {email} (profile \"{}\")\n",
                self.profile
            )),
        }
        Ok(())
    }

    /// Signs out on the server (revoking the refresh tokens) and forgets
    /// the profile's tokens, even when the server call fails.
    pub async fn logout(&self) -> Result<()> {
        let session = self.session().await;
        let server = match &session {
            Ok(s) => Api::new(&s.profile.url)?
                .sign_out(&s.profile.access_token)
                .await
                .map(|_| ()),
            Err(ClientError::NotSignedIn { .. }) => return session.map(|_| ()),
            // Refresh refused: the session is over anyway.
            Err(_) => Ok(()),
        };
        self.store.remove(&self.profile)?;
        server?;
        if self.output == OutputFormat::Table {
            emit(&format!("Signed out (profile \"{}\")\n", self.profile));
        }
        Ok(())
    }
}
