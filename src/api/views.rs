//! Every response body, rendered from records into typed views with the
//! reference API's field names. The views derive `ToSchema`, so the
//! document at `/openapi.json` describes exactly what is sent.

use crate::auth::TokenSet;
use crate::service::agents::{DesiredState, IssuedCredential};
use crate::service::attachments::attachment_uri;
use crate::service::attributes::{Filesystem, StoredField, VolumeAttributes};
use crate::service::auth::SignedIn;
use crate::service::format_ms;
use crate::service::media::MediumReport;
use crate::service::nodes::NodeSummary;
use crate::service::volumes::{volume_zone, Started};
use crate::workers::WorkerStatus;
use serde::Serialize;
use serde_json::{Map, Value};
use svs_store::{Attachment, Job, Policy, SliceRow, Snapshot, Volume};
use utoipa::ToSchema;

/// Every error: a status code and this body.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ErrorResponse)]
pub struct ErrorBody {
    /// What went wrong, for people (the seed's messages are exact).
    pub message: String,
}

/// What a mutating call that runs as a job answers: follow the job with
/// `GET /jobs/{JobID}`.
#[derive(Debug, Serialize, ToSchema)]
#[allow(non_snake_case)]
pub struct JobStarted {
    pub Message: String,
    /// The job's id, a decimal string.
    pub JobID: String,
    /// The object the job works on (a volume id).
    pub ObjectID: String,
}

pub fn started(message: &str, s: &Started) -> JobStarted {
    JobStarted {
        Message: message.to_string(),
        JobID: s.job_id.to_string(),
        ObjectID: s.object_id.clone(),
    }
}

/// What a call with nothing to report answers (`POST /signout`): `{}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Empty {}

/// What a mutating call that is done at once answers.
#[derive(Debug, Serialize, ToSchema)]
#[allow(non_snake_case)]
pub struct Done {
    pub Message: String,
    /// The name of the object changed.
    pub ObjectID: String,
}

pub fn done(message: &str, object_id: &str) -> Done {
    Done {
        Message: message.to_string(),
        ObjectID: object_id.to_string(),
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = SignInResponse)]
#[allow(non_snake_case)]
pub struct SignedInView {
    pub AccessToken: String,
    /// Authorizes every protected call, in the `authorization` header.
    pub IdToken: String,
    /// Gets new tokens from `POST /refresh`. Each refresh answers a new one
    /// and retires the one used: present a retired one again and every
    /// token of that sign-in is revoked.
    pub RefreshToken: String,
    /// Lifetime of the AccessToken and IdToken, in seconds.
    pub ExpiresIn: u64,
    /// Always `Bearer`.
    pub TokenType: &'static str,
}

pub fn signed_in(s: &SignedIn) -> SignedInView {
    SignedInView {
        AccessToken: s.tokens.access_token.clone(),
        IdToken: s.tokens.id_token.clone(),
        RefreshToken: s.refresh_token.clone(),
        ExpiresIn: s.tokens.expires_in,
        TokenType: "Bearer",
    }
}

/// The Volumez refresh answer (`GET /tenant/apiaccess/credentials/refresh`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = CredentialsRefreshResponse)]
#[allow(non_snake_case)]
pub struct VolumezRefreshed {
    pub AccessToken: String,
    pub IdToken: String,
    /// When the AccessToken expires (RFC 3339, UTC).
    pub AccessTokenExpiration: String,
    /// When the IdToken expires (RFC 3339, UTC).
    pub IdTokenExpiration: String,
    /// Always `Bearer`.
    pub TokenType: &'static str,
}

pub fn volumez_refreshed(t: &TokenSet) -> VolumezRefreshed {
    let expiry = format_ms(
        i64::try_from(t.issued_at_secs.saturating_add(t.expires_in))
            .unwrap_or(i64::MAX / 1000)
            .saturating_mul(1000),
    );
    VolumezRefreshed {
        AccessToken: t.access_token.clone(),
        IdToken: t.id_token.clone(),
        AccessTokenExpiration: expiry.clone(),
        IdTokenExpiration: expiry,
        TokenType: "Bearer",
    }
}

/// One public key (RFC 8037: Ed25519 as an OKP key).
#[derive(Debug, Serialize, ToSchema)]
pub struct Jwk {
    /// `OKP`.
    pub kty: &'static str,
    /// `Ed25519`.
    pub crv: &'static str,
    /// `EdDSA`.
    pub alg: &'static str,
    /// `sig`.
    #[serde(rename = "use")]
    pub key_use: &'static str,
    /// The `kid` header of the tokens this key signs.
    pub kid: String,
    /// The public key, base64url without padding.
    pub x: String,
}

/// The JSON Web Key Set: the key that signs tokens now, then the retired
/// ones whose tokens may still be valid.
#[derive(Debug, Serialize, ToSchema)]
pub struct Jwks {
    pub keys: Vec<Jwk>,
}

/// Renders (kid, public key) pairs.
pub fn jwks(keys: &[(String, String)]) -> Jwks {
    Jwks {
        keys: keys
            .iter()
            .map(|(kid, x)| Jwk {
                kty: "OKP",
                crv: "Ed25519",
                alg: "EdDSA",
                key_use: "sig",
                kid: kid.clone(),
                x: x.clone(),
            })
            .collect(),
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = VersionResponse)]
#[allow(non_snake_case)]
pub struct Version {
    pub version: &'static str,
    /// `svs`.
    pub componentName: &'static str,
}

pub fn version() -> Version {
    Version {
        version: env!("CARGO_PKG_VERSION"),
        componentName: "svs",
    }
}

/// A stored reference field that the reference requires to be non-empty
/// when present: omitted when not set.
fn non_empty(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_string())
}

/// A volume. Fields the reference requires to be non-empty are omitted
/// when svs has no value for them.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Volume)]
pub struct VolumeView {
    #[schema(min_length = 1)]
    pub name: String,
    #[schema(min_length = 1)]
    pub volumeid: String,
    /// `block` or `file`.
    #[schema(pattern = "^(block|file)$")]
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// A clone: the volume its content came from, as named at creation.
    pub contentvolume: String,
    /// A clone: the snapshot its content came from, as named at creation.
    pub contentsnapshot: String,
    /// GiB.
    pub size: u64,
    /// 10 × `size`: the upper bound of a resize, GiB.
    pub maxsize: u64,
    #[schema(min_length = 1)]
    pub policy: String,
    pub consistencygroup: String,
    /// The node of the first slice (`""` before placement).
    pub node: String,
    /// The zone asked for at creation, else the zone of the first slice.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1)]
    pub zone: Option<String>,
    pub zonereplica: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1)]
    pub volumegroupname: Option<String>,
    /// The volume id.
    #[schema(min_length = 1)]
    pub volumegroupid: String,
    pub replicationnode: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1)]
    pub replicationvolumegroupname: Option<String>,
    /// `Creating`, `Ready`, `Resizing` or `Deleting`; `Degraded` when it
    /// lost slices on failed media but every column has a copy, `Failed`
    /// when a column lost every copy (I/O there answers EIO).
    pub state: &'static str,
    /// The running job's status, else `Online`.
    pub status: String,
    /// Progress of the running job, 0–100 (100 when none runs).
    pub progress: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1)]
    pub capacitygroup: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1)]
    pub throttlingscheme: Option<String>,
    /// A request to move data, never a state: always false when read.
    pub allowdatamovement: bool,
    /// `regular` or `filedirect`.
    #[schema(pattern = "^(regular|filedirect)$")]
    pub flavor: &'static str,
    /// svs extension, `file` volumes only: the filesystem svs makes on it
    /// (`ext4` or `xfs`); left out for `block` volumes.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^(ext4|xfs)$")]
    pub filesystem: Option<&'static str>,
    /// svs extension: true once svs made the filesystem; only such a
    /// filesystem is grown by a resize.
    pub filesystemprovisioned: bool,
    /// svs extension: GiB the filesystem svs made fills: `size`, or less
    /// when its last growth failed (the volume is bigger than its
    /// filesystem until `POST /volumes/{volume}/grow-filesystem` succeeds);
    /// left out without such a filesystem.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filesystemsize: Option<u64>,
    /// svs extension: why the last growth of the filesystem failed; left
    /// out when it fills the volume.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filesystemerror: Option<String>,
    /// The running `volume_recovery` job's id; left out when none runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1)]
    pub volumerecoveryjob: Option<String>,
}

/// What a volume shows as its state: its lifecycle state, or its health
/// when it lost slices.
fn volume_state(v: &Volume) -> &'static str {
    match v.state {
        svs_domain::VolumeState::Ready if v.lost_columns > 0 => "Failed",
        svs_domain::VolumeState::Ready if v.lost_slices > 0 => "Degraded",
        state => state.as_str(),
    }
}

pub fn volume(v: &Volume) -> VolumeView {
    let attributes = VolumeAttributes::from_record(&v.attributes);
    let stored = |field: StoredField| attributes.get(field).to_string();
    let optional = |field: StoredField| non_empty(attributes.get(field));
    let (status, progress) = match &v.job {
        Some((_, progress, status)) => (status.clone(), *progress),
        None => ("Online".to_string(), 100),
    };
    VolumeView {
        name: v.name.clone(),
        volumeid: v.id.clone(),
        kind: v.kind.as_str(),
        contentvolume: attributes.content().0.to_string(),
        contentsnapshot: attributes.content().1.to_string(),
        size: v.size,
        maxsize: v.size.saturating_mul(10),
        policy: v.policy.clone(),
        consistencygroup: stored(StoredField::ConsistencyGroup),
        node: v.first_node.clone().unwrap_or_default(),
        zone: non_empty(volume_zone(v)),
        zonereplica: stored(StoredField::ZoneReplica),
        volumegroupname: optional(StoredField::VolumeGroupName),
        volumegroupid: v.id.clone(),
        replicationnode: stored(StoredField::ReplicationNode),
        replicationvolumegroupname: optional(StoredField::ReplicationVolumeGroupName),
        state: volume_state(v),
        status,
        progress,
        capacitygroup: optional(StoredField::CapacityGroup),
        throttlingscheme: optional(StoredField::ThrottlingScheme),
        allowdatamovement: false,
        flavor: attributes.flavor().as_str(),
        filesystem: attributes.filesystem.map(Filesystem::as_str),
        filesystemprovisioned: attributes.filesystem_provisioned,
        filesystemsize: (attributes.filesystem.is_some() && attributes.filesystem_provisioned)
            .then(|| v.filesystem_size.unwrap_or(v.size).min(v.size)),
        filesystemerror: v
            .filesystem_error
            .clone()
            .filter(|_| v.filesystem_size.is_some_and(|f| f < v.size)),
        volumerecoveryjob: v.recovery_job.map(|j| j.to_string()),
    }
}

/// One slice of a volume (svs extension): one column of one copy, on one
/// medium.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Slice)]
pub struct SliceView {
    pub sliceid: i64,
    /// The slice's name, `c<copy>-k<column>` (`c1-k0`: column 0 of copy 1;
    /// copies and columns count from 0), as jobs' statuses and details
    /// name it.
    #[schema(pattern = "^c[0-9]+-k[0-9]+$")]
    pub name: String,
    pub copy: u32,
    pub column: u32,
    /// The medium's id.
    pub media: String,
    pub node: String,
    pub zone: String,
    /// GiB.
    pub size: u64,
    /// `Healthy`, or `Lost` when its medium failed (until a recovery
    /// rebuilds it elsewhere).
    #[schema(pattern = "^(Healthy|Lost)$")]
    pub health: &'static str,
}

pub fn slice(row: &SliceRow) -> SliceView {
    SliceView {
        sliceid: row.slice.id,
        name: format!("c{}-k{}", row.slice.copy, row.slice.column),
        copy: row.slice.copy,
        column: row.slice.column,
        media: row.slice.medium.clone(),
        node: row.node.clone(),
        zone: row.zone.clone(),
        size: row.slice.size,
        health: if row.lost { "Lost" } else { "Healthy" },
    }
}

/// A policy: name, resiliency, the settings it was given (absent when not
/// set; `capacityoptimization` always present) and authorship.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Policy)]
#[allow(non_snake_case)]
pub struct PolicyView {
    #[schema(min_length = 1)]
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iopswrite: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iopsread: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidthwrite: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidthread: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latencywrite: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latencyread: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub localzoneread: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failureperformance: Option<bool>,
    /// `capacity`, `balanced` or `performance`.
    #[schema(pattern = "^(capacity|balanced|performance)$")]
    pub capacityoptimization: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(maximum = 500)]
    pub capacityreservation: Option<u64>,
    /// 0–2.
    #[schema(maximum = 2)]
    pub resiliencymedia: u8,
    /// 0–2.
    #[schema(maximum = 2)]
    pub resiliencynode: u8,
    /// 0–2.
    #[schema(maximum = 2)]
    pub resiliencyzone: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encryption: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub integrity: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshotkeep: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshotfrequency: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshotday: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshothour: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshotminute: Option<u64>,
    pub createdbyuserName: String,
    pub createdbyuseremail: String,
    /// RFC 3339.
    pub createdtime: String,
    /// `""` until the policy is changed.
    pub updatebyusername: String,
    pub updatebyUseremail: String,
    pub updatetime: String,
}

pub fn policy(p: &Policy) -> PolicyView {
    let a: &Map<String, Value> = &p.attributes;
    let number = |key: &str| a.get(key).and_then(Value::as_u64);
    let flag = |key: &str| a.get(key).and_then(Value::as_bool);
    let text = |key: &str| a.get(key).and_then(Value::as_str).map(str::to_string);
    PolicyView {
        name: p.name.clone(),
        iopswrite: number("iopswrite"),
        iopsread: number("iopsread"),
        bandwidthwrite: number("bandwidthwrite"),
        bandwidthread: number("bandwidthread"),
        latencywrite: number("latencywrite"),
        latencyread: number("latencyread"),
        localzoneread: flag("localzoneread"),
        failureperformance: flag("failureperformance"),
        capacityoptimization: text("capacityoptimization")
            .unwrap_or_else(|| "performance".to_string()),
        capacityreservation: number("capacityreservation"),
        resiliencymedia: p.resiliency.media,
        resiliencynode: p.resiliency.node,
        resiliencyzone: p.resiliency.zone,
        encryption: flag("encryption"),
        sed: flag("sed"),
        integrity: flag("integrity"),
        snapshotkeep: number("snapshotkeep"),
        snapshotfrequency: text("snapshotfrequency"),
        snapshotday: number("snapshotday"),
        snapshothour: number("snapshothour"),
        snapshotminute: number("snapshotminute"),
        createdbyuserName: p.created_by_name.clone(),
        createdbyuseremail: p.created_by_email.clone(),
        createdtime: format_ms(p.created_ms),
        updatebyusername: p.updated_by_name.clone().unwrap_or_default(),
        updatebyUseremail: p.updated_by_email.clone().unwrap_or_default(),
        updatetime: p.updated_ms.map(format_ms).unwrap_or_default(),
    }
}

/// An attachment of a volume (`top`) to a node; `exportname` and `uri` are
/// svs extensions: where the node opens it over NBD.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Attachment)]
pub struct AttachmentView {
    pub volumename: String,
    pub volumeid: String,
    /// `top` (the live volume) or the snapshot's name.
    pub snapshotname: String,
    /// `top` or the snapshot's id.
    pub snapshotid: String,
    pub node: String,
    pub state: String,
    pub status: String,
    pub progress: u8,
    pub mountpoint: String,
    pub readonly: bool,
    pub exportname: String,
    /// `nbd://host:port/exportname`.
    pub uri: String,
    /// svs extension: who makes it real on the node, `agent` (its host
    /// agent) or `csi` (the CSI node plugin; the agent leaves it alone).
    #[schema(pattern = "^(agent|csi)$")]
    pub manager: &'static str,
    /// svs extension: what the node's host agent last reported:
    /// `Connected`, `Mounted`, `Error` or `Disconnected`; null until it
    /// reports.
    pub hoststate: Option<String>,
    /// The reason for `Error`, or a note.
    pub hostdetail: Option<String>,
    /// The block device on the host, e.g. `/dev/loop3`.
    pub hostdevice: Option<String>,
    /// Where the host mounted the filesystem.
    pub hostmountpath: Option<String>,
    /// Total bytes of the mounted filesystem.
    pub filesystembytes: Option<u64>,
    /// GiB: the volume's size, to compare with `filesystemsize`.
    pub volumesize: u64,
    /// GiB: the volume size the host's filesystem fills, as the agent last
    /// reported; below `volumesize` when a growth failed (`growerror` says
    /// why; `POST /volumes/{volume}/grow-filesystem` tries again).
    pub filesystemsize: Option<u64>,
    /// Why the host's last growth of the filesystem failed.
    pub growerror: Option<String>,
    /// When the agent reported (RFC 3339).
    pub hostupdated: Option<String>,
}

/// `nbd_base` is `nbd://host:port` of the NBD server.
pub fn attachment(a: &Attachment, nbd_base: &str) -> AttachmentView {
    // A finished attachment job leaves its status behind; only a
    // transition in progress shows it.
    let (status, progress) = match &a.job {
        Some((_, progress, status)) if a.state != "Attached" => (status.clone(), *progress),
        _ => (a.state.clone(), 100),
    };
    AttachmentView {
        volumename: a.volume_name.clone(),
        volumeid: a.volume_id.clone(),
        snapshotname: a.snapshot_name.clone(),
        snapshotid: a.snapshot.clone(),
        node: a.node.clone(),
        state: a.state.clone(),
        status,
        progress,
        mountpoint: a.mountpoint.clone(),
        readonly: a.readonly,
        exportname: a.export_name.clone(),
        uri: attachment_uri(a, nbd_base),
        manager: a.manager.as_str(),
        hoststate: a.host.as_ref().map(|h| h.state.clone()),
        hostdetail: a.host.as_ref().and_then(|h| h.detail.clone()),
        hostdevice: a.host.as_ref().and_then(|h| h.device.clone()),
        hostmountpath: a.host.as_ref().and_then(|h| h.mount_path.clone()),
        filesystembytes: a.host.as_ref().and_then(|h| h.filesystem_bytes),
        volumesize: a.volume_size,
        filesystemsize: a.host.as_ref().and_then(|h| h.filesystem_size),
        growerror: a.host.as_ref().and_then(|h| h.grow_error.clone()),
        hostupdated: a.host.as_ref().map(|h| format_ms(h.updated_ms)),
    }
}

/// A snapshot of a volume. `used` is bytes it holds on media (every copy),
/// `volumesize` the volume's size in GiB when it was taken.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Snapshot)]
pub struct SnapshotView {
    #[schema(min_length = 1)]
    pub name: String,
    #[schema(min_length = 1)]
    pub snapshotid: String,
    pub volumename: String,
    #[schema(min_length = 1)]
    pub volumeid: String,
    pub volumesize: u64,
    /// `crash` or `application`.
    #[schema(pattern = "^(crash|application)$")]
    pub consistency: &'static str,
    /// When it was taken, RFC 3339.
    pub time: String,
    pub used: u64,
    /// `Creating`, `Ready` or `Deleting`.
    pub state: &'static str,
    pub status: &'static str,
    /// 100 once taken.
    pub progress: u8,
    pub numberofattachments: u64,
    pub policy: bool,
    pub consistencygroup: bool,
    pub consistencygroupname: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1)]
    pub targetsecret: Option<String>,
}

pub fn snapshot(s: &Snapshot) -> SnapshotView {
    let text = |key: &str| {
        s.attributes
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let flag = |key: &str| {
        s.attributes
            .get(key)
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    let state = s.state.as_str();
    SnapshotView {
        name: s.name.clone(),
        snapshotid: s.id.clone(),
        volumename: s.volume_name.clone(),
        volumeid: s.volume_id.clone(),
        volumesize: s.volume_size,
        consistency: s.consistency.as_str(),
        time: format_ms(s.created_ms),
        used: s.used_bytes,
        state,
        status: state,
        progress: if s.state == svs_domain::SnapshotState::Creating {
            0
        } else {
            100
        },
        numberofattachments: s.attachments,
        policy: flag("policy"),
        consistencygroup: flag("consistencygroup"),
        consistencygroupname: text("consistencygroupname"),
        targetsecret: non_empty(&text("targetsecret")),
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Job)]
pub struct JobView {
    pub id: i64,
    /// `volume_create`, `volume_delete`, `volume_modify_extend`,
    /// `volume_recovery`, `volume_grow_filesystem`, `attachment_create`,
    /// `attachment_delete`, `attachment_modify`, `snapshot_*`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The object the job works on (a volume id).
    pub object: String,
    /// svs extension: the name of that volume, kept after it is deleted.
    pub objectname: String,
    /// The job's arguments.
    #[schema(value_type = Object)]
    pub args: Value,
    /// `Pending`, `Running`, `Done` or `Error`.
    pub state: &'static str,
    pub status: String,
    /// 0–100.
    pub progress: u8,
    /// RFC 3339, `""` before the job starts.
    pub starttime: String,
    /// RFC 3339, `""` until the job ends.
    pub endtime: String,
    pub username: String,
    pub useremail: String,
    /// The messages the job reported, oldest first.
    pub details: Vec<String>,
}

pub fn job(j: &Job) -> JobView {
    JobView {
        id: j.id,
        kind: j.kind.clone(),
        object: j.object.clone(),
        objectname: j.object_name.clone(),
        args: j.args.clone(),
        state: j.state.as_str(),
        status: j.status.clone(),
        progress: j.progress,
        starttime: j.starttime_ms.map(format_ms).unwrap_or_default(),
        endtime: j.endtime_ms.map(format_ms).unwrap_or_default(),
        username: j.username.clone(),
        useremail: j.useremail.clone(),
        details: j.details.clone(),
    }
}

/// A medium: `size`, `freesize` (GiB) and `volumescount` are true to the
/// allocations; `writtenbytes` to what is on its disk.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Media)]
pub struct MediumView {
    pub mediaid: String,
    /// The medium's directory.
    pub media: String,
    pub model: &'static str,
    pub bus: &'static str,
    pub location: String,
    pub node: String,
    pub zone: String,
    pub size: u64,
    pub freesize: u64,
    /// svs extension: bytes written on the medium, as its disk holds them
    /// (slices, their snapshots, copies in progress; what a volume never
    /// wrote takes nothing), where `size - freesize` is what is allocated.
    /// Left out for a failed medium, or one that could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writtenbytes: Option<u64>,
    pub volumescount: u64,
    pub sectorsize: u32,
    pub sed: bool,
    pub assignment: &'static str,
    pub state: &'static str,
    pub status: &'static str,
    pub progress: u8,
    pub capacitygroup: &'static str,
    /// svs extension: `config` (listed in the configuration file: change it
    /// there) or `api` (added through the API).
    pub managedby: &'static str,
}

pub fn medium(report: &MediumReport) -> MediumView {
    let m = &report.usage;
    MediumView {
        mediaid: m.record.medium.id.clone(),
        media: m.record.directory.clone(),
        model: "svs sparse-file medium",
        bus: "file",
        location: m.record.directory.clone(),
        node: m.record.medium.node.clone(),
        zone: m.record.medium.zone.clone(),
        size: m.record.medium.size,
        // Nothing more goes on a failed medium.
        freesize: if m.failed { 0 } else { m.free() },
        writtenbytes: report.written_bytes,
        volumescount: m.volumes_count,
        sectorsize: 4096,
        sed: false,
        assignment: "svs",
        state: if m.failed { "Failed" } else { "Online" },
        status: if m.failed { "Failed" } else { "Ready" },
        progress: 100,
        capacitygroup: "",
        managedby: m.managed_by.as_str(),
    }
}

/// A node: a media node or a configured host; `address` (svs extension) is
/// the IP its NBD connections come from (`""`: none).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Node)]
pub struct NodeView {
    #[schema(min_length = 1)]
    pub name: String,
    pub zone: String,
    pub address: String,
    pub os: &'static str,
    pub state: &'static str,
    pub status: &'static str,
    pub progress: u8,
    pub mediacount: usize,
    /// GiB.
    pub size: u64,
    /// GiB.
    pub freesize: u64,
    pub volumescount: u64,
    /// svs extension: the node's host agent has a live credential.
    pub agentcredential: bool,
    /// svs extension: the agent's last authenticated request (RFC 3339);
    /// null when never.
    pub agentseen: Option<String>,
    /// svs extension: `config` (listed in the configuration file, as
    /// `[[nodes]]` or the node of a `[[media]]`) or `api` (added through
    /// the API).
    pub managedby: &'static str,
}

pub fn node(n: &NodeSummary) -> NodeView {
    NodeView {
        name: n.record.name.clone(),
        zone: n.record.zone.clone(),
        address: n.record.address.clone().unwrap_or_default(),
        os: std::env::consts::OS,
        state: "Online",
        status: "Ready",
        progress: 100,
        mediacount: n.media_count,
        size: n.size,
        freesize: n.free,
        volumescount: n.volumes_count,
        agentcredential: n.agent_credential,
        agentseen: n.agent_seen_ms.map(format_ms),
        managedby: n.record.managed_by.as_str(),
    }
}

/// A node's new agent credential (svs extension), shown only here.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = NodeCredential)]
pub struct CredentialView {
    pub node: String,
    /// 16 hex digits: the credential's public id.
    pub credentialid: String,
    /// `svsnode.<credentialid>.<secret>`: the agent's bearer token.
    pub credential: String,
    /// RFC 3339.
    pub created: String,
}

pub fn credential(c: &IssuedCredential) -> CredentialView {
    CredentialView {
        node: c.node.clone(),
        credentialid: c.credential_id.clone(),
        credential: c.credential.clone(),
        created: format_ms(c.created_ms),
    }
}

/// One attachment as a node's agent should have it (svs extension).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AgentAttachment)]
pub struct AgentAttachmentView {
    pub volumeid: String,
    pub volumename: String,
    /// `top` or the snapshot's id.
    pub snapshotid: String,
    /// `top` or the snapshot's name.
    pub snapshotname: String,
    /// `Attaching`, `Attached` or `Detaching`.
    pub state: String,
    pub readonly: bool,
    /// As stored; may be empty.
    pub mountpoint: String,
    pub exportname: String,
    /// `nbd://host:port/exportname`.
    pub uri: String,
    /// `block` or `file`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `ext4` or `xfs` for a `file` volume; null otherwise.
    pub filesystem: Option<&'static str>,
    pub filesystemprovisioned: bool,
    /// GiB: the volume's current size for `top`, the snapshot's
    /// `volumesize` for a snapshot.
    pub size: u64,
    /// `agent` or `csi`: an agent skips `csi` attachments (the CSI node
    /// plugin makes them real).
    #[schema(pattern = "^(agent|csi)$")]
    pub manager: &'static str,
    /// The running job that asks the agent to grow the filesystem to
    /// `size` (a `volume_grow_filesystem`, or a resize once the volume has
    /// its new size, not while its data moves): a new id asks for a new
    /// attempt even at the same size; the agent names it as `growjob` in
    /// its report. Null when no job asks (`top` read-write attachments only).
    pub growjob: Option<i64>,
}

/// What a node's agent should do (svs extension).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AgentDesiredState)]
pub struct AgentStateView {
    pub node: String,
    /// Hex digest of `attachments`: send it back as `revision` to wait for
    /// a change.
    pub revision: String,
    /// Of every tenant, ordered by (volumeid, snapshotid).
    pub attachments: Vec<AgentAttachmentView>,
}

pub fn agent_state(d: &DesiredState) -> AgentStateView {
    AgentStateView {
        node: d.node.clone(),
        revision: d.revision.clone(),
        attachments: d
            .attachments
            .iter()
            .map(|a| AgentAttachmentView {
                volumeid: a.volume_id.clone(),
                volumename: a.volume_name.clone(),
                snapshotid: a.snapshot_id.clone(),
                snapshotname: a.snapshot_name.clone(),
                state: a.state.clone(),
                readonly: a.readonly,
                mountpoint: a.mountpoint.clone(),
                exportname: a.export_name.clone(),
                uri: a.uri.clone(),
                kind: a.kind.as_str(),
                filesystem: a.filesystem.map(|f| f.as_str()),
                filesystemprovisioned: a.filesystem_provisioned,
                size: a.size,
                manager: a.manager.as_str(),
                growjob: a.grow_job,
            })
            .collect(),
    }
}

/// A background worker (svs extension): the job runner `jobs` or a
/// reconciler.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Worker)]
pub struct WorkerView {
    pub name: String,
    /// `Busy`, `Throttled`, `Idle` or `Done`.
    pub state: &'static str,
    pub jobs_running: usize,
    pub jobs_queued: usize,
    pub jobs_retrying: usize,
    /// The job runner's bound; null for reconcilers.
    pub max_concurrent_jobs: Option<usize>,
    /// A reconciler's period; null for the job runner.
    pub period_secs: Option<u64>,
    pub errors: u64,
    pub consecutive_errors: u64,
    pub last_error: Option<String>,
    /// RFC 3339.
    pub last_error_time: Option<String>,
    /// RFC 3339.
    pub last_success_time: Option<String>,
}

pub fn worker(w: &WorkerStatus) -> WorkerView {
    WorkerView {
        name: w.name.clone(),
        state: w.state.as_str(),
        jobs_running: w.jobs_running,
        jobs_queued: w.jobs_queued,
        jobs_retrying: w.jobs_retrying,
        max_concurrent_jobs: w.max_concurrent_jobs,
        period_secs: w.period_secs,
        errors: w.errors,
        consecutive_errors: w.consecutive_errors,
        last_error: w.last_error.clone(),
        last_error_time: w.last_error_ms.map(format_ms),
        last_success_time: w.last_success_ms.map(format_ms),
    }
}

/// A list rendered with one of the functions above.
pub fn list<T, V>(items: &[T], render: impl Fn(&T) -> V) -> Vec<V> {
    items.iter().map(render).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Map};
    use svs_domain::{Resiliency, VolumeState, VolumeType};

    fn volume_record() -> Volume {
        let mut attributes = Map::new();
        attributes.insert("capacitygroup".into(), json!("cg"));
        Volume {
            id: "id-1".into(),
            tenant_id: 1,
            name: "data".into(),
            kind: VolumeType::Block,
            size: 10,
            policy: "gold".into(),
            resiliency: Resiliency::default(),
            zone: None,
            attributes,
            state: VolumeState::Ready,
            job: None,
            first_node: Some("node-a".into()),
            first_zone: Some("zone-a".into()),
            lost_slices: 0,
            lost_columns: 0,
            recovery_job: None,
            filesystem_size: None,
            filesystem_error: None,
            created_ms: 0,
        }
    }

    #[test]
    fn a_volume_that_lost_slices_shows_its_health_as_its_state() {
        let mut v = volume_record();
        assert_eq!(json_of(&volume(&v))["state"], "Ready");
        v.lost_slices = 1;
        v.recovery_job = Some(7);
        let shown = json_of(&volume(&v));
        assert_eq!(shown["state"], "Degraded");
        assert_eq!(shown["volumerecoveryjob"], "7");
        v.lost_columns = 1;
        assert_eq!(json_of(&volume(&v))["state"], "Failed");
        v.state = VolumeState::Deleting;
        assert_eq!(json_of(&volume(&v))["state"], "Deleting");
    }

    fn json_of(v: &VolumeView) -> Value {
        serde_json::to_value(v).expect("a volume serializes")
    }

    #[test]
    fn a_volume_shows_its_stored_fields_first_zone_and_default_flavor() {
        let v = json_of(&volume(&volume_record()));
        assert_eq!(v["capacitygroup"], "cg");
        assert_eq!(v["consistencygroup"], "");
        assert_eq!(v["zone"], "zone-a");
        assert_eq!(v["node"], "node-a");
        assert_eq!(v["flavor"], "regular");
        assert_eq!(v["maxsize"], 100);
        assert_eq!(
            (v["status"].clone(), v["progress"].clone()),
            (json!("Online"), json!(100))
        );
    }

    #[test]
    fn unset_fields_the_reference_requires_non_empty_are_omitted() {
        let mut record = volume_record();
        record.attributes = Map::new();
        record.first_zone = None;
        let v = json_of(&volume(&record));
        for key in [
            "capacitygroup",
            "volumegroupname",
            "replicationvolumegroupname",
            "replicationvolumegroupid",
            "volumerecoveryjob",
            "throttlingscheme",
            "zone",
        ] {
            assert!(v.get(key).is_none(), "{key} in {v}");
        }
        // Fields the reference allows empty stay, as before.
        assert_eq!(v["consistencygroup"], "");
        assert_eq!(v["contentvolume"], "");
    }

    #[test]
    fn a_volume_shows_what_a_resize_compares_its_fixed_fields_with() {
        use crate::service::commands::FixedVolumeField;
        use crate::service::volumes::fixed_field_value;
        let mut record = volume_record();
        record
            .attributes
            .insert("flavor".into(), json!("filedirect"));
        for record in [volume_record(), record] {
            let shown = json_of(&volume(&record));
            let attributes = VolumeAttributes::from_record(&record.attributes);
            for field in FixedVolumeField::ALL {
                let expected = fixed_field_value(&record, &attributes, field);
                let got = shown.get(field.wire_name()).cloned().unwrap_or(json!(""));
                assert_eq!(got, json!(expected), "{}", field.wire_name());
            }
        }
    }

    #[test]
    fn a_volume_with_a_running_job_shows_its_status_and_progress() {
        let mut record = volume_record();
        record.state = VolumeState::Resizing;
        record.job = Some((7, 40, "Copying".into()));
        let v = json_of(&volume(&record));
        assert_eq!(v["state"], "Resizing");
        assert_eq!(v["status"], "Copying");
        assert_eq!(v["progress"], 40);
    }
}
