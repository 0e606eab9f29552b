//! Node routes: list, read, add, set the address, remove (administrators
//! change them; adding and removing are svs extensions), with their bodies
//! and views. The agents' credentials and routes are in `agents`.

use super::body::typed;
use super::extract::Parsed;
use super::parse::{Body, ParseResult};
use super::requests::FromBody;
use super::views::{self, AdminOnly, BodyLimits, Done, ErrorBody, SignedIn};
use super::{ApiError, ApiResult, AppState};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use svs_control::service::commands::{CreateNode, SetNodeAddress};
use svs_control::service::format_ms;
use svs_control::service::nodes::NodeSummary;
use svs_control::service::{Administrator, Caller};
use svs_wire::requests::{NodeCreateRequest, NodeModifyRequest};
use svs_wire::views::NodeView;

#[utoipa::path(
    get, path = "/nodes", tag = "Nodes", operation_id = "NodesList",
    summary = "List nodes",
    description = "Media nodes, storage nodes and configured hosts, with capacity and `address` (svs extension). A storage node's `state` is `Online` while it heartbeats and `Offline` once it missed them for `storage_node_timeout`; `role`, `lastheartbeat`, `sliceaddress` and `copiescount` are svs extensions.",
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "Nodes", body = Vec<NodeView>),
    ),
)]
pub async fn list_nodes(State(app): State<AppState>, _: Caller) -> ApiResult<Vec<NodeView>> {
    Ok(Json(views::list(&app.list_nodes().await?, node_view)))
}

#[utoipa::path(
    get, path = "/nodes/{node}", tag = "Nodes", operation_id = "NodeGet",
    summary = "Get a node",
    params(("node" = String, Path, description = "The node's name")),
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "The node", body = NodeView),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 404, description = "No such node", body = ErrorBody),
    ),
)]
pub async fn get_node(
    State(app): State<AppState>,
    _: Caller,
    Path(name): Path<String>,
) -> ApiResult<NodeView> {
    Ok(Json(node_view(&app.get_node(&name).await?)))
}

/// Administrators only: the address decides who may open the node's exports.
#[utoipa::path(
    patch, path = "/nodes/{node}", tag = "Nodes", operation_id = "NodeModify",
    summary = "Set the address a node attaches from (administrators only)",
    description = "svs extension. The address decides who may open the node's NBD exports, so only administrators may set it; others get 403 before their body is read.",
    params(("node" = String, Path, description = "The node's name")),
    request_body = NodeModifyRequest,
    security(("storage.io-authorizer" = [])),
    responses(AdminOnly, BodyLimits,
        (status = 200, description = "Updated", body = Done),
        (status = 400, description = "Malformed body or not an IP address", body = ErrorBody),
        (status = 404, description = "No such node", body = ErrorBody),
    ),
)]
pub async fn update_node(
    State(app): State<AppState>,
    admin: Administrator,
    Path(node): Path<String>,
    Parsed(request): Parsed<SetNodeAddress>,
) -> ApiResult<Done> {
    let n = app.set_node_address(&admin, &node, &request).await?;
    Ok(Json(views::done("Node updated", &n.name)))
}

#[utoipa::path(
    delete, path = "/nodes/{node}", tag = "Nodes", operation_id = "NodeDelete",
    summary = "Remove a node (administrators only)",
    description = "Refused with 409 while the node has media (the message names the volumes with slices on them, else the media) or attachments (naming their volumes), and for a node listed in the configuration file (as `[[nodes]]` or the node of a `[[media]]`). Its agent credential is revoked with it. The reference's `force` and `delayDelete` are not supported.",
    params(("node" = String, Path, description = "The node's name")),
    security(("storage.io-authorizer" = [])),
    responses(AdminOnly,
        (status = 200, description = "Removed", body = Done),
        (status = 404, description = "No such node", body = ErrorBody),
        (status = 409, description = "The node has media or attachments, or is defined in the configuration file", body = ErrorBody),
    ),
)]
pub async fn delete_node(
    State(app): State<AppState>,
    admin: Administrator,
    Path(name): Path<String>,
) -> Result<Json<Done>, ApiError> {
    app.delete_node(&admin, &name).await?;
    Ok(Json(views::done("Node removed", &name)))
}

#[utoipa::path(
    post, path = "/nodes", tag = "Nodes", operation_id = "NodeCreate",
    summary = "Add a node (administrators only)",
    description = "svs extension. Adds a host that may attach volumes and run a host agent. `zone` may be left out (`\"\"`).",
    request_body = NodeCreateRequest,
    security(("storage.io-authorizer" = [])),
    responses(AdminOnly, BodyLimits,
        (status = 201, description = "The new node", body = NodeView),
        (status = 400, description = "Malformed body, bad name or not an IP address", body = ErrorBody),
        (status = 409, description = "A node of that name exists", body = ErrorBody),
    ),
)]
pub async fn create_node(
    State(app): State<AppState>,
    admin: Administrator,
    Parsed(request): Parsed<CreateNode>,
) -> Result<(StatusCode, Json<NodeView>), ApiError> {
    let node = app.create_node(&admin, &request).await?;
    Ok((StatusCode::CREATED, Json(node_view(&node))))
}

impl FromBody for SetNodeAddress {
    /// `{"address": "10.0.0.5"}`; `""` removes the address.
    fn from_body(body: &Body) -> ParseResult<SetNodeAddress> {
        let NodeModifyRequest { address } = typed(body)?;
        Ok(SetNodeAddress { address })
    }
}

impl FromBody for CreateNode {
    /// `{"name": "host-7", "address": "10.0.0.7", "zone": "zone-a"}`.
    fn from_body(body: &Body) -> ParseResult<CreateNode> {
        let request: NodeCreateRequest = typed(body)?;
        Ok(CreateNode {
            name: request.name,
            zone: request.zone.unwrap_or_default(),
            address: request.address,
        })
    }
}

pub fn node_view(n: &NodeSummary) -> NodeView {
    NodeView {
        name: n.record.name.clone(),
        zone: n.record.zone.clone(),
        address: n.record.address.clone().unwrap_or_default(),
        os: std::env::consts::OS.into(),
        // A storage node is Offline once it missed its heartbeats; other
        // nodes have no liveness of their own.
        state: n
            .storage
            .as_ref()
            .map_or("Online", |s| s.state.as_str())
            .into(),
        status: "Ready".into(),
        progress: 100,
        mediacount: n.media_count,
        size: n.size,
        freesize: n.free,
        allocatedsize: n.allocated,
        bookedsize: n.booked,
        snapshotsize: n.snapshots,
        snapshotbytes: n.snapshot_bytes,
        volumescount: n.volumes_count,
        agentcredential: n.credential_role.is_some(),
        credentialrole: n.credential_role.map(|r| r.as_str().into()),
        agentseen: n.agent_seen_ms.map(format_ms),
        managedby: n.record.managed_by.as_str().into(),
        role: if n.storage.is_some() {
            "storage"
        } else {
            "host"
        }
        .into(),
        lastheartbeat: n.storage.as_ref().map(|s| format_ms(s.last_heartbeat_ms)),
        sliceaddress: n
            .storage
            .as_ref()
            .map(|s| s.slice_address.clone())
            .unwrap_or_default(),
        copiescount: n.copies,
    }
}
