//! The plans a dry run answers (`?dryrun=true` of a volume's creation or
//! resize, of a drain or a rebalance): what the server would do, as the
//! client renders it.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What a resize would do (`PATCH /volumes/{volume}?dryrun=true`).
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[schema(as = ResizePlan)]
pub struct ResizePlanView {
    pub dryrun: bool,
    pub volume: String,
    /// GiB now.
    pub fromsize: u64,
    /// GiB asked for.
    pub size: u64,
    /// `inplace`, `movement` or `refused`.
    #[schema(pattern = "^(inplace|movement|refused)$")]
    pub outcome: String,
    /// What the job would say: the seed's message for a movement plan or
    /// for the refusal.
    pub message: String,
    /// Each slice that would move.
    pub moves: Vec<PlannedMoveView>,
    /// Each slice that would grow where it is.
    pub growths: Vec<PlannedGrowthView>,
    /// Bytes of data the moves copy (holes are not copied).
    pub bytestocopy: u64,
    /// `movement_rate` in bytes per second (null: unthrottled).
    pub movementrate: Option<u64>,
    /// Seconds the moves take at `movementrate`, one after another (null:
    /// unthrottled, or nothing moves).
    pub estimatedseconds: Option<u64>,
    /// Give it back as `?plan=<token>` with the real request.
    pub plan: String,
}

/// A slice that would move.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
pub struct PlannedMoveView {
    /// `c<copy>-k<column>`.
    pub slice: String,
    pub from: String,
    pub fromnode: String,
    pub to: String,
    pub tonode: String,
    /// GiB once resized.
    pub size: u64,
    /// Bytes of data its copy reads.
    pub bytes: u64,
    /// `bytes` was measured on the medium (false: the slice's size, the
    /// most it can be, as its medium did not answer).
    pub measured: bool,
}

/// A slice that would grow where it is.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
pub struct PlannedGrowthView {
    pub slice: String,
    pub medium: String,
    /// GiB.
    pub from: u64,
    pub to: u64,
}

/// Where a creation would place its slices (`POST /volumes?dryrun=true`).
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[schema(as = CreatePlan)]
pub struct CreatePlanView {
    pub dryrun: bool,
    pub volume: String,
    /// GiB.
    pub size: u64,
    /// `placed` or `refused`.
    #[schema(pattern = "^(placed|refused)$")]
    pub outcome: String,
    /// The refusal, as the job would end with it; empty when placed.
    pub message: String,
    pub slices: Vec<PlannedSliceView>,
    /// Give it back as `?plan=<token>` with the real request.
    pub plan: String,
}

/// Where a new slice would go.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
pub struct PlannedSliceView {
    pub slice: String,
    pub medium: String,
    pub node: String,
    /// GiB.
    pub size: u64,
}

/// What a drain or a rebalance would move now (`?dryrun=true`).
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[schema(as = RelocationPlan)]
pub struct RelocationPlanView {
    pub dryrun: bool,
    /// `medium 'm1'`, `the media of node 'n1'`, `the media of zone 'z1'`,
    /// `every medium`.
    pub scope: String,
    /// Each slice that would move, with its volume.
    pub moves: Vec<RelocationMoveView>,
    /// Each slice that would stay, with why (a drain: lost copies, or no
    /// medium with room within its volume's policy).
    pub stuck: Vec<StuckSliceView>,
    /// GiB of slices the moves copy (at most: holes are not copied).
    pub gib: u64,
    /// The media in scope: GiB used now and once the moves are done.
    pub media: Vec<MediumUseView>,
    /// `movement_rate` in bytes per second (null: unthrottled).
    pub movementrate: Option<u64>,
    /// Seconds the moves take at most at `movementrate` (null: unthrottled,
    /// or nothing moves).
    pub estimatedseconds: Option<u64>,
}

#[derive(Debug, Deserialize, Serialize, ToSchema)]
pub struct RelocationMoveView {
    pub volume: String,
    /// `c<copy>-k<column>`.
    pub slice: String,
    pub from: String,
    pub to: String,
    /// GiB.
    pub size: u64,
}

#[derive(Debug, Deserialize, Serialize, ToSchema)]
pub struct StuckSliceView {
    pub volume: String,
    pub slice: String,
    pub reason: String,
}

#[derive(Debug, Deserialize, Serialize, ToSchema)]
pub struct MediumUseView {
    pub mediaid: String,
    pub node: String,
    /// GiB.
    pub size: u64,
    pub used: u64,
    pub usedafter: u64,
}
