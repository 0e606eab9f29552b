//! The JSON a node's host agent and the control plane exchange: the
//! node's desired attachments (`GET /nodes/{node}/agent/attachments`) and
//! the host state reported back (`PUT
//! /nodes/{node}/agent/attachments/{volumeid}/{snapshotid}`). The API's
//! document, its handlers and the agent use these types, so the wire cannot
//! drift between them; field names are the JSON names.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What a node's agent should do (svs extension).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = AgentDesiredState)]
pub struct DesiredState {
    pub node: String,
    /// Hex digest of `attachments`: send it back as `revision` to wait for
    /// a change.
    pub revision: String,
    /// Of every tenant, ordered by (volumeid, snapshotid).
    pub attachments: Vec<DesiredAttachment>,
}

/// One attachment as a node's agent should have it (svs extension).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = AgentAttachment)]
pub struct DesiredAttachment {
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
    pub kind: String,
    /// `ext4` or `xfs` for a `file` volume; null otherwise.
    pub filesystem: Option<String>,
    // Absent from an older control plane's answer, as `manager`.
    #[serde(default)]
    #[schema(required = true)]
    pub filesystemprovisioned: bool,
    /// GiB: the volume's current size for `top`, the snapshot's
    /// `volumesize` for a snapshot.
    pub size: u64,
    /// `agent` or `csi`: an agent skips `csi` attachments (the CSI node
    /// plugin makes them real).
    #[schema(pattern = "^(agent|csi)$", required = true)]
    #[serde(default = "agent_manager")]
    pub manager: String,
    /// The running job that asks the agent to grow the filesystem to
    /// `size` (a `volume_grow_filesystem`, or a resize once the volume has
    /// its new size, not while its data moves): a new id asks for a new
    /// attempt even at the same size; the agent names it as `growjob` in
    /// its report. Null when no job asks (`top` read-write attachments only).
    pub growjob: Option<i64>,
}

fn agent_manager() -> String {
    "agent".into()
}

impl DesiredAttachment {
    /// The name of the attachment on its host (state records, devices).
    pub fn key(&self) -> String {
        format!("{}-{}", self.volumeid, self.snapshotid)
    }

    pub fn detaching(&self) -> bool {
        self.state == "Detaching"
    }

    pub fn is_file(&self) -> bool {
        self.kind == "file"
    }

    /// Made real by the CSI node plugin, not by the agent.
    pub fn is_csi(&self) -> bool {
        self.manager == "csi"
    }
}

/// `PUT /nodes/{node}/agent/attachments/{volumeid}/{snapshotid}` (svs
/// extension, node agents only): replaces the last report; a field left
/// out or null is cleared.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HostReport {
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

impl HostReport {
    pub fn state(state: &str) -> HostReport {
        HostReport {
            hoststate: state.to_string(),
            ..HostReport::default()
        }
    }

    pub fn error(detail: impl Into<String>) -> HostReport {
        HostReport {
            hoststate: "Error".into(),
            hostdetail: Some(detail.into()),
            ..HostReport::default()
        }
    }
}
