//! The JSON of the calls the control plane makes to the front that runs a
//! volume on a storage node (carried by the slice protocol's `FrontCall`):
//! the jobs' snapshots, rollbacks, and the phases of a live slice move or
//! rebuild, steered there so the job's bytes never pass through `svs
//! serve`. Both sides use these types, so the wire cannot drift between
//! them; field names are the JSON names.
//!
//! A call is answered within one request's time limit: one still running
//! by then answers `running` (with the copy's progress, for a fill), and
//! the caller asks again with [`FrontOp::Poll`] under the same call id.
//! A failed call is the request's refusal (its errno and message).

use serde::{Deserialize, Serialize};
use svs_dataplane::CopyCounts;

use crate::wire::FrontNode;

/// One call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrontCall {
    /// Unique per call (the caller's process and a counter): a call still
    /// running is asked again by it.
    pub call: String,
    /// The front epoch the caller means: a front of the volume at another
    /// epoch (or none) refuses with `ENOTCONN` (the caller finds where the
    /// front runs now and tries again).
    pub epoch: u64,
    /// The job's claim the call is made under (None: no job's, such as a
    /// test's): the front refuses calls of a claim older than one it has
    /// seen for the job, so an instance that lost a job can never steer
    /// its copy again (see `storage_node::fronts::calls`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<JobClaim>,
    pub op: FrontOp,
}

/// A job's claim: the job, and the claim's number (`JobLease::epoch`, one
/// more at each claim of the job).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobClaim {
    pub job: i64,
    pub epoch: u64,
}

/// What a call asks of the front.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "lowercase", deny_unknown_fields)]
pub enum FrontOp {
    /// `VolumeIo::snapshot`.
    Snapshot { id: u64 },
    /// `VolumeIo::delete_snapshot`.
    DeleteSnapshot { id: u64 },
    /// `VolumeIo::rollback`.
    Rollback { id: u64 },
    /// `VolumeIo::begin_slice_copy`: answers [`FrontAnswer::began`]; the
    /// copy is named by this call's id in the phases that follow.
    BeginCopy {
        rebuild: bool,
        copy: u32,
        column: u32,
        medium: String,
        resumefrom: u64,
        /// The node holding `medium`, when the front may not reach it yet
        /// (a move onto a node none of the volume's copies is on).
        node: Option<FrontNode>,
    },
    /// A clone's copy: snapshot `snapshot` (`size` bytes long) of this
    /// volume into volume `target`, whose front runs on the same node at
    /// `targetepoch` (`svs_dataplane::CloneFill`). Answers
    /// [`FrontAnswer::began`]; its phases are a fill and a finish (or an
    /// abort), named by this call's id.
    BeginClone {
        snapshot: u64,
        size: u64,
        target: String,
        targetepoch: u64,
    },
    /// `SliceMove::fill` of copy `copy` (a begin call's id).
    Fill {
        copy: String,
        /// Bytes between two checkpoints (at least).
        checkpointbytes: u64,
        /// The copied bytes it may reach before it waits for a larger
        /// grant: the caller paces the copy (its `movement_rate` and the
        /// nodes' shared budgets stay there); None: unthrottled.
        grant: Option<u64>,
    },
    /// `SliceMove::switch`.
    Switch { copy: String },
    /// `SliceMove::finish`: the copy is forgotten.
    Finish { copy: String },
    /// `SliceMove::abort`: the copy is forgotten.
    Abort { copy: String },
    /// Asks again about the running call `call`; a fill's grant grows to
    /// `grant`.
    Poll { grant: Option<u64> },
    /// Stops the running fill of call `call` (it then fails `Cancelled`
    /// and keeps its checkpointed target for a resume).
    Cancel,
}

/// A call's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontAnswer {
    /// Still running: ask again with [`FrontOp::Poll`].
    pub running: bool,
    /// A begun copy.
    pub began: Option<BeganCopy>,
    /// A fill's progress (while running, and when done).
    pub progress: Option<CopyProgress>,
}

/// What `begin_slice_copy` answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BeganCopy {
    /// `SliceMove::starts_at`.
    pub startsat: u64,
    /// `SliceMove::in_place`.
    pub inplace: bool,
}

/// A fill's progress and counters (`CopyStats`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyProgress {
    pub done: u64,
    pub total: u64,
    /// The latest durable checkpoint (0: none yet).
    pub checkpoint: u64,
    pub resumedat: u64,
    pub copied: u64,
    pub catchup: u64,
    pub compared: u64,
    pub rewritten: u64,
}

impl CopyProgress {
    /// A fill at `done` of `total` with these figures.
    pub fn of((done, total): (u64, u64), c: CopyCounts) -> CopyProgress {
        CopyProgress {
            done,
            total,
            checkpoint: c.checkpoint,
            resumedat: c.resumed_at,
            copied: c.copied,
            catchup: c.catch_up,
            compared: c.compared,
            rewritten: c.rewritten,
        }
    }

    /// Its figures, as the caller's copy stats take them.
    pub fn counts(&self) -> CopyCounts {
        CopyCounts {
            resumed_at: self.resumedat,
            copied: self.copied,
            catch_up: self.catchup,
            compared: self.compared,
            rewritten: self.rewritten,
            checkpoint: self.checkpoint,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_reads_as_the_node_expects() {
        let call = FrontCall {
            call: "serve-1-7".into(),
            epoch: 4,
            claim: Some(JobClaim { job: 12, epoch: 3 }),
            op: FrontOp::Fill {
                copy: "serve-1-6".into(),
                checkpointbytes: 1 << 20,
                grant: Some(8 << 20),
            },
        };
        let json = serde_json::to_string(&call).expect("encode");
        assert_eq!(
            json,
            r#"{"call":"serve-1-7","epoch":4,"claim":{"job":12,"epoch":3},"op":{"do":"fill","copy":"serve-1-6","checkpointbytes":1048576,"grant":8388608}}"#
        );
        assert_eq!(
            serde_json::from_str::<FrontCall>(&json).expect("decode"),
            call
        );
        let cancel = r#"{"call":"c","epoch":1,"op":{"do":"cancel"}}"#;
        assert_eq!(
            serde_json::from_str::<FrontCall>(cancel)
                .expect("decode")
                .op,
            FrontOp::Cancel
        );
        let unknown = r#"{"call":"c","epoch":1,"op":{"do":"format"}}"#;
        assert!(serde_json::from_str::<FrontCall>(unknown).is_err());
    }
}
