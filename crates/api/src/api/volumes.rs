//! Volume routes: list, create, read, resize, delete, slices, recovery and
//! filesystem growth (svs extensions), with their bodies and views.

use super::extract::{Parsed, ParsedQuery};
use super::parse::{bad, opt_bool, opt_str, req_gib, req_str, req_uint, Body, ParseResult};
use super::plans::{self, CreateAnswer, PlanQuery, ResizeAnswer};
use super::requests::{force_query, opt_non_empty, page_number, query_bool, FromBody, FromQuery};
use super::views::{self, non_empty, BodyLimits, ErrorBody, JobStarted, SignedIn};
use super::{ApiError, ApiResult, AppState};
use axum::extract::{Path, State};
use axum::Json;
use serde_json::Value;
use std::collections::BTreeMap;
use svs_control::service::attributes::{Filesystem, Flavor, StoredField, VolumeAttributes};
use svs_control::service::commands::{
    CloneFrom, CreateVolume, DeleteVolume, FixedVolumeField, ResizeVolume,
};
use svs_control::service::volume_facts::VolumeFacts;
use svs_control::service::volumes::volume_zone;
use svs_control::service::Caller;
use svs_domain::{ResourceName, VolumeType, MAX_VOLUME_GIB, MIN_VOLUME_GIB};
use svs_store::{Page, SliceRow, Volume};
use svs_wire::requests::{VolumeCreateRequest, VolumeModifyRequest};
use svs_wire::views::SliceView;
pub use svs_wire::views::VolumeView;

#[utoipa::path(
    post, path = "/volumes/{volume}/recover", tag = "Volumes", operation_id = "VolumeRecoverInitiate",
    summary = "Rebuild the copies a volume lost",
    description = "Answers at once with the `volume_recovery` job, which rebuilds each slice lost on a failed medium from a healthy copy, on a medium chosen by the placement rules, paced by `movement_rate`; the volume's `volumerecoveryjob` names it while it runs. It ends `Error` when no medium can take a copy or a column has no healthy copy left, and `Done` at once when nothing was lost. 409 (not in the reference) while a data movement or another job runs.",
    params(("volume" = String, Path, description = "The volume's name or id")),
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "Recovery started", body = JobStarted),
        (status = 400, description = "Malformed path", body = ErrorBody),
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
    get, path = "/volumes", tag = "Volumes", operation_id = "VolumesList",
    summary = "List the tenant's volumes",
    description = "Every volume by name, or with `page` or `count` (svs extension) one page of them.",
    params(
        ("capacity" = Option<bool>, Query, description = "Accepted for compatibility; the list is the same"),
        ("page" = Option<u32>, Query, minimum = 1, maximum = 4294967, description = "1-based page (svs extension); without page and count: every volume"),
        ("count" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "Volumes per page (svs extension; default 100 when page is given)"),
    ),
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "Volumes", body = Vec<VolumeView>),
        (status = 400, description = "Malformed query", body = ErrorBody),
    ),
)]
pub async fn list_volumes(
    State(app): State<AppState>,
    caller: Caller,
    ParsedQuery(query): ParsedQuery<VolumeListQuery>,
) -> ApiResult<Vec<VolumeView>> {
    let mut shown = Vec::new();
    for v in app.list_volumes(&caller, query.page).await? {
        shown.push(volume(&v, &app.volume_facts(&v).await?));
    }
    Ok(Json(shown))
}

#[utoipa::path(
    post, path = "/volumes", tag = "Volumes", operation_id = "VolumeCreate",
    summary = "Create a volume",
    description = "Answers at once with the `volume_create` job. `type` may be left out (`block`). A name in use is a 409. svs extensions: `?dryrun=true` answers where each slice would be placed (a `CreatePlan`), or the refusal the job would end with, after the same checks, changing nothing; `?plan=<token>` (the dry run's `plan`) makes the creation place the volume so, or be refused with 409 naming what changed.",
    params(
        ("dryrun" = Option<bool>, Query, description = "Answer the placement, change nothing"),
        ("plan" = Option<String>, Query, description = "A dry run's plan token: that placement or 409"),
    ),
    request_body = VolumeCreateRequest,
    security(("storage.io-authorizer" = [])),
    responses(SignedIn, BodyLimits,
        (status = 200, description = "Creation started (or, with dryrun, its placement)", body = CreateAnswer),
        (status = 400, description = "Invalid volume, unknown policy or zone, or a malformed plan token", body = ErrorBody),
        (status = 409, description = "A volume of that name exists, or the placement changed since its dry run", body = ErrorBody),
    ),
)]
pub async fn create_volume(
    State(app): State<AppState>,
    caller: Caller,
    ParsedQuery(query): ParsedQuery<PlanQuery>,
    Parsed(request): Parsed<CreateVolume>,
) -> ApiResult<CreateAnswer> {
    if query.dryrun {
        let preview = app.preview_create(&caller, &request).await?;
        let plan = plans::create_plan(request.name.as_str(), request.size, &preview);
        return Ok(Json(CreateAnswer::Plan(plan)));
    }
    let started = app
        .create_volume(&caller, &request, query.plan.as_ref())
        .await?;
    let started = views::started("Volume creation started", &started);
    Ok(Json(CreateAnswer::Started(started)))
}

#[utoipa::path(
    get, path = "/volumes/{volume}", tag = "Volumes", operation_id = "VolumeGet",
    summary = "Get a volume",
    params(("volume" = String, Path, description = "The volume's name or id")),
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "The volume", body = VolumeView),
        (status = 400, description = "Malformed path", body = ErrorBody),
        (status = 404, description = "No such volume (or another tenant's)", body = ErrorBody),
    ),
)]
pub async fn get_volume(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult<VolumeView> {
    let v = app.get_volume(&caller, &name).await?;
    Ok(Json(volume(&v, &app.volume_facts(&v).await?)))
}

#[utoipa::path(
    patch, path = "/volumes/{volume}", tag = "Volumes", operation_id = "VolumeModify",
    summary = "Resize a volume",
    description = "`size` must be a whole number of GiB, greater than the current size and at most 10× it (400 naming the bound). Answers at once with the `volume_modify_extend` job. svs answers 409 (not in the reference) while another job works on the volume or a data movement runs. svs extensions: `?dryrun=true` answers the plan (a `ResizePlan`: in place, each slice that would move with its bytes of data, or the refusal the job would end with, and the time the moves take at `movement_rate`) after the same checks, changing nothing; `?plan=<token>` (the dry run's `plan`) makes the resize carry out that plan, or be refused with 409 naming what changed.",
    params(
        ("volume" = String, Path, description = "The volume's name or id"),
        ("dryrun" = Option<bool>, Query, description = "Answer the plan, change nothing"),
        ("plan" = Option<String>, Query, description = "A dry run's plan token: that plan or 409"),
    ),
    request_body = VolumeModifyRequest,
    security(("storage.io-authorizer" = [])),
    responses(SignedIn, BodyLimits,
        (status = 200, description = "Resize started (or, with dryrun, its plan)", body = ResizeAnswer),
        (status = 400, description = "Invalid size, a changed fixed field, or a malformed plan token", body = ErrorBody),
        (status = 404, description = "No such volume", body = ErrorBody),
        (status = 409, description = "Another job works on the volume, or the plan changed since its dry run", body = ErrorBody),
    ),
)]
pub async fn resize_volume(
    State(app): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    ParsedQuery(query): ParsedQuery<PlanQuery>,
    Parsed(request): Parsed<ResizeVolume>,
) -> ApiResult<ResizeAnswer> {
    if query.dryrun {
        let (volume, preview) = app.preview_resize(&caller, &name, &request).await?;
        let plan = plans::resize_plan(&volume, request.size, &preview);
        return Ok(Json(ResizeAnswer::Plan(plan)));
    }
    let started = app
        .resize_volume(&caller, &name, &request, query.plan.as_ref())
        .await?;
    let started = views::started("Volume resize started", &started);
    Ok(Json(ResizeAnswer::Started(started)))
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
    responses(SignedIn,
        (status = 200, description = "Deletion started", body = JobStarted),
        (status = 400, description = "Malformed query", body = ErrorBody),
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
    responses(SignedIn,
        (status = 200, description = "Slices", body = Vec<SliceView>),
        (status = 400, description = "Malformed path", body = ErrorBody),
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
        slice,
    )))
}

#[utoipa::path(
    post, path = "/volumes/{volume}/grow-filesystem", tag = "Volumes", operation_id = "VolumeGrowFilesystem",
    summary = "Grow a volume's filesystem again to fill the volume",
    description = "svs extension, for a `file` volume whose filesystem svs made. After a growth failed, the volume shows `filesystemsize` below its `size` and why in `filesystemerror`; this answers at once with a `volume_grow_filesystem` job that tries again: the agents of the nodes that hold the volume mounted read-write grow it (the job ends with their error at once if they fail again), or svs grows it when nothing has the volume attached. A volume attached without an agent holding it mounted read-write is grown on its host (or detached first): the job says so in `Error`. `Done` at once when the filesystem already fills the volume. No body.",
    params(("volume" = String, Path, description = "The volume's name or id")),
    security(("storage.io-authorizer" = [])),
    responses(SignedIn,
        (status = 200, description = "Growth started", body = JobStarted),
        (status = 400, description = "Malformed path", body = ErrorBody),
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

impl FromBody for CreateVolume {
    fn from_body(body: &Body) -> ParseResult<CreateVolume> {
        let name = ResourceName::parse("volume", req_str(body, "name")?).map_err(bad)?;
        let kind = match opt_non_empty(body, "type")? {
            None => VolumeType::Block,
            Some(t) => {
                VolumeType::parse(t).ok_or_else(|| bad("type must be \"block\" or \"file\""))?
            }
        };
        let size = req_uint(body, "size", MIN_VOLUME_GIB, MAX_VOLUME_GIB)?;
        let policy = req_str(body, "policy")?.to_string();
        let zone = opt_non_empty(body, "zone")?.map(str::to_string);
        let clone_from = match (
            opt_non_empty(body, "contentvolume")?,
            opt_non_empty(body, "contentsnapshot")?,
        ) {
            (None, None) => None,
            (Some(volume), Some(snapshot)) => Some(CloneFrom {
                volume: volume.to_string(),
                snapshot: snapshot.to_string(),
            }),
            (Some(_), None) => {
                return Err(bad(
                    "contentvolume: creating a volume from a whole volume is not supported; \
                     name one of its snapshots in contentsnapshot",
                ))
            }
            (None, Some(_)) => {
                return Err(bad(
                    "contentsnapshot: name the snapshot's volume in contentvolume",
                ))
            }
        };
        let mut attributes = VolumeAttributes::default();
        attributes.content = clone_from
            .as_ref()
            .map(|c| (c.volume.clone(), c.snapshot.clone()));
        for field in StoredField::ALL {
            if let Some(v) = opt_str(body, field.wire_name())? {
                attributes.set(field, v);
            }
        }
        // Means nothing at creation, but must still be a boolean.
        opt_bool(body, "allowdatamovement")?;
        attributes.flavor = match opt_non_empty(body, "flavor")? {
            None => None,
            Some(f) => Some(
                Flavor::parse(f)
                    .ok_or_else(|| bad("flavor must be \"regular\" or \"filedirect\""))?,
            ),
        };
        attributes.filesystem = match (kind, opt_non_empty(body, "filesystem")?) {
            (VolumeType::Block, None) => None,
            (VolumeType::Block, Some(_)) => {
                return Err(bad("filesystem: only a volume of type \"file\" has one"))
            }
            (VolumeType::File, None) => Some(Filesystem::default()),
            (VolumeType::File, Some(f)) => Some(
                Filesystem::parse(f)
                    .ok_or_else(|| bad("filesystem must be \"ext4\" or \"xfs\""))?,
            ),
        };
        Ok(CreateVolume {
            name,
            kind,
            size,
            policy,
            zone,
            attributes,
            clone_from,
        })
    }
}

impl FromBody for ResizeVolume {
    /// `{"size", "allowdatamovement"}`, or a whole Volume object: its
    /// read-only fields are ignored, its writable ones are kept for the
    /// service to compare with the volume (null and `""` mean "not sent").
    fn from_body(body: &Body) -> ParseResult<ResizeVolume> {
        let mut repeated = Vec::new();
        for field in FixedVolumeField::ALL {
            let key = field.wire_name();
            match body.get(key) {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) if s.is_empty() => {}
                Some(Value::String(s)) => repeated.push((field, s.clone())),
                // Volume fields are strings: anything else is a change.
                Some(_) => {
                    return Err(bad(format!(
                        "{key} cannot be changed: only size and allowdatamovement can be modified"
                    )))
                }
            }
        }
        Ok(ResizeVolume {
            size: req_gib(body, "size")?,
            allow_data_movement: opt_bool(body, "allowdatamovement")?.unwrap_or(false),
            repeated,
        })
    }
}

/// `GET /volumes`: `capacity` (reference) is accepted and checked; the
/// list is the same either way.
#[derive(Debug, Clone, Copy, Default)]
pub struct VolumeListQuery {
    /// None: every volume (the reference has no paging here).
    pub page: Option<Page>,
}

impl FromQuery for VolumeListQuery {
    fn from_query(query: &BTreeMap<String, String>) -> ParseResult<VolumeListQuery> {
        query_bool(query, "capacity")?;
        let page = if query.contains_key("page") || query.contains_key("count") {
            Some(Page {
                page: page_number(query, "page", 1, u32::MAX / VOLUMES_MAX_COUNT)?,
                count: page_number(query, "count", VOLUMES_DEFAULT_COUNT, VOLUMES_MAX_COUNT)?,
            })
        } else {
            None
        };
        Ok(VolumeListQuery { page })
    }
}

/// `GET /volumes` page size when only `page` is given, and its maximum.
const VOLUMES_DEFAULT_COUNT: u32 = 100;
const VOLUMES_MAX_COUNT: u32 = 1000;

impl FromQuery for DeleteVolume {
    fn from_query(query: &BTreeMap<String, String>) -> ParseResult<DeleteVolume> {
        Ok(DeleteVolume {
            force: force_query(query)?,
        })
    }
}

/// What a volume shows as its state: its lifecycle state, or its health
/// when it lost slices.
fn volume_state(v: &Volume) -> &'static str {
    match v.state {
        svs_domain::VolumeState::Ready if v.lost_columns > 0 => "Failed",
        svs_domain::VolumeState::Ready if v.lost_slices > 0 => "Degraded",
        state => state.as_str(),
    }
}

pub fn volume(v: &Volume, facts: &VolumeFacts) -> VolumeView {
    let attributes = VolumeAttributes::from_record(&v.attributes);
    let stored = |field: StoredField| attributes.get(field).to_string();
    let optional = |field: StoredField| non_empty(attributes.get(field));
    let (status, progress) = match &v.job {
        Some((_, progress, status)) => (status.clone(), *progress),
        None => ("Online".to_string(), 100),
    };
    VolumeView {
        name: v.name.clone(),
        volumeid: v.id.clone(),
        kind: v.kind.as_str().into(),
        contentvolume: attributes.content().0.to_string(),
        contentsnapshot: attributes.content().1.to_string(),
        size: v.size,
        maxsize: v.size.saturating_mul(10),
        policy: v.policy.clone(),
        consistencygroup: stored(StoredField::ConsistencyGroup),
        node: v.first_node.clone().unwrap_or_default(),
        zone: non_empty(volume_zone(v)),
        zones: facts.zones.clone(),
        writtenbytes: facts.written_bytes,
        zonereplica: stored(StoredField::ZoneReplica),
        volumegroupname: optional(StoredField::VolumeGroupName),
        volumegroupid: v.id.clone(),
        replicationnode: stored(StoredField::ReplicationNode),
        replicationvolumegroupname: optional(StoredField::ReplicationVolumeGroupName),
        state: volume_state(v).into(),
        status,
        progress,
        capacitygroup: optional(StoredField::CapacityGroup),
        throttlingscheme: optional(StoredField::ThrottlingScheme),
        allowdatamovement: false,
        flavor: attributes.flavor().as_str().into(),
        filesystem: attributes.filesystem.map(|f| f.as_str().into()),
        filesystemprovisioned: attributes.filesystem_provisioned,
        filesystemsize: (attributes.filesystem.is_some() && attributes.filesystem_provisioned)
            .then(|| v.filesystem_size.unwrap_or(v.size).min(v.size)),
        filesystemerror: v
            .filesystem_error
            .clone()
            .filter(|_| v.filesystem_size.is_some_and(|f| f < v.size)),
        volumerecoveryjob: v.recovery_job.map(|j| j.to_string()),
    }
}

pub fn slice(row: &SliceRow) -> SliceView {
    SliceView {
        sliceid: row.slice.id,
        name: format!("c{}-k{}", row.slice.copy, row.slice.column),
        copy: row.slice.copy,
        column: row.slice.column,
        media: row.slice.medium.clone(),
        node: row.node.clone(),
        zone: row.zone.clone(),
        size: row.slice.size,
        health: if row.lost { "Lost" } else { "Healthy" }.into(),
        stalegeneration: row.stale_generation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Map, Value};
    use svs_domain::{Resiliency, VolumeState, VolumeType};
    use svs_store::Volume;

    fn volume_record() -> Volume {
        let mut attributes = Map::new();
        attributes.insert("capacitygroup".into(), json!("cg"));
        Volume {
            id: "id-1".into(),
            tenant_id: 1,
            name: "data".into(),
            kind: VolumeType::Block,
            size: 10,
            policy: "gold".into(),
            resiliency: Resiliency::default(),
            zone: None,
            attributes,
            state: VolumeState::Ready,
            job: None,
            first_node: Some("node-a".into()),
            first_zone: Some("zone-a".into()),
            lost_slices: 0,
            lost_columns: 0,
            recovery_job: None,
            filesystem_size: None,
            filesystem_error: None,
            created_ms: 0,
        }
    }

    #[test]
    fn a_volume_that_lost_slices_shows_its_health_as_its_state() {
        let mut v = volume_record();
        assert_eq!(
            json_of(&volume(&v, &VolumeFacts::default()))["state"],
            "Ready"
        );
        v.lost_slices = 1;
        v.recovery_job = Some(7);
        let shown = json_of(&volume(&v, &VolumeFacts::default()));
        assert_eq!(shown["state"], "Degraded");
        assert_eq!(shown["volumerecoveryjob"], "7");
        v.lost_columns = 1;
        assert_eq!(
            json_of(&volume(&v, &VolumeFacts::default()))["state"],
            "Failed"
        );
        v.state = VolumeState::Deleting;
        assert_eq!(
            json_of(&volume(&v, &VolumeFacts::default()))["state"],
            "Deleting"
        );
    }

    fn json_of(v: &VolumeView) -> Value {
        serde_json::to_value(v).expect("a volume serializes")
    }

    #[test]
    fn a_volume_shows_its_stored_fields_first_zone_and_default_flavor() {
        let v = json_of(&volume(&volume_record(), &VolumeFacts::default()));
        assert_eq!(v["capacitygroup"], "cg");
        assert_eq!(v["consistencygroup"], "");
        assert_eq!(v["zone"], "zone-a");
        assert_eq!(v["node"], "node-a");
        assert_eq!(v["flavor"], "regular");
        assert_eq!(v["maxsize"], 100);
        assert_eq!(
            (v["status"].clone(), v["progress"].clone()),
            (json!("Online"), json!(100))
        );
    }

    #[test]
    fn a_volume_names_every_zone_of_its_copies_beside_its_first_zone() {
        let facts = VolumeFacts {
            zones: vec!["zone-a".into(), "zone-b".into()],
            written_bytes: Some(4096),
        };
        let v = json_of(&volume(&volume_record(), &facts));
        assert_eq!(v["zone"], "zone-a");
        assert_eq!(v["zones"], json!(["zone-a", "zone-b"]));
        assert_eq!(v["writtenbytes"], 4096);
        let unmeasured = json_of(&volume(&volume_record(), &VolumeFacts::default()));
        assert_eq!(unmeasured["writtenbytes"], Value::Null);
    }

    #[test]
    fn unset_fields_the_reference_requires_non_empty_are_omitted() {
        let mut record = volume_record();
        record.attributes = Map::new();
        record.first_zone = None;
        let v = json_of(&volume(&record, &VolumeFacts::default()));
        for key in [
            "capacitygroup",
            "volumegroupname",
            "replicationvolumegroupname",
            "replicationvolumegroupid",
            "volumerecoveryjob",
            "throttlingscheme",
            "zone",
        ] {
            assert!(v.get(key).is_none(), "{key} in {v}");
        }
        // Fields the reference allows empty stay, as before.
        assert_eq!(v["consistencygroup"], "");
        assert_eq!(v["contentvolume"], "");
    }

    #[test]
    fn a_volume_shows_what_a_resize_compares_its_fixed_fields_with() {
        use svs_control::service::commands::FixedVolumeField;
        use svs_control::service::volumes::fixed_field_value;
        let mut record = volume_record();
        record
            .attributes
            .insert("flavor".into(), json!("filedirect"));
        for record in [volume_record(), record] {
            let shown = json_of(&volume(&record, &VolumeFacts::default()));
            let attributes = VolumeAttributes::from_record(&record.attributes);
            for field in FixedVolumeField::ALL {
                let expected = fixed_field_value(&record, &attributes, field);
                let got = shown.get(field.wire_name()).cloned().unwrap_or(json!(""));
                assert_eq!(got, json!(expected), "{}", field.wire_name());
            }
        }
    }

    #[test]
    fn a_volume_with_a_running_job_shows_its_status_and_progress() {
        let mut record = volume_record();
        record.state = VolumeState::Resizing;
        record.job = Some((7, 40, "Copying".into()));
        let v = json_of(&volume(&record, &VolumeFacts::default()));
        assert_eq!(v["state"], "Resizing");
        assert_eq!(v["status"], "Copying");
        assert_eq!(v["progress"], 40);
    }
}
