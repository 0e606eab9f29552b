//! The gauges read from the store at each scrape: media, nodes, storage
//! nodes and volumes, as the store has them now (every instance on a
//! shared database reports the same), and each volume's I/O labelled with
//! its name.

use prometheus::proto::LabelPair;
use prometheus::proto::{Gauge, Metric, MetricFamily, MetricType};
use std::collections::{BTreeMap, HashMap, HashSet};
use svs_common::metrics::volume_io::{family, label_pair, VolumeLabels, OTHER_VOLUMES};
use svs_common::metrics::METRICS;
use svs_store::{StorageNodeState, Store, StoreError};

pub type ScrapeError = StoreError;

const GIB: f64 = (1u64 << 30) as f64;

/// One gauge family, a value per label set.
struct Gauges {
    name: &'static str,
    help: &'static str,
    rows: Vec<(Vec<LabelPair>, f64)>,
}

impl Gauges {
    fn new(name: &'static str, help: &'static str) -> Gauges {
        Gauges {
            name,
            help,
            rows: Vec::new(),
        }
    }

    fn add_pairs(&mut self, labels: Vec<(&'static str, String)>, value: f64) {
        let labels = labels.iter().map(|(n, v)| label_pair(n, v)).collect();
        self.rows.push((labels, value));
    }

    /// A volume's value.
    fn add(&mut self, volume: &VolumeLabels, value: f64) {
        self.rows.push((volume.pairs(), value));
    }

    fn family(self) -> MetricFamily {
        let metrics = self
            .rows
            .into_iter()
            .map(|(labels, value)| {
                let mut gauge = Gauge::default();
                gauge.set_value(value);
                let mut metric = Metric::from_gauge(gauge);
                metric.set_label(labels);
                metric
            })
            .collect();
        family(self.name, self.help, MetricType::GAUGE, metrics)
    }
}

/// Every family read from the store, and the volumes' I/O.
pub async fn scrape_families(store: &dyn Store) -> Result<Vec<MetricFamily>, ScrapeError> {
    let mut families = media_families(store).await?;
    families.extend(volume_families(store).await?);
    Ok(families)
}

async fn media_families(store: &dyn Store) -> Result<Vec<MetricFamily>, ScrapeError> {
    let mut size = Gauges::new("svs_medium_size_bytes", "A medium's size.");
    let mut allocated = Gauges::new(
        "svs_medium_allocated_bytes",
        "Bytes of a medium the slices placed on it take.",
    );
    let mut booked = Gauges::new(
        "svs_medium_booked_bytes",
        "Bytes of a medium running jobs have reserved.",
    );
    let mut snapshots = Gauges::new(
        "svs_medium_snapshot_bytes",
        "Bytes snapshots hold on a medium, as last measured.",
    );
    let mut free = Gauges::new(
        "svs_medium_free_bytes",
        "Bytes of a medium free to place on.",
    );
    let mut healthy = Gauges::new("svs_medium_healthy", "1 unless the medium failed.");
    let mut draining = Gauges::new("svs_medium_draining", "1 while the medium is drained.");
    let mut node_size = Gauges::new("svs_node_size_bytes", "The size of a node's media.");
    let mut node_free = Gauges::new("svs_node_free_bytes", "Free bytes on a node's media.");
    let mut nodes: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for u in store.media_usage().await? {
        let medium = &u.record.medium;
        let labels = || vec![("medium", medium.id.clone()), ("node", medium.node.clone())];
        size.add_pairs(labels(), medium.size as f64 * GIB);
        allocated.add_pairs(labels(), u.allocated as f64 * GIB);
        booked.add_pairs(labels(), u.reserved as f64 * GIB);
        snapshots.add_pairs(labels(), u.snapshot_bytes as f64);
        free.add_pairs(labels(), u.free() as f64 * GIB);
        healthy.add_pairs(labels(), if u.failed { 0.0 } else { 1.0 });
        draining.add_pairs(labels(), if u.draining { 1.0 } else { 0.0 });
        let node = nodes.entry(medium.node.clone()).or_default();
        node.0 += medium.size;
        node.1 += u.free();
    }
    for (node, (total, left)) in nodes {
        node_size.add_pairs(vec![("node", node.clone())], total as f64 * GIB);
        node_free.add_pairs(vec![("node", node)], left as f64 * GIB);
    }
    let mut up = Gauges::new(
        "svs_storage_node_up",
        "1 while a storage node's heartbeats arrive.",
    );
    for n in store.storage_nodes().await? {
        let online = n.state == StorageNodeState::Online;
        up.add_pairs(vec![("node", n.name)], if online { 1.0 } else { 0.0 });
    }
    Ok([
        size, allocated, booked, snapshots, free, healthy, draining, node_size, node_free, up,
    ]
    .into_iter()
    .map(Gauges::family)
    .collect())
}

/// The volume a series of the I/O families names (not `_other`).
fn labels_of(metric: &Metric) -> Option<VolumeLabels> {
    let value = |name: &str| {
        metric
            .get_label()
            .iter()
            .find(|l| l.name() == name)
            .map(|l| l.value().to_string())
    };
    let volume = value("volume")?;
    (volume != OTHER_VOLUMES).then(|| VolumeLabels {
        volume,
        tenant: value("tenant").unwrap_or_default(),
    })
}

async fn volume_families(store: &dyn Store) -> Result<Vec<MetricFamily>, ScrapeError> {
    let volumes = store.all_volumes().await?;
    let labels: HashMap<&str, VolumeLabels> = volumes
        .iter()
        .map(|v| {
            let labels = VolumeLabels {
                volume: v.name.clone(),
                tenant: v.tenant_id.to_string(),
            };
            (v.id.as_str(), labels)
        })
        .collect();
    let meters = &METRICS.volume_io;
    meters.retain(|id| labels.contains_key(id));
    let io = meters.families(|id| labels.get(id).cloned());
    // The volumes with I/O series get the per-volume gauges too, and so
    // does every degraded volume (an alert names it), within the same bound.
    let limit = meters.limit();
    let shown: HashSet<VolumeLabels> = io
        .iter()
        .find(|f| f.name() == "svs_volume_connections")
        .map(|f| f.get_metric().iter().filter_map(labels_of).collect())
        .unwrap_or_default();
    let with_io = shown.len();
    let mut degraded_shown = 0;
    let mut size = Gauges::new("svs_volume_size_bytes", "A volume's size.");
    let mut degraded = Gauges::new(
        "svs_volume_degraded",
        "1 while a copy of one of the volume's slices is lost.",
    );
    let mut moving = Gauges::new(
        "svs_volume_moving",
        "1 while a job works on the volume's data.",
    );
    let mut by_state: BTreeMap<&'static str, u64> = BTreeMap::new();
    for v in &volumes {
        let lost = v.lost_slices > 0;
        let state = match (lost, v.job.is_some()) {
            (true, _) => "degraded",
            (false, true) => "moving",
            (false, false) => "healthy",
        };
        *by_state.entry(state).or_default() += 1;
        let l = &labels[v.id.as_str()];
        if !shown.contains(l) {
            // A degraded volume without I/O series, while the bound allows.
            if !lost || with_io + degraded_shown >= limit {
                continue;
            }
            degraded_shown += 1;
        }
        size.add(l, v.size as f64 * GIB);
        degraded.add(l, if lost { 1.0 } else { 0.0 });
        moving.add(l, if v.job.is_some() { 1.0 } else { 0.0 });
    }
    let mut count = Gauges::new(
        "svs_volumes",
        "Volumes by state: healthy, degraded (a copy lost), moving (a job works on it).",
    );
    for state in ["healthy", "degraded", "moving"] {
        let n = by_state.get(state).copied().unwrap_or(0);
        count.add_pairs(vec![("state", state.to_string())], n as f64);
    }
    let mut families = io;
    families.extend(
        [size, degraded, moving, count]
            .into_iter()
            .map(Gauges::family),
    );
    Ok(families)
}
