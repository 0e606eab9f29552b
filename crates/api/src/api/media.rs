//! Media routes: list, read, add, resize or fail, remove (adding and
//! removing are svs extensions of the reference, whose `DELETE` routes
//! these follow), with their bodies and views.

use super::body::typed;
use super::extract::{Parsed, ParsedQuery};
use super::parse::{bad, opt_uint, req_str, Body, ParseResult};
use super::relocation::{relocation_plan, DryRunQuery};
use super::requests::{only_fields, FromBody};
use super::views::{self, AdminOnly, BodyLimits, Done, ErrorBody, JobStarted, SignedIn};
use super::{ApiError, ApiResult, AppState};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;
use svs_control::service::commands::{CreateMedium, ModifyMedium};
use svs_control::service::media::MediumReport;
use svs_control::service::volumes::Started;
use svs_control::service::{Administrator, Caller};
use svs_wire::plans::RelocationPlanView;
use svs_wire::requests::MediaModifyRequest;
use svs_wire::requests::{MediaCreateRequest, MAX_MEDIUM_GIB};
pub use svs_wire::views::MediumView;
use utoipa::ToSchema;

#[utoipa::path(
    get, path = "/media", tag = "Media", operation_id = "MediaList",
    summary = "List media",
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "Media", body = Vec<MediumView>),
    ),
)]
pub async fn list_media(State(app): State<AppState>, _: Caller) -> ApiResult<Vec<MediumView>> {
    Ok(Json(views::list(&app.media_reports().await?, medium_view)))
}

#[utoipa::path(
    get, path = "/media/{media}", tag = "Media", operation_id = "MediaGet",
    summary = "Get a medium",
    params(("media" = String, Path, description = "The medium's id")),
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "The medium", body = MediumView),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 404, description = "No such medium", body = ErrorBody),
    ),
)]
pub async fn get_medium(
    State(app): State<AppState>,
    _: Caller,
    Path(id): Path<String>,
) -> ApiResult<MediumView> {
    Ok(Json(medium_view(&app.medium_report(&id).await?)))
}

/// Administrators only: failing a medium loses its slices for every volume;
/// a size is the configuration's business for media it lists.
#[utoipa::path(
    patch, path = "/media/{media}", tag = "Media", operation_id = "MediaModify",
    summary = "Declare a medium failed, drain it, or resize it (administrators only)",
    description = "svs extension. One change per call. `{\"state\": \"Draining\"}`: the medium takes no new slice from now on, and one `media_drain` job moves every slice off it (answered as the job; asked again while it runs, the same job) with the mover a resize uses, keeping each volume's placement rules; the job holds one volume at a time (its nine blocked operations answer 409 naming the job meanwhile), and pause, rate, the movement window and cancel apply. Slices that cannot move (a lost copy, no medium with room) are listed and the job ends in Error once the rest moved; asking again moves what is left. With `?dryrun=true` it answers the plan, changing nothing. A drained medium stays `Draining` (empty, `status: Draining`) until `{\"state\": \"Ready\"}` (409 while its drain job runs). `{\"state\": \"Failed\"}` (any medium): every slice on the medium is lost at once; volumes with another copy of each column turn `Degraded` and keep serving, the others `Failed` (I/O on the lost ranges answers EIO). Rebuild with `POST /volumes/{volume}/recover`. A failed medium does not come back, except a storage node's (`managedby: node`) that failed because its node went Offline or stopped listing it: it comes back when the node lists it again, with every copy it held still lost until a recovery rebuilds it elsewhere (svs starts one). `{\"size\": N}` (GiB; media added through the API only, `managedby: api`): grows the medium, or shrinks it down to what is in use on it (slices, snapshots, running jobs' bookings), else 409. A medium listed in the configuration file, or registered by a storage node, answers 409: change it there.",
    params(
        ("media" = String, Path, description = "The medium's id"),
        ("dryrun" = Option<bool>, Query, description = "With `Draining`: answer the plan, change nothing"),
    ),
    request_body = MediaModifyRequest,
    security(("storage.io-authorizer" = [])),
    responses(AdminOnly, BodyLimits,
        (status = 200, description = "The medium, changed; a drain's job; or with dryrun a drain's plan", body = MediumAnswer),
        (status = 400, description = "Malformed body, another state, both fields, or dryrun without Draining", body = ErrorBody),
        (status = 404, description = "No such medium", body = ErrorBody),
        (status = 409, description = "Shrinking below what is in use, a failed medium, a medium of the configuration file, or Ready while its drain runs", body = ErrorBody),
    ),
)]
pub async fn update_medium(
    State(app): State<AppState>,
    admin: Administrator,
    Path(id): Path<String>,
    ParsedQuery(query): ParsedQuery<DryRunQuery>,
    Parsed(request): Parsed<ModifyMedium>,
) -> ApiResult<MediumAnswer> {
    if query.dryrun && request != ModifyMedium::Drain {
        return Err(bad("dryrun is only for {\"state\": \"Draining\"}"));
    }
    if request == ModifyMedium::Drain {
        if query.dryrun {
            let preview = app.preview_drain(&admin, &id).await?;
            return Ok(Json(MediumAnswer::Plan(relocation_plan(&preview))));
        }
        let drain = app.drain_medium(&admin, &id).await?;
        let job = drain.job_id;
        let message = if drain.started {
            format!("Medium '{id}' is draining: follow job {job} with GET /jobs/{job}")
        } else {
            format!("Medium '{id}' is already draining under job {job}")
        };
        return Ok(Json(MediumAnswer::Started(views::started(
            &message,
            &Started {
                job_id: job,
                object_id: id,
            },
        ))));
    }
    let medium = app.modify_medium(&admin, &id, &request).await?;
    Ok(Json(MediumAnswer::Medium(Box::new(medium_view(
        &app.report_medium(medium).await,
    )))))
}

/// `PATCH /media/{media}`: the medium; a drain's job; or a drain's plan.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum MediumAnswer {
    Medium(Box<MediumView>),
    Started(JobStarted),
    Plan(RelocationPlanView),
}

#[utoipa::path(
    post, path = "/media", tag = "Media", operation_id = "MediaCreate",
    summary = "Add a medium (administrators only)",
    description = "svs extension. The directory (`media`) is created if missing and must be writable; the planner places slices on the medium at once. The medium is API-managed (`managedby: api`): kept in the database across restarts, changed and removed through the API. Its node is added (API-managed, no address) when it does not exist yet.",
    request_body = MediaCreateRequest,
    security(("storage.io-authorizer" = [])),
    responses(AdminOnly, BodyLimits,
        (status = 201, description = "The new medium", body = MediumView),
        (status = 400, description = "Malformed body, bad name or size, or a directory that is not absolute or cannot be created or written", body = ErrorBody),
        (status = 409, description = "A medium of that id exists, another medium uses the directory, the node is in another zone, or the service runs with `storage_nodes_only`", body = ErrorBody),
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
        Json(medium_view(&app.report_medium(medium).await)),
    ))
}

#[utoipa::path(
    delete, path = "/media/{media}", tag = "Media", operation_id = "MediaDelete",
    summary = "Remove a medium (administrators only)",
    description = "Refused with 409 while the medium holds slices (the message names their volumes) or running jobs booked space on it, and for a medium listed in the configuration file (remove it there). The directory stays on disk; svs removes only slice files of its own still in it. The reference's `force` is not supported.",
    params(("media" = String, Path, description = "The medium's id")),
    security(("storage.io-authorizer" = [])),
    responses(AdminOnly,
        (status = 200, description = "Removed", body = Done),
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

impl FromBody for ModifyMedium {
    /// `{"state": "Failed"}` or `{"size": N}`: one change per call.
    fn from_body(body: &Body) -> ParseResult<ModifyMedium> {
        only_fields(body, &["state", "size"])?;
        let size = opt_uint(body, "size", 1, MAX_MEDIUM_GIB)?;
        match (body.contains_key("state"), size) {
            (true, Some(_)) => Err(bad("give either state or size, not both")),
            (false, Some(size)) => Ok(ModifyMedium::Resize(size)),
            (false, None) => Err(bad("state or size is required")),
            (true, None) => match req_str(body, "state")? {
                "Failed" => Ok(ModifyMedium::Fail),
                "Draining" => Ok(ModifyMedium::Drain),
                "Ready" => Ok(ModifyMedium::Ready),
                _ => Err(bad(
                    "state must be \"Failed\", \"Draining\" or \"Ready\" (a failed medium does not come back)",
                )),
            },
        }
    }
}

impl FromBody for CreateMedium {
    /// `{"mediaid": "m7", "node": "node-d", "zone": "zone-d", "media":
    /// "/srv/disk7", "size": 100}`: the fields as `GET /media` shows them
    /// (`media` is the directory, `size` GiB).
    fn from_body(body: &Body) -> ParseResult<CreateMedium> {
        let request: MediaCreateRequest = typed(body)?;
        Ok(CreateMedium {
            id: request.mediaid,
            node: request.node,
            zone: request.zone,
            directory: request.media,
            size: request.size,
        })
    }
}

pub fn medium_view(report: &MediumReport) -> MediumView {
    let m = &report.usage;
    MediumView {
        mediaid: m.record.medium.id.clone(),
        media: m.record.directory.clone(),
        model: "svs sparse-file medium".into(),
        bus: "file".into(),
        location: m.record.directory.clone(),
        node: m.record.medium.node.clone(),
        zone: m.record.medium.zone.clone(),
        size: m.record.medium.size,
        // Nothing more goes on a failed medium. A draining one says so in
        // `status`; its free space is still what it is (a console shows its
        // use going down).
        freesize: if m.failed { 0 } else { m.free() },
        writtenbytes: report.written_bytes,
        allocatedsize: m.allocated,
        bookedsize: m.reserved,
        snapshotsize: m.snapshot_gib(),
        snapshotbytes: m.snapshot_bytes,
        volumescount: m.volumes_count,
        sectorsize: 4096,
        sed: false,
        assignment: "svs".into(),
        state: if m.failed { "Failed" } else { "Online" }.into(),
        status: if m.failed {
            "Failed"
        } else if m.draining {
            "Draining"
        } else {
            "Ready"
        }
        .into(),
        progress: 100,
        capacitygroup: String::new(),
        managedby: m.managed_by.as_str().into(),
    }
}
