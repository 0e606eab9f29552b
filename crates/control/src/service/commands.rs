//! Typed inputs of the use cases. The API builds them from request bodies
//! and queries; anything else (a CSI driver, a test) can build them
//! directly. Their values are already checked for type and range; rules
//! that need the store (the policy exists, the zone has media, the new size
//! fits the volume's current one) are the services' own.

use super::attributes::{PolicySettings, StoredField, VolumeAttributes};
use serde_json::{Map, Value};
use std::net::IpAddr;
use svs_domain::{AttachmentManager, Consistency, Gib, JobState, ResourceName, VolumeType};

/// `POST /signin`.
#[derive(Debug, Clone)]
pub struct SignIn {
    pub email: String,
    pub password: String,
}

/// `POST /refresh`.
#[derive(Debug, Clone)]
pub struct Refresh {
    pub refresh_token: String,
}

/// `POST /signout`: authenticated by the AccessToken it carries.
#[derive(Debug, Clone)]
pub struct SignOut {
    pub access_token: String,
}

/// `POST /volumes`.
#[derive(Debug, Clone)]
pub struct CreateVolume {
    pub name: ResourceName,
    pub kind: VolumeType,
    pub size: Gib,
    /// Name of a policy of the caller's tenant.
    pub policy: String,
    /// Zone to place the volume in; None: any.
    pub zone: Option<String>,
    pub attributes: VolumeAttributes,
    /// A clone: filled with a snapshot's content.
    pub clone_from: Option<CloneFrom>,
}

/// A writable Volume field that a resize may repeat but not change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixedVolumeField {
    Name,
    Type,
    Policy,
    Zone,
    ContentVolume,
    ContentSnapshot,
    Stored(StoredField),
    Flavor,
}

impl FixedVolumeField {
    /// In the order a resize checks them.
    pub const ALL: [FixedVolumeField; 14] = [
        FixedVolumeField::Name,
        FixedVolumeField::Type,
        FixedVolumeField::Policy,
        FixedVolumeField::Zone,
        FixedVolumeField::ContentVolume,
        FixedVolumeField::ContentSnapshot,
        FixedVolumeField::Stored(StoredField::ConsistencyGroup),
        FixedVolumeField::Stored(StoredField::ZoneReplica),
        FixedVolumeField::Stored(StoredField::VolumeGroupName),
        FixedVolumeField::Stored(StoredField::ReplicationNode),
        FixedVolumeField::Stored(StoredField::ReplicationVolumeGroupName),
        FixedVolumeField::Stored(StoredField::CapacityGroup),
        FixedVolumeField::Stored(StoredField::ThrottlingScheme),
        FixedVolumeField::Flavor,
    ];

    pub fn wire_name(self) -> &'static str {
        match self {
            FixedVolumeField::Name => "name",
            FixedVolumeField::Type => "type",
            FixedVolumeField::Policy => "policy",
            FixedVolumeField::Zone => "zone",
            FixedVolumeField::ContentVolume => "contentvolume",
            FixedVolumeField::ContentSnapshot => "contentsnapshot",
            FixedVolumeField::Stored(field) => field.wire_name(),
            FixedVolumeField::Flavor => "flavor",
        }
    }
}

/// `PATCH /volumes/{volume}`.
#[derive(Debug, Clone)]
pub struct ResizeVolume {
    pub size: Gib,
    pub allow_data_movement: bool,
    /// Writable fields sent along with the size (generated clients send a
    /// whole Volume object): each must equal the volume's current value.
    pub repeated: Vec<(FixedVolumeField, String)>,
}

/// `DELETE /volumes/{volume}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeleteVolume {
    /// Delete even while attached (the attachments go with it).
    pub force: bool,
}

/// Resiliency levels a request sets; None keeps the current level (the
/// default one, on creation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResiliencyLevels {
    pub media: Option<u8>,
    pub node: Option<u8>,
    pub zone: Option<u8>,
}

/// `POST /policies`.
#[derive(Debug, Clone)]
pub struct CreatePolicy {
    pub name: ResourceName,
    pub resiliency: ResiliencyLevels,
    pub settings: PolicySettings,
}

/// `PATCH /policies/{policy}`: only what is set changes.
#[derive(Debug, Clone, Default)]
pub struct UpdatePolicy {
    /// A new name.
    pub name: Option<ResourceName>,
    pub resiliency: ResiliencyLevels,
    pub settings: PolicySettings,
}

/// `POST /volumes/{volume}/snapshots/{snapshot}/attachments`.
#[derive(Debug, Clone)]
pub struct CreateAttachment {
    pub node: String,
    pub readonly: bool,
    pub mountpoint: String,
    pub manager: AttachmentManager,
}

/// `PATCH .../attachments/{node}`: None keeps the current value.
#[derive(Debug, Clone, Default)]
pub struct ModifyAttachment {
    pub readonly: Option<bool>,
    pub mountpoint: Option<String>,
}

/// `PATCH /nodes/{node}` (administrators only).
#[derive(Debug, Clone, Copy)]
pub struct SetNodeAddress {
    /// The address the node's NBD connections come from; None removes it.
    pub address: Option<IpAddr>,
}

/// `POST /nodes` (administrators only).
#[derive(Debug, Clone)]
pub struct CreateNode {
    pub name: ResourceName,
    /// `""`: no zone.
    pub zone: String,
    pub address: IpAddr,
}

/// `GET /nodes/{node}/agent/attachments`: the agent's long poll.
#[derive(Debug, Clone, Default)]
pub struct AgentPoll {
    /// The revision the agent holds; None answers at once.
    pub revision: Option<String>,
    /// How long to wait for a change of that revision (at most 60 s).
    pub wait: std::time::Duration,
}

/// Longest wait of an agent's long poll.
pub const MAX_AGENT_WAIT_SECS: u64 = 60;

/// An attachment's state on its host, as its agent reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostState {
    Connected,
    Mounted,
    Error,
    Disconnected,
}

impl HostState {
    pub const ALL: [HostState; 4] = [
        HostState::Connected,
        HostState::Mounted,
        HostState::Error,
        HostState::Disconnected,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HostState::Connected => svs_store::HOST_CONNECTED,
            HostState::Mounted => svs_store::HOST_MOUNTED,
            HostState::Error => svs_store::HOST_ERROR,
            HostState::Disconnected => svs_store::HOST_DISCONNECTED,
        }
    }

    pub fn parse(s: &str) -> Option<HostState> {
        HostState::ALL.into_iter().find(|h| h.as_str() == s)
    }
}

/// `PUT /nodes/{node}/agent/attachments/{volumeid}/{snapshotid}`: replaces
/// what the agent last reported (a field left out is cleared).
#[derive(Debug, Clone)]
pub struct ReportHostState {
    pub state: HostState,
    pub detail: Option<String>,
    pub device: Option<String>,
    pub mount_path: Option<String>,
    /// Total bytes of the mounted filesystem.
    pub filesystem_bytes: Option<u64>,
    /// The volume size (GiB) the host's filesystem was last grown to fill.
    pub filesystem_size: Option<Gib>,
    /// The last attempt to grow the filesystem failed with this.
    pub grow_error: Option<String>,
    /// The job whose growth request the last attempt answered.
    pub grow_job: Option<i64>,
}

/// `GET /jobs`: filters (None: no filter) and the page.
#[derive(Debug, Clone)]
pub struct ListJobs {
    pub kind: Option<String>,
    pub object: Option<String>,
    pub state: Option<JobState>,
    /// 1-based.
    pub page: u32,
    pub count: u32,
}

impl ListJobs {
    /// Page size when `count` is not given, and its maximum.
    pub const DEFAULT_COUNT: u32 = 100;
    pub const MAX_COUNT: u32 = 1000;
}

impl Default for ListJobs {
    fn default() -> ListJobs {
        ListJobs {
            kind: None,
            object: None,
            state: None,
            page: 1,
            count: ListJobs::DEFAULT_COUNT,
        }
    }
}

/// `POST /volumes/{volume}/snapshots`.
#[derive(Debug, Clone)]
pub struct CreateSnapshot {
    /// Never `top` (the live volume's name where a snapshot is expected).
    pub name: ResourceName,
    pub consistency: Consistency,
    /// The writable reference fields, as given.
    pub attributes: Map<String, Value>,
}

/// `PATCH /volumes/{volume}/snapshots/{snapshot}`: a new name and/or stored
/// fields (None: unchanged).
#[derive(Debug, Clone, Default)]
pub struct ModifySnapshot {
    pub name: Option<ResourceName>,
    pub attributes: Map<String, Value>,
}

/// `DELETE /volumes/{volume}/snapshots/{snapshot}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeleteSnapshot {
    /// Delete even while attached (the attachments go with it).
    pub force: bool,
}

/// A clone's content: a snapshot of another volume of the tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloneFrom {
    pub volume: String,
    pub snapshot: String,
}

/// `PATCH /media/{media}` (administrators only): one change per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModifyMedium {
    /// Declares it failed. A failed medium does not come back; a replaced
    /// disk is a new medium.
    Fail,
    /// A new logical capacity in GiB (API-managed media only).
    Resize(Gib),
    /// Takes no new slice, and a job moves every slice off it.
    Drain,
    /// Takes slices again after a drain.
    Ready,
}

/// `POST /media` (administrators only).
#[derive(Debug, Clone)]
pub struct CreateMedium {
    pub id: ResourceName,
    pub node: ResourceName,
    pub zone: ResourceName,
    /// Absolute and plain (`media::plain_directory`).
    pub directory: std::path::PathBuf,
    pub size: Gib,
}

/// `PUT /nodes/{node}/storage`: a storage node's registration or heartbeat.
#[derive(Debug, Clone)]
pub struct RegisterStorageNode {
    /// Where fronts reach the node's slice server.
    pub slice_address: std::net::SocketAddr,
    pub media: Vec<StorageMediumSpec>,
    /// The node's slice public key (PEM), when it asks for a slice
    /// certificate.
    pub slice_public_key: Option<String>,
    /// Where attaching hosts reach its NBD server for fronts (advertised).
    pub front_address: Option<std::net::SocketAddr>,
    /// What its fronts served, by volume (the metrics).
    pub io: Vec<svs_common::metrics::IoTotals>,
}

/// One medium a storage node offers.
#[derive(Debug, Clone)]
pub struct StorageMediumSpec {
    pub name: ResourceName,
    /// Bytes; whole GiB are offered.
    pub size_bytes: u64,
    /// Its directory on the node (shown; empty when not given).
    pub directory: String,
}
