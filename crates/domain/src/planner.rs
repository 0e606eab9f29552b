//! Placement of new volumes and planning of resizes.
//!
//! Pure functions: given the media (with their current use, including space
//! reserved by other jobs), a volume's slices and a request, return a plan or
//! the exact error the seed specifies. The caller persists the plan's
//! reservations atomically with the job, so two jobs never book the same space.
//!
//! Placement rules (BRIEF "Domain model"):
//! - copies kept = 1 + max(resiliency media, node, zone);
//! - no two slices of one volume share a medium (so copies of a column are on
//!   distinct media, and columns of a copy are spread);
//! - copies of the same column sit on distinct nodes when node resiliency ≥ 1,
//!   and on distinct zones when zone resiliency ≥ 1;
//! - a volume is cut into the fewest equal columns for which a placement
//!   exists (1, 2, 3, ...), each column `column_size(size, columns)` GiB;
//! - among candidate media, the one with the most free space wins (ties: the
//!   smallest id), spreading load and leaving room to grow.
//!
//! Each rule is a table of topologies, requests and the exact placement, plan
//! or error in `planner/table_tests.rs`; the tests below check single cases and the
//! corners of the search (backtracking, empty input, bounds).

use crate::model::{column_size, Gib, MediumState, Resiliency, Slice, SlicePlacement};
use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;

/// Most columns a volume is cut into.
const MAX_COLUMNS: u32 = 16;

/// Bound on the placement search (candidates examined per attempt); running
/// out counts as "no placement" for that attempt.
const MAX_SEARCH_STEPS: u64 = 100_000;

/// Informational line a resize job reports when it found a movement plan.
pub const MOVEMENT_PLAN_FOUND: &str =
    "GetMovementModificationPlan: Found movement plan. Data Movement is enabled. The operation is now being attempted";

/// Why no plan exists. The resize messages are the seed's, word for word.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlanError {
    #[error("GetModificationPlan: Could not find an in-place modification plan")]
    NoInPlacePlan,
    #[error("GetModificationPlan: Data movement is not supported for volumes with no resiliency")]
    MovementWithoutResiliency,
    #[error("GetModificationPlan: Failed to get modificationPlan for resizing volumeGroup")]
    NoMovementTarget,
    #[error("no placement found for a volume of {size} GiB with {copies} copies: not enough free space on media that satisfy the policy's resiliency")]
    NoPlacement { size: Gib, copies: u32 },
    #[error("zone '{0}' has no media")]
    UnknownZone(String),
}

/// A new volume to place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementRequest {
    pub size: Gib,
    pub resiliency: Resiliency,
    /// When set, copy 0 (every column of it) is placed in this zone.
    pub zone: Option<String>,
}

/// A resize to plan for one volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResizeRequest<'a> {
    pub current_size: Gib,
    pub new_size: Gib,
    /// The volume's slices as they are placed now.
    pub slices: &'a [Slice],
    pub resiliency: Resiliency,
    pub allow_data_movement: bool,
}

/// A slice that stays on its medium and grows there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceGrowth {
    pub slice_id: i64,
    pub medium: String,
    pub from: Gib,
    pub to: Gib,
}

/// A slice whose medium lacks room: copied to `to_medium`, then grown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceMove {
    pub slice_id: i64,
    pub from_medium: String,
    pub to_medium: String,
    pub old_size: Gib,
    pub new_size: Gib,
}

/// Space a plan books on a medium until its job ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub medium: String,
    pub gib: Gib,
}

/// The outcome of planning a resize.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResizePlan {
    /// Size every slice has once the resize is done.
    pub new_slice_size: Gib,
    /// Slices that grow where they are (every slice not in `moves`).
    pub growths: Vec<SliceGrowth>,
    /// Slices that move; empty for an in-place plan.
    pub moves: Vec<SliceMove>,
    /// What to book: the growth on each staying slice's medium, the full new
    /// size on each move's target. One entry per medium (amounts summed).
    pub reservations: Vec<Reservation>,
}

impl ResizePlan {
    pub fn is_in_place(&self) -> bool {
        self.moves.is_empty()
    }
}

/// Places a new volume: returns one placement per (copy, column).
pub fn place_volume(
    media: &[MediumState],
    request: &PlacementRequest,
) -> Result<Vec<SlicePlacement>, PlanError> {
    if let Some(zone) = &request.zone {
        if !media.iter().any(|m| &m.medium.zone == zone) {
            return Err(PlanError::UnknownZone(zone.clone()));
        }
    }
    let resiliency = request.resiliency;
    let copies = resiliency.copies();
    let media_per_copy = u32::try_from(media.len() / copies.max(1) as usize).unwrap_or(u32::MAX);
    let max_columns = MAX_COLUMNS.min(media_per_copy).max(1);
    let candidates = candidates(media, &BTreeSet::new());

    for columns in 1..=max_columns {
        let col = column_size(request.size, columns);
        // Column-major: all copies of column 0, then of column 1, ...; the
        // resiliency constraints are per column, so dead ends show up early.
        let slots: Vec<Slot<'_>> = (0..columns)
            .flat_map(|column| (0..copies).map(move |copy| (column, copy)))
            .map(|(column, copy)| Slot {
                column,
                zone: if copy == 0 {
                    request.zone.as_deref()
                } else {
                    None
                },
            })
            .collect();
        if let Some(chosen) = search(&candidates, col, &slots, &[], resiliency) {
            let mut placements: Vec<SlicePlacement> = (0..columns)
                .flat_map(|column| (0..copies).map(move |copy| (column, copy)))
                .zip(chosen)
                .map(|((column, copy), medium)| SlicePlacement {
                    copy,
                    column,
                    medium: medium.medium.id.clone(),
                    size: col,
                })
                .collect();
            placements.sort_by_key(|p| (p.copy, p.column));
            return Ok(placements);
        }
    }
    Err(PlanError::NoPlacement {
        size: request.size,
        copies,
    })
}

/// Plans a resize (BRIEF "The resize rules" 1–3; the size bounds are checked
/// before, by `validate_new_size`).
///
/// Order of decisions:
/// 1. `allow_data_movement` with no resiliency → `MovementWithoutResiliency`.
/// 2. Every medium the volume uses has room for its slice's growth → in-place plan.
/// 3. Otherwise, without data movement → `NoInPlacePlan`.
/// 4. With data movement, only the slices on media lacking room move, each to a
///    medium that has room for its *new* size and keeps the placement rules
///    (given where every other slice of the volume will be) → movement plan;
///    if any such slice has no target → `NoMovementTarget`.
pub fn plan_resize(
    media: &[MediumState],
    request: &ResizeRequest<'_>,
) -> Result<ResizePlan, PlanError> {
    // 1. Data movement needs a copy to fall back on.
    if request.allow_data_movement && request.resiliency.is_none() {
        return Err(PlanError::MovementWithoutResiliency);
    }

    let columns = request
        .slices
        .iter()
        .map(|s| s.column)
        .collect::<BTreeSet<_>>()
        .len();
    let columns = u32::try_from(columns).unwrap_or(u32::MAX).max(1);
    let new_col = column_size(request.new_size, columns);

    let mut slices: Vec<&Slice> = request.slices.iter().collect();
    slices.sort_by_key(|s| (s.copy, s.column, s.id));

    // What this volume's slices need on each medium to grow in place.
    let mut need: BTreeMap<&str, Gib> = BTreeMap::new();
    for s in &slices {
        let entry = need.entry(s.medium.as_str()).or_insert(0);
        *entry = entry.saturating_add(new_col.saturating_sub(s.size));
    }
    let lacking: BTreeSet<&str> = need
        .iter()
        .filter(|(id, need)| find(media, id).is_none_or(|m| m.free() < **need))
        .map(|(id, _)| *id)
        .collect();

    let (staying, moving): (Vec<&Slice>, Vec<&Slice>) = slices
        .iter()
        .partition(|s| !lacking.contains(s.medium.as_str()));

    // 2. Everything fits where it is.
    if moving.is_empty() {
        return Ok(build_plan(new_col, &staying, Vec::new()));
    }
    // 3. It does not, and the data may not move.
    if !request.allow_data_movement {
        return Err(PlanError::NoInPlacePlan);
    }

    // 4. Move the slices on media lacking room; every medium the volume uses
    //    now (staying or moving away) is out of bounds as a target.
    let occupied: BTreeSet<&str> = slices.iter().map(|s| s.medium.as_str()).collect();
    let fixed: Vec<Fixed<'_>> = staying
        .iter()
        .filter_map(|s| {
            find(media, &s.medium).map(|m| Fixed {
                column: s.column,
                node: &m.medium.node,
                zone: &m.medium.zone,
            })
        })
        .collect();
    let slots: Vec<Slot<'_>> = moving
        .iter()
        .map(|s| Slot {
            column: s.column,
            zone: None,
        })
        .collect();
    let candidates = candidates(media, &occupied);
    let targets = search(&candidates, new_col, &slots, &fixed, request.resiliency)
        .ok_or(PlanError::NoMovementTarget)?;
    let moves = moving
        .iter()
        .zip(targets)
        .map(|(s, target)| SliceMove {
            slice_id: s.id,
            from_medium: s.medium.clone(),
            to_medium: target.medium.id.clone(),
            old_size: s.size,
            new_size: new_col,
        })
        .collect();
    Ok(build_plan(new_col, &staying, moves))
}

/// The medium with this id (the first, should `media` list it twice).
fn find<'a>(media: &'a [MediumState], id: &str) -> Option<&'a MediumState> {
    media.iter().find(|m| m.medium.id == id)
}

/// Media that may receive a slice, most free first (ties: smallest id), one
/// per id, leaving out `excluded`.
fn candidates<'a>(media: &'a [MediumState], excluded: &BTreeSet<&str>) -> Vec<&'a MediumState> {
    let mut seen = BTreeSet::new();
    let mut out: Vec<&MediumState> = media
        .iter()
        .filter(|m| !excluded.contains(m.medium.id.as_str()))
        .filter(|m| seen.insert(m.medium.id.as_str()))
        .collect();
    out.sort_by(|a, b| {
        b.free()
            .cmp(&a.free())
            .then_with(|| a.medium.id.cmp(&b.medium.id))
    });
    out
}

/// A slice to find a medium for.
struct Slot<'a> {
    column: u32,
    /// The zone the medium must be in, if any.
    zone: Option<&'a str>,
}

/// A slice of the volume that stays where it is (constrains its column's copies).
struct Fixed<'a> {
    column: u32,
    node: &'a str,
    zone: &'a str,
}

/// Whether two copies of one column may sit on these two media's nodes/zones.
pub(crate) fn compatible(
    resiliency: Resiliency,
    a_node: &str,
    a_zone: &str,
    b_node: &str,
    b_zone: &str,
) -> bool {
    let same_node = resiliency.node >= 1 && a_node == b_node;
    let same_zone = resiliency.zone >= 1 && a_zone == b_zone;
    !same_node && !same_zone
}

/// Finds one distinct medium per slot, each with at least `size` free, such
/// that copies of a column respect the resiliency (against each other and
/// against `fixed`). Greedy in `candidates` order with backtracking, bounded
/// by `MAX_SEARCH_STEPS`. Returns the media in slot order.
fn search<'a>(
    candidates: &[&'a MediumState],
    size: Gib,
    slots: &[Slot<'_>],
    fixed: &[Fixed<'_>],
    resiliency: Resiliency,
) -> Option<Vec<&'a MediumState>> {
    let cands: Vec<&MediumState> = candidates
        .iter()
        .copied()
        .filter(|m| m.free() >= size)
        .collect();
    if !may_fit(&cands, slots, resiliency) {
        return None;
    }
    let fits = |slot_i: usize, cand_i: usize, assigned: &[usize], used: &[bool]| -> bool {
        if used[cand_i] {
            return false;
        }
        let (slot, m) = (&slots[slot_i], &cands[cand_i].medium);
        if slot.zone.is_some_and(|z| z != m.zone) {
            return false;
        }
        let clashes_fixed = fixed
            .iter()
            .filter(|f| f.column == slot.column)
            .any(|f| !compatible(resiliency, &m.node, &m.zone, f.node, f.zone));
        let clashes_assigned = assigned
            .iter()
            .enumerate()
            .filter(|(j, _)| slots[*j].column == slot.column)
            .any(|(_, &c)| {
                let o = &cands[c].medium;
                !compatible(resiliency, &m.node, &m.zone, &o.node, &o.zone)
            });
        !clashes_fixed && !clashes_assigned
    };

    let mut used = vec![false; cands.len()];
    let mut assigned: Vec<usize> = Vec::with_capacity(slots.len());
    let mut start = 0;
    let mut steps: u64 = 0;
    while assigned.len() < slots.len() {
        let slot_i = assigned.len();
        let mut found = None;
        for cand_i in start..cands.len() {
            steps += 1;
            if steps > MAX_SEARCH_STEPS {
                return None;
            }
            if fits(slot_i, cand_i, &assigned, &used) {
                found = Some(cand_i);
                break;
            }
        }
        match found {
            Some(cand_i) => {
                used[cand_i] = true;
                assigned.push(cand_i);
                start = 0;
            }
            None => {
                let prev = assigned.pop()?;
                used[prev] = false;
                start = prev + 1;
            }
        }
    }
    Some(assigned.into_iter().map(|i| cands[i]).collect())
}

/// Cheap necessary conditions, so hopeless cases end before the search
/// spends its step budget on them.
fn may_fit(cands: &[&MediumState], slots: &[Slot<'_>], resiliency: Resiliency) -> bool {
    if cands.len() < slots.len() {
        return false;
    }
    let mut per_column: BTreeMap<u32, usize> = BTreeMap::new();
    let mut per_zone: BTreeMap<&str, usize> = BTreeMap::new();
    for slot in slots {
        *per_column.entry(slot.column).or_insert(0) += 1;
        if let Some(zone) = slot.zone {
            *per_zone.entry(zone).or_insert(0) += 1;
        }
    }
    let widest = per_column.values().copied().max().unwrap_or(0);
    let nodes: BTreeSet<&str> = cands.iter().map(|m| m.medium.node.as_str()).collect();
    let zones: BTreeSet<&str> = cands.iter().map(|m| m.medium.zone.as_str()).collect();
    if resiliency.node >= 1 && nodes.len() < widest {
        return false;
    }
    if resiliency.zone >= 1 && zones.len() < widest {
        return false;
    }
    per_zone
        .iter()
        .all(|(zone, wanted)| cands.iter().filter(|m| m.medium.zone == *zone).count() >= *wanted)
}

/// Growths for the staying slices, the given moves, and the reservations both need.
fn build_plan(new_col: Gib, staying: &[&Slice], moves: Vec<SliceMove>) -> ResizePlan {
    let growths: Vec<SliceGrowth> = staying
        .iter()
        .map(|s| SliceGrowth {
            slice_id: s.id,
            medium: s.medium.clone(),
            from: s.size,
            to: new_col,
        })
        .collect();
    let mut booked: BTreeMap<&str, Gib> = BTreeMap::new();
    let amounts = growths
        .iter()
        .map(|g| (g.medium.as_str(), g.to.saturating_sub(g.from)))
        .chain(moves.iter().map(|m| (m.to_medium.as_str(), m.new_size)));
    for (medium, gib) in amounts {
        let entry = booked.entry(medium).or_insert(0);
        *entry = entry.saturating_add(gib);
    }
    let reservations = booked
        .into_iter()
        .filter(|(_, gib)| *gib > 0)
        .map(|(medium, gib)| Reservation {
            medium: medium.to_string(),
            gib,
        })
        .collect();
    ResizePlan {
        new_slice_size: new_col,
        growths,
        moves,
        reservations,
    }
}

#[cfg(test)]
mod table_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Medium;

    fn medium(id: &str, node: &str, zone: &str, size: Gib, used: Gib) -> MediumState {
        MediumState {
            medium: Medium {
                id: id.to_string(),
                node: node.to_string(),
                zone: zone.to_string(),
                size,
            },
            used,
        }
    }

    fn slice(id: i64, copy: u32, column: u32, medium: &str, size: Gib) -> Slice {
        Slice {
            id,
            copy,
            column,
            medium: medium.to_string(),
            size,
        }
    }

    const NONE: Resiliency = Resiliency {
        media: 0,
        node: 0,
        zone: 0,
    };
    const MEDIA1: Resiliency = Resiliency {
        media: 1,
        node: 0,
        zone: 0,
    };
    const NODE1: Resiliency = Resiliency {
        media: 0,
        node: 1,
        zone: 0,
    };
    const ZONE1: Resiliency = Resiliency {
        media: 0,
        node: 0,
        zone: 1,
    };

    fn place(size: Gib, resiliency: Resiliency, zone: Option<&str>) -> PlacementRequest {
        PlacementRequest {
            size,
            resiliency,
            zone: zone.map(str::to_string),
        }
    }

    fn resize(
        current_size: Gib,
        new_size: Gib,
        slices: &[Slice],
        resiliency: Resiliency,
        allow_data_movement: bool,
    ) -> ResizeRequest<'_> {
        ResizeRequest {
            current_size,
            new_size,
            slices,
            resiliency,
            allow_data_movement,
        }
    }

    fn on(placements: &[SlicePlacement]) -> Vec<(u32, u32, &str, Gib)> {
        placements
            .iter()
            .map(|p| (p.copy, p.column, p.medium.as_str(), p.size))
            .collect()
    }

    fn reservations(plan: &ResizePlan) -> Vec<(&str, Gib)> {
        plan.reservations
            .iter()
            .map(|r| (r.medium.as_str(), r.gib))
            .collect()
    }

    /// Adds a plan's reservations to the media's `used`, as the caller does
    /// when it persists the plan with its job.
    fn book(media: &mut [MediumState], plan: &ResizePlan) {
        for r in &plan.reservations {
            let m = media
                .iter_mut()
                .find(|m| m.medium.id == r.medium)
                .expect("reservation on a known medium");
            m.used += r.gib;
        }
    }

    // ---- place_volume ----

    #[test]
    fn placement_uses_one_column_when_one_medium_fits() {
        let media = [
            medium("m1", "n1", "z1", 100, 0),
            medium("m2", "n2", "z1", 50, 0),
        ];
        let placed = place_volume(&media, &place(80, NONE, None)).unwrap();
        assert_eq!(on(&placed), vec![(0, 0, "m1", 80)]);
    }

    #[test]
    fn placement_spreads_over_two_columns_when_no_single_medium_has_room() {
        let media = [
            medium("m1", "n1", "z1", 60, 0),
            medium("m2", "n2", "z1", 50, 0),
        ];
        let placed = place_volume(&media, &place(100, NONE, None)).unwrap();
        assert_eq!(on(&placed), vec![(0, 0, "m1", 50), (0, 1, "m2", 50)]);
    }

    #[test]
    fn placement_uses_the_fewest_columns_that_fit_and_rounds_the_column_size_up() {
        let media = [
            medium("m1", "n1", "z1", 40, 0),
            medium("m2", "n1", "z1", 40, 0),
            medium("m3", "n1", "z1", 40, 0),
            medium("m4", "n1", "z1", 40, 0),
        ];
        let placed = place_volume(&media, &place(100, NONE, None)).unwrap();
        assert_eq!(
            on(&placed),
            vec![(0, 0, "m1", 34), (0, 1, "m2", 34), (0, 2, "m3", 34)]
        );
    }

    #[test]
    fn copies_of_a_column_are_placed_on_distinct_media_and_ordered_by_copy_then_column() {
        let media = [
            medium("m1", "n1", "z1", 100, 0),
            medium("m2", "n1", "z1", 100, 0),
            medium("m3", "n1", "z1", 100, 0),
            medium("m4", "n1", "z1", 100, 0),
        ];
        let placed = place_volume(&media, &place(150, MEDIA1, None)).unwrap();
        assert_eq!(placed.len(), 4);
        let keys: Vec<(u32, u32)> = placed.iter().map(|p| (p.copy, p.column)).collect();
        assert_eq!(keys, vec![(0, 0), (0, 1), (1, 0), (1, 1)]);
        let distinct: BTreeSet<&str> = placed.iter().map(|p| p.medium.as_str()).collect();
        assert_eq!(distinct.len(), 4);
        assert!(placed.iter().all(|p| p.size == 75));
    }

    #[test]
    fn node_resiliency_rejects_a_second_medium_on_the_same_node() {
        let media = [
            medium("m1", "n1", "z1", 100, 0),
            medium("m2", "n1", "z1", 90, 0),
            medium("m3", "n2", "z1", 50, 0),
        ];
        let placed = place_volume(&media, &place(40, NODE1, None)).unwrap();
        assert_eq!(on(&placed), vec![(0, 0, "m1", 40), (1, 0, "m3", 40)]);
    }

    #[test]
    fn node_resiliency_finds_no_placement_when_every_medium_is_on_one_node() {
        let media = [
            medium("m1", "n1", "z1", 100, 0),
            medium("m2", "n1", "z2", 100, 0),
            medium("m3", "n1", "z3", 100, 0),
        ];
        assert_eq!(
            place_volume(&media, &place(10, NODE1, None)),
            Err(PlanError::NoPlacement {
                size: 10,
                copies: 2
            })
        );
    }

    #[test]
    fn node_resiliency_of_zero_allows_two_copies_on_one_node_on_distinct_media() {
        let media = [
            medium("m1", "n1", "z1", 100, 0),
            medium("m2", "n1", "z1", 90, 0),
            medium("m3", "n2", "z1", 50, 0),
        ];
        let placed = place_volume(&media, &place(40, MEDIA1, None)).unwrap();
        assert_eq!(on(&placed), vec![(0, 0, "m1", 40), (1, 0, "m2", 40)]);
    }

    #[test]
    fn zone_resiliency_puts_copies_of_a_column_in_distinct_zones() {
        let media = [
            medium("m1", "n1", "z1", 100, 0),
            medium("m2", "n2", "z1", 90, 0),
            medium("m3", "n3", "z2", 50, 0),
        ];
        let placed = place_volume(&media, &place(40, ZONE1, None)).unwrap();
        assert_eq!(on(&placed), vec![(0, 0, "m1", 40), (1, 0, "m3", 40)]);
    }

    #[test]
    fn zone_resiliency_finds_no_placement_with_a_single_zone() {
        let media = [
            medium("m1", "n1", "z1", 100, 0),
            medium("m2", "n2", "z1", 100, 0),
            medium("m3", "n3", "z1", 100, 0),
            medium("m4", "n4", "z1", 100, 0),
        ];
        assert!(matches!(
            place_volume(&media, &place(10, ZONE1, None)),
            Err(PlanError::NoPlacement { .. })
        ));
    }

    #[test]
    fn zone_preference_puts_every_column_of_copy_zero_in_that_zone() {
        let media = [
            medium("a1", "n1", "z1", 100, 0),
            medium("a2", "n2", "z1", 100, 0),
            medium("b1", "n3", "z2", 60, 0),
            medium("b2", "n4", "z2", 60, 0),
        ];
        let placed = place_volume(&media, &place(100, MEDIA1, Some("z2"))).unwrap();
        assert_eq!(
            on(&placed),
            vec![
                (0, 0, "b1", 50),
                (0, 1, "b2", 50),
                (1, 0, "a1", 50),
                (1, 1, "a2", 50)
            ]
        );
    }

    #[test]
    fn zone_preference_for_a_zone_without_media_is_an_unknown_zone() {
        let media = [medium("m1", "n1", "z1", 100, 0)];
        let err = place_volume(&media, &place(10, NONE, Some("z9"))).unwrap_err();
        assert_eq!(err, PlanError::UnknownZone("z9".to_string()));
        assert_eq!(err.to_string(), "zone 'z9' has no media");
        assert_eq!(
            place_volume(&[], &place(10, NONE, Some("z9"))),
            Err(PlanError::UnknownZone("z9".to_string()))
        );
    }

    #[test]
    fn placement_backtracks_when_the_greedy_choice_leads_to_a_dead_end() {
        // Greedy would give column 0's copy 1 the second z1 medium (a2) and
        // leave no z1 medium for column 1's copy 0.
        let media = [
            medium("a1", "n1", "z1", 15, 0),
            medium("a2", "n2", "z1", 12, 0),
            medium("b1", "n3", "z2", 11, 0),
            medium("b2", "n4", "z2", 10, 0),
        ];
        let placed = place_volume(&media, &place(20, MEDIA1, Some("z1"))).unwrap();
        assert_eq!(
            on(&placed),
            vec![
                (0, 0, "a1", 10),
                (0, 1, "a2", 10),
                (1, 0, "b1", 10),
                (1, 1, "b2", 10)
            ]
        );
    }

    #[test]
    fn the_medium_with_the_most_free_space_wins() {
        let media = [
            medium("m1", "n1", "z1", 100, 70),
            medium("m2", "n2", "z1", 80, 0),
            medium("m3", "n3", "z1", 100, 10),
        ];
        let placed = place_volume(&media, &place(10, NONE, None)).unwrap();
        assert_eq!(on(&placed), vec![(0, 0, "m3", 10)]);
    }

    #[test]
    fn a_tie_in_free_space_goes_to_the_smallest_id() {
        let media = [
            medium("m3", "n1", "z1", 100, 0),
            medium("m1", "n2", "z1", 100, 0),
            medium("m2", "n3", "z1", 100, 0),
        ];
        let placed = place_volume(&media, &place(10, MEDIA1, None)).unwrap();
        assert_eq!(on(&placed), vec![(0, 0, "m1", 10), (1, 0, "m2", 10)]);
    }

    #[test]
    fn no_placement_when_the_media_lack_space_in_total() {
        let media = [
            medium("m1", "n1", "z1", 30, 0),
            medium("m2", "n2", "z1", 30, 0),
        ];
        let err = place_volume(&media, &place(61, NONE, None)).unwrap_err();
        assert_eq!(
            err,
            PlanError::NoPlacement {
                size: 61,
                copies: 1
            }
        );
        assert_eq!(
            err.to_string(),
            "no placement found for a volume of 61 GiB with 1 copies: not enough free space on media that satisfy the policy's resiliency"
        );
    }

    #[test]
    fn no_placement_with_fewer_media_than_copies() {
        let media = [medium("m1", "n1", "z1", 100, 0)];
        assert_eq!(
            place_volume(&media, &place(10, MEDIA1, None)),
            Err(PlanError::NoPlacement {
                size: 10,
                copies: 2
            })
        );
    }

    #[test]
    fn placement_respects_space_already_used_or_reserved() {
        let media = [
            medium("m1", "n1", "z1", 100, 95),
            medium("m2", "n2", "z1", 100, 95),
            medium("m3", "n3", "z1", 20, 0),
        ];
        let placed = place_volume(&media, &place(20, NONE, None)).unwrap();
        assert_eq!(on(&placed), vec![(0, 0, "m3", 20)]);
        assert!(matches!(
            place_volume(&media, &place(21, NONE, None)),
            Err(PlanError::NoPlacement { .. })
        ));
    }

    #[test]
    fn placement_never_panics_on_empty_media_or_zero_sizes() {
        assert_eq!(
            place_volume(&[], &place(10, NONE, None)),
            Err(PlanError::NoPlacement {
                size: 10,
                copies: 1
            })
        );
        assert!(place_volume(&[], &place(0, MEDIA1, None)).is_err());
        let media = [
            medium("m1", "n1", "z1", 0, 0),
            medium("m2", "n1", "z1", 0, 5),
        ];
        let placed = place_volume(&media, &place(0, NONE, None)).unwrap();
        assert_eq!(on(&placed), vec![(0, 0, "m1", 0)]);
        let full = Resiliency {
            media: u8::MAX,
            node: u8::MAX,
            zone: u8::MAX,
        };
        assert!(place_volume(&media, &place(Gib::MAX, full, None)).is_err());
    }

    #[test]
    fn hopeless_placements_over_many_media_end_quickly() {
        // Three copies, distinct zones, but only two zones: no placement.
        let media: Vec<MediumState> = (0..60)
            .map(|i| {
                medium(
                    &format!("m{i:02}"),
                    &format!("n{i}"),
                    &format!("z{}", i % 2),
                    100,
                    0,
                )
            })
            .collect();
        let three_zones = Resiliency {
            media: 0,
            node: 0,
            zone: 2,
        };
        assert!(matches!(
            place_volume(&media, &place(10, three_zones, None)),
            Err(PlanError::NoPlacement {
                size: 10,
                copies: 3
            })
        ));
    }

    // ---- plan_resize ----

    #[test]
    fn in_place_resize_grows_every_slice_and_books_each_growth() {
        let media = [
            medium("m1", "n1", "z1", 100, 40),
            medium("m2", "n2", "z1", 100, 40),
            medium("m3", "n3", "z1", 100, 0),
        ];
        let slices = [slice(1, 0, 0, "m1", 40), slice(2, 1, 0, "m2", 40)];
        let plan = plan_resize(&media, &resize(40, 60, &slices, MEDIA1, false)).unwrap();
        assert!(plan.is_in_place());
        assert_eq!(plan.new_slice_size, 60);
        assert_eq!(
            plan.growths,
            vec![
                SliceGrowth {
                    slice_id: 1,
                    medium: "m1".into(),
                    from: 40,
                    to: 60
                },
                SliceGrowth {
                    slice_id: 2,
                    medium: "m2".into(),
                    from: 40,
                    to: 60
                },
            ]
        );
        assert_eq!(reservations(&plan), vec![("m1", 20), ("m2", 20)]);
    }

    #[test]
    fn in_place_resize_splits_the_new_size_over_the_volume_columns() {
        let media = [
            medium("m1", "n1", "z1", 100, 50),
            medium("m2", "n2", "z1", 100, 50),
        ];
        let slices = [slice(1, 0, 0, "m1", 50), slice(2, 0, 1, "m2", 50)];
        let plan = plan_resize(&media, &resize(100, 150, &slices, NONE, false)).unwrap();
        assert_eq!(plan.new_slice_size, 75);
        assert_eq!(reservations(&plan), vec![("m1", 25), ("m2", 25)]);
    }

    #[test]
    fn in_place_resize_fails_when_one_of_two_media_lacks_room() {
        // The seed: a volume spread over 2 media, one of which is nearly full.
        let media = [
            medium("m1", "n1", "z1", 100, 50),
            medium("m2", "n2", "z1", 60, 50),
        ];
        let slices = [slice(1, 0, 0, "m1", 50), slice(2, 0, 1, "m2", 50)];
        let err = plan_resize(&media, &resize(100, 200, &slices, NONE, false)).unwrap_err();
        assert_eq!(err, PlanError::NoInPlacePlan);
        assert_eq!(
            err.to_string(),
            "GetModificationPlan: Could not find an in-place modification plan"
        );
    }

    #[test]
    fn movement_without_resiliency_is_refused_even_when_in_place_would_fit() {
        let media = [medium("m1", "n1", "z1", 100, 10)];
        let slices = [slice(1, 0, 0, "m1", 10)];
        let err = plan_resize(&media, &resize(10, 20, &slices, NONE, true)).unwrap_err();
        assert_eq!(err, PlanError::MovementWithoutResiliency);
        assert_eq!(
            err.to_string(),
            "GetModificationPlan: Data movement is not supported for volumes with no resiliency"
        );
        // Without data movement the same resize is planned in place.
        let plan = plan_resize(&media, &resize(10, 20, &slices, NONE, false)).unwrap();
        assert!(plan.is_in_place());
    }

    #[test]
    fn movement_moves_only_the_slices_on_media_lacking_room() {
        let media = [
            medium("m1", "n1", "z1", 100, 40),
            medium("m2", "n2", "z1", 50, 40),
            medium("m3", "n3", "z1", 100, 0),
            medium("m4", "n4", "z1", 80, 0),
        ];
        let slices = [slice(1, 0, 0, "m1", 40), slice(2, 1, 0, "m2", 40)];
        let plan = plan_resize(&media, &resize(40, 60, &slices, MEDIA1, true)).unwrap();
        assert!(!plan.is_in_place());
        assert_eq!(
            plan.growths,
            vec![SliceGrowth {
                slice_id: 1,
                medium: "m1".into(),
                from: 40,
                to: 60
            }]
        );
        assert_eq!(
            plan.moves,
            vec![SliceMove {
                slice_id: 2,
                from_medium: "m2".into(),
                to_medium: "m3".into(),
                old_size: 40,
                new_size: 60
            }]
        );
        assert_eq!(reservations(&plan), vec![("m1", 20), ("m3", 60)]);
    }

    #[test]
    fn in_place_is_preferred_even_when_data_movement_is_allowed() {
        let media = [
            medium("m1", "n1", "z1", 100, 40),
            medium("m2", "n2", "z1", 100, 40),
            medium("m3", "n3", "z1", 1000, 0),
        ];
        let slices = [slice(1, 0, 0, "m1", 40), slice(2, 1, 0, "m2", 40)];
        let plan = plan_resize(&media, &resize(40, 60, &slices, MEDIA1, true)).unwrap();
        assert!(plan.is_in_place());
        assert_eq!(plan.growths.len(), 2);
    }

    #[test]
    fn movement_target_keeps_the_copies_of_a_column_on_distinct_nodes() {
        let media = [
            medium("m1", "n1", "z1", 100, 40),
            medium("m2", "n2", "z1", 50, 40),
            medium("m3", "n1", "z1", 200, 0), // most free, but on the node of copy 0
            medium("m4", "n3", "z1", 80, 0),
        ];
        let slices = [slice(1, 0, 0, "m1", 40), slice(2, 1, 0, "m2", 40)];
        let plan = plan_resize(&media, &resize(40, 60, &slices, NODE1, true)).unwrap();
        assert_eq!(plan.moves.len(), 1);
        assert_eq!(plan.moves[0].to_medium, "m4");
    }

    #[test]
    fn movement_target_keeps_the_copies_of_a_column_in_distinct_zones() {
        let media = [
            medium("m1", "n1", "z1", 100, 40),
            medium("m2", "n2", "z2", 50, 40),
            medium("m3", "n3", "z1", 200, 0), // most free, but in the zone of copy 0
            medium("m4", "n4", "z3", 80, 0),
        ];
        let slices = [slice(1, 0, 0, "m1", 40), slice(2, 1, 0, "m2", 40)];
        let plan = plan_resize(&media, &resize(40, 60, &slices, ZONE1, true)).unwrap();
        assert_eq!(plan.moves.len(), 1);
        assert_eq!(plan.moves[0].to_medium, "m4");
    }

    #[test]
    fn no_movement_target_when_no_medium_has_room_for_the_new_size() {
        let media = [
            medium("m1", "n1", "z1", 100, 40),
            medium("m2", "n2", "z1", 50, 40),
            medium("m3", "n3", "z1", 59, 0),
        ];
        let slices = [slice(1, 0, 0, "m1", 40), slice(2, 1, 0, "m2", 40)];
        let err = plan_resize(&media, &resize(40, 60, &slices, MEDIA1, true)).unwrap_err();
        assert_eq!(err, PlanError::NoMovementTarget);
        assert_eq!(
            err.to_string(),
            "GetModificationPlan: Failed to get modificationPlan for resizing volumeGroup"
        );
    }

    #[test]
    fn no_movement_target_when_the_only_roomy_medium_breaks_node_resiliency() {
        let media = [
            medium("m1", "n1", "z1", 100, 40),
            medium("m2", "n2", "z1", 50, 40),
            medium("m3", "n1", "z1", 200, 0),
        ];
        let slices = [slice(1, 0, 0, "m1", 40), slice(2, 1, 0, "m2", 40)];
        assert_eq!(
            plan_resize(&media, &resize(40, 60, &slices, NODE1, true)),
            Err(PlanError::NoMovementTarget)
        );
    }

    #[test]
    fn movement_target_needs_room_for_the_new_size_not_the_old_one() {
        let media = [
            medium("m1", "n1", "z1", 100, 40),
            medium("m2", "n2", "z1", 50, 40),
            medium("m3", "n3", "z1", 100, 50), // 50 free: holds the old 40, not the new 60
            medium("m4", "n4", "z1", 60, 0),   // exactly the new size
        ];
        let slices = [slice(1, 0, 0, "m1", 40), slice(2, 1, 0, "m2", 40)];
        let plan = plan_resize(&media, &resize(40, 60, &slices, MEDIA1, true)).unwrap();
        assert_eq!(plan.moves[0].to_medium, "m4");
        assert_eq!(plan.moves[0].old_size, 40);
        assert_eq!(plan.moves[0].new_size, 60);
    }

    #[test]
    fn media_the_volume_uses_are_never_movement_targets() {
        // Both copies lack room; each needs its own new medium, and neither
        // source (nor the other copy's target) is eligible.
        let media = [
            medium("m1", "n1", "z1", 45, 40),
            medium("m2", "n2", "z1", 45, 40),
            medium("m3", "n3", "z1", 100, 0),
            medium("m4", "n4", "z1", 90, 0),
        ];
        let slices = [slice(1, 0, 0, "m1", 40), slice(2, 1, 0, "m2", 40)];
        let plan = plan_resize(&media, &resize(40, 60, &slices, MEDIA1, true)).unwrap();
        assert!(plan.growths.is_empty());
        let targets: Vec<(&str, &str)> = plan
            .moves
            .iter()
            .map(|m| (m.from_medium.as_str(), m.to_medium.as_str()))
            .collect();
        assert_eq!(targets, vec![("m1", "m3"), ("m2", "m4")]);
        assert_eq!(reservations(&plan), vec![("m3", 60), ("m4", 60)]);

        let only_one_spare = &media[..3];
        assert_eq!(
            plan_resize(only_one_spare, &resize(40, 60, &slices, MEDIA1, true)),
            Err(PlanError::NoMovementTarget)
        );
    }

    #[test]
    fn reservations_are_summed_per_medium_skip_zero_and_sort_by_medium_id() {
        // Unusual layout: two slices share m2; their growths are summed.
        let media = [
            medium("m2", "n2", "z1", 100, 20),
            medium("m1", "n1", "z1", 100, 10),
            medium("m3", "n3", "z1", 100, 20),
        ];
        let slices = [
            slice(1, 0, 0, "m2", 10),
            slice(2, 0, 1, "m2", 10),
            slice(3, 1, 0, "m1", 10),
            slice(4, 1, 1, "m3", 20), // already at the new size: no reservation
        ];
        let plan = plan_resize(&media, &resize(20, 40, &slices, MEDIA1, false)).unwrap();
        assert_eq!(plan.new_slice_size, 20);
        assert_eq!(reservations(&plan), vec![("m1", 10), ("m2", 20)]);
        let ids: Vec<i64> = plan.growths.iter().map(|g| g.slice_id).collect();
        assert_eq!(ids, vec![1, 2, 3, 4]);
    }

    #[test]
    fn a_shared_medium_lacks_room_when_the_summed_growth_does_not_fit() {
        let media = [medium("m1", "n1", "z1", 100, 85)];
        let slices = [slice(1, 0, 0, "m1", 10), slice(2, 0, 1, "m1", 10)];
        // Each slice grows by 10: 20 needed on m1, 15 free.
        assert_eq!(
            plan_resize(&media, &resize(20, 40, &slices, NONE, false)),
            Err(PlanError::NoInPlacePlan)
        );
    }

    #[test]
    fn a_medium_missing_from_the_list_lacks_room_and_is_never_a_target() {
        let media = [
            medium("m1", "n1", "z1", 100, 40),
            medium("m3", "n3", "z1", 100, 0),
        ];
        let slices = [slice(1, 0, 0, "m1", 40), slice(2, 1, 0, "gone", 40)];
        assert_eq!(
            plan_resize(&media, &resize(40, 60, &slices, MEDIA1, false)),
            Err(PlanError::NoInPlacePlan)
        );
        let plan = plan_resize(&media, &resize(40, 60, &slices, MEDIA1, true)).unwrap();
        assert_eq!(plan.moves.len(), 1);
        assert_eq!(plan.moves[0].from_medium, "gone");
        assert_eq!(plan.moves[0].to_medium, "m3");
    }

    #[test]
    fn a_second_plan_cannot_book_the_space_the_first_one_reserved() {
        // In place: two resizes of the same volume both wanting m1's last 20 GiB.
        let mut media = [
            medium("m1", "n1", "z1", 100, 80),
            medium("m2", "n2", "z1", 100, 40),
        ];
        let slices = [slice(1, 0, 0, "m1", 40), slice(2, 1, 0, "m2", 40)];
        let request = resize(40, 60, &slices, MEDIA1, false);
        let first = plan_resize(&media, &request).unwrap();
        assert_eq!(reservations(&first), vec![("m1", 20), ("m2", 20)]);
        book(&mut media, &first);
        assert_eq!(plan_resize(&media, &request), Err(PlanError::NoInPlacePlan));

        // With movement: two volumes whose moves compete for the one spare medium.
        let mut media = [
            medium("a1", "n1", "z1", 100, 40),
            medium("a2", "n2", "z1", 45, 40),
            medium("b1", "n3", "z1", 100, 40),
            medium("b2", "n4", "z1", 45, 40),
            medium("spare", "n5", "z1", 80, 0),
        ];
        let volume_a = [slice(1, 0, 0, "a1", 40), slice(2, 1, 0, "a2", 40)];
        let volume_b = [slice(3, 0, 0, "b1", 40), slice(4, 1, 0, "b2", 40)];
        let first = plan_resize(&media, &resize(40, 60, &volume_a, MEDIA1, true)).unwrap();
        assert_eq!(first.moves[0].to_medium, "spare");
        // Unbooked, the second plan would pick the very same space.
        let unbooked = plan_resize(&media, &resize(40, 60, &volume_b, MEDIA1, true)).unwrap();
        assert_eq!(unbooked.moves[0].to_medium, "spare");
        book(&mut media, &first);
        assert_eq!(
            plan_resize(&media, &resize(40, 60, &volume_b, MEDIA1, true)),
            Err(PlanError::NoMovementTarget)
        );
    }

    #[test]
    fn resize_never_panics_on_empty_input() {
        let plan = plan_resize(&[], &resize(0, 0, &[], MEDIA1, true)).unwrap();
        assert!(plan.growths.is_empty() && plan.moves.is_empty() && plan.reservations.is_empty());
        let slices = [slice(1, 0, 0, "m1", 10)];
        assert_eq!(
            plan_resize(&[], &resize(10, 20, &slices, MEDIA1, true)),
            Err(PlanError::NoMovementTarget)
        );
        let media = [medium("m1", "n1", "z1", 5, 50)];
        let plan = plan_resize(&media, &resize(10, Gib::MAX, &[], MEDIA1, false)).unwrap();
        assert!(plan.reservations.is_empty());
    }
}
