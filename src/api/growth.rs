//! The route that grows a volume's filesystem again after a growth failed
//! (svs extension).

use super::views::{ErrorBody, JobStarted};
use super::{views, ApiError, AppState};
use crate::service::Caller;
use axum::extract::{Path, State};
use axum::Json;

#[utoipa::path(
    post, path = "/volumes/{volume}/grow-filesystem", tag = "Volumes", operation_id = "VolumeGrowFilesystem",
    summary = "Grow a volume's filesystem again to fill the volume",
    description = "svs extension, for a `file` volume whose filesystem svs made. After a growth failed, the volume shows `filesystemsize` below its `size` and why in `filesystemerror`; this answers at once with a `volume_grow_filesystem` job that tries again: the agents of the nodes that hold the volume mounted read-write grow it (the job ends with their error at once if they fail again), or svs grows it when nothing has the volume attached. A volume attached without an agent holding it mounted read-write is grown on its host (or detached first): the job says so in `Error`. `Done` at once when the filesystem already fills the volume. No body.",
    params(("volume" = String, Path, description = "The volume's name or id")),
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "Growth started", body = JobStarted),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such volume", body = ErrorBody),
        (status = 409, description = "No filesystem made by svs, not Ready, or another job runs", body = ErrorBody),
    ),
)]
pub async fn grow_filesystem(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<JobStarted>, ApiError> {
    let started = app.grow_volume_filesystem(&caller, &name).await?;
    Ok(Json(views::started("Filesystem growth started", &started)))
}
