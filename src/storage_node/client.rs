//! The storage node's side of `PUT /nodes/{node}/storage`: registration
//! and heartbeat, with the node's storage credential; and of the calls of
//! its fronts (`POST /nodes/{node}/storage/fronts` and `/failures`), with
//! the same credential.

use super::StorageNodeError;
use crate::common::metrics::{IoTotals, MAX_IO_REPORTS, METRICS};
use crate::front::wire::{FailuresBody, FailuresRecorded, FrontsAnswer, FrontsPoll};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;

/// One medium as the node offers it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct OfferedMedium {
    pub name: String,
    /// Bytes.
    pub size: u64,
    pub directory: String,
}

#[derive(Debug, Serialize)]
struct RegisterBody<'a> {
    sliceaddress: String,
    media: &'a [OfferedMedium],
    /// The node's slice public key (PEM), when it needs a certificate.
    #[serde(skip_serializing_if = "Option::is_none")]
    slicepublickey: Option<&'a str>,
    /// Where attaching nodes reach the fronts this node runs (its NBD
    /// server).
    frontaddress: String,
    /// What the fronts this node runs served (the control plane's
    /// metrics of their volumes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    io: Vec<IoTotals>,
}

/// The control plane's answer.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Registered {
    pub slicecredential: String,
    pub heartbeatseconds: u64,
    /// How fronts connect: `off`, `issued` or `own` (`SliceTlsMode`).
    #[serde(default)]
    pub slicetls: String,
    /// Fingerprint of the CA issuing slice certificates (`issued`).
    #[serde(default)]
    pub sliceca: String,
    /// The certificate issued for the public key sent (PEM), if any.
    #[serde(default)]
    pub slicecertificate: String,
    /// Its end (RFC 3339).
    #[serde(default)]
    pub slicecertificateexpires: String,
}

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
        let http = crate::common::tls::trusting_ca_cert(reqwest::Client::builder())
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
        media: &[OfferedMedium],
        public_key: Option<&str>,
        timeout: Duration,
    ) -> Result<Registered, StorageNodeError> {
        let request = self
            .http
            .put(&self.url)
            .bearer_auth(&self.credential)
            .timeout(timeout)
            .json(&RegisterBody {
                sliceaddress: addresses.slice.to_string(),
                media,
                slicepublickey: public_key,
                frontaddress: addresses.front.to_string(),
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
        let media = [OfferedMedium {
            name: "d1".into(),
            size: 1 << 30,
            directory: "/srv/d1".into(),
        }];
        let body = RegisterBody {
            sliceaddress: "127.0.0.2:7450".into(),
            media: &media,
            slicepublickey: None,
            frontaddress: "127.0.0.2:10809".into(),
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
