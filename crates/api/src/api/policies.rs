//! Policy routes, with the parsing of policy bodies and the policy view.

use super::extract::Parsed;
use super::parse::{bad, opt_bool, opt_str, opt_uint, Body, ParseResult};
use super::requests::FromBody;
use super::views::{self, BodyLimits, Done, ErrorBody, SignedIn};
use super::{ApiResult, AppState};
use axum::extract::{Path, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use svs_control::service::attributes::{CapacityOptimization, PolicySettings};
use svs_control::service::commands::{CreatePolicy, ResiliencyLevels, UpdatePolicy};
use svs_control::service::format_ms;
use svs_control::service::Caller;
use svs_domain::ResourceName;
use svs_store::Policy;
use utoipa::ToSchema;

#[utoipa::path(
    get, path = "/policies", tag = "Policies", operation_id = "PoliciesList",
    summary = "List the tenant's policies",
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "Policies", body = Vec<PolicyView>),
    ),
)]
pub async fn list_policies(
    State(app): State<AppState>,
    caller: Caller,
) -> ApiResult<Vec<PolicyView>> {
    Ok(Json(views::list(
        &app.list_policies(&caller).await?,
        policy,
    )))
}

#[utoipa::path(
    post, path = "/policies", tag = "Policies", operation_id = "PolicyCreate",
    summary = "Create a policy",
    description = "Differs from the reference on purpose: `capacityoptimization` may be left out (it defaults to `performance`), and omitted resiliency fields take the reference defaults (media 2, node 1, zone 1).",
    request_body = PolicyCreateRequest,
    security(("storage.io-authorizer" = [])),
    responses(SignedIn, BodyLimits,
        (status = 200, description = "Created", body = Done),
        (status = 400, description = "Invalid policy", body = ErrorBody),
        (status = 409, description = "A policy of that name exists", body = ErrorBody),
    ),
)]
pub async fn create_policy(
    State(app): State<AppState>,
    caller: Caller,
    Parsed(request): Parsed<CreatePolicy>,
) -> ApiResult<Done> {
    let p = app.create_policy(&caller, &request).await?;
    Ok(Json(views::done("Policy created", &p.name)))
}

#[utoipa::path(
    get, path = "/policies/{policy}", tag = "Policies", operation_id = "PolicyGet",
    summary = "Get a policy",
    params(("policy" = String, Path, description = "The policy's name")),
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "The policy", body = PolicyView),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 404, description = "No such policy (or another tenant's)", body = ErrorBody),
    ),
)]
pub async fn get_policy(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult<PolicyView> {
    Ok(Json(policy(&app.get_policy(&caller, &name).await?)))
}

#[utoipa::path(
    patch, path = "/policies/{policy}", tag = "Policies", operation_id = "PolicyModify",
    summary = "Change a policy",
    description = "Only the fields sent change; `name` renames (the reference requires `name`, svs does not). The resiliency of a policy used by volumes cannot change (409).",
    params(("policy" = String, Path, description = "The policy's name")),
    request_body = PolicyModifyRequest,
    security(("storage.io-authorizer" = [])),
    responses(SignedIn, BodyLimits,
        (status = 200, description = "Updated", body = Done),
        (status = 400, description = "Invalid change", body = ErrorBody),
        (status = 404, description = "No such policy", body = ErrorBody),
        (status = 409, description = "The new name is taken, or volumes use the policy", body = ErrorBody),
    ),
)]
pub async fn update_policy(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    Parsed(request): Parsed<UpdatePolicy>,
) -> ApiResult<Done> {
    let p = app.update_policy(&caller, &name, &request).await?;
    Ok(Json(views::done("Policy updated", &p.name)))
}

#[utoipa::path(
    delete, path = "/policies/{policy}", tag = "Policies", operation_id = "PolicyDelete",
    summary = "Delete a policy",
    description = "A policy used by volumes cannot be deleted (409).",
    params(("policy" = String, Path, description = "The policy's name")),
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "Deleted", body = Done),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 404, description = "No such policy", body = ErrorBody),
        (status = 409, description = "Volumes use the policy", body = ErrorBody),
    ),
)]
pub async fn delete_policy(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult<Done> {
    app.delete_policy(&caller, &name).await?;
    Ok(Json(views::done("Policy deleted", &name)))
}

/// Largest value of the limits and counters a policy stores.
const POLICY_NUMBER_MAX: u64 = u32::MAX as u64;

fn policy_levels(body: &Body) -> ParseResult<ResiliencyLevels> {
    let level = |key: &str| -> ParseResult<Option<u8>> {
        opt_uint(body, key, 0, 2)?
            .map(|v| {
                u8::try_from(v)
                    .map_err(|_| bad(format!("{key} must be a whole number from 0 to 2")))
            })
            .transpose()
    };
    Ok(ResiliencyLevels {
        media: level("resiliencymedia")?,
        node: level("resiliencynode")?,
        zone: level("resiliencyzone")?,
    })
}

/// Fields of a Policy the service sets itself: checked for their type (a
/// whole Policy object may be sent back) and ignored.
const POLICY_AUTHORSHIP: [&str; 6] = [
    "createdbyuserName",
    "createdbyuseremail",
    "createdtime",
    "updatebyusername",
    "updatebyUseremail",
    "updatetime",
];

fn policy_settings(body: &Body) -> ParseResult<PolicySettings> {
    for key in POLICY_AUTHORSHIP {
        opt_str(body, key)?;
    }
    let number = |key: &str, max: u64| opt_uint(body, key, 0, max);
    let settings = PolicySettings {
        iops_write: number("iopswrite", POLICY_NUMBER_MAX)?,
        iops_read: number("iopsread", POLICY_NUMBER_MAX)?,
        bandwidth_write: number("bandwidthwrite", POLICY_NUMBER_MAX)?,
        bandwidth_read: number("bandwidthread", POLICY_NUMBER_MAX)?,
        latency_write: number("latencywrite", POLICY_NUMBER_MAX)?,
        latency_read: number("latencyread", POLICY_NUMBER_MAX)?,
        local_zone_read: opt_bool(body, "localzoneread")?,
        failure_performance: opt_bool(body, "failureperformance")?,
        // Type-checked here, in field order; its value after the others.
        capacity_optimization: None,
        capacity_reservation: number("capacityreservation", 500)?,
        encryption: opt_bool(body, "encryption")?,
        sed: opt_bool(body, "sed")?,
        integrity: opt_bool(body, "integrity")?,
        snapshot_keep: number("snapshotkeep", 100_000)?,
        snapshot_frequency: opt_str(body, "snapshotfrequency")?.map(str::to_string),
        snapshot_day: number("snapshotday", 31)?,
        snapshot_hour: number("snapshothour", 23)?,
        snapshot_minute: number("snapshotminute", 59)?,
    };
    let capacity_optimization = match opt_str(body, "capacityoptimization")? {
        None => None,
        Some(v) => Some(CapacityOptimization::parse(v).ok_or_else(|| {
            bad("capacityoptimization must be one of capacity, balanced, performance")
        })?),
    };
    Ok(PolicySettings {
        capacity_optimization,
        ..settings
    })
}

fn policy_name(name: &str) -> ParseResult<ResourceName> {
    ResourceName::parse("policy", name).map_err(bad)
}

impl FromBody for CreatePolicy {
    fn from_body(body: &Body) -> ParseResult<CreatePolicy> {
        let name = match body.get("name") {
            None | Some(Value::Null) => return Err(bad("name is required")),
            Some(_) => policy_name(opt_str(body, "name")?.unwrap_or_default())?,
        };
        Ok(CreatePolicy {
            name,
            resiliency: policy_levels(body)?,
            settings: policy_settings(body)?,
        })
    }
}

impl FromBody for UpdatePolicy {
    fn from_body(body: &Body) -> ParseResult<UpdatePolicy> {
        Ok(UpdatePolicy {
            name: opt_str(body, "name")?.map(policy_name).transpose()?,
            resiliency: policy_levels(body)?,
            settings: policy_settings(body)?,
        })
    }
}

/// A policy: name, resiliency, the settings it was given (absent when not
/// set; `capacityoptimization` always present) and authorship.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Policy)]
#[allow(non_snake_case)]
pub struct PolicyView {
    #[schema(min_length = 1)]
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iopswrite: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iopsread: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidthwrite: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidthread: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latencywrite: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latencyread: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub localzoneread: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failureperformance: Option<bool>,
    /// `capacity`, `balanced` or `performance`.
    #[schema(pattern = "^(capacity|balanced|performance)$")]
    pub capacityoptimization: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(maximum = 500)]
    pub capacityreservation: Option<u64>,
    /// 0–2.
    #[schema(maximum = 2)]
    pub resiliencymedia: u8,
    /// 0–2.
    #[schema(maximum = 2)]
    pub resiliencynode: u8,
    /// 0–2.
    #[schema(maximum = 2)]
    pub resiliencyzone: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encryption: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub integrity: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshotkeep: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshotfrequency: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshotday: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshothour: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshotminute: Option<u64>,
    pub createdbyuserName: String,
    pub createdbyuseremail: String,
    /// RFC 3339.
    pub createdtime: String,
    /// `""` until the policy is changed.
    pub updatebyusername: String,
    pub updatebyUseremail: String,
    pub updatetime: String,
}

pub fn policy(p: &Policy) -> PolicyView {
    let a: &Map<String, Value> = &p.attributes;
    let number = |key: &str| a.get(key).and_then(Value::as_u64);
    let flag = |key: &str| a.get(key).and_then(Value::as_bool);
    let text = |key: &str| a.get(key).and_then(Value::as_str).map(str::to_string);
    PolicyView {
        name: p.name.clone(),
        iopswrite: number("iopswrite"),
        iopsread: number("iopsread"),
        bandwidthwrite: number("bandwidthwrite"),
        bandwidthread: number("bandwidthread"),
        latencywrite: number("latencywrite"),
        latencyread: number("latencyread"),
        localzoneread: flag("localzoneread"),
        failureperformance: flag("failureperformance"),
        capacityoptimization: text("capacityoptimization")
            .unwrap_or_else(|| "performance".to_string()),
        capacityreservation: number("capacityreservation"),
        resiliencymedia: p.resiliency.media,
        resiliencynode: p.resiliency.node,
        resiliencyzone: p.resiliency.zone,
        encryption: flag("encryption"),
        sed: flag("sed"),
        integrity: flag("integrity"),
        snapshotkeep: number("snapshotkeep"),
        snapshotfrequency: text("snapshotfrequency"),
        snapshotday: number("snapshotday"),
        snapshothour: number("snapshothour"),
        snapshotminute: number("snapshotminute"),
        createdbyuserName: p.created_by_name.clone(),
        createdbyuseremail: p.created_by_email.clone(),
        createdtime: format_ms(p.created_ms),
        updatebyusername: p.updated_by_name.clone().unwrap_or_default(),
        updatebyUseremail: p.updated_by_email.clone().unwrap_or_default(),
        updatetime: p.updated_ms.map(format_ms).unwrap_or_default(),
    }
}

/// The settings of a policy other than its name and resiliency. Absent
/// fields keep their value (the default, on creation).
#[derive(Deserialize, ToSchema)]
#[allow(dead_code, non_snake_case)]
pub struct PolicySettingsRequest {
    #[schema(maximum = 4_294_967_295_u64)]
    #[serde(default)]
    pub iopswrite: u64,
    #[schema(maximum = 4_294_967_295_u64)]
    #[serde(default)]
    pub iopsread: u64,
    #[schema(maximum = 4_294_967_295_u64)]
    #[serde(default)]
    pub bandwidthwrite: u64,
    #[schema(maximum = 4_294_967_295_u64)]
    #[serde(default)]
    pub bandwidthread: u64,
    #[schema(maximum = 4_294_967_295_u64)]
    #[serde(default)]
    pub latencywrite: u64,
    #[schema(maximum = 4_294_967_295_u64)]
    #[serde(default)]
    pub latencyread: u64,
    #[serde(default)]
    pub localzoneread: bool,
    #[serde(default)]
    pub failureperformance: bool,
    /// `performance` when a new policy does not say.
    #[schema(pattern = "^(capacity|balanced|performance)$")]
    #[serde(default)]
    pub capacityoptimization: String,
    #[schema(maximum = 500)]
    #[serde(default)]
    pub capacityreservation: u64,
    /// Media failures to survive, 0–2 (default 2).
    #[schema(maximum = 2)]
    #[serde(default)]
    pub resiliencymedia: u8,
    /// Node failures to survive, 0–2 (default 1).
    #[schema(maximum = 2)]
    #[serde(default)]
    pub resiliencynode: u8,
    /// Zone failures to survive, 0–2 (default 1).
    #[schema(maximum = 2)]
    #[serde(default)]
    pub resiliencyzone: u8,
    #[serde(default)]
    pub encryption: bool,
    #[serde(default)]
    pub sed: bool,
    #[serde(default)]
    pub integrity: bool,
    #[schema(maximum = 100_000)]
    #[serde(default)]
    pub snapshotkeep: u64,
    #[serde(default)]
    pub snapshotfrequency: String,
    #[schema(maximum = 31)]
    #[serde(default)]
    pub snapshotday: u64,
    #[schema(maximum = 23)]
    #[serde(default)]
    pub snapshothour: u64,
    #[schema(maximum = 59)]
    #[serde(default)]
    pub snapshotminute: u64,
}

/// Authorship of a policy, set by the service: accepted (a whole Policy
/// object may be sent) if strings, and ignored.
#[derive(Deserialize, ToSchema)]
#[allow(dead_code, non_snake_case)]
pub struct PolicyAuthorshipRequest {
    #[serde(default)]
    pub createdbyuserName: String,
    #[serde(default)]
    pub createdbyuseremail: String,
    #[serde(default)]
    pub createdtime: String,
    #[serde(default)]
    pub updatebyusername: String,
    #[serde(default)]
    pub updatebyUseremail: String,
    #[serde(default)]
    pub updatetime: String,
}

/// `POST /policies`.
#[derive(Deserialize, ToSchema)]
#[schema(as = PolicyCreate)]
#[allow(dead_code, non_snake_case)]
pub struct PolicyCreateRequest {
    #[schema(
        pattern = "^([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*)$",
        max_length = 63
    )]
    pub name: String,
    #[serde(flatten)]
    pub settings: PolicySettingsRequest,
    #[serde(flatten)]
    pub authorship: PolicyAuthorshipRequest,
}

/// `PATCH /policies/{policy}`: only what is sent changes; `name` renames.
#[derive(Deserialize, ToSchema)]
#[schema(as = PolicyModify)]
#[allow(dead_code, non_snake_case)]
pub struct PolicyModifyRequest {
    #[schema(
        pattern = "^([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*)$",
        max_length = 63
    )]
    #[serde(default)]
    pub name: String,
    #[serde(flatten)]
    pub settings: PolicySettingsRequest,
    #[serde(flatten)]
    pub authorship: PolicyAuthorshipRequest,
}
