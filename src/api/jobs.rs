//! Job routes: the tenant's jobs, listed and read.

use super::extract::ParsedQuery;
use super::parse::{bad, ParseResult};
use super::requests::{page_number, query_bool, FromQuery};
use super::views::{self, ErrorBody};
use super::{ApiResult, AppState};
use crate::service::commands::ListJobs;
use crate::service::format_ms;
use crate::service::Caller;
use axum::extract::{Path, State};
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use svs_domain::JobState;
use svs_store::Job;
use utoipa::ToSchema;

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
        job,
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
    Ok(Json(job(&app.get_job(&caller, &id).await?)))
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

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Job)]
pub struct JobView {
    pub id: i64,
    /// `volume_create`, `volume_delete`, `volume_modify_extend`,
    /// `volume_recovery`, `volume_grow_filesystem`, `attachment_create`,
    /// `attachment_delete`, `attachment_modify`, `snapshot_*`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The object the job works on (a volume id).
    pub object: String,
    /// svs extension: the name of that volume, kept after it is deleted.
    pub objectname: String,
    /// The job's arguments.
    #[schema(value_type = Object)]
    pub args: Value,
    /// `Pending`, `Running`, `Done` or `Error`.
    pub state: &'static str,
    pub status: String,
    /// 0–100.
    pub progress: u8,
    /// RFC 3339, `""` before the job starts.
    pub starttime: String,
    /// RFC 3339, `""` until the job ends.
    pub endtime: String,
    pub username: String,
    pub useremail: String,
    /// The messages the job reported, oldest first.
    pub details: Vec<String>,
}

pub fn job(j: &Job) -> JobView {
    JobView {
        id: j.id,
        kind: j.kind.clone(),
        object: j.object.clone(),
        objectname: j.object_name.clone(),
        args: j.args.clone(),
        state: j.state.as_str(),
        status: j.status.clone(),
        progress: j.progress,
        starttime: j.starttime_ms.map(format_ms).unwrap_or_default(),
        endtime: j.endtime_ms.map(format_ms).unwrap_or_default(),
        username: j.username.clone(),
        useremail: j.useremail.clone(),
        details: j.details.clone(),
    }
}
