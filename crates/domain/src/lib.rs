//! The svs domain: the model, validation of user input, the placement and
//! resize planner, space accounting on media, the rules the store enforces
//! on stored objects, and the guard for operations blocked by a data
//! movement.
//!
//! Everything here is pure logic: no I/O, no async, no clock. The store,
//! data plane and API crates build on it; it depends on none of them.

#[macro_use]
mod names;
pub mod capacity;
pub mod guard;
pub mod job;
pub mod model;
pub mod planner;
pub mod preview;
pub mod recovery;
pub mod relocation;
pub mod rules;
pub mod units;
pub use units::{human_duration, time_left_secs};
pub mod validate;
pub mod window;
pub use window::{MovementWindow, WindowError};

pub use capacity::{
    check_room, placement_bookings, reservation_after_switch, InsufficientSpace, MediumSpace,
};
pub use guard::{ensure_not_moving, ActiveMovement, BlockedOperation, MovementBlocked};
pub use job::{
    AttachmentArgs, CloneSource, CreateVolumeArgs, DeleteVolumeArgs, DetachArgs, DrainArgs,
    GrowFilesystemArgs, JobSpec, JobSpecError, RebalanceArgs, RecoveryArgs, ResizeVolumeArgs,
    SnapshotArgs,
};
pub use model::*;
pub use planner::{
    place_volume, plan_resize, PlacementRequest, PlanError, Reservation, ResizePlan, ResizeRequest,
    SliceGrowth, SliceMove, MOVEMENT_PLAN_FOUND,
};
pub use preview::{plan_changed_message, plan_changes, PlanShape};
pub use recovery::{plan_recovery, volume_health, PlacedSlice, RecoveryError, VolumeHealth};
pub use relocation::{
    plan_drain, plan_rebalance, MovableVolume, Relocation, RelocationPlan, StuckReason, StuckSlice,
};
pub use rules::{
    check_medium_removal, check_medium_resize, check_node_removal, check_policy_delete,
    check_policy_update, media_to_forget, volume_state_after_job, InfrastructureInUse,
    MediaChangeRefused, PolicyInUse, StoredMedium,
};
pub use validate::{
    check_email, is_hidden_character, plain_directory, validate_new_size, ResourceName, SizeError,
    HIDDEN_CHARACTERS_IN_EMAIL,
};
