//! Volume recovery: where each lost copy of a slice is rebuilt. Pure logic
//! over the media as the store reports them.

use crate::model::{Gib, MediumState, Resiliency, Slice};
use crate::planner::{Reservation, ResizePlan, SliceMove};
use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;

/// A slice of the volume with where it is and whether it is lost: its
/// medium failed, or this copy alone was lost on a healthy medium (a file
/// of it gone). Both are rebuilt the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedSlice {
    pub slice: Slice,
    pub node: String,
    pub zone: String,
    pub lost: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecoveryError {
    #[error("column {column} has no healthy copy left: its data is lost and cannot be rebuilt")]
    ColumnLost { column: u32 },
    #[error("no medium can take copy {copy} of column {column} ({size} GiB): every healthy medium is full, already holds a slice of the volume, or would break the policy's resiliency")]
    NoTarget { copy: u32, column: u32, size: Gib },
}

/// Whether the volume has lost slices, and whether it can still serve all
/// of its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeHealth {
    Healthy,
    /// Lost slices, but every column has a healthy copy.
    Degraded,
    /// A column lost every copy: I/O on its ranges fails.
    Failed,
}

pub fn volume_health(slices: &[PlacedSlice]) -> VolumeHealth {
    if !slices.iter().any(|s| s.lost) {
        return VolumeHealth::Healthy;
    }
    let mut healthy_copies: BTreeMap<u32, usize> = BTreeMap::new();
    for s in slices {
        *healthy_copies.entry(s.slice.column).or_default() += usize::from(!s.lost);
    }
    if healthy_copies.values().any(|n| *n == 0) {
        VolumeHealth::Failed
    } else {
        VolumeHealth::Degraded
    }
}

/// Picks a medium for every lost slice. First its own medium, when it is
/// usable again (listed in `media`, which holds only healthy ones: a
/// storage node that came back, a copy lost alone on a healthy medium) and
/// still keeps the policy's node and zone resiliency: the copy is resynced
/// there in place (only what differs from a healthy copy is rewritten),
/// and needs no new room (its slice holds its space already). Else a
/// healthy medium that holds no slice of the volume (a lost copy still
/// holds its place on its own medium until the rebuild switches it, and
/// one medium never holds two slices of a volume), has room, and keeps the
/// policy's node and zone resiliency against the column's other copies;
/// the one with the most free space wins, and its slice's size is booked
/// on it. The plan is a set of moves from the lost medium (to the same one
/// for a resync).
pub fn plan_recovery(
    media: &[MediumState],
    slices: &[PlacedSlice],
    resiliency: Resiliency,
) -> Result<ResizePlan, RecoveryError> {
    let mut free: BTreeMap<&str, Gib> = media
        .iter()
        .map(|m| (m.medium.id.as_str(), m.free()))
        .collect();
    let mut taken: BTreeSet<String> = slices.iter().map(|s| s.slice.medium.clone()).collect();
    // Nodes and zones each column's copies are on (healthy and planned).
    let mut column_places: BTreeMap<u32, Vec<(String, String)>> = BTreeMap::new();
    for s in slices.iter().filter(|s| !s.lost) {
        column_places
            .entry(s.slice.column)
            .or_default()
            .push((s.node.clone(), s.zone.clone()));
    }
    let mut moves = Vec::new();
    let mut booked: BTreeMap<String, Gib> = BTreeMap::new();
    let mut lost: Vec<&PlacedSlice> = slices.iter().filter(|s| s.lost).collect();
    lost.sort_by_key(|s| (s.slice.column, s.slice.copy));
    for s in lost {
        let column = s.slice.column;
        let places = column_places.entry(column).or_default();
        if places.is_empty() {
            return Err(RecoveryError::ColumnLost { column });
        }
        let size = s.slice.size;
        let keeps_resiliency = |m: &MediumState| {
            (resiliency.node == 0 || places.iter().all(|(n, _)| *n != m.medium.node))
                && (resiliency.zone == 0 || places.iter().all(|(_, z)| *z != m.medium.zone))
        };
        let own = media
            .iter()
            .find(|m| m.medium.id == s.slice.medium)
            .filter(|m| keeps_resiliency(m));
        if let Some(own) = own {
            places.push((own.medium.node.clone(), own.medium.zone.clone()));
            moves.push(SliceMove {
                slice_id: s.slice.id,
                from_medium: s.slice.medium.clone(),
                to_medium: s.slice.medium.clone(),
                old_size: size,
                new_size: size,
            });
            continue;
        }
        let target = media
            .iter()
            .filter(|m| !taken.contains(&m.medium.id))
            .filter(|m| free.get(m.medium.id.as_str()).copied().unwrap_or(0) >= size)
            .filter(|m| keeps_resiliency(m))
            .max_by(|a, b| {
                let fa = free.get(a.medium.id.as_str()).copied().unwrap_or(0);
                let fb = free.get(b.medium.id.as_str()).copied().unwrap_or(0);
                // Most free space; on a tie, the smallest id.
                fa.cmp(&fb).then_with(|| b.medium.id.cmp(&a.medium.id))
            })
            .ok_or(RecoveryError::NoTarget {
                copy: s.slice.copy,
                column,
                size,
            })?;
        let id = target.medium.id.clone();
        if let Some(f) = free.get_mut(id.as_str()) {
            *f -= size;
        }
        taken.insert(id.clone());
        places.push((target.medium.node.clone(), target.medium.zone.clone()));
        *booked.entry(id.clone()).or_default() += size;
        moves.push(SliceMove {
            slice_id: s.slice.id,
            from_medium: s.slice.medium.clone(),
            to_medium: id,
            old_size: size,
            new_size: size,
        });
    }
    Ok(ResizePlan {
        new_slice_size: slices.first().map_or(0, |s| s.slice.size),
        growths: Vec::new(),
        moves,
        reservations: booked
            .into_iter()
            .map(|(medium, gib)| Reservation { medium, gib })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Medium;

    fn medium(id: &str, node: &str, zone: &str, size: Gib, used: Gib) -> MediumState {
        MediumState {
            medium: Medium {
                id: id.into(),
                node: node.into(),
                zone: zone.into(),
                size,
            },
            used,
        }
    }

    fn placed(id: i64, copy: u32, column: u32, on: (&str, &str, &str), lost: bool) -> PlacedSlice {
        PlacedSlice {
            slice: Slice {
                id,
                copy,
                column,
                medium: on.0.into(),
                size: 10,
            },
            node: on.1.into(),
            zone: on.2.into(),
            lost,
        }
    }

    const M1: (&str, &str, &str) = ("m1", "n1", "z1");
    const M2: (&str, &str, &str) = ("m2", "n2", "z2");

    #[test]
    fn health_follows_the_columns_copies() {
        let healthy = [placed(1, 0, 0, M1, false), placed(2, 1, 0, M2, false)];
        assert_eq!(volume_health(&healthy), VolumeHealth::Healthy);
        let degraded = [placed(1, 0, 0, M1, true), placed(2, 1, 0, M2, false)];
        assert_eq!(volume_health(&degraded), VolumeHealth::Degraded);
        let failed = [placed(1, 0, 0, M1, true), placed(2, 0, 1, M2, false)];
        assert_eq!(volume_health(&failed), VolumeHealth::Failed);
    }

    #[test]
    fn a_lost_copy_goes_to_the_freest_medium_that_keeps_resiliency() {
        let media = [
            medium("m2", "n2", "z2", 20, 10),
            // Same node as the healthy copy: refused with node resiliency.
            medium("m4", "n2", "z4", 100, 0),
            medium("m3", "n3", "z3", 30, 0),
            medium("m5", "n5", "z5", 25, 0),
        ];
        let slices = [placed(1, 0, 0, M1, true), placed(2, 1, 0, M2, false)];
        let resiliency = Resiliency {
            media: 1,
            node: 1,
            zone: 0,
        };
        let plan = plan_recovery(&media, &slices, resiliency).expect("plan");
        assert_eq!(
            plan.moves,
            vec![SliceMove {
                slice_id: 1,
                from_medium: "m1".into(),
                to_medium: "m3".into(),
                old_size: 10,
                new_size: 10,
            }]
        );
        assert_eq!(
            plan.reservations,
            vec![Reservation {
                medium: "m3".into(),
                gib: 10
            }]
        );
        let no_node_rule = Resiliency {
            media: 1,
            node: 0,
            zone: 0,
        };
        let plan = plan_recovery(&media, &slices, no_node_rule).expect("plan");
        assert_eq!(plan.moves[0].to_medium, "m4");
    }

    #[test]
    fn a_copy_lost_on_a_medium_usable_again_is_resynced_there_in_place() {
        // m1 is healthy again (a storage node that came back): its copy is
        // resynced there, booking nothing (its slice holds its space), even
        // with more room elsewhere.
        let media = [
            medium("m1", "n1", "z1", 20, 10),
            medium("m2", "n2", "z2", 20, 10),
            medium("m3", "n3", "z3", 100, 0),
        ];
        let slices = [placed(1, 0, 0, M1, true), placed(2, 1, 0, M2, false)];
        let node_rule = Resiliency {
            media: 1,
            node: 1,
            zone: 1,
        };
        let plan = plan_recovery(&media, &slices, node_rule).expect("plan");
        assert_eq!(
            plan.moves,
            vec![SliceMove {
                slice_id: 1,
                from_medium: "m1".into(),
                to_medium: "m1".into(),
                old_size: 10,
                new_size: 10,
            }]
        );
        assert!(plan.reservations.is_empty(), "{:?}", plan.reservations);
        // The two-node case: nowhere else is allowed, and the own medium
        // needs no free room (it is full with the slice itself).
        let two_nodes = [
            medium("m1", "n1", "z1", 10, 10),
            medium("m2", "n2", "z2", 10, 10),
        ];
        let plan = plan_recovery(&two_nodes, &slices, node_rule).expect("plan");
        assert_eq!(plan.moves[0].to_medium, "m1");
        assert!(plan.reservations.is_empty());
    }

    #[test]
    fn a_copy_whose_own_medium_failed_or_now_breaks_resiliency_goes_elsewhere() {
        let slices = [placed(1, 0, 0, M1, true), placed(2, 1, 0, M2, false)];
        let node_rule = Resiliency {
            media: 1,
            node: 1,
            zone: 0,
        };
        // m1 failed (not listed): rebuilt on m3.
        let without_m1 = [
            medium("m2", "n2", "z2", 20, 10),
            medium("m3", "n3", "z3", 20, 0),
        ];
        let plan = plan_recovery(&without_m1, &slices, node_rule).expect("plan");
        assert_eq!(plan.moves[0].to_medium, "m3");
        assert_eq!(plan.reservations.len(), 1);
        // m1 is now on the healthy copy's node: in place would put both
        // copies on n2, so the copy goes to m3.
        let m1_moved = [
            medium("m1", "n2", "z1", 20, 10),
            medium("m2", "n2", "z2", 20, 10),
            medium("m3", "n3", "z3", 20, 0),
        ];
        let plan = plan_recovery(&m1_moved, &slices, node_rule).expect("plan");
        assert_eq!(plan.moves[0].to_medium, "m3");
        // ... and with nowhere else to go, refused rather than put there.
        assert_eq!(
            plan_recovery(&m1_moved[..2], &slices, node_rule),
            Err(RecoveryError::NoTarget {
                copy: 0,
                column: 0,
                size: 10
            })
        );
        // The same with a zone rule.
        let zone_rule = Resiliency {
            media: 1,
            node: 0,
            zone: 1,
        };
        let m1_in_z2 = [
            medium("m1", "n1", "z2", 20, 10),
            medium("m2", "n2", "z2", 20, 10),
            medium("m3", "n3", "z3", 20, 0),
        ];
        let plan = plan_recovery(&m1_in_z2, &slices, zone_rule).expect("plan");
        assert_eq!(plan.moves[0].to_medium, "m3");
    }

    #[test]
    fn two_lost_copies_of_a_column_each_go_back_to_their_own_medium() {
        const M3: (&str, &str, &str) = ("m3", "n3", "z3");
        let media = [
            medium("m1", "n1", "z1", 20, 10),
            medium("m2", "n2", "z2", 20, 10),
            medium("m3", "n3", "z3", 20, 10),
        ];
        let slices = [
            placed(1, 0, 0, M1, true),
            placed(2, 1, 0, M2, false),
            placed(3, 2, 0, M3, true),
        ];
        let node_rule = Resiliency {
            media: 1,
            node: 1,
            zone: 0,
        };
        let plan = plan_recovery(&media, &slices, node_rule).expect("plan");
        assert_eq!(
            plan.moves
                .iter()
                .map(|m| (m.from_medium.as_str(), m.to_medium.as_str()))
                .collect::<Vec<_>>(),
            [("m1", "m1"), ("m3", "m3")]
        );
    }

    #[test]
    fn recovery_fails_without_room_or_without_a_healthy_copy() {
        let full = [
            medium("m2", "n2", "z2", 20, 10),
            medium("m3", "n3", "z3", 15, 10),
        ];
        let slices = [placed(1, 0, 0, M1, true), placed(2, 1, 0, M2, false)];
        assert_eq!(
            plan_recovery(&full, &slices, Resiliency::default()),
            Err(RecoveryError::NoTarget {
                copy: 0,
                column: 0,
                size: 10
            })
        );
        let gone = [placed(1, 0, 0, M1, true)];
        assert_eq!(
            plan_recovery(&full, &gone, Resiliency::default()),
            Err(RecoveryError::ColumnLost { column: 0 })
        );
    }
}
