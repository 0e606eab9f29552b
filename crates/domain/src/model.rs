//! Plain data types shared by every layer.

use serde::{Deserialize, Serialize};

/// Capacities are whole GiB throughout the API and the planner.
pub type Gib = u64;

pub const GIB: u64 = 1024 * 1024 * 1024;

/// Smallest and largest volume size accepted at creation, in GiB.
pub const MIN_VOLUME_GIB: Gib = 1;
pub const MAX_VOLUME_GIB: Gib = 1_048_576;

/// A disk (in the embedded default: a directory) with a logical capacity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Medium {
    pub id: String,
    pub node: String,
    pub zone: String,
    pub size: Gib,
}

/// A medium as configured: the medium and the directory holding its slices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediumRecord {
    pub medium: Medium,
    pub directory: String,
}

/// Who manages a medium or a node: the configuration file, the API, or
/// (media only) the storage node that registered it, which is the medium's
/// `node`.
///
/// The file wins for what it lists: those are made to match it at every
/// start, and the API refuses to change or remove them (an admin edits one
/// place, and a restart never undoes an API change). What the API added is
/// kept in the store and survives restarts; a file entry with the same name
/// takes it over at the next start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ManagedBy {
    Config,
    Api,
    /// Registered by its storage node (`PUT /nodes/{node}/storage`): the
    /// node's heartbeats create, update and remove it; the API and the
    /// configuration file may not.
    Node,
}

svs_names!(ManagedBy {
    Config = "config",
    Api = "api",
    Node = "node",
});

/// A medium together with how much of it is taken, as the planner sees it.
/// `used` counts allocated slices plus space reserved by running jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediumState {
    pub medium: Medium,
    pub used: Gib,
}

impl MediumState {
    pub fn free(&self) -> Gib {
        self.medium.size.saturating_sub(self.used)
    }
}

/// The three resiliency outcomes of a policy that drive placement (each 0..=2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Resiliency {
    pub media: u8,
    pub node: u8,
    pub zone: u8,
}

impl Resiliency {
    /// Copies kept of every slice: one more than the largest failure count to survive.
    pub fn copies(&self) -> u32 {
        1 + u32::from(self.media.max(self.node).max(self.zone))
    }

    /// All three at zero: a single copy, and no data movement allowed.
    pub fn is_none(&self) -> bool {
        self.media == 0 && self.node == 0 && self.zone == 0
    }
}

/// One column of one copy of a volume, placed on one medium.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slice {
    /// Store identity of the slice (stable across moves).
    pub id: i64,
    pub copy: u32,
    pub column: u32,
    pub medium: String,
    /// Logical size of this slice in GiB.
    pub size: Gib,
}

/// A slice's name for people (`c1-k0`: copy 1, column 0), as the API, the
/// jobs' details and the console write it.
pub fn slice_label(copy: u32, column: u32) -> String {
    format!("c{copy}-k{column}")
}

/// Where a new slice goes, as chosen by the planner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlicePlacement {
    pub copy: u32,
    pub column: u32,
    pub medium: String,
    pub size: Gib,
}

/// Size of each column when `size` GiB are striped over `columns` columns.
/// Columns are equal so that striping maps offsets uniformly; the last GiB of
/// an uneven split is rounded up.
pub fn column_size(size: Gib, columns: u32) -> Gib {
    let columns = u64::from(columns.max(1));
    size.div_ceil(columns)
}

/// Job lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum JobState {
    Pending,
    Running,
    Done,
    Error,
}

svs_names!(JobState {
    Pending = "Pending",
    Running = "Running",
    Done = "Done",
    Error = "Error",
});

impl JobState {
    pub fn is_finished(&self) -> bool {
        matches!(self, JobState::Done | JobState::Error)
    }
}

/// Kinds of asynchronous operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum JobKind {
    VolumeCreate,
    VolumeDelete,
    VolumeModifyExtend,
    AttachmentCreate,
    AttachmentDelete,
    AttachmentModify,
    SnapshotCreate,
    SnapshotDelete,
    SnapshotRollback,
    VolumeRecovery,
    VolumeGrowFilesystem,
    MediaDrain,
    MediaRebalance,
}

svs_names!(JobKind {
    VolumeCreate = "volume_create",
    VolumeDelete = "volume_delete",
    VolumeModifyExtend = "volume_modify_extend",
    AttachmentCreate = "attachment_create",
    AttachmentDelete = "attachment_delete",
    AttachmentModify = "attachment_modify",
    SnapshotCreate = "snapshot_create",
    SnapshotDelete = "snapshot_delete",
    SnapshotRollback = "snapshot_rollback",
    VolumeRecovery = "volume_recovery",
    VolumeGrowFilesystem = "volume_grow_filesystem",
    MediaDrain = "media_drain",
    MediaRebalance = "media_rebalance",
});

impl JobKind {
    /// Whether a job of this kind can be cancelled while it runs: the kinds
    /// that may take long and have an undo (a creation, a resize, a
    /// recovery, a drain, a rebalance). The others end on their own within
    /// moments.
    pub fn cancellable(&self) -> bool {
        matches!(
            self,
            JobKind::VolumeCreate
                | JobKind::VolumeModifyExtend
                | JobKind::VolumeRecovery
                | JobKind::MediaDrain
                | JobKind::MediaRebalance
        )
    }

    /// Whether a job of this kind copies slices and can be paused, resumed
    /// and given its own copy rate (a resize's data movement, a recovery's
    /// rebuilds); the movement window holds their copies too.
    pub fn steerable(&self) -> bool {
        matches!(
            self,
            JobKind::VolumeModifyExtend
                | JobKind::VolumeRecovery
                | JobKind::MediaDrain
                | JobKind::MediaRebalance
        )
    }

    /// Whether the job moves slices of many volumes, holding each volume
    /// while it moves its slices (a drain, a rebalance): its object is a
    /// medium or a scope, not a volume.
    pub fn moves_many_volumes(&self) -> bool {
        matches!(self, JobKind::MediaDrain | JobKind::MediaRebalance)
    }
}

/// Volume lifecycle states shown in the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum VolumeState {
    Creating,
    Ready,
    Resizing,
    Deleting,
}

svs_names!(VolumeState {
    Creating = "Creating",
    Ready = "Ready",
    Resizing = "Resizing",
    Deleting = "Deleting",
});

/// Snapshot lifecycle states shown in the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SnapshotState {
    /// Its `snapshot_create` job has not taken it yet.
    Creating,
    Ready,
    /// Its `snapshot_delete` job is removing it.
    Deleting,
}

svs_names!(SnapshotState {
    Creating = "Creating",
    Ready = "Ready",
    Deleting = "Deleting",
});

/// How consistent a snapshot's image is (`consistency` in the API). svs
/// takes both the same way: every write acknowledged before the snapshot
/// is in it, none after; `application` records what the client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Consistency {
    Crash,
    Application,
}

svs_names!(Consistency {
    Crash = "crash",
    Application = "application",
});

/// The name that stands for a volume's live content where a snapshot name
/// is expected (`/volumes/{v}/snapshots/top/attachments`): no snapshot may
/// take it.
pub const LIVE_SNAPSHOT_NAME: &str = "top";

/// Volume content type: `file` means svs provisions a filesystem on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum VolumeType {
    Block,
    File,
}

svs_names!(VolumeType {
    Block = "block",
    File = "file",
});

/// Who makes an attachment real on its node: the node's host agent
/// (`svs agent`), or the CSI node plugin (`svs csi node`), in which case the
/// agent leaves it alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum AttachmentManager {
    #[default]
    Agent,
    Csi,
}

svs_names!(AttachmentManager {
    Agent = "agent",
    Csi = "csi",
});

/// What a node credential allows: the host agent's routes, the storage
/// node's, or both (a host that runs a storage node and attaches volumes
/// too). One credential per node: issuing one of any role revokes the
/// node's previous one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CredentialRole {
    #[default]
    Agent,
    Storage,
    AgentAndStorage,
}

svs_names!(CredentialRole {
    Agent = "agent",
    Storage = "storage",
    AgentAndStorage = "agent+storage",
});

impl CredentialRole {
    /// May call the host agent's routes.
    pub fn allows_agent(&self) -> bool {
        matches!(
            self,
            CredentialRole::Agent | CredentialRole::AgentAndStorage
        )
    }

    /// May call the storage node's routes.
    pub fn allows_storage(&self) -> bool {
        matches!(
            self,
            CredentialRole::Storage | CredentialRole::AgentAndStorage
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachment_managers_round_trip_by_name() {
        for m in [AttachmentManager::Agent, AttachmentManager::Csi] {
            assert_eq!(AttachmentManager::parse(m.as_str()), Some(m));
        }
        assert_eq!(AttachmentManager::parse("Csi"), None);
        assert_eq!(AttachmentManager::default(), AttachmentManager::Agent);
    }

    #[test]
    fn copies_follow_the_largest_resiliency() {
        assert_eq!(Resiliency::default().copies(), 1);
        let r = Resiliency {
            media: 1,
            node: 2,
            zone: 0,
        };
        assert_eq!(r.copies(), 3);
        assert!(!r.is_none());
        assert!(Resiliency::default().is_none());
    }

    #[test]
    fn column_size_rounds_up() {
        assert_eq!(column_size(16, 2), 8);
        assert_eq!(column_size(15, 2), 8);
        assert_eq!(column_size(15, 1), 15);
        assert_eq!(column_size(1, 3), 1);
    }
}
