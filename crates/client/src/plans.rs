//! `svs volume create|resize --dry-run`: a dry run's plan as an operator
//! reads it (JSON as the API answers it with `--output json`).

use super::output::human_bytes;
use std::fmt::Write;
use svs_wire::plans::{CreatePlanView, RelocationPlanView, ResizePlanView};

/// A resize's plan (`ResizePlan`).
pub fn render_resize_plan(plan: &ResizePlanView) -> String {
    let mut out = String::new();
    let outcome = match plan.outcome.as_str() {
        "inplace" => "in place",
        "movement" => "with data movement",
        _ => "refused",
    };
    let _ = writeln!(
        out,
        "Resize of volume '{}' from {} GiB to {} GiB: {outcome}",
        plan.volume, plan.fromsize, plan.size
    );
    let _ = writeln!(out, "{}", plan.message);
    if !plan.moves.is_empty() {
        let _ = writeln!(out, "Moves:");
        for m in &plan.moves {
            let bytes = human_bytes(m.bytes);
            let of = if m.measured {
                "of data"
            } else {
                "at most (not measured)"
            };
            let _ = writeln!(
                out,
                "  {}  {} ({}) -> {} ({})  {bytes} {of}",
                m.slice, m.from, m.fromnode, m.to, m.tonode
            );
        }
    }
    if !plan.growths.is_empty() {
        let _ = writeln!(out, "Grows in place:");
        for g in &plan.growths {
            let _ = writeln!(
                out,
                "  {}  on {}  {} -> {} GiB",
                g.slice, g.medium, g.from, g.to
            );
        }
    }
    if !plan.moves.is_empty() {
        let bytes = human_bytes(plan.bytestocopy);
        let time = match (plan.estimatedseconds, plan.movementrate) {
            (Some(secs), Some(rate)) => {
                format!("about {secs} s at {}/s", human_bytes(rate))
            }
            _ => "unthrottled (no movement_rate)".to_string(),
        };
        let _ = writeln!(out, "Data to copy: {bytes}, {time}");
    }
    plan_line(&mut out, &plan.plan);
    out
}

/// A creation's placement (`CreatePlan`).
pub fn render_create_plan(plan: &CreatePlanView) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Creation of volume '{}' ({} GiB): {}",
        plan.volume, plan.size, plan.outcome
    );
    if plan.outcome != "placed" {
        let _ = writeln!(out, "{}", plan.message);
    }
    for s in &plan.slices {
        let _ = writeln!(
            out,
            "  {}  on {} ({})  {} GiB",
            s.slice, s.medium, s.node, s.size
        );
    }
    plan_line(&mut out, &plan.plan);
    out
}

fn plan_line(out: &mut String, token: &str) {
    let _ = write!(
        out,
        "Plan: {token}\n(run the same command with --plan <this> instead of --dry-run to carry out \
         exactly this plan, or be refused if it changed)"
    );
}

/// A drain's or a rebalance's plan (`RelocationPlan`).
pub fn render_relocation_plan(plan: &RelocationPlanView) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Plan for {}: {} slice(s) move ({} GiB at most)",
        plan.scope,
        plan.moves.len(),
        plan.gib
    );
    for m in &plan.moves {
        let _ = writeln!(
            out,
            "  {} of volume '{}'  {} -> {}  {} GiB",
            m.slice, m.volume, m.from, m.to, m.size
        );
    }
    if !plan.stuck.is_empty() {
        let _ = writeln!(out, "Cannot move:");
        for s in &plan.stuck {
            let _ = writeln!(out, "  {} of volume '{}': {}", s.slice, s.volume, s.reason);
        }
    }
    if !plan.media.is_empty() {
        let _ = writeln!(out, "Media (GiB used of size, now -> after):");
        for m in &plan.media {
            let _ = writeln!(
                out,
                "  {} ({})  {} -> {} of {}",
                m.mediaid, m.node, m.used, m.usedafter, m.size
            );
        }
    }
    if let Some(secs) = plan.estimatedseconds {
        let _ = writeln!(
            out,
            "Estimated time at the movement rate: {}",
            svs_domain::human_duration(secs)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_movement_plan_names_each_move_its_bytes_and_its_time() {
        let plan = json!({"dryrun": true, "volume": "data", "fromsize": 15, "size": 18,
            "outcome": "movement", "message": "GetMovementModificationPlan: Found movement plan. Data Movement is enabled. The operation is now being attempted",
            "moves": [{"slice": "c1-k0", "from": "m2", "fromnode": "n2", "to": "m3",
                "tonode": "n3", "size": 18, "bytes": 16777216, "measured": true}],
            "growths": [{"slice": "c0-k0", "medium": "m1", "from": 15, "to": 18}],
            "bytestocopy": 16777216, "movementrate": 4194304, "estimatedseconds": 4,
            "plan": "7b"});
        assert_eq!(
            render_resize_plan(&serde_json::from_value(plan).unwrap()),
            "Resize of volume 'data' from 15 GiB to 18 GiB: with data movement\n\
             GetMovementModificationPlan: Found movement plan. Data Movement is enabled. The operation is now being attempted\n\
             Moves:\n  c1-k0  m2 (n2) -> m3 (n3)  16.0 MiB of data\n\
             Grows in place:\n  c0-k0  on m1  15 -> 18 GiB\n\
             Data to copy: 16.0 MiB, about 4 s at 4.0 MiB/s\n\
             Plan: 7b\n(run the same command with --plan <this> instead of --dry-run to \
             carry out exactly this plan, or be refused if it changed)"
        );
    }

    #[test]
    fn a_refused_creation_says_why() {
        let plan = json!({"dryrun": true, "volume": "x", "size": 8, "outcome": "refused",
            "message": "Could not create volume 'x': zone 'z' has no media", "slices": [],
            "plan": "7c"});
        assert!(render_create_plan(&serde_json::from_value(plan).unwrap()).starts_with(
            "Creation of volume 'x' (8 GiB): refused\nCould not create volume 'x': zone 'z' has no media\nPlan: 7c\n"
        ));
    }
}
