//! svs persistence. [`Store`] is the one interface every service uses; the
//! embedded default is [`SqliteStore`]. A PostgreSQL implementation can be
//! added behind the same trait without touching the services or the API.

mod records;
mod sqlite;

pub use records::*;
pub use sqlite::SqliteStore;

use async_trait::async_trait;
use svs_domain::{Gib, JobState, ResizePlan, SlicePlacement, VolumeState};
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
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Everything svs keeps. Methods that change several rows do so in one
/// transaction, so a crash never leaves half a change.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    // ---- users and tokens ----
    async fn user_count(&self) -> StoreResult<u64>;
    /// Creates the tenant when it does not exist yet. Duplicate email → Conflict.
    async fn create_user(&self, user: &NewUser) -> StoreResult<User>;
    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>>;
    async fn user_by_id(&self, id: i64) -> StoreResult<Option<User>>;
    async fn add_refresh_token(&self, token: &NewRefreshToken) -> StoreResult<()>;
    async fn refresh_token(&self, token_hash: &str) -> StoreResult<Option<RefreshTokenRecord>>;
    /// Revokes every refresh token of the user; returns how many were live.
    async fn revoke_refresh_tokens(&self, user_id: i64) -> StoreResult<u64>;

    // ---- media ----
    /// Makes the stored media match the configuration. A medium that holds
    /// slices may not disappear or shrink below its allocations (→ InUse).
    async fn sync_media(&self, media: &[MediumRecord]) -> StoreResult<()>;
    /// Every medium with what is allocated and reserved on it.
    async fn media_usage(&self) -> StoreResult<Vec<MediumUsage>>;
    /// Distinct volumes with a slice on each node (nodes without any: absent).
    async fn node_volume_counts(&self) -> StoreResult<std::collections::HashMap<String, u64>>;

    // ---- nodes ----
    /// Adds configured nodes and media nodes; a configured address replaces
    /// the stored one, otherwise the stored one (set through the API) stays.
    async fn sync_nodes(&self, nodes: &[NodeRecord]) -> StoreResult<()>;
    async fn list_nodes(&self) -> StoreResult<Vec<NodeRecord>>;
    /// NotFound for an unknown node.
    async fn set_node_address(&self, name: &str, address: Option<&str>) -> StoreResult<()>;

    // ---- attachments ----
    /// Records an attachment (state Attaching) and its job together, and
    /// makes the job the volume's current job. Already attached → Conflict.
    async fn create_attachment(&self, attachment: &NewAttachment, job: &NewJob)
        -> StoreResult<i64>;
    /// Attachments of a tenant, of one volume when given.
    async fn list_attachments(
        &self,
        tenant_id: i64,
        volume_id: Option<&str>,
    ) -> StoreResult<Vec<Attachment>>;
    /// Every attachment of every tenant (start-up).
    async fn all_attachments(&self) -> StoreResult<Vec<Attachment>>;
    async fn get_attachment(&self, volume_id: &str, node: &str) -> StoreResult<Option<Attachment>>;
    async fn set_attachment_state(
        &self,
        volume_id: &str,
        node: &str,
        state: &str,
    ) -> StoreResult<()>;
    async fn update_attachment(
        &self,
        volume_id: &str,
        node: &str,
        readonly: bool,
        mountpoint: &str,
    ) -> StoreResult<()>;
    async fn delete_attachment(&self, volume_id: &str, node: &str) -> StoreResult<()>;

    // ---- policies ----
    async fn create_policy(&self, tenant_id: i64, policy: &PolicyWrite) -> StoreResult<Policy>;
    async fn list_policies(&self, tenant_id: i64) -> StoreResult<Vec<Policy>>;
    async fn get_policy(&self, tenant_id: i64, name: &str) -> StoreResult<Option<Policy>>;
    /// Replaces the policy's fields (its name may change). NotFound /
    /// Conflict, or InUse when the resiliency would change under volumes.
    async fn update_policy(
        &self,
        tenant_id: i64,
        name: &str,
        policy: &PolicyWrite,
    ) -> StoreResult<Policy>;
    /// NotFound, or InUse while volumes use it.
    async fn delete_policy(&self, tenant_id: i64, name: &str) -> StoreResult<()>;

    // ---- volumes ----
    /// Inserts the volume (state Creating) and its create job together.
    /// Duplicate name in the tenant → Conflict. Returns the job id.
    async fn create_volume(&self, volume: &NewVolume, job: &NewJob) -> StoreResult<i64>;
    /// By name, else by id, inside the tenant.
    async fn get_volume(&self, tenant_id: i64, name_or_id: &str) -> StoreResult<Option<Volume>>;
    /// By id in any tenant (job runner).
    async fn volume_by_id(&self, id: &str) -> StoreResult<Option<Volume>>;
    async fn list_volumes(&self, tenant_id: i64) -> StoreResult<Vec<Volume>>;
    async fn volume_slices(&self, volume_id: &str) -> StoreResult<Vec<SliceRow>>;
    /// Inserts a job working on an existing volume and makes it the volume's
    /// current job, setting the volume's state.
    async fn start_volume_job(
        &self,
        volume_id: &str,
        state: VolumeState,
        job: &NewJob,
    ) -> StoreResult<i64>;
    /// Records a new volume's placement, unless slices were already recorded
    /// (a resumed job) — then nothing changes. Returns the stored slices.
    async fn place_slices(
        &self,
        volume_id: &str,
        placements: &[SlicePlacement],
    ) -> StoreResult<Vec<SliceRow>>;
    /// Removes a volume and its slices (after its files are gone).
    async fn delete_volume(&self, volume_id: &str) -> StoreResult<()>;

    // ---- jobs ----
    async fn get_job(&self, tenant_id: i64, id: i64) -> StoreResult<Option<Job>>;
    async fn list_jobs(&self, tenant_id: i64, filter: &JobFilter) -> StoreResult<Vec<Job>>;
    /// A job of any tenant (job runner).
    async fn job_by_id(&self, id: i64) -> StoreResult<Option<Job>>;
    /// Pending and Running jobs of every tenant, oldest first (for resuming).
    async fn unfinished_jobs(&self) -> StoreResult<Vec<Job>>;
    /// The unfinished job working on a volume, if any.
    async fn active_volume_job(&self, volume_id: &str) -> StoreResult<Option<Job>>;
    async fn set_job_running(&self, id: i64, now_ms: i64) -> StoreResult<()>;
    async fn set_job_progress(&self, id: i64, progress: u8, status: &str) -> StoreResult<()>;
    async fn add_job_detail(&self, id: i64, detail: &str) -> StoreResult<()>;
    /// Ends a job: state, status, an optional last detail and end time; frees
    /// its reservations; the volume it worked on is no longer busy with it
    /// (a Creating/Resizing volume becomes Ready).
    async fn finish_job(&self, id: i64, end: &JobEnd) -> StoreResult<()>;

    // ---- resize ----
    /// Books the plan's reservations, records its steps and appends `detail`
    /// to the job, in one transaction; a job that already has steps is left
    /// as it is.
    async fn save_resize_plan(
        &self,
        job_id: i64,
        plan: &ResizePlan,
        detail: Option<&str>,
    ) -> StoreResult<()>;
    async fn resize_steps(&self, job_id: i64) -> StoreResult<Vec<ResizeStep>>;
    /// The slice now lives on the move's target (its copy there is verified):
    /// placement switches and the target's reservation shrinks by the old size,
    /// atomically.
    async fn switch_slice(&self, step: &ResizeStep) -> StoreResult<()>;
    /// The move's source file is gone.
    async fn finish_step(&self, step_id: i64) -> StoreResult<()>;
    /// Every slice has grown: the volume takes its new size and the job ends
    /// Done, atomically.
    async fn complete_resize(
        &self,
        job_id: i64,
        volume_id: &str,
        new_size: Gib,
        new_slice_size: Gib,
        end: &JobEnd,
    ) -> StoreResult<()>;
}

/// How a job ends.
#[derive(Debug, Clone)]
pub struct JobEnd {
    pub state: JobState,
    pub status: String,
    pub detail: Option<String>,
    pub now_ms: i64,
}

impl JobEnd {
    /// `Done`, with `detail` as the job's last message.
    pub fn done(detail: String, now_ms: i64) -> JobEnd {
        JobEnd {
            state: JobState::Done,
            status: "Done".into(),
            detail: Some(detail),
            now_ms,
        }
    }

    /// `Error`, with the reason as the job's last message.
    pub fn error(reason: String, now_ms: i64) -> JobEnd {
        JobEnd {
            state: JobState::Error,
            status: "Error".into(),
            detail: Some(reason),
            now_ms,
        }
    }
}

#[cfg(test)]
mod tests;
