//! The Controller service: CSI volume, snapshot and attachment calls made
//! into svs REST calls, as the plugin's user ([`Session`]).
//!
//! Seed rule 7: no call here ever asks for a data movement. The one body
//! that names `allowdatamovement` (the expansion) sets it false, and a test
//! scans this directory for any other.

use super::identity::Readiness;
use super::session::Session;
use super::{
    capacity_gib, gib_bytes, parse_snapshot_id, present, required, snapshot_id, status_of, svs_name,
};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use svs_client::api::Api;
use svs_client::ClientError;
use svs_csi::proto::controller_server::Controller;
use svs_csi::proto::controller_service_capability::{rpc, Rpc, Type as CapabilityType};
use svs_csi::proto::volume_capability::access_mode::Mode;
use svs_csi::proto::volume_capability::AccessType;
use svs_csi::proto::volume_content_source::{SnapshotSource, Type as SourceType};
use svs_csi::proto::*;
use svs_csi::tonic::{Request, Response, Status};
use svs_csi::ZONE_TOPOLOGY_KEY;
use svs_wire::requests::{SnapshotCreateRequest, VolumeCreateRequest};
use svs_wire::views::{AttachmentView, JobStarted, JobView, MediumView, SnapshotView, VolumeView};

/// How often a job is polled, and for how long at most.
const JOB_POLL: Duration = Duration::from_millis(100);

/// StorageClass parameters the driver reads; the orchestrator's own
/// (`csi.storage.k8s.io/...`) are passed through and ignored.
const PARAMETERS: [&str; 3] = ["policy", "type", "filesystem"];
const ORCHESTRATOR_PREFIX: &str = "csi.storage.k8s.io/";

pub struct ControllerService {
    session: Arc<Session>,
    job_timeout: Duration,
}

/// Probe: ready when the plugin can sign in (or renew) and make a call.
pub struct ControllerReadiness(pub Arc<Session>);

#[svs_csi::tonic::async_trait]
impl Readiness for ControllerReadiness {
    async fn ready(&self) -> Result<(), String> {
        let api = self.0.api().await.map_err(|e| e.to_string())?;
        match api.list_policies().await {
            Ok(_) => Ok(()),
            Err(e) => {
                if matches!(e, ClientError::Api { status: 401, .. }) {
                    self.0.forget().await;
                }
                Err(e.to_string())
            }
        }
    }
}

/// The volume type and filesystem a request asks for.
#[derive(Debug, Clone, PartialEq)]
struct Shape {
    kind: &'static str,
    filesystem: Option<String>,
}

fn is_block(capability: &VolumeCapability) -> bool {
    matches!(capability.access_type, Some(AccessType::Block(_)))
}

/// Checks a capability svs can serve: an access type, and a single-node
/// access mode (a volume is attached to one node at a time).
fn check_capability(capability: &VolumeCapability) -> Result<(), String> {
    if capability.access_type.is_none() {
        return Err("volume_capability: access_type (block or mount) is required".into());
    }
    let Some(mode) = capability.access_mode.as_ref() else {
        return Err("volume_capability: access_mode is required".into());
    };
    match Mode::try_from(mode.mode) {
        Ok(
            Mode::SingleNodeWriter
            | Mode::SingleNodeReaderOnly
            | Mode::SingleNodeSingleWriter
            | Mode::SingleNodeMultiWriter,
        ) => Ok(()),
        Ok(other) => Err(format!(
            "access mode {} is not supported: svs volumes attach to one node",
            other.as_str_name()
        )),
        Err(_) => Err(format!("access mode {} is unknown", mode.mode)),
    }
}

/// The job an answer started, if it started one.
fn job_id(answer: &Value) -> Option<String> {
    JobStarted::deserialize(answer)
        .ok()
        .map(|started| started.JobID)
        .filter(|id| !id.is_empty())
}

/// A svs volume as a CSI volume.
fn csi_volume(v: &VolumeView) -> Volume {
    let mut context = HashMap::from([("type".to_string(), v.kind.clone())]);
    if let Some(fs) = &v.filesystem {
        context.insert("filesystem".to_string(), fs.clone());
    }
    let zone = v.zone.as_deref().unwrap_or_default();
    let accessible_topology = if zone.is_empty() {
        Vec::new()
    } else {
        vec![Topology {
            segments: HashMap::from([(ZONE_TOPOLOGY_KEY.to_string(), zone.to_string())]),
        }]
    };
    // The clone's source as named at creation: the CSI side created it
    // with ids.
    let (source_volume, source_snapshot) = (v.contentvolume.as_str(), v.contentsnapshot.as_str());
    let content_source =
        (!source_volume.is_empty() && !source_snapshot.is_empty()).then(|| VolumeContentSource {
            r#type: Some(SourceType::Snapshot(SnapshotSource {
                snapshot_id: snapshot_id(source_volume, source_snapshot),
            })),
        });
    Volume {
        capacity_bytes: gib_bytes(v.size),
        volume_id: v.volumeid.clone(),
        volume_context: context,
        content_source,
        accessible_topology,
    }
}

fn csi_snapshot(s: &SnapshotView) -> Snapshot {
    let volume = s.volumeid.as_str();
    let creation_time =
        time::OffsetDateTime::parse(&s.time, &time::format_description::well_known::Rfc3339)
            .ok()
            .map(|t| svs_csi::prost_types::Timestamp {
                seconds: t.unix_timestamp(),
                nanos: i32::try_from(t.nanosecond()).unwrap_or(0),
            });
    Snapshot {
        size_bytes: gib_bytes(s.volumesize),
        snapshot_id: snapshot_id(volume, &s.snapshotid),
        source_volume_id: volume.to_string(),
        creation_time,
        ready_to_use: s.state == "Ready",
        group_snapshot_id: String::new(),
    }
}

/// `starting_token` (a decimal offset) → the offset; ABORTED when it is
/// not one (the spec's code for a token the plugin cannot use).
fn page_start(token: &str, len: usize) -> Result<usize, Status> {
    if token.is_empty() {
        return Ok(0);
    }
    match token.parse::<usize>() {
        Ok(n) if n <= len => Ok(n),
        _ => Err(Status::aborted(format!(
            "starting_token {token:?} is not valid"
        ))),
    }
}

/// One page of `items` and the next token ("" at the end).
fn page<T>(items: Vec<T>, start: usize, max_entries: i32) -> Result<(Vec<T>, String), Status> {
    if max_entries < 0 {
        return Err(Status::invalid_argument("max_entries cannot be negative"));
    }
    let total = items.len();
    let take = match max_entries {
        0 => total,
        n => usize::try_from(n).unwrap_or(total),
    };
    let entries: Vec<T> = items.into_iter().skip(start).take(take).collect();
    let end = start + entries.len();
    let next = if end < total {
        end.to_string()
    } else {
        String::new()
    };
    Ok((entries, next))
}

fn not_found_is_none<T>(result: Result<T, ClientError>) -> Result<Option<T>, Status> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(ClientError::Api { status: 404, .. }) => Ok(None),
        Err(e) => Err(status_of(e)),
    }
}

fn rpc_capability(kind: rpc::Type) -> ControllerServiceCapability {
    ControllerServiceCapability {
        r#type: Some(CapabilityType::Rpc(Rpc {
            r#type: kind as i32,
        })),
    }
}

impl ControllerService {
    pub fn new(session: Arc<Session>, job_timeout: Duration) -> ControllerService {
        ControllerService {
            session,
            job_timeout,
        }
    }

    async fn api(&self) -> Result<Api, Status> {
        self.session.api().await.map_err(status_of)
    }

    /// Maps an error, forgetting the tokens on a 401 so that the next call
    /// signs in again.
    async fn fail(&self, e: ClientError) -> Status {
        if matches!(e, ClientError::Api { status: 401, .. }) {
            self.session.forget().await;
        }
        status_of(e)
    }

    /// A client call's answer, or its error as `fail` maps it.
    async fn ok<T>(&self, answer: Result<T, ClientError>) -> Result<T, Status> {
        match answer {
            Ok(value) => Ok(value),
            Err(e) => Err(self.fail(e).await),
        }
    }

    /// Polls `GET /jobs/{id}` until the job ends; Err when it ends in
    /// Error (with its last message) or takes too long.
    ///
    /// A job can outlast an IdToken: each poll takes the session's current one.
    async fn wait_job(&self, id: &str) -> Result<JobView, Status> {
        let deadline = Instant::now() + self.job_timeout;
        loop {
            let job: JobView = self.ok(self.api().await?.get_job(id).await).await?;
            match job.state.as_str() {
                "Done" => return Ok(job),
                "Error" => {
                    let message = job
                        .details
                        .last()
                        .cloned()
                        .unwrap_or_else(|| "the job failed".to_string());
                    return Err(status_of(ClientError::JobFailed {
                        id: id.to_string(),
                        message,
                    }));
                }
                _ => {}
            }
            if Instant::now() >= deadline {
                return Err(Status::deadline_exceeded(format!(
                    "job {id} is still running; the call can be retried"
                )));
            }
            tokio::time::sleep(JOB_POLL).await;
        }
    }

    /// Waits for the job an answer started, if any.
    async fn wait_started(&self, answer: &Value) -> Result<Api, Status> {
        if let Some(id) = job_id(answer) {
            self.wait_job(&id).await?;
        }
        // What follows the wait needs a current IdToken, not the one the
        // call started with.
        self.api().await
    }

    async fn volume(&self, api: &Api, id: &str) -> Result<Option<VolumeView>, Status> {
        not_found_is_none(api.get_volume(id).await)
    }

    /// The volume, which must exist (NOT_FOUND otherwise).
    async fn existing_volume(&self, api: &Api, id: &str) -> Result<VolumeView, Status> {
        self.volume(api, id)
            .await?
            .ok_or_else(|| Status::not_found(format!("volume {id} not found")))
    }

    /// The type and filesystem a CreateVolume asks for.
    fn shape(
        parameters: &HashMap<String, String>,
        capabilities: &[VolumeCapability],
    ) -> Result<Shape, Status> {
        let block = capabilities.iter().any(is_block);
        if block && !capabilities.iter().all(is_block) {
            return Err(Status::invalid_argument(
                "volume_capabilities: block and mount access cannot be mixed",
            ));
        }
        let kind = match parameters.get("type").map(String::as_str) {
            None | Some("") => {
                if block {
                    "block"
                } else {
                    "file"
                }
            }
            Some("block") => "block",
            Some("file") => "file",
            Some(other) => {
                return Err(Status::invalid_argument(format!(
                    "parameter type must be \"block\" or \"file\", not {other:?}"
                )))
            }
        };
        let fs_type = capabilities.iter().find_map(|c| match &c.access_type {
            Some(AccessType::Mount(m)) if !m.fs_type.is_empty() => Some(m.fs_type.clone()),
            _ => None,
        });
        let filesystem = match (kind, parameters.get("filesystem").cloned().or(fs_type)) {
            ("block", Some(fs)) if parameters.contains_key("filesystem") => {
                return Err(Status::invalid_argument(format!(
                    "parameter filesystem ({fs}) is for volumes of type \"file\""
                )))
            }
            ("block", _) => None,
            (_, None) => Some("ext4".to_string()),
            (_, Some(fs)) if fs == "ext4" || fs == "xfs" => Some(fs),
            (_, Some(fs)) => {
                return Err(Status::invalid_argument(format!(
                    "filesystem must be \"ext4\" or \"xfs\", not {fs:?}"
                )))
            }
        };
        Ok(Shape { kind, filesystem })
    }

    /// The zone of the topology requirement: the first preferred, else the
    /// first requisite, segment with the zone key.
    fn zone(requirement: Option<&TopologyRequirement>) -> Option<String> {
        let requirement = requirement?;
        requirement
            .preferred
            .iter()
            .chain(requirement.requisite.iter())
            .find_map(|t| t.segments.get(ZONE_TOPOLOGY_KEY).cloned())
    }

    /// Why an existing volume of the same name does not match the request;
    /// None when it does.
    fn mismatch(
        existing: &VolumeView,
        gib: u64,
        range: Option<&CapacityRange>,
        policy: &str,
        shape: &Shape,
        source: Option<(&str, &str)>,
    ) -> Option<String> {
        let size = existing.size;
        let limit = range.map_or(0, |r| r.limit_bytes);
        if size < gib || (limit > 0 && gib_bytes(size) > limit) {
            return Some(format!("it has {size} GiB"));
        }
        if existing.policy != policy {
            return Some(format!("its policy is {}", existing.policy));
        }
        if existing.kind != shape.kind {
            return Some(format!("its type is {}", existing.kind));
        }
        let fs = existing.filesystem.as_deref();
        if fs != shape.filesystem.as_deref() {
            return Some(format!("its filesystem is {}", fs.unwrap_or("none")));
        }
        let content = (
            existing.contentvolume.as_str(),
            existing.contentsnapshot.as_str(),
        );
        let wanted = source.unwrap_or(("", ""));
        if content != wanted {
            return Some("its content source differs".to_string());
        }
        None
    }

    /// The attachment of a volume's live data to a node, if any.
    async fn attachment(
        &self,
        api: &Api,
        volume: &str,
        node: &str,
    ) -> Result<Option<AttachmentView>, Status> {
        not_found_is_none(api.get_attachment(volume, "top", node).await)
    }

    fn publish_context(attachment: &AttachmentView) -> HashMap<String, String> {
        HashMap::from([
            ("uri".to_string(), attachment.uri.clone()),
            ("exportname".to_string(), attachment.exportname.clone()),
            ("readonly".to_string(), attachment.readonly.to_string()),
        ])
    }
}

#[svs_csi::tonic::async_trait]
impl Controller for ControllerService {
    async fn create_volume(
        &self,
        request: Request<CreateVolumeRequest>,
    ) -> Result<Response<CreateVolumeResponse>, Status> {
        let r = request.into_inner();
        present(!r.name.is_empty(), "name")?;
        present(!r.volume_capabilities.is_empty(), "volume_capabilities")?;
        for c in &r.volume_capabilities {
            check_capability(c).map_err(Status::invalid_argument)?;
        }
        for key in r.parameters.keys() {
            if !PARAMETERS.contains(&key.as_str()) && !key.starts_with(ORCHESTRATOR_PREFIX) {
                return Err(Status::invalid_argument(format!(
                    "unknown parameter {key:?}: svs reads policy, type and filesystem"
                )));
            }
        }
        let policy = match r.parameters.get("policy") {
            Some(p) if !p.is_empty() => p.clone(),
            _ => {
                return Err(Status::invalid_argument(
                    "parameter policy is required (the svs policy of the volumes)",
                ))
            }
        };
        let shape = ControllerService::shape(&r.parameters, &r.volume_capabilities)?;
        let gib = capacity_gib(r.capacity_range.as_ref())?;
        let source = match r
            .volume_content_source
            .as_ref()
            .and_then(|s| s.r#type.as_ref())
        {
            None => None,
            Some(SourceType::Snapshot(s)) => Some(
                parse_snapshot_id(&s.snapshot_id)
                    .map(|(v, s)| (v.to_string(), s.to_string()))
                    .ok_or_else(|| {
                        Status::not_found(format!("snapshot {:?} not found", s.snapshot_id))
                    })?,
            ),
            Some(SourceType::Volume(_)) => {
                return Err(Status::invalid_argument(
                    "volume_content_source: svs clones from snapshots only",
                ))
            }
        };
        let source_ref = source.as_ref().map(|(v, s)| (v.as_str(), s.as_str()));
        let name = svs_name(&r.name);
        let api = self.api().await?;

        // Idempotent by name.
        if let Some(existing) = self.volume(&api, &name).await? {
            if let Some(why) = ControllerService::mismatch(
                &existing,
                gib,
                r.capacity_range.as_ref(),
                &policy,
                &shape,
                source_ref,
            ) {
                return Err(Status::already_exists(format!(
                    "volume {:?} exists with other parameters: {why}",
                    r.name
                )));
            }
            let state = existing.state.as_str();
            if matches!(state, "Creating" | "Deleting") {
                return Err(Status::aborted(format!(
                    "volume {:?} is {state}; try again when its job ends",
                    r.name
                )));
            }
            return Ok(Response::new(CreateVolumeResponse {
                volume: Some(csi_volume(&existing)),
            }));
        }

        if let Some((volume, snapshot)) = source_ref {
            if not_found_is_none(api.get_snapshot::<SnapshotView>(volume, snapshot).await)?
                .is_none()
            {
                return Err(Status::not_found(format!(
                    "snapshot {volume}:{snapshot} not found"
                )));
            }
        }
        if not_found_is_none(api.get_policy(&policy).await)?.is_none() {
            return Err(Status::invalid_argument(format!(
                "parameter policy: policy {policy:?} does not exist"
            )));
        }
        let body = VolumeCreateRequest {
            name: name.clone(),
            kind: Some(shape.kind.to_string()),
            size: gib,
            policy: policy.clone(),
            filesystem: shape.filesystem.clone(),
            zone: ControllerService::zone(r.accessibility_requirements.as_ref()),
            contentvolume: source_ref.map(|(volume, _)| volume.to_string()),
            contentsnapshot: source_ref.map(|(_, snapshot)| snapshot.to_string()),
            ..VolumeCreateRequest::default()
        };
        let answer = self.ok(api.create_volume(&body, None).await).await?;
        let api = self.wait_started(&answer).await?;
        let started = JobStarted::deserialize(&answer).ok();
        let id = started.as_ref().map_or("", |s| s.ObjectID.as_str());
        let created = self
            .volume(&api, if id.is_empty() { &name } else { id })
            .await?
            .ok_or_else(|| Status::internal(format!("volume {name} vanished after creation")))?;
        Ok(Response::new(CreateVolumeResponse {
            volume: Some(csi_volume(&created)),
        }))
    }

    async fn delete_volume(
        &self,
        request: Request<DeleteVolumeRequest>,
    ) -> Result<Response<DeleteVolumeResponse>, Status> {
        let r = request.into_inner();
        present(!r.volume_id.is_empty(), "volume_id")?;
        let api = self.api().await?;
        if self.volume(&api, &r.volume_id).await?.is_none() {
            return Ok(Response::new(DeleteVolumeResponse {}));
        }
        match api.delete_volume(&r.volume_id, false).await {
            Ok(answer) => {
                self.wait_started(&answer).await?;
            }
            Err(ClientError::Api { status: 404, .. }) => {}
            Err(e) => return Err(self.fail(e).await),
        }
        Ok(Response::new(DeleteVolumeResponse {}))
    }

    async fn controller_publish_volume(
        &self,
        request: Request<ControllerPublishVolumeRequest>,
    ) -> Result<Response<ControllerPublishVolumeResponse>, Status> {
        let r = request.into_inner();
        present(!r.volume_id.is_empty(), "volume_id")?;
        present(!r.node_id.is_empty(), "node_id")?;
        let Some(capability) = r.volume_capability.as_ref() else {
            return Err(required("volume_capability"));
        };
        check_capability(capability).map_err(Status::invalid_argument)?;
        let api = self.api().await?;
        self.existing_volume(&api, &r.volume_id).await?;
        if not_found_is_none(api.get_node::<svs_wire::views::NodeView>(&r.node_id).await)?.is_none()
        {
            return Err(Status::not_found(format!("node {} not found", r.node_id)));
        }
        if let Some(existing) = self.attachment(&api, &r.volume_id, &r.node_id).await? {
            let readonly = existing.readonly;
            if readonly != r.readonly {
                return Err(Status::already_exists(format!(
                    "volume {} is published to node {} with readonly={readonly}",
                    r.volume_id, r.node_id
                )));
            }
            if existing.state != "Attached" {
                return Err(Status::aborted(format!(
                    "the attachment of volume {} to node {} is {}",
                    r.volume_id, r.node_id, existing.state
                )));
            }
            return Ok(Response::new(ControllerPublishVolumeResponse {
                publish_context: ControllerService::publish_context(&existing),
            }));
        }
        let path = format!("/volumes/{}/snapshots/top/attachments", r.volume_id);
        // `manager: csi`: the CSI node plugin makes this attachment real;
        // the host agent leaves it alone.
        let body = json!({"node": r.node_id, "readonly": r.readonly, "manager": "csi"});
        let answer = self
            .ok(api
                .call(reqwest::Method::POST, &path, &[], Some(&body))
                .await)
            .await?;
        let api = self.wait_started(&answer).await?;
        let attachment = self
            .attachment(&api, &r.volume_id, &r.node_id)
            .await?
            .ok_or_else(|| Status::internal("the attachment vanished after its creation"))?;
        Ok(Response::new(ControllerPublishVolumeResponse {
            publish_context: ControllerService::publish_context(&attachment),
        }))
    }

    async fn controller_unpublish_volume(
        &self,
        request: Request<ControllerUnpublishVolumeRequest>,
    ) -> Result<Response<ControllerUnpublishVolumeResponse>, Status> {
        let r = request.into_inner();
        present(!r.volume_id.is_empty(), "volume_id")?;
        let api = self.api().await?;
        let nodes: Vec<String> = if r.node_id.is_empty() {
            // No node: unpublish from every node.
            let listed: Option<Vec<AttachmentView>> =
                not_found_is_none(api.list_attachments(Some(&r.volume_id)).await)?;
            listed
                .unwrap_or_default()
                .into_iter()
                .filter(|a| a.snapshotid == "top")
                .map(|a| a.node)
                .collect()
        } else {
            vec![r.node_id.clone()]
        };
        for node in nodes {
            match api.delete_attachment(&r.volume_id, "top", &node).await {
                Ok(answer) => {
                    self.wait_started(&answer).await?;
                }
                Err(ClientError::Api { status: 404, .. }) => {}
                Err(e) => return Err(self.fail(e).await),
            }
        }
        Ok(Response::new(ControllerUnpublishVolumeResponse {}))
    }

    async fn validate_volume_capabilities(
        &self,
        request: Request<ValidateVolumeCapabilitiesRequest>,
    ) -> Result<Response<ValidateVolumeCapabilitiesResponse>, Status> {
        let r = request.into_inner();
        present(!r.volume_id.is_empty(), "volume_id")?;
        present(!r.volume_capabilities.is_empty(), "volume_capabilities")?;
        let api = self.api().await?;
        self.existing_volume(&api, &r.volume_id).await?;
        let refused: Vec<String> = r
            .volume_capabilities
            .iter()
            .filter_map(|c| check_capability(c).err())
            .collect();
        if !refused.is_empty() {
            return Ok(Response::new(ValidateVolumeCapabilitiesResponse {
                confirmed: None,
                message: refused.join("; "),
            }));
        }
        Ok(Response::new(ValidateVolumeCapabilitiesResponse {
            confirmed: Some(validate_volume_capabilities_response::Confirmed {
                volume_context: r.volume_context,
                volume_capabilities: r.volume_capabilities,
                parameters: r.parameters,
                mutable_parameters: r.mutable_parameters,
            }),
            message: String::new(),
        }))
    }

    async fn list_volumes(
        &self,
        request: Request<ListVolumesRequest>,
    ) -> Result<Response<ListVolumesResponse>, Status> {
        let r = request.into_inner();
        let api = self.api().await?;
        let mut volumes: Vec<VolumeView> = self.ok(api.list_volumes().await).await?;
        // A stable order for offsets: by id.
        volumes.sort_by(|a, b| a.volumeid.cmp(&b.volumeid));
        let start = page_start(&r.starting_token, volumes.len())?;
        let (volumes, next_token) = page(volumes, start, r.max_entries)?;
        let entries = volumes
            .iter()
            .map(|v| list_volumes_response::Entry {
                volume: Some(csi_volume(v)),
                status: None,
            })
            .collect();
        Ok(Response::new(ListVolumesResponse {
            entries,
            next_token,
        }))
    }

    async fn get_capacity(
        &self,
        request: Request<GetCapacityRequest>,
    ) -> Result<Response<GetCapacityResponse>, Status> {
        let r = request.into_inner();
        let zone = r
            .accessible_topology
            .as_ref()
            .and_then(|t| t.segments.get(ZONE_TOPOLOGY_KEY));
        let api = self.api().await?;
        let media: Vec<MediumView> = self.ok(api.list_media().await).await?;
        let free: Vec<u64> = media
            .iter()
            .filter(|m| zone.is_none_or(|z| m.zone == *z))
            .filter(|m| m.state != "Failed")
            .map(|m| m.freesize)
            .collect();
        let total: u64 = free.iter().sum();
        Ok(Response::new(GetCapacityResponse {
            available_capacity: gib_bytes(total),
            maximum_volume_size: None,
            minimum_volume_size: Some(gib_bytes(1)),
        }))
    }

    async fn controller_get_capabilities(
        &self,
        _: Request<ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<ControllerGetCapabilitiesResponse>, Status> {
        let capabilities = [
            rpc::Type::CreateDeleteVolume,
            rpc::Type::PublishUnpublishVolume,
            rpc::Type::ListVolumes,
            rpc::Type::GetCapacity,
            rpc::Type::CreateDeleteSnapshot,
            rpc::Type::ListSnapshots,
            rpc::Type::ExpandVolume,
        ]
        .into_iter()
        .map(rpc_capability)
        .collect();
        Ok(Response::new(ControllerGetCapabilitiesResponse {
            capabilities,
        }))
    }

    async fn create_snapshot(
        &self,
        request: Request<CreateSnapshotRequest>,
    ) -> Result<Response<CreateSnapshotResponse>, Status> {
        let r = request.into_inner();
        present(!r.source_volume_id.is_empty(), "source_volume_id")?;
        present(!r.name.is_empty(), "name")?;
        let name = svs_name(&r.name);
        let api = self.api().await?;
        // CSI snapshot names are unique over all volumes; svs names are
        // unique per volume.
        let all: Vec<SnapshotView> = self.ok(api.list_all_snapshots().await).await?;
        if let Some(existing) = all.iter().find(|s| s.name == name) {
            if existing.volumeid != r.source_volume_id {
                return Err(Status::already_exists(format!(
                    "snapshot {:?} exists for another volume",
                    r.name
                )));
            }
            return Ok(Response::new(CreateSnapshotResponse {
                snapshot: Some(csi_snapshot(existing)),
            }));
        }
        self.existing_volume(&api, &r.source_volume_id).await?;
        let body = SnapshotCreateRequest {
            name: name.clone(),
            consistency: "crash".to_string(),
            ..SnapshotCreateRequest::default()
        };
        let answer = self
            .ok(api.create_snapshot(&r.source_volume_id, &body).await)
            .await?;
        let api = self.wait_started(&answer).await?;
        let snapshot = not_found_is_none(api.get_snapshot(&r.source_volume_id, &name).await)?
            .ok_or_else(|| Status::internal("the snapshot vanished after its creation"))?;
        Ok(Response::new(CreateSnapshotResponse {
            snapshot: Some(csi_snapshot(&snapshot)),
        }))
    }

    async fn delete_snapshot(
        &self,
        request: Request<DeleteSnapshotRequest>,
    ) -> Result<Response<DeleteSnapshotResponse>, Status> {
        let r = request.into_inner();
        present(!r.snapshot_id.is_empty(), "snapshot_id")?;
        // An id svs never made names no snapshot: already gone.
        let Some((volume, snapshot)) = parse_snapshot_id(&r.snapshot_id) else {
            return Ok(Response::new(DeleteSnapshotResponse {}));
        };
        let api = self.api().await?;
        match api.delete_snapshot(volume, snapshot, false).await {
            Ok(answer) => {
                self.wait_started(&answer).await?;
            }
            Err(ClientError::Api { status: 404, .. }) => {}
            Err(e) => return Err(self.fail(e).await),
        }
        Ok(Response::new(DeleteSnapshotResponse {}))
    }

    async fn list_snapshots(
        &self,
        request: Request<ListSnapshotsRequest>,
    ) -> Result<Response<ListSnapshotsResponse>, Status> {
        let r = request.into_inner();
        let api = self.api().await?;
        let mut snapshots: Vec<SnapshotView> = if !r.snapshot_id.is_empty() {
            match parse_snapshot_id(&r.snapshot_id) {
                None => Vec::new(),
                Some((volume, snapshot)) => {
                    not_found_is_none(api.get_snapshot(volume, snapshot).await)?
                        .into_iter()
                        .collect()
                }
            }
        } else if !r.source_volume_id.is_empty() {
            not_found_is_none(api.list_snapshots(&r.source_volume_id).await)?.unwrap_or_default()
        } else {
            match api.list_all_snapshots().await {
                Ok(list) => list,
                Err(e) => return Err(self.fail(e).await),
            }
        };
        if !r.source_volume_id.is_empty() {
            snapshots.retain(|s| s.volumeid == r.source_volume_id);
        }
        snapshots.sort_by(|a, b| (&a.volumeid, &a.snapshotid).cmp(&(&b.volumeid, &b.snapshotid)));
        let start = page_start(&r.starting_token, snapshots.len())?;
        let (snapshots, next_token) = page(snapshots, start, r.max_entries)?;
        let entries = snapshots
            .iter()
            .map(|s| list_snapshots_response::Entry {
                snapshot: Some(csi_snapshot(s)),
            })
            .collect();
        Ok(Response::new(ListSnapshotsResponse {
            entries,
            next_token,
        }))
    }

    /// Always in place (rule 7): `allowdatamovement` is false in the one
    /// request this sends.
    async fn controller_expand_volume(
        &self,
        request: Request<ControllerExpandVolumeRequest>,
    ) -> Result<Response<ControllerExpandVolumeResponse>, Status> {
        let r = request.into_inner();
        present(!r.volume_id.is_empty(), "volume_id")?;
        let Some(range) = r.capacity_range.as_ref() else {
            return Err(required("capacity_range"));
        };
        let gib = capacity_gib(Some(range))?;
        let mut api = self.api().await?;
        let volume = self.existing_volume(&api, &r.volume_id).await?;
        let node_expansion_required = match &r.volume_capability {
            Some(c) => !is_block(c),
            None => volume.kind == "file",
        };
        let size = volume.size;
        if gib > size {
            let body = json!({"size": gib, "allowdatamovement": false});
            let path = format!("/volumes/{}", r.volume_id);
            let answer = match api
                .call(reqwest::Method::PATCH, &path, &[], Some(&body))
                .await
            {
                Ok(a) => a,
                // The size is the only input: its bounds (10 × the size,
                // the largest volume) are OUT_OF_RANGE.
                Err(ClientError::Api {
                    status: 400,
                    message,
                }) => return Err(Status::out_of_range(message)),
                Err(e) => return Err(self.fail(e).await),
            };
            api = self.wait_started(&answer).await?;
        }
        let now = self
            .volume(&api, &r.volume_id)
            .await?
            .map_or(size.max(gib), |v| v.size);
        Ok(Response::new(ControllerExpandVolumeResponse {
            capacity_bytes: gib_bytes(now),
            node_expansion_required,
        }))
    }

    async fn controller_get_volume(
        &self,
        _: Request<ControllerGetVolumeRequest>,
    ) -> Result<Response<ControllerGetVolumeResponse>, Status> {
        Err(Status::unimplemented(
            "ControllerGetVolume is not supported",
        ))
    }

    async fn controller_modify_volume(
        &self,
        _: Request<ControllerModifyVolumeRequest>,
    ) -> Result<Response<ControllerModifyVolumeResponse>, Status> {
        Err(Status::unimplemented(
            "ControllerModifyVolume is not supported",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_walk_by_offset() {
        let items: Vec<u32> = (0..5).collect();
        let (first, next) = page(items.clone(), 0, 2).unwrap();
        assert_eq!((first, next.as_str()), (vec![0, 1], "2"));
        let (last, next) = page(items.clone(), 4, 2).unwrap();
        assert_eq!((last, next.as_str()), (vec![4], ""));
        let (all, next) = page(items, 0, 0).unwrap();
        assert_eq!((all.len(), next.as_str()), (5, ""));
        assert_eq!(
            page_start("x", 5).unwrap_err().code(),
            svs_csi::tonic::Code::Aborted
        );
        assert_eq!(
            page_start("6", 5).unwrap_err().code(),
            svs_csi::tonic::Code::Aborted
        );
        assert_eq!(page_start("", 5).unwrap(), 0);
    }
}
