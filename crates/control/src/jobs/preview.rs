//! Dry runs of a resize and of a relocation: the plan made by
//! `crate::planning` (as the job makes it), with what only the job
//! runner can add, the bytes each move would copy as the data plane measures
//! them, and the movement rate.

use super::{slice_key, JobRunner};
use crate::planning::{plan_resize_now, MediaNodes, PlannedResize, ResizePreview};
use svs_domain::{PlanShape, GIB};
use svs_store::{StoreError, Volume};

impl JobRunner {
    /// What resizing `volume` to `size` GiB would do now (see the module
    /// docs).
    pub(crate) async fn preview_resize(
        &self,
        volume: &Volume,
        size: u64,
        allow_data_movement: bool,
    ) -> Result<ResizePreview, StoreError> {
        let ctx = self.context();
        let PlannedResize {
            planned,
            rows,
            media,
        } = plan_resize_now(ctx.store.as_ref(), volume, size, allow_data_movement).await?;
        let mut move_bytes = Vec::new();
        for m in planned.as_ref().map(|p| p.moves.as_slice()).unwrap_or(&[]) {
            let Some(row) = rows.iter().find(|r| r.slice.id == m.slice_id) else {
                continue;
            };
            let (medium, key) = (m.from_medium.clone(), slice_key(&volume.id, &row.slice));
            let most = m.old_size * GIB;
            let measured = ctx
                .blocking(move |dp| dp.slice_data_bytes(&medium, &key))
                .await;
            move_bytes.push(match measured {
                Ok(bytes) => (bytes, true),
                Err(e) => {
                    tracing::warn!(error = %e, "a dry run cannot measure a slice's data; its size is the estimate");
                    (most, false)
                }
            });
        }
        Ok(ResizePreview {
            shape: PlanShape::of_resize(&planned),
            planned,
            slices: rows,
            move_bytes,
            nodes: MediaNodes::of(&media),
            rate: ctx.rate_limit,
        })
    }
}

impl JobRunner {
    /// `movement_rate` in bytes per second (None: unthrottled).
    pub(crate) fn movement_rate(&self) -> Option<u64> {
        self.context().rate_limit
    }
}
