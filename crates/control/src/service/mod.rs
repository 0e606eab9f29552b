//! The use cases the API calls. Each takes typed input (`commands`) and
//! the caller, authorizes by tenant (and role), applies the rules that need
//! the store, talks to the store and the job runner, and returns records.
//! No HTTP and no JSON here (except converting the store's attribute maps,
//! in `attributes`).

mod admission;
pub mod agents;
pub mod attachments;
/// Stored volume and policy fields (a layer below, shared with the jobs).
pub use crate::attributes;
pub mod auth;
pub mod commands;
pub mod fronts;
pub mod jobs;
pub mod media;
pub mod metrics;
pub mod nodes;
pub mod policies;
pub mod relocation;
pub mod snapshots;
pub mod storage_nodes;
#[cfg(test)]
pub(crate) mod testing;
pub mod throttle;
pub mod users;
pub mod volume_facts;
pub mod volumes;

use crate::auth::{PasswordCheckPool, TokenIssuer};
use crate::front_layout::ExportRegistry;
use crate::jobs::JobRunner;
use std::sync::Arc;
use svs_common::clock::Clock;
use svs_domain::MovementBlocked;
use svs_store::{Store, StoreError};
use thiserror::Error;

/// Errors of the service layer; the API maps each kind to one status.
#[derive(Debug, Error)]
pub enum ServiceError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    /// Signed in, but the operation needs a role the caller lacks.
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Blocked(#[from] MovementBlocked),
    /// Too many failed attempts from this client or for this account:
    /// refused, without any work, until the lock ends.
    #[error("{message}")]
    TooManyAttempts {
        message: String,
        retry_after_secs: u64,
    },
    /// Overloaded for a moment (the password checks' queue is full).
    #[error("{0}")]
    Busy(String),
    /// Logged with its cause; the client sees a generic message.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<StoreError> for ServiceError {
    fn from(e: StoreError) -> ServiceError {
        match e {
            StoreError::Conflict(m) | StoreError::InUse(m) => ServiceError::Conflict(m),
            StoreError::NotFound => ServiceError::NotFound("not found".into()),
            // The database is away, busy or out of connections for now: 503
            // (the client may retry), the cause in the log.
            other if other.is_transient() => {
                tracing::warn!(error = %other, "the database does not answer");
                ServiceError::Busy(DATABASE_UNAVAILABLE.into())
            }
            other => ServiceError::Internal(other.to_string()),
        }
    }
}

pub type ServiceResult<T> = Result<T, ServiceError>;

/// The message of a request the database could not serve for now.
pub const DATABASE_UNAVAILABLE: &str = "the database does not answer for now; try again shortly";

pub const ADMIN_REQUIRED: &str = "this operation requires an administrator";

/// The signed-in user a request acts for.
#[derive(Debug, Clone)]
pub struct Caller {
    pub user_id: i64,
    pub tenant_id: i64,
    pub email: String,
    pub name: String,
    /// The user's role now (read at each request, not from the token's
    /// `admin` claim): a changed role takes effect at once.
    pub is_admin: bool,
}

impl Caller {
    /// The caller as an administrator, or 403.
    pub fn require_admin(self) -> ServiceResult<Administrator> {
        if self.is_admin {
            Ok(Administrator(self))
        } else {
            Err(ServiceError::Forbidden(ADMIN_REQUIRED.into()))
        }
    }
}

/// A caller known to be an administrator. Only `Caller::require_admin`
/// makes one, so a service that takes it cannot be reached by anyone else.
#[derive(Debug, Clone)]
pub struct Administrator(Caller);

impl Administrator {
    pub fn caller(&self) -> &Caller {
        &self.0
    }
}

/// Brute-force protection of sign-in and refresh: failure counters, and
/// the bounded pool that checks passwords.
pub struct SignInProtection {
    pub throttle: throttle::SignInThrottle,
    pub passwords: PasswordCheckPool,
}

/// What signs in and issues tokens (`Services::new` takes them together).
pub struct AuthParts {
    pub tokens: TokenIssuer,
    pub refresh_lifetime_ms: i64,
    pub protection: SignInProtection,
}

/// Shared state of the service layer.
pub struct Services {
    pub store: Arc<dyn Store>,
    /// Every timestamp and expiry check reads this clock.
    pub clock: Arc<dyn Clock>,
    pub tokens: TokenIssuer,
    pub refresh_lifetime_ms: i64,
    pub protection: SignInProtection,
    pub jobs: Arc<JobRunner>,
    pub exports: Arc<ExportRegistry>,
    /// `nbd://host:port` of the NBD server, for attachment URIs.
    pub nbd_base: String,
    /// A storage node silent this long is Offline (setting
    /// `storage_node_timeout`); its heartbeat period derives from it.
    pub storage_node_timeout: std::time::Duration,
    /// Setting `storage_nodes_only`: every medium is a storage node's, so
    /// none may be added through the API.
    pub storage_nodes_only: bool,
    /// TLS of the slice protocol: how the data plane reaches storage
    /// nodes, and the slice certificates issued to them.
    pub slice_tls: Arc<svs_common::slice_tls::SliceTls>,
    /// Setting `metrics_token`: scrapes of `GET /metrics` that send it need
    /// no IdToken.
    pub metrics_token: Option<String>,
    /// Serialises "check the volume is free, then start a job on it" so two
    /// requests can't both pass the check.
    admission: tokio::sync::Mutex<()>,
    /// Hash verified against when the e-mail is unknown, so a wrong e-mail
    /// costs the same time as a wrong password.
    dummy_hash: String,
    /// Each user's state as every authenticated request checks it.
    user_access: users::UserAccessCache,
    /// Serialises changes of users (see `Services::change_user`).
    user_changes: tokio::sync::Mutex<()>,
}

impl Services {
    /// For a store other instances share (PostgreSQL): users' state is read
    /// from the store at every request instead of remembered, since other
    /// instances change it too (see `users::UserAccessCache`).
    pub fn share_user_state(&mut self) {
        self.user_access = users::UserAccessCache::off();
    }

    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        auth: AuthParts,
        jobs: Arc<JobRunner>,
        exports: Arc<ExportRegistry>,
        nbd_base: String,
    ) -> Result<Services, String> {
        let AuthParts {
            tokens,
            refresh_lifetime_ms,
            protection,
        } = auth;
        let dummy_hash =
            crate::auth::hash_password("svs-timing-equaliser").map_err(|e| e.to_string())?;
        Ok(Services {
            store,
            clock,
            tokens,
            refresh_lifetime_ms,
            protection,
            jobs,
            exports,
            nbd_base,
            storage_node_timeout: storage_nodes::DEFAULT_STORAGE_NODE_TIMEOUT,
            storage_nodes_only: false,
            slice_tls: Arc::new(svs_common::slice_tls::SliceTls::off()),
            metrics_token: None,
            admission: tokio::sync::Mutex::new(()),
            dummy_hash,
            user_access: users::UserAccessCache::default(),
            user_changes: tokio::sync::Mutex::new(()),
        })
    }
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
