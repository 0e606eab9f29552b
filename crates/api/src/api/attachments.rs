//! Attachment routes: a volume (or snapshot) exported to a node, with
//! their bodies and views.

use super::body::typed;
use super::extract::{Parsed, ParsedQuery};
use super::parse::{bad, Body, ParseResult};
use super::requests::{FromBody, FromQuery};
use super::views::{self, BodyLimits, ErrorBody, JobStarted, SignedIn};
use super::{ApiResult, AppState};
use axum::extract::{Path, State};
use axum::Json;
use std::collections::BTreeMap;
use svs_control::service::attachments::attachment_uri;
use svs_control::service::commands::{CreateAttachment, DeleteVolume, ModifyAttachment};
use svs_control::service::format_ms;
use svs_control::service::Caller;
use svs_domain::AttachmentManager;
use svs_store::Attachment;
use svs_wire::requests::{AttachmentCreateRequest, AttachmentModifyRequest};
pub use svs_wire::views::AttachmentView;

#[utoipa::path(
    get, path = "/volumes/{volume}/attachments", tag = "Attachments", operation_id = "AttachmentsListForVolume",
    summary = "Attachments of a volume",
    params(("volume" = String, Path, description = "The volume's name or id")),
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "Attachments", body = Vec<AttachmentView>),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 404, description = "No such volume", body = ErrorBody),
    ),
)]
pub async fn volume_attachments(
    State(app): State<AppState>,
    caller: Caller,
    Path(volume): Path<String>,
) -> ApiResult<Vec<AttachmentView>> {
    let list = app.list_volume_attachments(&caller, &volume, None).await?;
    Ok(Json(views::list(&list, |a| attachment(a, &app.nbd_base))))
}

#[utoipa::path(
    get, path = "/volumes/{volume}/snapshots/{snapshot}/attachments", tag = "Attachments", operation_id = "AttachmentsList",
    summary = "Attachments of a volume's snapshot",
    params(
        ("volume" = String, Path, description = "The volume's name or id"),
        ("snapshot" = String, Path, description = "`top`: the live volume; else a snapshot's name or id (attached read-only)"),
    ),
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "Attachments", body = Vec<AttachmentView>),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 404, description = "No such volume or snapshot", body = ErrorBody),
    ),
)]
pub async fn snapshot_attachments(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot)): Path<(String, String)>,
) -> ApiResult<Vec<AttachmentView>> {
    let list = app
        .list_volume_attachments(&caller, &volume, Some(&snapshot))
        .await?;
    Ok(Json(views::list(&list, |a| attachment(a, &app.nbd_base))))
}

#[utoipa::path(
    get, path = "/attachments", tag = "Attachments", operation_id = "AttachmentsListAll",
    summary = "Attachments of the tenant",
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "Attachments", body = Vec<AttachmentView>),
    ),
)]
pub async fn list_attachments(
    State(app): State<AppState>,
    caller: Caller,
) -> ApiResult<Vec<AttachmentView>> {
    let list = app.list_attachments(&caller).await?;
    Ok(Json(views::list(&list, |a| attachment(a, &app.nbd_base))))
}

#[utoipa::path(
    post, path = "/volumes/{volume}/snapshots/{snapshot}/attachments", tag = "Attachments", operation_id = "AttachmentCreate",
    summary = "Attach a volume to a node",
    description = "Answers at once with the `attachment_create` job. svs answers 409 (not in the reference) when the volume is already attached to the node or a data movement runs.",
    params(
        ("volume" = String, Path, description = "The volume's name or id"),
        ("snapshot" = String, Path, description = "`top`: the live volume; else a snapshot's name or id (attached read-only)"),
    ),
    request_body = AttachmentCreateRequest,
    security(("storage.io-authorizer" = [])),
    responses(SignedIn, BodyLimits,
        (status = 200, description = "Attachment started", body = JobStarted),
        (status = 400, description = "Invalid attachment or unknown node", body = ErrorBody),
        (status = 404, description = "No such volume or snapshot", body = ErrorBody),
        (status = 409, description = "Already attached there, or blocked by a data movement", body = ErrorBody),
    ),
)]
pub async fn create_attachment(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot)): Path<(String, String)>,
    Parsed(request): Parsed<CreateAttachment>,
) -> ApiResult<JobStarted> {
    let started = app
        .create_attachment(&caller, &volume, &snapshot, &request)
        .await?;
    Ok(Json(views::started(
        "Attachment creation started",
        &started,
    )))
}

#[utoipa::path(
    get, path = "/volumes/{volume}/snapshots/{snapshot}/attachments/{node}", tag = "Attachments", operation_id = "AttachmentGet",
    summary = "Get an attachment",
    params(
        ("volume" = String, Path, description = "The volume's name or id"),
        ("snapshot" = String, Path, description = "`top`: the live volume; else a snapshot's name or id (attached read-only)"),
        ("node" = String, Path, description = "The node's name"),
    ),
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "The attachment", body = AttachmentView),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 404, description = "No such attachment", body = ErrorBody),
    ),
)]
pub async fn get_attachment(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot, node)): Path<(String, String, String)>,
) -> ApiResult<AttachmentView> {
    let a = app
        .get_attachment(&caller, &volume, &snapshot, &node)
        .await?;
    Ok(Json(attachment(&a, &app.nbd_base)))
}

#[utoipa::path(
    patch, path = "/volumes/{volume}/snapshots/{snapshot}/attachments/{node}", tag = "Attachments", operation_id = "AttachmentModify",
    summary = "Change an attachment",
    description = "Answers at once with the `attachment_modify` job; 409 (not in the reference) while a data movement runs.",
    params(
        ("volume" = String, Path, description = "The volume's name or id"),
        ("snapshot" = String, Path, description = "`top`: the live volume; else a snapshot's name or id (attached read-only)"),
        ("node" = String, Path, description = "The node's name"),
    ),
    request_body = AttachmentModifyRequest,
    security(("storage.io-authorizer" = [])),
    responses(SignedIn, BodyLimits,
        (status = 200, description = "Modification started", body = JobStarted),
        (status = 400, description = "Invalid change", body = ErrorBody),
        (status = 404, description = "No such attachment", body = ErrorBody),
        (status = 409, description = "Blocked by another job", body = ErrorBody),
    ),
)]
pub async fn modify_attachment(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot, node)): Path<(String, String, String)>,
    Parsed(request): Parsed<ModifyAttachment>,
) -> ApiResult<JobStarted> {
    let started = app
        .modify_attachment(&caller, &volume, &snapshot, &node, &request)
        .await?;
    Ok(Json(views::started(
        "Attachment modification started",
        &started,
    )))
}

#[utoipa::path(
    delete, path = "/volumes/{volume}/snapshots/{snapshot}/attachments/{node}", tag = "Attachments", operation_id = "AttachmentDelete",
    summary = "Detach a volume from a node",
    description = "Answers at once with the `attachment_delete` job; 409 (not in the reference) while a data movement runs.",
    params(
        ("volume" = String, Path, description = "The volume's name or id"),
        ("snapshot" = String, Path, description = "`top`: the live volume; else a snapshot's name or id (attached read-only)"),
        ("node" = String, Path, description = "The node's name"),
        ("force" = Option<bool>, Query, description = "Accepted for compatibility: a detach always closes the node's connections"),
    ),
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "Detachment started", body = JobStarted),
        (status = 400, description = "Malformed path or query", body = ErrorBody),
        (status = 404, description = "No such attachment", body = ErrorBody),
        (status = 409, description = "Blocked by another job", body = ErrorBody),
    ),
)]
pub async fn delete_attachment(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot, node)): Path<(String, String, String)>,
    ParsedQuery(_query): ParsedQuery<AttachmentDeleteQuery>,
) -> ApiResult<JobStarted> {
    let started = app
        .delete_attachment(&caller, &volume, &snapshot, &node)
        .await?;
    Ok(Json(views::started(
        "Attachment deletion started",
        &started,
    )))
}

/// `DELETE .../attachments/{node}`: the reference's `force` is accepted and
/// checked (a detach always closes the node's connections).
#[derive(Debug, Clone, Copy, Default)]
pub struct AttachmentDeleteQuery;

impl FromQuery for AttachmentDeleteQuery {
    fn from_query(query: &BTreeMap<String, String>) -> ParseResult<AttachmentDeleteQuery> {
        DeleteVolume::from_query(query)?;
        Ok(AttachmentDeleteQuery)
    }
}

impl FromBody for CreateAttachment {
    fn from_body(body: &Body) -> ParseResult<CreateAttachment> {
        let request: AttachmentCreateRequest = typed(body)?;
        Ok(CreateAttachment {
            node: request.node,
            readonly: request.readonly.unwrap_or(false),
            mountpoint: request.mountpoint.unwrap_or_default(),
            manager: request.manager.unwrap_or(AttachmentManager::Agent),
        })
    }
}

pub const NOTHING_TO_CHANGE: &str = "nothing to change: send readonly or mountpoint (or both)";

impl FromBody for ModifyAttachment {
    fn from_body(body: &Body) -> ParseResult<ModifyAttachment> {
        let request: AttachmentModifyRequest = typed(body)?;
        // A body naming neither (`{}`, only ignored fields) changes nothing:
        // no job for it.
        if request.readonly.is_none() && request.mountpoint.is_none() {
            return Err(bad(NOTHING_TO_CHANGE));
        }
        Ok(ModifyAttachment {
            readonly: request.readonly,
            mountpoint: request.mountpoint,
        })
    }
}

/// `nbd_base` is `nbd://host:port` of the NBD server.
pub fn attachment(a: &Attachment, nbd_base: &str) -> AttachmentView {
    // A finished attachment job leaves its status behind; only a
    // transition in progress shows it.
    let (status, progress) = match &a.job {
        Some((_, progress, status)) if a.state != "Attached" => (status.clone(), *progress),
        _ => (a.state.clone(), 100),
    };
    AttachmentView {
        volumename: a.volume_name.clone(),
        volumeid: a.volume_id.clone(),
        snapshotname: a.snapshot_name.clone(),
        snapshotid: a.snapshot.clone(),
        node: a.node.clone(),
        state: a.state.clone(),
        status,
        progress,
        mountpoint: a.mountpoint.clone(),
        readonly: a.readonly,
        exportname: a.export_name.clone(),
        uri: attachment_uri(a, nbd_base),
        manager: a.manager.as_str().into(),
        hoststate: a.host.as_ref().map(|h| h.state.clone()),
        hostdetail: a.host.as_ref().and_then(|h| h.detail.clone()),
        hostdevice: a.host.as_ref().and_then(|h| h.device.clone()),
        hostmountpath: a.host.as_ref().and_then(|h| h.mount_path.clone()),
        filesystembytes: a.host.as_ref().and_then(|h| h.filesystem_bytes),
        volumesize: a.volume_size,
        filesystemsize: a.host.as_ref().and_then(|h| h.filesystem_size),
        growerror: a.host.as_ref().and_then(|h| h.grow_error.clone()),
        hostupdated: a.host.as_ref().map(|h| format_ms(h.updated_ms)),
    }
}
