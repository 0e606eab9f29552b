//! The CSI driver (`svs csi controller`, `svs csi node`): svs volumes for
//! container orchestrators. The controller plugin speaks to svs over its
//! REST API (`svs_client`), like any client; the node plugin makes the
//! volumes real on its host with the host agent's code (`svs_agent`).
//! The gRPC plumbing and the CSI bindings are in the `svs-csi` crate.
//!
//! Seed rule 7: through CSI, data movement is not supported; volume
//! expansion uses the orchestrator's own mechanism (ControllerExpandVolume,
//! always in place, then NodeExpandVolume).

// Every gRPC call answers tonic's `Status` (176 bytes); the helpers the
// calls use return it too rather than boxing it only to unbox it.
#![allow(clippy::result_large_err)]

pub mod controller;
pub mod identity;
pub mod node;
pub mod session;

use identity::{AlwaysReady, IdentityService};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use svs_agent::device::BlockDeviceMode;
use svs_agent::host::{Host, HostConfig};
use svs_client::ClientError;
use svs_csi::tonic::Status;

pub const GIB: u64 = 1024 * 1024 * 1024;

/// Where the node plugin records its devices and mounts by default.
pub const DEFAULT_NODE_STATE_DIR: &str = "/var/lib/svs-csi";

/// `svs csi node`.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// `unix:///csi/csi.sock`.
    pub endpoint: String,
    /// This host's svs node name (the CSI node id).
    pub node: String,
    /// Its zone: NodeGetInfo's topology (always reported, as the plugin
    /// advertises accessibility constraints).
    pub zone: String,
    pub state_dir: PathBuf,
}

/// Runs the node plugin (Identity + Node) until SIGTERM or SIGINT.
/// Stopping it leaves every device and mount in place: a restarted plugin
/// takes them over from its state directory.
pub async fn run_node(config: NodeConfig) -> Result<(), String> {
    // A bad endpoint is refused before anything is made on the host.
    svs_csi::unix_path(&config.endpoint).map_err(|e| e.to_string())?;
    topology_value(&config.zone)?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the svs binary: {e}"))?;
    let host_config = HostConfig {
        // The node plugin never mounts by a default path: the orchestrator
        // names every staging and target path.
        mount_root: config.state_dir.join("mounts"),
        state_dir: config.state_dir.clone(),
        exe,
        mode: BlockDeviceMode::Fuse,
    };
    let host = tokio::task::spawn_blocking(move || Host::open(host_config))
        .await
        .map_err(|e| e.to_string())??;
    tracing::info!(
        node = config.node,
        zone = config.zone,
        endpoint = config.endpoint,
        "CSI node plugin started"
    );
    svs_csi::serve(
        &config.endpoint,
        svs_csi::Services {
            identity: IdentityService::new(AlwaysReady),
            controller: None::<svs_csi::Absent>,
            node: Some(node::NodeService::new(config.node, config.zone, host)),
        },
        svs_common::stop_signal::stop_signal_or_never(),
    )
    .await
    .map_err(|e| e.to_string())?;
    tracing::info!("CSI node plugin stopped; devices and mounts stay in place");
    Ok(())
}

/// What `svs csi controller` needs.
pub struct ControllerConfig {
    pub endpoint: String,
    pub url: String,
    pub email: String,
    pub password: String,
    pub job_timeout: std::time::Duration,
}

/// Runs the controller plugin (Identity + Controller) until stopped.
pub async fn run_controller(config: ControllerConfig) -> Result<(), String> {
    let session = std::sync::Arc::new(
        session::Session::new(&config.url, &config.email, &config.password)
            .map_err(|e| e.to_string())?,
    );
    // Sign in now: a wrong password or URL shows at start, not at the
    // first volume. The service may still be starting: Probe reports it.
    if let Err(e) = session.api().await {
        tracing::warn!(error = %e, url = %config.url, "cannot sign in to svs yet");
    }
    let services = svs_csi::Services {
        identity: identity::IdentityService::new(controller::ControllerReadiness(session.clone())),
        controller: Some(controller::ControllerService::new(
            session,
            config.job_timeout,
        )),
        node: None::<svs_csi::Absent>,
    };
    svs_csi::serve(
        &config.endpoint,
        services,
        svs_common::stop_signal::stop_signal_or_never(),
    )
    .await
    .map_err(|e| e.to_string())
}

/// A topology segment's value (`--zone`) as the CSI spec allows it: 1 to
/// 63 characters, letters, digits, '-', '_' and '.', starting and ending
/// with a letter or digit (a Kubernetes label value).
pub fn topology_value(value: &str) -> Result<String, String> {
    let bytes = value.as_bytes();
    let edge = |b: Option<&u8>| b.is_some_and(u8::is_ascii_alphanumeric);
    let ok = (1..=63).contains(&bytes.len())
        && edge(bytes.first())
        && edge(bytes.last())
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(value.to_string())
    } else {
        Err(format!(
            "zone {value:?} must be 1 to 63 letters, digits, '-', '_' or '.', \
             starting and ending with a letter or digit"
        ))
    }
}

/// A required request field that is missing or empty.
pub fn required(field: &str) -> Status {
    Status::invalid_argument(format!("{field} is required"))
}

/// Ok when the request has `field` (`given`), else [`required`]'s answer.
pub fn present(given: bool, field: &str) -> Result<(), Status> {
    if given {
        Ok(())
    } else {
        Err(required(field))
    }
}

/// A CSI name (any characters, up to 128) → an svs name: itself when svs
/// accepts it, else `csi-` + 40 hex digits of its SHA-256 (stable, so
/// retries find the same object).
pub fn svs_name(csi_name: &str) -> String {
    let plain = !csi_name.is_empty()
        && csi_name.len() <= 63
        && csi_name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if plain {
        return csi_name.to_string();
    }
    let digest = hex::encode(Sha256::digest(csi_name.as_bytes()));
    format!("csi-{}", &digest[..40])
}

/// A CSI snapshot id: `<volume id>:<snapshot id>`.
pub fn snapshot_id(volume_id: &str, snapshot_id: &str) -> String {
    format!("{volume_id}:{snapshot_id}")
}

/// `<volume id>:<snapshot id>` → its two parts; None when malformed.
pub fn parse_snapshot_id(id: &str) -> Option<(&str, &str)> {
    let (volume, snapshot) = id.split_once(':')?;
    (!volume.is_empty() && !snapshot.is_empty() && !snapshot.contains(':'))
        .then_some((volume, snapshot))
}

/// A CSI capacity range → whole GiB: required_bytes rounded up (1 GiB when
/// unset); Err(OUT_OF_RANGE) when that exceeds limit_bytes or a bound is
/// negative.
pub fn capacity_gib(range: Option<&svs_csi::proto::CapacityRange>) -> Result<u64, Status> {
    let Some(range) = range else {
        return Ok(1);
    };
    let (Ok(required), Ok(limit)) = (
        u64::try_from(range.required_bytes),
        u64::try_from(range.limit_bytes),
    ) else {
        return Err(Status::out_of_range(
            "capacity_range: bytes cannot be negative",
        ));
    };
    let gib = required.div_ceil(GIB).max(1);
    if limit > 0 && gib.saturating_mul(GIB) > limit {
        return Err(Status::out_of_range(format!(
            "capacity_range: svs volumes are whole GiB; {gib} GiB exceeds limit_bytes {limit}"
        )));
    }
    Ok(gib)
}

/// GiB → bytes, as CSI's i64.
pub fn gib_bytes(gib: u64) -> i64 {
    i64::try_from(gib.saturating_mul(GIB)).unwrap_or(i64::MAX)
}

/// The one mapping from an svs answer to a gRPC status. Calls whose CSI
/// codes differ for a status (an expansion's 400 is OUT_OF_RANGE) map it
/// themselves first.
pub fn status_of(error: ClientError) -> Status {
    match error {
        ClientError::Api { status, message } => match status {
            400 => Status::invalid_argument(message),
            401 => Status::unauthenticated(message),
            403 => Status::permission_denied(message),
            404 => Status::not_found(message),
            // "volume 'x' is busy with job N (...)", "... while data
            // movement job N is in progress": an operation is already in
            // progress on the volume.
            409 if message.contains("busy with job") || message.contains("is in progress") => {
                Status::aborted(message)
            }
            409 => Status::failed_precondition(message),
            429 => Status::resource_exhausted(message),
            503 => Status::unavailable(message),
            _ => Status::internal(message),
        },
        ClientError::Http { .. } => Status::unavailable(error.to_string()),
        ClientError::JobFailed { message, .. } => job_failure(message),
        other => Status::internal(other.to_string()),
    }
}

/// A job that ended in Error, by its last message: the seed's in-place
/// message (only a data movement could make room, and CSI never moves
/// data) is a FAILED_PRECONDITION; no room at all is RESOURCE_EXHAUSTED.
pub fn job_failure(message: String) -> Status {
    let lower = message.to_ascii_lowercase();
    if lower.contains("in-place") {
        Status::failed_precondition(message)
    } else if lower.contains("could not find") || lower.contains("not enough") {
        Status::resource_exhausted(message)
    } else {
        Status::internal(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use svs_csi::proto::CapacityRange;
    use svs_csi::tonic::Code;

    #[test]
    fn plain_names_are_kept_and_others_hashed() {
        assert_eq!(svs_name("pvc-1.a_b"), "pvc-1.a_b");
        let long = "x".repeat(64);
        let hashed = svs_name(&long);
        assert!(hashed.starts_with("csi-") && hashed.len() == 44, "{hashed}");
        assert_eq!(svs_name(&long), hashed);
        assert_ne!(svs_name("a b"), svs_name("a c"));
        assert!(svs_name("").starts_with("csi-"));
    }

    #[test]
    fn zones_are_csi_topology_values() {
        for good in ["z1", "zone-a", "a", "rack_1.b", &"z".repeat(63)] {
            assert_eq!(topology_value(good).as_deref(), Ok(good));
        }
        for bad in ["", "-a", "a-", ".a", "a b", "a/b", &"z".repeat(64)] {
            let err = topology_value(bad).unwrap_err();
            assert!(err.starts_with(&format!("zone {bad:?} must be")), "{err}");
        }
    }

    #[test]
    fn snapshot_ids_round_trip() {
        let id = snapshot_id("v-1", "s-2");
        assert_eq!(parse_snapshot_id(&id), Some(("v-1", "s-2")));
        assert_eq!(parse_snapshot_id("nocolon"), None);
        assert_eq!(parse_snapshot_id(":s"), None);
        assert_eq!(parse_snapshot_id("a:b:c"), None);
    }

    #[test]
    fn capacities_round_up_to_whole_gib() {
        let range = |required, limit| CapacityRange {
            required_bytes: required,
            limit_bytes: limit,
        };
        assert_eq!(capacity_gib(None).unwrap(), 1);
        assert_eq!(capacity_gib(Some(&range(0, 0))).unwrap(), 1);
        assert_eq!(capacity_gib(Some(&range(1, 0))).unwrap(), 1);
        assert_eq!(capacity_gib(Some(&range(GIB as i64 + 1, 0))).unwrap(), 2);
        assert_eq!(
            capacity_gib(Some(&range(GIB as i64 + 1, 3 * GIB as i64))).unwrap(),
            2
        );
        let err = capacity_gib(Some(&range(GIB as i64 + 1, GIB as i64))).unwrap_err();
        assert_eq!(err.code(), Code::OutOfRange);
        let err = capacity_gib(Some(&range(0, 1000))).unwrap_err();
        assert_eq!(err.code(), Code::OutOfRange);
        let err = capacity_gib(Some(&range(-1, 0))).unwrap_err();
        assert_eq!(err.code(), Code::OutOfRange);
    }

    #[test]
    fn svs_answers_map_to_csi_codes() {
        let api = |status, message: &str| ClientError::Api {
            status,
            message: message.to_string(),
        };
        assert_eq!(status_of(api(404, "x")).code(), Code::NotFound);
        assert_eq!(
            status_of(api(409, "volume 'v' is busy with job 3 (volume_create)")).code(),
            Code::Aborted
        );
        assert_eq!(
            status_of(api(
                409,
                "deletion is not allowed on volume 'v' while data movement job 4 is in progress"
            ))
            .code(),
            Code::Aborted
        );
        assert_eq!(
            status_of(api(409, "volume 'v' is attached")).code(),
            Code::FailedPrecondition
        );
        assert_eq!(status_of(api(400, "bad")).code(), Code::InvalidArgument);
        let in_place = ClientError::JobFailed {
            id: "1".into(),
            message: "GetModificationPlan: Could not find an in-place modification plan".into(),
        };
        assert_eq!(status_of(in_place).code(), Code::FailedPrecondition);
    }
}
