//! The JSON a storage node and the control plane exchange about the
//! volumes' fronts a node runs (`POST /nodes/{node}/storage/fronts` and
//! `POST /nodes/{node}/storage/failures`). Both sides use these types, so
//! the wire cannot drift between them; field names are the JSON names.

use serde::{Deserialize, Serialize};

/// A node's long poll: what it last heard and what it has open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrontsPoll {
    /// The version of the last answer; empty on the first call.
    #[serde(default)]
    pub version: String,
    /// Each front the node was asked for, opened or not.
    #[serde(default)]
    pub open: Vec<FrontOpen>,
}

/// One front as the node has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrontOpen {
    pub volume: String,
    /// The epoch it opened (or tried to open) the volume at.
    pub epoch: u64,
    /// Empty when open; else why it failed.
    #[serde(default)]
    pub error: String,
}

/// The fronts wanted of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontsAnswer {
    /// A digest of `fronts`: the node sends it back in its next poll.
    pub version: String,
    pub fronts: Vec<FrontSpec>,
}

/// One volume whose front the node runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontSpec {
    pub volume: String,
    /// The front epoch the node opens the volume at.
    pub epoch: u64,
    /// Bytes.
    pub size: u64,
    /// Per copy, the medium of each column (`VolumeLayout.media`).
    pub media: Vec<Vec<String>>,
    /// Media whose copies are lost (`VolumeOpening.lost_media`).
    pub lostmedia: Vec<String>,
    /// Every node holding a medium of the volume, this one included.
    pub nodes: Vec<FrontNode>,
    /// PEM certificates the slice servers are checked against; empty: the
    /// slice protocol runs without TLS.
    pub slicetlsroots: Vec<String>,
    pub exports: Vec<FrontExport>,
}

/// A storage node's slice server, and which of the volume's media it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontNode {
    pub node: String,
    /// IP:PORT.
    pub sliceaddress: String,
    pub slicecredential: String,
    pub media: Vec<String>,
}

/// One NBD export of the volume (an attachment).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontExport {
    pub name: String,
    /// The attaching node's name.
    pub host: String,
    /// The IP address it connects from.
    pub hostaddress: String,
    pub readonly: bool,
    /// A snapshot's view; None: the live volume.
    pub snapshot: Option<FrontSnapshot>,
}

/// Which snapshot an export shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontSnapshot {
    pub seq: u64,
    /// Bytes: the volume's size when the snapshot was taken.
    pub size: u64,
}

/// Copy failures a node's fronts met.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailuresBody {
    pub failures: Vec<FrontFailure>,
}

/// One failure, as `svs_dataplane::CopyFailure`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrontFailure {
    pub medium: String,
    pub volume: String,
    pub copy: u32,
    pub column: u32,
    /// The whole medium failed, not this copy alone.
    pub mediumfailed: bool,
}

/// How many failures changed what the control plane knew, and those it
/// did not take from this node (the volume's front is not the node's, or
/// the volume is gone): every other one of the body is in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailuresRecorded {
    pub recorded: u64,
    /// A node that does not know it (older) reads none.
    #[serde(default)]
    pub refused: Vec<FrontFailure>,
}
