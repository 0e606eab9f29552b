//! `GET /metrics` (an administrator's IdToken, or the scrape token) and a
//! volume's recent I/O for the console (docs/metrics.md).

use super::{Caller, ServiceResult, Services};
use crate::metrics_scrape::scrape_families;
use sha2::{Digest, Sha256};
use svs_common::metrics::{IoSample, METRICS};

impl Services {
    /// The metrics in the text format, to the scrape token or an
    /// administrator.
    pub async fn metrics_text(&self, authorization: Option<&str>) -> ServiceResult<String> {
        if !self.is_scrape_token(authorization) {
            self.authenticate(authorization).await?.require_admin()?;
        }
        self.render_metrics().await
    }

    /// The metrics, to whoever reaches `metrics_listen`.
    pub async fn render_metrics(&self) -> ServiceResult<String> {
        let families = scrape_families(self.store.as_ref()).await?;
        Ok(METRICS.render(families))
    }

    /// Whether the header carries the scrape token (compared by digest:
    /// the time taken says nothing about how much of it matched).
    fn is_scrape_token(&self, authorization: Option<&str>) -> bool {
        let (Some(token), Some(header)) = (&self.metrics_token, authorization) else {
            return false;
        };
        let sent = super::auth::bearer_token(header);
        Sha256::digest(sent.as_bytes()) == Sha256::digest(token.trim().as_bytes())
    }

    /// What the caller's volume did over the last minutes, served here (none
    /// when it was not).
    pub async fn volume_iostats(
        &self,
        caller: &Caller,
        name: &str,
    ) -> ServiceResult<Vec<IoSample>> {
        let volume = self.get_volume(caller, name).await?;
        Ok(METRICS.volume_io.samples(&volume.id))
    }
}
