//! Copies marked lost, and the generation each missed.

use crate::rows::STALE_GENERATION;
use crate::StoreResult;
use sqlx::SqliteConnection;

/// Marks every slice on the medium lost (those not lost already), each
/// with the generation it missed.
pub(super) async fn lose_slices_on(
    conn: &mut SqliteConnection,
    medium: &str,
    now_ms: i64,
) -> StoreResult<()> {
    sqlx::query(&format!(
        "UPDATE slices SET lost_ms = ?, stale_generation = {STALE_GENERATION} \
         WHERE medium_id = ? AND lost_ms IS NULL"
    ))
    .bind(now_ms)
    .bind(medium)
    .execute(&mut *conn)
    .await?;
    Ok(())
}
