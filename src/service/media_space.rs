//! What media hold, for the media views: their allocation from the store
//! and what was really written on them, measured from the data plane.

use super::{ServiceResult, Services};
use std::sync::Arc;
use svs_store::MediumUsage;
use tracing::warn;

/// A medium as `GET /media` shows it: its allocation, and the bytes
/// written on it (`None` when it failed or could not be read).
#[derive(Debug, Clone)]
pub struct MediumReport {
    pub usage: MediumUsage,
    pub written_bytes: Option<u64>,
}

impl Services {
    /// Every medium with what is written on it.
    pub async fn media_reports(&self) -> ServiceResult<Vec<MediumReport>> {
        let mut reports = Vec::new();
        for usage in self.list_media().await? {
            reports.push(self.report_medium(usage).await);
        }
        Ok(reports)
    }

    /// One medium with what is written on it.
    pub async fn medium_report(&self, id: &str) -> ServiceResult<MediumReport> {
        Ok(self.report_medium(self.get_medium(id).await?).await)
    }

    /// Measures what is written on the medium (a stat per file of its
    /// volume directories, off the async threads). A failed medium is not
    /// read; one that cannot be read is logged and shown without the figure.
    pub async fn report_medium(&self, usage: MediumUsage) -> MediumReport {
        let written_bytes = if usage.failed {
            None
        } else {
            let dp = Arc::clone(self.exports.data_plane());
            let medium = usage.record.medium.id.clone();
            match tokio::task::spawn_blocking(move || dp.medium_written_bytes(&medium)).await {
                Ok(Ok(bytes)) => Some(bytes),
                Ok(Err(e)) => {
                    warn!(medium = %usage.record.medium.id, error = %e, "cannot measure written bytes");
                    None
                }
                Err(e) => {
                    warn!(medium = %usage.record.medium.id, error = %e, "written bytes task failed");
                    None
                }
            }
        };
        MediumReport {
            usage,
            written_bytes,
        }
    }
}
