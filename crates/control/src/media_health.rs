//! A lost copy, or a failed medium, is known at once. Three ways in, two
//! records: a medium that failed (its directory gone or unreadable, an I/O
//! error from it) is recorded Failed ([`fail_medium`]), which loses every
//! slice on it; a copy whose file alone is missing from a medium that still
//! reads is recorded lost by itself ([`lose_copies`]), and the medium and
//! its other slices stay healthy. The data plane tells
//! [`record_failures_at_once`] of each failure its I/O meets (read, write,
//! flush, a slice file gone, a movement's source), as it meets it; a
//! recovery probes its volume's files before it plans ([`probe_volume`]),
//! so it never finds "nothing to rebuild" while a copy is unreadable; and
//! the media-health reconciler polls what the data plane saw as a backstop.

use crate::front_layout::{fail_medium, ExportRegistry};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use svs_common::clock::{Clock, SystemClock};
use svs_dataplane::{CopyFailure, LossRecord, SliceKey};
use svs_domain::SnapshotState;
use svs_store::{Store, StoreError, Volume};
use thiserror::Error;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Error)]
pub enum ProbeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The blocking task of the probe ended without an answer.
    #[error("probe task failed: {0}")]
    Task(String),
}

/// Records as Failed each of `seen` the store still has healthy; how many.
pub async fn fail_all(
    store: &dyn Store,
    exports: &ExportRegistry,
    seen: impl IntoIterator<Item = String>,
) -> Result<usize, StoreError> {
    let seen: Vec<String> = seen.into_iter().collect();
    if seen.is_empty() {
        return Ok(0);
    }
    let usage = store.media_usage().await?;
    let mut failed = 0;
    for medium in seen {
        let known_healthy = usage
            .iter()
            .any(|u| u.record.medium.id == medium && !u.failed);
        if known_healthy && fail_medium(store, exports, &medium).await? {
            failed += 1;
        }
    }
    Ok(failed)
}

/// Records as lost each copy (medium, slice) the store still has healthy
/// on that medium, leaving the medium and its other slices as they are;
/// how many. A copy no longer there (rebuilt elsewhere, its volume
/// deleted) is left alone.
pub async fn lose_copies(
    store: &dyn Store,
    copies: impl IntoIterator<Item = (String, SliceKey)>,
) -> Result<usize, StoreError> {
    let mut lost = 0;
    for (medium, key) in copies {
        let now = SystemClock.now_ms();
        if store
            .mark_slice_lost(&key.volume_id, key.copy, key.column, &medium, now)
            .await?
        {
            lost += 1;
            tracing::error!(
                medium,
                volume = key.volume_id,
                copy = key.copy,
                column = key.column,
                "a copy of a slice is lost (a file of it is missing); its medium stays in \
                 service; the volume keeps serving from its other copies (recover it with \
                 POST /volumes/{{volume}}/recover)"
            );
        }
    }
    Ok(lost)
}

/// Records one failure the data plane's I/O met (svs serve's own, or a
/// front's on a storage node): the medium's, or the copy's alone. How
/// many records it changed (0: known already).
pub async fn record_failure(
    store: &dyn Store,
    exports: &ExportRegistry,
    failure: CopyFailure,
) -> Result<usize, StoreError> {
    if failure.medium_failed {
        fail_all(store, exports, [failure.medium]).await
    } else {
        lose_copies(store, [(failure.medium, failure.slice)]).await
    }
}

/// Time between two attempts at recording a failure the store refused.
const RECORD_RETRY: Duration = Duration::from_millis(500);

/// Records each failure the data plane's I/O meets as it meets it: the I/O
/// thread only sends it on a channel, and a task records it, then settles
/// its [`LossRecord`] (the writes that skipped the copy are answered only
/// then). A record the store refuses is tried again until it takes it; at
/// shutdown the records still pending are refused (their writes fail,
/// unanswered).
pub fn record_failures_at_once(
    store: Arc<dyn Store>,
    exports: Arc<ExportRegistry>,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    let (tx, mut rx) = mpsc::unbounded_channel::<(CopyFailure, LossRecord)>();
    exports.data_plane().on_copy_failure(Arc::new(
        move |failure: &CopyFailure, record: &LossRecord| {
            // Closed only at shutdown.
            if tx.send((failure.clone(), record.clone())).is_err() {
                record.refused();
            }
        },
    ));
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                f = rx.recv() => f,
                () = shutdown.cancelled() => None,
            };
            let Some((failure, record)) = next else { break };
            let medium = failure.medium.clone();
            loop {
                match record_failure(store.as_ref(), &exports, failure.clone()).await {
                    Ok(_) => {
                        record.recorded();
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(medium, error = %e,
                            "cannot record a failure now; trying again (writes that skipped \
                             the copy wait)");
                        tokio::select! {
                            () = tokio::time::sleep(RECORD_RETRY) => {}
                            () = shutdown.cancelled() => {
                                record.refused();
                                break;
                            }
                        }
                    }
                }
            }
        }
        rx.close();
        while let Ok((_, record)) = rx.try_recv() {
            record.refused();
        }
    })
}

/// The health check for one volume, made now: every file of its healthy
/// slices and of their snapshots is opened and read where the store says
/// it is; media found failing (there, or by the data plane before) are
/// recorded as Failed, and copies lost alone (a file missing from a medium
/// that still reads) as lost. How many media failed and copies were lost.
pub async fn probe_volume(
    store: &dyn Store,
    exports: &ExportRegistry,
    volume: &Volume,
) -> Result<usize, ProbeError> {
    let slices = store.volume_slices(&volume.id).await?;
    // Those being created or deleted may not have their files on every
    // slice: only Ready ones must.
    let snapshots: Vec<u64> = store
        .volume_snapshots(&volume.id)
        .await?
        .into_iter()
        .filter(|s| s.state == SnapshotState::Ready)
        .map(|s| s.seq)
        .collect();
    let probes: Vec<(String, SliceKey)> = slices
        .iter()
        .filter(|r| !r.lost)
        .map(|r| {
            let key = SliceKey {
                volume_id: volume.id.clone(),
                copy: r.slice.copy,
                column: r.slice.column,
            };
            (r.slice.medium.clone(), key)
        })
        .collect();
    let media = Arc::clone(exports.data_plane());
    // The probe reports each failure it meets to the data plane's health
    // (a medium in `failed_media`, a copy alone in `failed_copies`): what
    // is there for this volume afterwards is what it lost.
    let (failing, lost) = tokio::task::spawn_blocking(move || {
        for (medium, key) in &probes {
            if let Err(e) = media.probe_slice(medium, key, &snapshots) {
                tracing::warn!(error = %e, "a copy of the volume is unreadable");
            }
        }
        let volume_media: BTreeSet<&String> = probes.iter().map(|(m, _)| m).collect();
        let failing: Vec<String> = media
            .failed_media()
            .into_iter()
            .filter(|m| volume_media.contains(m))
            .collect();
        let lost: Vec<(String, SliceKey)> = media
            .failed_copies()
            .into_iter()
            .filter(|c| probes.contains(c))
            .collect();
        (failing, lost)
    })
    .await
    .map_err(|e| ProbeError::Task(e.to_string()))?;
    let failed = fail_all(store, exports, failing).await?;
    Ok(failed + lose_copies(store, lost).await?)
}
