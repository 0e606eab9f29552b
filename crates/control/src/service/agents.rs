//! Nodes' host agents: their credentials (issued and revoked by
//! administrators), what each agent should do (the desired state of its
//! node's attachments, long-polled), and what it reports back.

use super::attachments::{attachment_uri, TOP};
use super::commands::{AgentPoll, ReportHostState};
use super::nodes::node_not_found;
use super::{Administrator, ServiceError, ServiceResult, Services};
use crate::attributes::{Filesystem, VolumeAttributes};
use sha2::{Digest, Sha256};
use std::time::Duration;
use svs_domain::{AttachmentManager, Gib, VolumeType};
use svs_store::{CredentialRole, HostReport, NodeAttachment, NodeCredential, StoreError};
use tokio::time::Instant;

/// A node credential is `svsnode.<credential id>.<secret>`.
pub const CREDENTIAL_PREFIX: &str = "svsnode.";
pub const AGENT_ONLY: &str = "only the node's agent may use this endpoint";
/// A storage node's credential on an agent route.
pub const AGENT_ONLY_NOT_STORAGE: &str =
    "only the node's agent may use this endpoint; this is a storage node credential";
pub(super) const BAD_CREDENTIAL: &str = "invalid or revoked node credential";
/// A waiting long poll reads the store at least this often, whatever the
/// change signal says.
const SAFETY_RECHECK: Duration = Duration::from_secs(5);
/// Longest text kept from an agent's report field.
const MAX_REPORT_TEXT: usize = 4096;

/// A request authenticated by a node's agent credential. Only
/// `Services::authenticate_agent` makes one.
#[derive(Debug, Clone)]
pub struct NodeAgent {
    node: String,
}

/// A request authenticated by a node credential of either role: the
/// node, and what the credential allows.
#[derive(Debug, Clone)]
pub(super) struct NodeCaller {
    pub node: String,
    pub role: CredentialRole,
}

impl NodeAgent {
    /// The node whose credential it presented.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The agent may act only for its own node.
    pub(super) fn require_node(&self, node: &str) -> ServiceResult<()> {
        require_own_node(&self.node, node)
    }
}

/// A node's credential acts only for that node (an agent or a storage node).
pub(super) fn require_own_node(own: &str, node: &str) -> ServiceResult<()> {
    if own == node {
        Ok(())
    } else {
        Err(ServiceError::Forbidden(format!(
            "this credential belongs to node '{own}', not '{node}'"
        )))
    }
}

/// A new credential: `credential` is shown once and never stored.
#[derive(Debug, Clone)]
pub struct IssuedCredential {
    pub role: CredentialRole,
    pub node: String,
    pub credential_id: String,
    pub credential: String,
    pub created_ms: i64,
}

/// One attachment as the node's agent should have it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredAttachment {
    pub volume_id: String,
    pub volume_name: String,
    pub snapshot_id: String,
    pub snapshot_name: String,
    /// `Attaching`, `Attached` or `Detaching`.
    pub state: String,
    pub readonly: bool,
    pub mountpoint: String,
    pub export_name: String,
    pub uri: String,
    pub kind: VolumeType,
    pub filesystem: Option<Filesystem>,
    pub filesystem_provisioned: bool,
    /// The volume's size for `top`, the snapshot's volume size otherwise.
    pub size: Gib,
    /// A `Csi` attachment is the CSI node plugin's: the agent skips it.
    pub manager: AttachmentManager,
    /// The running job asking for the filesystem to be grown to `size`.
    pub grow_job: Option<i64>,
}

/// Everything a node's agent should do, and its revision (a digest of it).
#[derive(Debug, Clone)]
pub struct DesiredState {
    pub node: String,
    pub revision: String,
    pub attachments: Vec<DesiredAttachment>,
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Equal strings, compared in time independent of where they differ.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// `svsnode.<id>.<secret>` → (id, secret).
fn parse_credential(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.strip_prefix(CREDENTIAL_PREFIX)?.split_once('.')?;
    (!id.is_empty() && !secret.is_empty()).then_some((id, secret))
}

/// The token of an `authorization` header value, raw or `Bearer`.
fn bearer(header: &str) -> &str {
    let raw = header.trim();
    match raw.split_once(' ') {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim(),
        _ => raw,
    }
}

/// The digest of exactly the fields an agent acts on; each field is
/// length-prefixed so no two lists hash alike by shifting text.
fn revision(attachments: &[DesiredAttachment]) -> String {
    let mut hash = Sha256::new();
    let mut field = |text: &str| {
        hash.update((text.len() as u64).to_le_bytes());
        hash.update(text.as_bytes());
    };
    for a in attachments {
        field(&a.volume_id);
        field(&a.volume_name);
        field(&a.snapshot_id);
        field(&a.snapshot_name);
        field(&a.state);
        field(if a.readonly { "ro" } else { "rw" });
        field(&a.mountpoint);
        field(&a.export_name);
        field(&a.uri);
        field(a.kind.as_str());
        field(a.filesystem.as_ref().map_or("", Filesystem::as_str));
        field(if a.filesystem_provisioned { "fs" } else { "" });
        field(&a.size.to_string());
        field(a.manager.as_str());
        field(&a.grow_job.map(|j| j.to_string()).unwrap_or_default());
    }
    hex::encode(hash.finalize())
}

fn desired(n: NodeAttachment, nbd_base: &str) -> DesiredAttachment {
    let attributes = VolumeAttributes::from_record(&n.volume_attributes);
    let a = n.attachment;
    // Only the live volume, written through this attachment, is grown.
    let grow_job = n.grow_job.filter(|_| a.snapshot == TOP && !a.readonly);
    let size = if a.snapshot == TOP {
        n.volume_size
    } else {
        n.snapshot_size.unwrap_or(n.volume_size)
    };
    DesiredAttachment {
        uri: attachment_uri(&a, nbd_base),
        volume_id: a.volume_id,
        volume_name: a.volume_name,
        snapshot_id: a.snapshot,
        snapshot_name: a.snapshot_name,
        state: a.state,
        readonly: a.readonly,
        mountpoint: a.mountpoint,
        export_name: a.export_name,
        kind: n.volume_kind,
        filesystem: attributes.filesystem,
        filesystem_provisioned: attributes.filesystem_provisioned,
        size,
        manager: a.manager,
        grow_job,
    }
}

/// Text from an agent, bounded (a detail is a message, not a log).
fn bounded(text: &Option<String>) -> Option<String> {
    text.as_ref().map(|t| {
        let mut end = t.len().min(MAX_REPORT_TEXT);
        while !t.is_char_boundary(end) {
            end -= 1;
        }
        t[..end].to_string()
    })
}

impl Services {
    /// A long poll: `read` again at each change of the desired state (and
    /// every `recheck`, a safety net), answered as soon as `changed` holds,
    /// at `wait`, or when the service stops. Subscribed before the first
    /// read, so no change after it is missed.
    pub(super) async fn long_poll<T, Fut>(
        &self,
        wait: Duration,
        recheck: Duration,
        read: impl Fn() -> Fut,
        changed: impl Fn(&T) -> bool,
    ) -> ServiceResult<T>
    where
        Fut: std::future::Future<Output = ServiceResult<T>>,
    {
        let mut changes = self.jobs.changes().subscribe();
        let stopping = self.jobs.stopping();
        let deadline = Instant::now() + wait;
        loop {
            let answer = read().await?;
            let now = Instant::now();
            if changed(&answer) || now >= deadline || stopping.is_cancelled() {
                return Ok(answer);
            }
            let nap = (deadline - now).min(recheck);
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        tokio::time::sleep(nap).await;
                    }
                }
                () = tokio::time::sleep(nap) => {}
                () = stopping.cancelled() => {}
            }
        }
    }

    /// A new credential for the node's agent; the previous one stops working.
    pub async fn issue_node_credential(
        &self,
        admin: &Administrator,
        node: &str,
        role: CredentialRole,
    ) -> ServiceResult<IssuedCredential> {
        let credential_id = hex::encode(rand::random::<[u8; 8]>());
        let secret = hex::encode(rand::random::<[u8; 32]>());
        let created_ms = self.clock.now_ms();
        self.store
            .set_node_credential(&NodeCredential {
                node: node.to_string(),
                credential_id: credential_id.clone(),
                secret_hash: sha256_hex(&secret),
                created_ms,
                role,
            })
            .await
            .map_err(|e| match e {
                StoreError::NotFound => node_not_found(node),
                other => other.into(),
            })?;
        tracing::info!(
            node,
            credential_id,
            role = role.as_str(),
            by = admin.caller().user_id,
            "node credential issued"
        );
        Ok(IssuedCredential {
            role,
            node: node.to_string(),
            credential: format!("{CREDENTIAL_PREFIX}{credential_id}.{secret}"),
            credential_id,
            created_ms,
        })
    }

    pub async fn revoke_node_credential(
        &self,
        admin: &Administrator,
        node: &str,
    ) -> ServiceResult<()> {
        if !self.store.revoke_node_credential(node).await? {
            return Err(ServiceError::NotFound(format!(
                "node '{node}' has no agent credential"
            )));
        }
        tracing::info!(node, by = admin.caller().user_id, "node credential revoked");
        Ok(())
    }

    /// The node agent behind an `authorization` header value. A user's
    /// valid IdToken is refused with 403: these routes are the agent's.
    pub async fn authenticate_agent(&self, header: Option<&str>) -> ServiceResult<NodeAgent> {
        let caller = self.authenticate_node(header, AGENT_ONLY).await?;
        if !caller.role.allows_agent() {
            return Err(ServiceError::Forbidden(AGENT_ONLY_NOT_STORAGE.into()));
        }
        Ok(NodeAgent { node: caller.node })
    }

    /// The node behind a node credential of either role. Not a node
    /// credential: 401 without a valid sign-in, else 403 with `only`.
    pub(super) async fn authenticate_node(
        &self,
        header: Option<&str>,
        only: &str,
    ) -> ServiceResult<NodeCaller> {
        let token = header.map(bearer).unwrap_or_default();
        let Some((id, secret)) = parse_credential(token) else {
            // Not a node credential: a signed-in user, or nobody.
            self.authenticate(header).await?;
            return Err(ServiceError::Forbidden(only.into()));
        };
        let bad = || ServiceError::Unauthorized(BAD_CREDENTIAL.into());
        let stored = self.store.node_credential(id).await?.ok_or_else(bad)?;
        if !same_secret(&sha256_hex(secret), &stored.secret_hash) {
            return Err(bad());
        }
        self.store
            .touch_node_agent(&stored.node, self.clock.now_ms())
            .await?;
        Ok(NodeCaller {
            node: stored.node,
            role: stored.role,
        })
    }

    async fn node_desired_state(&self, node: &str) -> ServiceResult<DesiredState> {
        let attachments: Vec<DesiredAttachment> = self
            .store
            .node_attachments(node)
            .await?
            .into_iter()
            .map(|n| desired(n, &self.nbd_base))
            .collect();
        Ok(DesiredState {
            node: node.to_string(),
            revision: revision(&attachments),
            attachments,
        })
    }

    /// The node's desired state. When the agent holds the current revision,
    /// waits (up to `wait`) for it to change; woken by the change signal,
    /// re-checked at least every few seconds, and ended by a shutdown.
    pub async fn desired_state(
        &self,
        agent: &NodeAgent,
        node: &str,
        request: &AgentPoll,
    ) -> ServiceResult<DesiredState> {
        agent.require_node(node)?;
        // Subscribed before reading, so no change after the read is missed.
        let revision = request.revision.clone();
        self.long_poll(
            request.wait,
            SAFETY_RECHECK,
            || self.node_desired_state(node),
            |state| revision.as_deref() != Some(state.revision.as_str()),
        )
        .await
    }

    /// Records what the agent sees of one of its node's attachments.
    pub async fn report_host_state(
        &self,
        agent: &NodeAgent,
        node: &str,
        volume_id: &str,
        snapshot: &str,
        request: &ReportHostState,
    ) -> ServiceResult<()> {
        agent.require_node(node)?;
        let report = HostReport {
            state: request.state.as_str().to_string(),
            detail: bounded(&request.detail),
            device: bounded(&request.device),
            mount_path: bounded(&request.mount_path),
            filesystem_bytes: request.filesystem_bytes,
            filesystem_size: request.filesystem_size,
            grow_error: bounded(&request.grow_error),
            grow_job: request.grow_job,
            updated_ms: self.clock.now_ms(),
        };
        self.store
            .set_host_report(volume_id, snapshot, node, &report)
            .await
            .map_err(|e| match e {
                StoreError::NotFound => ServiceError::NotFound(format!(
                    "volume '{volume_id}' is not attached to node '{node}'"
                )),
                other => other.into(),
            })?;
        if snapshot == TOP {
            self.filesystem_caught_up(volume_id, request).await?;
        }
        Ok(())
    }

    /// An agent grew the filesystem on its own (its periodic retry after a
    /// failed growth): the volume no longer shows a smaller filesystem.
    async fn filesystem_caught_up(
        &self,
        volume_id: &str,
        request: &ReportHostState,
    ) -> ServiceResult<()> {
        let Some(grown) = request.filesystem_size else {
            return Ok(());
        };
        let Some(v) = self.store.volume_by_id(volume_id).await? else {
            return Ok(());
        };
        if v.filesystem_size.is_some() && grown >= v.size && v.job.is_none() {
            self.store
                .set_volume_filesystem(volume_id, None, None)
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_parse_only_in_their_own_shape() {
        assert_eq!(
            parse_credential("svsnode.0123abcd0123abcd.s3cr3t"),
            Some(("0123abcd0123abcd", "s3cr3t"))
        );
        assert_eq!(parse_credential("svsnode..s"), None);
        assert_eq!(parse_credential("svsnode.id."), None);
        assert_eq!(parse_credential("svsnode.id"), None);
        assert_eq!(parse_credential("eyJhbGciOi.x.y"), None);
        assert_eq!(bearer("Bearer svsnode.a.b"), "svsnode.a.b");
        assert_eq!(bearer(" svsnode.a.b "), "svsnode.a.b");
    }

    #[test]
    fn secrets_compare_equal_only_when_identical() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
    }

    fn attachment(size: Gib) -> DesiredAttachment {
        DesiredAttachment {
            volume_id: "v1".into(),
            volume_name: "v".into(),
            snapshot_id: TOP.into(),
            snapshot_name: TOP.into(),
            state: "Attached".into(),
            readonly: false,
            mountpoint: "/mnt".into(),
            export_name: "e".into(),
            uri: "nbd://h:1/e".into(),
            kind: VolumeType::File,
            filesystem: Some(Filesystem::Ext4),
            filesystem_provisioned: true,
            size,
            manager: AttachmentManager::Agent,
            grow_job: None,
        }
    }

    #[test]
    fn the_revision_follows_every_field_an_agent_acts_on() {
        let base = revision(&[attachment(4)]);
        assert_eq!(base, revision(&[attachment(4)]));
        assert_eq!(base.len(), 64);
        assert_ne!(base, revision(&[attachment(5)]));
        assert_ne!(base, revision(&[]));
        let mut detaching = attachment(4);
        detaching.state = "Detaching".into();
        assert_ne!(base, revision(&[detaching]));
        let mut moved = attachment(4);
        moved.mountpoint = "/mn".into();
        moved.export_name = "te".into();
        assert_ne!(base, revision(&[moved]));
        let mut csi = attachment(4);
        csi.manager = AttachmentManager::Csi;
        assert_ne!(base, revision(&[csi]));
        let mut asked = attachment(4);
        asked.grow_job = Some(7);
        assert_ne!(base, revision(&[asked.clone()]));
        asked.grow_job = Some(8);
        assert_ne!(revision(&[attachment(4)]), revision(&[asked]));
    }

    #[test]
    fn report_text_is_bounded_on_a_character_boundary() {
        let long = Some("é".repeat(MAX_REPORT_TEXT));
        let kept = bounded(&long).unwrap_or_default();
        assert!(kept.len() <= MAX_REPORT_TEXT);
        assert!(kept.chars().all(|c| c == 'é'));
    }
}
