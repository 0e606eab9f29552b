//! The report of the copy failures the node's fronts meet: `POST
//! /nodes/{node}/storage/failures`, batched, retried until the control
//! plane takes them (it records each as a failure its own data plane met).

use super::FAILURES_TIMEOUT;
use crate::fronts_wire::{FailuresBody, FrontFailure};
use crate::storage_node::client::ControlPlaneClient;
use crate::storage_node::Backoff;
use std::sync::Arc;
use svs_dataplane::CopyFailure;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Reports each copy failure the fronts meet, batched, until the control
/// plane takes it.
pub(super) async fn report_failures(
    client: Arc<ControlPlaneClient>,
    mut failed: mpsc::UnboundedReceiver<CopyFailure>,
    stop: CancellationToken,
) {
    let mut pending: Vec<FrontFailure> = Vec::new();
    let mut backoff = Backoff::new();
    let mut last_failure: Option<String> = None;
    loop {
        if pending.is_empty() {
            let next = tokio::select! {
                f = failed.recv() => f,
                _ = stop.cancelled() => return,
            };
            match next {
                Some(f) => queue(&mut pending, &f),
                None => return,
            }
        }
        while let Ok(f) = failed.try_recv() {
            queue(&mut pending, &f);
        }
        let body = FailuresBody {
            failures: pending.clone(),
        };
        let sent = tokio::select! {
            r = client.failures(&body, FAILURES_TIMEOUT) => r,
            _ = stop.cancelled() => return,
        };
        match sent {
            Ok(recorded) => {
                tracing::info!(
                    failures = pending.len(),
                    recorded = recorded.recorded,
                    "copy failures reported to the control plane"
                );
                pending.clear();
                backoff = Backoff::new();
                last_failure = None;
            }
            Err(e) => {
                let state = e.state();
                if last_failure.as_deref() != Some(state.as_str()) {
                    tracing::warn!(error = %e, failures = pending.len(), "cannot report copy failures; retrying");
                    last_failure = Some(state);
                }
                tokio::select! {
                    _ = tokio::time::sleep(backoff.step()) => {}
                    _ = stop.cancelled() => return,
                }
            }
        }
    }
}

/// Adds a failure to those to report (once).
fn queue(pending: &mut Vec<FrontFailure>, f: &CopyFailure) {
    let failure = wire_failure(f);
    tracing::error!(
        medium = failure.medium,
        volume = failure.volume,
        copy = failure.copy,
        column = failure.column,
        medium_failed = failure.mediumfailed,
        "a front's copy failed"
    );
    if !pending.contains(&failure) {
        pending.push(failure);
    }
}

pub(super) fn wire_failure(f: &CopyFailure) -> FrontFailure {
    FrontFailure {
        medium: f.medium.clone(),
        volume: f.slice.volume_id.clone(),
        copy: f.slice.copy,
        column: f.slice.column,
        mediumfailed: f.medium_failed,
    }
}
