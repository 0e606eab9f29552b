//! What a volume view shows beside the volume's record: every zone its
//! copies are in, and the bytes of data it holds (what was written to it,
//! measured from one healthy copy of each column).

use super::{ServiceResult, Services};
use crate::jobs::slice_key;
use std::collections::BTreeSet;
use std::sync::Arc;
use svs_dataplane::SliceKey;
use svs_store::{SliceRow, Volume};
use tracing::warn;

/// The facts of one volume (see the module's documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeFacts {
    /// Every zone a slice of the volume is on, sorted, each once.
    pub zones: Vec<String>,
    /// Bytes of data in the volume: the sum over its columns of what one
    /// healthy copy of the column holds (never-written ranges count
    /// nothing; copies and snapshots are not counted). None when a column
    /// has no healthy copy or a slice could not be measured.
    pub written_bytes: Option<u64>,
}

/// The zones of `rows`, sorted and each once (an empty zone left out).
pub fn zones_of(rows: &[SliceRow]) -> Vec<String> {
    let zones: BTreeSet<&str> = rows
        .iter()
        .map(|r| r.zone.as_str())
        .filter(|z| !z.is_empty())
        .collect();
    zones.into_iter().map(str::to_string).collect()
}

/// The slice measured for each column: its lowest healthy copy, by medium.
/// None when a column lost every copy (its data is gone).
pub fn measured_slices(volume_id: &str, rows: &[SliceRow]) -> Option<Vec<(String, SliceKey)>> {
    let columns: BTreeSet<u32> = rows.iter().map(|r| r.slice.column).collect();
    columns
        .into_iter()
        .map(|column| {
            rows.iter()
                .filter(|r| r.slice.column == column && !r.lost)
                .min_by_key(|r| r.slice.copy)
                .map(|r| (r.slice.medium.clone(), slice_key(volume_id, &r.slice)))
        })
        .collect()
}

impl Services {
    /// The facts of `volume`: its slices from the store, one healthy copy
    /// of each column measured by the data plane (off the async threads).
    pub async fn volume_facts(&self, volume: &Volume) -> ServiceResult<VolumeFacts> {
        let rows = self.store.volume_slices(&volume.id).await?;
        let zones = zones_of(&rows);
        let Some(slices) = measured_slices(&volume.id, &rows) else {
            return Ok(VolumeFacts {
                zones,
                written_bytes: None,
            });
        };
        let dp = Arc::clone(self.exports.data_plane());
        let measured = tokio::task::spawn_blocking(move || {
            slices.iter().try_fold(0u64, |sum, (medium, key)| {
                dp.slice_data_bytes(medium, key)
                    .map(|bytes| sum.saturating_add(bytes))
            })
        })
        .await;
        let written_bytes = match measured {
            Ok(Ok(bytes)) => Some(bytes),
            Ok(Err(e)) => {
                warn!(volume = %volume.id, error = %e, "cannot measure a volume's data");
                None
            }
            Err(e) => {
                warn!(volume = %volume.id, error = %e, "a volume's data measure failed");
                None
            }
        };
        Ok(VolumeFacts {
            zones,
            written_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use svs_domain::Slice;

    fn row(copy: u32, column: u32, medium: &str, zone: &str, lost: bool) -> SliceRow {
        SliceRow {
            slice: Slice {
                id: i64::from(copy * 10 + column),
                copy,
                column,
                medium: medium.to_string(),
                size: 10,
            },
            node: format!("node-{medium}"),
            zone: zone.to_string(),
            lost,
            stale_generation: None,
        }
    }

    #[test]
    fn a_mirrored_volume_names_every_zone_of_its_copies_once() {
        let rows = [
            row(0, 0, "m1", "zone-b", false),
            row(1, 0, "m2", "zone-a", false),
            row(0, 1, "m3", "zone-b", false),
            row(1, 1, "m4", "", false),
        ];
        assert_eq!(zones_of(&rows), vec!["zone-a", "zone-b"]);
    }

    #[test]
    fn each_column_is_measured_on_its_lowest_healthy_copy() {
        let rows = [
            row(0, 0, "m1", "z", true),
            row(1, 0, "m2", "z", false),
            row(0, 1, "m3", "z", false),
            row(1, 1, "m4", "z", false),
        ];
        let measured = measured_slices("v", &rows).expect("every column has a copy");
        let media: Vec<&str> = measured.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(media, vec!["m2", "m3"]);
        assert_eq!((measured[0].1.copy, measured[0].1.column), (1, 0));
    }

    #[test]
    fn a_column_without_a_healthy_copy_has_no_measure() {
        let rows = [row(0, 0, "m1", "z", true), row(0, 1, "m2", "z", false)];
        assert_eq!(measured_slices("v", &rows), None);
    }
}
