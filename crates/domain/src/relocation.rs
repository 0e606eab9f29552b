//! Drain and rebalance: plans that move existing slices between media
//! without resizing them. Pure logic, like the rest of the planner.
//!
//! Every move keeps the planner's placement rules (see `planner`): no two
//! slices of one volume on one medium; copies of a column on distinct nodes
//! (node resiliency ≥ 1) and distinct zones (zone resiliency ≥ 1); copy 0 of
//! a volume that has a zone stays in that zone; the target has room for the
//! slice, counting every move planned before it; a target is never a closed
//! (draining) medium; a lost slice has nothing to copy from and never moves.
//!
//! The rules are checked against every place a slice of the volume holds
//! during the plan: where it is now *and* where a planned move puts it (a
//! moved slice keeps its old place until its job switches it). So any subset
//! of the moves, applied in any order, keeps the rules too. For the same
//! reason a move books its slice's size on its target but frees nothing on
//! its source: free space only shrinks while a plan is built.
//!
//! A slice's other copies constrain its target only where their medium is
//! known (listed in `media`); a copy on a failed medium is rebuilt by a
//! recovery, which checks the rules again.
//!
//! # Drain
//!
//! Volumes are taken in `volume_id` order, their slices on the drained
//! medium in id order. A lost one is stuck ([`StuckReason::Lost`]); else it
//! goes to the allowed medium with the most free space (ties: the smallest
//! id), or is stuck ([`StuckReason::NoTarget`]).
//!
//! # Rebalance
//!
//! Over the open (not closed) media of the scope, let `S` be their total
//! size and `U` their total use. Medium `m` is even when `used_m / size_m =
//! U / S`; its *excess* is `e_m = used_m·S − U·size_m`, an exact integer
//! (`i128`) that is 0 for an even medium and sums to 0 over the scope. The
//! imbalance is `Σ |e_m|`.
//!
//! Moving a slice of `s` GiB from `a` to `b` changes `e_a` by `−s·S` and
//! `e_b` by `+s·S`; its *gain*, `|e_a| + |e_b| − |e_a − s·S| − |e_b + s·S|`,
//! is how much the imbalance drops. The plan repeatedly takes the allowed
//! move with the largest positive gain (ties: the smaller slice, then the
//! smaller slice id, then the smaller target id) until none is left, a slice
//! moving at most once and at most [`MAX_MOVES`] moves in all. Each move
//! lowers the imbalance by at least 1, so the loop ends.
//!
//! Why few bytes move: by the triangle inequality a move's gain is at most
//! `2·s·S`, so any plan moves at least `Σ|e| / 2S` GiB to remove the
//! imbalance `Σ|e|`. A move reaches that bound exactly when it does not
//! overshoot (`s·S ≤ e_a` and `s·S ≤ −e_b`: bytes leave a medium above the
//! mean for one below it, neither crossing the mean), and a plan made only
//! of such moves moves the fewest bytes possible. An overshooting move falls
//! short of its bound by twice the overshoot, so taking the largest gain
//! first takes the moves closest to the bound first, and a large slice that
//! fills a gap in one move before several small ones; among equal gains the
//! smaller slice wins (fewer bytes for the same effect). It is a greedy, not
//! an optimal plan: the best set of slices is a subset-sum problem, and the
//! placement rules may forbid the ideal move, so the result may move more
//! bytes than the minimum or stop short of perfectly even media.

use crate::model::{Gib, Medium, MediumState, Resiliency, Slice};
use crate::planner::{compatible, Reservation, ResizePlan, SliceMove};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;

/// Most moves one rebalance plans.
pub const MAX_MOVES: usize = 10_000;

/// A volume whose slices a drain or a rebalance may move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MovableVolume<'a> {
    pub volume_id: &'a str,
    pub resiliency: Resiliency,
    /// Copy 0 stays in this zone when set.
    pub zone: Option<&'a str>,
    pub slices: &'a [Slice],
    /// Ids of its slices that are lost (nothing to copy from).
    pub lost: &'a [i64],
}

/// One slice to copy to another medium; `old_size == new_size`, the slice's size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relocation {
    pub volume_id: String,
    pub slice_move: SliceMove,
}

/// Why a slice a drain must move stays where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum StuckReason {
    #[error("its copy is lost: recover the volume first")]
    Lost,
    #[error("no medium has room for it within its volume's policy")]
    NoTarget,
}

/// A slice a drain cannot move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StuckSlice {
    pub volume_id: String,
    pub slice_id: i64,
    pub reason: StuckReason,
}

/// The outcome of planning a drain or a rebalance.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RelocationPlan {
    /// In the order they were planned.
    pub moves: Vec<Relocation>,
    /// Slices a drain leaves behind (always empty for a rebalance).
    pub stuck: Vec<StuckSlice>,
    /// The slices' sizes booked on their targets: one entry per target
    /// medium (amounts summed, none of 0), by medium id.
    pub reservations: Vec<Reservation>,
}

impl RelocationPlan {
    /// Sum of the moved slices' sizes.
    pub fn bytes_gib(&self) -> Gib {
        self.moves
            .iter()
            .fold(0, |sum, m| sum.saturating_add(m.slice_move.old_size))
    }

    /// No moves (there may still be stuck slices).
    pub fn is_empty(&self) -> bool {
        self.moves.is_empty()
    }

    /// As a `ResizePlan` with no growths (what the store's
    /// `save_resize_plan` records): `new_slice_size` 0, the moves, the
    /// reservations.
    pub fn to_resize_plan(&self) -> ResizePlan {
        ResizePlan {
            new_slice_size: 0,
            growths: Vec::new(),
            moves: self.moves.iter().map(|m| m.slice_move.clone()).collect(),
            reservations: self.reservations.clone(),
        }
    }
}

/// Plans a drain of `medium`: every slice on it moves elsewhere, or is
/// reported stuck.
///
/// `media`: every medium that is not failed (for node/zone lookups and free
/// space); `closed`: media that take no new slice (every draining medium,
/// the drained one included).
pub fn plan_drain(
    media: &[MediumState],
    closed: &BTreeSet<&str>,
    medium: &str,
    volumes: &[MovableVolume<'_>],
) -> RelocationPlan {
    let mut board = Board::new(media);
    let mut plan = RelocationPlan::default();
    for volume in by_id(volumes) {
        let mut volume_places = Places::new(volume);
        let leaving = volume.slices.iter().filter(|s| s.medium == medium);
        let mut leaving: Vec<&Slice> = leaving.collect();
        leaving.sort_by_key(|s| s.id);
        for slice in leaving {
            let stuck = |reason| StuckSlice {
                volume_id: volume.volume_id.to_string(),
                slice_id: slice.id,
                reason,
            };
            if volume.lost.contains(&slice.id) {
                plan.stuck.push(stuck(StuckReason::Lost));
                continue;
            }
            let target = board
                .media
                .values()
                .map(|m| &m.medium)
                .filter(|m| m.id != medium && !closed.contains(m.id.as_str()))
                .filter(|m| board.free(&m.id) >= slice.size)
                .filter(|m| volume_places.accept(&board, slice, m))
                .max_by(|a, b| {
                    // Most free space; on a tie, the smallest id.
                    board
                        .free(&a.id)
                        .cmp(&board.free(&b.id))
                        .then_with(|| b.id.cmp(&a.id))
                });
            match target {
                Some(target) => {
                    board.book(&target.id, slice.size);
                    volume_places.record(slice, &target.id);
                    plan.moves.push(relocation(volume, slice, &target.id));
                }
                None => plan.stuck.push(stuck(StuckReason::NoTarget)),
            }
        }
    }
    plan.reservations = reservations(&plan.moves);
    plan
}

/// Plans a rebalance of the `scope` media (closed ones among them are left
/// out of both ends): greedy moves between open scope media, each removing
/// the most imbalance (see the module docs).
pub fn plan_rebalance(
    media: &[MediumState],
    closed: &BTreeSet<&str>,
    scope: &BTreeSet<&str>,
    volumes: &[MovableVolume<'_>],
) -> RelocationPlan {
    let mut board = Board::new(media);
    let open: Vec<&MediumState> = board
        .media
        .values()
        .copied()
        .filter(|m| scope.contains(m.medium.id.as_str()))
        .filter(|m| !closed.contains(m.medium.id.as_str()))
        .collect();
    let (mut excess, total_size) = excess(&open);

    let volumes = by_id(volumes);
    let mut places: Vec<Places<'_>> = volumes.iter().map(|v| Places::new(v)).collect();
    // The slices that may move: not lost, on an open scope medium.
    let movable: Vec<(usize, &Slice)> = volumes
        .iter()
        .enumerate()
        .flat_map(|(i, v)| v.slices.iter().map(move |s| (i, s)))
        .filter(|(i, s)| !volumes[*i].lost.contains(&s.id))
        .filter(|(_, s)| excess.contains_key(s.medium.as_str()))
        .collect();
    let mut moved = vec![false; movable.len()];

    let mut plan = RelocationPlan::default();
    while plan.moves.len() < MAX_MOVES {
        // (gain, smaller slice, smaller slice id, smaller target id), index, target.
        type Key<'k> = (i128, Reverse<Gib>, Reverse<i64>, Reverse<&'k str>);
        let mut best: Option<(Key<'_>, usize, &Medium)> = None;
        for (k, &(v, slice)) in movable.iter().enumerate() {
            let e_src = excess.get(slice.medium.as_str()).copied().unwrap_or(0);
            // Only a medium above the mean can gain by giving a slice away.
            if moved[k] || e_src <= 0 {
                continue;
            }
            let shift = i128::from(slice.size).saturating_mul(total_size);
            // The target's part of the gain is at most `shift`: skip the
            // slices that cannot reach the best gain found so far.
            let bound = gain(e_src, -shift, shift);
            if best.as_ref().is_some_and(|(b, _, _)| b.0 > bound) {
                continue;
            }
            for target in open.iter().map(|m| &m.medium) {
                let e_dst = excess.get(target.id.as_str()).copied().unwrap_or(0);
                // ... and only one below it by taking it.
                if e_dst >= 0 || target.id == slice.medium {
                    continue;
                }
                let gain = gain(e_src, e_dst, shift);
                let key = (
                    gain,
                    Reverse(slice.size),
                    Reverse(slice.id),
                    Reverse(target.id.as_str()),
                );
                if gain <= 0 || best.as_ref().is_some_and(|(b, _, _)| *b >= key) {
                    continue;
                }
                if board.free(&target.id) >= slice.size && places[v].accept(&board, slice, target) {
                    best = Some((key, k, target));
                }
            }
        }
        let Some((_, k, target)) = best else {
            break;
        };
        let (v, slice) = movable[k];
        let shift = i128::from(slice.size).saturating_mul(total_size);
        if let Some(e) = excess.get_mut(slice.medium.as_str()) {
            *e = e.saturating_sub(shift);
        }
        if let Some(e) = excess.get_mut(target.id.as_str()) {
            *e = e.saturating_add(shift);
        }
        moved[k] = true;
        board.book(&target.id, slice.size);
        places[v].record(slice, &target.id);
        plan.moves.push(relocation(volumes[v], slice, &target.id));
    }
    plan.reservations = reservations(&plan.moves);
    plan
}

/// How much moving `shift` (= size·S) from a medium of excess `e_src` to one
/// of excess `e_dst` lowers the imbalance.
fn gain(e_src: i128, e_dst: i128, shift: i128) -> i128 {
    let before = e_src
        .saturating_abs()
        .saturating_add(e_dst.saturating_abs());
    let after = e_src
        .saturating_sub(shift)
        .saturating_abs()
        .saturating_add(e_dst.saturating_add(shift).saturating_abs());
    before.saturating_sub(after)
}

/// Each open medium's excess `used·S − U·size`, and `S` (see the module docs).
fn excess<'a>(open: &[&'a MediumState]) -> (BTreeMap<&'a str, i128>, i128) {
    let sum = |f: fn(&MediumState) -> Gib| {
        let each = open.iter().map(|m| i128::from(f(m)));
        each.fold(0i128, i128::saturating_add)
    };
    let (size, used) = (sum(|m| m.medium.size), sum(|m| m.used));
    let excess = open.iter().map(|m| {
        let e = i128::from(m.used).saturating_mul(size);
        let even = used.saturating_mul(i128::from(m.medium.size));
        (m.medium.id.as_str(), e.saturating_sub(even))
    });
    (excess.collect(), size)
}

/// The volumes in `volume_id` order.
fn by_id<'s, 'a>(volumes: &'s [MovableVolume<'a>]) -> Vec<&'s MovableVolume<'a>> {
    let mut out: Vec<&MovableVolume<'a>> = volumes.iter().collect();
    out.sort_by(|a, b| a.volume_id.cmp(b.volume_id));
    out
}

fn relocation(volume: &MovableVolume<'_>, slice: &Slice, target: &str) -> Relocation {
    Relocation {
        volume_id: volume.volume_id.to_string(),
        slice_move: SliceMove {
            slice_id: slice.id,
            from_medium: slice.medium.clone(),
            to_medium: target.to_string(),
            old_size: slice.size,
            new_size: slice.size,
        },
    }
}

/// The media as a plan sees them while it is built.
struct Board<'a> {
    /// Each medium once (the first entry of an id), by id.
    media: BTreeMap<&'a str, &'a MediumState>,
    /// Room left for new slices: shrinks by each move's booking, never grows.
    free: BTreeMap<&'a str, Gib>,
}

impl<'a> Board<'a> {
    fn new(media: &'a [MediumState]) -> Self {
        let mut unique: BTreeMap<&str, &MediumState> = BTreeMap::new();
        for m in media {
            unique.entry(m.medium.id.as_str()).or_insert(m);
        }
        let free = unique.iter().map(|(id, m)| (*id, m.free())).collect();
        Board {
            media: unique,
            free,
        }
    }

    fn free(&self, id: &str) -> Gib {
        self.free.get(id).copied().unwrap_or(0)
    }

    fn book(&mut self, id: &str, size: Gib) {
        if let Some(free) = self.free.get_mut(id) {
            *free = free.saturating_sub(size);
        }
    }
}

/// The moves' sizes booked on their targets: one per medium, summed, by id.
fn reservations(moves: &[Relocation]) -> Vec<Reservation> {
    let mut booked: BTreeMap<&str, Gib> = BTreeMap::new();
    for m in moves.iter().map(|m| &m.slice_move) {
        let gib = booked.entry(m.to_medium.as_str()).or_insert(0);
        *gib = gib.saturating_add(m.new_size);
    }
    let booked = booked.into_iter().filter(|(_, gib)| *gib > 0);
    let reservation = |(medium, gib): (&str, Gib)| Reservation {
        medium: medium.to_string(),
        gib,
    };
    booked.map(reservation).collect()
}

/// Every place a volume's slices hold during a plan: where each is now and
/// where a planned move puts it.
struct Places<'a> {
    resiliency: Resiliency,
    zone: Option<&'a str>,
    /// (column, slice id, medium id).
    held: Vec<(u32, i64, String)>,
}

impl<'a> Places<'a> {
    fn new(volume: &MovableVolume<'a>) -> Self {
        let held = volume
            .slices
            .iter()
            .map(|s| (s.column, s.id, s.medium.clone()));
        let (resiliency, zone) = (volume.resiliency, volume.zone);
        Places {
            resiliency,
            zone,
            held: held.collect(),
        }
    }

    /// Whether `slice` may move to `target` (room is checked apart).
    fn accept(&self, board: &Board<'_>, slice: &Slice, target: &Medium) -> bool {
        let r = self.resiliency;
        if self.held.iter().any(|(_, _, m)| *m == target.id) {
            return false;
        }
        if slice.copy == 0 && self.zone.is_some_and(|z| z != target.zone) {
            return false;
        }
        self.held
            .iter()
            .filter(|(column, id, _)| *column == slice.column && *id != slice.id)
            .filter_map(|(_, _, m)| board.media.get(m.as_str()).map(|o| &o.medium))
            .all(|o| compatible(r, &target.node, &target.zone, &o.node, &o.zone))
    }

    fn record(&mut self, slice: &Slice, target: &str) {
        self.held.push((slice.column, slice.id, target.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::{place_volume, PlacementRequest};

    fn medium(id: &str, node: &str, zone: &str, size: Gib, used: Gib) -> MediumState {
        let (id, node, zone) = (id.into(), node.into(), zone.into());
        let medium = Medium {
            id,
            node,
            zone,
            size,
        };
        MediumState { medium, used }
    }

    /// Media m1, m2, ... on nodes n1, n2, ..., all in zone z1: (size, used) each.
    fn media(sizes: &[(Gib, Gib)]) -> Vec<MediumState> {
        let mut out = Vec::new();
        for (i, (size, used)) in sizes.iter().enumerate() {
            let (id, node) = (format!("m{}", i + 1), format!("n{}", i + 1));
            out.push(medium(&id, &node, "z1", *size, *used));
        }
        out
    }

    fn slice(id: i64, copy: u32, column: u32, medium: &str, size: Gib) -> Slice {
        let medium = medium.into();
        Slice {
            id,
            copy,
            column,
            medium,
            size,
        }
    }

    const fn res(media: u8, node: u8, zone: u8) -> Resiliency {
        Resiliency { media, node, zone }
    }
    const NONE: Resiliency = res(0, 0, 0);
    const MEDIA1: Resiliency = res(1, 0, 0);
    const NODE1: Resiliency = res(0, 1, 0);
    const ZONE1: Resiliency = res(0, 0, 1);

    /// A volume's owned data; `movable()` borrows it as the planner wants.
    #[derive(Clone)]
    struct Vol {
        id: String,
        resiliency: Resiliency,
        zone: Option<String>,
        slices: Vec<Slice>,
        lost: Vec<i64>,
    }

    impl Vol {
        fn movable(&self) -> MovableVolume<'_> {
            MovableVolume {
                volume_id: &self.id,
                resiliency: self.resiliency,
                zone: self.zone.as_deref(),
                slices: &self.slices,
                lost: &self.lost,
            }
        }
    }

    fn vol(id: &str, resiliency: Resiliency, slices: Vec<Slice>) -> Vol {
        let (id, zone, lost) = (id.into(), None, Vec::new());
        Vol {
            id,
            resiliency,
            zone,
            slices,
            lost,
        }
    }

    /// One volume per (slice id, medium, size): `v<slice id>`, one slice
    /// (copy 0, column 0), no resiliency.
    fn ones(list: &[(i64, &str, Gib)]) -> Vec<Vol> {
        let one = |&(id, m, size): &(i64, &str, Gib)| (format!("v{id}"), slice(id, 0, 0, m, size));
        list.iter()
            .map(one)
            .map(|(v, s)| vol(&v, NONE, vec![s]))
            .collect()
    }

    /// Volume v1: slice 1 (copy 0) on `first`, slice 2 (copy 1) on `second`, 10 GiB each.
    fn pair(resiliency: Resiliency, first: &str, second: &str) -> Vol {
        let slices = vec![slice(1, 0, 0, first, 10), slice(2, 1, 0, second, 10)];
        vol("v1", resiliency, slices)
    }

    fn movables(vols: &[Vol]) -> Vec<MovableVolume<'_>> {
        vols.iter().map(Vol::movable).collect()
    }

    fn set<'a>(ids: &[&'a str]) -> BTreeSet<&'a str> {
        ids.iter().copied().collect()
    }

    fn drain(media: &[MediumState], closed: &[&str], medium: &str, vols: &[Vol]) -> RelocationPlan {
        plan_drain(media, &set(closed), medium, &movables(vols))
    }

    /// A rebalance of every medium, none closed.
    fn rebalance(media: &[MediumState], vols: &[Vol]) -> RelocationPlan {
        let scope: Vec<&str> = media.iter().map(|m| m.medium.id.as_str()).collect();
        plan_rebalance(media, &BTreeSet::new(), &set(&scope), &movables(vols))
    }

    fn targets(plan: &RelocationPlan) -> Vec<(i64, &str)> {
        let moves = plan.moves.iter().map(|m| &m.slice_move);
        moves.map(|m| (m.slice_id, m.to_medium.as_str())).collect()
    }

    fn reserved(plan: &RelocationPlan) -> Vec<(&str, Gib)> {
        let r = plan.reservations.iter();
        r.map(|r| (r.medium.as_str(), r.gib)).collect()
    }

    // ---- drain ----

    #[test]
    fn a_drain_moves_each_slice_to_the_medium_with_the_most_free_space() {
        let media = media(&[(100, 10), (100, 50), (100, 20), (80, 0)]);
        let plan = drain(&media, &["m1"], "m1", &ones(&[(1, "m1", 10)]));
        // m3 and m4 both have 80 free: the smallest id wins.
        assert_eq!(targets(&plan), vec![(1, "m3")]);
        let (moved, m) = (&plan.moves[0], &plan.moves[0].slice_move);
        assert_eq!(
            (moved.volume_id.as_str(), m.from_medium.as_str()),
            ("v1", "m1")
        );
        assert_eq!((m.old_size, m.new_size, plan.bytes_gib()), (10, 10, 10));
        assert!(plan.stuck.is_empty());
        assert_eq!(reserved(&plan), vec![("m3", 10)]);
    }

    #[test]
    fn a_drain_keeps_the_copies_of_a_column_on_distinct_nodes() {
        let media = [
            medium("m1", "n1", "z1", 100, 10),
            medium("m2", "nA", "z1", 100, 10), // copy 1 of column 0
            medium("m3", "nA", "z1", 200, 0),  // most free, but on node A
            medium("m4", "n4", "z1", 100, 0),
        ];
        let plan = drain(&media, &["m1"], "m1", &[pair(NODE1, "m1", "m2")]);
        assert_eq!(targets(&plan), vec![(1, "m4")]);
        // Without node resiliency the roomiest medium wins.
        let plan = drain(&media, &["m1"], "m1", &[pair(MEDIA1, "m1", "m2")]);
        assert_eq!(targets(&plan), vec![(1, "m3")]);
    }

    #[test]
    fn a_drain_keeps_copy_0_in_the_volume_zone_and_copies_in_distinct_zones() {
        let media = [
            medium("m1", "n1", "z1", 100, 10),
            medium("m2", "n2", "z2", 100, 10),
            medium("m3", "n3", "z3", 300, 0), // most free, other zone
            medium("m4", "n4", "z1", 100, 0),
            medium("m5", "n5", "z2", 250, 0), // the zone of copy 1
        ];
        let mut v = pair(ZONE1, "m1", "m2");
        v.zone = Some("z1".into());
        let plan = drain(&media, &["m1"], "m1", &[v.clone()]);
        assert_eq!(targets(&plan), vec![(1, "m4")]);
        // Copy 1 has no zone to keep, only a zone other than copy 0's.
        let plan = drain(&media, &["m2"], "m2", &[v]);
        assert_eq!(targets(&plan), vec![(2, "m3")]);
    }

    #[test]
    fn a_drain_never_targets_a_closed_medium_or_a_medium_the_volume_already_uses() {
        // m2 (most free) holds copy 1, m3 drains too.
        let media = media(&[(100, 10), (500, 10), (400, 0), (100, 0)]);
        let vols = [pair(MEDIA1, "m1", "m2")];
        let plan = drain(&media, &["m1", "m3"], "m1", &vols);
        assert_eq!(targets(&plan), vec![(1, "m4")]);
        let plan = drain(&media, &["m1", "m3", "m4"], "m1", &vols);
        assert!(plan.is_empty());
        assert_eq!(plan.stuck[0].reason, StuckReason::NoTarget);
    }

    #[test]
    fn a_drain_counts_the_free_space_taken_by_earlier_moves() {
        // m2 has 50 free, m3 40.
        let media = media(&[(100, 60), (100, 50), (100, 60)]);
        let plan = drain(
            &media,
            &["m1"],
            "m1",
            &ones(&[(1, "m1", 30), (2, "m1", 30)]),
        );
        // After v1's 30 GiB, m2 has 20 free: v2 goes to m3.
        assert_eq!(targets(&plan), vec![(1, "m2"), (2, "m3")]);
        assert_eq!(reserved(&plan), vec![("m2", 30), ("m3", 30)]);
        let vols = ones(&[(1, "m1", 45), (2, "m1", 15), (3, "m1", 40)]);
        let plan = drain(&media, &["m1"], "m1", &vols);
        assert_eq!(targets(&plan), vec![(1, "m2"), (2, "m3")]);
        assert_eq!(plan.stuck.len(), 1);
        assert_eq!(plan.stuck[0].slice_id, 3);
    }

    #[test]
    fn a_drain_reports_lost_and_no_target_slices_as_stuck() {
        let media = media(&[(100, 40), (100, 90)]);
        let mut vols = ones(&[(3, "m1", 20), (1, "m1", 5), (2, "m1", 10), (4, "m2", 50)]);
        vols[1].lost = vec![1];
        let plan = drain(&media, &["m1"], "m1", &vols);
        assert_eq!(targets(&plan), vec![(2, "m2")]);
        let stuck = |s: &StuckSlice| (s.volume_id.clone(), s.slice_id, s.reason);
        let stuck: Vec<(String, i64, StuckReason)> = plan.stuck.iter().map(stuck).collect();
        let (lost, no_target) = (StuckReason::Lost, StuckReason::NoTarget);
        assert_eq!(
            stuck,
            vec![("v1".into(), 1, lost), ("v3".into(), 3, no_target)]
        );
        let lost = "its copy is lost: recover the volume first";
        assert_eq!(StuckReason::Lost.to_string(), lost);
        let no_target = "no medium has room for it within its volume's policy";
        assert_eq!(StuckReason::NoTarget.to_string(), no_target);
    }

    #[test]
    fn a_plan_as_a_resize_plan_has_no_growths_and_the_summed_reservations() {
        let media = media(&[(100, 30), (100, 0)]);
        let plan = drain(
            &media,
            &["m1"],
            "m1",
            &ones(&[(1, "m1", 10), (2, "m1", 20)]),
        );
        let resize = plan.to_resize_plan();
        assert_eq!(resize.new_slice_size, 0);
        assert!(resize.growths.is_empty());
        let moves: Vec<SliceMove> = plan.moves.iter().map(|m| m.slice_move.clone()).collect();
        assert_eq!(resize.moves, moves);
        assert_eq!(reserved(&plan), vec![("m2", 30)]);
        assert_eq!(resize.reservations, plan.reservations);
    }

    // ---- rebalance ----

    fn six_volumes_on_m1() -> Vec<Vol> {
        ones(&(1..=6).map(|i| (i, "m1", 10)).collect::<Vec<_>>())
    }

    #[test]
    fn a_rebalance_of_a_full_and_an_empty_medium_moves_exactly_three_slices() {
        let plan = rebalance(&media(&[(100, 60), (100, 0)]), &six_volumes_on_m1());
        assert_eq!(targets(&plan), vec![(1, "m2"), (2, "m2"), (3, "m2")]);
        assert_eq!(plan.bytes_gib(), 30);
        assert_eq!(reserved(&plan), vec![("m2", 30)]);
        assert!(plan.stuck.is_empty());
    }

    #[test]
    fn a_rebalance_of_media_already_even_plans_nothing() {
        let even = media(&[(100, 30), (200, 60)]);
        let vols = ones(&[(1, "m1", 30), (2, "m2", 60)]);
        assert_eq!(rebalance(&even, &vols), RelocationPlan::default());
        // Nearly even: moving the 10 GiB slice would only swap m1 and m2.
        let nearly = media(&[(100, 35), (100, 25)]);
        let vols = ones(&[(1, "m1", 10), (2, "m2", 25), (3, "m1", 25)]);
        assert!(rebalance(&nearly, &vols).is_empty());
    }

    #[test]
    fn a_rebalance_counts_the_free_space_taken_by_earlier_moves() {
        // m1 is full, m2 has 20 GiB free; m3 is below the mean but on n3,
        // where the other copy of each slice on m1 is (on m4, outside the scope).
        let mut media = media(&[(10_000, 10_000), (100, 80), (10_000, 9_700)]);
        media.push(medium("m4", "n3", "z1", 100, 45));
        let mut vols = ones(&[(1, "m1", 15), (2, "m1", 15), (3, "m1", 15)]);
        for (v, id) in vols.iter_mut().zip(10..) {
            v.resiliency = NODE1;
            v.slices.push(slice(id, 1, 0, "m4", 15));
        }
        let scope = set(&["m1", "m2", "m3"]);
        let plan = plan_rebalance(&media, &BTreeSet::new(), &scope, &movables(&vols));
        // A second 15 GiB slice would still even things, but m2 has 5 GiB left.
        assert_eq!(targets(&plan), vec![(1, "m2")]);
    }

    #[test]
    fn a_rebalance_prefers_one_20_gib_slice_over_two_10_gib_ones_when_that_evens_it() {
        let vols = ones(&[(1, "m1", 10), (2, "m1", 10), (3, "m1", 20)]);
        let plan = rebalance(&media(&[(100, 40), (100, 0)]), &vols);
        assert_eq!(targets(&plan), vec![(3, "m2")]);
        assert_eq!(plan.bytes_gib(), 20);
    }

    #[test]
    fn a_rebalance_never_moves_outside_its_scope_nor_from_or_to_a_closed_medium() {
        // m3 is out of the scope, m4 is in it but closed.
        let media = media(&[(100, 60), (100, 0), (100, 0), (100, 0)]);
        let mut vols = six_volumes_on_m1();
        vols.extend(ones(&[(7, "m3", 10)]));
        let (scope, vols) = (set(&["m1", "m2", "m4"]), movables(&vols));
        let plan = plan_rebalance(&media, &set(&["m4"]), &scope, &vols);
        assert_eq!(targets(&plan), vec![(1, "m2"), (2, "m2"), (3, "m2")]);
        // A closed medium is no source either.
        assert!(plan_rebalance(&media, &set(&["m1"]), &scope, &vols).is_empty());
    }

    #[test]
    fn a_rebalance_never_moves_a_lost_slice_and_keeps_the_rules() {
        let mut vols = six_volumes_on_m1();
        vols[0].lost = vec![1];
        // v2's other copy is on a failed medium: no constraint.
        vols[1].resiliency = NODE1;
        vols[1].slices.push(slice(20, 1, 0, "gone", 10));
        // v3's other copy is on node n2 (outside the scope): it may not join m2.
        vols[2].resiliency = NODE1;
        vols[2].slices.push(slice(30, 1, 0, "mx", 10));
        let mut media = media(&[(100, 60), (100, 0)]);
        media.push(medium("mx", "n2", "z1", 100, 10));
        let scope = set(&["m1", "m2"]);
        let plan = plan_rebalance(&media, &BTreeSet::new(), &scope, &movables(&vols));
        assert_eq!(targets(&plan), vec![(2, "m2"), (4, "m2"), (5, "m2")]);
    }

    // ---- property-style ----

    /// xorshift64*: a tiny deterministic PRNG, no dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        /// In `lo..=hi`.
        fn range(&mut self, lo: u64, hi: u64) -> u64 {
            lo + self.next() % (hi - lo + 1)
        }

        fn chance(&mut self, one_in: u64) -> bool {
            self.next().is_multiple_of(one_in)
        }
    }

    fn find_state<'a>(media: &'a [MediumState], id: &str) -> &'a MediumState {
        let mut found = media.iter().filter(|m| m.medium.id == id);
        found.next().expect("a known medium")
    }

    /// Whether the volume's slices keep the placement rules on these media.
    fn keeps_rules(media: &[MediumState], v: &Vol) -> bool {
        let on = |s: &Slice| &find_state(media, &s.medium).medium;
        let distinct: BTreeSet<&str> = v.slices.iter().map(|s| s.medium.as_str()).collect();
        let in_zone = |s: &Slice| s.copy != 0 || v.zone.as_ref().is_none_or(|z| *z == on(s).zone);
        let apart = |a: &Slice, b: &Slice| {
            let (a, b) = (on(a), on(b));
            compatible(v.resiliency, &a.node, &a.zone, &b.node, &b.zone)
        };
        let copy_of = |a: &Slice, b: &Slice| b.column == a.column && b.id != a.id;
        let copies_apart = |a: &Slice| v.slices.iter().all(|b| !copy_of(a, b) || apart(a, b));
        let slices = || v.slices.iter();
        distinct.len() == v.slices.len() && slices().all(|a| in_zone(a) && copies_apart(a))
    }

    /// Random media, and volumes placed on them by `place_volume` (each
    /// offered a random part of the media, so that usage is uneven), some
    /// of their slices lost.
    fn topology(rng: &mut Rng) -> (Vec<MediumState>, Vec<Vol>) {
        let (zones, nodes) = (rng.range(1, 3), rng.range(1, 5));
        let mut media: Vec<MediumState> = (0..rng.range(2, 8))
            .map(|i| {
                let node = rng.range(0, nodes - 1);
                let zone = (node + rng.range(0, 1)) % zones;
                let (node, zone) = (format!("n{node}"), format!("z{zone}"));
                let reserved = if rng.chance(4) { rng.range(0, 10) } else { 0 };
                medium(&format!("m{i}"), &node, &zone, rng.range(20, 200), reserved)
            })
            .collect();
        let mut vols = Vec::new();
        for v in 0..rng.range(1, 12) {
            let resiliency = [NONE, MEDIA1, NODE1, ZONE1][rng.range(0, 3) as usize];
            let zone = rng
                .chance(3)
                .then(|| format!("z{}", rng.range(0, zones - 1)));
            let size = rng.range(1, 60);
            let offered: Vec<MediumState> =
                media.iter().filter(|_| !rng.chance(2)).cloned().collect();
            let request = PlacementRequest {
                size,
                resiliency,
                zone: zone.clone(),
            };
            let Ok(placed) = place_volume(&offered, &request) else {
                continue;
            };
            let mut volume = vol(&format!("v{v}"), resiliency, Vec::new());
            volume.zone = zone;
            for (p, id) in placed.iter().zip(100 * v as i64..) {
                volume
                    .slices
                    .push(slice(id, p.copy, p.column, &p.medium, p.size));
                for m in media.iter_mut().filter(|m| m.medium.id == p.medium) {
                    m.used += p.size;
                }
                if rng.chance(12) {
                    volume.lost.push(id);
                }
            }
            assert!(keeps_rules(&media, &volume), "{:?}", volume.slices);
            vols.push(volume);
        }
        (media, vols)
    }

    /// Sum of |excess| over the open scope media.
    fn imbalance(media: &[MediumState], open: &BTreeSet<&str>) -> i128 {
        let open: Vec<&MediumState> = media
            .iter()
            .filter(|m| open.contains(m.medium.id.as_str()))
            .collect();
        excess(&open).0.values().map(|e| e.abs()).sum()
    }

    /// Checks each move against the rules (only between `allowed` media,
    /// never to a closed one) and applies it; returns the media before the
    /// plan and after each move (`used` moved from source to target).
    fn check_and_apply(
        media: &[MediumState],
        (closed, allowed): (&BTreeSet<&str>, &BTreeSet<&str>),
        vols: &[Vol],
        plan: &RelocationPlan,
    ) -> Vec<Vec<MediumState>> {
        let mut vols = vols.to_vec();
        let mut steps = vec![media.to_vec()];
        let mut booked: BTreeMap<&str, Gib> = BTreeMap::new();
        let mut moved = BTreeSet::new();
        for r in &plan.moves {
            let m = &r.slice_move;
            let (from, to) = (m.from_medium.as_str(), m.to_medium.as_str());
            assert!(moved.insert(m.slice_id), "{m:?} moves twice");
            assert!(from != to && !closed.contains(to), "{m:?}");
            assert!(allowed.contains(from) && allowed.contains(to), "{m:?}");
            let v = vols.iter_mut().find(|v| v.id == r.volume_id).expect("v");
            assert!(!v.lost.contains(&m.slice_id), "{m:?} is lost");
            // The target holds no slice of the volume, before or after its moves.
            assert!(v.slices.iter().all(|s| s.medium != to), "{m:?}");
            let s = v.slices.iter_mut().find(|s| s.id == m.slice_id).expect("s");
            assert_eq!(
                (s.medium.as_str(), s.size, s.size),
                (from, m.old_size, m.new_size)
            );
            s.medium = to.to_string();
            assert!(keeps_rules(media, v), "{m:?} breaks the rules");
            *booked.entry(to).or_insert(0) += m.old_size;
            let mut after = steps.last().expect("a step").clone();
            for x in &mut after {
                x.used = x.used + u64::from(x.medium.id == to) * m.old_size
                    - u64::from(x.medium.id == from) * m.old_size;
            }
            steps.push(after);
        }
        let expected: Vec<(&str, Gib)> = booked.into_iter().filter(|(_, g)| *g > 0).collect();
        assert_eq!(reserved(plan), expected);
        for (id, gib) in &expected {
            assert!(*gib <= find_state(media, id).free(), "{id} overbooked");
        }
        for m in steps.last().expect("a step") {
            assert!(m.used <= m.medium.size, "{} over its size", m.medium.id);
        }
        steps
    }

    #[test]
    fn random_topologies_keep_every_rule_and_never_grow_the_imbalance() {
        let (mut drained_moves, mut stuck, mut rebalanced_moves) = (0, 0, 0);
        for seed in 1..=400u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let (media, vols) = topology(&mut rng);
            let ids: Vec<&str> = media.iter().map(|m| m.medium.id.as_str()).collect();
            let pick = |rng: &mut Rng| ids[rng.range(0, ids.len() as u64 - 1) as usize];

            // Drain one medium, maybe while another drains too.
            let drained = pick(&mut rng);
            let mut closed = set(&[drained]);
            if rng.chance(3) {
                closed.insert(pick(&mut rng));
            }
            let plan = plan_drain(&media, &closed, drained, &movables(&vols));
            check_and_apply(&media, (&closed, &set(&ids)), &vols, &plan);
            // Each slice on it moves, or is stuck: lost exactly when it is lost.
            let on_drained = vols
                .iter()
                .flat_map(|v| v.slices.iter().map(move |s| (v, s)));
            let on_drained: Vec<_> = on_drained.filter(|(_, s)| s.medium == drained).collect();
            assert_eq!(plan.moves.len() + plan.stuck.len(), on_drained.len());
            for (v, s) in on_drained {
                let moved = plan.moves.iter().any(|m| m.slice_move.slice_id == s.id);
                let stuck = plan.stuck.iter().find(|x| x.slice_id == s.id);
                let expected = match (v.lost.contains(&s.id), moved) {
                    (true, _) => (false, Some(StuckReason::Lost)),
                    (false, moved) => (moved, (!moved).then_some(StuckReason::NoTarget)),
                };
                let outcome = (moved, stuck.map(|x| x.reason));
                assert_eq!(outcome, expected, "seed {seed}: slice {}", s.id);
            }
            drained_moves += plan.moves.len();
            stuck += plan.stuck.len();

            // Rebalance a random scope, maybe with a closed medium in it.
            let scope: BTreeSet<&str> = ids.iter().copied().filter(|_| !rng.chance(4)).collect();
            let closed: BTreeSet<&str> =
                rng.chance(4).then(|| pick(&mut rng)).into_iter().collect();
            let plan = plan_rebalance(&media, &closed, &scope, &movables(&vols));
            let open: BTreeSet<&str> = scope.difference(&closed).copied().collect();
            let steps = check_and_apply(&media, (&closed, &open), &vols, &plan);
            assert!(plan.stuck.is_empty());
            let imbalances: Vec<i128> = steps.iter().map(|s| imbalance(s, &open)).collect();
            let shrinking = imbalances.windows(2).all(|w| w[1] < w[0]);
            assert!(shrinking, "seed {seed}: imbalance {imbalances:?}");
            rebalanced_moves += plan.moves.len();
        }
        // The topologies exercise every outcome.
        assert!(drained_moves > 100 && stuck > 20 && rebalanced_moves > 100);
    }
}
