//! Which storage nodes' media this process's data plane reaches.
//!
//! The instance a storage node registers with (or heartbeats to) serves
//! the node's media at once (`Services::serve_node_media`). At start, and
//! with several instances on one database all along, the store's record of
//! the nodes is what every other instance goes by: [`NodeMediaSync`] serves
//! every node medium the store knows that the data plane does not reach yet,
//! or reaches at an address or with a credential the node no longer has.
//! A node that does not answer is tried again at the next pass.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use svs_common::slice_tls::SliceTls;
use svs_dataplane::{DataPlane, NodeEndpoint};
use svs_store::{ManagedBy, Store};
use tokio_util::sync::CancellationToken;

/// How long an operation waits for a storage node's medium that the store
/// lists and this process does not reach yet (see [`NodeMediaSync::reach`]):
/// normally well under a second; a node that does not answer for this long
/// is not coming up.
pub const REACH_WAIT: Duration = Duration::from_secs(10);

/// How often [`NodeMediaSync::reach`] tries again.
const REACH_RETRY: Duration = Duration::from_millis(100);

/// A node as last served: its slice address, credential and media.
type ServedNode = (String, String, Vec<String>);

pub struct NodeMediaSync {
    store: Arc<dyn Store>,
    media: Arc<dyn DataPlane>,
    slice_tls: Arc<SliceTls>,
    /// Each node's (slice address, credential, media) as last served: a
    /// node whose record is unchanged and whose media are all served is
    /// left alone (no round trip to it).
    served: Mutex<HashMap<String, ServedNode>>,
}

impl NodeMediaSync {
    pub fn new(
        store: Arc<dyn Store>,
        media: Arc<dyn DataPlane>,
        slice_tls: Arc<SliceTls>,
    ) -> NodeMediaSync {
        NodeMediaSync {
            store,
            media,
            slice_tls,
            served: Mutex::new(HashMap::new()),
        }
    }

    /// One pass: serves what the store knows and the data plane does not.
    pub async fn sync(&self) {
        self.pass().await;
    }

    /// Makes the data plane reach each of `media` that the store lists on a
    /// storage node and the data plane does not serve yet, trying again
    /// every 100 ms for up to `within`: a node starts its slice server once
    /// its first registration is answered, and another instance learns of a
    /// node only at its next pass, so a job right after a registration may
    /// find the medium listed but not reached. True when every one is
    /// served (at once, with no store read, when they already are); false
    /// when one is no storage node's medium or its node did not answer in
    /// time (the caller's operation then fails with its own error).
    pub async fn reach(&self, media: &[String], within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let missing: Vec<&String> = media
                .iter()
                .filter(|m| !self.media.serves_medium(m))
                .collect();
            if missing.is_empty() {
                return true;
            }
            match self.pass().await {
                // Not a storage node's medium: nothing to wait for.
                Some(listed) if missing.iter().any(|m| !listed.contains(m.as_str())) => {
                    return false
                }
                _ if tokio::time::Instant::now() >= deadline => return false,
                _ => {}
            }
            if missing.iter().all(|m| self.media.serves_medium(m)) {
                return true;
            }
            tokio::time::sleep(REACH_RETRY).await;
        }
    }

    /// One pass; the storage-node media the store lists (None when the
    /// store could not be read).
    async fn pass(&self) -> Option<HashSet<String>> {
        let (nodes, usage) = match (
            self.store.storage_nodes().await,
            self.store.media_usage().await,
        ) {
            (Ok(nodes), Ok(usage)) => (nodes, usage),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(error = %e, "storage nodes not read");
                return None;
            }
        };
        let listed = usage
            .iter()
            .filter(|u| u.managed_by == ManagedBy::Node)
            .map(|u| u.record.medium.id.clone())
            .collect();
        for node in nodes {
            let (Some(credential), Ok(address)) = (
                node.slice_credential.clone(),
                node.slice_address.parse::<std::net::SocketAddr>(),
            ) else {
                continue;
            };
            let node_media: Vec<String> = usage
                .iter()
                .filter(|u| u.managed_by == ManagedBy::Node && u.record.medium.node == node.name)
                .map(|u| u.record.medium.id.clone())
                .collect();
            let record = (
                node.slice_address.clone(),
                credential.clone(),
                node_media.clone(),
            );
            let all_served = node_media
                .iter()
                .all(|m| self.media.node_of(m).as_deref() == Some(node.name.as_str()));
            let unchanged = self
                .served
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&node.name)
                == Some(&record);
            if unchanged && all_served {
                continue;
            }
            let media = Arc::clone(&self.media);
            let added = serve(
                media,
                &self.slice_tls,
                &node.name,
                address,
                &credential,
                node_media,
            )
            .await;
            if added {
                self.served
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(node.name.clone(), record);
            }
        }
        Some(listed)
    }
}

/// Makes `data_plane` serve `media` of storage node `node` over its slice
/// server at `address` (a medium served already takes the endpoint, if it
/// changed); true when it serves them all. A medium not served (the node
/// not up yet) is tried again by the next call.
pub async fn serve(
    data_plane: Arc<dyn DataPlane>,
    slice_tls: &SliceTls,
    node: &str,
    address: std::net::SocketAddr,
    credential: &str,
    media: Vec<String>,
) -> bool {
    let tls = match slice_tls.client_tls(address.ip()) {
        Ok(tls) => tls,
        Err(e) => {
            tracing::error!(node, error = %e, "no TLS for the storage node's slice server");
            return false;
        }
    };
    let endpoint = NodeEndpoint {
        node: node.to_string(),
        address,
        credential: credential.to_string(),
        tls,
    };
    let node = node.to_string();
    let served = tokio::task::spawn_blocking(move || {
        let mut all = true;
        for medium in media {
            match data_plane.add_node_medium(&medium, endpoint.clone()) {
                Ok(true) => tracing::info!(node, medium, "serving a storage node's medium"),
                Ok(false) => {}
                Err(e) => {
                    tracing::debug!(node, medium, error = %e, "a storage node's medium is not served yet");
                    all = false;
                }
            }
        }
        all
    })
    .await;
    served.unwrap_or_else(|e| {
        tracing::error!(error = %e, "serving a storage node's media stopped");
        false
    })
}

impl NodeMediaSync {
    /// Passes every `period` until `stop`: how an instance learns of nodes
    /// that registered with another instance.
    pub fn keep_in_sync(self: Arc<Self>, period: Duration, stop: CancellationToken) {
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(period) => self.sync().await,
                }
            }
        });
    }
}
