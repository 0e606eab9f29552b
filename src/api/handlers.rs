//! Route handlers, thin by design: extract (caller, role, parsed command),
//! call one service function, render with `views`.

use super::extract::{ClientAddress, Parsed, ParsedQuery, RefreshTokenHeader};
use super::{views, ApiError, AppState};
use crate::service::commands::{
    CreateAttachment, CreatePolicy, CreateVolume, DeleteVolume, ListJobs, ModifyAttachment,
    Refresh, ResizeVolume, SetNodeAddress, SignIn, SignOut, UpdatePolicy,
};
use crate::service::{Administrator, Caller};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::Value;

type ApiResult = Result<Json<Value>, ApiError>;

pub async fn sign_in(
    State(app): State<AppState>,
    ClientAddress(client): ClientAddress,
    Parsed(request): Parsed<SignIn>,
) -> ApiResult {
    Ok(Json(views::signed_in(
        &app.sign_in(&request, client).await?,
    )))
}

pub async fn sign_out(State(app): State<AppState>, Parsed(request): Parsed<SignOut>) -> ApiResult {
    app.sign_out(&request).await?;
    Ok(Json(views::empty()))
}

pub async fn refresh(
    State(app): State<AppState>,
    ClientAddress(client): ClientAddress,
    Parsed(request): Parsed<Refresh>,
) -> ApiResult {
    Ok(Json(views::signed_in(
        &app.refresh(&request, client).await?,
    )))
}

/// The Volumez refresh call: the token in the `refreshtoken` header; it
/// does not rotate (its answer has no RefreshToken).
pub async fn volumez_refresh(
    State(app): State<AppState>,
    ClientAddress(client): ClientAddress,
    RefreshTokenHeader(request): RefreshTokenHeader,
) -> ApiResult {
    let tokens = app.refresh_without_rotation(&request, client).await?;
    Ok(Json(views::volumez_refreshed(&tokens)))
}

pub async fn version() -> Json<Value> {
    Json(views::version())
}

pub async fn jwks(State(app): State<AppState>) -> Json<Value> {
    Json(views::jwks(&app.tokens.public_keys(app.clock.now_secs())))
}

pub async fn list_media(State(app): State<AppState>, _: Caller) -> ApiResult {
    Ok(Json(views::list(&app.list_media().await?, views::medium)))
}

pub async fn get_medium(
    State(app): State<AppState>,
    _: Caller,
    Path(id): Path<String>,
) -> ApiResult {
    Ok(Json(views::medium(&app.get_medium(&id).await?)))
}

pub async fn list_nodes(State(app): State<AppState>, _: Caller) -> ApiResult {
    Ok(Json(views::list(&app.list_nodes().await?, views::node)))
}

pub async fn get_node(
    State(app): State<AppState>,
    _: Caller,
    Path(name): Path<String>,
) -> ApiResult {
    Ok(Json(views::node(&app.get_node(&name).await?)))
}

/// Administrators only: the address decides who may open the node's exports.
pub async fn update_node(
    State(app): State<AppState>,
    admin: Administrator,
    Path(node): Path<String>,
    Parsed(request): Parsed<SetNodeAddress>,
) -> ApiResult {
    let n = app.set_node_address(&admin, &node, &request).await?;
    Ok(Json(views::done("Node updated", &n.name)))
}

pub async fn list_policies(State(app): State<AppState>, caller: Caller) -> ApiResult {
    Ok(Json(views::list(
        &app.list_policies(&caller).await?,
        views::policy,
    )))
}

pub async fn create_policy(
    State(app): State<AppState>,
    caller: Caller,
    Parsed(request): Parsed<CreatePolicy>,
) -> ApiResult {
    let p = app.create_policy(&caller, &request).await?;
    Ok(Json(views::done("Policy created", &p.name)))
}

pub async fn get_policy(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult {
    Ok(Json(views::policy(&app.get_policy(&caller, &name).await?)))
}

pub async fn update_policy(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    Parsed(request): Parsed<UpdatePolicy>,
) -> ApiResult {
    let p = app.update_policy(&caller, &name, &request).await?;
    Ok(Json(views::done("Policy updated", &p.name)))
}

pub async fn delete_policy(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult {
    app.delete_policy(&caller, &name).await?;
    Ok(Json(views::done("Policy deleted", &name)))
}

pub async fn list_volumes(State(app): State<AppState>, caller: Caller) -> ApiResult {
    Ok(Json(views::list(
        &app.list_volumes(&caller).await?,
        views::volume,
    )))
}

pub async fn create_volume(
    State(app): State<AppState>,
    caller: Caller,
    Parsed(request): Parsed<CreateVolume>,
) -> ApiResult {
    let started = app.create_volume(&caller, &request).await?;
    Ok(Json(views::started("Volume creation started", &started)))
}

pub async fn get_volume(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult {
    Ok(Json(views::volume(&app.get_volume(&caller, &name).await?)))
}

pub async fn resize_volume(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    Parsed(request): Parsed<ResizeVolume>,
) -> ApiResult {
    let started = app.resize_volume(&caller, &name, &request).await?;
    Ok(Json(views::started("Volume resize started", &started)))
}

pub async fn delete_volume(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    ParsedQuery(request): ParsedQuery<DeleteVolume>,
) -> ApiResult {
    let started = app.delete_volume(&caller, &name, &request).await?;
    Ok(Json(views::started("Volume deletion started", &started)))
}

pub async fn volume_slices(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult {
    Ok(Json(views::list(
        &app.volume_slices(&caller, &name).await?,
        views::slice,
    )))
}

pub async fn list_jobs(
    State(app): State<AppState>,
    caller: Caller,
    ParsedQuery(request): ParsedQuery<ListJobs>,
) -> ApiResult {
    Ok(Json(views::list(
        &app.list_jobs(&caller, &request).await?,
        views::job,
    )))
}

pub async fn get_job(
    State(app): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult {
    Ok(Json(views::job(&app.get_job(&caller, &id).await?)))
}

pub async fn volume_attachments(
    State(app): State<AppState>,
    caller: Caller,
    Path(volume): Path<String>,
) -> ApiResult {
    let list = app.list_volume_attachments(&caller, &volume, None).await?;
    Ok(Json(views::list(&list, |a| {
        views::attachment(a, &app.nbd_base)
    })))
}

pub async fn snapshot_attachments(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot)): Path<(String, String)>,
) -> ApiResult {
    let list = app
        .list_volume_attachments(&caller, &volume, Some(&snapshot))
        .await?;
    Ok(Json(views::list(&list, |a| {
        views::attachment(a, &app.nbd_base)
    })))
}

pub async fn list_attachments(State(app): State<AppState>, caller: Caller) -> ApiResult {
    let list = app.list_attachments(&caller).await?;
    Ok(Json(views::list(&list, |a| {
        views::attachment(a, &app.nbd_base)
    })))
}

pub async fn create_attachment(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot)): Path<(String, String)>,
    Parsed(request): Parsed<CreateAttachment>,
) -> ApiResult {
    let started = app
        .create_attachment(&caller, &volume, &snapshot, &request)
        .await?;
    Ok(Json(views::started(
        "Attachment creation started",
        &started,
    )))
}

pub async fn get_attachment(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot, node)): Path<(String, String, String)>,
) -> ApiResult {
    let a = app
        .get_attachment(&caller, &volume, &snapshot, &node)
        .await?;
    Ok(Json(views::attachment(&a, &app.nbd_base)))
}

pub async fn modify_attachment(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot, node)): Path<(String, String, String)>,
    Parsed(request): Parsed<ModifyAttachment>,
) -> ApiResult {
    let started = app
        .modify_attachment(&caller, &volume, &snapshot, &node, &request)
        .await?;
    Ok(Json(views::started(
        "Attachment modification started",
        &started,
    )))
}

pub async fn delete_attachment(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot, node)): Path<(String, String, String)>,
) -> ApiResult {
    let started = app
        .delete_attachment(&caller, &volume, &snapshot, &node)
        .await?;
    Ok(Json(views::started(
        "Attachment deletion started",
        &started,
    )))
}

pub async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such route")
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed on this route",
    )
}
