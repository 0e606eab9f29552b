//! The report of the copy failures the node's fronts meet: `POST
//! /nodes/{node}/storage/failures`, batched, retried until the control
//! plane takes them (it records each as a failure its own data plane met).
//! Each failure's [`LossRecord`] is settled by the answer: the writes that
//! skipped the copy are answered only once the control plane has the loss
//! in its store, and fail (as fenced) if it refuses it.

use super::FAILURES_TIMEOUT;
use crate::client::ControlPlaneClient;
use crate::node_backoff;
use std::sync::Arc;
use svs_dataplane::{CopyFailure, LossRecord};
use svs_front::wire::{FailuresBody, FrontFailure};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A failure a front met, with its record.
pub(super) type Failed = (CopyFailure, LossRecord);

/// A failure to report, with the records waiting for it.
struct Pending {
    failure: FrontFailure,
    records: Vec<LossRecord>,
}

/// Reports each copy failure the fronts meet, batched, until the control
/// plane takes it; settles its records with the answer. At stop the
/// records still pending are refused.
pub(super) async fn report_failures(
    client: Arc<ControlPlaneClient>,
    mut failed: mpsc::UnboundedReceiver<Failed>,
    stop: CancellationToken,
) {
    let mut pending: Vec<Pending> = Vec::new();
    report_until_stopped(&client, &mut failed, &mut pending, &stop).await;
    failed.close();
    while let Ok((_, record)) = failed.try_recv() {
        record.refused();
    }
    for p in pending {
        p.records.iter().for_each(LossRecord::refused);
    }
}

async fn report_until_stopped(
    client: &ControlPlaneClient,
    failed: &mut mpsc::UnboundedReceiver<Failed>,
    pending: &mut Vec<Pending>,
    stop: &CancellationToken,
) {
    let mut backoff = node_backoff();
    let mut last_failure: Option<String> = None;
    loop {
        if pending.is_empty() {
            let next = tokio::select! {
                f = failed.recv() => f,
                _ = stop.cancelled() => return,
            };
            match next {
                Some(f) => queue(pending, f),
                None => return,
            }
        }
        while let Ok(f) = failed.try_recv() {
            queue(pending, f);
        }
        let body = FailuresBody {
            failures: pending.iter().map(|p| p.failure.clone()).collect(),
        };
        let sent = tokio::select! {
            r = client.failures(&body, FAILURES_TIMEOUT) => r,
            _ = stop.cancelled() => return,
        };
        match sent {
            Ok(answer) => {
                tracing::info!(
                    failures = pending.len(),
                    recorded = answer.recorded,
                    refused = answer.refused.len(),
                    "copy failures reported to the control plane"
                );
                for p in pending.drain(..) {
                    if answer.refused.contains(&p.failure) {
                        tracing::warn!(
                            volume = p.failure.volume,
                            medium = p.failure.medium,
                            "the control plane did not take a copy failure from this node (the \
                             volume's front runs elsewhere now); the writes that skipped the copy \
                             fail"
                        );
                        p.records.iter().for_each(LossRecord::refused);
                    } else {
                        p.records.iter().for_each(LossRecord::recorded);
                    }
                }
                backoff = node_backoff();
                last_failure = None;
            }
            Err(e) => {
                let state = e.state();
                if last_failure.as_deref() != Some(state.as_str()) {
                    tracing::warn!(error = %e, failures = pending.len(),
                        "cannot report copy failures; retrying (writes that skipped the copies wait)");
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
fn queue(pending: &mut Vec<Pending>, (f, record): Failed) {
    let failure = wire_failure(&f);
    tracing::error!(
        medium = failure.medium,
        volume = failure.volume,
        copy = failure.copy,
        column = failure.column,
        medium_failed = failure.mediumfailed,
        "a front's copy failed"
    );
    match pending.iter_mut().find(|p| p.failure == failure) {
        Some(p) => p.records.push(record),
        None => pending.push(Pending {
            failure,
            records: vec![record],
        }),
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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::extract::State;
    use axum::http::StatusCode;
    use axum::routing::post;
    use axum::{Json, Router};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};
    use svs_dataplane::SliceKey;

    fn failure(volume: &str) -> CopyFailure {
        CopyFailure {
            medium: "d1".into(),
            slice: SliceKey {
                volume_id: volume.into(),
                copy: 0,
                column: 0,
            },
            medium_failed: false,
        }
    }

    /// The control plane's route: the first call fails (503), later ones
    /// take every failure but those of volume `gone`, until `down` says
    /// otherwise. How many calls it had.
    async fn control_plane(down: Arc<std::sync::atomic::AtomicBool>) -> (String, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let state = (Arc::clone(&calls), down);
        let app = Router::new()
            .route(
                "/nodes/sn-1/storage/failures",
                post(
                    |State((calls, down)): State<(
                        Arc<AtomicUsize>,
                        Arc<std::sync::atomic::AtomicBool>,
                    )>,
                     Json(body): Json<FailuresBody>| async move {
                        let n = calls.fetch_add(1, Ordering::SeqCst);
                        if n == 0 || down.load(Ordering::SeqCst) {
                            return Err(StatusCode::SERVICE_UNAVAILABLE);
                        }
                        let refused: Vec<FrontFailure> = body
                            .failures
                            .into_iter()
                            .filter(|f| f.volume == "gone")
                            .collect();
                        Ok(Json(svs_front::wire::FailuresRecorded {
                            recorded: 1,
                            refused,
                        }))
                    },
                ),
            )
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, calls)
    }

    async fn settled(record: &LossRecord) -> bool {
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if record.is_settled() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    #[tokio::test]
    async fn records_are_settled_by_the_control_planes_answer_and_refused_at_stop() {
        let down = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (url, calls) = control_plane(Arc::clone(&down)).await;
        let client = Arc::new(ControlPlaneClient::new(&url, "sn-1", "secret").expect("client"));
        let (tx, rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let reporter = tokio::spawn(report_failures(client, rx, stop.clone()));

        let (taken, refused) = (LossRecord::default(), LossRecord::default());
        tx.send((failure("v1"), taken.clone())).expect("send");
        tx.send((failure("gone"), refused.clone())).expect("send");
        // The first answer is a failure: retried, then taken.
        assert!(settled(&taken).await && settled(&refused).await);
        assert!(taken.is_recorded());
        assert!(
            !refused.is_recorded(),
            "a refused failure counted as recorded"
        );
        assert!(calls.load(Ordering::SeqCst) >= 2);

        // The control plane away: a record stays pending; at stop it is refused.
        down.store(true, Ordering::SeqCst);
        let pending = LossRecord::default();
        tx.send((failure("v2"), pending.clone())).expect("send");
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(
            !pending.is_settled(),
            "settled without the control plane's answer"
        );
        stop.cancel();
        reporter.await.expect("reporter");
        assert!(pending.is_settled() && !pending.is_recorded());
    }
}
