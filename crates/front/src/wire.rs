//! The JSON a storage node and the control plane exchange about the
//! volumes' fronts a node runs (`POST /nodes/{node}/storage/fronts` and
//! `POST /nodes/{node}/storage/failures`). Both sides and the API's
//! document use these types, so the wire cannot drift between them; field
//! names are the JSON names. (A `//` comment is for readers of the code; a
//! `///` one is also the field's description in `/openapi.json`.)

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A node's long poll: what it last heard and what it has open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(
    as = StorageFrontsPoll,
    description = "`POST /nodes/{node}/storage/fronts` (documentation of `FrontsPoll`)."
)]
pub struct FrontsPoll {
    /// The version of the last answer; empty on the first call.
    #[serde(default)]
    #[schema(required = true)]
    pub version: String,
    // Each front the node was asked for, opened or not.
    #[serde(default)]
    #[schema(required = true)]
    pub open: Vec<FrontOpen>,
}

/// One front as the node has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = StorageFrontOpen)]
pub struct FrontOpen {
    pub volume: String,
    // The epoch it opened (or tried to open) the volume at.
    pub epoch: u64,
    /// Empty when open, else why it failed.
    #[serde(default)]
    #[schema(required = true)]
    pub error: String,
}

/// The fronts wanted of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(
    as = StorageFronts,
    description = "The fronts wanted of a node (documentation of `FrontsAnswer`)."
)]
pub struct FrontsAnswer {
    /// A digest of `fronts`.
    // The node sends it back in its next poll.
    pub version: String,
    pub fronts: Vec<FrontSpec>,
}

/// One volume whose front the node runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = StorageFrontSpec)]
pub struct FrontSpec {
    pub volume: String,
    // The front epoch the node opens the volume at.
    pub epoch: u64,
    /// Bytes.
    pub size: u64,
    /// Per copy, the medium of each column.
    // As `VolumeLayout.media`.
    pub media: Vec<Vec<String>>,
    // Media whose copies are lost (`VolumeOpening.lost_media`).
    pub lostmedia: Vec<String>,
    // Every node holding a medium of the volume, this one included.
    pub nodes: Vec<FrontNode>,
    /// PEM certificates; empty: the slice protocol without TLS.
    // The slice servers are checked against them.
    pub slicetlsroots: Vec<String>,
    pub exports: Vec<FrontExport>,
}

/// A storage node's slice server, and which of the volume's media it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(
    as = StorageFrontNode,
    description = "A slice server holding media of the volume."
)]
pub struct FrontNode {
    pub node: String,
    // IP:PORT.
    pub sliceaddress: String,
    pub slicecredential: String,
    pub media: Vec<String>,
}

/// One NBD export of the volume (an attachment).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(
    as = StorageFrontExport,
    description = "An export (attachment) of the volume."
)]
pub struct FrontExport {
    pub name: String,
    // The attaching node's name.
    pub host: String,
    // The IP address it connects from.
    pub hostaddress: String,
    pub readonly: bool,
    // A snapshot's view; None: the live volume.
    pub snapshot: Option<FrontSnapshot>,
}

/// Which snapshot an export shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = StorageFrontSnapshot, description = "The snapshot an export shows.")]
pub struct FrontSnapshot {
    pub seq: u64,
    /// Bytes.
    // The volume's size when the snapshot was taken.
    pub size: u64,
}

/// Copy failures a node's fronts met.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(
    as = StorageFailures,
    description = "`POST /nodes/{node}/storage/failures` (documentation of `FailuresBody`)."
)]
pub struct FailuresBody {
    pub failures: Vec<FrontFailure>,
}

/// One failure, as `svs_dataplane::CopyFailure`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = StorageFailure, description = "One copy failure.")]
pub struct FrontFailure {
    pub medium: String,
    pub volume: String,
    pub copy: u32,
    pub column: u32,
    // The whole medium failed, not this copy alone.
    pub mediumfailed: bool,
}

/// How many failures changed what the control plane knew, and those it
/// did not take from this node (the volume's front is not the node's, or
/// the volume is gone): every other one of the body is in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(
    as = StorageFailuresRecorded,
    description = "How many failures changed what svs knew."
)]
pub struct FailuresRecorded {
    pub recorded: u64,
    // A node that does not know it (older) reads none.
    #[serde(default)]
    #[schema(required = true)]
    pub refused: Vec<FrontFailure>,
}
