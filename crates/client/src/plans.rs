//! `svs volume create|resize --dry-run`: a dry run's plan as an operator
//! reads it (JSON as the API answers it with `--output json`).

use super::output::{human_bytes, text};
use serde_json::Value;
use std::fmt::Write;

/// A resize's plan (`ResizePlan`).
pub fn render_resize_plan(plan: &Value) -> String {
    let mut out = String::new();
    let outcome = match plan["outcome"].as_str() {
        Some("inplace") => "in place",
        Some("movement") => "with data movement",
        _ => "refused",
    };
    let _ = writeln!(
        out,
        "Resize of volume '{}' from {} GiB to {} GiB: {outcome}",
        text(&plan["volume"]),
        text(&plan["fromsize"]),
        text(&plan["size"])
    );
    let _ = writeln!(out, "{}", text(&plan["message"]));
    let moves = plan["moves"].as_array().cloned().unwrap_or_default();
    if !moves.is_empty() {
        let _ = writeln!(out, "Moves:");
        for m in &moves {
            let bytes = human_bytes(m["bytes"].as_u64().unwrap_or(0));
            let of = if m["measured"] == true {
                "of data"
            } else {
                "at most (not measured)"
            };
            let _ = writeln!(
                out,
                "  {}  {} ({}) -> {} ({})  {bytes} {of}",
                text(&m["slice"]),
                text(&m["from"]),
                text(&m["fromnode"]),
                text(&m["to"]),
                text(&m["tonode"])
            );
        }
    }
    let growths = plan["growths"].as_array().cloned().unwrap_or_default();
    if !growths.is_empty() {
        let _ = writeln!(out, "Grows in place:");
        for g in &growths {
            let _ = writeln!(
                out,
                "  {}  on {}  {} -> {} GiB",
                text(&g["slice"]),
                text(&g["medium"]),
                text(&g["from"]),
                text(&g["to"])
            );
        }
    }
    if !moves.is_empty() {
        let bytes = human_bytes(plan["bytestocopy"].as_u64().unwrap_or(0));
        let time = match (
            plan["estimatedseconds"].as_u64(),
            plan["movementrate"].as_u64(),
        ) {
            (Some(secs), Some(rate)) => {
                format!("about {secs} s at {}/s", human_bytes(rate))
            }
            _ => "unthrottled (no movement_rate)".to_string(),
        };
        let _ = writeln!(out, "Data to copy: {bytes}, {time}");
    }
    plan_line(&mut out, plan);
    out
}

/// A creation's placement (`CreatePlan`).
pub fn render_create_plan(plan: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Creation of volume '{}' ({} GiB): {}",
        text(&plan["volume"]),
        text(&plan["size"]),
        text(&plan["outcome"])
    );
    if plan["outcome"] != "placed" {
        let _ = writeln!(out, "{}", text(&plan["message"]));
    }
    for s in plan["slices"].as_array().cloned().unwrap_or_default() {
        let _ = writeln!(
            out,
            "  {}  on {} ({})  {} GiB",
            text(&s["slice"]),
            text(&s["medium"]),
            text(&s["node"]),
            text(&s["size"])
        );
    }
    plan_line(&mut out, plan);
    out
}

fn plan_line(out: &mut String, plan: &Value) {
    let _ = write!(
        out,
        "Plan: {}\n(run the same command with --plan <this> instead of --dry-run to carry out \
         exactly this plan, or be refused if it changed)",
        text(&plan["plan"])
    );
}

/// A drain's or a rebalance's plan (`RelocationPlan`).
pub fn render_relocation_plan(plan: &Value) -> String {
    let mut out = String::new();
    let moves = plan["moves"].as_array().cloned().unwrap_or_default();
    let _ = writeln!(
        out,
        "Plan for {}: {} slice(s) move ({} GiB at most)",
        text(&plan["scope"]),
        moves.len(),
        text(&plan["gib"])
    );
    for m in &moves {
        let _ = writeln!(
            out,
            "  {} of volume '{}'  {} -> {}  {} GiB",
            text(&m["slice"]),
            text(&m["volume"]),
            text(&m["from"]),
            text(&m["to"]),
            text(&m["size"])
        );
    }
    let stuck = plan["stuck"].as_array().cloned().unwrap_or_default();
    if !stuck.is_empty() {
        let _ = writeln!(out, "Cannot move:");
        for s in &stuck {
            let _ = writeln!(
                out,
                "  {} of volume '{}': {}",
                text(&s["slice"]),
                text(&s["volume"]),
                text(&s["reason"])
            );
        }
    }
    let media = plan["media"].as_array().cloned().unwrap_or_default();
    if !media.is_empty() {
        let _ = writeln!(out, "Media (GiB used of size, now -> after):");
        for m in &media {
            let _ = writeln!(
                out,
                "  {} ({})  {} -> {} of {}",
                text(&m["mediaid"]),
                text(&m["node"]),
                text(&m["used"]),
                text(&m["usedafter"]),
                text(&m["size"])
            );
        }
    }
    if let Some(secs) = plan["estimatedseconds"].as_u64() {
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
            render_resize_plan(&plan),
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
        let plan = json!({"volume": "x", "size": 8, "outcome": "refused",
            "message": "Could not create volume 'x': zone 'z' has no media", "slices": [],
            "plan": "7c"});
        assert!(render_create_plan(&plan).starts_with(
            "Creation of volume 'x' (8 GiB): refused\nCould not create volume 'x': zone 'z' has no media\nPlan: 7c\n"
        ));
    }
}
