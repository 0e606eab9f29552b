//! Dry runs (svs extension): `?dryrun=true` on a resize or a creation
//! answers the plan the request would carry out now, changing nothing; its
//! `plan` token, given back as `?plan=<token>` with the real request, makes
//! the request carry out that plan or be refused (409) naming what changed.

use super::parse::{bad, ParseResult};
use super::requests::{query_bool, FromQuery};
use super::views::JobStarted;
use serde::Serialize;
use std::collections::BTreeMap;
use svs_control::jobs::{CreatePreview, ResizePreview};
use svs_domain::{slice_label, PlanShape, MOVEMENT_PLAN_FOUND};
use svs_store::Volume;
use svs_wire::plans::{
    CreatePlanView, PlannedGrowthView, PlannedMoveView, PlannedSliceView, ResizePlanView,
};
use utoipa::ToSchema;

/// `?dryrun=true|false` and `?plan=<token>` of a resize or a creation.
#[derive(Debug, Clone, Default)]
pub struct PlanQuery {
    pub dryrun: bool,
    pub plan: Option<PlanShape>,
}

impl FromQuery for PlanQuery {
    fn from_query(query: &BTreeMap<String, String>) -> ParseResult<PlanQuery> {
        let dryrun = query_bool(query, "dryrun")?.unwrap_or(false);
        if dryrun && query.contains_key("plan") {
            return Err(bad("plan is given with a real request, not with a dry run"));
        }
        let plan = match query.get("plan") {
            None => None,
            Some(token) => Some(
                PlanShape::from_token(token)
                    .ok_or_else(|| bad("plan must be the plan token a dry run answered"))?,
            ),
        };
        Ok(PlanQuery { dryrun, plan })
    }
}

/// A resize's answer: its job, or with `dryrun` its plan.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum ResizeAnswer {
    Started(JobStarted),
    Plan(ResizePlanView),
}

/// A creation's answer: its job, or with `dryrun` its placement.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum CreateAnswer {
    Started(JobStarted),
    Plan(CreatePlanView),
}

pub fn resize_plan(volume: &Volume, size: u64, p: &ResizePreview) -> ResizePlanView {
    let token = p.shape.token();
    let (outcome, message, moves, growths) = match &p.planned {
        Err(e) => ("refused", e.to_string(), Vec::new(), Vec::new()),
        Ok(plan) => {
            let moves: Vec<PlannedMoveView> = plan
                .moves
                .iter()
                .zip(&p.move_bytes)
                .map(|(m, (bytes, measured))| PlannedMoveView {
                    slice: p.label(m.slice_id),
                    from: m.from_medium.clone(),
                    fromnode: p.nodes.node_of(&m.from_medium).to_string(),
                    to: m.to_medium.clone(),
                    tonode: p.nodes.node_of(&m.to_medium).to_string(),
                    size: m.new_size,
                    bytes: *bytes,
                    measured: *measured,
                })
                .collect();
            let growths = plan
                .growths
                .iter()
                .map(|g| PlannedGrowthView {
                    slice: p.label(g.slice_id),
                    medium: g.medium.clone(),
                    from: g.from,
                    to: g.to,
                })
                .collect();
            if plan.is_in_place() {
                let message = "In place: every slice grows on its medium".to_string();
                ("inplace", message, moves, growths)
            } else {
                ("movement", MOVEMENT_PLAN_FOUND.to_string(), moves, growths)
            }
        }
    };
    ResizePlanView {
        dryrun: true,
        volume: volume.name.clone(),
        fromsize: volume.size,
        size,
        outcome: outcome.into(),
        message,
        bytestocopy: moves.iter().map(|m| m.bytes).sum(),
        moves,
        growths,
        movementrate: p.rate,
        estimatedseconds: p.estimated_seconds().filter(|_| outcome == "movement"),
        plan: token,
    }
}

pub fn create_plan(name: &str, size: u64, p: &CreatePreview) -> CreatePlanView {
    let (outcome, message, slices) = match &p.placed {
        Err(e) => (
            "refused",
            format!("Could not create volume '{name}': {e}"),
            Vec::new(),
        ),
        Ok(placed) => (
            "placed",
            String::new(),
            placed
                .iter()
                .map(|s| PlannedSliceView {
                    slice: slice_label(s.copy, s.column),
                    medium: s.medium.clone(),
                    node: p.nodes.node_of(&s.medium).to_string(),
                    size: s.size,
                })
                .collect(),
        ),
    };
    CreatePlanView {
        dryrun: true,
        volume: name.to_string(),
        size,
        outcome: outcome.into(),
        message,
        slices,
        plan: p.shape.token(),
    }
}
