//! The store's one error type. It names no database type: sqlx's errors
//! become these kinds in `sql/errors.rs`.

use std::error::Error as StdError;
use svs_domain::{InsufficientSpace, MediaChangeRefused, PolicyInUse};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum StoreError {
    /// A uniqueness rule was broken (duplicate name or email).
    #[error("{0}")]
    Conflict(String),
    /// The object to change does not exist.
    #[error("not found")]
    NotFound,
    /// The object is referenced and cannot be removed.
    #[error("{0}")]
    InUse(String),
    /// Stored data does not parse: a bug or a damaged database.
    #[error("stored data is invalid: {0}")]
    Corrupt(String),
    /// A booking would over-book this medium: the free space its plan was
    /// computed from has been taken meanwhile. Nothing was booked.
    #[error("medium '{medium}' no longer has room for this plan")]
    InsufficientSpace { medium: String },
    /// The backend failed. `transient` when the same call may succeed if
    /// retried: the database was busy or locked, no connection was free in
    /// time, or I/O failed.
    #[error("database error: {source}")]
    Backend {
        transient: bool,
        source: Box<dyn StdError + Send + Sync>,
    },
    /// A job's write refused: its lease (this epoch) was taken over by
    /// another claim, so this instance no longer works on the job (see
    /// `fence`). Never transient: the work must stop.
    #[error("job {job_id}'s lease (epoch {epoch}) was taken over by another instance")]
    Fenced { job_id: i64, epoch: i64 },
    /// The schema could not be brought up to date.
    #[error("database migration failed: {0}")]
    Migrate(String),
}

impl StoreError {
    /// A backend failure; see [`StoreError::Backend`].
    pub fn backend(transient: bool, source: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        StoreError::Backend {
            transient,
            source: source.into(),
        }
    }

    /// Whether retrying the same call may succeed. Only backend failures such
    /// as a busy database are; a broken rule or missing object never is.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            StoreError::Backend {
                transient: true,
                ..
            }
        )
    }
}

impl From<InsufficientSpace> for StoreError {
    fn from(e: InsufficientSpace) -> Self {
        StoreError::InsufficientSpace { medium: e.medium }
    }
}

impl From<PolicyInUse> for StoreError {
    fn from(e: PolicyInUse) -> Self {
        StoreError::InUse(e.to_string())
    }
}

impl From<MediaChangeRefused> for StoreError {
    fn from(e: MediaChangeRefused) -> Self {
        StoreError::InUse(e.to_string())
    }
}

pub type StoreResult<T> = Result<T, StoreError>;
