//! The agent's side of the service's agent routes: the node's desired
//! attachments (a long poll) and the host state reported back. Authenticated
//! with the node's credential, which allows nothing else.

use super::AgentError;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What the service wants on this node.
#[derive(Debug, Clone, Deserialize)]
pub struct DesiredState {
    /// Changes whenever anything in `attachments` does.
    pub revision: String,
    pub attachments: Vec<DesiredAttachment>,
}

/// One attachment of a volume (or a snapshot of one) to this node.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct DesiredAttachment {
    pub volumeid: String,
    pub volumename: String,
    /// `top` (the live volume) or the snapshot's id.
    pub snapshotid: String,
    pub snapshotname: String,
    /// `Attaching`, `Attached` or `Detaching`.
    pub state: String,
    pub readonly: bool,
    /// Where to mount a `file` volume; empty: under the agent's mount root.
    pub mountpoint: String,
    pub exportname: String,
    /// `nbd://host:port/<exportname>`.
    pub uri: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub filesystem: Option<String>,
    #[serde(default)]
    pub filesystemprovisioned: bool,
    /// GiB.
    pub size: u64,
    /// `agent`, or `csi`: the CSI node plugin's, which the agent leaves
    /// alone (no device, no report).
    #[serde(default = "agent_manager")]
    pub manager: String,
    /// The job asking for the filesystem to be grown to `size`; a new one
    /// asks for a new attempt, even at the same size.
    #[serde(default)]
    pub growjob: Option<i64>,
}

fn agent_manager() -> String {
    "agent".into()
}

impl DesiredAttachment {
    /// The name of the attachment on this host (state records, devices).
    pub fn key(&self) -> String {
        format!("{}-{}", self.volumeid, self.snapshotid)
    }

    pub fn detaching(&self) -> bool {
        self.state == "Detaching"
    }

    pub fn is_file(&self) -> bool {
        self.kind == "file"
    }

    /// Made real by the CSI node plugin, not by the agent.
    pub fn is_csi(&self) -> bool {
        self.manager == "csi"
    }
}

/// The host-side state of one attachment, as the agent reports it.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct HostReport {
    /// `Connected`, `Mounted`, `Error` or `Disconnected`.
    pub hoststate: String,
    pub hostdetail: Option<String>,
    pub device: Option<String>,
    pub mountpath: Option<String>,
    pub filesystembytes: Option<u64>,
    /// GiB: the volume size the mounted filesystem was grown to fill.
    pub filesystemsize: Option<u64>,
    pub growerror: Option<String>,
    /// The job whose request the last growth attempt answered: it makes
    /// the report new to the service even when it reads like the last one.
    pub growjob: Option<i64>,
}

impl HostReport {
    pub fn state(state: &str) -> HostReport {
        HostReport {
            hoststate: state.to_string(),
            ..HostReport::default()
        }
    }

    pub fn error(detail: impl Into<String>) -> HostReport {
        HostReport {
            hoststate: "Error".into(),
            hostdetail: Some(detail.into()),
            ..HostReport::default()
        }
    }
}

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
        let http = crate::common::tls::trusting_ca_cert(reqwest::Client::builder())
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
