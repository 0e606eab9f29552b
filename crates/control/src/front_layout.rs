//! What opening a volume's front in `svs serve` reads from the store:
//! where its slices are, which copies are lost, which attachment exports
//! what; and a medium's failure recorded and applied. The exports
//! themselves are [`svs_front::exports`] (shared with storage nodes).

use crate::node_media::{NodeMediaSync, REACH_WAIT};
use std::sync::Arc;
use svs_common::clock::{Clock, SystemClock};
use svs_dataplane::VolumeLayout;
use svs_domain::GIB;
pub use svs_front::exports::{ExportRegistry, SnapshotView, VolumeOpening};
use svs_store::{SliceRow, Store, StoreResult, Volume};

/// Records that a medium failed and stops I/O to it (see
/// [`ExportRegistry::fail_medium`]); true when it had not failed before.
/// The one way a medium fails, whoever noticed: an admin or the data plane.
pub async fn fail_medium(
    store: &dyn svs_store::Store,
    exports: &ExportRegistry,
    medium: &str,
) -> Result<bool, svs_store::StoreError> {
    let newly = store
        .set_medium_failed(medium, SystemClock.now_ms())
        .await?;
    exports.fail_medium(medium);
    if newly {
        tracing::error!(
            medium,
            "medium failed: its slices are lost; volumes with another copy keep serving \
             (recover them with POST /volumes/{{volume}}/recover)"
        );
    }
    Ok(newly)
}

/// What an attachment exports: the live volume (`top`: None), or the view
/// of one of its snapshots (NotFound when the snapshot is gone).
pub async fn attachment_view(
    store: &dyn svs_store::Store,
    snapshot: &str,
) -> Result<Option<(SnapshotView, svs_store::Snapshot)>, svs_store::StoreError> {
    if snapshot == svs_domain::LIVE_SNAPSHOT_NAME {
        return Ok(None);
    }
    let s = store
        .snapshot_by_id(snapshot)
        .await?
        .ok_or(svs_store::StoreError::NotFound)?;
    Ok(Some((
        SnapshotView {
            seq: s.seq,
            size: s.volume_size * GIB,
        },
        s,
    )))
}

/// Opens an attachment's NBD export here (the live volume, or its
/// snapshot's view): `Ok(Err)` when the data plane could not open it;
/// `Err(NotFound)` when its snapshot is gone.
pub async fn export_attachment(
    store: &dyn Store,
    exports: &Arc<ExportRegistry>,
    node_media: &NodeMediaSync,
    volume: &Volume,
    a: &svs_store::Attachment,
) -> StoreResult<Result<(), String>> {
    let view = attachment_view(store, &a.snapshot)
        .await?
        .map(|(view, _)| view);
    let opening = layout_for_open(store, exports, node_media, volume).await?;
    let exports = Arc::clone(exports);
    let (name, node, readonly) = (a.export_name.clone(), a.node.clone(), a.readonly);
    let opened =
        tokio::task::spawn_blocking(move || exports.attach(&name, &node, readonly, &opening, view))
            .await;
    Ok(match opened {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(format!("export task failed: {e}")),
    })
}

/// Where each slice of a volume is, for opening it for I/O.
pub fn volume_layout(volume: &Volume, slices: &[SliceRow]) -> VolumeLayout {
    let copies = slices.iter().map(|r| r.slice.copy + 1).max().unwrap_or(0) as usize;
    let columns = slices.iter().map(|r| r.slice.column + 1).max().unwrap_or(0) as usize;
    let mut media = vec![vec![String::new(); columns]; copies];
    for r in slices {
        media[r.slice.copy as usize][r.slice.column as usize] = r.slice.medium.clone();
    }
    VolumeLayout {
        volume_id: volume.id.clone(),
        size: volume.size * GIB,
        media,
        epoch: 0,
    }
}

/// How to open the volume's I/O here. A volume not open yet gets a new
/// front epoch: the storage nodes refuse the writes of any front that
/// opened it before (this process before a restart, or another one), so
/// two fronts never diverge its copies.
pub async fn layout_for_open(
    store: &dyn Store,
    exports: &ExportRegistry,
    node_media: &NodeMediaSync,
    volume: &Volume,
) -> StoreResult<VolumeOpening> {
    let slices = store.volume_slices(&volume.id).await?;
    // A storage node's medium listed a moment ago may not be reached yet.
    let media: Vec<String> = slices.iter().map(|r| r.slice.medium.clone()).collect();
    node_media.reach(&media, REACH_WAIT).await;
    let mut layout = volume_layout(volume, &slices);
    if exports.volume_io(&volume.id).is_none() {
        layout.epoch = store.next_front_epoch(&volume.id).await?;
    }
    let lost_media = slices
        .into_iter()
        .filter(|r| r.lost)
        .map(|r| r.slice.medium)
        .collect();
    Ok(VolumeOpening { layout, lost_media })
}
