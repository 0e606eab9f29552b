//! Named leases (the reconcilers' leader): one row per lease, taken or
//! renewed by one upsert. A row in a table, not a session advisory lock: on
//! PostgreSQL it holds through PgBouncer's transaction pooling and says
//! until when its owner may trust it (see docs/postgresql.md).

use super::db::{query, scalar};
use super::SqlStore;
use crate::records::LeaseTerms;
use crate::{LeaseStore, StoreResult};
use async_trait::async_trait;

/// Inserts the lease, or takes it over when it ran out or is the owner's
/// already; no row comes back while another owner's lease runs. The epoch
/// stays with a renewal and grows when the lease changes hands (a released
/// lease keeps its row, so an epoch is never given twice).
const ACQUIRE: &str = "INSERT INTO leases (name, owner, epoch, expires_ms) VALUES ($1, $2, 1, $3) \
     ON CONFLICT (name) DO UPDATE SET \
     epoch = CASE WHEN leases.owner = EXCLUDED.owner THEN leases.epoch ELSE leases.epoch + 1 END, \
     owner = EXCLUDED.owner, expires_ms = EXCLUDED.expires_ms \
     WHERE leases.owner = EXCLUDED.owner OR leases.expires_ms < $4 \
     RETURNING epoch";

/// A released lease runs out at once: any owner may take it.
const RELEASE: &str = "UPDATE leases SET expires_ms = $1 WHERE name = $2 AND owner = $3";

#[async_trait]
impl LeaseStore for SqlStore {
    async fn acquire_lease(&self, name: &str, terms: &LeaseTerms<'_>) -> StoreResult<Option<i64>> {
        let mut tx = self.begin_write().await?;
        let epoch: Option<i64> = scalar(ACQUIRE)
            .bind(name)
            .bind(terms.owner)
            .bind(terms.now_ms.saturating_add(terms.ttl_ms))
            .bind(terms.now_ms)
            .fetch_optional(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(epoch)
    }

    async fn release_lease(&self, name: &str, owner: &str) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        query(RELEASE)
            .bind(i64::MIN)
            .bind(name)
            .bind(owner)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
