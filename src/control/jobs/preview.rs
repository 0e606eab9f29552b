//! Dry runs: what a resize or a creation would do if it were asked for
//! now, planned by the same planner from the same figures its job plans
//! with (media usage, the volume's slices), without booking or changing
//! anything. The job plans again when it runs: a plan given back with the
//! real request (its [`PlanShape`] token) is compared there, and the job
//! ends in Error naming what changed when it is no longer the plan.

use super::relocate::{PlannedRelocation, RelocationScope};
use super::resize::{plan_changed, plan_now, PlannedResize};
use super::{slice_key, JobRunner};
use svs_domain::{
    place_volume, MediumState, PlacementRequest, PlanError, PlanShape, ResizePlan, SlicePlacement,
    GIB,
};
use svs_store::{SliceRow, StoreError, Volume};

/// The node of each medium a plan may name.
#[derive(Debug, Clone, Default)]
pub struct MediaNodes(Vec<(String, String)>);

impl MediaNodes {
    fn of(media: &[MediumState]) -> MediaNodes {
        MediaNodes(
            media
                .iter()
                .map(|m| (m.medium.id.clone(), m.medium.node.clone()))
                .collect(),
        )
    }

    /// The node of `medium` ("" when unknown).
    pub fn node_of(&self, medium: &str) -> &str {
        self.0
            .iter()
            .find(|(m, _)| m == medium)
            .map_or("", |(_, n)| n.as_str())
    }
}

/// A resize planned without being carried out.
#[derive(Debug, Clone)]
pub struct ResizePreview {
    pub planned: Result<ResizePlan, PlanError>,
    pub shape: PlanShape,
    /// The volume's slices now (their labels).
    pub slices: Vec<SliceRow>,
    /// Per move (in the plan's order): the bytes of data its copy reads,
    /// and whether they were measured (else the slice's size, the most it
    /// can be: its medium did not answer).
    pub move_bytes: Vec<(u64, bool)>,
    pub nodes: MediaNodes,
    /// `movement_rate` in bytes per second (None: unthrottled).
    pub rate: Option<u64>,
}

impl ResizePreview {
    /// Seconds the moves take at `movement_rate` (one after another, as
    /// the job copies them); None when unthrottled.
    pub fn estimated_seconds(&self) -> Option<u64> {
        let bytes: u64 = self.move_bytes.iter().map(|(b, _)| b).sum();
        self.rate.map(|rate| bytes.div_ceil(rate.max(1)))
    }

    /// The slice's label (`c1-k0`).
    pub fn label(&self, slice_id: i64) -> String {
        super::resize::slice_label(&self.slices, slice_id)
    }
}

/// A creation placed without being carried out.
#[derive(Debug, Clone)]
pub struct CreatePreview {
    pub placed: Result<Vec<SlicePlacement>, PlanError>,
    pub shape: PlanShape,
    pub nodes: MediaNodes,
}

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
        } = plan_now(ctx, volume, size, allow_data_movement).await?;
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

    /// Whether resizing `volume` to `size` GiB would now carry out the
    /// dry run's plan `expected`: the message naming what changed, or None
    /// (for a request given that plan).
    pub(crate) async fn resize_plan_changed(
        &self,
        volume: &Volume,
        size: u64,
        allow_data_movement: bool,
        expected: &PlanShape,
    ) -> Result<Option<String>, StoreError> {
        let planned = plan_now(self.context(), volume, size, allow_data_movement).await?;
        Ok(plan_changed(expected, &planned.planned, &planned.rows))
    }

    /// Where a new volume of `request` would be placed now.
    pub(crate) async fn preview_create(
        &self,
        request: &PlacementRequest,
    ) -> Result<CreatePreview, StoreError> {
        let media = self.context().media_states().await?;
        let placed = place_volume(&media, request);
        Ok(CreatePreview {
            shape: PlanShape::of_placement(&placed),
            nodes: MediaNodes::of(&media),
            placed,
        })
    }
}

impl JobRunner {
    /// A drain's or a rebalance's plan as its job would make it now,
    /// without booking or changing anything (a dry run).
    pub(crate) async fn preview_relocation(
        &self,
        scope: &RelocationScope,
    ) -> Result<PlannedRelocation, StoreError> {
        super::relocate::plan_relocation(self.context().store.as_ref(), scope).await
    }

    /// `movement_rate` in bytes per second (None: unthrottled).
    pub(crate) fn movement_rate(&self) -> Option<u64> {
        self.context().rate_limit
    }
}
