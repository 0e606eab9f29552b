//! Nodes' host agents: credentials, and their reports on attachments.

use super::attachments::attachment_select;
use super::db::{query, scalar, Tx};
use super::{node_attachment, SqlStore};
use crate::records::{CredentialRole, HostReport, NodeAgentRecord, NodeAttachment, NodeCredential};
use crate::sql::errors::optional_i64;
use crate::{NodeAgentStore, StoreError, StoreResult};
use async_trait::async_trait;

/// Forgets the node's slice credential (its credential changed).
async fn clear_slice_credential(conn: &mut Tx, node: &str) -> StoreResult<()> {
    query("UPDATE nodes SET slice_credential = NULL WHERE name = $1")
        .bind(node)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

#[async_trait]
impl NodeAgentStore for SqlStore {
    async fn set_node_credential(&self, c: &NodeCredential) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let exists: Option<String> = scalar("SELECT name FROM nodes WHERE name = $1")
            .bind(&c.node)
            .fetch_optional(&mut tx)
            .await?;
        if exists.is_none() {
            return Err(StoreError::NotFound);
        }
        query(
            "INSERT INTO node_agents (node, credential_id, secret_hash, created_ms, role) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT(node) DO UPDATE SET \
             credential_id = excluded.credential_id, secret_hash = excluded.secret_hash, \
             created_ms = excluded.created_ms, role = excluded.role",
        )
        .bind(&c.node)
        .bind(&c.credential_id)
        .bind(&c.secret_hash)
        .bind(c.created_ms)
        .bind(c.role.as_str())
        .execute(&mut tx)
        .await?;
        // A new credential: the node's slice server gets a new secret at
        // its next registration.
        clear_slice_credential(&mut tx, &c.node).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn revoke_node_credential(&self, node: &str) -> StoreResult<bool> {
        let mut tx = self.begin_write().await?;
        let r = query(
            "UPDATE node_agents SET credential_id = NULL, secret_hash = NULL, created_ms = NULL \
             WHERE node = $1 AND credential_id IS NOT NULL",
        )
        .bind(node)
        .execute(&mut tx)
        .await?;
        clear_slice_credential(&mut tx, node).await?;
        tx.commit().await?;
        Ok(r.rows_affected() > 0)
    }

    async fn node_credential(&self, credential_id: &str) -> StoreResult<Option<NodeCredential>> {
        // Every read sees what was committed before it started: a
        // revocation takes effect at the next request.
        let row = query(
            "SELECT node, credential_id, secret_hash, created_ms, role FROM node_agents \
             WHERE credential_id = $1 AND secret_hash IS NOT NULL",
        )
        .bind(credential_id)
        .fetch_optional(self.writer())
        .await?;
        row.map(|r| {
            Ok(NodeCredential {
                node: r.try_get("node")?,
                credential_id: r.try_get("credential_id")?,
                secret_hash: r.try_get("secret_hash")?,
                created_ms: r.try_get::<Option<i64>, _>("created_ms")?.unwrap_or(0),
                role: {
                    let role: String = r.try_get("role")?;
                    CredentialRole::parse(&role)
                        .ok_or_else(|| StoreError::Corrupt(format!("credential role '{role}'")))?
                },
            })
        })
        .transpose()
    }

    async fn touch_node_agent(&self, node: &str, now_ms: i64) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        query("UPDATE node_agents SET last_seen_ms = $1 WHERE node = $2")
            .bind(now_ms)
            .bind(node)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn node_agents(&self) -> StoreResult<Vec<NodeAgentRecord>> {
        let rows = query(
            "SELECT node, CAST(CASE WHEN credential_id IS NOT NULL THEN 1 ELSE 0 END AS BIGINT) \
             AS has_credential, role, last_seen_ms \
             FROM node_agents ORDER BY node",
        )
        .fetch_all(self.writer())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(NodeAgentRecord {
                    node: r.try_get("node")?,
                    credential_role: if r.try_get::<i64, _>("has_credential")? != 0 {
                        let role: String = r.try_get("role")?;
                        Some(CredentialRole::parse(&role).ok_or_else(|| {
                            StoreError::Corrupt(format!("credential role '{role}'"))
                        })?)
                    } else {
                        None
                    },
                    last_seen_ms: r.try_get("last_seen_ms")?,
                })
            })
            .collect()
    }

    async fn node_attachments(&self, node: &str) -> StoreResult<Vec<NodeAttachment>> {
        let rows = query(format!(
            "{select} WHERE a.node = $1 ORDER BY a.volume_id, a.snapshot",
            select = attachment_select(self.dialect())
        ))
        .bind(node)
        .fetch_all(self.writer())
        .await?;
        rows.iter().map(node_attachment).collect()
    }

    async fn set_host_report(
        &self,
        volume_id: &str,
        snapshot: &str,
        node: &str,
        report: &HostReport,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let r = query(
            "UPDATE attachments SET host_state = $1, host_detail = $2, host_device = $3, \
             host_mountpath = $4, fs_bytes = $5, fs_size_gib = $6, grow_error = $7, \
             grow_job = $8, host_updated_ms = $9 \
             WHERE volume_id = $10 AND snapshot = $11 AND node = $12",
        )
        .bind(&report.state)
        .bind(&report.detail)
        .bind(&report.device)
        .bind(&report.mount_path)
        .bind(optional_i64(report.filesystem_bytes)?)
        .bind(optional_i64(report.filesystem_size)?)
        .bind(&report.grow_error)
        .bind(report.grow_job)
        .bind(report.updated_ms)
        .bind(volume_id)
        .bind(snapshot)
        .bind(node)
        .execute(&mut tx)
        .await?;
        if r.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        tx.commit().await?;
        Ok(())
    }
}
