//! Copies marked lost, and the generation each missed.

use crate::StoreResult;
use sqlx::PgConnection;

/// What a copy marked lost records as the generation it missed: its
/// volume's front epoch when it was marked (an SQL expression over
/// `slices`, for the UPDATEs that set `lost_ms`).
pub(super) const STALE_GENERATION: &str =
    "(SELECT v.front_epoch FROM volumes v WHERE v.id = slices.volume_id)";

/// Marks every slice on the medium lost (those not lost already), each
/// with the generation it missed.
pub(super) async fn lose_slices_on(
    conn: &mut PgConnection,
    medium: &str,
    now_ms: i64,
) -> StoreResult<()> {
    sqlx::query(&format!(
        "UPDATE slices SET lost_ms = $1, stale_generation = {STALE_GENERATION} \
         WHERE medium_id = $2 AND lost_ms IS NULL"
    ))
    .bind(now_ms)
    .bind(medium)
    .execute(&mut *conn)
    .await?;
    Ok(())
}
