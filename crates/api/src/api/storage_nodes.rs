//! Routes of storage nodes (svs extensions): the storage node's
//! registration and heartbeat (its storage credential only), and the
//! copies a node holds (administrators).

use super::extract::Parsed;
use super::parse::{bad, opt_str, req_str, Body, ParseResult};
use super::requests::{only_fields, FromBody};
use super::views::{AdminOnly, BodyLimits, ErrorBody};
use super::{ApiError, AppState};
use axum::extract::{Path, State};
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use std::net::SocketAddr;
use svs_common::metrics::{IoTotals, MAX_IO_REPORTS};
use svs_common::slice_tls::MAX_PUBLIC_KEY_PEM;
use svs_control::service::commands::{RegisterStorageNode, StorageMediumSpec};
use svs_control::service::storage_nodes::StorageNode;
use svs_control::service::Administrator;
use svs_domain::{ResourceName, GIB};
use svs_front::wire::{FailuresBody, FailuresRecorded, FrontsAnswer, FrontsPoll};
use svs_store::NodeCopy;
use svs_wire::storage_node::{StorageNodeRegistered, StorageNodeRegistration};
use time::format_description::well_known::Rfc3339;
use utoipa::ToSchema;

/// Most media one storage node may list.
const MAX_MEDIA: usize = 256;
/// Longest medium directory shown.
const MAX_DIRECTORY: usize = 4096;

#[utoipa::path(
    put, path = "/nodes/{node}/storage", tag = "Storage nodes", operation_id = "StorageNodeRegister",
    summary = "Register a storage node, or heartbeat (storage credential only)",
    description = "svs extension, for `svs storage-node`. The node becomes (or stays) an Online storage node whose slice server listens at `sliceaddress`; each listed medium is created or updated as a medium the node manages (in the node's zone; shown in GET /media with `managedby: node`). A medium it no longer lists is removed when it holds nothing, else failed (its copies lost). A medium that exists and is not this node's (another node's, the configuration file's, the API's) refuses the whole request with 409, nothing changed. Answers the node's slice credential (what fronts present to its slice server) and how often to heartbeat. `io` carries what the node's fronts served, for the metrics of their volumes. An agent credential or a user's IdToken gets 403.",
    params(("node" = String, Path, description = "The credential's node")),
    request_body = StorageNodeRegistration,
    security(("node-credential" = [])),
    responses(BodyLimits,
        (status = 200, description = "Registered", body = StorageNodeRegistered),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Invalid or revoked node credential", body = ErrorBody),
        (status = 403, description = "Another node's credential, or not a storage credential", body = ErrorBody),
        (status = 409, description = "A listed medium is not this node's", body = ErrorBody),
    ),
)]
pub async fn register_storage_node(
    State(app): State<AppState>,
    storage: StorageNode,
    Path(node): Path<String>,
    Parsed(request): Parsed<RegisterStorageNode>,
) -> Result<Json<StorageNodeRegistered>, ApiError> {
    let r = app.register_storage_node(&storage, &node, &request).await?;
    Ok(Json(StorageNodeRegistered {
        slicecredential: r.slice_credential,
        heartbeatseconds: r.heartbeat_seconds,
        slicetls: r.slice_tls.as_str().to_string(),
        sliceca: r.slice_ca.unwrap_or_default(),
        slicecertificateexpires: r
            .slice_certificate
            .as_ref()
            .and_then(|c| c.not_after.format(&Rfc3339).ok())
            .unwrap_or_default(),
        slicecertificate: r.slice_certificate.map(|c| c.pem).unwrap_or_default(),
    }))
}

#[utoipa::path(
    get, path = "/nodes/{node}/copies", tag = "Nodes", operation_id = "NodeCopies",
    summary = "The copies of slices on a node's media (administrators only)",
    description = "svs extension: every copy on the node's media, of every tenant, by volume name, copy and column. `state` is `Lost` when its medium failed or the copy missed writes (a storage node that was Offline), else `Healthy`.",
    params(("node" = String, Path, description = "The node's name")),
    security(("storage.io-authorizer" = [])),
    responses(AdminOnly,
        (status = 200, description = "The copies", body = Vec<NodeCopyView>),
        (status = 404, description = "No such node", body = ErrorBody),
    ),
)]
pub async fn node_copies(
    State(app): State<AppState>,
    admin: Administrator,
    Path(node): Path<String>,
) -> Result<Json<Vec<NodeCopyView>>, ApiError> {
    let copies = app.node_copies(&admin, &node).await?;
    Ok(Json(copies.iter().map(copy_view).collect()))
}

impl FromBody for RegisterStorageNode {
    /// `{"sliceaddress": "127.0.0.2:7450", "media": [{"name": "d1",
    /// "size": 10737418240, "directory": "/srv/d1"}]}`.
    fn from_body(body: &Body) -> ParseResult<RegisterStorageNode> {
        only_fields(
            body,
            &[
                "sliceaddress",
                "media",
                "slicepublickey",
                "frontaddress",
                "io",
            ],
        )?;
        let address = req_str(body, "sliceaddress")?;
        let slice_address = address.parse::<SocketAddr>().map_err(|_| {
            bad(format!(
                "sliceaddress '{address}' is not an IP:PORT address"
            ))
        })?;
        let media = match body.get("media") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(storage_medium)
                .collect::<ParseResult<Vec<_>>>()?,
            Some(_) => return Err(bad("media must be an array")),
        };
        if media.len() > MAX_MEDIA {
            return Err(bad(format!("at most {MAX_MEDIA} media per storage node")));
        }
        for (i, m) in media.iter().enumerate() {
            if media[..i]
                .iter()
                .any(|o| o.name.as_str() == m.name.as_str())
            {
                return Err(bad(format!("medium '{}' is listed twice", m.name.as_str())));
            }
        }
        let slice_public_key = opt_str(body, "slicepublickey")?.map(str::to_string);
        if slice_public_key
            .as_ref()
            .is_some_and(|k| k.len() > MAX_PUBLIC_KEY_PEM)
        {
            return Err(bad("slicepublickey is too long"));
        }
        let front_address = opt_str(body, "frontaddress")?
            .filter(|a| !a.is_empty())
            .map(|a| {
                a.parse::<SocketAddr>()
                    .map_err(|_| bad(format!("frontaddress '{a}' is not an IP:PORT address")))
            })
            .transpose()?;
        let io = match body.get("io") {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => io_report(v)?,
        };
        Ok(RegisterStorageNode {
            slice_address,
            media,
            slice_public_key,
            front_address,
            io,
        })
    }
}

/// `io`: what the node's fronts served, by volume id (bounded).
fn io_report(value: &Value) -> ParseResult<Vec<IoTotals>> {
    let report: Vec<IoTotals> =
        serde_json::from_value(value.clone()).map_err(|e| bad(format!("io: {e}")))?;
    if report.len() > MAX_IO_REPORTS {
        return Err(bad(format!("io: at most {MAX_IO_REPORTS} volumes")));
    }
    if report
        .iter()
        .any(|t| t.volume.is_empty() || t.volume.len() > 64)
    {
        return Err(bad("io: each volume must be a volume id"));
    }
    Ok(report)
}

fn storage_medium(item: &Value) -> ParseResult<StorageMediumSpec> {
    let Value::Object(m) = item else {
        return Err(bad("each medium must be an object"));
    };
    only_fields(m, &["name", "size", "directory"])?;
    let name = ResourceName::parse("medium", req_str(m, "name")?).map_err(bad)?;
    let size_bytes = m
        .get("size")
        .and_then(Value::as_u64)
        .filter(|s| *s >= GIB)
        .ok_or_else(|| {
            bad(format!(
                "size of medium '{}' must be a whole number of bytes, at least 1 GiB",
                name.as_str()
            ))
        })?;
    let directory = opt_str(m, "directory")?.unwrap_or_default();
    if directory.len() > MAX_DIRECTORY {
        return Err(bad(format!(
            "directory of medium '{}' is too long",
            name.as_str()
        )));
    }
    Ok(StorageMediumSpec {
        name,
        size_bytes,
        directory: directory.to_string(),
    })
}

/// One copy of a slice on a node's media (svs extension).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = NodeCopy)]
pub struct NodeCopyView {
    pub volumeid: String,
    pub volumename: String,
    pub copy: u32,
    pub column: u32,
    pub media: String,
    /// GiB.
    pub size: u64,
    /// `Healthy` or `Lost`.
    #[schema(pattern = "^(Healthy|Lost)$")]
    pub state: &'static str,
    /// The generation a stale copy missed (see `Slice.stalegeneration`).
    pub stalegeneration: Option<u64>,
}

fn copy_view(c: &NodeCopy) -> NodeCopyView {
    NodeCopyView {
        volumeid: c.volume_id.clone(),
        volumename: c.volume_name.clone(),
        copy: c.copy,
        column: c.column,
        media: c.medium.clone(),
        size: c.size,
        state: if c.lost { "Lost" } else { "Healthy" },
        stalegeneration: c.stale_generation,
    }
}

/// Most fronts a node may report in one poll, and failures in one report.
const MAX_FRONT_ITEMS: usize = 4096;
/// Longest version or error text a node may send.
const MAX_FRONT_TEXT: usize = 4096;

#[utoipa::path(
    post, path = "/nodes/{node}/storage/fronts", tag = "Storage nodes", operation_id = "StorageNodeFronts",
    summary = "The volumes' fronts a storage node runs: a long poll (storage credential only)",
    description = "svs extension, for `svs storage-node` (setting `fronts = \"nodes\"` of svs serve). Records `open`, what the node has open (an attachment waits for its volume to be reported open at its epoch), then answers the fronts wanted of the node as soon as their `version` differs from the one sent, or after 20 s with the same. An agent credential or a user's IdToken gets 403.",
    params(("node" = String, Path, description = "The credential's node")),
    request_body = FrontsPoll,
    security(("node-credential" = [])),
    responses(BodyLimits,
        (status = 200, description = "The fronts wanted of the node", body = FrontsAnswer),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Invalid or revoked node credential", body = ErrorBody),
        (status = 403, description = "Another node's credential, or not a storage credential", body = ErrorBody),
    ),
)]
pub async fn storage_node_fronts(
    State(app): State<AppState>,
    storage: StorageNode,
    Path(node): Path<String>,
    Parsed(poll): Parsed<FrontsPoll>,
) -> Result<Json<FrontsAnswer>, ApiError> {
    Ok(Json(app.poll_fronts(&storage, &node, poll).await?))
}

#[utoipa::path(
    post, path = "/nodes/{node}/storage/failures", tag = "Storage nodes", operation_id = "StorageNodeFailures",
    summary = "Copy failures the fronts of a storage node met (storage credential only)",
    description = "svs extension, for `svs storage-node`. Each failure is recorded as one svs serve's own I/O met: `mediumfailed` fails the medium (every copy on it lost), else that copy alone is lost. Only failures of volumes whose front the node runs, on media holding a copy of the volume, count. `recorded`: how many changed what svs knew; `refused`: the failures not taken (the volume is gone, or its front is not the node's; the node's front fails the writes that skipped them, as fenced), every other one is in the store when the answer is sent. An agent credential or a user's IdToken gets 403.",
    params(("node" = String, Path, description = "The credential's node")),
    request_body = FailuresBody,
    security(("node-credential" = [])),
    responses(BodyLimits,
        (status = 200, description = "Recorded", body = FailuresRecorded),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Invalid or revoked node credential", body = ErrorBody),
        (status = 403, description = "Another node's credential, or not a storage credential", body = ErrorBody),
    ),
)]
pub async fn storage_node_failures(
    State(app): State<AppState>,
    storage: StorageNode,
    Path(node): Path<String>,
    Parsed(body): Parsed<FailuresBody>,
) -> Result<Json<FailuresRecorded>, ApiError> {
    Ok(Json(
        app.record_front_failures(&storage, &node, body).await?,
    ))
}

/// A body read with the shared wire types, with serde's words for what is
/// wrong (`missing field`, `invalid type`).
fn wire_body<T: serde::de::DeserializeOwned>(body: &Body) -> ParseResult<T> {
    serde_json::from_value(Value::Object(body.clone())).map_err(|e| bad(e.to_string()))
}

impl FromBody for FrontsPoll {
    /// `{"version": "", "open": [{"volume": "vol-1", "epoch": 3, "error": ""}]}`.
    fn from_body(body: &Body) -> ParseResult<FrontsPoll> {
        let poll: FrontsPoll = wire_body(body)?;
        if poll.version.len() > MAX_FRONT_TEXT {
            return Err(bad("version is too long"));
        }
        if poll.open.len() > MAX_FRONT_ITEMS {
            return Err(bad(format!("at most {MAX_FRONT_ITEMS} fronts in open")));
        }
        for o in &poll.open {
            if o.volume.is_empty() {
                return Err(bad("each front in open needs its volume"));
            }
            if o.volume.len() > MAX_FRONT_TEXT || o.error.len() > MAX_FRONT_TEXT {
                return Err(bad(format!("front '{}': too long", o.volume)));
            }
        }
        Ok(poll)
    }
}

impl FromBody for FailuresBody {
    /// `{"failures": [{"medium": "d1", "volume": "vol-1", "copy": 0,
    /// "column": 2, "mediumfailed": false}]}`.
    fn from_body(body: &Body) -> ParseResult<FailuresBody> {
        let failures: FailuresBody = wire_body(body)?;
        if failures.failures.len() > MAX_FRONT_ITEMS {
            return Err(bad(format!("at most {MAX_FRONT_ITEMS} failures at once")));
        }
        if failures
            .failures
            .iter()
            .any(|f| f.medium.is_empty() || f.volume.is_empty())
        {
            return Err(bad("each failure needs its medium and volume"));
        }
        Ok(failures)
    }
}
