//! The API's request bodies that clients send: one definition for the
//! handlers that read and document them (`control::api`) and for the
//! client and CSI that send them. An optional field is left out when None.

use crate::fields::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::net::IpAddr;
use std::path::PathBuf;
use svs_domain::{AttachmentManager, CredentialRole, ResourceName};
use utoipa::ToSchema;

/// Largest medium accepted through the API, in GiB (1 EiB).
pub const MAX_MEDIUM_GIB: u64 = 1 << 30;

#[derive(Deserialize, Serialize, ToSchema)]
pub struct SignInRequest {
    #[schema(min_length = 1)]
    pub email: String,
    #[schema(min_length = 1)]
    pub password: String,
}

#[derive(Deserialize, Serialize, ToSchema)]
#[allow(non_snake_case)]
pub struct SignOutRequest {
    /// The AccessToken of the session (it authenticates this call).
    #[schema(min_length = 1)]
    pub AccessToken: String,
}

#[derive(Deserialize, Serialize, ToSchema)]
#[allow(non_snake_case)]
pub struct RefreshRequest {
    /// The RefreshToken from `POST /signin`.
    #[schema(min_length = 1)]
    pub RefreshToken: String,
}

/// `POST /users`.
#[derive(Deserialize, Serialize, ToSchema)]
#[schema(as = UserCreate)]
pub struct UserCreateRequest {
    #[schema(min_length = 3, max_length = 254, pattern = "^[^\\s@]+@[^\\s]+$")]
    pub email: String,
    /// At least 8 characters.
    #[schema(min_length = 8)]
    pub password: String,
    /// Display name (default: the part of the e-mail before '@').
    #[schema(min_length = 1, max_length = 50, nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The user's tenant, created if new (default: the administrator's own).
    #[schema(min_length = 1, max_length = 63, nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Make the user a service administrator (default false).
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin: Option<bool>,
}

/// `PATCH /users/{user}`: at least one field.
#[derive(Deserialize, Serialize, ToSchema)]
#[schema(as = UserModify)]
pub struct UserModifyRequest {
    /// true disables the user (its sessions end), false enables it.
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Grant (true) or take away (false) the administrator role.
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin: Option<bool>,
}

/// `POST /users/{user}/password`.
#[derive(Deserialize, Serialize, ToSchema)]
#[schema(as = UserPasswordReset)]
pub struct PasswordResetRequest {
    /// The new password, at least 8 characters.
    #[schema(min_length = 8)]
    pub password: String,
}

/// `PUT /users/me/password`.
#[derive(Deserialize, Serialize, ToSchema)]
#[schema(as = OwnPasswordChange)]
pub struct OwnPasswordRequest {
    #[schema(min_length = 1)]
    pub currentpassword: String,
    /// At least 8 characters.
    #[schema(min_length = 8)]
    pub newpassword: String,
}

/// `POST /volumes`. Unknown fields are ignored; the reference's stored
/// fields (`consistencygroup`, `capacitygroup`, ...) are kept and shown.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[schema(as = VolumeCreate)]
pub struct VolumeCreateRequest {
    #[schema(
        pattern = "^([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*)$",
        max_length = 63
    )]
    pub name: String,
    /// `block` (default when absent or `""`) or `file`.
    #[schema(pattern = "^(block|file)?$", nullable = false)]
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// GiB.
    #[schema(minimum = 1, maximum = 1_048_576)]
    pub size: u64,
    /// Name of a policy of the caller's tenant.
    #[schema(min_length = 1)]
    pub policy: String,
    /// Zone for the first copy; absent or `""`: any.
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// A clone: the volume whose snapshot fills the new volume (with
    /// `contentsnapshot`); absent or `""`: an empty volume.
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contentvolume: Option<String>,
    /// A clone: the snapshot (name or id) of `contentvolume` whose content
    /// fills the new volume; `size` must be at least its `volumesize`.
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contentsnapshot: Option<String>,
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consistencygroup: Option<String>,
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zonereplica: Option<String>,
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volumegroupname: Option<String>,
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicationnode: Option<String>,
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicationvolumegroupname: Option<String>,
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacitygroup: Option<String>,
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttlingscheme: Option<String>,
    /// `regular` (default) or `filedirect`.
    #[schema(pattern = "^(regular|filedirect)?$", nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flavor: Option<String>,
    /// svs extension: the filesystem svs makes on a `type: file` volume,
    /// `ext4` (default) or `xfs`; refused (400) for `type: block`.
    #[schema(pattern = "^(ext4|xfs)?$", nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filesystem: Option<String>,
    /// Ignored at creation (type-checked).
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowdatamovement: Option<bool>,
}

/// `PATCH /volumes/{volume}`: the resize. A whole Volume object (as
/// generated clients send it) is accepted: read-only fields are ignored,
/// the writable ones must equal the volume's (null and `""` mean "not
/// sent").
// A client's None goes as null, which means "not sent" here.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[schema(as = VolumeModify)]
pub struct VolumeModifyRequest {
    /// The new size in GiB: greater than the current size, at most 10× it.
    #[schema(minimum = 0)]
    pub size: u64,
    /// Allow moving slices off media that lack room.
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowdatamovement: Option<bool>,
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

/// `POST /volumes/{volume}/snapshots`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
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
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub targetsecret: Option<String>,
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<bool>,
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consistencygroup: Option<bool>,
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consistencygroupname: Option<String>,
}

/// `PATCH /jobs/{job}`: either field or both; none changes nothing.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = JobModify)]
pub struct JobModifyRequest {
    /// true: pause the job's copies; false: resume them.
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// The job's own copy rate: `"64 MiB"` (per second), `"0"`
    /// (unthrottled) or null (the service's rate); a number of bytes per
    /// second is taken too.
    #[schema(value_type = Option<String>, pattern = "^[0-9]{1,6}( ?(B|KB|KiB|MB|MiB|GB|GiB))?$")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub movementrate: Option<Value>,
}

/// `PATCH /media/{media}` (administrators only): `state` or `size`, one
/// of them.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = MediaModify, min_properties = 1, max_properties = 1)]
pub struct MediaModifyRequest {
    /// `Failed`: declares the medium failed (any medium). `Draining`: it
    /// takes no new slice and one job moves every slice off it. `Ready`:
    /// it takes slices again.
    #[schema(pattern = "^(Failed|Draining|Ready)$", nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// New logical capacity in GiB (API-managed media only): any size down
    /// to what is in use on it.
    #[schema(minimum = 1, maximum = 1073741824, nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// `POST /volumes/{volume}/snapshots/{snapshot}/attachments`.
#[derive(Default, Deserialize, Serialize, ToSchema)]
#[schema(as = AttachmentCreate)]
pub struct AttachmentCreateRequest {
    /// Ignored (the volume is in the path).
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volumename: Option<String>,
    /// Ignored (the snapshot is in the path).
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshotname: Option<String>,
    /// Ignored: svs has no performance allocation.
    #[schema(value_type = Option<u8>, nullable = false, minimum = 1, maximum = 100)]
    #[serde(
        deserialize_with = "opt_whole::<1, 100, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub allocated_resources: Option<u64>,
    /// The node that opens the volume over NBD.
    #[schema(min_length = 1)]
    pub node: String,
    /// Default false.
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readonly: Option<bool>,
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mountpoint: Option<String>,
    /// svs extension: who makes the attachment real on the node, `agent`
    /// (the node's host agent; the default) or `csi` (the CSI node plugin;
    /// the host agent leaves it alone).
    #[schema(value_type = Option<String>, nullable = false, pattern = "^(agent|csi)$")]
    #[serde(
        deserialize_with = "manager",
        serialize_with = "write_manager",
        skip_serializing_if = "Option::is_none"
    )]
    pub manager: Option<AttachmentManager>,
}

/// `PATCH .../attachments/{node}`: only what is sent changes.
#[derive(Default, Deserialize, Serialize, ToSchema)]
#[schema(as = AttachmentModify)]
pub struct AttachmentModifyRequest {
    /// Ignored (the volume is in the path).
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volumename: Option<String>,
    /// Ignored (the snapshot is in the path).
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshotname: Option<String>,
    /// Ignored: svs has no performance allocation.
    #[schema(value_type = Option<u8>, nullable = false, minimum = 1, maximum = 100)]
    #[serde(
        deserialize_with = "opt_whole::<1, 100, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub allocated_resources: Option<u64>,
    /// Ignored (the node is in the path).
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readonly: Option<bool>,
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mountpoint: Option<String>,
}

/// `POST /nodes/{node}/credentials` (svs extension): no body, or `{}`.
#[derive(Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NodeCredentialCreate)]
pub struct NodeCredentialCreateRequest {
    /// `agent` (the default), `storage` or `agent+storage`.
    #[schema(value_type = Option<String>, pattern = "^(agent|storage|agent\\+storage)$")]
    #[serde(
        deserialize_with = "role",
        serialize_with = "write_role",
        skip_serializing_if = "Option::is_none"
    )]
    pub role: Option<CredentialRole>,
}

/// `POST /nodes` (svs extension, administrators only).
#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NodeCreate)]
pub struct NodeCreateRequest {
    #[schema(
        pattern = "^([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*)$",
        max_length = 63
    )]
    #[schema(value_type = String)]
    #[serde(deserialize_with = "node_name")]
    pub name: ResourceName,
    #[schema(schema_with = node_address_schema)]
    #[serde(deserialize_with = "ip_address")]
    pub address: IpAddr,
    /// Absent or `""`: no zone.
    #[schema(
        pattern = "^(([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*))?$",
        max_length = 63
    )]
    #[schema(value_type = Option<String>, nullable = false)]
    #[serde(
        deserialize_with = "zone_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub zone: Option<String>,
}

/// `PATCH /nodes/{node}` (svs extension, administrators only).
#[derive(Deserialize, Serialize, ToSchema)]
#[schema(as = NodeModify)]
pub struct NodeModifyRequest {
    #[schema(schema_with = new_node_address_schema, required = true)]
    #[serde(
        deserialize_with = "ip_address_or_none",
        serialize_with = "write_ip_address_or_none"
    )]
    pub address: Option<IpAddr>,
}

/// `POST /media` (administrators only): the fields as `GET /media` shows
/// them.
#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = MediaCreate)]
pub struct MediaCreateRequest {
    #[schema(
        pattern = "^([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*)$",
        max_length = 63
    )]
    #[schema(value_type = String)]
    #[serde(deserialize_with = "medium_name")]
    pub mediaid: ResourceName,
    /// The node the medium is attached to; made (API-managed, no address)
    /// when it does not exist yet.
    #[schema(
        pattern = "^([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*)$",
        max_length = 63
    )]
    #[schema(value_type = String)]
    #[serde(deserialize_with = "node_name")]
    pub node: ResourceName,
    /// The node's zone.
    #[schema(
        pattern = "^([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*)$",
        max_length = 63
    )]
    #[schema(value_type = String)]
    #[serde(deserialize_with = "zone_name")]
    pub zone: ResourceName,
    /// The directory holding the slice files: an absolute path without
    /// `..`; created if missing, and it must be writable.
    #[schema(value_type = String, min_length = 1)]
    #[serde(deserialize_with = "directory")]
    pub media: PathBuf,
    /// Logical capacity in GiB (slices are sparse; nothing is preallocated).
    #[schema(minimum = 1, maximum = 1073741824)]
    #[serde(deserialize_with = "whole::<1, MAX_MEDIUM_GIB, _>")]
    pub size: u64,
}

/// `POST /media/rebalance` (administrators only).
#[derive(Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = MediaRebalance, max_properties = 1)]
pub struct MediaRebalanceRequest {
    /// Even the media of this node.
    #[schema(
        pattern = "^([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*)$",
        max_length = 63,
        nullable = false,
        value_type = Option<String>
    )]
    #[serde(
        deserialize_with = "opt_node_name",
        skip_serializing_if = "Option::is_none"
    )]
    pub node: Option<ResourceName>,
    /// Even the media of this zone.
    #[schema(
        pattern = "^([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*)$",
        max_length = 63,
        nullable = false,
        value_type = Option<String>
    )]
    #[serde(
        deserialize_with = "opt_zone_name",
        skip_serializing_if = "Option::is_none"
    )]
    pub zone: Option<ResourceName>,
}
