//! Media and nodes added and removed by administrators (svs extensions of
//! the reference, whose `DELETE` routes these follow).

use super::extract::Parsed;
use super::views::{Done, ErrorBody, MediumView};
use super::{bodies, views, ApiError, AppState};
use crate::service::commands::CreateMedium;
use crate::service::Administrator;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;

#[utoipa::path(
    post, path = "/media", tag = "Media", operation_id = "MediaCreate",
    summary = "Add a medium (administrators only)",
    description = "svs extension. The directory (`media`) is created if missing and must be writable; the planner places slices on the medium at once. The medium is API-managed (`managedby: api`): kept in the database across restarts, changed and removed through the API. Its node is added (API-managed, no address) when it does not exist yet.",
    request_body = bodies::MediaCreateRequest,
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 201, description = "The new medium", body = MediumView),
        (status = 400, description = "Malformed body, bad name or size, or a directory that is not absolute or cannot be created or written", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 408, description = "Body not received in time", body = ErrorBody),
        (status = 409, description = "A medium of that id exists, another medium uses the directory, or the node is in another zone", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB", body = ErrorBody),
    ),
)]
pub async fn create_medium(
    State(app): State<AppState>,
    admin: Administrator,
    Parsed(request): Parsed<CreateMedium>,
) -> Result<(StatusCode, Json<MediumView>), ApiError> {
    let medium = app.create_medium(&admin, &request).await?;
    Ok((
        StatusCode::CREATED,
        Json(views::medium(&app.report_medium(medium).await)),
    ))
}

#[utoipa::path(
    delete, path = "/media/{media}", tag = "Media", operation_id = "MediaDelete",
    summary = "Remove a medium (administrators only)",
    description = "Refused with 409 while the medium holds slices (the message names their volumes) or running jobs booked space on it, and for a medium listed in the configuration file (remove it there). The directory stays on disk; svs removes only slice files of its own still in it. The reference's `force` is not supported.",
    params(("media" = String, Path, description = "The medium's id")),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Removed", body = Done),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such medium", body = ErrorBody),
        (status = 409, description = "The medium holds slices or bookings, or is defined in the configuration file", body = ErrorBody),
    ),
)]
pub async fn delete_medium(
    State(app): State<AppState>,
    admin: Administrator,
    Path(id): Path<String>,
) -> Result<Json<Done>, ApiError> {
    app.delete_medium(&admin, &id).await?;
    Ok(Json(views::done("Medium removed", &id)))
}

#[utoipa::path(
    delete, path = "/nodes/{node}", tag = "Nodes", operation_id = "NodeDelete",
    summary = "Remove a node (administrators only)",
    description = "Refused with 409 while the node has media (the message names the volumes with slices on them, else the media) or attachments (naming their volumes), and for a node listed in the configuration file (as `[[nodes]]` or the node of a `[[media]]`). Its agent credential is revoked with it. The reference's `force` and `delayDelete` are not supported.",
    params(("node" = String, Path, description = "The node's name")),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Removed", body = Done),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
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
