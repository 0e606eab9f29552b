//! The storage node's side of `PUT /nodes/{node}/storage`: registration
//! and heartbeat, with the node's storage credential; and of the calls of
//! its fronts (`POST /nodes/{node}/storage/fronts` and `/failures`), with
//! the same credential.

use super::StorageNodeError;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::net::SocketAddr;
use std::time::Duration;
use svs_common::metrics::{MAX_IO_REPORTS, METRICS};
use svs_front::wire::{FailuresBody, FailuresRecorded, FrontsAnswer, FrontsPoll};
use svs_wire::storage_node::StorageNodeRegistration;
pub use svs_wire::storage_node::{StorageMedium, StorageNodeRegistered};

#[derive(Deserialize)]
struct Message {
    message: String,
}

pub struct ControlPlaneClient {
    http: reqwest::Client,
    url: String,
    credential: String,
}

impl ControlPlaneClient {
    pub fn new(
        api: &str,
        node: &str,
        credential: &str,
    ) -> Result<ControlPlaneClient, StorageNodeError> {
        let base = api.trim_end_matches('/');
        // The CA of `--ca-cert` / SVS_CA_CERT (issue 13's), as the agent.
        let http = svs_common::tls::trusting_ca_cert(reqwest::Client::builder())
            .user_agent(concat!("svs-storage-node/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(5))
            .pool_idle_timeout(Duration::from_secs(20))
            .build()
            .map_err(|e| StorageNodeError::Config(format!("HTTP client: {e}")))?;
        Ok(ControlPlaneClient {
            http,
            url: format!("{base}/nodes/{node}/storage"),
            credential: credential.to_string(),
        })
    }

    /// Registers (or heartbeats) with the media that are healthy now.
    pub async fn register(
        &self,
        addresses: Addresses,
        media: &[StorageMedium],
        public_key: Option<&str>,
        timeout: Duration,
    ) -> Result<StorageNodeRegistered, StorageNodeError> {
        let request = self
            .http
            .put(&self.url)
            .bearer_auth(&self.credential)
            .timeout(timeout)
            .json(&StorageNodeRegistration {
                sliceaddress: addresses.slice.to_string(),
                media: media.to_vec(),
                slicepublickey: public_key.map(str::to_string),
                frontaddress: Some(addresses.front.to_string()),
                io: METRICS.volume_io.report(MAX_IO_REPORTS),
            });
        answer(request).await
    }

    /// Says which fronts are open here, and waits (the control plane's
    /// long poll, up to `timeout`) for the fronts wanted of the node.
    pub async fn fronts(
        &self,
        poll: &FrontsPoll,
        timeout: Duration,
    ) -> Result<FrontsAnswer, StorageNodeError> {
        let request = self
            .http
            .post(format!("{}/fronts", self.url))
            .bearer_auth(&self.credential)
            .timeout(timeout)
            .json(poll);
        answer(request).await
    }

    /// Reports copy failures the node's fronts met.
    pub async fn failures(
        &self,
        body: &FailuresBody,
        timeout: Duration,
    ) -> Result<FailuresRecorded, StorageNodeError> {
        let request = self
            .http
            .post(format!("{}/failures", self.url))
            .bearer_auth(&self.credential)
            .timeout(timeout)
            .json(body);
        answer(request).await
    }
}

/// What the node registers: its slice server's and its fronts' addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addresses {
    pub slice: SocketAddr,
    pub front: SocketAddr,
}

/// Sends the request; the answer's body, or why there is none.
async fn answer<T: DeserializeOwned>(
    request: reqwest::RequestBuilder,
) -> Result<T, StorageNodeError> {
    let response = request
        .send()
        .await
        .map_err(|e| StorageNodeError::Unreachable(e.to_string()))?;
    let status = response.status();
    if !status.is_success() {
        let message = response
            .json::<Message>()
            .await
            .map(|m| m.message)
            .unwrap_or_default();
        return Err(StorageNodeError::Refused {
            status: status.as_u16(),
            message,
        });
    }
    response
        .json()
        .await
        .map_err(|e| StorageNodeError::Unreachable(format!("reading the answer: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registration_says_where_the_slice_server_and_the_fronts_are() {
        let media = [StorageMedium {
            name: "d1".into(),
            size: 1 << 30,
            directory: "/srv/d1".into(),
        }];
        let body = StorageNodeRegistration {
            sliceaddress: "127.0.0.2:7450".into(),
            media: media.to_vec(),
            slicepublickey: None,
            frontaddress: Some("127.0.0.2:10809".into()),
            io: Vec::new(),
        };
        assert_eq!(
            serde_json::to_value(&body).expect("json"),
            serde_json::json!({
                "sliceaddress": "127.0.0.2:7450",
                "media": [{"name": "d1", "size": 1073741824, "directory": "/srv/d1"}],
                "frontaddress": "127.0.0.2:10809"
            })
        );
    }
}
