//! Routes of nodes' host agents (svs extensions): nodes and their agent
//! credentials (administrators), and the agent's own two routes, which
//! take only the node's credential.

use super::body::typed;
use super::extract::{OptionalParsed, Parsed, ParsedQuery};
use super::parse::{bad, opt_uint, req_str, Body, ParseResult};
use super::requests::{only_fields, FromBody, FromQuery};
use super::views::{AdminOnly, BodyLimits, ErrorBody};
use super::{ApiError, AppState};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::Value;
use std::collections::BTreeMap;
use svs_control::service::agents::NodeAgent;
use svs_control::service::agents::{DesiredState, IssuedCredential};
use svs_control::service::commands::{AgentPoll, HostState, ReportHostState, MAX_AGENT_WAIT_SECS};
use svs_control::service::format_ms;
use svs_control::service::Administrator;
use svs_domain::MAX_VOLUME_GIB;
use svs_store::CredentialRole;
use svs_wire::agent as wire;
use svs_wire::requests::NodeCredentialCreateRequest;
use svs_wire::views::CredentialView;

#[utoipa::path(
    post, path = "/nodes/{node}/credentials", tag = "Nodes", operation_id = "NodeCredentialCreate",
    summary = "Issue the node's credential (administrators only)",
    description = "svs extension. Answers the credential once (`svsnode.<credentialid>.<secret>`; only a hash is kept). A node has one credential: issuing a new one revokes the previous one. No body, `{}`, or `{\"role\": \"agent\"|\"storage\"|\"agent+storage\"}` (default `agent`): an agent credential may call only the host agent's routes, a storage credential only the storage node's (`PUT /nodes/{node}/storage`), each getting 403 on the other's; an `agent+storage` credential may call both (a host that runs a storage node and attaches volumes). Issuing or revoking a node's credential also changes its slice credential.",
    params(("node" = String, Path, description = "The node's name")),
    request_body(content = Option<NodeCredentialCreateRequest>),
    security(("storage.io-authorizer" = [])),
    responses(AdminOnly, BodyLimits,
        (status = 201, description = "The new credential", body = CredentialView),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 404, description = "No such node", body = ErrorBody),
    ),
)]
pub async fn issue_credential(
    State(app): State<AppState>,
    admin: Administrator,
    Path(node): Path<String>,
    OptionalParsed(IssueCredential { role }): OptionalParsed<IssueCredential>,
) -> Result<(StatusCode, Json<CredentialView>), ApiError> {
    let issued = app.issue_node_credential(&admin, &node, role).await?;
    Ok((StatusCode::CREATED, Json(credential(&issued))))
}

#[utoipa::path(
    delete, path = "/nodes/{node}/credentials", tag = "Nodes", operation_id = "NodeCredentialDelete",
    summary = "Revoke the node's credential (administrators only)",
    description = "svs extension. The agent's (or storage node's) next request gets 401.",
    params(("node" = String, Path, description = "The node's name")),
    security(("storage.io-authorizer" = [])),
    responses(AdminOnly,
        (status = 204, description = "Revoked"),
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
        (status = 200, description = "The desired state", body = wire::DesiredState),
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
) -> Result<Json<wire::DesiredState>, ApiError> {
    let state = app.desired_state(&agent, &node, &request).await?;
    Ok(Json(agent_state(&state)))
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
    request_body = wire::HostReport,
    security(("node-credential" = [])),
    responses(BodyLimits,
        (status = 204, description = "Recorded"),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Invalid or revoked node credential", body = ErrorBody),
        (status = 403, description = "Another node's credential, or not a node credential", body = ErrorBody),
        (status = 404, description = "No such attachment on the node", body = ErrorBody),
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

/// `POST /nodes/{node}/credentials`: no body, `{}`, or `{"role": ...}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct IssueCredential {
    pub role: CredentialRole,
}

impl FromBody for IssueCredential {
    fn from_body(body: &Body) -> ParseResult<IssueCredential> {
        let NodeCredentialCreateRequest { role } = typed(body)?;
        Ok(IssueCredential {
            role: role.unwrap_or(CredentialRole::Agent),
        })
    }
}

/// An optional string field of an agent's report: `null` is the same as
/// leaving it out (the agent clears a field by sending null).
fn nullable_str(body: &Body, key: &str) -> ParseResult<Option<String>> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(bad(format!("{key} must be a string or null"))),
    }
}

/// An optional whole number of an agent's report; `null` as left out.
fn nullable_uint(body: &Body, key: &str, max: u64) -> ParseResult<Option<u64>> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        _ => opt_uint(body, key, 0, max),
    }
}

impl FromBody for ReportHostState {
    fn from_body(body: &Body) -> ParseResult<ReportHostState> {
        only_fields(
            body,
            &[
                "hoststate",
                "hostdetail",
                "device",
                "mountpath",
                "filesystembytes",
                "filesystemsize",
                "growerror",
                "growjob",
            ],
        )?;
        let state = req_str(body, "hoststate")?;
        let state = HostState::parse(state).ok_or_else(|| {
            bad("hoststate must be \"Connected\", \"Mounted\", \"Error\" or \"Disconnected\"")
        })?;
        Ok(ReportHostState {
            state,
            detail: nullable_str(body, "hostdetail")?,
            device: nullable_str(body, "device")?,
            mount_path: nullable_str(body, "mountpath")?,
            // Stored as signed 64-bit numbers.
            filesystem_bytes: nullable_uint(body, "filesystembytes", i64::MAX as u64)?,
            filesystem_size: nullable_uint(body, "filesystemsize", MAX_VOLUME_GIB)?,
            grow_error: nullable_str(body, "growerror")?,
            grow_job: nullable_uint(body, "growjob", i64::MAX as u64)?
                .map(|j| i64::try_from(j).unwrap_or(i64::MAX)),
        })
    }
}

impl FromQuery for AgentPoll {
    /// `?revision=R&wait=S`: `wait` whole seconds, 0 to 60 (default 0).
    fn from_query(query: &BTreeMap<String, String>) -> ParseResult<AgentPoll> {
        let wait = match query.get("wait").map(String::as_str) {
            None | Some("") => 0,
            Some(w) => w
                .parse::<u64>()
                .ok()
                .filter(|w| *w <= MAX_AGENT_WAIT_SECS)
                .ok_or_else(|| {
                    bad(format!(
                        "wait must be a whole number of seconds from 0 to {MAX_AGENT_WAIT_SECS}"
                    ))
                })?,
        };
        Ok(AgentPoll {
            revision: query.get("revision").filter(|r| !r.is_empty()).cloned(),
            wait: std::time::Duration::from_secs(wait),
        })
    }
}

pub fn credential(c: &IssuedCredential) -> CredentialView {
    CredentialView {
        node: c.node.clone(),
        role: c.role.as_str().into(),
        credentialid: c.credential_id.clone(),
        credential: c.credential.clone(),
        created: format_ms(c.created_ms),
    }
}

pub fn agent_state(d: &DesiredState) -> wire::DesiredState {
    wire::DesiredState {
        node: d.node.clone(),
        revision: d.revision.clone(),
        attachments: d
            .attachments
            .iter()
            .map(|a| wire::DesiredAttachment {
                volumeid: a.volume_id.clone(),
                volumename: a.volume_name.clone(),
                snapshotid: a.snapshot_id.clone(),
                snapshotname: a.snapshot_name.clone(),
                state: a.state.clone(),
                readonly: a.readonly,
                mountpoint: a.mountpoint.clone(),
                exportname: a.export_name.clone(),
                uri: a.uri.clone(),
                kind: a.kind.as_str().to_string(),
                filesystem: a.filesystem.map(|f| f.as_str().to_string()),
                filesystemprovisioned: a.filesystem_provisioned,
                size: a.size,
                manager: a.manager.as_str().to_string(),
                growjob: a.grow_job,
            })
            .collect(),
    }
}
