//! The wire types of a volume's front on a storage node (the node and the
//! control plane share them): `POST /nodes/{node}/storage/fronts` (a long
//! poll: the node's open fronts in, the fronts wanted of it out) and `POST
//! /nodes/{node}/storage/failures` (copy failures its fronts met). Field
//! names are the JSON's.

use serde::{Deserialize, Serialize};

/// The body of `POST /nodes/{node}/storage/fronts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontsPoll {
    /// The version of the last answer; empty on the first call.
    pub version: String,
    /// The fronts the node has open (or failed to open).
    pub open: Vec<FrontOpen>,
}

/// One front as the node has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontOpen {
    pub volume: String,
    pub epoch: u64,
    /// Empty when open, else why it failed.
    pub error: String,
}

/// The answer to `POST /nodes/{node}/storage/fronts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontsAnswer {
    /// A digest of `fronts`.
    pub version: String,
    pub fronts: Vec<FrontSpec>,
}

/// One volume whose front the node must run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontSpec {
    pub volume: String,
    pub epoch: u64,
    /// Bytes.
    pub size: u64,
    /// Medium of each column, per copy (`VolumeLayout.media`).
    pub media: Vec<Vec<String>>,
    /// Media of the copies lost (`VolumeOpening.lost_media`).
    pub lostmedia: Vec<String>,
    /// Every node holding a medium of the volume, this one included.
    pub nodes: Vec<FrontNode>,
    /// PEM certificates the slice servers' certificates are checked against;
    /// empty: the slice protocol without TLS.
    pub slicetlsroots: Vec<String>,
    pub exports: Vec<FrontExport>,
}

/// A storage node holding media of the volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontNode {
    pub node: String,
    /// IP:PORT.
    pub sliceaddress: String,
    pub slicecredential: String,
    pub media: Vec<String>,
}

/// One NBD export of the volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontExport {
    pub name: String,
    /// The attaching node's name.
    pub host: String,
    /// The attaching node's IP: the only peer allowed.
    pub hostaddress: String,
    pub readonly: bool,
    /// None: the live volume.
    pub snapshot: Option<FrontSnapshot>,
}

/// A snapshot export's view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontSnapshot {
    pub seq: u64,
    /// Bytes.
    pub size: u64,
}

/// The body of `POST /nodes/{node}/storage/failures`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailuresBody {
    pub failures: Vec<FrontFailure>,
}

/// A `svs_dataplane::CopyFailure` a front on the node met.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontFailure {
    pub medium: String,
    pub volume: String,
    pub copy: u32,
    pub column: u32,
    pub mediumfailed: bool,
}

/// The answer to `POST /nodes/{node}/storage/failures`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailuresRecorded {
    pub recorded: u64,
}
