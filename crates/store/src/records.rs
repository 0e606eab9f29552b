//! Rows as the services see them.

use serde_json::{Map, Value};
use svs_domain::svs_names;
pub use svs_domain::CredentialRole;
use svs_domain::{
    AttachmentManager, Consistency, Gib, JobKind, JobSpec, JobSpecError, JobState, Resiliency,
    Slice, SnapshotState, VolumeState, VolumeType,
};

#[derive(Debug, Clone)]
pub struct NewUser {
    pub tenant: String,
    pub email: String,
    pub name: String,
    pub password_hash: String,
    pub is_admin: bool,
    pub now_ms: i64,
}

#[derive(Debug, Clone)]
pub struct User {
    pub id: i64,
    pub tenant_id: i64,
    pub tenant: String,
    pub email: String,
    pub name: String,
    pub password_hash: String,
    pub is_admin: bool,
    /// Cannot sign in, and its tokens are refused.
    pub disabled: bool,
    /// Tokens issued under an older generation are refused: raised when
    /// the user is disabled or its password is reset.
    pub token_generation: i64,
    pub created_ms: i64,
}

/// A change to a user, applied by `UserStore::update_user` in one
/// transaction. `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct UserChange {
    pub disabled: Option<bool>,
    pub is_admin: Option<bool>,
    pub password_hash: Option<String>,
    /// Revoke every refresh token of the user and raise its token
    /// generation (every IdToken and AccessToken issued so far is refused).
    pub end_sessions: bool,
}

/// The message of the conflict `update_user` and `delete_user` answer when
/// the change would leave no enabled administrator.
pub const LAST_ADMIN: &str =
    "this would leave no enabled administrator: make another user an administrator first";

#[derive(Debug, Clone)]
pub struct NewRefreshToken {
    pub user_id: i64,
    pub token_hash: String,
    /// The sign-in this token descends from (rotation keeps it).
    pub family: String,
    pub issued_ms: i64,
    pub expires_ms: i64,
}

#[derive(Debug, Clone)]
pub struct RefreshTokenRecord {
    pub user_id: i64,
    pub family: String,
    pub expires_ms: i64,
    pub revoked: bool,
    /// Used once already by a refresh that rotated it.
    pub retired: bool,
}

/// What presenting a refresh token to a rotating refresh did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefreshRotation {
    /// The token was live: it is retired and the new one took its place.
    Rotated { user_id: i64 },
    /// The token had been retired already: its whole family was revoked.
    Reused { user_id: i64, revoked: u64 },
    /// Unknown, expired or revoked: nothing changed.
    Invalid,
}

/// Defined with the rules that check a media configuration; re-exported so
/// the store's callers find every record here.
pub use svs_domain::MediumRecord;

/// Who manages a medium or node; re-exported like `MediumRecord`.
pub use svs_domain::ManagedBy;

#[derive(Debug, Clone)]
pub struct MediumUsage {
    pub record: MediumRecord,
    /// Sum of the sizes of slices placed on it.
    pub allocated: Gib,
    /// Space booked by running jobs.
    pub reserved: Gib,
    /// Distinct volumes with a slice on it.
    pub volumes_count: u64,
    /// Bytes snapshots hold on it, as last measured.
    pub snapshot_bytes: u64,
    /// Its slices are lost; nothing is placed on it.
    pub failed: bool,
    /// Being drained (state `Draining`): its slices move off and nothing
    /// new is placed on it, until it is undrained.
    pub draining: bool,
    /// The configuration file or the API.
    pub managed_by: ManagedBy,
}

impl MediumUsage {
    /// Whole GiB held by snapshots.
    pub fn snapshot_gib(&self) -> Gib {
        self.snapshot_bytes.div_ceil(svs_domain::GIB)
    }

    pub fn used(&self) -> Gib {
        self.allocated + self.reserved + self.snapshot_gib()
    }

    pub fn free(&self) -> Gib {
        self.record.medium.size.saturating_sub(self.used())
    }
}

/// Fields of a policy being created or replaced.
#[derive(Debug, Clone)]
pub struct PolicyWrite {
    pub name: String,
    pub resiliency: Resiliency,
    /// Every other accepted field (reference names), stored as given.
    pub attributes: Map<String, Value>,
    pub by_name: String,
    pub by_email: String,
    pub now_ms: i64,
}

#[derive(Debug, Clone)]
pub struct Policy {
    pub id: i64,
    pub name: String,
    pub resiliency: Resiliency,
    pub attributes: Map<String, Value>,
    pub created_ms: i64,
    pub created_by_name: String,
    pub created_by_email: String,
    pub updated_ms: Option<i64>,
    pub updated_by_name: Option<String>,
    pub updated_by_email: Option<String>,
}

#[derive(Debug, Clone)]
pub struct NewVolume {
    pub id: String,
    pub tenant_id: i64,
    pub name: String,
    pub kind: VolumeType,
    pub size: Gib,
    pub policy_id: i64,
    pub zone: Option<String>,
    pub attributes: Map<String, Value>,
    pub now_ms: i64,
}

#[derive(Debug, Clone)]
pub struct Volume {
    pub id: String,
    pub tenant_id: i64,
    pub name: String,
    pub kind: VolumeType,
    pub size: Gib,
    pub policy: String,
    pub resiliency: Resiliency,
    pub zone: Option<String>,
    pub attributes: Map<String, Value>,
    pub state: VolumeState,
    /// The unfinished job working on the volume, with its progress and status.
    pub job: Option<(i64, u8, String)>,
    /// Node and zone of the first slice of copy 0.
    pub first_node: Option<String>,
    pub first_zone: Option<String>,
    /// Slices lost: on failed media, or marked lost themselves.
    pub lost_slices: u64,
    /// Columns whose every copy is lost (their data is gone).
    pub lost_columns: u64,
    /// The running `volume_recovery` job, if that is the volume's job.
    pub recovery_job: Option<i64>,
    /// The volume size (GiB) its filesystem was last grown to fill, when a
    /// growth failed and it does not fill the volume; None: it fills it.
    pub filesystem_size: Option<Gib>,
    /// Why the last growth of its filesystem failed (with `filesystem_size`).
    pub filesystem_error: Option<String>,
    pub created_ms: i64,
}

/// A slice with where its medium is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceRow {
    pub slice: Slice,
    pub node: String,
    pub zone: String,
    /// The slice is lost: its medium failed, or this copy was found lost
    /// on a healthy medium (see `VolumeStore::mark_slice_lost`).
    pub lost: bool,
    /// A copy marked lost: the generation (the volume's front epoch) it
    /// missed, the one whose front stopped writing to it. None while it
    /// is not marked lost (also for a copy lost only with its failed
    /// medium). A stale copy is never read until it is rebuilt.
    pub stale_generation: Option<u64>,
}

/// A volume with every one of its slices, as the drain and rebalance
/// planners read it (`VolumeStore::placed_volumes_on`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedVolume {
    pub volume_id: String,
    pub name: String,
    /// Its policy's resiliency.
    pub resiliency: Resiliency,
    /// The zone copy 0 is kept in, if the volume has one.
    pub zone: Option<String>,
    /// Exactly what `volume_slices(volume_id)` answers for it (same
    /// SliceRow values: node, zone, lost, stale_generation).
    pub slices: Vec<SliceRow>,
}

#[derive(Debug, Clone)]
pub struct NewJob {
    pub tenant_id: i64,
    /// The kind and its arguments; a resize allowing data movement marks
    /// the job as one (it blocks the seed's nine operations).
    pub spec: JobSpec,
    pub object: String,
    pub user_id: i64,
    pub username: String,
    pub useremail: String,
    pub now_ms: i64,
}

#[derive(Debug, Clone)]
pub struct Job {
    pub id: i64,
    pub tenant_id: i64,
    pub kind: String,
    /// The id of the volume the job works on (a drain's medium, a
    /// rebalance's scope: `RebalanceArgs::scope`).
    pub object: String,
    /// That volume's name, kept after the volume is deleted; the object
    /// itself when it is no volume.
    pub object_name: String,
    pub args: Value,
    pub state: JobState,
    pub status: String,
    pub progress: u8,
    pub starttime_ms: Option<i64>,
    pub endtime_ms: Option<i64>,
    pub user_id: i64,
    pub username: String,
    pub useremail: String,
    pub details: Vec<String>,
    pub data_movement: bool,
    pub created_ms: i64,
    /// A cancel was asked for: the job stops and undoes what it did.
    pub cancel_requested: bool,
    /// The job passed the point after which it finishes rather than being
    /// undone: a cancel is refused.
    pub committed: bool,
    /// Paused on request: its copies stop until it is resumed.
    pub paused: bool,
    /// The job's own copy rate in bytes per second (0: unthrottled); None:
    /// the service's `movement_rate`.
    pub movement_rate: Option<u64>,
}

/// What steers a running job, as its holder polls it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobControl {
    pub id: i64,
    pub cancel_requested: bool,
    pub paused: bool,
    pub movement_rate: Option<u64>,
}

/// A change of how a job runs (`PATCH /jobs/{job}`): each field given is set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobSteering {
    pub paused: Option<bool>,
    /// Some(None): back to the service's rate.
    pub movement_rate: Option<Option<u64>>,
}

impl Job {
    pub fn kind(&self) -> Option<JobKind> {
        JobKind::parse(&self.kind)
    }

    /// What the job is asked to do, from its stored kind and arguments.
    pub fn spec(&self) -> Result<JobSpec, JobSpecError> {
        JobSpec::from_stored(&self.kind, &self.args)
    }

    /// Whether the job copies slices, so that pause, its own rate and the
    /// movement window apply: a recovery's rebuilds, or a data movement
    /// (a resize allowing it, a drain, a rebalance).
    pub fn copies_data(&self) -> bool {
        let kind = self.kind();
        kind == Some(JobKind::VolumeRecovery)
            || (kind.is_some_and(|k| k.steerable()) && self.data_movement)
    }
}

/// A 1-based page of `count` rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub page: u32,
    pub count: u32,
}

impl Page {
    /// SQL `LIMIT` and `OFFSET` of the page.
    pub fn limit_offset(self) -> (i64, i64) {
        let count = i64::from(self.count.max(1));
        (count, i64::from(self.page.max(1) - 1) * count)
    }
}

/// `GET /jobs` query: filters and a 1-based page of `count` jobs.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    pub kind: Option<String>,
    /// A volume's id or name (the name also finds the jobs of a deleted
    /// volume of that name).
    pub object: Option<String>,
    pub state: Option<JobState>,
    pub page: u32,
    pub count: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepState {
    Planned,
    Switched,
    Done,
}

svs_names!(StepState {
    Planned = "planned",
    Switched = "switched",
    Done = "done",
});

/// One persisted step of a resize: a growth in place (`to_medium` None) or a move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResizeStep {
    pub id: i64,
    pub job_id: i64,
    pub slice_id: i64,
    pub from_medium: String,
    pub to_medium: Option<String>,
    pub old_size: Gib,
    pub new_size: Gib,
    pub state: StepState,
    /// Where an interrupted copy of a move may resume; `None` copies from
    /// the start.
    pub checkpoint: Option<CopyCheckpoint>,
    /// A step a cancel added: a switched slice moving back to where it was.
    pub undo: bool,
    /// The cause of the step's last failed copy.
    pub failure: Option<String>,
    /// How many of its copies failed.
    pub failures: u32,
}

/// A slice among a job's steps, with where it belongs
/// (`JobStore::step_slices`): what a job moving slices of many volumes
/// needs to name and hold each volume it touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepSlice {
    pub slice_id: i64,
    pub volume_id: String,
    pub volume_name: String,
    pub copy: u32,
    pub column: u32,
}

/// A durable point of a slice copy: the target's slice-file bytes below
/// `offset` are copied, verified against the source and fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyCheckpoint {
    pub offset: u64,
    /// Copied through the volume's shared I/O, which mirrors writes to
    /// the target: every copy now. Rows of older versions' file-to-file
    /// copies say `false`, and such a checkpoint is not resumed.
    pub live: bool,
}

/// A node that may attach volumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRecord {
    pub name: String,
    pub zone: String,
    pub address: Option<String>,
    /// The configuration file or the API (`sync_nodes` marks the nodes it
    /// is given `Config` whatever this says).
    pub managed_by: ManagedBy,
}

#[derive(Debug, Clone)]
pub struct NewAttachment {
    pub volume_id: String,
    /// `top` (the live volume) or a snapshot's id.
    pub snapshot: String,
    pub node: String,
    pub tenant_id: i64,
    pub readonly: bool,
    pub mountpoint: String,
    pub export_name: String,
    pub now_ms: i64,
    pub manager: AttachmentManager,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    pub volume_id: String,
    pub volume_name: String,
    pub node: String,
    pub tenant_id: i64,
    /// `top` (the live volume) or a snapshot's id.
    pub snapshot: String,
    /// `top`, or the snapshot's name.
    pub snapshot_name: String,
    pub readonly: bool,
    pub mountpoint: String,
    pub export_name: String,
    pub state: String,
    /// The unfinished job working on the attachment's volume, if any.
    pub job: Option<(i64, u8, String)>,
    pub created_ms: i64,
    /// What the node's agent last reported; None until it reports.
    pub host: Option<HostReport>,
    /// Who makes it real on the node (a CSI attachment is never the host
    /// agent's).
    pub manager: AttachmentManager,
    /// The volume's current size.
    pub volume_size: Gib,
    /// The storage node running the volume's front; None: svs serve.
    pub front_node: Option<String>,
    /// That node's front address (IP:PORT), where the attaching host
    /// connects; None: svs serve's NBD server.
    pub front_address: Option<String>,
}

/// Host states an agent reports.
pub const HOST_CONNECTED: &str = "Connected";
pub const HOST_MOUNTED: &str = "Mounted";
pub const HOST_ERROR: &str = "Error";
pub const HOST_DISCONNECTED: &str = "Disconnected";

impl Attachment {
    /// A node's agent holds it (reported it Connected or Mounted and has not
    /// said Disconnected since): jobs leave the host side to that agent.
    pub fn is_agent_managed(&self) -> bool {
        self.manager == AttachmentManager::Agent
            && self
                .host
                .as_ref()
                .is_some_and(|h| h.state == HOST_CONNECTED || h.state == HOST_MOUNTED)
    }
}

/// An attachment as its node's agent sees it on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostReport {
    /// `Connected`, `Mounted`, `Error` or `Disconnected`.
    pub state: String,
    pub detail: Option<String>,
    pub device: Option<String>,
    pub mount_path: Option<String>,
    /// Total bytes of the mounted filesystem.
    pub filesystem_bytes: Option<u64>,
    /// The volume size the host's filesystem was last grown to fill.
    pub filesystem_size: Option<Gib>,
    /// The last attempt to grow the filesystem failed with this.
    pub grow_error: Option<String>,
    /// The job whose growth request the last attempt answered.
    pub grow_job: Option<i64>,
    pub updated_ms: i64,
}

/// An attachment with what a node's agent needs of its volume.
#[derive(Debug, Clone)]
pub struct NodeAttachment {
    pub attachment: Attachment,
    pub volume_kind: VolumeType,
    /// The volume's current size.
    pub volume_size: Gib,
    /// The volume's stored attributes (its filesystem among them).
    pub volume_attributes: Map<String, Value>,
    /// The volume's size when the attached snapshot was taken; None for `top`.
    pub snapshot_size: Option<Gib>,
    /// The volume's running job that asks its hosts to grow the filesystem
    /// to the volume's size: a `volume_grow_filesystem`, or a resize once
    /// the volume has its new size (not while its data still moves).
    pub grow_job: Option<i64>,
}

/// A node's agent credential: `svsnode.<credential_id>.<secret>`; only a
/// hash of the secret is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCredential {
    pub node: String,
    pub credential_id: String,
    /// Hex SHA-256 of the secret.
    pub secret_hash: String,
    pub created_ms: i64,
    /// What the credential may call.
    pub role: CredentialRole,
}

/// A storage node is Online while it heartbeats, Offline once it missed
/// them for the configured timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageNodeState {
    Online,
    Offline,
}

svs_names!(StorageNodeState {
    Online = "Online",
    Offline = "Offline",
});

/// A node that registered as a storage node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageNodeRecord {
    pub name: String,
    pub zone: String,
    /// Where fronts reach its slice server (IP:PORT).
    pub slice_address: String,
    pub last_heartbeat_ms: i64,
    pub state: StorageNodeState,
    /// None after the node's credential was reissued or revoked, until it
    /// registers again.
    pub slice_credential: Option<String>,
    /// Where attaching hosts reach its NBD server for fronts (IP:PORT);
    /// None: it registered none (it runs no fronts).
    pub front_address: Option<String>,
}

/// One medium a storage node lists in its registration or heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageMedium {
    pub id: String,
    pub size: Gib,
    /// The directory on the storage node (shown, never opened by the
    /// control plane).
    pub directory: String,
}

/// A storage node's registration or heartbeat.
#[derive(Debug, Clone)]
pub struct StorageRegistration {
    pub node: String,
    pub slice_address: String,
    /// The advertised address of its NBD server for fronts (IP:PORT).
    pub front_address: Option<String>,
    pub media: Vec<StorageMedium>,
    pub now_ms: i64,
    /// Kept as the node's slice credential when it has none (a first
    /// registration, or one after its credential changed); else unused.
    pub new_slice_credential: String,
}

/// What a registration changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StorageRegistered {
    /// The node's slice credential (kept, or the new one).
    pub slice_credential: String,
    /// The node was Offline and is Online again.
    pub came_back: bool,
    /// Media it listed for the first time.
    pub added_media: Vec<String>,
    /// Failed media of the node that are back in service (every slice on
    /// them stays lost).
    pub restored_media: Vec<String>,
    /// Media it no longer lists that held nothing: removed.
    pub removed_media: Vec<String>,
    /// Media it no longer lists that hold slices: failed, their slices
    /// lost.
    pub failed_media: Vec<String>,
    /// Volumes (ids) with a lost copy on the node's media, when it came
    /// back or a medium was restored (for their recovery).
    pub volumes_to_recover: Vec<String>,
}

/// One copy of a slice on a node's media.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCopy {
    pub volume_id: String,
    pub volume_name: String,
    pub tenant_id: i64,
    pub copy: u32,
    pub column: u32,
    pub medium: String,
    pub size: Gib,
    /// Lost: its medium failed or the copy was marked lost.
    pub lost: bool,
    /// The generation a copy marked lost missed (see `SliceRow`).
    pub stale_generation: Option<u64>,
}

/// A node's agent: the role of its live credential (none once revoked),
/// and when it was last seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAgentRecord {
    pub node: String,
    pub credential_role: Option<CredentialRole>,
    pub last_seen_ms: Option<i64>,
}

/// One instance's claim on a job: while its lease runs (renewed by its
/// owner), no other instance works on the job, and every store write the
/// job makes under `fence::fenced` is refused once a newer claim (a higher
/// epoch) took it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobLease {
    pub job_id: i64,
    /// The instance holding it (`svs serve`'s instance id).
    pub owner: String,
    /// The claim's number, one more than the job's previous claim.
    pub epoch: i64,
    /// The owner whose lease ran out when this claim took the job (None:
    /// nobody held it: new, released, or its lease ended at a sole
    /// owner's start).
    pub taken_over_from: Option<String>,
}

/// How long a lease lasts and by whom it is taken or renewed.
#[derive(Debug, Clone, Copy)]
pub struct LeaseTerms<'a> {
    pub owner: &'a str,
    /// Now, in ms since the Unix epoch (instances' clocks must agree to well
    /// under `ttl_ms`: see docs/postgresql.md).
    pub now_ms: i64,
    pub ttl_ms: i64,
}

/// A key that signs tokens, as stored: shared by every instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningKeyRecord {
    pub kid: String,
    /// The private Ed25519 seed (32 bytes).
    pub seed: Vec<u8>,
    pub created_ms: i64,
    /// None: the current key; else when it was retired (it still verifies
    /// the tokens it signed until they expire).
    pub retired_ms: Option<i64>,
}

/// How a job ends.
/// The status of a job that ended because it was cancelled.
pub const JOB_CANCELLED: &str = "Cancelled";

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

    /// Cancelled: the seed's `Error` (the job did not do what it was asked),
    /// with status `Cancelled` and what the cancel left as the last message.
    pub fn cancelled(detail: String, now_ms: i64) -> JobEnd {
        JobEnd {
            state: JobState::Error,
            status: JOB_CANCELLED.into(),
            detail: Some(detail),
            now_ms,
        }
    }
}

#[derive(Debug, Clone)]
pub struct NewSnapshot {
    pub id: String,
    pub volume_id: String,
    pub tenant_id: i64,
    pub name: String,
    pub consistency: Consistency,
    pub volume_size: Gib,
    pub attributes: Map<String, Value>,
    pub now_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub id: String,
    /// The data plane's id of the snapshot (grows with each snapshot taken).
    pub seq: u64,
    pub volume_id: String,
    pub volume_name: String,
    pub tenant_id: i64,
    pub name: String,
    pub consistency: Consistency,
    /// The volume's size when the snapshot was taken.
    pub volume_size: Gib,
    pub state: SnapshotState,
    /// Bytes the snapshot holds on media, as last measured.
    pub used_bytes: u64,
    pub attributes: Map<String, Value>,
    /// Attachments of the snapshot.
    pub attachments: u64,
    pub created_ms: i64,
}

/// Where a volume's front runs (`FrontStore::volume_front`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeFront {
    /// The storage node running it; None: svs serve.
    pub node: Option<String>,
    /// The volume's front epoch.
    pub epoch: u64,
}

/// A volume whose front a storage node runs, with what the node needs to
/// run it (`FrontStore::node_fronts`).
#[derive(Debug, Clone)]
pub struct NodeFront {
    pub volume_id: String,
    /// The volume's front epoch.
    pub epoch: u64,
    /// GiB.
    pub size: Gib,
    /// Its attachments (of the live volume and of its snapshots).
    pub attachments: Vec<Attachment>,
}

/// What a listener heard (see `StoreLifecycle::announcements`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    /// Another instance announced a change of this topic.
    Topic(String),
    /// The listener lost its connection: announcements may have been missed.
    Missed,
}
