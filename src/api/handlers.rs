//! Route handlers, thin by design: extract (caller, role, parsed command),
//! call one service function, render with `views`. Each carries its entry
//! in the API document (`#[utoipa::path]`): the router and `/openapi.json`
//! are built from the same declarations (`super::documented_routes`).

use super::extract::{ClientAddress, Parsed, ParsedQuery, RefreshTokenHeader};
use super::requests::{AttachmentDeleteQuery, VolumeListQuery};
use super::views::{
    AttachmentView, Done, Empty, ErrorBody, JobStarted, JobView, Jwks, MediumView, NodeView,
    PolicyView, SignedInView, SliceView, Version, VolumeView, VolumezRefreshed,
};
use super::{bodies, views, ApiError, AppState};
use crate::service::commands::{
    CreateAttachment, CreatePolicy, CreateVolume, DeleteVolume, ListJobs, ModifyAttachment,
    ModifyMedium, Refresh, ResizeVolume, SetNodeAddress, SignIn, SignOut, UpdatePolicy,
};
use crate::service::{Administrator, Caller};
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

pub(super) type ApiResult<T> = Result<Json<T>, ApiError>;

#[utoipa::path(
    post, path = "/signin", tag = "user", operation_id = "signIn",
    summary = "Sign in",
    description = "Returns the tokens of a session. svs differs from the reference on purpose: a wrong password or an unknown e-mail answers 401 `Incorrect email or password` (not 400/404), and repeated failures are throttled with 429 and `Retry-After`.",
    request_body = bodies::SignInRequest,
    responses(
        (status = 200, description = "Signed in", body = SignedInView),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Incorrect email or password", body = ErrorBody),
        (status = 403, description = "The password is right but the account is disabled (svs extension)", body = ErrorBody),
        (status = 408, description = "Body not received in time", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB", body = ErrorBody),
        (status = 429, description = "Too many failed sign-ins for this account or from this address: retry after `Retry-After` seconds", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "Too many password checks waiting: retry after `Retry-After` seconds", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
pub async fn sign_in(
    State(app): State<AppState>,
    ClientAddress(client): ClientAddress,
    Parsed(request): Parsed<SignIn>,
) -> ApiResult<SignedInView> {
    Ok(Json(views::signed_in(
        &app.sign_in(&request, client).await?,
    )))
}

#[utoipa::path(
    post, path = "/signout", tag = "user", operation_id = "signOut",
    summary = "Sign out",
    description = "Revokes every refresh token of the user; the current AccessToken and IdToken stay valid until they expire. Authenticated by the AccessToken in the body, so it needs no `authorization` header.",
    request_body = bodies::SignOutRequest,
    responses(
        (status = 200, description = "Signed out", body = Empty),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Not a valid AccessToken", body = ErrorBody),
        (status = 408, description = "Body not received in time", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB", body = ErrorBody),
    ),
)]
pub async fn sign_out(
    State(app): State<AppState>,
    Parsed(request): Parsed<SignOut>,
) -> ApiResult<Empty> {
    app.sign_out(&request).await?;
    Ok(Json(Empty {}))
}

#[utoipa::path(
    post, path = "/refresh", tag = "user", operation_id = "refresh",
    summary = "New tokens from a RefreshToken",
    description = "svs extension. Rotates: the answer carries a new RefreshToken and the one sent is retired; sending a retired RefreshToken again revokes every token of that sign-in (reuse detection).",
    request_body = bodies::RefreshRequest,
    responses(
        (status = 200, description = "New tokens, with the next RefreshToken", body = SignedInView),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Unknown, expired, retired or revoked RefreshToken", body = ErrorBody),
        (status = 408, description = "Body not received in time", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB", body = ErrorBody),
        (status = 429, description = "Too many failed attempts from this address: retry after `Retry-After` seconds", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
pub async fn refresh(
    State(app): State<AppState>,
    ClientAddress(client): ClientAddress,
    Parsed(request): Parsed<Refresh>,
) -> ApiResult<SignedInView> {
    Ok(Json(views::signed_in(
        &app.refresh(&request, client).await?,
    )))
}

/// The Volumez refresh call: the token in the `refreshtoken` header; it
/// does not rotate (its answer has no RefreshToken).
#[utoipa::path(
    get, path = "/tenant/apiaccess/credentials/refresh", tag = "user", operation_id = "refreshCredentials",
    summary = "New tokens from a RefreshToken (Volumez)",
    description = "The Volumez API's refresh call. Unlike `POST /refresh` it does not rotate the RefreshToken, since its answer has none; a retired RefreshToken sent here still counts as reuse. The expirations are RFC 3339 UTC times.",
    params(("refreshtoken" = String, Header, description = "The RefreshToken from `POST /signin`")),
    responses(
        (status = 200, description = "New tokens", body = VolumezRefreshed),
        (status = 401, description = "Missing, unknown, expired, retired or revoked RefreshToken", body = ErrorBody),
        (status = 429, description = "Too many failed attempts from this address: retry after `Retry-After` seconds", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
pub async fn volumez_refresh(
    State(app): State<AppState>,
    ClientAddress(client): ClientAddress,
    RefreshTokenHeader(request): RefreshTokenHeader,
) -> ApiResult<VolumezRefreshed> {
    let tokens = app.refresh_without_rotation(&request, client).await?;
    Ok(Json(views::volumez_refreshed(&tokens)))
}

#[utoipa::path(
    get, path = "/version", tag = "Version", operation_id = "versionGet",
    summary = "Version of the service",
    description = "Public in svs (the reference asks for a token).",
    responses((status = 200, description = "Version", body = Version)),
)]
pub async fn version() -> Json<Version> {
    Json(views::version())
}

#[utoipa::path(
    get, path = "/.well-known/jwks.json", tag = "user", operation_id = "jwks",
    summary = "Public keys that verify the tokens",
    description = "svs extension: a JSON Web Key Set (Ed25519): the key that signs now, then retired keys whose tokens may still be valid (`svs keys rotate`).",
    responses((status = 200, description = "Key set", body = Jwks)),
)]
pub async fn jwks(State(app): State<AppState>) -> Json<Jwks> {
    Json(views::jwks(&app.tokens.public_keys(app.clock.now_secs())))
}

#[utoipa::path(
    get, path = "/media", tag = "Media", operation_id = "MediaList",
    summary = "List media",
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Media", body = Vec<MediumView>),
        (status = 401, description = "Not signed in", body = ErrorBody),
    ),
)]
pub async fn list_media(State(app): State<AppState>, _: Caller) -> ApiResult<Vec<MediumView>> {
    Ok(Json(views::list(
        &app.media_reports().await?,
        views::medium,
    )))
}

#[utoipa::path(
    get, path = "/media/{media}", tag = "Media", operation_id = "MediaGet",
    summary = "Get a medium",
    params(("media" = String, Path, description = "The medium's id")),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "The medium", body = MediumView),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such medium", body = ErrorBody),
    ),
)]
pub async fn get_medium(
    State(app): State<AppState>,
    _: Caller,
    Path(id): Path<String>,
) -> ApiResult<MediumView> {
    Ok(Json(views::medium(&app.medium_report(&id).await?)))
}

/// Administrators only: failing a medium loses its slices for every volume;
/// a size is the configuration's business for media it lists.
#[utoipa::path(
    patch, path = "/media/{media}", tag = "Media", operation_id = "MediaModify",
    summary = "Declare a medium failed, or resize it (administrators only)",
    description = "svs extension. One change per call. `{\"state\": \"Failed\"}` (any medium): every slice on the medium is lost at once; volumes with another copy of each column turn `Degraded` and keep serving, the others `Failed` (I/O on the lost ranges answers EIO). Rebuild with `POST /volumes/{volume}/recover`. A failed medium does not come back. `{\"size\": N}` (GiB; media added through the API only, `managedby: api`): grows the medium, or shrinks it down to what is in use on it (slices, snapshots, running jobs' bookings), else 409. A medium listed in the configuration file answers 409: change it there and restart.",
    params(("media" = String, Path, description = "The medium's id")),
    request_body = bodies::MediaModifyRequest,
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "The medium, changed", body = MediumView),
        (status = 400, description = "Malformed body, another state, or both fields", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such medium", body = ErrorBody),
        (status = 408, description = "Body not received in time", body = ErrorBody),
        (status = 409, description = "Shrinking below what is in use, a failed medium, or a medium of the configuration file", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB", body = ErrorBody),
    ),
)]
pub async fn update_medium(
    State(app): State<AppState>,
    admin: Administrator,
    Path(id): Path<String>,
    Parsed(request): Parsed<ModifyMedium>,
) -> ApiResult<MediumView> {
    let medium = app.modify_medium(&admin, &id, &request).await?;
    Ok(Json(views::medium(&app.report_medium(medium).await)))
}

#[utoipa::path(
    post, path = "/volumes/{volume}/recover", tag = "Volumes", operation_id = "VolumeRecoverInitiate",
    summary = "Rebuild the copies a volume lost",
    description = "Answers at once with the `volume_recovery` job, which rebuilds each slice lost on a failed medium from a healthy copy, on a medium chosen by the placement rules, paced by `movement_rate`; the volume's `volumerecoveryjob` names it while it runs. It ends `Error` when no medium can take a copy or a column has no healthy copy left, and `Done` at once when nothing was lost. 409 (not in the reference) while a data movement or another job runs.",
    params(("volume" = String, Path, description = "The volume's name or id")),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Recovery started", body = JobStarted),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such volume", body = ErrorBody),
        (status = 409, description = "Blocked by a data movement or another job", body = ErrorBody),
    ),
)]
pub async fn recover_volume(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult<JobStarted> {
    let started = app.recover_volume(&caller, &name).await?;
    Ok(Json(views::started("Volume recovery started", &started)))
}

#[utoipa::path(
    get, path = "/nodes", tag = "Nodes", operation_id = "NodesList",
    summary = "List nodes",
    description = "Media nodes and configured hosts, with capacity and `address` (svs extension).",
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Nodes", body = Vec<NodeView>),
        (status = 401, description = "Not signed in", body = ErrorBody),
    ),
)]
pub async fn list_nodes(State(app): State<AppState>, _: Caller) -> ApiResult<Vec<NodeView>> {
    Ok(Json(views::list(&app.list_nodes().await?, views::node)))
}

#[utoipa::path(
    get, path = "/nodes/{node}", tag = "Nodes", operation_id = "NodeGet",
    summary = "Get a node",
    params(("node" = String, Path, description = "The node's name")),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "The node", body = NodeView),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such node", body = ErrorBody),
    ),
)]
pub async fn get_node(
    State(app): State<AppState>,
    _: Caller,
    Path(name): Path<String>,
) -> ApiResult<NodeView> {
    Ok(Json(views::node(&app.get_node(&name).await?)))
}

/// Administrators only: the address decides who may open the node's exports.
#[utoipa::path(
    patch, path = "/nodes/{node}", tag = "Nodes", operation_id = "NodeModify",
    summary = "Set the address a node attaches from (administrators only)",
    description = "svs extension. The address decides who may open the node's NBD exports, so only administrators may set it; others get 403 before their body is read.",
    params(("node" = String, Path, description = "The node's name")),
    request_body = bodies::NodeModifyRequest,
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Updated", body = Done),
        (status = 400, description = "Malformed body or not an IP address", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Not an administrator", body = ErrorBody),
        (status = 404, description = "No such node", body = ErrorBody),
        (status = 408, description = "Body not received in time", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB", body = ErrorBody),
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
    get, path = "/policies", tag = "Policies", operation_id = "PoliciesList",
    summary = "List the tenant's policies",
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Policies", body = Vec<PolicyView>),
        (status = 401, description = "Not signed in", body = ErrorBody),
    ),
)]
pub async fn list_policies(
    State(app): State<AppState>,
    caller: Caller,
) -> ApiResult<Vec<PolicyView>> {
    Ok(Json(views::list(
        &app.list_policies(&caller).await?,
        views::policy,
    )))
}

#[utoipa::path(
    post, path = "/policies", tag = "Policies", operation_id = "PolicyCreate",
    summary = "Create a policy",
    description = "Differs from the reference on purpose: `capacityoptimization` may be left out (it defaults to `performance`), and omitted resiliency fields take the reference defaults (media 2, node 1, zone 1).",
    request_body = bodies::PolicyCreateRequest,
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Created", body = Done),
        (status = 400, description = "Invalid policy", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 408, description = "Body not received in time", body = ErrorBody),
        (status = 409, description = "A policy of that name exists", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB", body = ErrorBody),
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
    responses(
        (status = 200, description = "The policy", body = PolicyView),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such policy (or another tenant's)", body = ErrorBody),
    ),
)]
pub async fn get_policy(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult<PolicyView> {
    Ok(Json(views::policy(&app.get_policy(&caller, &name).await?)))
}

#[utoipa::path(
    patch, path = "/policies/{policy}", tag = "Policies", operation_id = "PolicyModify",
    summary = "Change a policy",
    description = "Only the fields sent change; `name` renames (the reference requires `name`, svs does not). The resiliency of a policy used by volumes cannot change (409).",
    params(("policy" = String, Path, description = "The policy's name")),
    request_body = bodies::PolicyModifyRequest,
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Updated", body = Done),
        (status = 400, description = "Invalid change", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such policy", body = ErrorBody),
        (status = 408, description = "Body not received in time", body = ErrorBody),
        (status = 409, description = "The new name is taken, or volumes use the policy", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB", body = ErrorBody),
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
    responses(
        (status = 200, description = "Deleted", body = Done),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
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

#[utoipa::path(
    get, path = "/volumes", tag = "Volumes", operation_id = "VolumesList",
    summary = "List the tenant's volumes",
    description = "Every volume by name, or with `page` or `count` (svs extension) one page of them.",
    params(
        ("capacity" = Option<bool>, Query, description = "Accepted for compatibility; the list is the same"),
        ("page" = Option<u32>, Query, minimum = 1, maximum = 4294967, description = "1-based page (svs extension); without page and count: every volume"),
        ("count" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "Volumes per page (svs extension; default 100 when page is given)"),
    ),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Volumes", body = Vec<VolumeView>),
        (status = 400, description = "Malformed query", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
    ),
)]
pub async fn list_volumes(
    State(app): State<AppState>,
    caller: Caller,
    ParsedQuery(query): ParsedQuery<VolumeListQuery>,
) -> ApiResult<Vec<VolumeView>> {
    Ok(Json(views::list(
        &app.list_volumes(&caller, query.page).await?,
        views::volume,
    )))
}

#[utoipa::path(
    post, path = "/volumes", tag = "Volumes", operation_id = "VolumeCreate",
    summary = "Create a volume",
    description = "Answers at once with the `volume_create` job. `type` may be left out (`block`). A name in use is a 409.",
    request_body = bodies::VolumeCreateRequest,
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Creation started", body = JobStarted),
        (status = 400, description = "Invalid volume, unknown policy or zone", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 408, description = "Body not received in time", body = ErrorBody),
        (status = 409, description = "A volume of that name exists", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB", body = ErrorBody),
    ),
)]
pub async fn create_volume(
    State(app): State<AppState>,
    caller: Caller,
    Parsed(request): Parsed<CreateVolume>,
) -> ApiResult<JobStarted> {
    let started = app.create_volume(&caller, &request).await?;
    Ok(Json(views::started("Volume creation started", &started)))
}

#[utoipa::path(
    get, path = "/volumes/{volume}", tag = "Volumes", operation_id = "VolumeGet",
    summary = "Get a volume",
    params(("volume" = String, Path, description = "The volume's name or id")),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "The volume", body = VolumeView),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such volume (or another tenant's)", body = ErrorBody),
    ),
)]
pub async fn get_volume(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult<VolumeView> {
    Ok(Json(views::volume(&app.get_volume(&caller, &name).await?)))
}

#[utoipa::path(
    patch, path = "/volumes/{volume}", tag = "Volumes", operation_id = "VolumeModify",
    summary = "Resize a volume",
    description = "`size` must be a whole number of GiB, greater than the current size and at most 10× it (400 naming the bound). Answers at once with the `volume_modify_extend` job. svs answers 409 (not in the reference) while another job works on the volume or a data movement runs.",
    params(("volume" = String, Path, description = "The volume's name or id")),
    request_body = bodies::VolumeModifyRequest,
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Resize started", body = JobStarted),
        (status = 400, description = "Invalid size or a changed fixed field", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such volume", body = ErrorBody),
        (status = 408, description = "Body not received in time", body = ErrorBody),
        (status = 409, description = "Another job works on the volume", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB", body = ErrorBody),
    ),
)]
pub async fn resize_volume(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    Parsed(request): Parsed<ResizeVolume>,
) -> ApiResult<JobStarted> {
    let started = app.resize_volume(&caller, &name, &request).await?;
    Ok(Json(views::started("Volume resize started", &started)))
}

#[utoipa::path(
    delete, path = "/volumes/{volume}", tag = "Volumes", operation_id = "VolumeDelete",
    summary = "Delete a volume",
    description = "Answers at once with the `volume_delete` job. An attached volume is a 409 unless `force` (svs answers 409, not in the reference, while another job works on the volume).",
    params(
        ("volume" = String, Path, description = "The volume's name or id"),
        ("force" = Option<bool>, Query, description = "Delete even while attached"),
    ),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Deletion started", body = JobStarted),
        (status = 400, description = "Malformed query", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such volume", body = ErrorBody),
        (status = 409, description = "Attached, or another job works on the volume", body = ErrorBody),
    ),
)]
pub async fn delete_volume(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    ParsedQuery(request): ParsedQuery<DeleteVolume>,
) -> ApiResult<JobStarted> {
    let started = app.delete_volume(&caller, &name, &request).await?;
    Ok(Json(views::started("Volume deletion started", &started)))
}

#[utoipa::path(
    get, path = "/volumes/{volume}/slices", tag = "Volumes", operation_id = "VolumeSlices",
    summary = "The layout of a volume",
    description = "svs extension: copy, column, medium, node, zone and size of each slice.",
    params(("volume" = String, Path, description = "The volume's name or id")),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Slices", body = Vec<SliceView>),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such volume", body = ErrorBody),
    ),
)]
pub async fn volume_slices(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult<Vec<SliceView>> {
    Ok(Json(views::list(
        &app.volume_slices(&caller, &name).await?,
        views::slice,
    )))
}

#[utoipa::path(
    get, path = "/jobs", tag = "Jobs", operation_id = "JobsList",
    summary = "List the tenant's jobs, newest first",
    params(
        ("page" = Option<u32>, Query, minimum = 1, maximum = 4294967, description = "1-based page"),
        ("count" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "Jobs per page (default 100)"),
        ("type" = Option<String>, Query, description = "Only jobs of this type; empty: all"),
        ("object" = Option<String>, Query, description = "Only jobs on this object: a volume's id, or its name (svs extension; also finds the jobs of a deleted volume of that name); empty: all"),
        ("state" = Option<String>, Query, pattern = "^(Pending|Running|Done|Error)?$", description = "Only jobs in this state; empty: all"),
        ("internal" = Option<bool>, Query, description = "Accepted for compatibility; svs has no internal jobs"),
    ),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Jobs", body = Vec<JobView>),
        (status = 400, description = "Malformed query", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
    ),
)]
pub async fn list_jobs(
    State(app): State<AppState>,
    caller: Caller,
    ParsedQuery(request): ParsedQuery<ListJobs>,
) -> ApiResult<Vec<JobView>> {
    Ok(Json(views::list(
        &app.list_jobs(&caller, &request).await?,
        views::job,
    )))
}

#[utoipa::path(
    get, path = "/jobs/{job}", tag = "Jobs", operation_id = "JobGet",
    summary = "Get a job",
    params(("job" = String, Path, description = "The job's id")),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "The job", body = JobView),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such job (or another tenant's)", body = ErrorBody),
    ),
)]
pub async fn get_job(
    State(app): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<JobView> {
    Ok(Json(views::job(&app.get_job(&caller, &id).await?)))
}

#[utoipa::path(
    get, path = "/volumes/{volume}/attachments", tag = "Attachments", operation_id = "AttachmentsListForVolume",
    summary = "Attachments of a volume",
    params(("volume" = String, Path, description = "The volume's name or id")),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Attachments", body = Vec<AttachmentView>),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such volume", body = ErrorBody),
    ),
)]
pub async fn volume_attachments(
    State(app): State<AppState>,
    caller: Caller,
    Path(volume): Path<String>,
) -> ApiResult<Vec<AttachmentView>> {
    let list = app.list_volume_attachments(&caller, &volume, None).await?;
    Ok(Json(views::list(&list, |a| {
        views::attachment(a, &app.nbd_base)
    })))
}

#[utoipa::path(
    get, path = "/volumes/{volume}/snapshots/{snapshot}/attachments", tag = "Attachments", operation_id = "AttachmentsList",
    summary = "Attachments of a volume's snapshot",
    params(
        ("volume" = String, Path, description = "The volume's name or id"),
        ("snapshot" = String, Path, description = "`top`: the live volume; else a snapshot's name or id (attached read-only)"),
    ),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Attachments", body = Vec<AttachmentView>),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
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
    Ok(Json(views::list(&list, |a| {
        views::attachment(a, &app.nbd_base)
    })))
}

#[utoipa::path(
    get, path = "/attachments", tag = "Attachments", operation_id = "AttachmentsListAll",
    summary = "Attachments of the tenant",
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Attachments", body = Vec<AttachmentView>),
        (status = 401, description = "Not signed in", body = ErrorBody),
    ),
)]
pub async fn list_attachments(
    State(app): State<AppState>,
    caller: Caller,
) -> ApiResult<Vec<AttachmentView>> {
    let list = app.list_attachments(&caller).await?;
    Ok(Json(views::list(&list, |a| {
        views::attachment(a, &app.nbd_base)
    })))
}

#[utoipa::path(
    post, path = "/volumes/{volume}/snapshots/{snapshot}/attachments", tag = "Attachments", operation_id = "AttachmentCreate",
    summary = "Attach a volume to a node",
    description = "Answers at once with the `attachment_create` job. svs answers 409 (not in the reference) when the volume is already attached to the node or a data movement runs.",
    params(
        ("volume" = String, Path, description = "The volume's name or id"),
        ("snapshot" = String, Path, description = "`top`: the live volume; else a snapshot's name or id (attached read-only)"),
    ),
    request_body = bodies::AttachmentCreateRequest,
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Attachment started", body = JobStarted),
        (status = 400, description = "Invalid attachment or unknown node", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such volume or snapshot", body = ErrorBody),
        (status = 408, description = "Body not received in time", body = ErrorBody),
        (status = 409, description = "Already attached there, or blocked by a data movement", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB", body = ErrorBody),
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
    responses(
        (status = 200, description = "The attachment", body = AttachmentView),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
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
    Ok(Json(views::attachment(&a, &app.nbd_base)))
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
    request_body = bodies::AttachmentModifyRequest,
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Modification started", body = JobStarted),
        (status = 400, description = "Invalid change", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such attachment", body = ErrorBody),
        (status = 408, description = "Body not received in time", body = ErrorBody),
        (status = 409, description = "Blocked by another job", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB", body = ErrorBody),
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
    responses(
        (status = 200, description = "Detachment started", body = JobStarted),
        (status = 400, description = "Malformed path or query", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
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

pub async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such route")
}

/// A method the route does not serve: 405. `OPTIONS` (served by no route)
/// asks which methods are: 204. Both get axum's `Allow` header, the
/// methods registered on the route (`HEAD` wherever `GET` is), so what it
/// advertises is what the router answers.
pub async fn method_not_allowed(method: Method) -> Response {
    if method == Method::OPTIONS {
        return StatusCode::NO_CONTENT.into_response();
    }
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed on this route",
    )
    .into_response()
}
