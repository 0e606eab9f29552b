//! The svs domain: the model, validation of user input, the placement and
//! resize planner, and the guard for operations blocked by a data movement.
//!
//! Everything here is pure logic: no I/O, no async, no clock. The store,
//! data plane and API crates build on it; it depends on none of them.

pub mod guard;
pub mod job;
pub mod model;
pub mod planner;
pub mod validate;

pub use guard::{ensure_not_moving, ActiveMovement, BlockedOperation, MovementBlocked};
pub use job::{
    AttachmentArgs, CreateVolumeArgs, DeleteVolumeArgs, DetachArgs, JobSpec, JobSpecError,
    ResizeVolumeArgs,
};
pub use model::*;
pub use planner::{
    place_volume, plan_resize, PlacementRequest, PlanError, Reservation, ResizePlan, ResizeRequest,
    SliceGrowth, SliceMove, MOVEMENT_PLAN_FOUND,
};
pub use validate::{validate_new_size, ResourceName, SizeError};
