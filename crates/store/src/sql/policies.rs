//! Policies.

use super::db::{query, scalar};
use super::{conflict_on_unique, policy_row, resiliency, SqlStore};
use crate::records::{Policy, PolicyWrite};
use crate::{PolicyStore, StoreError, StoreResult};
use async_trait::async_trait;
use serde_json::Value;
use svs_domain::{check_policy_delete, check_policy_update};

#[async_trait]
impl PolicyStore for SqlStore {
    async fn create_policy(&self, tenant_id: i64, p: &PolicyWrite) -> StoreResult<Policy> {
        let attributes = Value::Object(p.attributes.clone()).to_string();
        let mut tx = self.begin_write().await?;
        let inserted = scalar(
            "INSERT INTO policies (tenant_id, name, resiliency_media, resiliency_node, \
             resiliency_zone, attributes, created_ms, created_by_name, created_by_email) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
        )
        .bind(tenant_id)
        .bind(&p.name)
        .bind(i64::from(p.resiliency.media))
        .bind(i64::from(p.resiliency.node))
        .bind(i64::from(p.resiliency.zone))
        .bind(attributes)
        .bind(p.now_ms)
        .bind(&p.by_name)
        .bind(&p.by_email)
        .fetch_one(&mut tx)
        .await;
        let id: i64 = conflict_on_unique(inserted, || {
            format!("a policy named '{}' already exists", p.name)
        })?;
        tx.commit().await?;
        Ok(Policy {
            id,
            name: p.name.clone(),
            resiliency: p.resiliency,
            attributes: p.attributes.clone(),
            created_ms: p.now_ms,
            created_by_name: p.by_name.clone(),
            created_by_email: p.by_email.clone(),
            updated_ms: None,
            updated_by_name: None,
            updated_by_email: None,
        })
    }

    async fn list_policies(&self, tenant_id: i64) -> StoreResult<Vec<Policy>> {
        let rows = query("SELECT * FROM policies WHERE tenant_id = $1 ORDER BY name")
            .bind(tenant_id)
            .fetch_all(self.reader())
            .await?;
        rows.iter().map(policy_row).collect()
    }

    async fn get_policy(&self, tenant_id: i64, name: &str) -> StoreResult<Option<Policy>> {
        let row = query("SELECT * FROM policies WHERE tenant_id = $1 AND name = $2")
            .bind(tenant_id)
            .bind(name)
            .fetch_optional(self.writer())
            .await?;
        row.as_ref().map(policy_row).transpose()
    }

    async fn update_policy(
        &self,
        tenant_id: i64,
        name: &str,
        p: &PolicyWrite,
    ) -> StoreResult<Policy> {
        let mut tx = self.begin_write().await?;
        let current = query(
            "SELECT p.resiliency_media, p.resiliency_node, p.resiliency_zone, \
             (SELECT COUNT(*) FROM volumes v WHERE v.policy_id = p.id) AS users \
             FROM policies p WHERE p.tenant_id = $1 AND p.name = $2",
        )
        .bind(tenant_id)
        .bind(name)
        .fetch_optional(&mut tx)
        .await?
        .ok_or(StoreError::NotFound)?;
        let users: i64 = current.try_get("users")?;
        check_policy_update(
            name,
            u64::try_from(users).unwrap_or(0),
            resiliency(&current)?,
            p.resiliency,
        )?;
        let updated = query(
            "UPDATE policies SET name = $1, resiliency_media = $2, resiliency_node = $3, \
             resiliency_zone = $4, attributes = $5, updated_ms = $6, updated_by_name = $7, \
             updated_by_email = $8 WHERE tenant_id = $9 AND name = $10",
        )
        .bind(&p.name)
        .bind(i64::from(p.resiliency.media))
        .bind(i64::from(p.resiliency.node))
        .bind(i64::from(p.resiliency.zone))
        .bind(Value::Object(p.attributes.clone()).to_string())
        .bind(p.now_ms)
        .bind(&p.by_name)
        .bind(&p.by_email)
        .bind(tenant_id)
        .bind(name)
        .execute(&mut tx)
        .await;
        let updated = conflict_on_unique(updated, || {
            format!("a policy named '{}' already exists", p.name)
        })?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        let row = query("SELECT * FROM policies WHERE tenant_id = $1 AND name = $2")
            .bind(tenant_id)
            .bind(&p.name)
            .fetch_one(&mut tx)
            .await?;
        let policy = policy_row(&row)?;
        tx.commit().await?;
        Ok(policy)
    }

    async fn delete_policy(&self, tenant_id: i64, name: &str) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let id: Option<i64> = scalar("SELECT id FROM policies WHERE tenant_id = $1 AND name = $2")
            .bind(tenant_id)
            .bind(name)
            .fetch_optional(&mut tx)
            .await?;
        let id = id.ok_or(StoreError::NotFound)?;
        let users: i64 = scalar("SELECT COUNT(*) FROM volumes WHERE policy_id = $1")
            .bind(id)
            .fetch_one(&mut tx)
            .await?;
        check_policy_delete(name, u64::try_from(users).unwrap_or(0))?;
        query("DELETE FROM policies WHERE id = $1")
            .bind(id)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
