//! The domain services the API calls: each validates input, authorizes by
//! tenant, and talks to the store and the job runner. No HTTP here.

pub mod attachments;
pub mod auth;
pub mod catalog;
pub mod fields;
pub mod policies;
pub mod volumes;

use crate::auth::TokenIssuer;
use crate::exports::ExportRegistry;
use crate::jobs::JobRunner;
use std::sync::Arc;
use svs_domain::{ensure_not_moving, ActiveMovement, BlockedOperation, MovementBlocked};
use svs_store::{Store, StoreError};
use thiserror::Error;

/// Errors of the service layer; the API maps each kind to one status.
#[derive(Debug, Error)]
pub enum ServiceError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Blocked(#[from] MovementBlocked),
    /// Logged with its cause; the client sees a generic message.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<StoreError> for ServiceError {
    fn from(e: StoreError) -> ServiceError {
        match e {
            StoreError::Conflict(m) | StoreError::InUse(m) => ServiceError::Conflict(m),
            StoreError::NotFound => ServiceError::NotFound("not found".into()),
            other => ServiceError::Internal(other.to_string()),
        }
    }
}

pub type ServiceResult<T> = Result<T, ServiceError>;

/// The signed-in user a request acts for.
#[derive(Debug, Clone)]
pub struct Caller {
    pub user_id: i64,
    pub tenant_id: i64,
    pub email: String,
    pub name: String,
}

/// Shared state of the service layer.
pub struct Services {
    pub store: Arc<dyn Store>,
    pub tokens: TokenIssuer,
    pub refresh_lifetime_ms: i64,
    pub jobs: Arc<JobRunner>,
    pub exports: Arc<ExportRegistry>,
    /// `nbd://host:port` of the NBD server, for attachment URIs.
    pub nbd_base: String,
    /// Serialises "check the volume is free, then start a job on it" so two
    /// requests can't both pass the check.
    admission: tokio::sync::Mutex<()>,
    /// Hash verified against when the e-mail is unknown, so a wrong e-mail
    /// costs the same time as a wrong password.
    dummy_hash: String,
}

impl Services {
    pub fn new(
        store: Arc<dyn Store>,
        tokens: TokenIssuer,
        refresh_lifetime_ms: i64,
        jobs: Arc<JobRunner>,
        exports: Arc<ExportRegistry>,
        nbd_base: String,
    ) -> Result<Services, String> {
        let dummy_hash =
            crate::auth::hash_password("svs-timing-equaliser").map_err(|e| e.to_string())?;
        Ok(Services {
            store,
            tokens,
            refresh_lifetime_ms,
            jobs,
            exports,
            nbd_base,
            admission: tokio::sync::Mutex::new(()),
            dummy_hash,
        })
    }

    /// The one place that decides whether an operation is refused because
    /// the volume's data is being moved (seed: the nine blocked operations).
    pub async fn ensure_no_data_movement(
        &self,
        volume_id: &str,
        volume_name: &str,
        op: BlockedOperation,
    ) -> ServiceResult<()> {
        let active = self.store.active_volume_job(volume_id).await?;
        ensure_not_moving(op, moving(active.as_ref(), volume_name).as_ref())?;
        Ok(())
    }

    /// Refuses `op` on a volume that any job is working on: a data movement
    /// through the shared guard (naming the job), any other job with 409.
    pub(crate) async fn ensure_idle(
        &self,
        volume_id: &str,
        volume_name: &str,
        op: BlockedOperation,
    ) -> ServiceResult<()> {
        let Some(job) = self.store.active_volume_job(volume_id).await? else {
            return Ok(());
        };
        ensure_not_moving(op, moving(Some(&job), volume_name).as_ref())?;
        Err(ServiceError::Conflict(format!(
            "volume '{volume_name}' is busy with job {} ({}); try again when it ends",
            job.id, job.kind
        )))
    }
}

/// The data movement a volume's active job is carrying, if it is one.
fn moving(job: Option<&svs_store::Job>, volume_name: &str) -> Option<ActiveMovement> {
    job.filter(|j| j.data_movement).map(|j| ActiveMovement {
        volume_name: volume_name.to_string(),
        job_id: j.id,
    })
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// RFC 3339 UTC time of a millisecond timestamp.
pub fn format_ms(ms: i64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}
