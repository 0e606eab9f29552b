//! Schemas of the request bodies, for the API document only: `requests.rs`
//! reads bodies as raw JSON to give field-by-field 400 messages, and these
//! types say what it accepts. Names and casing follow the reference API.
//! The fuzzing run (`scripts/fuzz.sh`) checks that the two agree: a body
//! these schemas refuse must get a 4xx, one they accept must not get a 5xx.

#![allow(dead_code, non_snake_case)]

use serde::Deserialize;
use utoipa::openapi::schema::{AnyOfBuilder, ObjectBuilder, Schema, SchemaFormat, Type};
use utoipa::ToSchema;

/// A string that is an IPv4 or IPv6 address (Rust's `IpAddr` syntax), or
/// `""` when `or_empty`.
fn ip_address_schema(description: &str, or_empty: bool) -> Schema {
    let string = || ObjectBuilder::new().schema_type(Type::String);
    let format = |f: &str| {
        string()
            .format(Some(SchemaFormat::Custom(f.into())))
            .min_length(Some(1))
    };
    let mut any = AnyOfBuilder::new()
        .description(Some(description))
        .item(format("ipv4"))
        .item(format("ipv6"));
    if or_empty {
        any = any.item(string().max_length(Some(0)));
    }
    Schema::AnyOf(any.build())
}

fn node_address() -> Schema {
    ip_address_schema(
        "The IP address the node's NBD connections come from.",
        false,
    )
}

fn new_node_address() -> Schema {
    ip_address_schema(
        "The IP address the node's NBD connections come from; `\"\"` removes it.",
        true,
    )
}

#[derive(Deserialize, ToSchema)]
pub struct SignInRequest {
    #[schema(min_length = 1)]
    pub email: String,
    #[schema(min_length = 1)]
    pub password: String,
}

#[derive(Deserialize, ToSchema)]
pub struct SignOutRequest {
    /// The AccessToken of the session (it authenticates this call).
    #[schema(min_length = 1)]
    pub AccessToken: String,
}

#[derive(Deserialize, ToSchema)]
pub struct RefreshRequest {
    /// The RefreshToken from `POST /signin`.
    #[schema(min_length = 1)]
    pub RefreshToken: String,
}

/// `POST /volumes`. Unknown fields are ignored; the reference's stored
/// fields (`consistencygroup`, `capacitygroup`, ...) are kept and shown.
#[derive(Deserialize, ToSchema)]
#[schema(as = VolumeCreate)]
pub struct VolumeCreateRequest {
    #[schema(
        pattern = "^([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*)$",
        max_length = 63
    )]
    pub name: String,
    /// `block` (default when absent or `""`) or `file`.
    #[schema(pattern = "^(block|file)?$")]
    #[serde(default, rename = "type")]
    pub kind: String,
    /// GiB.
    #[schema(minimum = 1, maximum = 1_048_576)]
    pub size: u64,
    /// Name of a policy of the caller's tenant.
    #[schema(min_length = 1)]
    pub policy: String,
    /// Zone for the first copy; absent or `""`: any.
    #[serde(default)]
    pub zone: String,
    /// A clone: the volume whose snapshot fills the new volume (with
    /// `contentsnapshot`); absent or `""`: an empty volume.
    #[serde(default)]
    pub contentvolume: String,
    /// A clone: the snapshot (name or id) of `contentvolume` whose content
    /// fills the new volume; `size` must be at least its `volumesize`.
    #[serde(default)]
    pub contentsnapshot: String,
    #[serde(default)]
    pub consistencygroup: String,
    #[serde(default)]
    pub zonereplica: String,
    #[serde(default)]
    pub volumegroupname: String,
    #[serde(default)]
    pub replicationnode: String,
    #[serde(default)]
    pub replicationvolumegroupname: String,
    #[serde(default)]
    pub capacitygroup: String,
    #[serde(default)]
    pub throttlingscheme: String,
    /// `regular` (default) or `filedirect`.
    #[schema(pattern = "^(regular|filedirect)?$")]
    #[serde(default)]
    pub flavor: String,
    /// svs extension: the filesystem svs makes on a `type: file` volume,
    /// `ext4` (default) or `xfs`; refused (400) for `type: block`.
    #[schema(pattern = "^(ext4|xfs)?$")]
    #[serde(default)]
    pub filesystem: String,
    /// Ignored at creation (type-checked).
    #[serde(default)]
    pub allowdatamovement: bool,
}

/// `PATCH /volumes/{volume}`: the resize. A whole Volume object (as
/// generated clients send it) is accepted: read-only fields are ignored,
/// the writable ones must equal the volume's (null and `""` mean "not
/// sent").
#[derive(Deserialize, ToSchema)]
#[schema(as = VolumeModify)]
pub struct VolumeModifyRequest {
    /// The new size in GiB: greater than the current size, at most 10× it.
    #[schema(minimum = 0)]
    pub size: u64,
    /// Allow moving slices off media that lack room.
    #[serde(default)]
    pub allowdatamovement: bool,
    pub name: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub policy: Option<String>,
    pub zone: Option<String>,
    pub contentvolume: Option<String>,
    pub contentsnapshot: Option<String>,
    pub consistencygroup: Option<String>,
    pub zonereplica: Option<String>,
    pub volumegroupname: Option<String>,
    pub replicationnode: Option<String>,
    pub replicationvolumegroupname: Option<String>,
    pub capacitygroup: Option<String>,
    pub throttlingscheme: Option<String>,
    pub flavor: Option<String>,
}

/// The settings of a policy other than its name and resiliency. Absent
/// fields keep their value (the default, on creation).
#[derive(Deserialize, ToSchema)]
pub struct PolicySettingsRequest {
    #[schema(maximum = 4_294_967_295_u64)]
    #[serde(default)]
    pub iopswrite: u64,
    #[schema(maximum = 4_294_967_295_u64)]
    #[serde(default)]
    pub iopsread: u64,
    #[schema(maximum = 4_294_967_295_u64)]
    #[serde(default)]
    pub bandwidthwrite: u64,
    #[schema(maximum = 4_294_967_295_u64)]
    #[serde(default)]
    pub bandwidthread: u64,
    #[schema(maximum = 4_294_967_295_u64)]
    #[serde(default)]
    pub latencywrite: u64,
    #[schema(maximum = 4_294_967_295_u64)]
    #[serde(default)]
    pub latencyread: u64,
    #[serde(default)]
    pub localzoneread: bool,
    #[serde(default)]
    pub failureperformance: bool,
    /// `performance` when a new policy does not say.
    #[schema(pattern = "^(capacity|balanced|performance)$")]
    #[serde(default)]
    pub capacityoptimization: String,
    #[schema(maximum = 500)]
    #[serde(default)]
    pub capacityreservation: u64,
    /// Media failures to survive, 0–2 (default 2).
    #[schema(maximum = 2)]
    #[serde(default)]
    pub resiliencymedia: u8,
    /// Node failures to survive, 0–2 (default 1).
    #[schema(maximum = 2)]
    #[serde(default)]
    pub resiliencynode: u8,
    /// Zone failures to survive, 0–2 (default 1).
    #[schema(maximum = 2)]
    #[serde(default)]
    pub resiliencyzone: u8,
    #[serde(default)]
    pub encryption: bool,
    #[serde(default)]
    pub sed: bool,
    #[serde(default)]
    pub integrity: bool,
    #[schema(maximum = 100_000)]
    #[serde(default)]
    pub snapshotkeep: u64,
    #[serde(default)]
    pub snapshotfrequency: String,
    #[schema(maximum = 31)]
    #[serde(default)]
    pub snapshotday: u64,
    #[schema(maximum = 23)]
    #[serde(default)]
    pub snapshothour: u64,
    #[schema(maximum = 59)]
    #[serde(default)]
    pub snapshotminute: u64,
}

/// Authorship of a policy, set by the service: accepted (a whole Policy
/// object may be sent) if strings, and ignored.
#[derive(Deserialize, ToSchema)]
pub struct PolicyAuthorshipRequest {
    #[serde(default)]
    pub createdbyuserName: String,
    #[serde(default)]
    pub createdbyuseremail: String,
    #[serde(default)]
    pub createdtime: String,
    #[serde(default)]
    pub updatebyusername: String,
    #[serde(default)]
    pub updatebyUseremail: String,
    #[serde(default)]
    pub updatetime: String,
}

/// `POST /policies`.
#[derive(Deserialize, ToSchema)]
#[schema(as = PolicyCreate)]
pub struct PolicyCreateRequest {
    #[schema(
        pattern = "^([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*)$",
        max_length = 63
    )]
    pub name: String,
    #[serde(flatten)]
    pub settings: PolicySettingsRequest,
    #[serde(flatten)]
    pub authorship: PolicyAuthorshipRequest,
}

/// `PATCH /policies/{policy}`: only what is sent changes; `name` renames.
#[derive(Deserialize, ToSchema)]
#[schema(as = PolicyModify)]
pub struct PolicyModifyRequest {
    #[schema(
        pattern = "^([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*)$",
        max_length = 63
    )]
    #[serde(default)]
    pub name: String,
    #[serde(flatten)]
    pub settings: PolicySettingsRequest,
    #[serde(flatten)]
    pub authorship: PolicyAuthorshipRequest,
}

/// `POST /volumes/{volume}/snapshots/{snapshot}/attachments`.
#[derive(Deserialize, ToSchema)]
#[schema(as = AttachmentCreate)]
pub struct AttachmentCreateRequest {
    /// The node that opens the volume over NBD.
    #[schema(min_length = 1)]
    pub node: String,
    /// Default false.
    #[serde(default)]
    pub readonly: bool,
    #[serde(default)]
    pub mountpoint: String,
    /// svs extension: who makes the attachment real on the node, `agent`
    /// (the node's host agent; the default) or `csi` (the CSI node plugin;
    /// the host agent leaves it alone).
    #[schema(value_type = Option<String>, nullable = false, pattern = "^(agent|csi)$")]
    #[serde(default)]
    pub manager: Option<String>,
    /// Ignored (the volume is in the path).
    #[serde(default)]
    pub volumename: String,
    /// Ignored (the snapshot is in the path).
    #[serde(default)]
    pub snapshotname: String,
    /// Ignored: svs has no performance allocation.
    #[schema(minimum = 1, maximum = 100)]
    #[serde(default)]
    pub allocated_resources: u8,
}

/// `PATCH .../attachments/{node}`: only what is sent changes.
#[derive(Deserialize, ToSchema)]
#[schema(as = AttachmentModify)]
pub struct AttachmentModifyRequest {
    #[serde(default)]
    pub readonly: bool,
    #[serde(default)]
    pub mountpoint: String,
    /// Ignored (the node is in the path).
    #[serde(default)]
    pub node: String,
    /// Ignored (the volume is in the path).
    #[serde(default)]
    pub volumename: String,
    /// Ignored (the snapshot is in the path).
    #[serde(default)]
    pub snapshotname: String,
    /// Ignored: svs has no performance allocation.
    #[schema(minimum = 1, maximum = 100)]
    #[serde(default)]
    pub allocated_resources: u8,
}

/// `PATCH /nodes/{node}` (svs extension, administrators only).
#[derive(Deserialize, ToSchema)]
#[schema(as = NodeModify)]
pub struct NodeModifyRequest {
    #[schema(schema_with = new_node_address)]
    pub address: String,
}

/// `POST /volumes/{volume}/snapshots`.
#[derive(Deserialize, ToSchema)]
#[schema(as = SnapshotCreate)]
pub struct SnapshotCreateRequest {
    /// Volume name rules; `top` is reserved for the live volume.
    #[schema(
        pattern = "^([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*)$",
        max_length = 63
    )]
    pub name: String,
    /// `crash` or `application` (svs takes both at one write barrier).
    #[schema(pattern = "^(crash|application)$")]
    pub consistency: String,
    #[serde(default)]
    pub targetsecret: String,
    #[serde(default)]
    pub policy: bool,
    #[serde(default)]
    pub consistencygroup: bool,
    #[serde(default)]
    pub consistencygroupname: String,
}

/// `PATCH /volumes/{volume}/snapshots/{snapshot}`: a new name and the
/// stored fields; read-only fields sent back are ignored.
#[derive(Deserialize, ToSchema)]
#[schema(as = SnapshotModify)]
pub struct SnapshotModifyRequest {
    /// A new name (absent or `""`: unchanged).
    #[schema(
        pattern = "^(([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*))?$",
        max_length = 63
    )]
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub targetsecret: String,
    #[serde(default)]
    pub policy: bool,
    #[serde(default)]
    pub consistencygroup: bool,
    #[serde(default)]
    pub consistencygroupname: String,
}

/// `PATCH /media/{media}` (administrators only): `state` or `size`, one
/// of them.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = MediaModify, min_properties = 1, max_properties = 1)]
pub struct MediaModifyRequest {
    /// `Failed`: declares the medium failed (any medium).
    #[schema(pattern = "^Failed$", nullable = false)]
    pub state: Option<String>,
    /// New logical capacity in GiB (API-managed media only): any size down
    /// to what is in use on it.
    #[schema(minimum = 1, maximum = 1073741824, nullable = false)]
    pub size: Option<u64>,
}

/// `POST /media` (administrators only): the fields as `GET /media` shows
/// them.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = MediaCreate)]
pub struct MediaCreateRequest {
    #[schema(
        pattern = "^([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*)$",
        max_length = 63
    )]
    pub mediaid: String,
    /// The node the medium is attached to; made (API-managed, no address)
    /// when it does not exist yet.
    #[schema(
        pattern = "^([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*)$",
        max_length = 63
    )]
    pub node: String,
    /// The node's zone.
    #[schema(
        pattern = "^([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*)$",
        max_length = 63
    )]
    pub zone: String,
    /// The directory holding the slice files: an absolute path without
    /// `..`; created if missing, and it must be writable.
    #[schema(min_length = 1)]
    pub media: String,
    /// Logical capacity in GiB (slices are sparse; nothing is preallocated).
    #[schema(minimum = 1, maximum = 1073741824)]
    pub size: u64,
}

/// `POST /nodes` (svs extension, administrators only).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NodeCreate)]
pub struct NodeCreateRequest {
    #[schema(
        pattern = "^([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*)$",
        max_length = 63
    )]
    pub name: String,
    #[schema(schema_with = node_address)]
    pub address: String,
    /// Absent or `""`: no zone.
    #[schema(
        pattern = "^(([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*))?$",
        max_length = 63
    )]
    #[serde(default)]
    pub zone: String,
}

/// `POST /nodes/{node}/credentials` (svs extension): no body, or `{}`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NodeCredentialCreate)]
pub struct NodeCredentialCreateRequest {}

/// `PUT /nodes/{node}/agent/attachments/{volumeid}/{snapshotid}` (svs
/// extension, node agents only): replaces the last report; a field left
/// out or null is cleared.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = HostReport)]
pub struct HostReportRequest {
    #[schema(pattern = "^(Connected|Mounted|Error|Disconnected)$")]
    pub hoststate: String,
    /// The reason for `Error`, or a note.
    pub hostdetail: Option<String>,
    /// The block device on the host, e.g. `/dev/loop3`.
    pub device: Option<String>,
    /// Where the filesystem is mounted.
    pub mountpath: Option<String>,
    /// Total bytes of the mounted filesystem (`f_blocks * f_frsize`).
    #[schema(maximum = 9_223_372_036_854_775_807_u64)]
    pub filesystembytes: Option<u64>,
    /// The volume size (GiB) the host's filesystem was last grown to fill.
    #[schema(maximum = 1_048_576)]
    pub filesystemsize: Option<u64>,
    /// The last attempt to grow the filesystem to the volume's size failed
    /// with this; null when the agent starts a new attempt.
    pub growerror: Option<String>,
    /// The growth request (`growjob` of the desired attachment) the last
    /// attempt answered: a job waiting for the growth takes this report as
    /// its answer even when it reads like the previous one.
    pub growjob: Option<i64>,
}
