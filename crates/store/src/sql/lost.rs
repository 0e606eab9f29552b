//! Copies marked lost, and the generation each missed.

use super::db::{query, Tx};
use crate::rows::STALE_GENERATION;
use crate::StoreResult;

/// Marks every slice on the medium lost (those not lost already), each
/// with the generation it missed.
pub(super) async fn lose_slices_on(conn: &mut Tx, medium: &str, now_ms: i64) -> StoreResult<()> {
    query(format!(
        "UPDATE slices SET lost_ms = $1, stale_generation = {STALE_GENERATION} \
         WHERE medium_id = $2 AND lost_ms IS NULL"
    ))
    .bind(now_ms)
    .bind(medium)
    .execute(&mut *conn)
    .await?;
    Ok(())
}
