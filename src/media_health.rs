//! A medium's failure is known at once. Three ways in, one record
//! ([`fail_medium`]): the data plane tells [`record_failures_at_once`] of
//! each failure its I/O meets (read, write, flush, a slice file gone, a
//! movement's source), as it meets it; a recovery probes its volume's files
//! before it plans ([`probe_volume`]), so it never finds "nothing to
//! rebuild" while a copy is unreadable; and the media-health reconciler
//! polls what the data plane saw as a backstop.

use crate::exports::{fail_medium, ExportRegistry};
use std::collections::BTreeSet;
use std::sync::Arc;
use svs_dataplane::SliceKey;
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

/// Records each medium the data plane's I/O sees fail as it sees it: the
/// I/O thread only sends its id on a channel (never waits for the store),
/// and a task records it. A record that fails is left to the reconciler,
/// which finds the medium in `failed_media` on its next pass.
pub fn record_failures_at_once(
    store: Arc<dyn Store>,
    exports: Arc<ExportRegistry>,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    exports
        .data_plane()
        .on_media_failure(Arc::new(move |medium: &str| {
            // Closed only at shutdown, when nothing needs recording.
            let _ = tx.send(medium.to_string());
        }));
    tokio::spawn(async move {
        loop {
            let medium = tokio::select! {
                m = rx.recv() => m,
                () = shutdown.cancelled() => None,
            };
            let Some(medium) = medium else { break };
            if let Err(e) = fail_all(store.as_ref(), &exports, [medium.clone()]).await {
                tracing::warn!(medium, error = %e,
                    "cannot record a failed medium now; the media health check will");
            }
        }
    })
}

/// The health check for one volume, made now: every file of its healthy
/// slices and of their snapshots is opened and read where the store says
/// it is, and media found failing (there, or by the data plane before) are
/// recorded as Failed. How many media it failed.
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
    let failing = tokio::task::spawn_blocking(move || {
        let mut failing = BTreeSet::new();
        for (medium, key) in &probes {
            if let Err(e) = media.probe_slice(medium, key, &snapshots) {
                tracing::warn!(error = %e, "a copy of the volume is unreadable");
                failing.insert(medium.clone());
            }
        }
        let volume_media: BTreeSet<&String> = probes.iter().map(|(m, _)| m).collect();
        failing.extend(
            media
                .failed_media()
                .into_iter()
                .filter(|m| volume_media.contains(m)),
        );
        failing
    })
    .await
    .map_err(|e| ProbeError::Task(e.to_string()))?;
    Ok(fail_all(store, exports, failing).await?)
}
