//! Job routes: the tenant's jobs, listed and read.

use super::body::typed;
use super::extract::Parsed;
use super::extract::ParsedQuery;
use super::parse::{bad, Body, ParseResult};
use super::requests::{page_number, query_bool, FromBody, FromQuery};
use super::views::{self, BodyLimits, ErrorBody, SignedIn};
use super::{ApiResult, AppState};
use axum::extract::{Path, State};
use axum::Json;
use serde_json::Value;
use std::collections::BTreeMap;
use svs_control::service::commands::ListJobs;
use svs_control::service::format_ms;
use svs_control::service::jobs::{JobRemoval, SliceOutcome};
use svs_control::service::Caller;
use svs_domain::JobState;
use svs_store::{Job, JobSteering};
use svs_wire::requests::JobModifyRequest;
pub use svs_wire::views::{JobView, SliceOutcomeView};

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
    responses(SignedIn,
        (status = 200, description = "Jobs", body = Vec<JobView>),
        (status = 400, description = "Malformed query", body = ErrorBody),
    ),
)]
pub async fn list_jobs(
    State(app): State<AppState>,
    caller: Caller,
    ParsedQuery(request): ParsedQuery<ListJobs>,
) -> ApiResult<Vec<JobView>> {
    Ok(Json(views::list(
        &app.list_jobs(&caller, &request).await?,
        job,
    )))
}

#[utoipa::path(
    get, path = "/jobs/{job}", tag = "Jobs", operation_id = "JobGet",
    summary = "Get a job",
    params(("job" = String, Path, description = "The job's id")),
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "The job", body = JobView),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 404, description = "No such job (or another tenant's)", body = ErrorBody),
    ),
)]
pub async fn get_job(
    State(app): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<JobView> {
    let found = app.get_job(&caller, &id).await?;
    let slices = app.job_slices(&found).await?;
    let moves_slices = found.kind().is_some_and(|k| k.steerable());
    Ok(Json(JobView {
        slices: moves_slices.then(|| slices.iter().map(slice_view).collect()),
        ..job(&found)
    }))
}

fn slice_view(o: &SliceOutcome) -> SliceOutcomeView {
    SliceOutcomeView {
        slice: o.slice.clone(),
        from: o.from.clone(),
        to: o.to.clone(),
        outcome: o.outcome.to_string(),
        cause: o.cause.clone(),
        failures: o.failures,
    }
}

#[utoipa::path(
    delete, path = "/jobs/{job}", tag = "Jobs", operation_id = "JobDelete",
    summary = "Cancel a pending or running job, or remove the record of one that ended",
    description = "A volume's creation, resize (with its data movement) or recovery can be \
        cancelled while it is pending or running: the job stops at its next safe point, undoes \
        what it did (a movement's copies are removed and every moved slice goes back; the volume \
        keeps its size) and ends in `Error` with status `Cancelled`. A resize past its point of \
        no return (growing its slices) finishes instead: 409. On a job that ended, the record \
        is removed.",
    params(("job" = String, Path, description = "The job's id")),
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "Cancel under way, or record removed", body = views::Done),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 404, description = "No such job (or another tenant's)", body = ErrorBody),
        (status = 409, description = "The job cannot be cancelled (its kind, or past its point of no return)", body = ErrorBody),
    ),
)]
pub async fn delete_job(
    State(app): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<views::Done> {
    let message = match app.remove_job(&caller, &id).await? {
        JobRemoval::Cancelling => {
            format!("Job {id} is being cancelled: follow it with GET /jobs/{id}")
        }
        JobRemoval::Deleted => format!("Job {id} deleted"),
    };
    Ok(Json(views::done(&message, &id)))
}

#[utoipa::path(
    patch, path = "/jobs/{job}", tag = "Jobs", operation_id = "JobModify",
    summary = "Pause or resume a data movement or a recovery, or set its copy rate",
    description = "svs extension. `{\"paused\": true}`: the job's copies stop at their last \
        checkpoint (writes to the volume go on; the nine blocked operations stay blocked and \
        their 409 says the job is paused); `{\"paused\": false}` resumes them from there. \
        `{\"movementrate\": \"64 MiB\"}` (or bytes per second as a number; `\"0\"`: \
        unthrottled; `null`: back to the service's `movement_rate`) sets the job's own copy \
        rate; a running copy goes on at it from its last checkpoint. Only a \
        `volume_modify_extend` or a `volume_recovery` that has not ended.",
    params(("job" = String, Path, description = "The job's id")),
    request_body = JobModifyRequest,
    security(("storage.io-authorizer" = [])),
    responses(SignedIn, BodyLimits,
        (status = 200, description = "The job, as it is now", body = JobView),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 404, description = "No such job (or another tenant's)", body = ErrorBody),
        (status = 409, description = "Another kind of job, one that ended, is being cancelled or is past its point of no return", body = ErrorBody),
    ),
)]
pub async fn modify_job(
    State(app): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Parsed(request): Parsed<JobSteering>,
) -> ApiResult<JobView> {
    Ok(Json(job(&app.steer_job(&caller, &id, &request).await?)))
}

impl FromBody for JobSteering {
    fn from_body(body: &Body) -> ParseResult<JobSteering> {
        let JobModifyRequest {
            paused,
            movementrate,
        } = typed(body)?;
        let movement_rate = match movementrate {
            None => None,
            Some(Value::Null) => Some(None),
            Some(Value::Number(n)) => Some(Some(n.as_u64().ok_or_else(rate_error)?)),
            Some(Value::String(s)) => Some(Some(
                s.trim()
                    .parse::<bytesize::ByteSize>()
                    .map_err(|_| rate_error())?
                    .as_u64(),
            )),
            Some(_) => return Err(rate_error()),
        };
        Ok(JobSteering {
            paused,
            movement_rate,
        })
    }
}

fn rate_error() -> super::ApiError {
    bad("movementrate must be a rate like \"64 MiB\" (per second), a number of bytes per second, \"0\" (unthrottled) or null (the service's movement_rate)")
}

impl FromQuery for ListJobs {
    fn from_query(query: &BTreeMap<String, String>) -> ParseResult<ListJobs> {
        // An empty filter (`?type=`) filters nothing.
        let non_empty = |key: &str| query.get(key).filter(|v| !v.is_empty()).cloned();
        // The reference's `internal` (svs has no internal jobs): checked only.
        query_bool(query, "internal")?;
        let state = match non_empty("state") {
            None => None,
            Some(s) => Some(
                JobState::parse(&s)
                    .ok_or_else(|| bad("state must be one of Pending, Running, Done, Error"))?,
            ),
        };
        Ok(ListJobs {
            kind: non_empty("type"),
            object: non_empty("object"),
            state,
            // Pages beyond this would overflow the row offset.
            page: page_number(query, "page", 1, u32::MAX / ListJobs::MAX_COUNT)?,
            count: page_number(query, "count", ListJobs::DEFAULT_COUNT, ListJobs::MAX_COUNT)?,
        })
    }
}

pub fn job(j: &Job) -> JobView {
    JobView {
        id: j.id,
        kind: j.kind.clone(),
        object: j.object.clone(),
        objectname: j.object_name.clone(),
        args: j.args.clone(),
        state: j.state.as_str().to_string(),
        status: j.status.clone(),
        progress: j.progress,
        starttime: j.starttime_ms.map(format_ms).unwrap_or_default(),
        endtime: j.endtime_ms.map(format_ms).unwrap_or_default(),
        username: j.username.clone(),
        useremail: j.useremail.clone(),
        details: j.details.clone(),
        cancelrequested: j.cancel_requested,
        paused: j.paused,
        movementrate: j.movement_rate,
        slices: None,
    }
}
