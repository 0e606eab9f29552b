//! Planning, written once: the figures a plan is made from (every healthy
//! medium with its use, the volume's slices) and the plans made from them,
//! for the jobs that carry them out and for the service's dry runs and
//! requests given a dry run's plan. No booking, no change: the job books
//! what it plans in the same transaction that saves the plan.

use std::collections::{BTreeMap, BTreeSet};
use svs_domain::{
    place_volume, plan_changed_message, plan_changes, plan_drain, plan_rebalance, plan_resize,
    MediumState, MovableVolume, PlacementRequest, PlanError, PlanShape, RebalanceArgs,
    RelocationPlan, ResizePlan, ResizeRequest, Slice, SlicePlacement,
};
use svs_store::{SliceRow, Store, StoreError, Volume};

/// Every medium a plan may use, with its use: nothing new goes on a failed
/// or a draining medium.
pub(crate) async fn media_states(store: &dyn Store) -> Result<Vec<MediumState>, StoreError> {
    Ok(store
        .media_usage()
        .await?
        .into_iter()
        .filter(|u| !u.failed && !u.draining)
        .map(|u| MediumState {
            used: u.used(),
            medium: u.record.medium,
        })
        .collect())
}

/// A resize planned from the store's figures now: what the job plans
/// with, and a dry run too.
pub(crate) struct PlannedResize {
    pub planned: Result<ResizePlan, PlanError>,
    /// The volume's slices.
    pub rows: Vec<SliceRow>,
    /// Every healthy medium with its use (the planner's input).
    pub media: Vec<MediumState>,
}

/// Plans the resize from the free space of every healthy medium and the
/// volume's slices.
pub(crate) async fn plan_resize_now(
    store: &dyn Store,
    volume: &Volume,
    new_size: u64,
    allow_data_movement: bool,
) -> Result<PlannedResize, StoreError> {
    let media = media_states(store).await?;
    let rows = store.volume_slices(&volume.id).await?;
    let slices: Vec<Slice> = rows.iter().map(|r| r.slice.clone()).collect();
    let request = ResizeRequest {
        current_size: volume.size,
        new_size,
        slices: &slices,
        resiliency: volume.resiliency,
        allow_data_movement,
    };
    Ok(PlannedResize {
        planned: plan_resize(&media, &request),
        rows,
        media,
    })
}

/// A slice's label (`c1-k0`) among `rows`, from its id.
pub(crate) fn slice_label(rows: &[SliceRow], id: i64) -> String {
    rows.iter().find(|r| r.slice.id == id).map_or_else(
        || id.to_string(),
        |r| svs_domain::slice_label(r.slice.copy, r.slice.column),
    )
}

/// A dry run's plan (`expected`) against the plan made now: the message
/// naming what changed, or None when it plans the same. The one comparison
/// of the request (409) and of its job (Error).
pub(crate) fn plan_changed(
    expected: &PlanShape,
    planned: &Result<ResizePlan, PlanError>,
    rows: &[SliceRow],
) -> Option<String> {
    let label = |id: i64| slice_label(rows, id);
    let changes = plan_changes(expected, &PlanShape::of_resize(planned), &label);
    (!changes.is_empty()).then(|| plan_changed_message(&changes))
}

/// Whether resizing `volume` to `size` GiB would now carry out the dry
/// run's plan `expected`: the message naming what changed, or None (for a
/// request given that plan).
pub(crate) async fn resize_plan_changed(
    store: &dyn Store,
    volume: &Volume,
    size: u64,
    allow_data_movement: bool,
    expected: &PlanShape,
) -> Result<Option<String>, StoreError> {
    let planned = plan_resize_now(store, volume, size, allow_data_movement).await?;
    Ok(plan_changed(expected, &planned.planned, &planned.rows))
}

/// Where a new volume of `request` would be placed now.
pub(crate) async fn preview_create(
    store: &dyn Store,
    request: &PlacementRequest,
) -> Result<CreatePreview, StoreError> {
    let media = media_states(store).await?;
    let placed = place_volume(&media, request);
    Ok(CreatePreview {
        shape: PlanShape::of_placement(&placed),
        nodes: MediaNodes::of(&media),
        placed,
    })
}

/// The node of each medium a plan may name.
#[derive(Debug, Clone, Default)]
pub struct MediaNodes(Vec<(String, String)>);

impl MediaNodes {
    pub(crate) fn of(media: &[MediumState]) -> MediaNodes {
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
        slice_label(&self.slices, slice_id)
    }
}

/// A creation placed without being carried out.
#[derive(Debug, Clone)]
pub struct CreatePreview {
    pub placed: Result<Vec<SlicePlacement>, PlanError>,
    pub shape: PlanShape,
    pub nodes: MediaNodes,
}

/// What a drain or a rebalance moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelocationScope {
    /// Every slice off this medium.
    Drain(String),
    /// Even the usage of these media.
    Rebalance(RebalanceArgs),
}

impl RelocationScope {
    /// `medium 'm1'`, `the media of node 'n1'`, ...
    pub fn describe(&self) -> String {
        match self {
            RelocationScope::Drain(m) => format!("medium '{m}'"),
            RelocationScope::Rebalance(RebalanceArgs {
                node: Some(node), ..
            }) => format!("the media of node '{node}'"),
            RelocationScope::Rebalance(RebalanceArgs {
                zone: Some(zone), ..
            }) => format!("the media of zone '{zone}'"),
            RelocationScope::Rebalance(_) => "every medium".to_string(),
        }
    }
}

/// A drain or a rebalance planned from the figures of now.
#[derive(Debug, Clone)]
pub struct PlannedRelocation {
    pub plan: RelocationPlan,
    /// Every slice of the volumes planned over, by id: its label
    /// (`c0-k1`) and its volume's name.
    pub slices: BTreeMap<i64, (String, String)>,
    /// The media planned over (in scope), with their use before the plan.
    pub media: Vec<MediumState>,
}

impl PlannedRelocation {
    /// `c0-k1 of volume 'db'`.
    pub fn label(&self, slice_id: i64) -> String {
        self.slices.get(&slice_id).map_or_else(
            || format!("slice {slice_id}"),
            |(slice, volume)| format!("{slice} of volume '{volume}'"),
        )
    }

    /// One line per move: `c0-k1 of volume 'db' from m1 to m3 (10 GiB)`.
    pub(crate) fn moves_line(&self) -> String {
        self.plan
            .moves
            .iter()
            .map(|m| {
                let s = &m.slice_move;
                format!(
                    "{} from {} to {} ({} GiB)",
                    self.label(s.slice_id),
                    s.from_medium,
                    s.to_medium,
                    s.new_size
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// One line per slice that cannot move, with why.
    pub fn stuck_lines(&self) -> Vec<String> {
        self.plan
            .stuck
            .iter()
            .map(|s| format!("{} stays: {}", self.label(s.slice_id), s.reason))
            .collect()
    }
}

/// Plans the drain or the rebalance from the store as it is now (the
/// figures the job plans with; a dry run shows the same).
pub(crate) async fn plan_relocation(
    store: &dyn Store,
    scope: &RelocationScope,
) -> Result<PlannedRelocation, StoreError> {
    let usage = store.media_usage().await?;
    let media: Vec<MediumState> = usage
        .iter()
        .filter(|u| !u.failed)
        .map(|u| MediumState {
            used: u.used(),
            medium: u.record.medium.clone(),
        })
        .collect();
    let closed: BTreeSet<&str> = usage
        .iter()
        .filter(|u| u.draining)
        .map(|u| u.record.medium.id.as_str())
        .collect();
    let scope_media: BTreeSet<&str> = media
        .iter()
        .filter(|m| match scope {
            RelocationScope::Drain(id) => &m.medium.id == id,
            RelocationScope::Rebalance(RebalanceArgs { node: Some(n), .. }) => &m.medium.node == n,
            RelocationScope::Rebalance(RebalanceArgs { zone: Some(z), .. }) => &m.medium.zone == z,
            RelocationScope::Rebalance(_) => true,
        })
        .map(|m| m.medium.id.as_str())
        .collect();

    // Every volume with a slice on a medium in scope, with all its slices
    // (one read, whatever their count).
    let scoped: Vec<String> = scope_media.iter().map(|m| m.to_string()).collect();
    let placed = store.placed_volumes_on(&scoped).await?;
    let mut slices = BTreeMap::new();
    let mut loaded = Vec::with_capacity(placed.len());
    for v in &placed {
        for r in &v.slices {
            let label = svs_domain::slice_label(r.slice.copy, r.slice.column);
            slices.insert(r.slice.id, (label, v.name.clone()));
        }
        loaded.push((
            v.slices
                .iter()
                .map(|r| r.slice.clone())
                .collect::<Vec<Slice>>(),
            v.slices
                .iter()
                .filter(|r| r.lost)
                .map(|r| r.slice.id)
                .collect::<Vec<i64>>(),
        ));
    }
    let movable: Vec<MovableVolume<'_>> = placed
        .iter()
        .zip(&loaded)
        .map(|(v, (slices, lost))| MovableVolume {
            volume_id: &v.volume_id,
            resiliency: v.resiliency,
            zone: v.zone.as_deref(),
            slices,
            lost,
        })
        .collect();
    let plan = match scope {
        RelocationScope::Drain(id) => {
            let mut closed = closed.clone();
            closed.insert(id.as_str());
            plan_drain(&media, &closed, id, &movable)
        }
        RelocationScope::Rebalance(_) => plan_rebalance(&media, &closed, &scope_media, &movable),
    };
    let in_scope = media
        .iter()
        .filter(|m| scope_media.contains(m.medium.id.as_str()))
        .cloned()
        .collect();
    Ok(PlannedRelocation {
        plan,
        slices,
        media: in_scope,
    })
}
