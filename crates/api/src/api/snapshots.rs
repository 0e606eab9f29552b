//! Snapshot routes (thin, like `handlers`): a volume's snapshots, every
//! snapshot of the tenant, and rollback.

use super::extract::{Parsed, ParsedQuery};
use super::parse::{bad, opt_bool, opt_str, req_str, Body, ParseResult};
use super::requests::{force_query, opt_non_empty, query_bool, FromBody, FromQuery};
use super::views::{self, non_empty, BodyLimits, Done, ErrorBody, JobStarted, SignedIn};
use super::{ApiResult, AppState};
use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use svs_control::service::commands::{CreateSnapshot, DeleteSnapshot, ModifySnapshot};
use svs_control::service::format_ms;
use svs_control::service::Caller;
use svs_domain::{Consistency, ResourceName};
use svs_store::Snapshot;
use svs_wire::requests::SnapshotCreateRequest;
pub use svs_wire::views::SnapshotView;
use utoipa::ToSchema;

#[utoipa::path(
    get, path = "/volumes/{volume}/snapshots", tag = "Snapshots", operation_id = "SnapshotsList",
    summary = "Snapshots of a volume",
    params(("volume" = String, Path, description = "The volume's name or id")),
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "Snapshots, oldest first", body = Vec<SnapshotView>),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 404, description = "No such volume", body = ErrorBody),
    ),
)]
pub async fn list_snapshots(
    State(app): State<AppState>,
    caller: Caller,
    Path(volume): Path<String>,
) -> ApiResult<Vec<SnapshotView>> {
    let list = app.list_snapshots(&caller, &volume).await?;
    Ok(Json(views::list(&list, snapshot_view)))
}

#[utoipa::path(
    post, path = "/volumes/{volume}/snapshots", tag = "Snapshots", operation_id = "SnapshotCreate",
    summary = "Take a snapshot",
    description = "Answers at once with the `snapshot_create` job; `ObjectID` is the new snapshot's id. The snapshot is crash-consistent: every write acknowledged before it is in it, none after. svs answers 409 (not in the reference) for a duplicate name, while a data movement runs (naming its job) or while another job works on the volume.",
    params(("volume" = String, Path, description = "The volume's name or id")),
    request_body = SnapshotCreateRequest,
    security(("storage.io-authorizer" = [])),
    responses(SignedIn, BodyLimits,
        (status = 200, description = "Snapshot started", body = JobStarted),
        (status = 400, description = "Invalid snapshot", body = ErrorBody),
        (status = 404, description = "No such volume", body = ErrorBody),
        (status = 409, description = "Duplicate name, or the volume is busy", body = ErrorBody),
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
    responses(SignedIn,
        (status = 200, description = "The snapshot", body = SnapshotView),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 404, description = "No such volume or snapshot", body = ErrorBody),
    ),
)]
pub async fn get_snapshot(
    State(app): State<AppState>,
    caller: Caller,
    Path((volume, snapshot)): Path<(String, String)>,
) -> ApiResult<SnapshotView> {
    let s = app.get_snapshot(&caller, &volume, &snapshot).await?;
    Ok(Json(snapshot_view(&s)))
}

#[utoipa::path(
    patch, path = "/volumes/{volume}/snapshots/{snapshot}", tag = "Snapshots", operation_id = "SnapshotModify",
    summary = "Rename a snapshot or change its stored fields",
    description = "Done at once (no job); `ObjectID` is the snapshot's id. 409 (not in the reference) for a duplicate name or while a data movement runs.",
    params(
        ("volume" = String, Path, description = "The volume's name or id"),
        ("snapshot" = String, Path, description = "The snapshot's name or id"),
    ),
    request_body = SnapshotModifyRequest,
    security(("storage.io-authorizer" = [])),
    responses(SignedIn, BodyLimits,
        (status = 200, description = "Snapshot changed", body = Done),
        (status = 400, description = "Invalid change", body = ErrorBody),
        (status = 404, description = "No such volume or snapshot", body = ErrorBody),
        (status = 409, description = "Duplicate name, or blocked by a data movement", body = ErrorBody),
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
    responses(SignedIn,
        (status = 200, description = "Deletion started", body = JobStarted),
        (status = 400, description = "Malformed query", body = ErrorBody),
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
    responses(SignedIn,
        (status = 200, description = "Rollback started", body = JobStarted),
        (status = 400, description = "Malformed path", body = ErrorBody),
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
    responses(SignedIn,
        (status = 200, description = "Snapshots by volume, oldest first", body = Vec<SnapshotView>),
        (status = 400, description = "Malformed query", body = ErrorBody),
    ),
)]
pub async fn list_all_snapshots(
    State(app): State<AppState>,
    caller: Caller,
    ParsedQuery(_query): ParsedQuery<CapacityQuery>,
) -> ApiResult<Vec<SnapshotView>> {
    let list = app.list_all_snapshots(&caller).await?;
    Ok(Json(views::list(&list, snapshot_view)))
}

/// `GET /snapshots`: `capacity` (reference) is accepted and checked; `used`
/// is always filled.
#[derive(Debug, Clone, Copy, Default)]
pub struct CapacityQuery;

impl FromQuery for CapacityQuery {
    fn from_query(query: &BTreeMap<String, String>) -> ParseResult<CapacityQuery> {
        query_bool(query, "capacity")?;
        Ok(CapacityQuery)
    }
}

impl FromQuery for DeleteSnapshot {
    fn from_query(query: &BTreeMap<String, String>) -> ParseResult<DeleteSnapshot> {
        Ok(DeleteSnapshot {
            force: force_query(query)?,
        })
    }
}

/// Writable Snapshot fields svs keeps and returns without acting on them,
/// with their JSON type: (name, is boolean).
const SNAPSHOT_STORED_FIELDS: [(&str, bool); 4] = [
    ("targetsecret", false),
    ("policy", true),
    ("consistencygroup", true),
    ("consistencygroupname", false),
];

/// Read-only Snapshot fields a client may send back with a whole object:
/// ignored, but still of their type. (name, is a number)
const SNAPSHOT_READ_ONLY_FIELDS: [(&str, bool); 10] = [
    ("volumename", false),
    ("volumeid", false),
    ("snapshotid", false),
    ("time", false),
    ("state", false),
    ("status", false),
    ("volumesize", true),
    ("used", true),
    ("progress", true),
    ("numberofattachments", true),
];

fn snapshot_attributes(body: &Body) -> ParseResult<Map<String, Value>> {
    for (key, number) in SNAPSHOT_READ_ONLY_FIELDS {
        match body.get(key) {
            None => {}
            // Any whole number, however large: the value is ignored, only
            // its type is checked.
            Some(Value::Number(n)) if number && n.as_f64().is_some_and(|f| f.fract() == 0.0) => {}
            Some(Value::String(_)) if !number => {}
            Some(_) if number => return Err(bad(format!("{key} must be a whole number"))),
            Some(_) => return Err(bad(format!("{key} must be a string"))),
        }
    }
    let mut attributes = Map::new();
    for (key, boolean) in SNAPSHOT_STORED_FIELDS {
        let value = if boolean {
            opt_bool(body, key)?.map(Value::from)
        } else {
            opt_str(body, key)?.map(Value::from)
        };
        if let Some(value) = value {
            attributes.insert(key.to_string(), value);
        }
    }
    Ok(attributes)
}

fn snapshot_name(value: &str) -> ParseResult<ResourceName> {
    ResourceName::parse("snapshot", value).map_err(bad)
}

impl FromBody for CreateSnapshot {
    fn from_body(body: &Body) -> ParseResult<CreateSnapshot> {
        let name = snapshot_name(req_str(body, "name")?)?;
        let consistency = Consistency::parse(req_str(body, "consistency")?)
            .ok_or_else(|| bad("consistency must be \"crash\" or \"application\""))?;
        Ok(CreateSnapshot {
            name,
            consistency,
            attributes: snapshot_attributes(body)?,
        })
    }
}

impl FromBody for ModifySnapshot {
    /// A whole Snapshot object may come back: read-only fields are ignored;
    /// `consistency` is how it was taken and cannot change.
    fn from_body(body: &Body) -> ParseResult<ModifySnapshot> {
        let name = opt_non_empty(body, "name")?
            .map(snapshot_name)
            .transpose()?;
        Ok(ModifySnapshot {
            name,
            attributes: snapshot_attributes(body)?,
        })
    }
}

pub fn snapshot_view(s: &Snapshot) -> SnapshotView {
    let text = |key: &str| {
        s.attributes
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let flag = |key: &str| {
        s.attributes
            .get(key)
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    let state = s.state.as_str();
    SnapshotView {
        name: s.name.clone(),
        snapshotid: s.id.clone(),
        volumename: s.volume_name.clone(),
        volumeid: s.volume_id.clone(),
        volumesize: s.volume_size,
        consistency: s.consistency.as_str().into(),
        time: format_ms(s.created_ms),
        used: s.used_bytes,
        state: state.into(),
        status: state.into(),
        progress: if s.state == svs_domain::SnapshotState::Creating {
            0
        } else {
            100
        },
        numberofattachments: s.attachments,
        policy: flag("policy"),
        consistencygroup: flag("consistencygroup"),
        consistencygroupname: text("consistencygroupname"),
        targetsecret: non_empty(&text("targetsecret")),
    }
}

/// `PATCH /volumes/{volume}/snapshots/{snapshot}`: a new name and the
/// stored fields; read-only fields sent back are ignored.
#[derive(Deserialize, ToSchema)]
#[schema(as = SnapshotModify)]
#[allow(dead_code, non_snake_case)]
pub struct SnapshotModifyRequest {
    /// A new name (absent or `""`: unchanged).
    #[schema(
        pattern = "^(([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*))?$",
        max_length = 63
    )]
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub targetsecret: String,
    #[serde(default)]
    pub policy: bool,
    #[serde(default)]
    pub consistencygroup: bool,
    #[serde(default)]
    pub consistencygroupname: String,
}
