//! Node routes: list, read, add, set the address, remove (administrators
//! change them; adding and removing are svs extensions), with their bodies
//! and views. The agents' credentials and routes are in `agents`.

use super::body::{node_name, typed};
use super::extract::Parsed;
use super::parse::{Body, ParseResult};
use super::requests::FromBody;
use super::views::{self, AdminOnly, BodyLimits, Done, ErrorBody, SignedIn};
use super::{ApiError, ApiResult, AppState};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use svs_control::service::commands::{CreateNode, SetNodeAddress};
use svs_control::service::format_ms;
use svs_control::service::nodes::NodeSummary;
use svs_control::service::{Administrator, Caller};
use svs_domain::ResourceName;
use utoipa::openapi::schema::{AnyOfBuilder, ObjectBuilder, Schema, SchemaFormat, Type};
use utoipa::ToSchema;

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

fn not_an_ip_address<E: de::Error>(a: &str) -> E {
    de::Error::custom(format!("address '{a}' is not an IP address"))
}

/// A required IP address.
fn ip_address<'de, D: Deserializer<'de>>(d: D) -> Result<IpAddr, D::Error> {
    let a = String::deserialize(d)?;
    a.parse().map_err(|_| not_an_ip_address(&a))
}

/// A required IP address or `""` (none).
fn ip_address_or_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<IpAddr>, D::Error> {
    match Option::<String>::deserialize(d)?.as_deref() {
        None => Err(de::Error::custom("address is required")),
        Some("") => Ok(None),
        Some(a) => a.parse().map(Some).map_err(|_| not_an_ip_address(a)),
    }
}

/// An optional zone name; `""`: none.
fn zone_or_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Option::<String>::deserialize(d)? {
        Some(z) if !z.is_empty() => ResourceName::parse("zone", &z)
            .map(|z| Some(z.into_string()))
            .map_err(de::Error::custom),
        _ => Ok(None),
    }
}

/// A node: a media node or a configured host; `address` (svs extension) is
/// the IP its NBD connections come from (`""`: none).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Node)]
pub struct NodeView {
    #[schema(min_length = 1)]
    pub name: String,
    pub zone: String,
    pub address: String,
    pub os: &'static str,
    pub state: &'static str,
    pub status: &'static str,
    pub progress: u8,
    pub mediacount: usize,
    /// GiB.
    pub size: u64,
    /// GiB.
    pub freesize: u64,
    /// svs extension: the parts of `size - freesize` on its media, in GiB:
    /// slices placed, booked by running jobs, held by snapshots.
    pub allocatedsize: u64,
    pub bookedsize: u64,
    pub snapshotsize: u64,
    /// svs extension: bytes the snapshots on its media hold (the sum of
    /// their `used`); `snapshotsize` is what that takes of its free space,
    /// in whole GiB per medium, rounded up.
    pub snapshotbytes: u64,
    pub volumescount: u64,
    /// svs extension: the node has a live node credential (its host
    /// agent's, its storage node's, or one for both).
    pub agentcredential: bool,
    /// svs extension: the role of that credential (`agent`, `storage` or
    /// `agent+storage`); null when it has none.
    #[schema(pattern = "^(agent|storage|agent\\+storage)$")]
    pub credentialrole: Option<&'static str>,
    /// svs extension: the agent's last authenticated request (RFC 3339);
    /// null when never.
    pub agentseen: Option<String>,
    /// svs extension: `config` (listed in the configuration file, as
    /// `[[nodes]]` or the node of a `[[media]]`) or `api` (added through
    /// the API).
    pub managedby: &'static str,
    /// svs extension: `storage` (it registered as a storage node, `svs
    /// storage-node`) or `host` (it holds configured media or attaches
    /// volumes).
    #[schema(pattern = "^(storage|host)$")]
    pub role: &'static str,
    /// svs extension: a storage node's last heartbeat (RFC 3339); null for
    /// other nodes.
    pub lastheartbeat: Option<String>,
    /// svs extension: where fronts reach a storage node's slice server
    /// (IP:PORT); `""` for other nodes.
    pub sliceaddress: String,
    /// svs extension: copies of slices on the node's media.
    pub copiescount: u64,
}

pub fn node_view(n: &NodeSummary) -> NodeView {
    NodeView {
        name: n.record.name.clone(),
        zone: n.record.zone.clone(),
        address: n.record.address.clone().unwrap_or_default(),
        os: std::env::consts::OS,
        // A storage node is Offline once it missed its heartbeats; other
        // nodes have no liveness of their own.
        state: n.storage.as_ref().map_or("Online", |s| s.state.as_str()),
        status: "Ready",
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
        credentialrole: n.credential_role.map(|r| r.as_str()),
        agentseen: n.agent_seen_ms.map(format_ms),
        managedby: n.record.managed_by.as_str(),
        role: if n.storage.is_some() {
            "storage"
        } else {
            "host"
        },
        lastheartbeat: n.storage.as_ref().map(|s| format_ms(s.last_heartbeat_ms)),
        sliceaddress: n
            .storage
            .as_ref()
            .map(|s| s.slice_address.clone())
            .unwrap_or_default(),
        copiescount: n.copies,
    }
}

/// A string that is an IPv4 or IPv6 address (Rust's `IpAddr` syntax), or
/// `""` when `or_empty`.
fn ip_address_schema(description: &str, or_empty: bool) -> Schema {
    let string = || ObjectBuilder::new().schema_type(Type::String);
    let format = |f: &str| {
        string()
            .format(Some(SchemaFormat::Custom(f.into())))
            .min_length(Some(1))
    };
    let mut any = AnyOfBuilder::new()
        .description(Some(description))
        .item(format("ipv4"))
        .item(format("ipv6"));
    if or_empty {
        any = any.item(string().max_length(Some(0)));
    }
    Schema::AnyOf(any.build())
}

fn node_address() -> Schema {
    ip_address_schema(
        "The IP address the node's NBD connections come from.",
        false,
    )
}

fn new_node_address() -> Schema {
    ip_address_schema(
        "The IP address the node's NBD connections come from; `\"\"` removes it.",
        true,
    )
}

/// `PATCH /nodes/{node}` (svs extension, administrators only).
#[derive(Deserialize, ToSchema)]
#[schema(as = NodeModify)]
pub struct NodeModifyRequest {
    #[schema(schema_with = new_node_address, required = true)]
    #[serde(deserialize_with = "ip_address_or_none")]
    pub address: Option<IpAddr>,
}

/// `POST /nodes` (svs extension, administrators only).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NodeCreate)]
pub struct NodeCreateRequest {
    #[schema(
        pattern = "^([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*)$",
        max_length = 63
    )]
    #[schema(value_type = String)]
    #[serde(deserialize_with = "node_name")]
    pub name: ResourceName,
    #[schema(schema_with = node_address)]
    #[serde(deserialize_with = "ip_address")]
    pub address: IpAddr,
    /// Absent or `""`: no zone.
    #[schema(
        pattern = "^(([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*))?$",
        max_length = 63
    )]
    #[schema(value_type = Option<String>, nullable = false)]
    #[serde(deserialize_with = "zone_or_none")]
    pub zone: Option<String>,
}
