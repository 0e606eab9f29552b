//! Snapshot routes (thin, like `handlers`): a volume's snapshots, every
//! snapshot of the tenant, and rollback.

use super::extract::{Parsed, ParsedQuery};
use super::handlers::ApiResult;
use super::views::{Done, ErrorBody, JobStarted, SnapshotView};
use super::{bodies, views, AppState};
use crate::service::commands::{CreateSnapshot, DeleteSnapshot, ModifySnapshot};
use crate::service::Caller;
use axum::extract::{Path, State};
use axum::Json;

#[utoipa::path(
    get, path = "/volumes/{volume}/snapshots", tag = "Snapshots", operation_id = "SnapshotsList",
    summary = "Snapshots of a volume",
    params(("volume" = String, Path, description = "The volume's name or id")),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Snapshots, oldest first", body = Vec<SnapshotView>),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such volume", body = ErrorBody),
    ),
)]
pub async fn list_snapshots(
    State(app): State<AppState>,
    caller: Caller,
    Path(volume): Path<String>,
) -> ApiResult<Vec<SnapshotView>> {
    let list = app.list_snapshots(&caller, &volume).await?;
    Ok(Json(views::list(&list, views::snapshot)))
}

#[utoipa::path(
    post, path = "/volumes/{volume}/snapshots", tag = "Snapshots", operation_id = "SnapshotCreate",
    summary = "Take a snapshot",
    description = "Answers at once with the `snapshot_create` job; `ObjectID` is the new snapshot's id. The snapshot is crash-consistent: every write acknowledged before it is in it, none after. svs answers 409 (not in the reference) for a duplicate name, while a data movement runs (naming its job) or while another job works on the volume.",
    params(("volume" = String, Path, description = "The volume's name or id")),
    request_body = bodies::SnapshotCreateRequest,
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Snapshot started", body = JobStarted),
        (status = 400, description = "Invalid snapshot", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such volume", body = ErrorBody),
        (status = 408, description = "Body not received in time", body = ErrorBody),
        (status = 409, description = "Duplicate name, or the volume is busy", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB", body = ErrorBody),
    ),
)]
pub async fn create_snapshot(
    State(app): State<AppState>,
    caller: Caller,
    Path(volume): Path<String>,
    Parsed(request): Parsed<CreateSnapshot>,
) -> ApiResult<JobStarted> {
    let started = app.create_snapshot(&caller, &volume, &request).await?;
    Ok(Json(views::started("Snapshot creation started", &started)))
}

#[utoipa::path(
    get, path = "/volumes/{volume}/snapshots/{snapshot}", tag = "Snapshots", operation_id = "SnapshotGet",
    summary = "Get a snapshot",
    params(
        ("volume" = String, Path, description = "The volume's name or id"),
        ("snapshot" = String, Path, description = "The snapshot's name or id"),
    ),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "The snapshot", body = SnapshotView),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such volume or snapshot", body = ErrorBody),
    ),
)]
pub async fn get_snapshot(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot)): Path<(String, String)>,
) -> ApiResult<SnapshotView> {
    let s = app.get_snapshot(&caller, &volume, &snapshot).await?;
    Ok(Json(views::snapshot(&s)))
}

#[utoipa::path(
    patch, path = "/volumes/{volume}/snapshots/{snapshot}", tag = "Snapshots", operation_id = "SnapshotModify",
    summary = "Rename a snapshot or change its stored fields",
    description = "Done at once (no job); `ObjectID` is the snapshot's id. 409 (not in the reference) for a duplicate name or while a data movement runs.",
    params(
        ("volume" = String, Path, description = "The volume's name or id"),
        ("snapshot" = String, Path, description = "The snapshot's name or id"),
    ),
    request_body = bodies::SnapshotModifyRequest,
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Snapshot changed", body = Done),
        (status = 400, description = "Invalid change", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such volume or snapshot", body = ErrorBody),
        (status = 408, description = "Body not received in time", body = ErrorBody),
        (status = 409, description = "Duplicate name, or blocked by a data movement", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB", body = ErrorBody),
    ),
)]
pub async fn modify_snapshot(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot)): Path<(String, String)>,
    Parsed(request): Parsed<ModifySnapshot>,
) -> ApiResult<Done> {
    let s = app
        .modify_snapshot(&caller, &volume, &snapshot, &request)
        .await?;
    Ok(Json(views::done(
        &format!("Snapshot '{}' updated", s.name),
        &s.id,
    )))
}

#[utoipa::path(
    delete, path = "/volumes/{volume}/snapshots/{snapshot}", tag = "Snapshots", operation_id = "SnapshotDelete",
    summary = "Delete a snapshot",
    description = "Answers at once with the `snapshot_delete` job; the other snapshots stay exact. 409 (not in the reference) while attached (unless `force`), while a clone copies from it, or while a data movement runs.",
    params(
        ("volume" = String, Path, description = "The volume's name or id"),
        ("snapshot" = String, Path, description = "The snapshot's name or id"),
        ("force" = Option<bool>, Query, description = "Delete even while attached (its attachments go with it)"),
    ),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Deletion started", body = JobStarted),
        (status = 400, description = "Malformed query", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such volume or snapshot", body = ErrorBody),
        (status = 409, description = "Attached, being cloned, or the volume is busy", body = ErrorBody),
    ),
)]
pub async fn delete_snapshot(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot)): Path<(String, String)>,
    ParsedQuery(request): ParsedQuery<DeleteSnapshot>,
) -> ApiResult<JobStarted> {
    let started = app
        .delete_snapshot(&caller, &volume, &snapshot, &request)
        .await?;
    Ok(Json(views::started("Snapshot deletion started", &started)))
}

#[utoipa::path(
    patch, path = "/volumes/{volume}/snapshots/{snapshot}/rollback", tag = "Snapshots", operation_id = "SnapshotRollback",
    summary = "Roll a volume back to a snapshot",
    description = "Answers at once with the `snapshot_rollback` job. The volume keeps its current size: space it grew by after the snapshot reads as zeros. Snapshots newer than this one stay as they are. 409 (not in the reference) while the volume is attached read-write (naming the nodes) or busy.",
    params(
        ("volume" = String, Path, description = "The volume's name or id"),
        ("snapshot" = String, Path, description = "The snapshot's name or id"),
    ),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Rollback started", body = JobStarted),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such volume or snapshot", body = ErrorBody),
        (status = 409, description = "Attached read-write, or the volume is busy", body = ErrorBody),
    ),
)]
pub async fn rollback_snapshot(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot)): Path<(String, String)>,
) -> ApiResult<JobStarted> {
    let started = app.rollback_snapshot(&caller, &volume, &snapshot).await?;
    Ok(Json(views::started("Snapshot rollback started", &started)))
}

#[utoipa::path(
    get, path = "/snapshots", tag = "Snapshots", operation_id = "SnapshotsListAll",
    summary = "Every snapshot of the tenant",
    params(("capacity" = Option<bool>, Query, description = "Accepted for compatibility: `used` is always filled")),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Snapshots by volume, oldest first", body = Vec<SnapshotView>),
        (status = 400, description = "Malformed query", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
    ),
)]
pub async fn list_all_snapshots(
    State(app): State<AppState>,
    caller: Caller,
    ParsedQuery(_query): ParsedQuery<super::requests::CapacityQuery>,
) -> ApiResult<Vec<SnapshotView>> {
    let list = app.list_all_snapshots(&caller).await?;
    Ok(Json(views::list(&list, views::snapshot)))
}
