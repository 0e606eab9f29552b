//! Route handlers: thin by design.

use super::extract::JsonObject;
use super::{ApiError, AppState};
use crate::service::attachments::attachment_json;
use crate::service::catalog::{job_json, medium_json};
use crate::service::fields::req_str;
use crate::service::volumes::{slice_json, volume_json, Started};
use crate::service::Caller;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use svs_store::Policy;

type ApiResult = Result<Json<Value>, ApiError>;

fn started(message: &str, s: Started) -> ApiResult {
    Ok(Json(json!({
        "Message": message,
        "JobID": s.job_id.to_string(),
        "ObjectID": s.object_id,
    })))
}

pub async fn sign_in(State(app): State<AppState>, JsonObject(body): JsonObject) -> ApiResult {
    let email = req_str(&body, "email")?;
    let password = req_str(&body, "password")?;
    let s = app.sign_in(email, password).await?;
    Ok(Json(json!({
        "AccessToken": s.tokens.access_token,
        "IdToken": s.tokens.id_token,
        "RefreshToken": s.refresh_token,
        "ExpiresIn": s.tokens.expires_in,
        "TokenType": "Bearer",
    })))
}

pub async fn sign_out(State(app): State<AppState>, JsonObject(body): JsonObject) -> ApiResult {
    app.sign_out(req_str(&body, "AccessToken")?).await?;
    Ok(Json(json!({})))
}

pub async fn refresh(State(app): State<AppState>, JsonObject(body): JsonObject) -> ApiResult {
    let t = app.refresh(req_str(&body, "RefreshToken")?).await?;
    Ok(Json(json!({
        "AccessToken": t.access_token,
        "IdToken": t.id_token,
        "ExpiresIn": t.expires_in,
        "TokenType": "Bearer",
    })))
}

pub async fn version() -> Json<Value> {
    Json(json!({"version": env!("CARGO_PKG_VERSION"), "componentName": "svs"}))
}

pub async fn jwks(State(app): State<AppState>) -> Json<Value> {
    Json(app.tokens.jwks())
}

pub async fn list_media(State(app): State<AppState>, _: Caller) -> ApiResult {
    let media = app.list_media().await?;
    Ok(Json(media.iter().map(medium_json).collect()))
}

pub async fn get_medium(
    State(app): State<AppState>,
    _: Caller,
    Path(id): Path<String>,
) -> ApiResult {
    Ok(Json(medium_json(&app.get_medium(&id).await?)))
}

pub async fn list_nodes(State(app): State<AppState>, _: Caller) -> ApiResult {
    Ok(Json(Value::Array(app.list_nodes().await?)))
}

pub async fn get_node(
    State(app): State<AppState>,
    _: Caller,
    Path(name): Path<String>,
) -> ApiResult {
    Ok(Json(app.get_node(&name).await?))
}

fn policy_json(p: &Policy) -> Value {
    let mut out = p.attributes.clone();
    out.insert("name".into(), json!(p.name));
    out.insert("resiliencymedia".into(), json!(p.resiliency.media));
    out.insert("resiliencynode".into(), json!(p.resiliency.node));
    out.insert("resiliencyzone".into(), json!(p.resiliency.zone));
    out.insert("createdbyuserName".into(), json!(p.created_by_name));
    out.insert("createdbyuseremail".into(), json!(p.created_by_email));
    out.insert(
        "createdtime".into(),
        json!(crate::service::format_ms(p.created_ms)),
    );
    out.insert(
        "updatebyusername".into(),
        json!(p.updated_by_name.clone().unwrap_or_default()),
    );
    out.insert(
        "updatebyUseremail".into(),
        json!(p.updated_by_email.clone().unwrap_or_default()),
    );
    out.insert(
        "updatetime".into(),
        json!(p
            .updated_ms
            .map(crate::service::format_ms)
            .unwrap_or_default()),
    );
    Value::Object(out)
}

pub async fn list_policies(State(app): State<AppState>, caller: Caller) -> ApiResult {
    let policies = app.list_policies(&caller).await?;
    Ok(Json(policies.iter().map(policy_json).collect()))
}

pub async fn create_policy(
    State(app): State<AppState>,
    caller: Caller,
    JsonObject(body): JsonObject,
) -> ApiResult {
    let p = app.create_policy(&caller, &body).await?;
    Ok(Json(
        json!({"Message": "Policy created", "ObjectID": p.name}),
    ))
}

pub async fn get_policy(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult {
    Ok(Json(policy_json(&app.get_policy(&caller, &name).await?)))
}

pub async fn update_policy(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult {
    let p = app.update_policy(&caller, &name, &body).await?;
    Ok(Json(
        json!({"Message": "Policy updated", "ObjectID": p.name}),
    ))
}

pub async fn delete_policy(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult {
    app.delete_policy(&caller, &name).await?;
    Ok(Json(json!({"Message": "Policy deleted", "ObjectID": name})))
}

pub async fn list_volumes(State(app): State<AppState>, caller: Caller) -> ApiResult {
    let volumes = app.list_volumes(&caller).await?;
    Ok(Json(volumes.iter().map(volume_json).collect()))
}

pub async fn create_volume(
    State(app): State<AppState>,
    caller: Caller,
    JsonObject(body): JsonObject,
) -> ApiResult {
    started(
        "Volume creation started",
        app.create_volume(&caller, &body).await?,
    )
}

pub async fn get_volume(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult {
    Ok(Json(volume_json(&app.get_volume(&caller, &name).await?)))
}

pub async fn resize_volume(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult {
    started(
        "Volume resize started",
        app.resize_volume(&caller, &name, &body).await?,
    )
}

pub async fn delete_volume(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
) -> ApiResult {
    let force = match query.get("force").map(String::as_str) {
        None | Some("false") => false,
        Some("true") | Some("") => true,
        Some(_) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "force must be true or false",
            ))
        }
    };
    started(
        "Volume deletion started",
        app.delete_volume(&caller, &name, force).await?,
    )
}

pub async fn volume_slices(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult {
    let slices = app.volume_slices(&caller, &name).await?;
    Ok(Json(slices.iter().map(slice_json).collect()))
}

pub async fn list_jobs(
    State(app): State<AppState>,
    caller: Caller,
    Query(query): Query<BTreeMap<String, String>>,
) -> ApiResult {
    let jobs = app.list_jobs(&caller, &query).await?;
    Ok(Json(jobs.iter().map(job_json).collect()))
}

pub async fn get_job(
    State(app): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult {
    Ok(Json(job_json(&app.get_job(&caller, &id).await?)))
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

pub async fn update_node(
    State(app): State<AppState>,
    _: Caller,
    Path(node): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult {
    let n = app.set_node_address(&node, &body).await?;
    Ok(Json(json!({"Message": "Node updated", "ObjectID": n.name})))
}

fn attachments_json(app: &AppState, list: &[svs_store::Attachment]) -> Value {
    list.iter()
        .map(|a| attachment_json(a, &app.nbd_base))
        .collect()
}

pub async fn volume_attachments(
    State(app): State<AppState>,
    caller: Caller,
    Path(volume): Path<String>,
) -> ApiResult {
    let list = app.list_volume_attachments(&caller, &volume, None).await?;
    Ok(Json(attachments_json(&app, &list)))
}

pub async fn snapshot_attachments(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot)): Path<(String, String)>,
) -> ApiResult {
    let list = app
        .list_volume_attachments(&caller, &volume, Some(&snapshot))
        .await?;
    Ok(Json(attachments_json(&app, &list)))
}

pub async fn list_attachments(State(app): State<AppState>, caller: Caller) -> ApiResult {
    let list = app.list_attachments(&caller).await?;
    Ok(Json(attachments_json(&app, &list)))
}

pub async fn create_attachment(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot)): Path<(String, String)>,
    JsonObject(body): JsonObject,
) -> ApiResult {
    started(
        "Attachment creation started",
        app.create_attachment(&caller, &volume, &snapshot, &body)
            .await?,
    )
}

pub async fn get_attachment(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot, node)): Path<(String, String, String)>,
) -> ApiResult {
    let a = app
        .get_attachment(&caller, &volume, &snapshot, &node)
        .await?;
    Ok(Json(attachment_json(&a, &app.nbd_base)))
}

pub async fn modify_attachment(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot, node)): Path<(String, String, String)>,
    JsonObject(body): JsonObject,
) -> ApiResult {
    started(
        "Attachment modification started",
        app.modify_attachment(&caller, &volume, &snapshot, &node, &body)
            .await?,
    )
}

pub async fn delete_attachment(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot, node)): Path<(String, String, String)>,
) -> ApiResult {
    started(
        "Attachment deletion started",
        app.delete_attachment(&caller, &volume, &snapshot, &node)
            .await?,
    )
}
