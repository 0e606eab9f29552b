//! Request bodies and queries → the services' typed commands, with the 400
//! messages clients see. Checks here need nothing but the request; rules
//! that need the store are the services'.

use super::parse::{
    bad, opt_bool, opt_str, opt_uint, req_gib, req_str, req_uint, Body, ParseResult,
};
use crate::service::attributes::{
    CapacityOptimization, Filesystem, Flavor, PolicySettings, StoredField, VolumeAttributes,
};
use crate::service::commands::{
    AgentPoll, CloneFrom, CreateAttachment, CreateMedium, CreateNode, CreatePolicy, CreateSnapshot,
    CreateVolume, DeleteSnapshot, DeleteVolume, FixedVolumeField, HostState, ListJobs,
    ModifyAttachment, ModifyMedium, ModifySnapshot, Refresh, ReportHostState, ResiliencyLevels,
    ResizeVolume, SetNodeAddress, SignIn, SignOut, UpdatePolicy, MAX_AGENT_WAIT_SECS,
};
use crate::service::media::plain_directory;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::net::IpAddr;
use svs_domain::{
    AttachmentManager, Consistency, JobState, ResourceName, VolumeType, MAX_VOLUME_GIB,
    MIN_VOLUME_GIB,
};
use svs_store::Page;

/// A command read from a JSON object body.
pub trait FromBody: Sized {
    fn from_body(body: &Body) -> ParseResult<Self>;
}

/// A command read from the query string.
pub trait FromQuery: Sized {
    fn from_query(query: &BTreeMap<String, String>) -> ParseResult<Self>;
}

impl FromBody for SignIn {
    fn from_body(body: &Body) -> ParseResult<SignIn> {
        Ok(SignIn {
            email: req_str(body, "email")?.to_string(),
            password: req_str(body, "password")?.to_string(),
        })
    }
}

impl FromBody for SignOut {
    fn from_body(body: &Body) -> ParseResult<SignOut> {
        Ok(SignOut {
            access_token: req_str(body, "AccessToken")?.to_string(),
        })
    }
}

impl FromBody for Refresh {
    fn from_body(body: &Body) -> ParseResult<Refresh> {
        Ok(Refresh {
            refresh_token: req_str(body, "RefreshToken")?.to_string(),
        })
    }
}

/// A string field where `""` means "not given".
fn opt_non_empty<'a>(body: &'a Body, key: &str) -> ParseResult<Option<&'a str>> {
    Ok(opt_str(body, key)?.filter(|s| !s.is_empty()))
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

/// A boolean query parameter: `true` or `false`.
fn query_bool(query: &BTreeMap<String, String>, key: &str) -> ParseResult<Option<bool>> {
    match query.get(key).map(String::as_str) {
        None => Ok(None),
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        Some(_) => Err(bad(format!("{key} must be true or false"))),
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

/// A paging parameter (`page`, `count`): `default` when absent, else a whole
/// number from 1 to `max`.
fn page_number(
    query: &BTreeMap<String, String>,
    key: &str,
    default: u32,
    max: u32,
) -> ParseResult<u32> {
    match query.get(key) {
        None => Ok(default),
        Some(v) => v
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| bad(format!("{key} must be a whole number from 1 to {max}"))),
    }
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

/// `DELETE .../attachments/{node}`: the reference's `force` is accepted and
/// checked (a detach always closes the node's connections).
#[derive(Debug, Clone, Copy, Default)]
pub struct AttachmentDeleteQuery;

impl FromQuery for AttachmentDeleteQuery {
    fn from_query(query: &BTreeMap<String, String>) -> ParseResult<AttachmentDeleteQuery> {
        DeleteVolume::from_query(query)?;
        Ok(AttachmentDeleteQuery)
    }
}

/// Largest medium accepted through the API, in GiB (1 EiB).
pub const MAX_MEDIUM_GIB: u64 = 1 << 30;

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
                _ => Err(bad(
                    "state can only be set to \"Failed\": a failed medium does not come back",
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
        only_fields(body, &["mediaid", "node", "zone", "media", "size"])?;
        let id = ResourceName::parse("medium", req_str(body, "mediaid")?).map_err(bad)?;
        let node = ResourceName::parse("node", req_str(body, "node")?).map_err(bad)?;
        let zone = ResourceName::parse("zone", req_str(body, "zone")?).map_err(bad)?;
        let directory =
            plain_directory(std::path::Path::new(req_str(body, "media")?)).map_err(bad)?;
        let size = req_uint(body, "size", 1, MAX_MEDIUM_GIB)?;
        Ok(CreateMedium {
            id,
            node,
            zone,
            directory,
            size,
        })
    }
}

/// `?force=true|false` (absent: false).
fn force_query(query: &BTreeMap<String, String>) -> ParseResult<bool> {
    match query.get("force").map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        // Strict like every boolean of the API: `?force=` is not `true`.
        Some(_) => Err(bad("force must be true or false")),
    }
}

impl FromQuery for DeleteVolume {
    fn from_query(query: &BTreeMap<String, String>) -> ParseResult<DeleteVolume> {
        Ok(DeleteVolume {
            force: force_query(query)?,
        })
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

/// Reference Attachment fields svs does not use (the volume and snapshot
/// are in the path; it has no performance allocation): checked for their
/// type, so a mistyped one is not silently dropped, and ignored.
fn unused_attachment_fields(body: &Body) -> ParseResult<()> {
    opt_str(body, "volumename")?;
    opt_str(body, "snapshotname")?;
    opt_uint(body, "allocated_resources", 1, 100)?;
    Ok(())
}

impl FromBody for CreateAttachment {
    fn from_body(body: &Body) -> ParseResult<CreateAttachment> {
        unused_attachment_fields(body)?;
        Ok(CreateAttachment {
            node: req_str(body, "node")?.to_string(),
            readonly: opt_bool(body, "readonly")?.unwrap_or(false),
            mountpoint: opt_str(body, "mountpoint")?.unwrap_or("").to_string(),
            manager: match opt_str(body, "manager")? {
                None => AttachmentManager::Agent,
                Some(m) => AttachmentManager::parse(m)
                    .ok_or_else(|| bad("manager must be 'agent' or 'csi'"))?,
            },
        })
    }
}

pub const NOTHING_TO_CHANGE: &str = "nothing to change: send readonly or mountpoint (or both)";

impl FromBody for ModifyAttachment {
    fn from_body(body: &Body) -> ParseResult<ModifyAttachment> {
        unused_attachment_fields(body)?;
        opt_str(body, "node")?;
        let readonly = opt_bool(body, "readonly")?;
        let mountpoint = opt_str(body, "mountpoint")?.map(str::to_string);
        // A body naming neither (`{}`, only ignored fields) changes nothing:
        // no job for it.
        if readonly.is_none() && mountpoint.is_none() {
            return Err(bad(NOTHING_TO_CHANGE));
        }
        Ok(ModifyAttachment {
            readonly,
            mountpoint,
        })
    }
}

impl FromBody for SetNodeAddress {
    /// `{"address": "10.0.0.5"}`; `""` removes the address.
    fn from_body(body: &Body) -> ParseResult<SetNodeAddress> {
        let address = match opt_str(body, "address")? {
            None => return Err(bad("address is required")),
            Some("") => None,
            Some(a) => Some(
                a.parse::<IpAddr>()
                    .map_err(|_| bad(format!("address '{a}' is not an IP address")))?,
            ),
        };
        Ok(SetNodeAddress { address })
    }
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

/// Bodies of the node and agent routes (svs extensions) take only their
/// own fields: an unknown one is a 400, not silently dropped.
fn only_fields(body: &Body, known: &[&str]) -> ParseResult<()> {
    match body.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => Err(bad(format!(
            "unknown field '{key}' (accepted: {})",
            known.join(", ")
        ))),
        None => Ok(()),
    }
}

impl FromBody for CreateNode {
    /// `{"name": "host-7", "address": "10.0.0.7", "zone": "zone-a"}`.
    fn from_body(body: &Body) -> ParseResult<CreateNode> {
        only_fields(body, &["name", "address", "zone"])?;
        let name = ResourceName::parse("node", req_str(body, "name")?).map_err(bad)?;
        let address = req_str(body, "address")?;
        let address = address
            .parse::<IpAddr>()
            .map_err(|_| bad(format!("address '{address}' is not an IP address")))?;
        let zone = match opt_str(body, "zone")? {
            None | Some("") => String::new(),
            Some(z) => ResourceName::parse("zone", z).map_err(bad)?.into_string(),
        };
        Ok(CreateNode {
            name,
            zone,
            address,
        })
    }
}

/// `POST /nodes/{node}/credentials`: no body, or `{}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct IssueCredential;

impl FromBody for IssueCredential {
    fn from_body(body: &Body) -> ParseResult<IssueCredential> {
        only_fields(body, &[])?;
        Ok(IssueCredential)
    }
}

/// An optional string field of an agent's report: `null` is the same as
/// leaving it out (the agent clears a field by sending null).
fn nullable_str(body: &Body, key: &str) -> ParseResult<Option<String>> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(bad(format!("{key} must be a string or null"))),
    }
}

/// An optional whole number of an agent's report; `null` as left out.
fn nullable_uint(body: &Body, key: &str, max: u64) -> ParseResult<Option<u64>> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        _ => opt_uint(body, key, 0, max),
    }
}

impl FromBody for ReportHostState {
    fn from_body(body: &Body) -> ParseResult<ReportHostState> {
        only_fields(
            body,
            &[
                "hoststate",
                "hostdetail",
                "device",
                "mountpath",
                "filesystembytes",
                "filesystemsize",
                "growerror",
                "growjob",
            ],
        )?;
        let state = req_str(body, "hoststate")?;
        let state = HostState::parse(state).ok_or_else(|| {
            bad("hoststate must be \"Connected\", \"Mounted\", \"Error\" or \"Disconnected\"")
        })?;
        Ok(ReportHostState {
            state,
            detail: nullable_str(body, "hostdetail")?,
            device: nullable_str(body, "device")?,
            mount_path: nullable_str(body, "mountpath")?,
            // Stored as signed 64-bit numbers.
            filesystem_bytes: nullable_uint(body, "filesystembytes", i64::MAX as u64)?,
            filesystem_size: nullable_uint(body, "filesystemsize", MAX_VOLUME_GIB)?,
            grow_error: nullable_str(body, "growerror")?,
            grow_job: nullable_uint(body, "growjob", i64::MAX as u64)?
                .map(|j| i64::try_from(j).unwrap_or(i64::MAX)),
        })
    }
}

impl FromQuery for AgentPoll {
    /// `?revision=R&wait=S`: `wait` whole seconds, 0 to 60 (default 0).
    fn from_query(query: &BTreeMap<String, String>) -> ParseResult<AgentPoll> {
        let wait = match query.get("wait").map(String::as_str) {
            None | Some("") => 0,
            Some(w) => w
                .parse::<u64>()
                .ok()
                .filter(|w| *w <= MAX_AGENT_WAIT_SECS)
                .ok_or_else(|| {
                    bad(format!(
                        "wait must be a whole number of seconds from 0 to {MAX_AGENT_WAIT_SECS}"
                    ))
                })?,
        };
        Ok(AgentPoll {
            revision: query.get("revision").filter(|r| !r.is_empty()).cloned(),
            wait: std::time::Duration::from_secs(wait),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::parse::body;
    use serde_json::json;

    fn message<T: std::fmt::Debug>(r: ParseResult<T>) -> String {
        r.expect_err("refused").message
    }

    #[test]
    fn omitted_policy_fields_are_left_to_the_service() {
        let p = CreatePolicy::from_body(&body(json!({"name": "gold"}))).unwrap();
        assert_eq!(p.resiliency, ResiliencyLevels::default());
        assert_eq!(p.settings, PolicySettings::default());
    }

    #[test]
    fn resiliency_above_two_is_refused() {
        assert_eq!(
            message(CreatePolicy::from_body(&body(
                json!({"name": "x", "resiliencyzone": 3})
            ))),
            "resiliencyzone must be a whole number from 0 to 2"
        );
    }

    #[test]
    fn wrong_policy_types_and_enum_values_are_refused() {
        for b in [
            json!({"name": "x", "encryption": "yes"}),
            json!({"name": "x", "capacityoptimization": "fast"}),
            json!({"name": "bad name"}),
            json!({"name": ""}),
            json!({}),
        ] {
            assert!(CreatePolicy::from_body(&body(b.clone())).is_err(), "{b}");
        }
        assert_eq!(
            message(UpdatePolicy::from_body(&body(json!({"name": ""})))),
            "policy name must be 1 to 63 characters of letters, digits, '.', '_' or '-'"
        );
    }

    #[test]
    fn a_resize_keeps_the_writable_fields_sent_and_refuses_non_strings() {
        let r = ResizeVolume::from_body(&body(json!({
            "size": 20, "name": "v", "zone": "", "policy": null, "state": "Ready", "flavor": "regular"
        })))
        .unwrap();
        assert_eq!(r.size, 20);
        assert!(!r.allow_data_movement);
        assert_eq!(
            r.repeated,
            vec![
                (FixedVolumeField::Name, "v".to_string()),
                (FixedVolumeField::Flavor, "regular".to_string())
            ]
        );
        assert_eq!(
            message(ResizeVolume::from_body(&body(
                json!({"size": 20, "type": 1})
            ))),
            "type cannot be changed: only size and allowdatamovement can be modified"
        );
    }

    #[test]
    fn a_volume_from_a_whole_volume_or_of_an_unknown_flavor_is_refused() {
        let base = json!({"name": "v", "size": 1, "policy": "p"});
        assert!(CreateVolume::from_body(&body(base.clone())).is_ok());
        let mut with = base.clone();
        with["contentvolume"] = json!("other");
        assert_eq!(
            message(CreateVolume::from_body(&body(with.clone()))),
            "contentvolume: creating a volume from a whole volume is not supported; \
             name one of its snapshots in contentsnapshot"
        );
        with["contentsnapshot"] = json!("daily");
        let clone = CreateVolume::from_body(&body(with)).unwrap();
        assert_eq!(
            clone.clone_from,
            Some(CloneFrom {
                volume: "other".into(),
                snapshot: "daily".into()
            })
        );
        let mut with = base;
        with["flavor"] = json!("fast");
        assert_eq!(
            message(CreateVolume::from_body(&body(with))),
            "flavor must be \"regular\" or \"filedirect\""
        );
    }

    #[test]
    fn a_file_volume_gets_ext4_unless_xfs_is_chosen_and_a_block_volume_none() {
        let fs = |b: Value| {
            CreateVolume::from_body(&body(b))
                .unwrap()
                .attributes
                .filesystem
        };
        assert_eq!(fs(json!({"name": "v", "size": 1, "policy": "p"})), None);
        assert_eq!(
            fs(json!({"name": "v", "size": 1, "policy": "p", "type": "file"})),
            Some(Filesystem::Ext4)
        );
        assert_eq!(
            fs(json!({"name": "v", "size": 1, "policy": "p", "type": "file", "filesystem": "xfs"})),
            Some(Filesystem::Xfs)
        );
        assert_eq!(
            message(CreateVolume::from_body(&body(
                json!({"name": "v", "size": 1, "policy": "p", "filesystem": "ext4"})
            ))),
            "filesystem: only a volume of type \"file\" has one"
        );
        assert_eq!(
            message(CreateVolume::from_body(&body(
                json!({"name": "v", "size": 1, "policy": "p", "type": "file", "filesystem": "zfs"})
            ))),
            "filesystem must be \"ext4\" or \"xfs\""
        );
    }

    #[test]
    fn a_snapshot_keeps_its_stored_fields_and_ignores_read_only_ones_of_their_type() {
        let s = CreateSnapshot::from_body(&body(json!({
            "name": "daily", "consistency": "application", "consistencygroupname": "cg",
            "policy": true, "volumesize": 7, "used": 1e20, "snapshotid": "", "state": "Ready"
        })))
        .unwrap();
        assert_eq!(s.name.as_str(), "daily");
        assert_eq!(s.consistency, Consistency::Application);
        assert_eq!(
            Value::Object(s.attributes),
            json!({"policy": true, "consistencygroupname": "cg"})
        );
        let refused = |v: Value| message(CreateSnapshot::from_body(&body(v)));
        assert_eq!(
            refused(json!({"name": "s", "consistency": "crash", "progress": 1.5})),
            "progress must be a whole number"
        );
        assert_eq!(
            refused(json!({"name": "s", "consistency": "crash", "volumeid": 3})),
            "volumeid must be a string"
        );
        assert_eq!(
            refused(json!({"name": "s", "consistency": "crash", "policy": "yes"})),
            "policy must be true or false"
        );
        let m = ModifySnapshot::from_body(&body(json!({"name": "", "targetsecret": "x"}))).unwrap();
        assert!(m.name.is_none(), "an empty name changes nothing");
        assert_eq!(Value::Object(m.attributes), json!({"targetsecret": "x"}));
    }

    #[test]
    fn an_attachment_change_must_name_readonly_or_mountpoint() {
        let parse = |v: Value| ModifyAttachment::from_body(&body(v));
        for nothing in [
            json!({}),
            json!({"": null}),
            json!({"node": "n", "volumename": "v", "allocated_resources": 5}),
        ] {
            assert_eq!(
                message(parse(nothing.clone())),
                NOTHING_TO_CHANGE,
                "{nothing}"
            );
        }
        assert_eq!(
            message(parse(json!({"readonly": null}))),
            "readonly must be true or false"
        );
        let m = parse(json!({"mountpoint": ""})).unwrap();
        assert_eq!((m.readonly, m.mountpoint.as_deref()), (None, Some("")));
        assert_eq!(
            parse(json!({"readonly": true})).unwrap().readonly,
            Some(true)
        );
    }

    #[test]
    fn node_addresses_must_be_ip_addresses_or_empty() {
        let parse = |v: Value| SetNodeAddress::from_body(&body(v));
        assert_eq!(
            parse(json!({"address": "10.0.0.5"})).unwrap().address,
            Some("10.0.0.5".parse().unwrap())
        );
        assert_eq!(parse(json!({"address": ""})).unwrap().address, None);
        assert_eq!(message(parse(json!({}))), "address is required");
        assert_eq!(
            message(parse(json!({"address": "host"}))),
            "address 'host' is not an IP address"
        );
    }

    #[test]
    fn job_queries_check_numbers_and_states() {
        let q = |pairs: &[(&str, &str)]| {
            ListJobs::from_query(
                &pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
        };
        let all = q(&[("type", ""), ("state", "Done")]).unwrap();
        assert_eq!(all.kind, None);
        assert_eq!(all.state, Some(JobState::Done));
        assert_eq!((all.page, all.count), (1, ListJobs::DEFAULT_COUNT));
        assert_eq!(
            message(q(&[("count", "1001")])),
            "count must be a whole number from 1 to 1000"
        );
        assert!(q(&[("state", "done")]).is_err());
    }

    #[test]
    fn agent_polls_wait_zero_to_sixty_seconds() {
        let q = |pairs: &[(&str, &str)]| {
            AgentPoll::from_query(
                &pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
        };
        let poll = q(&[]).unwrap();
        assert_eq!((poll.revision, poll.wait.as_secs()), (None, 0));
        let poll = q(&[("revision", "ab12"), ("wait", "60")]).unwrap();
        assert_eq!(
            (poll.revision.as_deref(), poll.wait.as_secs()),
            (Some("ab12"), 60)
        );
        for bad in ["61", "-1", "1.5", "soon"] {
            assert_eq!(
                message(q(&[("wait", bad)])),
                "wait must be a whole number of seconds from 0 to 60",
                "{bad}"
            );
        }
    }

    #[test]
    fn host_reports_take_known_fields_and_null_clears() {
        let parse = |v: Value| ReportHostState::from_body(&body(v));
        let r = parse(
            json!({"hoststate": "Mounted", "filesystemsize": 6, "growerror": null, "growjob": 9}),
        )
        .unwrap();
        assert_eq!(r.state, HostState::Mounted);
        assert_eq!((r.filesystem_size, r.grow_error), (Some(6), None));
        assert_eq!(r.grow_job, Some(9));
        assert_eq!(
            message(parse(json!({"hoststate": "Mounted", "growjob": -1}))),
            "growjob must be a whole number from 0 to 9223372036854775807"
        );
        assert_eq!(
            message(parse(json!({"hoststate": "Mounted", "extra": 1}))),
            "unknown field 'extra' (accepted: hoststate, hostdetail, device, mountpath, filesystembytes, filesystemsize, growerror, growjob)"
        );
        assert_eq!(
            message(parse(json!({"hoststate": "Mounted", "growerror": 5}))),
            "growerror must be a string or null"
        );
        assert!(parse(json!({"hoststate": "mounted"})).is_err());
    }

    #[test]
    fn new_nodes_need_a_name_and_an_ip_address() {
        let parse = |v: Value| CreateNode::from_body(&body(v));
        let n = parse(json!({"name": "host-7", "address": "::1"})).unwrap();
        assert_eq!((n.name.as_str(), n.zone.as_str()), ("host-7", ""));
        assert_eq!(
            message(parse(
                json!({"name": "host-7", "address": "::1", "zone": "a b"})
            )),
            "zone name must be 1 to 63 characters of letters, digits, '.', '_' or '-'"
        );
        assert_eq!(
            message(parse(json!({"address": "::1"}))),
            "name is required"
        );
        assert!(IssueCredential::from_body(&body(json!({}))).is_ok());
        assert!(IssueCredential::from_body(&body(json!({"a": 1}))).is_err());
    }
}
