//! The agent's side of the service's agent routes: the node's desired
//! attachments (a long poll) and the host state reported back. Authenticated
//! with the node's credential, which allows nothing else.

use super::AgentError;
use serde::Deserialize;
use std::time::Duration;
pub use svs_wire::agent::{DesiredAttachment, DesiredState, HostReport};

/// An HTTP client for the node's agent routes.
pub struct ServiceClient {
    http: reqwest::Client,
    base: String,
    node: String,
    credential: String,
}

#[derive(Deserialize)]
struct Message {
    message: String,
}

impl ServiceClient {
    pub fn new(base: &str, node: &str, credential: &str) -> Result<ServiceClient, AgentError> {
        let base = base.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(AgentError::Config(format!(
                "the service URL must start with http:// or https://: {base}"
            )));
        }
        let http = svs_common::tls::trusting_ca_cert(reqwest::Client::builder())
            .user_agent(concat!("svs-agent/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            // Shorter than the service's keep-alive, so a request never
            // rides a connection the service is closing.
            .pool_idle_timeout(Duration::from_secs(20))
            .build()
            .map_err(|e| AgentError::Config(format!("HTTP client: {e}")))?;
        Ok(ServiceClient {
            http,
            base,
            node: node.to_string(),
            credential: credential.to_string(),
        })
    }

    fn url(&self, rest: &str) -> String {
        format!("{}/nodes/{}/agent/attachments{rest}", self.base, self.node)
    }

    /// The desired state; with `known`, waits up to `wait` for it to differ.
    pub async fn desired(
        &self,
        known: Option<&str>,
        wait: Duration,
    ) -> Result<DesiredState, AgentError> {
        let mut query = vec![("wait", wait.as_secs().to_string())];
        if let Some(r) = known {
            query.push(("revision", r.to_string()));
        }
        let response = self
            .http
            .get(self.url(""))
            .query(&query)
            .bearer_auth(&self.credential)
            .timeout(wait + Duration::from_secs(20))
            .send()
            .await
            .map_err(|e| AgentError::Unreachable(e.to_string()))?;
        let status = response.status();
        if !status.is_success() {
            return Err(refused(status, response).await);
        }
        response
            .json()
            .await
            .map_err(|e| AgentError::Unreachable(format!("reading the desired state: {e}")))
    }

    /// Reports one attachment's host state. `Ok(false)`: the service no
    /// longer has the attachment.
    pub async fn report(
        &self,
        volume_id: &str,
        snapshot_id: &str,
        report: &HostReport,
    ) -> Result<bool, AgentError> {
        let response = self
            .http
            .put(self.url(&format!("/{volume_id}/{snapshot_id}")))
            .bearer_auth(&self.credential)
            .timeout(Duration::from_secs(30))
            .json(report)
            .send()
            .await
            .map_err(|e| AgentError::Unreachable(e.to_string()))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(false);
        }
        if !status.is_success() {
            return Err(refused(status, response).await);
        }
        Ok(true)
    }
}

async fn refused(status: reqwest::StatusCode, response: reqwest::Response) -> AgentError {
    let message = response
        .json::<Message>()
        .await
        .map(|m| m.message)
        .unwrap_or_default();
    AgentError::Refused {
        status: status.as_u16(),
        message,
    }
}
