//! The planner's rules as tables: each row a topology (media with their
//! node, zone, size and space in use), a request, and the exact placement,
//! plan or error the planner must answer. The rows include the topologies
//! the integration tests start `svs serve` with (the seed's spread volume,
//! the data movement topology, storage nodes), so a rule is checked here
//! once and the whole service only for what needs it: the HTTP answer, the
//! job's details, the slice files and the space booked in the store.

use super::*;
use crate::model::Medium;

/// A medium: id, node, zone, size and GiB in use (allocated or reserved).
fn m(id: &str, node: &str, zone: &str, size: Gib, used: Gib) -> MediumState {
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

const fn r(media: u8, node: u8, zone: u8) -> Resiliency {
    Resiliency { media, node, zone }
}

const NONE: Resiliency = r(0, 0, 0);
const MEDIA1: Resiliency = r(1, 0, 0);
const NODE1: Resiliency = r(0, 1, 0);
const ZONE1: Resiliency = r(0, 0, 1);
/// The integration tests' "mirror" of data movements (media 1, node 1).
const MIRROR: Resiliency = r(1, 1, 0);

/// A placement as (copy, column, medium, size).
type Placed = (u32, u32, String, Gib);

fn p(copy: u32, column: u32, medium: &str, size: Gib) -> Placed {
    (copy, column, medium.to_string(), size)
}

fn no_placement(size: Gib, copies: u32) -> PlanError {
    PlanError::NoPlacement { size, copies }
}

struct Placement {
    rule: &'static str,
    media: Vec<MediumState>,
    size: Gib,
    resiliency: Resiliency,
    zone: Option<&'static str>,
    expected: Result<Vec<Placed>, PlanError>,
}

/// The seed's spread topology: a1 (10 GiB) and b1 (12 GiB), each on a node
/// and zone of its own.
fn spread(a1_used: Gib, b1_used: Gib) -> Vec<MediumState> {
    vec![
        m("a1", "node-a", "zone-a", 10, a1_used),
        m("b1", "node-b", "zone-b", 12, b1_used),
    ]
}

/// The data movement topology: m1 (20 GiB), m2 (16 GiB), m3 (30 GiB), each
/// on a node and zone of its own.
fn movement(m1_used: Gib, m2_used: Gib, m3_used: Gib) -> Vec<MediumState> {
    vec![
        m("m1", "n1", "z1", 20, m1_used),
        m("m2", "n2", "z2", 16, m2_used),
        m("m3", "n3", "z3", 30, m3_used),
    ]
}

/// `count` media of `size` GiB, each on a node of its own, in one zone.
fn many(count: usize, size: Gib) -> Vec<MediumState> {
    (0..count)
        .map(|i| m(&format!("d{i:02}"), &format!("n{i}"), "z1", size, 0))
        .collect()
}

fn placements() -> Vec<Placement> {
    vec![
        Placement {
            rule: "a mirror's two copies go to two media",
            media: vec![m("m1", "n1", "z1", 100, 0), m("m2", "n2", "z2", 100, 0)],
            size: 10,
            resiliency: MEDIA1,
            zone: None,
            expected: Ok(vec![p(0, 0, "m1", 10), p(1, 0, "m2", 10)]),
        },
        Placement {
            rule: "one medium with room takes the whole volume in one column",
            media: vec![m("m1", "n1", "z1", 100, 0), m("m2", "n2", "z1", 50, 0)],
            size: 80,
            resiliency: NONE,
            zone: None,
            expected: Ok(vec![p(0, 0, "m1", 80)]),
        },
        Placement {
            rule: "with no single medium with room, two equal columns, the size rounded up",
            media: vec![m("m1", "n1", "z1", 60, 0), m("m2", "n2", "z1", 60, 0)],
            size: 99,
            resiliency: NONE,
            zone: None,
            expected: Ok(vec![p(0, 0, "m1", 50), p(0, 1, "m2", 50)]),
        },
        Placement {
            rule: "the seed's spread volume: 16 GiB in two columns of 8 over a1 and b1",
            media: spread(0, 0),
            size: 16,
            resiliency: NONE,
            zone: None,
            expected: Ok(vec![p(0, 0, "b1", 8), p(0, 1, "a1", 8)]),
        },
        Placement {
            rule: "the fewest columns that fit: not 1 x 100 nor 2 x 50 on 40 GiB media, 3 x 34",
            media: vec![
                m("m1", "n1", "z1", 40, 0),
                m("m2", "n1", "z1", 40, 0),
                m("m3", "n1", "z1", 40, 0),
                m("m4", "n1", "z1", 40, 0),
            ],
            size: 100,
            resiliency: NONE,
            zone: None,
            expected: Ok(vec![
                p(0, 0, "m1", 34),
                p(0, 1, "m2", 34),
                p(0, 2, "m3", 34),
            ]),
        },
        Placement {
            rule: "16 GiB over sixteen 1 GiB media: sixteen columns",
            media: many(20, 1),
            size: 16,
            resiliency: NONE,
            zone: None,
            expected: Ok((0..16).map(|c| p(0, c, &format!("d{c:02}"), 1)).collect()),
        },
        Placement {
            rule: "at most sixteen columns: 17 GiB do not fit on 1 GiB media",
            media: many(20, 1),
            size: 17,
            resiliency: NONE,
            zone: None,
            expected: Err(no_placement(17, 1)),
        },
        Placement {
            rule: "copies of each column on distinct media, listed by copy then column",
            media: vec![
                m("m1", "n1", "z1", 60, 0),
                m("m2", "n2", "z1", 60, 0),
                m("m3", "n3", "z1", 60, 0),
                m("m4", "n4", "z1", 60, 0),
            ],
            size: 100,
            resiliency: MEDIA1,
            zone: None,
            expected: Ok(vec![
                p(0, 0, "m1", 50),
                p(0, 1, "m3", 50),
                p(1, 0, "m2", 50),
                p(1, 1, "m4", 50),
            ]),
        },
        Placement {
            rule: "a mirror of two columns needs four media",
            media: vec![
                m("m1", "n1", "z1", 60, 0),
                m("m2", "n2", "z1", 60, 0),
                m("m3", "n3", "z1", 60, 0),
            ],
            size: 100,
            resiliency: MEDIA1,
            zone: None,
            expected: Err(no_placement(100, 2)),
        },
        Placement {
            rule: "the medium with the most free space wins, a tie goes to the smallest id",
            media: vec![
                m("m1", "n1", "z1", 50, 0),
                m("m2", "n1", "z1", 100, 0),
                m("m3", "n1", "z1", 100, 0),
            ],
            size: 10,
            resiliency: NONE,
            zone: None,
            expected: Ok(vec![p(0, 0, "m2", 10)]),
        },
        Placement {
            rule: "space in use counts: with 10 GiB used on m2, m3 has the most free",
            media: vec![
                m("m1", "n1", "z1", 50, 0),
                m("m2", "n1", "z1", 100, 10),
                m("m3", "n1", "z1", 100, 0),
            ],
            size: 10,
            resiliency: NONE,
            zone: None,
            expected: Ok(vec![p(0, 0, "m3", 10)]),
        },
        Placement {
            rule: "with 10 GiB used on m2 and on m3, the tie goes to m2",
            media: vec![
                m("m1", "n1", "z1", 50, 0),
                m("m2", "n1", "z1", 100, 10),
                m("m3", "n1", "z1", 100, 10),
            ],
            size: 45,
            resiliency: NONE,
            zone: None,
            expected: Ok(vec![p(0, 0, "m2", 45)]),
        },
        Placement {
            rule: "space reserved by other jobs counts like space allocated",
            media: vec![
                m("m1", "n1", "z1", 100, 95),
                m("m2", "n2", "z1", 100, 95),
                m("m3", "n3", "z1", 20, 0),
            ],
            size: 20,
            resiliency: NONE,
            zone: None,
            expected: Ok(vec![p(0, 0, "m3", 20)]),
        },
        Placement {
            rule: "node resiliency passes over a roomier medium on copy 0's node",
            media: vec![
                m("m1", "n1", "z1", 100, 0),
                m("m2", "n1", "z1", 90, 0),
                m("m3", "n2", "z1", 50, 0),
            ],
            size: 10,
            resiliency: NODE1,
            zone: None,
            expected: Ok(vec![p(0, 0, "m1", 10), p(1, 0, "m3", 10)]),
        },
        Placement {
            rule: "media resiliency alone allows two copies on one node, on distinct media",
            media: vec![
                m("m1", "n1", "z1", 100, 10),
                m("m2", "n1", "z1", 90, 0),
                m("m3", "n2", "z1", 50, 10),
            ],
            size: 10,
            resiliency: MEDIA1,
            zone: None,
            expected: Ok(vec![p(0, 0, "m1", 10), p(1, 0, "m2", 10)]),
        },
        Placement {
            rule: "node resiliency with every medium on one node has no placement",
            media: vec![m("m1", "n1", "z1", 50, 0), m("m2", "n1", "z1", 50, 0)],
            size: 10,
            resiliency: NODE1,
            zone: None,
            expected: Err(no_placement(10, 2)),
        },
        Placement {
            rule: "zone resiliency passes over a roomier medium in copy 0's zone",
            media: vec![
                m("m1", "n1", "z1", 100, 0),
                m("m2", "n2", "z1", 90, 0),
                m("m3", "n3", "z2", 50, 0),
            ],
            size: 10,
            resiliency: ZONE1,
            zone: None,
            expected: Ok(vec![p(0, 0, "m1", 10), p(1, 0, "m3", 10)]),
        },
        Placement {
            rule: "node resiliency alone accepts another node in the same zone",
            media: vec![
                m("m1", "n1", "z1", 100, 10),
                m("m2", "n2", "z1", 90, 0),
                m("m3", "n3", "z2", 50, 10),
            ],
            size: 10,
            resiliency: NODE1,
            zone: None,
            expected: Ok(vec![p(0, 0, "m1", 10), p(1, 0, "m2", 10)]),
        },
        Placement {
            rule: "zone resiliency with a single zone has no placement",
            media: vec![m("m1", "n1", "z1", 100, 0), m("m2", "n2", "z1", 100, 0)],
            size: 10,
            resiliency: ZONE1,
            zone: None,
            expected: Err(no_placement(10, 2)),
        },
        Placement {
            rule: "three copies in distinct zones with two zones have no placement",
            media: vec![
                m("m1", "n1", "z1", 100, 0),
                m("m2", "n2", "z2", 100, 0),
                m("m3", "n3", "z1", 100, 0),
                m("m4", "n4", "z2", 100, 0),
            ],
            size: 10,
            resiliency: r(0, 0, 2),
            zone: None,
            expected: Err(no_placement(10, 3)),
        },
        Placement {
            rule: "copies kept = 1 + max(media, node, zone): media 2 and node 1 keep three, on three nodes",
            media: vec![
                m("m1", "n1", "z1", 100, 0),
                m("m2", "n1", "z1", 90, 0),
                m("m3", "n2", "z1", 80, 0),
                m("m4", "n3", "z1", 70, 0),
            ],
            size: 10,
            resiliency: r(2, 1, 0),
            zone: None,
            expected: Ok(vec![
                p(0, 0, "m1", 10),
                p(1, 0, "m3", 10),
                p(2, 0, "m4", 10),
            ]),
        },
        Placement {
            rule: "copies kept = 1 + max(media, node, zone): zone 2 keeps three, in three zones",
            media: vec![
                m("m1", "n1", "z1", 100, 0),
                m("m2", "n2", "z1", 90, 0),
                m("m3", "n3", "z2", 80, 0),
                m("m4", "n4", "z3", 70, 0),
            ],
            size: 10,
            resiliency: r(0, 1, 2),
            zone: None,
            expected: Ok(vec![
                p(0, 0, "m1", 10),
                p(1, 0, "m3", 10),
                p(2, 0, "m4", 10),
            ]),
        },
        Placement {
            rule: "a zone given at creation takes copy 0 even from the roomiest medium",
            media: vec![
                m("m1", "n1", "z1", 100, 0),
                m("m2", "n2", "z2", 30, 0),
                m("m3", "n3", "z2", 30, 0),
            ],
            size: 10,
            resiliency: MEDIA1,
            zone: Some("z2"),
            expected: Ok(vec![p(0, 0, "m2", 10), p(1, 0, "m1", 10)]),
        },
        Placement {
            rule: "a zone given at creation takes every column of copy 0: 40 GiB as two columns",
            media: vec![
                m("m1", "n1", "z1", 100, 10),
                m("m2", "n2", "z2", 30, 10),
                m("m3", "n3", "z2", 30, 0),
            ],
            size: 40,
            resiliency: NONE,
            zone: Some("z2"),
            expected: Ok(vec![p(0, 0, "m3", 20), p(0, 1, "m2", 20)]),
        },
        Placement {
            rule: "a zone given at creation without room in it has no placement",
            media: vec![m("m1", "n1", "z1", 100, 0), m("m2", "n2", "z2", 5, 0)],
            size: 10,
            resiliency: NONE,
            zone: Some("z2"),
            expected: Err(no_placement(10, 1)),
        },
        Placement {
            rule: "a zone without media is an unknown zone, whatever the room elsewhere",
            media: vec![m("m1", "n1", "z1", 100, 0), m("m2", "n2", "z2", 100, 0)],
            size: 10,
            resiliency: NONE,
            zone: Some("z9"),
            expected: Err(PlanError::UnknownZone("z9".to_string())),
        },
        Placement {
            rule: "more than the media's free space in total has no placement",
            media: vec![m("m1", "n1", "z1", 50, 0), m("m2", "n2", "z1", 50, 0)],
            size: 101,
            resiliency: NONE,
            zone: None,
            expected: Err(no_placement(101, 1)),
        },
        Placement {
            rule: "exactly the media's free space in total is placed over both",
            media: vec![m("m1", "n1", "z1", 50, 0), m("m2", "n2", "z1", 50, 0)],
            size: 100,
            resiliency: NONE,
            zone: None,
            expected: Ok(vec![p(0, 0, "m1", 50), p(0, 1, "m2", 50)]),
        },
        Placement {
            rule: "a mirror needs two media even when one has room for both copies",
            media: vec![m("m1", "n1", "z1", 1000, 0)],
            size: 10,
            resiliency: MEDIA1,
            zone: None,
            expected: Err(no_placement(10, 2)),
        },
        Placement {
            rule: "the largest size fails only for lack of space",
            media: vec![m("m1", "n1", "z1", 100, 0)],
            size: 1_048_576,
            resiliency: NONE,
            zone: None,
            expected: Err(no_placement(1_048_576, 1)),
        },
        Placement {
            rule: "storage nodes' media take copies like any other, one per node",
            media: vec![m("a1", "sn-1", "z1", 4, 0), m("b1", "sn-2", "z2", 4, 0)],
            size: 2,
            resiliency: MIRROR,
            zone: None,
            expected: Ok(vec![p(0, 0, "a1", 2), p(1, 0, "b1", 2)]),
        },
        Placement {
            rule: "the movement topology: a 20 GiB filler goes to m3, the roomiest",
            media: movement(0, 0, 0),
            size: 20,
            resiliency: NONE,
            zone: None,
            expected: Ok(vec![p(0, 0, "m3", 20)]),
        },
        Placement {
            rule: "the movement topology: the 15 GiB mirror beside the filler is on m1 and m2",
            media: movement(0, 0, 20),
            size: 15,
            resiliency: MIRROR,
            zone: None,
            expected: Ok(vec![p(0, 0, "m1", 15), p(1, 0, "m2", 15)]),
        },
        Placement {
            rule: "the movement topology with its mirror: 8 GiB fit on m3 only",
            media: movement(15, 15, 20),
            size: 8,
            resiliency: NONE,
            zone: None,
            expected: Ok(vec![p(0, 0, "m3", 8)]),
        },
        Placement {
            rule: "the movement topology with 9 GiB more taken on m3: 8 GiB fit nowhere",
            media: movement(15, 15, 29),
            size: 8,
            resiliency: NONE,
            zone: None,
            expected: Err(no_placement(8, 1)),
        },
    ]
}

#[test]
fn each_placement_rule_places_the_volume_as_its_row_says() {
    for case in placements() {
        let request = PlacementRequest {
            size: case.size,
            resiliency: case.resiliency,
            zone: case.zone.map(str::to_string),
        };
        let placed = place_volume(&case.media, &request).map(|placements| {
            placements
                .into_iter()
                .map(|s| (s.copy, s.column, s.medium, s.size))
                .collect::<Vec<Placed>>()
        });
        assert_eq!(placed, case.expected, "{}", case.rule);
    }
}

/// A slice: id, copy, column, medium, size.
fn s(id: i64, copy: u32, column: u32, medium: &str, size: Gib) -> Slice {
    Slice {
        id,
        copy,
        column,
        medium: medium.to_string(),
        size,
    }
}

/// A resize plan, written out: the slices' new size, the growths (slice,
/// medium, from, to), the moves (slice, from, to, old size, new size) and
/// the reservations (medium, GiB).
#[derive(Debug, PartialEq, Eq)]
struct Planned {
    size: Gib,
    growths: Vec<(i64, String, Gib, Gib)>,
    moves: Vec<(i64, String, String, Gib, Gib)>,
    reservations: Vec<(String, Gib)>,
}

fn planned(
    size: Gib,
    growths: &[(i64, &str, Gib, Gib)],
    moves: &[(i64, &str, &str, Gib, Gib)],
    reservations: &[(&str, Gib)],
) -> Planned {
    Planned {
        size,
        growths: growths
            .iter()
            .map(|&(id, medium, from, to)| (id, medium.to_string(), from, to))
            .collect(),
        moves: moves
            .iter()
            .map(|&(id, from, to, old, new)| (id, from.to_string(), to.to_string(), old, new))
            .collect(),
        reservations: reservations
            .iter()
            .map(|&(medium, gib)| (medium.to_string(), gib))
            .collect(),
    }
}

struct Resize {
    rule: &'static str,
    media: Vec<MediumState>,
    slices: Vec<Slice>,
    from: Gib,
    to: Gib,
    resiliency: Resiliency,
    movement: bool,
    expected: Result<Planned, PlanError>,
}

/// The seed's spread volume: 16 GiB in two columns of 8, column 0 on b1
/// (the roomier), column 1 on a1.
fn spread_slices() -> Vec<Slice> {
    vec![s(1, 0, 0, "b1", 8), s(2, 0, 1, "a1", 8)]
}

/// The movement topology's mirror: 15 GiB, copy 0 on m1, copy 1 on m2.
fn mirror_slices() -> Vec<Slice> {
    vec![s(1, 0, 0, "m1", 15), s(2, 1, 0, "m2", 15)]
}

/// A 40 GiB mirror on m1 and m2.
fn pair_slices() -> Vec<Slice> {
    vec![s(1, 0, 0, "m1", 40), s(2, 1, 0, "m2", 40)]
}

fn resizes() -> Vec<Resize> {
    vec![
        Resize {
            rule: "in place: every slice grows where it is and each growth is booked",
            media: spread(8, 8),
            slices: spread_slices(),
            from: 16,
            to: 20,
            resiliency: NONE,
            movement: false,
            expected: Ok(planned(
                10,
                &[(1, "b1", 8, 10), (2, "a1", 8, 10)],
                &[],
                &[("a1", 2), ("b1", 2)],
            )),
        },
        Resize {
            rule: "in place fails when one of two media lacks room (a1 needs 3 GiB, has 2)",
            media: spread(8, 8),
            slices: spread_slices(),
            from: 16,
            to: 22,
            resiliency: NONE,
            movement: false,
            expected: Err(PlanError::NoInPlacePlan),
        },
        Resize {
            rule: "data movement is refused for a volume with no resiliency",
            media: spread(8, 8),
            slices: spread_slices(),
            from: 16,
            to: 22,
            resiliency: NONE,
            movement: true,
            expected: Err(PlanError::MovementWithoutResiliency),
        },
        Resize {
            rule: "data movement is refused with no resiliency even when in place would fit",
            media: spread(8, 8),
            slices: spread_slices(),
            from: 16,
            to: 18,
            resiliency: NONE,
            movement: true,
            expected: Err(PlanError::MovementWithoutResiliency),
        },
        Resize {
            rule: "without data movement, one copy's medium lacking room fails in place",
            media: movement(15, 15, 20),
            slices: mirror_slices(),
            from: 15,
            to: 18,
            resiliency: MIRROR,
            movement: false,
            expected: Err(PlanError::NoInPlacePlan),
        },
        Resize {
            rule: "with data movement, no medium has room for the new size (m3 has 10 free)",
            media: movement(15, 15, 20),
            slices: mirror_slices(),
            from: 15,
            to: 18,
            resiliency: MIRROR,
            movement: true,
            expected: Err(PlanError::NoMovementTarget),
        },
        Resize {
            rule: "with room on m3, only the slice on the medium lacking room moves",
            media: movement(15, 15, 0),
            slices: mirror_slices(),
            from: 15,
            to: 18,
            resiliency: MIRROR,
            movement: true,
            expected: Ok(planned(
                18,
                &[(1, "m1", 15, 18)],
                &[(2, "m2", "m3", 15, 18)],
                &[("m1", 3), ("m3", 18)],
            )),
        },
        Resize {
            rule: "after the move, the next resize fits in place",
            media: movement(18, 0, 18),
            slices: vec![s(1, 0, 0, "m1", 18), s(2, 1, 0, "m3", 18)],
            from: 18,
            to: 20,
            resiliency: MIRROR,
            movement: false,
            expected: Ok(planned(
                20,
                &[(1, "m1", 18, 20), (2, "m3", 18, 20)],
                &[],
                &[("m1", 2), ("m3", 2)],
            )),
        },
        Resize {
            rule: "in place is preferred even when data movement is allowed",
            media: movement(18, 0, 18),
            slices: vec![s(1, 0, 0, "m1", 18), s(2, 1, 0, "m3", 18)],
            from: 18,
            to: 20,
            resiliency: MIRROR,
            movement: true,
            expected: Ok(planned(
                20,
                &[(1, "m1", 18, 20), (2, "m3", 18, 20)],
                &[],
                &[("m1", 2), ("m3", 2)],
            )),
        },
        Resize {
            rule: "the new size is split over the volume's columns",
            media: vec![m("m1", "n1", "z1", 100, 50), m("m2", "n2", "z1", 100, 50)],
            slices: vec![s(1, 0, 0, "m1", 50), s(2, 0, 1, "m2", 50)],
            from: 100,
            to: 150,
            resiliency: NONE,
            movement: false,
            expected: Ok(planned(
                75,
                &[(1, "m1", 50, 75), (2, "m2", 50, 75)],
                &[],
                &[("m1", 25), ("m2", 25)],
            )),
        },
        Resize {
            rule: "a move's target keeps the copies of a column on distinct nodes",
            media: vec![
                m("m1", "n1", "z1", 100, 40),
                m("m2", "n2", "z1", 50, 40),
                m("m3", "n1", "z1", 200, 0),
                m("m4", "n3", "z1", 80, 0),
            ],
            slices: pair_slices(),
            from: 40,
            to: 60,
            resiliency: NODE1,
            movement: true,
            expected: Ok(planned(
                60,
                &[(1, "m1", 40, 60)],
                &[(2, "m2", "m4", 40, 60)],
                &[("m1", 20), ("m4", 60)],
            )),
        },
        Resize {
            rule: "a move's target keeps the copies of a column in distinct zones",
            media: vec![
                m("m1", "n1", "z1", 100, 40),
                m("m2", "n2", "z2", 50, 40),
                m("m3", "n3", "z1", 200, 0),
                m("m4", "n4", "z3", 80, 0),
            ],
            slices: pair_slices(),
            from: 40,
            to: 60,
            resiliency: ZONE1,
            movement: true,
            expected: Ok(planned(
                60,
                &[(1, "m1", 40, 60)],
                &[(2, "m2", "m4", 40, 60)],
                &[("m1", 20), ("m4", 60)],
            )),
        },
        Resize {
            rule: "no target when the only roomy medium breaks node resiliency",
            media: vec![
                m("m1", "n1", "z1", 100, 40),
                m("m2", "n2", "z1", 50, 40),
                m("m3", "n1", "z1", 200, 0),
            ],
            slices: pair_slices(),
            from: 40,
            to: 60,
            resiliency: NODE1,
            movement: true,
            expected: Err(PlanError::NoMovementTarget),
        },
        Resize {
            rule: "a move's target needs room for the new size, not the old one",
            media: vec![
                m("m1", "n1", "z1", 100, 40),
                m("m2", "n2", "z1", 50, 40),
                m("m3", "n3", "z1", 100, 50),
                m("m4", "n4", "z1", 60, 0),
            ],
            slices: pair_slices(),
            from: 40,
            to: 60,
            resiliency: MEDIA1,
            movement: true,
            expected: Ok(planned(
                60,
                &[(1, "m1", 40, 60)],
                &[(2, "m2", "m4", 40, 60)],
                &[("m1", 20), ("m4", 60)],
            )),
        },
        Resize {
            rule: "media the volume uses are never targets: both copies move to new media",
            media: vec![
                m("m1", "n1", "z1", 45, 40),
                m("m2", "n2", "z1", 45, 40),
                m("m3", "n3", "z1", 100, 0),
                m("m4", "n4", "z1", 90, 0),
            ],
            slices: pair_slices(),
            from: 40,
            to: 60,
            resiliency: MEDIA1,
            movement: true,
            expected: Ok(planned(
                60,
                &[],
                &[(1, "m1", "m3", 40, 60), (2, "m2", "m4", 40, 60)],
                &[("m3", 60), ("m4", 60)],
            )),
        },
        Resize {
            rule: "media the volume uses are never targets: one spare for two moves is none",
            media: vec![
                m("m1", "n1", "z1", 45, 40),
                m("m2", "n2", "z1", 45, 40),
                m("m3", "n3", "z1", 100, 0),
            ],
            slices: pair_slices(),
            from: 40,
            to: 60,
            resiliency: MEDIA1,
            movement: true,
            expected: Err(PlanError::NoMovementTarget),
        },
    ]
}

#[test]
fn each_resize_rule_plans_as_its_row_says() {
    for case in resizes() {
        let request = ResizeRequest {
            current_size: case.from,
            new_size: case.to,
            slices: &case.slices,
            resiliency: case.resiliency,
            allow_data_movement: case.movement,
        };
        let plan = plan_resize(&case.media, &request).map(|plan| Planned {
            size: plan.new_slice_size,
            growths: plan
                .growths
                .into_iter()
                .map(|g| (g.slice_id, g.medium, g.from, g.to))
                .collect(),
            moves: plan
                .moves
                .into_iter()
                .map(|mv| {
                    (
                        mv.slice_id,
                        mv.from_medium,
                        mv.to_medium,
                        mv.old_size,
                        mv.new_size,
                    )
                })
                .collect(),
            reservations: plan
                .reservations
                .into_iter()
                .map(|r| (r.medium, r.gib))
                .collect(),
        });
        assert_eq!(plan, case.expected, "{}", case.rule);
    }
}

#[test]
fn two_copies_of_a_column_may_share_a_node_or_a_zone_only_as_the_resiliency_allows() {
    // (resiliency, copy a's node and zone, copy b's node and zone, allowed)
    let table = [
        (NONE, ("n1", "z1"), ("n1", "z1"), true),
        (MEDIA1, ("n1", "z1"), ("n1", "z1"), true),
        (r(2, 0, 0), ("n1", "z1"), ("n1", "z1"), true),
        (NODE1, ("n1", "z1"), ("n1", "z2"), false),
        (NODE1, ("n1", "z1"), ("n2", "z1"), true),
        (ZONE1, ("n1", "z1"), ("n2", "z1"), false),
        (ZONE1, ("n1", "z1"), ("n1", "z2"), true),
        (r(0, 1, 1), ("n1", "z1"), ("n2", "z2"), true),
        (r(0, 1, 1), ("n1", "z1"), ("n2", "z1"), false),
        (r(0, 1, 1), ("n1", "z1"), ("n1", "z2"), false),
        (r(0, 2, 0), ("n1", "z1"), ("n2", "z1"), true),
    ];
    for (resiliency, (a_node, a_zone), (b_node, b_zone), allowed) in table {
        assert_eq!(
            compatible(resiliency, a_node, a_zone, b_node, b_zone),
            allowed,
            "{resiliency:?}: {a_node}/{a_zone} beside {b_node}/{b_zone}"
        );
    }
}

#[test]
fn copies_kept_are_one_more_than_the_highest_resiliency() {
    // (resiliency, copies), each placed on media enough for three copies.
    let table = [
        (NONE, 1),
        (MEDIA1, 2),
        (NODE1, 2),
        (ZONE1, 2),
        (r(2, 0, 0), 3),
        (r(0, 2, 0), 3),
        (r(0, 0, 2), 3),
        (r(2, 1, 1), 3),
        (r(1, 2, 0), 3),
    ];
    let media = vec![
        m("m1", "n1", "z1", 100, 0),
        m("m2", "n2", "z2", 100, 0),
        m("m3", "n3", "z3", 100, 0),
    ];
    for (resiliency, copies) in table {
        assert_eq!(resiliency.copies(), copies, "{resiliency:?}");
        let request = PlacementRequest {
            size: 10,
            resiliency,
            zone: None,
        };
        let placed = place_volume(&media, &request).expect("placed");
        let kept: BTreeSet<u32> = placed.iter().map(|s| s.copy).collect();
        assert_eq!(
            kept,
            (0..copies).collect::<BTreeSet<u32>>(),
            "{resiliency:?}"
        );
        assert_eq!(placed.len(), copies as usize, "{resiliency:?}");
    }
}

#[test]
fn each_refusal_says_what_the_seed_says() {
    let table = [
        (
            PlanError::NoInPlacePlan,
            "GetModificationPlan: Could not find an in-place modification plan",
        ),
        (
            PlanError::MovementWithoutResiliency,
            "GetModificationPlan: Data movement is not supported for volumes with no resiliency",
        ),
        (
            PlanError::NoMovementTarget,
            "GetModificationPlan: Failed to get modificationPlan for resizing volumeGroup",
        ),
        (
            no_placement(10, 2),
            "no placement found for a volume of 10 GiB with 2 copies: not enough free space on \
             media that satisfy the policy's resiliency",
        ),
        (
            no_placement(1_048_576, 1),
            "no placement found for a volume of 1048576 GiB with 1 copies: not enough free \
             space on media that satisfy the policy's resiliency",
        ),
        (
            PlanError::UnknownZone("z9".to_string()),
            "zone 'z9' has no media",
        ),
    ];
    for (error, message) in table {
        assert_eq!(error.to_string(), message, "{error:?}");
    }
    assert_eq!(
        MOVEMENT_PLAN_FOUND,
        "GetMovementModificationPlan: Found movement plan. Data Movement is enabled. The \
         operation is now being attempted"
    );
}
