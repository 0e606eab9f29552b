//! `Absent`: the type of a service a plugin does not serve
//! (`Services { controller: None::<Absent>, .. }` in the node plugin,
//! `node: None::<Absent>` in the controller plugin).
//! It has no values, so none of its methods can ever run.

use crate::proto;
use crate::proto::controller_server::Controller;
use crate::proto::node_server::Node;
use tonic::{Request, Response, Status};

/// A service that is not there.
pub enum Absent {}

/// The whole impl comes from the macro, so that `async_trait` sees the
/// methods it rewrites.
macro_rules! absent_service {
    ($service:ident { $($method:ident: $request:ident => $response:ident),* $(,)? }) => {
        #[tonic::async_trait]
        impl $service for Absent {
            $(
                async fn $method(
                    &self,
                    _: Request<proto::$request>,
                ) -> Result<Response<proto::$response>, Status> {
                    match *self {}
                }
            )*
        }
    };
}

absent_service! {
    Controller {
        create_volume: CreateVolumeRequest => CreateVolumeResponse,
        delete_volume: DeleteVolumeRequest => DeleteVolumeResponse,
        controller_publish_volume: ControllerPublishVolumeRequest => ControllerPublishVolumeResponse,
        controller_unpublish_volume: ControllerUnpublishVolumeRequest => ControllerUnpublishVolumeResponse,
        validate_volume_capabilities: ValidateVolumeCapabilitiesRequest => ValidateVolumeCapabilitiesResponse,
        list_volumes: ListVolumesRequest => ListVolumesResponse,
        get_capacity: GetCapacityRequest => GetCapacityResponse,
        controller_get_capabilities: ControllerGetCapabilitiesRequest => ControllerGetCapabilitiesResponse,
        create_snapshot: CreateSnapshotRequest => CreateSnapshotResponse,
        delete_snapshot: DeleteSnapshotRequest => DeleteSnapshotResponse,
        list_snapshots: ListSnapshotsRequest => ListSnapshotsResponse,
        controller_expand_volume: ControllerExpandVolumeRequest => ControllerExpandVolumeResponse,
        controller_get_volume: ControllerGetVolumeRequest => ControllerGetVolumeResponse,
        controller_modify_volume: ControllerModifyVolumeRequest => ControllerModifyVolumeResponse,
    }
}

absent_service! {
    Node {
        node_stage_volume: NodeStageVolumeRequest => NodeStageVolumeResponse,
        node_unstage_volume: NodeUnstageVolumeRequest => NodeUnstageVolumeResponse,
        node_publish_volume: NodePublishVolumeRequest => NodePublishVolumeResponse,
        node_unpublish_volume: NodeUnpublishVolumeRequest => NodeUnpublishVolumeResponse,
        node_get_volume_stats: NodeGetVolumeStatsRequest => NodeGetVolumeStatsResponse,
        node_expand_volume: NodeExpandVolumeRequest => NodeExpandVolumeResponse,
        node_get_capabilities: NodeGetCapabilitiesRequest => NodeGetCapabilitiesResponse,
        node_get_info: NodeGetInfoRequest => NodeGetInfoResponse,
    }
}
