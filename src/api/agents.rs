//! Routes of nodes' host agents (svs extensions): nodes and their agent
//! credentials (administrators), and the agent's own two routes, which
//! take only the node's credential.

use super::extract::{OptionalParsed, Parsed, ParsedQuery};
use super::requests::IssueCredential;
use super::views::{AgentStateView, CredentialView, ErrorBody, NodeView};
use super::{bodies, views, ApiError, AppState};
use crate::service::agents::NodeAgent;
use crate::service::commands::{AgentPoll, CreateNode, ReportHostState};
use crate::service::Administrator;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;

#[utoipa::path(
    post, path = "/nodes", tag = "Nodes", operation_id = "NodeCreate",
    summary = "Add a node (administrators only)",
    description = "svs extension. Adds a host that may attach volumes and run a host agent. `zone` may be left out (`\"\"`).",
    request_body = bodies::NodeCreateRequest,
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 201, description = "The new node", body = NodeView),
        (status = 400, description = "Malformed body, bad name or not an IP address", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 408, description = "Body not received in time", body = ErrorBody),
        (status = 409, description = "A node of that name exists", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB", body = ErrorBody),
    ),
)]
pub async fn create_node(
    State(app): State<AppState>,
    admin: Administrator,
    Parsed(request): Parsed<CreateNode>,
) -> Result<(StatusCode, Json<NodeView>), ApiError> {
    let node = app.create_node(&admin, &request).await?;
    Ok((StatusCode::CREATED, Json(views::node(&node))))
}

#[utoipa::path(
    post, path = "/nodes/{node}/credentials", tag = "Nodes", operation_id = "NodeCredentialCreate",
    summary = "Issue the node's agent credential (administrators only)",
    description = "svs extension. Answers the credential once (`svsnode.<credentialid>.<secret>`; only a hash is kept). A node has one credential: issuing a new one revokes the previous one. No body, or `{}`.",
    params(("node" = String, Path, description = "The node's name")),
    request_body(content = Option<bodies::NodeCredentialCreateRequest>),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 201, description = "The new credential", body = CredentialView),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such node", body = ErrorBody),
        (status = 408, description = "Body not received in time", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB", body = ErrorBody),
    ),
)]
pub async fn issue_credential(
    State(app): State<AppState>,
    admin: Administrator,
    Path(node): Path<String>,
    OptionalParsed(IssueCredential): OptionalParsed<IssueCredential>,
) -> Result<(StatusCode, Json<CredentialView>), ApiError> {
    let issued = app.issue_node_credential(&admin, &node).await?;
    Ok((StatusCode::CREATED, Json(views::credential(&issued))))
}

#[utoipa::path(
    delete, path = "/nodes/{node}/credentials", tag = "Nodes", operation_id = "NodeCredentialDelete",
    summary = "Revoke the node's agent credential (administrators only)",
    description = "svs extension. The agent's next request gets 401.",
    params(("node" = String, Path, description = "The node's name")),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 204, description = "Revoked"),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "The node has no agent credential", body = ErrorBody),
    ),
)]
pub async fn revoke_credential(
    State(app): State<AppState>,
    admin: Administrator,
    Path(node): Path<String>,
) -> Result<StatusCode, ApiError> {
    app.revoke_node_credential(&admin, &node).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    get, path = "/nodes/{node}/agent/attachments", tag = "Agents", operation_id = "AgentAttachments",
    summary = "What the node's agent should do (node credential only)",
    description = "svs extension, for the node's host agent: its node's attachments of every tenant and their `revision`. With `revision` equal to the current one, the answer waits up to `wait` seconds for a change (a long poll), then answers the current state, the same revision if nothing changed. A user's IdToken answers 403.",
    params(
        ("node" = String, Path, description = "The credential's node"),
        ("revision" = Option<String>, Query, description = "The revision the agent holds"),
        ("wait" = Option<u64>, Query, minimum = 0, maximum = 60, description = "Seconds to wait for a change of `revision` (default 0)"),
    ),
    security(("node-credential" = [])),
    responses(
        (status = 200, description = "The desired state", body = AgentStateView),
        (status = 400, description = "Malformed query", body = ErrorBody),
        (status = 401, description = "Invalid or revoked node credential", body = ErrorBody),
        (status = 403, description = "Another node's credential, or not a node credential", body = ErrorBody),
    ),
)]
pub async fn agent_attachments(
    State(app): State<AppState>,
    agent: NodeAgent,
    Path(node): Path<String>,
    ParsedQuery(request): ParsedQuery<AgentPoll>,
) -> Result<Json<AgentStateView>, ApiError> {
    let state = app.desired_state(&agent, &node, &request).await?;
    Ok(Json(views::agent_state(&state)))
}

#[utoipa::path(
    put, path = "/nodes/{node}/agent/attachments/{volumeid}/{snapshotid}", tag = "Agents", operation_id = "AgentHostReport",
    summary = "Report an attachment's state on the host (node credential only)",
    description = "svs extension, for the node's host agent. Replaces the attachment's last report (fields left out or null are cleared); the attachment views show it. Jobs that wait for the agent (a filesystem growth after a resize, a detach) read it.",
    params(
        ("node" = String, Path, description = "The credential's node"),
        ("volumeid" = String, Path, description = "The volume's id"),
        ("snapshotid" = String, Path, description = "`top` or the snapshot's id"),
    ),
    request_body = bodies::HostReportRequest,
    security(("node-credential" = [])),
    responses(
        (status = 204, description = "Recorded"),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Invalid or revoked node credential", body = ErrorBody),
        (status = 403, description = "Another node's credential, or not a node credential", body = ErrorBody),
        (status = 404, description = "No such attachment on the node", body = ErrorBody),
        (status = 408, description = "Body not received in time", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB", body = ErrorBody),
    ),
)]
pub async fn report_host_state(
    State(app): State<AppState>,
    agent: NodeAgent,
    Path((node, volume, snapshot)): Path<(String, String, String)>,
    Parsed(request): Parsed<ReportHostState>,
) -> Result<StatusCode, ApiError> {
    app.report_host_state(&agent, &node, &volume, &snapshot, &request)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
