//! Plans said before they are carried out (a dry run): the shape of a plan
//! (what it moves or where it places), the token a dry run answers for it,
//! and what changed between a dry run's plan and the one the real request
//! makes, said so that the operator knows why it was refused.

use crate::{slice_label, PlanError, ResizePlan, SlicePlacement};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a plan does, as far as an operator steers by it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum PlanShape {
    /// A resize: each move as (slice id, from medium, to medium), sorted;
    /// none for an in-place resize.
    Resize { moves: Vec<(i64, String, String)> },
    /// A creation: each slice's (copy, column, medium), sorted.
    Create { slices: Vec<(u32, u32, String)> },
    /// No plan: the planner's refusal.
    Refused { message: String },
}

impl PlanShape {
    /// The shape of a resize's planning.
    pub fn of_resize(planned: &Result<ResizePlan, PlanError>) -> PlanShape {
        match planned {
            Ok(plan) => {
                let mut moves: Vec<(i64, String, String)> = plan
                    .moves
                    .iter()
                    .map(|m| (m.slice_id, m.from_medium.clone(), m.to_medium.clone()))
                    .collect();
                moves.sort();
                PlanShape::Resize { moves }
            }
            Err(e) => PlanShape::Refused {
                message: e.to_string(),
            },
        }
    }

    /// The shape of a creation's placement.
    pub fn of_placement(placed: &Result<Vec<SlicePlacement>, PlanError>) -> PlanShape {
        match placed {
            Ok(slices) => {
                let mut slices: Vec<(u32, u32, String)> = slices
                    .iter()
                    .map(|s| (s.copy, s.column, s.medium.clone()))
                    .collect();
                slices.sort();
                PlanShape::Create { slices }
            }
            Err(e) => PlanShape::Refused {
                message: e.to_string(),
            },
        }
    }

    /// The token a dry run answers: opaque to clients, given back with the
    /// real request (hex of the shape's JSON, so that it needs no escaping
    /// in a query string).
    pub fn token(&self) -> String {
        // A shape of strings and numbers always encodes.
        hex::encode(serde_json::to_vec(self).unwrap_or_default())
    }

    /// The shape a token names; None when it is not a dry run's token.
    pub fn from_token(token: &str) -> Option<PlanShape> {
        let bytes = hex::decode(token).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    fn describe(&self) -> String {
        match self {
            PlanShape::Resize { moves } if moves.is_empty() => "in place".to_string(),
            PlanShape::Resize { moves } => format!("with movement of {} slice(s)", moves.len()),
            PlanShape::Create { slices } => format!("a placement of {} slice(s)", slices.len()),
            PlanShape::Refused { message } => format!("refused ({message})"),
        }
    }
}

/// The refusal of a request (409) or the failure of its job when the plan
/// it was given back is no longer the plan: what changed, and what to do.
pub fn plan_changed_message(changes: &[String]) -> String {
    format!(
        "The plan changed since its dry run: {}. Nothing was changed; run the dry run again",
        changes.join("; ")
    )
}

/// What differs between the plan a dry run answered (`before`) and the
/// plan made now, one sentence per slice (named by `label`, from a slice
/// id); empty when they are the same plan.
pub fn plan_changes(
    before: &PlanShape,
    now: &PlanShape,
    label: &dyn Fn(i64) -> String,
) -> Vec<String> {
    if before == now {
        return Vec::new();
    }
    match (before, now) {
        (PlanShape::Resize { moves: was }, PlanShape::Resize { moves: is })
            if !was.is_empty() && !is.is_empty() =>
        {
            let by_slice = |moves: &[(i64, String, String)]| -> BTreeMap<i64, (String, String)> {
                moves
                    .iter()
                    .map(|(id, from, to)| (*id, (from.clone(), to.clone())))
                    .collect()
            };
            let (was, is) = (by_slice(was), by_slice(is));
            let mut ids: Vec<i64> = was.keys().chain(is.keys()).copied().collect();
            ids.sort_unstable();
            ids.dedup();
            ids.into_iter()
                .filter_map(|id| match (was.get(&id), is.get(&id)) {
                    (Some(w), Some(i)) if w == i => None,
                    (Some((wf, wt)), Some((f, t))) => Some(format!(
                        "slice {} now moves from {f} to {t}, not from {wf} to {wt}",
                        label(id)
                    )),
                    (Some(_), None) => Some(format!("slice {} no longer moves", label(id))),
                    (None, Some((f, t))) => {
                        Some(format!("slice {} now moves from {f} to {t}", label(id)))
                    }
                    (None, None) => None,
                })
                .collect()
        }
        (PlanShape::Create { slices: was }, PlanShape::Create { slices: is })
            if was.len() == is.len() =>
        {
            was.iter()
                .zip(is)
                .filter(|(w, i)| w != i)
                .map(|((_, _, wm), (copy, column, m))| {
                    format!(
                        "slice {} now goes to {m}, not {wm}",
                        slice_label(*copy, *column)
                    )
                })
                .collect()
        }
        _ => vec![format!(
            "it was planned {}, it is now planned {}",
            before.describe(),
            now.describe()
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resize(moves: &[(i64, &str, &str)]) -> PlanShape {
        PlanShape::Resize {
            moves: moves
                .iter()
                .map(|(id, f, t)| (*id, f.to_string(), t.to_string()))
                .collect(),
        }
    }

    fn label(id: i64) -> String {
        format!("c{id}-k0")
    }

    #[test]
    fn a_token_names_its_shape_and_nothing_else_is_one() {
        let shape = resize(&[(3, "m1", "m4"), (5, "m2", "m3")]);
        let token = shape.token();
        assert!(token.chars().all(|c| c.is_ascii_hexdigit()), "{token}");
        assert_eq!(PlanShape::from_token(&token), Some(shape));
        assert_eq!(PlanShape::from_token("zz"), None);
        assert_eq!(
            PlanShape::from_token(&hex::encode(b"{\"kind\":\"x\"}")),
            None
        );
    }

    #[test]
    fn changes_name_each_slice_that_moves_otherwise() {
        let before = resize(&[(1, "m1", "m4"), (2, "m2", "m5")]);
        let now = resize(&[(1, "m1", "m3"), (3, "m3", "m6")]);
        assert_eq!(
            plan_changes(&before, &now, &label),
            vec![
                "slice c1-k0 now moves from m1 to m3, not from m1 to m4",
                "slice c2-k0 no longer moves",
                "slice c3-k0 now moves from m3 to m6",
            ]
        );
        assert_eq!(
            plan_changes(&before, &resize(&[]), &label),
            vec!["it was planned with movement of 2 slice(s), it is now planned in place"]
        );
        let refused = PlanShape::Refused {
            message: "GetModificationPlan: Failed to get modificationPlan for resizing volumeGroup"
                .into(),
        };
        assert_eq!(
            plan_changes(&resize(&[]), &refused, &label),
            vec![
                "it was planned in place, it is now planned refused (GetModificationPlan: \
                 Failed to get modificationPlan for resizing volumeGroup)"
            ]
        );
        let placed = |m: &str| PlanShape::Create {
            slices: vec![(0, 0, "m1".into()), (1, 0, m.into())],
        };
        assert_eq!(
            plan_changes(&placed("m2"), &placed("m3"), &label),
            vec!["slice c1-k0 now goes to m3, not m2"]
        );
    }

    /// Over random shapes: a token always gives its shape back, and two
    /// shapes differ exactly when changes are named.
    #[test]
    fn random_shapes_round_trip_and_differ_exactly_when_changes_are_named() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut random = || {
            let moves: Vec<(i64, String, String)> = (0..next(4))
                .map(|i| {
                    (
                        i64::try_from(i).unwrap_or_default(),
                        format!("m{}", next(3)),
                        format!("m{}", next(3) + 3),
                    )
                })
                .collect();
            match next(3) {
                0 => PlanShape::Resize { moves },
                1 => PlanShape::Create {
                    slices: moves
                        .into_iter()
                        .map(|(i, _, to)| (u32::try_from(i).unwrap_or_default(), 0, to))
                        .collect(),
                },
                _ => PlanShape::Refused {
                    message: format!("no plan {}", next(2)),
                },
            }
        };
        for _ in 0..2_000 {
            let (a, b) = (random(), random());
            assert_eq!(PlanShape::from_token(&a.token()).as_ref(), Some(&a));
            assert_eq!(
                plan_changes(&a, &b, &label).is_empty(),
                a == b,
                "{a:?} {b:?}"
            );
        }
    }
}
