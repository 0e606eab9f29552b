//! Draining and rebalancing media (svs extensions, administrators only):
//! `PATCH /media/{media}` `{"state": "Draining"}` answers its job (or with
//! `?dryrun=true` its plan); `POST /media/rebalance` starts (or plans) a
//! rebalance. Both are one job moving slices of many volumes.

use super::body::typed;
use super::extract::{Parsed, ParsedQuery};
use super::parse::{bad, ParseResult};
use super::requests::{query_bool, FromBody, FromQuery};
use super::views::{self, JobStarted};
use super::{ApiResult, AppState};
use axum::extract::State;
use axum::Json;
use serde::Serialize;
use std::collections::BTreeMap;
use svs_control::service::relocation::RelocationPreview;
use svs_control::service::Administrator;
use svs_domain::{RebalanceArgs, ResourceName, GIB};
use svs_wire::plans::{MediumUseView, RelocationMoveView, RelocationPlanView, StuckSliceView};
use svs_wire::requests::MediaRebalanceRequest;
use utoipa::ToSchema;

/// `?dryrun=true|false` of a drain or a rebalance.
#[derive(Debug, Clone, Copy, Default)]
pub struct DryRunQuery {
    pub dryrun: bool,
}

impl FromQuery for DryRunQuery {
    fn from_query(query: &BTreeMap<String, String>) -> ParseResult<DryRunQuery> {
        Ok(DryRunQuery {
            dryrun: query_bool(query, "dryrun")?.unwrap_or(false),
        })
    }
}

/// A rebalance's answer: its job, or with `dryrun` its plan.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum RebalanceAnswer {
    Started(JobStarted),
    Plan(RelocationPlanView),
}

pub fn relocation_plan(p: &RelocationPreview) -> RelocationPlanView {
    let planned = &p.planned;
    // (slice label, volume name) of a slice the plan names.
    let named = |id: i64| planned.slices.get(&id).cloned().unwrap_or_default();
    let moves: Vec<RelocationMoveView> = planned
        .plan
        .moves
        .iter()
        .map(|m| {
            let (slice, volume) = named(m.slice_move.slice_id);
            RelocationMoveView {
                volume,
                slice,
                from: m.slice_move.from_medium.clone(),
                to: m.slice_move.to_medium.clone(),
                size: m.slice_move.new_size,
            }
        })
        .collect();
    let stuck = planned
        .plan
        .stuck
        .iter()
        .map(|s| {
            let (slice, volume) = named(s.slice_id);
            StuckSliceView {
                volume,
                slice,
                reason: s.reason.to_string(),
            }
        })
        .collect();
    let gib = planned.plan.bytes_gib();
    let media = planned
        .media
        .iter()
        .map(|m| {
            let id = &m.medium.id;
            // What the moves bring to it and take from it.
            let (gained, out) = planned.plan.moves.iter().map(|r| &r.slice_move).fold(
                (0, 0),
                |(gained, out), s| {
                    let to = if &s.to_medium == id { s.new_size } else { 0 };
                    let from = if &s.from_medium == id { s.old_size } else { 0 };
                    (gained + to, out + from)
                },
            );
            MediumUseView {
                mediaid: id.clone(),
                node: m.medium.node.clone(),
                size: m.medium.size,
                used: m.used,
                usedafter: (m.used + gained).saturating_sub(out),
            }
        })
        .collect();
    RelocationPlanView {
        dryrun: true,
        scope: p.scope.describe(),
        moves,
        stuck,
        gib,
        media,
        movementrate: p.rate,
        estimatedseconds: p
            .rate
            .filter(|_| gib > 0)
            .map(|rate| (gib * GIB).div_ceil(rate.max(1))),
    }
}

/// `POST /media/rebalance` body: `{}` (every medium), `{"node": "n1"}` or
/// `{"zone": "z1"}`.
impl FromBody for RebalanceArgs {
    fn from_body(body: &super::parse::Body) -> ParseResult<RebalanceArgs> {
        let MediaRebalanceRequest { node, zone } = typed(body)?;
        if node.is_some() && zone.is_some() {
            return Err(bad("give node or zone, not both"));
        }
        Ok(RebalanceArgs {
            node: node.map(ResourceName::into_string),
            zone: zone.map(ResourceName::into_string),
        })
    }
}

#[utoipa::path(
    post, path = "/media/rebalance", tag = "Media", operation_id = "MediaRebalance",
    summary = "Even the usage of media (administrators only)",
    description = "svs extension. One `media_rebalance` job moves whole slices between the media of a node (`{\"node\": \"n1\"}`), of a zone (`{\"zone\": \"z1\"}`) or between every medium (`{}`) until moving any slice would no longer even their usage, choosing the moves that even it most per byte (a greedy plan: few bytes, not always the fewest). It keeps every volume's placement rules, never uses a draining medium, and moves with the mover a resize uses: the job holds one volume at a time (its nine blocked operations answer 409 naming the job meanwhile); pause, rate, the movement window and cancel apply. `?dryrun=true` answers the plan, changing nothing.",
    params(("dryrun" = Option<bool>, Query, description = "Answer the plan, change nothing")),
    request_body = MediaRebalanceRequest,
    security(("storage.io-authorizer" = [])),
    responses(
        (status = 200, description = "The rebalance's job (or, with dryrun, its plan)", body = RebalanceAnswer),
        (status = 400, description = "Malformed body, or both node and zone", body = super::views::ErrorBody),
        (status = 401, description = "Not signed in", body = super::views::ErrorBody),
        (status = 403, description = "Not an administrator", body = super::views::ErrorBody),
        (status = 404, description = "A node or zone without media", body = super::views::ErrorBody),
        (status = 408, description = "Body not received in time", body = super::views::ErrorBody),
        (status = 413, description = "Body over 1 MiB", body = super::views::ErrorBody),
    ),
)]
pub async fn rebalance_media(
    State(app): State<AppState>,
    admin: Administrator,
    ParsedQuery(query): ParsedQuery<DryRunQuery>,
    Parsed(request): Parsed<RebalanceArgs>,
) -> ApiResult<RebalanceAnswer> {
    if query.dryrun {
        let preview = app.preview_rebalance(&admin, &request).await?;
        return Ok(Json(RebalanceAnswer::Plan(relocation_plan(&preview))));
    }
    let started = app.rebalance_media(&admin, &request).await?;
    let message = format!("Rebalance of {} started", request_scope(&request));
    Ok(Json(RebalanceAnswer::Started(views::started(
        &message, &started,
    ))))
}

fn request_scope(args: &RebalanceArgs) -> String {
    svs_control::jobs::RelocationScope::Rebalance(args.clone()).describe()
}
