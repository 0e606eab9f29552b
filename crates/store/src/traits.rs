//! The store's interface, one small trait per kind of object. A backend
//! implements each; [`Store`] is all of them together, which is what the
//! services and the job runner hold (`Arc<dyn Store>`).
//!
//! Methods that change several rows do so in one transaction, so a crash
//! never leaves half a change.

use crate::records::*;
use crate::StoreResult;
use async_trait::async_trait;
use std::collections::HashMap;
use svs_domain::{Gib, ResizePlan, SliceMove, SlicePlacement, SnapshotState, VolumeState};

/// Users, their tenants, and refresh tokens.
#[async_trait]
pub trait UserStore: Send + Sync {
    async fn user_count(&self) -> StoreResult<u64>;
    /// Creates the tenant when it does not exist yet. Duplicate email → Conflict.
    async fn create_user(&self, user: &NewUser) -> StoreResult<User>;
    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>>;
    async fn user_by_id(&self, id: i64) -> StoreResult<Option<User>>;
    /// Every user of every tenant, by id.
    async fn list_users(&self) -> StoreResult<Vec<User>>;
    /// Applies the change in one transaction and returns the user as it is
    /// now. NotFound for an unknown id; Conflict ([`LAST_ADMIN`]) when no
    /// enabled administrator would remain, with nothing changed.
    async fn update_user(&self, id: i64, change: &UserChange) -> StoreResult<User>;
    /// Removes the user and its refresh tokens in one transaction (its jobs
    /// keep its name and e-mail). NotFound for an unknown id; Conflict
    /// ([`LAST_ADMIN`]) for the last enabled administrator.
    async fn delete_user(&self, id: i64) -> StoreResult<()>;
    async fn add_refresh_token(&self, token: &NewRefreshToken) -> StoreResult<()>;
    async fn refresh_token(&self, token_hash: &str) -> StoreResult<Option<RefreshTokenRecord>>;
    /// Revokes every refresh token of the user; returns how many were live.
    async fn revoke_refresh_tokens(&self, user_id: i64) -> StoreResult<u64>;
    /// In one transaction: a live token (not revoked, retired or expired at
    /// `now_ms`) is retired and `new_hash` joins its family, for the same
    /// user and with the same expiry; a retired token revokes its whole
    /// family instead.
    async fn rotate_refresh_token(
        &self,
        token_hash: &str,
        new_hash: &str,
        now_ms: i64,
    ) -> StoreResult<RefreshRotation>;
    /// Revokes every token of one sign-in; returns how many were live.
    async fn revoke_refresh_family(&self, family: &str) -> StoreResult<u64>;
    /// Deletes the rows no refresh can use any more: expired at `now_ms`, or
    /// revoked. (Retired rows stay until they expire, for reuse detection.)
    async fn purge_refresh_tokens(&self, now_ms: i64) -> StoreResult<u64>;
}

/// Media (with their usage) and nodes.
#[async_trait]
pub trait MediaStore: Send + Sync {
    /// Makes the configuration-managed media match the configuration; they
    /// are all marked `Config`, also an API-added medium the configuration
    /// now lists (it takes it over). API-managed media the configuration does
    /// not list stay as they are; one a storage node registered may not be
    /// listed (Conflict, nothing changed). A medium that holds slices may not
    /// disappear, move, or shrink below its allocations (→ InUse; the rule
    /// is `svs_domain::media_to_forget`).
    async fn sync_media(&self, media: &[MediumRecord]) -> StoreResult<()>;
    /// Adds an API-managed medium and, when its node does not exist yet,
    /// the node (API-managed, in the medium's zone, without an address).
    /// Conflict when a medium of that id exists, another medium uses the
    /// directory, or the node is in another zone.
    async fn create_medium(&self, medium: &MediumRecord) -> StoreResult<()>;
    /// Sets a medium's size. InUse below what is in use on it (slices,
    /// snapshots, bookings; `svs_domain::check_medium_resize`); NotFound.
    async fn set_medium_size(&self, id: &str, size: Gib) -> StoreResult<()>;
    /// Removes a medium that holds no slice and no booking (else InUse
    /// naming the volumes or jobs: `svs_domain::check_medium_removal`);
    /// returns what it was. NotFound.
    async fn delete_medium(&self, id: &str) -> StoreResult<MediumRecord>;
    /// Removes a node with no media and no attachments (else InUse naming
    /// the volumes or media: `svs_domain::check_node_removal`), and its
    /// agent credential with it. NotFound.
    async fn delete_node(&self, name: &str) -> StoreResult<()>;
    /// Every medium with what is allocated and reserved on it.
    async fn media_usage(&self) -> StoreResult<Vec<MediumUsage>>;
    /// Distinct volumes with a slice on each node (nodes without any: absent).
    async fn node_volume_counts(&self) -> StoreResult<HashMap<String, u64>>;
    /// Adds configured nodes and media nodes and marks them `Config`; a
    /// configured address replaces the stored one, otherwise the stored one
    /// (set through the API) stays. A `Config` node no longer listed is
    /// removed (with its agent credential) when nothing depends on it, else
    /// nothing changes and InUse says what holds it.
    async fn sync_nodes(&self, nodes: &[NodeRecord]) -> StoreResult<()>;
    async fn list_nodes(&self) -> StoreResult<Vec<NodeRecord>>;
    /// Records that a medium failed (its slices are lost); true when it
    /// was not failed before. NotFound for an unknown medium. A storage
    /// node's medium also marks each copy on it lost at `now_ms` with the
    /// generation it missed (as its node going Offline does): a front gave
    /// the node up, and the copies stop taking that front's writes.
    async fn set_medium_failed(&self, id: &str, now_ms: i64) -> StoreResult<bool>;
    /// NotFound for an unknown node.
    async fn set_node_address(&self, name: &str, address: Option<&str>) -> StoreResult<()>;
    /// Adds a node (API-managed); Conflict when one of that name exists.
    async fn create_node(&self, node: &NodeRecord) -> StoreResult<()>;
    /// In one transaction: the medium turns `Draining` (nothing new is
    /// placed on it) and `job`, its `media_drain`, is recorded Pending;
    /// returns (the job, true). While an unfinished drain of the medium
    /// exists, returns (that job, false) and changes nothing, so asking
    /// twice starts one drain. NotFound for an unknown medium; Conflict for
    /// a failed one (its slices are lost: nothing to move).
    async fn drain_medium(&self, id: &str, job: &NewJob) -> StoreResult<(i64, bool)>;
    /// The medium takes new slices again (`Ready`; nothing changes when it
    /// is). NotFound for an unknown medium; Conflict for a failed one, and
    /// while an unfinished drain of it exists (naming the job to cancel:
    /// the drain would go on moving slices off it).
    async fn undrain_medium(&self, id: &str) -> StoreResult<()>;
}

/// Nodes' host agents: their credentials, and what they report.
#[async_trait]
pub trait NodeAgentStore: Send + Sync {
    /// Replaces the node's credential (the previous one stops working).
    /// NotFound for an unknown node.
    async fn set_node_credential(&self, credential: &NodeCredential) -> StoreResult<()>;
    /// Removes the node's credential; false when it had none.
    async fn revoke_node_credential(&self, node: &str) -> StoreResult<bool>;
    /// The live credential with this id.
    async fn node_credential(&self, credential_id: &str) -> StoreResult<Option<NodeCredential>>;
    /// Records an authenticated request of the node's agent.
    async fn touch_node_agent(&self, node: &str, now_ms: i64) -> StoreResult<()>;
    /// Every node that has or had a credential.
    async fn node_agents(&self) -> StoreResult<Vec<NodeAgentRecord>>;
    /// The node's attachments of every tenant, by (volume id, snapshot).
    async fn node_attachments(&self, node: &str) -> StoreResult<Vec<NodeAttachment>>;
    /// Replaces what the agent reported about an attachment. NotFound when
    /// there is no such attachment.
    async fn set_host_report(
        &self,
        volume_id: &str,
        snapshot: &str,
        node: &str,
        report: &HostReport,
    ) -> StoreResult<()>;
}

/// Storage nodes: their registrations and heartbeats, liveness, and the
/// copies on their media.
#[async_trait]
pub trait StorageNodeStore: Send + Sync {
    /// In one transaction: the node becomes (or stays) an Online storage
    /// node at `slice_address`, heard now; each listed medium is created
    /// or resized as a medium it manages (in the node's zone); a Failed
    /// medium of the node comes back when the node was Offline or had
    /// dropped it, after every slice on it is marked lost (so a returning
    /// node's stale copies are never read); a medium it no longer lists is
    /// removed when it holds nothing, else failed with its slices lost.
    /// NotFound for an unknown node; Conflict, with nothing changed, when a
    /// listed medium exists and is not this node's (another node's, the
    /// configuration file's or the API's); InUse, with nothing changed,
    /// when a medium would shrink below what it holds.
    async fn register_storage_node(
        &self,
        registration: &StorageRegistration,
    ) -> StoreResult<StorageRegistered>;
    /// Every node that registered as a storage node, by name.
    async fn storage_nodes(&self) -> StoreResult<Vec<StorageNodeRecord>>;
    /// In one transaction, when the node is an Online storage node last
    /// heard before `heard_before_ms`: it turns Offline, every slice on its
    /// media is marked lost (at `now_ms`) and its media Failed. Returns
    /// the media it failed; None, with nothing changed, otherwise (heard
    /// since, Offline already, not a storage node).
    async fn mark_storage_node_offline(
        &self,
        node: &str,
        heard_before_ms: i64,
        now_ms: i64,
    ) -> StoreResult<Option<Vec<String>>>;
    /// Every copy on the node's media, of every tenant, by volume name,
    /// copy and column.
    async fn node_copies(&self, node: &str) -> StoreResult<Vec<NodeCopy>>;
}

/// Fronts of volumes on storage nodes (setting `fronts = "nodes"`): which
/// node runs a volume's front.
#[async_trait]
pub trait FrontStore: Send + Sync {
    /// Sets (or, with None, clears) the storage node running the volume's
    /// front. NotFound for an unknown volume.
    async fn set_front_node(&self, volume_id: &str, node: Option<&str>) -> StoreResult<()>;
    /// The storage node running the volume's front (None: svs serve runs
    /// it) and its front epoch. NotFound for an unknown volume.
    async fn volume_front(&self, volume_id: &str) -> StoreResult<VolumeFront>;
    /// Clears the volume's front node when it has no attachment left (in
    /// one statement, so an attachment made meanwhile keeps it); true when
    /// it cleared one.
    async fn clear_unattached_front(&self, volume_id: &str) -> StoreResult<bool>;
    /// The fronts wanted of a node: each volume whose front node it is, by
    /// volume id (one without attachments has its front there for a job).
    async fn node_fronts(&self, node: &str) -> StoreResult<Vec<NodeFront>>;
    /// Volumes with a front node and no attachment (a front placed for a
    /// job, or left by one), by id.
    async fn unattached_fronts(&self) -> StoreResult<Vec<String>>;
    /// How many volumes' fronts each node runs (nodes running none: absent).
    async fn front_counts(&self) -> StoreResult<HashMap<String, u64>>;
    /// Replaces what `node` last reported of its open fronts (`open`: the
    /// service's own encoding), for every instance to see.
    async fn set_front_report(&self, node: &str, open: &str, now_ms: i64) -> StoreResult<()>;
    /// Every node's last report: (node, open), by node.
    async fn front_reports(&self) -> StoreResult<Vec<(String, String)>>;
}

/// Policies of a tenant.
#[async_trait]
pub trait PolicyStore: Send + Sync {
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
}

/// Volumes, their slices, and the persisted steps of a resize.
#[async_trait]
pub trait VolumeStore: Send + Sync {
    /// Inserts the volume (state Creating) and its create job together.
    /// Duplicate name in the tenant → Conflict. Returns the job id.
    async fn create_volume(&self, volume: &NewVolume, job: &NewJob) -> StoreResult<i64>;
    /// By name, else by id, inside the tenant.
    async fn get_volume(&self, tenant_id: i64, name_or_id: &str) -> StoreResult<Option<Volume>>;
    /// By id in any tenant (job runner).
    async fn volume_by_id(&self, id: &str) -> StoreResult<Option<Volume>>;
    /// The tenant's volumes by name: all of them, or one page.
    async fn list_volumes(&self, tenant_id: i64, page: Option<Page>) -> StoreResult<Vec<Volume>>;
    /// Every volume of every tenant, by tenant and name (the metrics).
    async fn all_volumes(&self) -> StoreResult<Vec<Volume>>;
    async fn volume_slices(&self, volume_id: &str) -> StoreResult<Vec<SliceRow>>;
    /// Every volume (any tenant) with a slice on one of `media`, with all of
    /// its slices (on any medium), by volume id; its slices by (copy,
    /// column). Two queries at most, whatever the count.
    async fn placed_volumes_on(&self, media: &[String]) -> StoreResult<Vec<PlacedVolume>>;
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
    /// InsufficientSpace, with nothing recorded, when a medium no longer has
    /// room for its slice (checked in the transaction that records them).
    async fn place_slices(
        &self,
        volume_id: &str,
        placements: &[SlicePlacement],
    ) -> StoreResult<Vec<SliceRow>>;
    /// Removes a volume and its slices (after its files are gone).
    async fn delete_volume(&self, volume_id: &str) -> StoreResult<()>;
    /// Replaces a volume's stored attributes. NotFound when it is gone.
    async fn set_volume_attributes(
        &self,
        volume_id: &str,
        attributes: &serde_json::Map<String, serde_json::Value>,
    ) -> StoreResult<()>;
    /// Records what is known of the volume's filesystem: the volume size
    /// (GiB) it fills when that is not the volume's (None: it fills the
    /// volume), and why its last growth failed. NotFound when it is gone.
    async fn set_volume_filesystem(
        &self,
        volume_id: &str,
        size: Option<Gib>,
        error: Option<&str>,
    ) -> StoreResult<()>;
    /// Books the plan's reservations, records its steps and appends `detail`
    /// to the job, in one transaction; a job that already has steps is left
    /// as it is. InsufficientSpace, with nothing recorded, when a medium no
    /// longer has room for what the plan books there.
    async fn save_resize_plan(
        &self,
        job_id: i64,
        plan: &ResizePlan,
        detail: Option<&str>,
    ) -> StoreResult<()>;
    async fn resize_steps(&self, job_id: i64) -> StoreResult<Vec<ResizeStep>>;
    /// The slice now lives on the move's target (its copy there is verified):
    /// placement switches and the target's reservation shrinks by the old size,
    /// atomically. A forward move of a healthy slice books its old size on
    /// the source until the job ends, so that a cancel can always move it
    /// back (an undo step's switch uses that booking up). `details` are
    /// added to the job's in the same transaction: a switch is never
    /// recorded without what it says of the copy.
    async fn switch_slice(&self, step: &ResizeStep, details: &[String]) -> StoreResult<()>;
    /// A cancel's steps moving each switched slice back (`from_medium`: where
    /// it is now; `to_medium`: where it was), recorded unless the job already
    /// has undo steps.
    async fn save_undo_steps(&self, job_id: i64, moves: &[SliceMove]) -> StoreResult<()>;
    /// Records that copy `copy` of column `column` of the volume, on
    /// `medium`, is lost while the medium stays healthy (a file of it gone):
    /// it is listed lost and recovered like a slice on a failed medium. True
    /// when it was not lost before; false, with nothing changed, when it is
    /// lost already or that slice is not on that medium (any more: moved,
    /// rebuilt or its volume deleted). A slice that moves clears it.
    async fn mark_slice_lost(
        &self,
        volume_id: &str,
        copy: u32,
        column: u32,
        medium: &str,
        now_ms: i64,
    ) -> StoreResult<bool>;
    /// Raises the volume's front epoch by one and returns it, durably: two
    /// calls, from any handles, never get the same value. NotFound for an
    /// unknown volume.
    async fn next_front_epoch(&self, volume_id: &str) -> StoreResult<u64>;
    /// Records where the step's copy may resume (`None`: from the start).
    /// Only a step still `planned` keeps one: a switched step has no copy
    /// left to resume.
    async fn record_copy_checkpoint(
        &self,
        step_id: i64,
        checkpoint: Option<CopyCheckpoint>,
    ) -> StoreResult<()>;
    /// The move's source file is gone.
    async fn finish_step(&self, step_id: i64) -> StoreResult<()>;
    /// A copy of the step failed with `cause`: recorded as its last failure,
    /// its count of failures raised. The count now.
    async fn record_step_failure(&self, step_id: i64, cause: &str) -> StoreResult<u32>;
    /// Every slice has grown: the volume takes its new size, while its job
    /// goes on (it waits for a host to grow the filesystem). Repeating it
    /// changes nothing.
    async fn record_resize(
        &self,
        job_id: i64,
        volume_id: &str,
        new_size: Gib,
        new_slice_size: Gib,
    ) -> StoreResult<()>;
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

/// Jobs: their progress, details and end.
#[async_trait]
pub trait JobStore: Send + Sync {
    async fn get_job(&self, tenant_id: i64, id: i64) -> StoreResult<Option<Job>>;
    async fn list_jobs(&self, tenant_id: i64, filter: &JobFilter) -> StoreResult<Vec<Job>>;
    /// A job of any tenant (job runner).
    async fn job_by_id(&self, id: i64) -> StoreResult<Option<Job>>;
    /// Pending and Running jobs of every tenant, oldest first (for resuming).
    async fn unfinished_jobs(&self) -> StoreResult<Vec<Job>>;
    /// The unfinished job working on a volume, if any: one whose object it
    /// is, or one holding it (`hold_volume`); the oldest first.
    async fn active_volume_job(&self, volume_id: &str) -> StoreResult<Option<Job>>;
    /// Records a Pending job that holds no volume (a rebalance: it holds
    /// each volume only while it moves that volume's slices). Returns its id.
    async fn create_job(&self, job: &NewJob) -> StoreResult<i64>;
    /// Makes `job_id` the volume's current job unless another job holds
    /// it, so that no other job starts on the volume while `job_id` moves
    /// its slices; the volume's state stays. True when the job holds it
    /// (now or before); false when another job does or the volume is gone.
    async fn hold_volume(&self, volume_id: &str, job_id: i64) -> StoreResult<bool>;
    /// Frees the volume if `job_id` holds it (else nothing changes); its
    /// state stays. `finish_job` frees whatever the job still holds.
    async fn release_volume(&self, volume_id: &str, job_id: i64) -> StoreResult<()>;
    /// Each distinct slice among the job's steps that still exists, with
    /// its volume, in the order of the job's first step of it: the
    /// volumes a job moving slices of many volumes touches.
    async fn step_slices(&self, job_id: i64) -> StoreResult<Vec<StepSlice>>;
    async fn set_job_running(&self, id: i64, now_ms: i64) -> StoreResult<()>;
    async fn set_job_progress(&self, id: i64, progress: u8, status: &str) -> StoreResult<()>;
    async fn add_job_detail(&self, id: i64, detail: &str) -> StoreResult<()>;
    /// Ends a job: state, status, an optional last detail and end time; frees
    /// its reservations; every volume it worked on or held is no longer busy
    /// with it and takes its state after the job
    /// (`svs_domain::volume_state_after_job`).
    async fn finish_job(&self, id: i64, end: &JobEnd) -> StoreResult<()>;
    /// Asks for the cancel of the tenant's job, unless it ended or committed
    /// (asking twice changes nothing). The job as it is afterwards; None when
    /// the tenant has no such job.
    async fn request_job_cancel(
        &self,
        tenant_id: i64,
        id: i64,
        now_ms: i64,
    ) -> StoreResult<Option<Job>>;
    /// The job passes its point of no return unless a cancel was asked for
    /// first: true when it committed (now or before), false when a cancel
    /// came first. Atomic with `request_job_cancel`.
    async fn commit_job(&self, id: i64) -> StoreResult<bool>;
    /// What steers each of `ids` that exists (its cancel, pause and rate),
    /// by id.
    async fn job_controls(&self, ids: &[i64]) -> StoreResult<Vec<JobControl>>;
    /// Pauses, resumes or sets the copy rate of the tenant's unfinished job
    /// (nothing changes on an ended one). The job as it is afterwards; None
    /// when the tenant has no such job.
    async fn steer_job(
        &self,
        tenant_id: i64,
        id: i64,
        steering: &JobSteering,
        now_ms: i64,
    ) -> StoreResult<Option<Job>>;
    /// Removes the tenant's ended job with its steps; false when it has no
    /// such job or the job has not ended.
    async fn delete_job(&self, tenant_id: i64, id: i64) -> StoreResult<bool>;
    /// Claims up to `limit` unfinished jobs nobody holds (never claimed,
    /// released, or whose lease ran out before `terms.now_ms`), oldest first:
    /// each gets `terms.owner`, its next epoch and a lease until `now_ms +
    /// ttl_ms`. Several instances claiming at once never claim one job twice.
    async fn claim_jobs(&self, terms: &LeaseTerms<'_>, limit: usize) -> StoreResult<Vec<JobLease>>;
    /// Claims one job the same way; None when it is finished, gone or held.
    async fn claim_job(&self, id: i64, terms: &LeaseTerms<'_>) -> StoreResult<Option<JobLease>>;
    /// Extends every lease of `leases` that `terms.owner` still holds, and
    /// returns the ids of those it no longer holds (taken over, or the job
    /// ended): their work must stop.
    async fn renew_job_leases(
        &self,
        leases: &[JobLease],
        terms: &LeaseTerms<'_>,
    ) -> StoreResult<Vec<i64>>;
    /// Gives a job's lease up, leaving the job unfinished for any instance to
    /// claim at once (a pause at shutdown). Nothing when not held any more.
    async fn release_job_lease(&self, lease: &JobLease) -> StoreResult<()>;
    /// Ends every job lease. Only for the one process a database can have
    /// (SQLite: its data directory lock proves an earlier owner is dead),
    /// so that its jobs resume at start without waiting out the leases.
    async fn end_all_job_leases(&self) -> StoreResult<u64>;
}

/// Named leases held by one instance at a time (the reconcilers' leader).
#[async_trait]
pub trait LeaseStore: Send + Sync {
    /// Takes or renews the lease `name` for `terms.owner` until `now_ms +
    /// ttl_ms` when it is free, ran out, or is already the owner's. Returns
    /// its epoch when granted (bumped whenever it changes hands), None while
    /// another owner's lease runs.
    async fn acquire_lease(&self, name: &str, terms: &LeaseTerms<'_>) -> StoreResult<Option<i64>>;
    /// Gives the lease up if `owner` holds it (another instance may take it
    /// at once).
    async fn release_lease(&self, name: &str, owner: &str) -> StoreResult<()>;
}

/// The keys that sign tokens, in the database so that every instance signs
/// and verifies with the same ones.
#[async_trait]
pub trait SigningKeyStore: Send + Sync {
    /// Every stored key, the current one first.
    async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRecord>>;
    /// Stores `key` as the current key unless there is one already, and
    /// returns the current key either way (instances starting at once on a
    /// new database agree on one key).
    async fn ensure_signing_key(&self, key: &SigningKeyRecord) -> StoreResult<SigningKeyRecord>;
    /// In one transaction: retires the current key at `key.created_ms`,
    /// makes `key` current, and drops keys retired before `drop_before_ms`.
    async fn rotate_signing_key(
        &self,
        key: &SigningKeyRecord,
        drop_before_ms: i64,
    ) -> StoreResult<()>;
}

/// Attachments of volumes to nodes.
#[async_trait]
pub trait AttachmentStore: Send + Sync {
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
    /// `snapshot` is `top` (the live volume) or a snapshot's id.
    async fn get_attachment(
        &self,
        volume_id: &str,
        snapshot: &str,
        node: &str,
    ) -> StoreResult<Option<Attachment>>;
    async fn set_attachment_state(
        &self,
        volume_id: &str,
        snapshot: &str,
        node: &str,
        state: &str,
    ) -> StoreResult<()>;
    async fn update_attachment(
        &self,
        volume_id: &str,
        snapshot: &str,
        node: &str,
        readonly: bool,
        mountpoint: &str,
    ) -> StoreResult<()>;
    async fn delete_attachment(
        &self,
        volume_id: &str,
        snapshot: &str,
        node: &str,
    ) -> StoreResult<()>;
}

/// Snapshots of volumes.
#[async_trait]
pub trait SnapshotStore: Send + Sync {
    /// Records a snapshot (state Creating) and its job together, and makes
    /// the job the volume's current job. Duplicate name on the volume →
    /// Conflict. Returns the job id.
    async fn create_snapshot(&self, snapshot: &NewSnapshot, job: &NewJob) -> StoreResult<i64>;
    /// Snapshots of a tenant, of one volume when given; oldest first.
    async fn list_snapshots(
        &self,
        tenant_id: i64,
        volume_id: Option<&str>,
    ) -> StoreResult<Vec<Snapshot>>;
    /// Every snapshot of a volume, any tenant (jobs), oldest first.
    async fn volume_snapshots(&self, volume_id: &str) -> StoreResult<Vec<Snapshot>>;
    /// By name, else by id, on the volume.
    async fn get_snapshot(
        &self,
        volume_id: &str,
        name_or_id: &str,
    ) -> StoreResult<Option<Snapshot>>;
    /// By id (jobs).
    async fn snapshot_by_id(&self, id: &str) -> StoreResult<Option<Snapshot>>;
    /// Inserts a job working on a snapshot's volume, makes it the volume's
    /// current job and, when given, sets the snapshot's state.
    async fn start_snapshot_job(
        &self,
        snapshot_id: &str,
        state: Option<SnapshotState>,
        job: &NewJob,
    ) -> StoreResult<i64>;
    async fn set_snapshot_state(&self, id: &str, state: SnapshotState) -> StoreResult<()>;
    /// Renames the snapshot and replaces its stored fields. Conflict on a
    /// duplicate name, NotFound.
    async fn update_snapshot(
        &self,
        id: &str,
        name: &str,
        attributes: &serde_json::Map<String, serde_json::Value>,
    ) -> StoreResult<()>;
    /// Records what the snapshots hold: per snapshot, and per medium.
    async fn set_snapshot_usage(
        &self,
        per_snapshot: &[(String, u64)],
        per_medium: &[(String, u64)],
    ) -> StoreResult<()>;
    /// Removes the snapshot's record and its attachments.
    async fn delete_snapshot(&self, id: &str) -> StoreResult<()>;
}

/// What one instance hears of the others' announcements (see
/// `StoreLifecycle::announcements`).
#[async_trait]
pub trait AnnouncementStream: Send {
    /// The next announcement; `Heard::Missed` when some may have been lost.
    async fn next(&mut self) -> StoreResult<Heard>;
}

/// The announcements one instance hears from the others.
pub type Announcements = Box<dyn AnnouncementStream>;

/// The store as a whole: opened at start-up, closed at shutdown.
#[async_trait]
pub trait StoreLifecycle: Send + Sync {
    /// Releases connections once nothing uses the store any more. Backends
    /// holding nothing to release keep this default.
    async fn close(&self) {}
    /// Answers once the database does (a trivial query), for `GET /readyz`.
    async fn ping(&self) -> StoreResult<()>;
    /// Tells every other instance on this database that `topic` changed
    /// (after the change committed). Nothing where no other instance can
    /// be (SQLite).
    async fn announce(&self, _topic: &str) -> StoreResult<()> {
        Ok(())
    }
    /// Hears the other instances' announcements on `topics`; None where no
    /// other instance can be.
    async fn announcements(&self, _topics: &[&str]) -> StoreResult<Option<Announcements>> {
        Ok(None)
    }
}

/// Everything svs keeps: every object's trait, in one. Implemented for any
/// type implementing them all, so a backend implements only the small traits.
pub trait Store:
    UserStore
    + MediaStore
    + PolicyStore
    + VolumeStore
    + JobStore
    + AttachmentStore
    + SnapshotStore
    + NodeAgentStore
    + StorageNodeStore
    + FrontStore
    + LeaseStore
    + SigningKeyStore
    + StoreLifecycle
    + 'static
{
}

impl<T> Store for T where
    T: UserStore
        + MediaStore
        + PolicyStore
        + VolumeStore
        + JobStore
        + AttachmentStore
        + SnapshotStore
        + NodeAgentStore
        + StorageNodeStore
        + FrontStore
        + LeaseStore
        + SigningKeyStore
        + StoreLifecycle
        + 'static
{
}
