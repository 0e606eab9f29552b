//! Refresh-token rows that no refresh can use any more (expired, or revoked
//! by a sign-out or a detected reuse) are deleted. Retired rows stay until
//! they expire: presenting one again is how a stolen copy is detected.

use super::{ReconcileError, Reconciler};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use svs_common::clock::Clock;
use svs_store::Store;

pub struct ExpiredRefreshTokens {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub period: Duration,
}

#[async_trait]
impl Reconciler for ExpiredRefreshTokens {
    fn name(&self) -> &'static str {
        "reconcile-refresh-tokens"
    }

    fn period(&self) -> Duration {
        self.period
    }

    async fn reconcile(&self) -> Result<usize, ReconcileError> {
        let purged = self.store.purge_refresh_tokens(self.clock.now_ms()).await?;
        Ok(usize::try_from(purged).unwrap_or(usize::MAX))
    }
}
