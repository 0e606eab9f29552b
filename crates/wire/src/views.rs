//! The API's answers that clients read as well as print: the server
//! renders them (`api`), the CLI, CSI and other clients deserialize them
//! (`client`), and `/openapi.json` documents them, from this one
//! definition. Field names are the JSON names.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// What a mutating call that runs as a job answers: follow the job with
/// `GET /jobs/{JobID}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[allow(non_snake_case)]
pub struct JobStarted {
    pub Message: String,
    /// The job's id, a decimal string.
    pub JobID: String,
    /// The object the job works on (a volume id).
    pub ObjectID: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = Job)]
pub struct JobView {
    pub id: i64,
    /// `volume_create`, `volume_delete`, `volume_modify_extend`,
    /// `volume_recovery`, `volume_grow_filesystem`, `attachment_create`,
    /// `attachment_delete`, `attachment_modify`, `snapshot_*`,
    /// `media_drain`, `media_rebalance`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The object the job works on: a volume id; a drain's medium id; a
    /// rebalance's `node:<name>`, `zone:<name>` or `all`.
    pub object: String,
    /// svs extension: the name of that volume, kept after it is deleted
    /// (the object itself for a drain or a rebalance).
    pub objectname: String,
    /// The job's arguments.
    #[schema(value_type = Object)]
    pub args: Value,
    /// `Pending`, `Running`, `Done` or `Error`.
    pub state: String,
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
    /// svs extension: a cancel was asked for (the job is being undone, or
    /// was: it then ends in `Error` with status `Cancelled`).
    pub cancelrequested: bool,
    /// svs extension: paused on request (`PATCH /jobs/{job}`).
    pub paused: bool,
    /// svs extension: the job's own copy rate in bytes per second (0:
    /// unthrottled); null: the service's `movement_rate`.
    pub movementrate: Option<u64>,
    /// svs extension, `GET /jobs/{job}` of a data movement or a recovery:
    /// each moving slice with its own outcome.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slices: Option<Vec<SliceOutcomeView>>,
}

/// One slice of a movement or a recovery, with its outcome.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SliceOutcomeView {
    /// `c1-k0`.
    pub slice: String,
    pub from: String,
    pub to: String,
    /// `moved` (`rebuilt`), `copying`, `not started`, `not moved` (`not
    /// rebuilt`), `failed`, `moving back`, `moved back`.
    pub outcome: String,
    /// Why its last copy failed: `target full`, `node unreachable`,
    /// `source read error`, `target not writable`, `verification
    /// mismatch`, `I/O error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// How many of its copies failed.
    pub failures: u32,
}

/// A volume. Fields the reference requires to be non-empty are omitted
/// when svs has no value for them.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = Volume)]
pub struct VolumeView {
    #[schema(min_length = 1)]
    pub name: String,
    #[schema(min_length = 1)]
    pub volumeid: String,
    /// `block` or `file`.
    #[schema(pattern = "^(block|file)$")]
    #[serde(rename = "type")]
    pub kind: String,
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
    /// svs extension: every zone the volume's slices (all copies) are on,
    /// sorted; empty before placement.
    pub zones: Vec<String>,
    /// svs extension: bytes of data the volume holds: what was written to
    /// it, summed over its columns on one healthy copy each (never-written
    /// ranges, other copies and snapshots not counted); null when a column
    /// has no healthy copy or a slice could not be measured.
    pub writtenbytes: Option<u64>,
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
    pub state: String,
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
    pub flavor: String,
    /// svs extension, `file` volumes only: the filesystem svs makes on it
    /// (`ext4` or `xfs`); left out for `block` volumes.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^(ext4|xfs)$")]
    pub filesystem: Option<String>,
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

/// One slice of a volume (svs extension): one column of one copy, on one
/// medium.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
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
    pub health: String,
    /// A stale copy (`Lost` while its medium stays in service: its storage
    /// node stopped answering, or its file went missing): the generation
    /// it missed, i.e. the volume's front epoch whose writes it lacks. It
    /// is never read again until a recovery rebuilds it. `null` otherwise
    /// (also for a copy lost with a failed medium).
    pub stalegeneration: Option<u64>,
}

/// A snapshot of a volume. `used` is bytes it holds on media (every copy),
/// `volumesize` the volume's size in GiB when it was taken.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
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
    pub consistency: String,
    /// When it was taken, RFC 3339.
    pub time: String,
    pub used: u64,
    /// `Creating`, `Ready` or `Deleting`.
    pub state: String,
    pub status: String,
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

/// An attachment of a volume (`top`) to a node; `exportname` and `uri` are
/// svs extensions: where the node opens it over NBD.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
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
    pub manager: String,
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

/// A medium: `size`, `freesize` (GiB) and `volumescount` are true to the
/// allocations; `writtenbytes` to what is on its disk.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = Media)]
pub struct MediumView {
    pub mediaid: String,
    /// The medium's directory.
    pub media: String,
    pub model: String,
    pub bus: String,
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
    /// svs extension: the parts of `size - freesize`, in GiB: what the
    /// slices placed on it take, what running jobs booked, what its
    /// snapshots hold (the console's capacity bar).
    pub allocatedsize: u64,
    pub bookedsize: u64,
    pub snapshotsize: u64,
    /// svs extension: bytes its snapshots' files hold on it (the sum of
    /// their `used` on this medium); `snapshotsize` is what that takes of
    /// its free space, in whole GiB rounded up.
    pub snapshotbytes: u64,
    pub volumescount: u64,
    pub sectorsize: u32,
    pub sed: bool,
    pub assignment: String,
    pub state: String,
    pub status: String,
    pub progress: u8,
    pub capacitygroup: String,
    /// svs extension: `config` (listed in the configuration file: change it
    /// there), `api` (added through the API) or `node` (registered by its
    /// storage node, `node`: change it there).
    pub managedby: String,
}

/// A user as the API shows it (never its password hash).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = User)]
pub struct UserView {
    pub userid: i64,
    pub email: String,
    pub name: String,
    /// The tenant whose volumes and policies the user works with.
    pub tenant: String,
    /// A service administrator: manages users, media and nodes.
    pub admin: bool,
    /// Cannot sign in; its tokens are refused.
    pub disabled: bool,
    /// RFC 3339 UTC.
    pub createdtime: String,
}

/// A node's new agent credential (svs extension), shown only here.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = NodeCredential)]
pub struct CredentialView {
    pub node: String,
    /// `agent`, `storage` or `agent+storage`: the routes the credential
    /// may call.
    #[schema(pattern = "^(agent|storage|agent\\+storage)$")]
    pub role: String,
    /// 16 hex digits: the credential's public id.
    pub credentialid: String,
    /// `svsnode.<credentialid>.<secret>`: the agent's bearer token.
    pub credential: String,
    /// RFC 3339.
    pub created: String,
}

/// A node: a media node or a configured host; `address` (svs extension) is
/// the IP its NBD connections come from (`""`: none).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = Node)]
pub struct NodeView {
    #[schema(min_length = 1)]
    pub name: String,
    pub zone: String,
    pub address: String,
    pub os: String,
    pub state: String,
    pub status: String,
    pub progress: u8,
    pub mediacount: usize,
    /// GiB.
    pub size: u64,
    /// GiB.
    pub freesize: u64,
    /// svs extension: the parts of `size - freesize` on its media, in GiB:
    /// slices placed, booked by running jobs, held by snapshots.
    pub allocatedsize: u64,
    pub bookedsize: u64,
    pub snapshotsize: u64,
    /// svs extension: bytes the snapshots on its media hold (the sum of
    /// their `used`); `snapshotsize` is what that takes of its free space,
    /// in whole GiB per medium, rounded up.
    pub snapshotbytes: u64,
    pub volumescount: u64,
    /// svs extension: the node has a live node credential (its host
    /// agent's, its storage node's, or one for both).
    pub agentcredential: bool,
    /// svs extension: the role of that credential (`agent`, `storage` or
    /// `agent+storage`); null when it has none.
    #[schema(pattern = "^(agent|storage|agent\\+storage)$")]
    pub credentialrole: Option<String>,
    /// svs extension: the agent's last authenticated request (RFC 3339);
    /// null when never.
    pub agentseen: Option<String>,
    /// svs extension: `config` (listed in the configuration file, as
    /// `[[nodes]]` or the node of a `[[media]]`) or `api` (added through
    /// the API).
    pub managedby: String,
    /// svs extension: `storage` (it registered as a storage node, `svs
    /// storage-node`) or `host` (it holds configured media or attaches
    /// volumes).
    #[schema(pattern = "^(storage|host)$")]
    pub role: String,
    /// svs extension: a storage node's last heartbeat (RFC 3339); null for
    /// other nodes.
    pub lastheartbeat: Option<String>,
    /// svs extension: where fronts reach a storage node's slice server
    /// (IP:PORT); `""` for other nodes.
    pub sliceaddress: String,
    /// svs extension: copies of slices on the node's media.
    pub copiescount: u64,
}

/// What a mutating call that is done at once answers.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[allow(non_snake_case)]
pub struct Done {
    pub Message: String,
    /// The name of the object changed.
    pub ObjectID: String,
}

// The tokens of a session: `POST /signin`, `POST /refresh`, `PUT
// /users/me/password` (no `///`: the document has no description for it).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
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
    pub TokenType: String,
}
