//! Storage nodes: hosts running `svs storage-node`, which register their
//! media with a storage credential (`PUT /nodes/{node}/storage`) and
//! heartbeat with the same call. Their media are managed by them
//! (`ManagedBy::Node`): the API and the configuration file cannot change
//! or remove them. A node that stops heartbeating goes Offline (the
//! liveness reconciler, `reconcile::storage_nodes`): every copy on its
//! media is marked lost and its media fail at once. When it heartbeats
//! again its media come back into service, but the copies they held stay
//! lost (they missed writes) and a recovery job rebuilds them elsewhere.

use super::agents::{NodeCaller, BAD_CREDENTIAL};
use super::commands::RegisterStorageNode;
use super::nodes::node_not_found;
use super::{Administrator, Caller, ServiceError, ServiceResult, Services};
use std::net::IpAddr;
use std::time::Duration;
use svs_common::slice_tls::{IssuedCertificate, SliceTlsMode};
use svs_domain::{BlockedOperation, JobSpec, RecoveryArgs, GIB};
use svs_store::{NodeCopy, StorageMedium, StorageRegistration, StoreError};

pub const STORAGE_ONLY: &str = "only the node's storage node process may use this endpoint";
/// An agent's credential on a storage route.
pub const STORAGE_ONLY_NOT_AGENT: &str =
    "only the node's storage node process may use this endpoint; this is an agent credential";
/// The default of setting `storage_node_timeout`.
pub const DEFAULT_STORAGE_NODE_TIMEOUT: Duration = Duration::from_secs(10);

/// A request authenticated by a node's storage credential. Only
/// `Services::authenticate_storage_node` makes one.
#[derive(Debug, Clone)]
pub struct StorageNode {
    node: String,
}

impl StorageNode {
    /// The node whose credential it presented.
    pub fn node(&self) -> &str {
        &self.node
    }

    pub(super) fn require_node(&self, node: &str) -> ServiceResult<()> {
        super::agents::require_own_node(&self.node, node)
    }
}

/// The answer to a registration or heartbeat.
#[derive(Debug, Clone)]
pub struct Registration {
    /// What fronts present to the node's slice server, and the only thing
    /// it accepts.
    pub slice_credential: String,
    /// How often the node should heartbeat.
    pub heartbeat_seconds: u64,
    /// How fronts connect to its slice server.
    pub slice_tls: SliceTlsMode,
    /// The CA that issues slice certificates (`Issued`), by fingerprint.
    pub slice_ca: Option<String>,
    /// The certificate issued for the public key of the request.
    pub slice_certificate: Option<IssuedCertificate>,
}

/// Seconds between two heartbeats: three fit in the timeout, so one lost
/// heartbeat never makes a node Offline.
pub fn heartbeat_seconds(timeout: Duration) -> u64 {
    (timeout.as_secs() / 3).max(1)
}

impl Services {
    /// The storage node behind an `authorization` header value: a storage
    /// credential. An agent credential or a user's IdToken is 403, an
    /// unknown or revoked credential 401.
    pub async fn authenticate_storage_node(
        &self,
        header: Option<&str>,
    ) -> ServiceResult<StorageNode> {
        let NodeCaller { node, role } = self.authenticate_node(header, STORAGE_ONLY).await?;
        if !role.allows_storage() {
            return Err(ServiceError::Forbidden(STORAGE_ONLY_NOT_AGENT.into()));
        }
        Ok(StorageNode { node })
    }

    /// A slice certificate is for the node's own address (`svs node add
    /// --address`, set by an administrator), never for one the node names:
    /// a storage credential must not buy a certificate for another host.
    async fn require_own_address(&self, node: &str, ip: IpAddr) -> ServiceResult<()> {
        let nodes = self.store.list_nodes().await?;
        let own = nodes
            .iter()
            .find(|n| n.name == node)
            .and_then(|n| n.address.as_deref());
        if own.and_then(|a| a.parse::<IpAddr>().ok()) == Some(ip) {
            return Ok(());
        }
        Err(ServiceError::Conflict(format!(
            "node '{node}' asks for a slice certificate for {ip}, but its address is {}: svs \
             issues slice certificates only for a node's own address (set it with \
             PATCH /nodes/{node} {{\"address\": \"{ip}\"}}, or listen on it)",
            own.unwrap_or("not set")
        )))
    }

    /// `PUT /nodes/{node}/storage`: a registration or heartbeat. Media
    /// that came back start the recovery of the copies they held.
    pub async fn register_storage_node(
        &self,
        caller: &StorageNode,
        node: &str,
        request: &RegisterStorageNode,
    ) -> ServiceResult<Registration> {
        caller.require_node(node)?;
        // Before anything changes: a key that cannot be signed for refuses
        // the request. Only with svs's own CA; otherwise the node serves
        // its operator's certificate and the key is not needed.
        let slice_certificate = match (&request.slice_public_key, self.slice_tls.mode()) {
            (Some(key), SliceTlsMode::Issued) => {
                let ip = request.slice_address.ip();
                self.require_own_address(node, ip).await?;
                Some(
                    self.slice_tls
                        .issue(node, ip, key)
                        .map_err(ServiceError::BadRequest)?,
                )
            }
            _ => None,
        };
        if let Some(c) = &slice_certificate {
            tracing::info!(node, address = %request.slice_address, not_after = %c.not_after,
                "issued a slice certificate");
        }
        let registration = StorageRegistration {
            node: node.to_string(),
            slice_address: request.slice_address.to_string(),
            front_address: request.front_address.map(|a| a.to_string()),
            media: request
                .media
                .iter()
                .map(|m| StorageMedium {
                    id: m.name.as_str().to_string(),
                    size: m.size_bytes / GIB,
                    directory: m.directory.clone(),
                })
                .collect(),
            now_ms: self.clock.now_ms(),
            new_slice_credential: hex::encode(rand::random::<[u8; 32]>()),
        };
        let done = self
            .store
            .register_storage_node(&registration)
            .await
            .map_err(|e| match e {
                // The credential outlived its node (removed since).
                StoreError::NotFound => ServiceError::Unauthorized(BAD_CREDENTIAL.into()),
                other => other.into(),
            })?;
        // Its fronts' I/O, for the metrics of their volumes.
        svs_common::metrics::METRICS
            .volume_io
            .set_node_report(node, request.io.clone());
        for medium in &done.failed_media {
            // The store has it Failed already (with its copies lost); open
            // volumes stop using it now.
            self.exports.fail_medium(medium);
            tracing::error!(
                node,
                medium,
                "storage node no longer lists a medium holding slices: failed, its copies lost"
            );
        }
        for medium in &done.restored_media {
            self.exports.data_plane().set_medium_failed(medium, false);
            tracing::warn!(
                node,
                medium,
                "medium of a storage node back in service; the copies it held stay lost until rebuilt"
            );
        }
        for medium in &done.added_media {
            tracing::info!(node, medium, "storage node registered a medium");
        }
        if (!done.added_media.is_empty() || done.came_back)
            && self.slice_tls.mode() == SliceTlsMode::Off
            && !request.slice_address.ip().is_loopback()
        {
            // tls = "off" was written (beyond loopback it is the default
            // otherwise): say what that costs, once per registration.
            tracing::warn!(
                node,
                address = %request.slice_address,
                "storage node serves slices beyond loopback without TLS: its slice credential and \
                 volume data cross the network in plain text (set tls = \"auto\"; docs/tls.md)"
            );
        }
        for medium in &done.removed_media {
            tracing::info!(
                node,
                medium,
                "storage node no longer lists an empty medium: removed"
            );
        }
        if done.came_back {
            tracing::warn!(node, "storage node is Online again");
        }
        self.serve_node_media(
            node,
            request.slice_address,
            &done.slice_credential,
            request
                .media
                .iter()
                .map(|m| m.name.as_str().to_string())
                .collect(),
        )
        .await;
        for volume in &done.volumes_to_recover {
            self.recover_lost_copies(node, volume).await;
        }
        Ok(Registration {
            slice_credential: done.slice_credential,
            heartbeat_seconds: heartbeat_seconds(self.storage_node_timeout),
            slice_tls: self.slice_tls.mode(),
            slice_ca: self.slice_tls.ca_fingerprint().map(str::to_string),
            slice_certificate,
        })
    }

    /// Makes the data plane serve the node's media it does not serve yet,
    /// over the node's slice server. The node starts that server after its
    /// first registration answered, so a first try may find nothing
    /// listening: the next heartbeat tries again.
    pub async fn serve_node_media(
        &self,
        node: &str,
        address: std::net::SocketAddr,
        credential: &str,
        media: Vec<String>,
    ) {
        let data_plane = std::sync::Arc::clone(self.exports.data_plane());
        // Every heartbeat comes here: media served already cost nothing.
        let media = media
            .into_iter()
            .filter(|m| data_plane.node_of(m).is_none())
            .collect();
        crate::node_media::serve(
            data_plane,
            &self.slice_tls,
            node,
            address,
            credential,
            media,
        )
        .await;
    }

    /// Starts a recovery job for a volume with copies lost on a returning
    /// node, as `POST /volumes/{volume}/recover` would, on behalf of svs.
    /// A volume that cannot start one now (busy, not Ready) is logged and
    /// left to an administrator.
    async fn recover_lost_copies(&self, node: &str, volume_id: &str) {
        let started = async {
            let v = self
                .store
                .volume_by_id(volume_id)
                .await?
                .ok_or_else(|| ServiceError::NotFound(format!("volume {volume_id} is gone")))?;
            let (_admission, v) = self
                .admit_ready(&v, BlockedOperation::VolumeRecovery)
                .await?;
            let svs = Caller {
                user_id: 0,
                tenant_id: v.tenant_id,
                email: String::new(),
                name: "svs".into(),
                is_admin: true,
            };
            let spec = JobSpec::VolumeRecovery(RecoveryArgs {
                name: v.name.clone(),
            });
            let job = self.new_job(&svs, spec, &v.id);
            let job_id = self.store.start_volume_job(&v.id, v.state, &job).await?;
            self.jobs.submit(job_id);
            Ok::<_, ServiceError>((v.name, job_id))
        };
        match started.await {
            Ok((volume, job)) => tracing::warn!(
                node,
                volume,
                job,
                "storage node returned with stale copies: recovery started"
            ),
            Err(e) => tracing::warn!(
                node,
                volume = volume_id,
                error = %e,
                "storage node returned with stale copies, but no recovery could start; \
                 recover the volume (POST /volumes/{{volume}}/recover) when it is free"
            ),
        }
    }

    /// `GET /nodes/{node}/copies`: every copy on the node's media.
    pub async fn node_copies(
        &self,
        _admin: &Administrator,
        node: &str,
    ) -> ServiceResult<Vec<NodeCopy>> {
        if !self
            .store
            .list_nodes()
            .await?
            .iter()
            .any(|n| n.name == node)
        {
            return Err(node_not_found(node));
        }
        Ok(self.store.node_copies(node).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::commands::StorageMediumSpec;
    use crate::service::testing::TestServices;
    use svs_domain::{JobState, ResourceName};
    use svs_store::{testing, NodeRecord};

    fn registration(media: &[&str]) -> RegisterStorageNode {
        RegisterStorageNode {
            slice_address: "127.0.0.2:7450".parse().expect("address"),
            media: media
                .iter()
                .map(|m| StorageMediumSpec {
                    name: ResourceName::parse("medium", m).expect("name"),
                    size_bytes: 20 * GIB,
                    directory: format!("/srv/{m}"),
                })
                .collect(),
            io: Vec::new(),
            slice_public_key: None,
            front_address: None,
        }
    }

    #[tokio::test]
    async fn a_returning_node_keeps_its_copies_lost_and_starts_their_recovery() {
        let ts = TestServices::new(Duration::from_secs(60), Duration::from_secs(60)).await;
        let app = &ts.services;
        let store = app.store.as_ref();
        store
            .create_node(&NodeRecord {
                name: "sn-1".into(),
                zone: "z1".into(),
                address: None,
                managed_by: svs_domain::ManagedBy::Api,
            })
            .await
            .expect("node");
        let sn = StorageNode {
            node: "sn-1".into(),
        };
        let first = app
            .register_storage_node(&sn, "sn-1", &registration(&["d1"]))
            .await
            .expect("registered");
        assert_eq!(first.heartbeat_seconds, 3);
        assert_eq!(first.slice_credential.len(), 64);
        let refused = app
            .register_storage_node(&sn, "sn-2", &registration(&["d1"]))
            .await;
        assert!(
            matches!(&refused, Err(ServiceError::Forbidden(m)) if m == "this credential belongs to node 'sn-1', not 'sn-2'"),
            "{refused:?}"
        );
        let (user, policy) = testing::user_and_policy(store).await;
        let job = testing::add_volume(store, &user, policy.id, "vol-1", "v", 10).await;
        store
            .place_slices("vol-1", &testing::one_slice("d1", 10))
            .await
            .expect("placed");
        store
            .finish_job(job, &testing::end(JobState::Done))
            .await
            .expect("done");

        ts.advance(Duration::from_secs(30));
        let now = svs_common::clock::Clock::now_ms(ts.clock.as_ref());
        let failed = store
            .mark_storage_node_offline("sn-1", now - 10_000, now)
            .await
            .expect("offline");
        assert_eq!(failed, Some(vec!["d1".to_string()]));

        let back = app
            .register_storage_node(&sn, "sn-1", &registration(&["d1"]))
            .await
            .expect("back");
        assert_eq!(back.slice_credential, first.slice_credential);
        let slices = store.volume_slices("vol-1").await.expect("slices");
        assert!(slices[0].lost, "the stale copy stays lost: {slices:?}");
        let recovery = store
            .active_volume_job("vol-1")
            .await
            .expect("read")
            .expect("a recovery job");
        assert_eq!(recovery.kind, "volume_recovery");
        assert_eq!(recovery.username, "svs");
    }

    #[test]
    fn a_heartbeat_comes_three_times_per_timeout_and_at_least_every_second() {
        assert_eq!(heartbeat_seconds(Duration::from_secs(10)), 3);
        assert_eq!(heartbeat_seconds(Duration::from_secs(2)), 1);
        assert_eq!(heartbeat_seconds(Duration::from_millis(500)), 1);
    }
}
