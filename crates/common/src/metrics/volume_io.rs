//! Each volume's NBD I/O, counted on the request path with relaxed atomics
//! (no lock, no allocation: see bench/nbd.sh for the cost), and sampled
//! every few seconds for the console's charts.
//!
//! Every volume served here gets a meter; the scrape exports the first
//! `limit` of them (in the order they were first served) as series of
//! their own and sums the rest into `volume="_other"`, so that volume
//! names, which are user input, cannot grow the scrape without bound.

use prometheus::proto::MetricType;
use prometheus::proto::{Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Volumes with series of their own, unless `metrics_volumes` says.
pub const DEFAULT_METRICS_VOLUMES: usize = 200;
/// Most volumes a storage node reports in one heartbeat (its body stays
/// well under the API's 1 MiB).
pub const MAX_IO_REPORTS: usize = 1024;
/// Upper bounds of the latency buckets: 50 µs doubling to ~3.3 s.
const BUCKETS: usize = 17;
const FIRST_BUCKET_NANOS: u64 = 50_000;
/// Samples kept per volume for the console (10 minutes at 5 s).
pub const SAMPLES_KEPT: usize = 120;

/// How often the sampler runs (`super::SAMPLE_PERIOD`), in ms.
pub(super) const SAMPLE_PERIOD_MS: i64 = 5_000;

/// The label a volume beyond the limit is counted under.
pub const OTHER_VOLUMES: &str = "_other";

/// The operations whose latency is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoOp {
    Read,
    Write,
    Flush,
}

impl IoOp {
    const ALL: [IoOp; 3] = [IoOp::Read, IoOp::Write, IoOp::Flush];

    fn label(self) -> &'static str {
        match self {
            IoOp::Read => "read",
            IoOp::Write => "write",
            IoOp::Flush => "flush",
        }
    }
}

#[derive(Default)]
struct LatencyHistogram {
    /// Requests at or under each bound (not cumulative).
    buckets: [AtomicU64; BUCKETS],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl LatencyHistogram {
    fn observe(&self, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        // Bucket i holds (bound(i-1), bound(i)]: bound(i) = 50 µs << i.
        let over = nanos.saturating_sub(1) / FIRST_BUCKET_NANOS;
        let index = if over == 0 {
            0
        } else {
            (u64::BITS - over.leading_zeros()) as usize
        };
        if let Some(bucket) = self.buckets.get(index) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    fn add_to(&self, totals: &mut HistogramTotals) {
        for (total, bucket) in totals.buckets.iter_mut().zip(&self.buckets) {
            *total += bucket.load(Ordering::Relaxed);
        }
        totals.count += self.count.load(Ordering::Relaxed);
        totals.sumnanos += self.sum_nanos.load(Ordering::Relaxed);
    }
}

/// One operation's latencies: requests per bucket (not cumulative), how
/// many, and their sum.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistogramTotals {
    buckets: [u64; BUCKETS],
    count: u64,
    sumnanos: u64,
}

impl HistogramTotals {
    fn add(&mut self, other: &HistogramTotals) {
        for (total, n) in self.buckets.iter_mut().zip(&other.buckets) {
            *total = total.saturating_add(*n);
        }
        self.count = self.count.saturating_add(other.count);
        self.sumnanos = self.sumnanos.saturating_add(other.sumnanos);
    }
}

/// What a volume's meter has counted, as numbers: what a storage node
/// running volumes' fronts reports in its heartbeat (`volume`: the volume's
/// id), and what the scrape sums.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IoTotals {
    pub volume: String,
    pub reads: u64,
    pub writes: u64,
    pub readbytes: u64,
    pub writtenbytes: u64,
    pub flushes: u64,
    pub trims: u64,
    pub errors: u64,
    pub connections: u64,
    /// Read, write, flush.
    pub latency: [HistogramTotals; 3],
}

impl IoTotals {
    fn add(&mut self, other: &IoTotals) {
        self.reads = self.reads.saturating_add(other.reads);
        self.writes = self.writes.saturating_add(other.writes);
        self.readbytes = self.readbytes.saturating_add(other.readbytes);
        self.writtenbytes = self.writtenbytes.saturating_add(other.writtenbytes);
        self.flushes = self.flushes.saturating_add(other.flushes);
        self.trims = self.trims.saturating_add(other.trims);
        self.errors = self.errors.saturating_add(other.errors);
        self.connections = self.connections.saturating_add(other.connections);
        for (mine, theirs) in self.latency.iter_mut().zip(&other.latency) {
            mine.add(theirs);
        }
    }
}

/// Counters of one volume that the threads serving it share out: each
/// thread counts in its own shard (its own cache lines), so the request
/// path never waits on another core for a counter; a read sums them.
const SHARDS: usize = 8;

/// One shard of a volume's counters.
#[derive(Default)]
#[repr(align(128))]
struct Shard {
    // Reads, writes and flushes are the counts of their latencies.
    read_bytes: AtomicU64,
    written_bytes: AtomicU64,
    trims: AtomicU64,
    errors: AtomicU64,
    latency: [LatencyHistogram; 3],
}

/// The shard of the calling thread (threads take them in turn).
fn shard_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    INDEX.with(|i| *i)
}

/// One volume's counters.
#[derive(Default)]
pub struct VolumeMeter {
    /// In the order volumes were first served (which ones get series).
    seq: u64,
    connections: AtomicI64,
    shards: [Shard; SHARDS],
}

impl VolumeMeter {
    /// A request answered after `elapsed`: `bytes` read or written.
    pub fn record(&self, op: IoOp, bytes: u64, elapsed: Duration, ok: bool) {
        let shard = &self.shards[shard_index()];
        if !ok {
            shard.errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let total = match op {
            IoOp::Read => Some(&shard.read_bytes),
            IoOp::Write => Some(&shard.written_bytes),
            IoOp::Flush => None,
        };
        if let Some(total) = total {
            total.fetch_add(bytes, Ordering::Relaxed);
        }
        shard.latency[op as usize].observe(elapsed);
    }

    /// A trim or write-zeroes answered.
    pub fn trimmed(&self, ok: bool) {
        let shard = &self.shards[shard_index()];
        let counter = if ok { &shard.trims } else { &shard.errors };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// An NBD connection opened; the guard counts it until dropped.
    pub fn connected(self: &Arc<Self>) -> VolumeConnection {
        self.connections.fetch_add(1, Ordering::Relaxed);
        VolumeConnection(Arc::clone(self))
    }

    fn totals(&self, volume: &str) -> IoTotals {
        let mut totals = IoTotals {
            volume: volume.to_string(),
            connections: u64::try_from(self.connections.load(Ordering::Relaxed)).unwrap_or(0),
            ..IoTotals::default()
        };
        let sum = |counter: &AtomicU64, total: &mut u64| {
            *total = total.saturating_add(counter.load(Ordering::Relaxed));
        };
        for shard in &self.shards {
            sum(&shard.read_bytes, &mut totals.readbytes);
            sum(&shard.written_bytes, &mut totals.writtenbytes);
            sum(&shard.trims, &mut totals.trims);
            sum(&shard.errors, &mut totals.errors);
            for (total, histogram) in totals.latency.iter_mut().zip(&shard.latency) {
                histogram.add_to(total);
            }
        }
        totals.reads = totals.latency[IoOp::Read as usize].count;
        totals.writes = totals.latency[IoOp::Write as usize].count;
        totals.flushes = totals.latency[IoOp::Flush as usize].count;
        totals
    }
}

/// Counts an NBD connection of a volume while it is open.
pub struct VolumeConnection(Arc<VolumeMeter>);

impl Drop for VolumeConnection {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What a volume did in one sampling period, per second.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct IoSample {
    /// The end of the period (ms since the epoch).
    pub time_ms: i64,
    pub read_iops: f64,
    pub write_iops: f64,
    pub read_bytes_per_sec: f64,
    pub write_bytes_per_sec: f64,
    /// The mean time a read (a write) took to answer over the period, in
    /// microseconds; None when there was none.
    pub read_latency_us: Option<f64>,
    pub write_latency_us: Option<f64>,
}

#[derive(Default)]
struct Samples {
    last: IoTotals,
    last_ms: i64,
    kept: VecDeque<IoSample>,
}

/// The meters of every volume served here.
pub struct VolumeIoMeters {
    limit: AtomicUsize,
    next_seq: AtomicU64,
    meters: Mutex<HashMap<String, Arc<VolumeMeter>>>,
    /// What each storage node running fronts reported last, by node.
    nodes: Mutex<HashMap<String, Vec<IoTotals>>>,
    samples: Mutex<HashMap<String, Samples>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl VolumeIoMeters {
    pub fn new(limit: usize) -> VolumeIoMeters {
        VolumeIoMeters {
            limit: AtomicUsize::new(limit),
            next_seq: AtomicU64::new(0),
            meters: Mutex::default(),
            nodes: Mutex::default(),
            samples: Mutex::default(),
        }
    }

    /// Volumes with series of their own (`metrics_volumes`).
    pub fn set_limit(&self, limit: usize) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// The meter of volume `id` (made the first time it is served).
    pub fn meter(&self, id: &str) -> Arc<VolumeMeter> {
        let mut meters = lock(&self.meters);
        if let Some(meter) = meters.get(id) {
            return Arc::clone(meter);
        }
        let meter = Arc::new(VolumeMeter {
            seq: self.next_seq.fetch_add(1, Ordering::Relaxed),
            ..VolumeMeter::default()
        });
        meters.insert(id.to_string(), Arc::clone(&meter));
        meter
    }

    /// Forgets the meters of volumes that are gone (not in `exists`) and
    /// have no connection open.
    pub fn retain(&self, exists: impl Fn(&str) -> bool) {
        let mut meters = lock(&self.meters);
        meters.retain(|id, m| exists(id) || m.connections.load(Ordering::Relaxed) > 0);
        for report in lock(&self.nodes).values_mut() {
            report.retain(|t| meters.contains_key(&t.volume));
        }
        lock(&self.samples).retain(|id, _| meters.contains_key(id));
    }

    /// Forgets volume `id`'s meter (a storage node whose front of it
    /// closed: the control plane keeps what it reported).
    pub fn forget(&self, id: &str) {
        lock(&self.meters).remove(id);
        lock(&self.samples).remove(id);
    }

    /// What storage node `node` reports of the fronts it runs (replacing
    /// its last report). Each volume gets its place in the order of first
    /// served, as one served here.
    pub fn set_node_report(&self, node: &str, report: Vec<IoTotals>) {
        for totals in &report {
            self.meter(&totals.volume);
        }
        lock(&self.nodes).insert(node.to_string(), report);
    }

    /// The totals of every volume served here, for a storage node's
    /// heartbeat: at most `most`, the first served first.
    pub fn report(&self, most: usize) -> Vec<IoTotals> {
        let mut meters: Vec<(String, Arc<VolumeMeter>)> = lock(&self.meters)
            .iter()
            .map(|(id, m)| (id.clone(), Arc::clone(m)))
            .collect();
        meters.sort_by_key(|(_, m)| m.seq);
        meters.truncate(most);
        meters.iter().map(|(id, m)| m.totals(id)).collect()
    }

    /// Each volume's totals: its meter here and what storage nodes
    /// reported of it, in the order volumes were first served.
    fn all_totals(&self) -> Vec<IoTotals> {
        let mut meters: Vec<(String, Arc<VolumeMeter>)> = lock(&self.meters)
            .iter()
            .map(|(id, m)| (id.clone(), Arc::clone(m)))
            .collect();
        meters.sort_by_key(|(_, m)| m.seq);
        let nodes = lock(&self.nodes);
        let mut reported: HashMap<&str, Vec<&IoTotals>> = HashMap::new();
        for totals in nodes.values().flatten() {
            reported
                .entry(totals.volume.as_str())
                .or_default()
                .push(totals);
        }
        meters
            .iter()
            .map(|(id, m)| {
                let mut totals = m.totals(id);
                for node_totals in reported.get(id.as_str()).into_iter().flatten() {
                    totals.add(node_totals);
                }
                totals
            })
            .collect()
    }

    /// Takes a sample of every volume's I/O since the last one (at `now_ms`).
    pub fn sample(&self, now_ms: i64) {
        let totals = self.all_totals();
        let mut samples = lock(&self.samples);
        for totals in totals {
            // A volume first served since the last sample did all of its
            // I/O within that period.
            let kept = samples
                .entry(totals.volume.clone())
                .or_insert_with(|| Samples {
                    last_ms: now_ms - SAMPLE_PERIOD_MS,
                    ..Samples::default()
                });
            if now_ms > kept.last_ms {
                let secs = (now_ms - kept.last_ms) as f64 / 1000.0;
                let rate = |now: u64, before: u64| now.saturating_sub(before) as f64 / secs;
                let mean_us = |op: IoOp| {
                    let (now, before) = (
                        &totals.latency[op as usize],
                        &kept.last.latency[op as usize],
                    );
                    let count = now.count.saturating_sub(before.count);
                    (count > 0).then(|| {
                        now.sumnanos.saturating_sub(before.sumnanos) as f64 / count as f64 / 1000.0
                    })
                };
                kept.kept.push_back(IoSample {
                    time_ms: now_ms,
                    read_iops: rate(totals.reads, kept.last.reads),
                    write_iops: rate(totals.writes, kept.last.writes),
                    read_bytes_per_sec: rate(totals.readbytes, kept.last.readbytes),
                    write_bytes_per_sec: rate(totals.writtenbytes, kept.last.writtenbytes),
                    read_latency_us: mean_us(IoOp::Read),
                    write_latency_us: mean_us(IoOp::Write),
                });
                while kept.kept.len() > SAMPLES_KEPT {
                    kept.kept.pop_front();
                }
            }
            kept.last = totals;
            kept.last_ms = now_ms;
        }
    }

    /// The samples kept of volume `id`, oldest first (none: never served
    /// here).
    pub fn samples(&self, id: &str) -> Vec<IoSample> {
        lock(&self.samples)
            .get(id)
            .map(|s| s.kept.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The I/O families: a series for each of the first `limit` volumes
    /// served that `labels_of` labels (`volume`, `tenant`; volumes it does
    /// not know are gone), the rest summed as `_other`.
    pub fn families(&self, labels_of: impl Fn(&str) -> Option<VolumeLabels>) -> Vec<MetricFamily> {
        let limit = self.limit.load(Ordering::Relaxed);
        let mut rows: Vec<(VolumeLabels, IoTotals)> = Vec::new();
        let mut others: Option<IoTotals> = None;
        for totals in self.all_totals() {
            match labels_of(&totals.volume) {
                Some(labels) if rows.len() < limit => rows.push((labels, totals)),
                Some(_) => others.get_or_insert_with(IoTotals::default).add(&totals),
                None => {}
            }
        }
        if let Some(others) = others {
            let other = VolumeLabels {
                volume: OTHER_VOLUMES.to_string(),
                tenant: String::new(),
            };
            rows.push((other, others));
        }
        io_families(&rows)
    }
}

type Read = fn(&IoTotals) -> u64;

/// How a volume's series are labelled: its name, and its tenant's id
/// (names are unique in a tenant only).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VolumeLabels {
    pub volume: String,
    pub tenant: String,
}

impl VolumeLabels {
    pub fn pairs(&self) -> Vec<LabelPair> {
        let mut pairs = Vec::with_capacity(2);
        if !self.tenant.is_empty() {
            pairs.push(label_pair("tenant", &self.tenant));
        }
        pairs.push(label_pair("volume", &self.volume));
        pairs
    }
}

/// The families of `rows`: a label value and the meters summed under it.
fn io_families(rows: &[(VolumeLabels, IoTotals)]) -> Vec<MetricFamily> {
    let counters: [(&str, &str, Read); 7] = [
        (
            "svs_volume_read_operations_total",
            "NBD reads answered.",
            |t| t.reads,
        ),
        (
            "svs_volume_write_operations_total",
            "NBD writes answered.",
            |t| t.writes,
        ),
        (
            "svs_volume_read_bytes_total",
            "Bytes NBD reads returned.",
            |t| t.readbytes,
        ),
        (
            "svs_volume_written_bytes_total",
            "Bytes NBD writes stored.",
            |t| t.writtenbytes,
        ),
        (
            "svs_volume_flush_operations_total",
            "NBD flushes answered.",
            |t| t.flushes,
        ),
        (
            "svs_volume_trim_operations_total",
            "NBD trims and write-zeroes answered.",
            |t| t.trims,
        ),
        (
            "svs_volume_io_errors_total",
            "NBD requests that failed.",
            |t| t.errors,
        ),
    ];
    let mut families = Vec::new();
    for (name, help, read) in counters {
        let metrics = rows
            .iter()
            .map(|(volume, totals)| {
                let mut counter = Counter::default();
                counter.set_value(read(totals) as f64);
                let mut metric = Metric::from_label(volume.pairs());
                metric.set_counter(counter);
                metric
            })
            .collect();
        families.push(family(name, help, MetricType::COUNTER, metrics));
    }
    let connections = rows
        .iter()
        .map(|(volume, totals)| {
            let mut gauge = Gauge::default();
            gauge.set_value(totals.connections as f64);
            Metric::from_gauge(gauge).with_labels(volume.pairs())
        })
        .collect();
    families.push(family(
        "svs_volume_connections",
        "NBD connections open now.",
        MetricType::GAUGE,
        connections,
    ));
    let mut histograms = Vec::new();
    for (volume, totals) in rows {
        for op in IoOp::ALL {
            let latency = &totals.latency[op as usize];
            let mut cumulative = 0;
            let buckets = latency
                .buckets
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    cumulative += n;
                    let mut bucket = Bucket::default();
                    bucket.set_cumulative_count(cumulative);
                    bucket.set_upper_bound((FIRST_BUCKET_NANOS << i) as f64 / 1e9);
                    bucket
                })
                .collect();
            let mut histogram = Histogram::default();
            histogram.set_bucket(buckets);
            histogram.set_sample_count(latency.count);
            histogram.set_sample_sum(latency.sumnanos as f64 / 1e9);
            let mut labels = vec![label_pair("op", op.label())];
            labels.extend(volume.pairs());
            let mut metric = Metric::from_label(labels);
            metric.set_histogram(histogram);
            histograms.push(metric);
        }
    }
    families.push(family(
        "svs_volume_io_duration_seconds",
        "Time a volume took to answer an NBD request.",
        MetricType::HISTOGRAM,
        histograms,
    ));
    families
}

trait WithLabels {
    fn with_labels(self, labels: Vec<LabelPair>) -> Self;
}

impl WithLabels for Metric {
    fn with_labels(mut self, labels: Vec<LabelPair>) -> Metric {
        self.set_label(labels);
        self
    }
}

pub fn label_pair(name: &str, value: &str) -> LabelPair {
    let mut pair = LabelPair::default();
    pair.set_name(name.to_string());
    pair.set_value(value.to_string());
    pair
}

pub fn family(name: &str, help: &str, kind: MetricType, metrics: Vec<Metric>) -> MetricFamily {
    let mut family = MetricFamily::default();
    family.set_name(name.to_string());
    family.set_help(help.to_string());
    family.set_field_type(kind);
    family.set_metric(metrics);
    family
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(id: &str) -> Option<VolumeLabels> {
        Some(VolumeLabels {
            volume: id.to_string(),
            tenant: "1".to_string(),
        })
    }

    #[test]
    fn latencies_land_in_their_buckets() {
        let h = LatencyHistogram::default();
        for micros in [1, 50, 51, 100, 101, 3_000_000, 60_000_000] {
            h.observe(Duration::from_micros(micros));
        }
        let mut t = HistogramTotals::default();
        h.add_to(&mut t);
        // (0, 50 µs]: 1 and 50; (50, 100]: 51 and 100; (100, 200]: 101;
        // 3 s in (1.6384, 3.2768]; 60 s beyond every bound (+Inf only).
        assert_eq!(&t.buckets[..3], &[2, 2, 1]);
        assert_eq!(t.buckets[16], 1);
        assert_eq!(t.buckets.iter().sum::<u64>(), 6);
        assert_eq!(t.count, 7);
    }

    #[test]
    fn every_thread_s_counts_are_summed() {
        let meter = Arc::new(VolumeMeter::default());
        let threads: Vec<_> = (0..12)
            .map(|_| {
                let meter = Arc::clone(&meter);
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        meter.record(IoOp::Read, 512, Duration::from_micros(70), true);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        let totals = meter.totals("v");
        assert_eq!((totals.reads, totals.readbytes), (12_000, 12_000 * 512));
        assert_eq!(totals.latency[IoOp::Read as usize].count, 12_000);
        assert_eq!(totals.latency[IoOp::Read as usize].buckets[1], 12_000);
    }

    #[test]
    fn volumes_past_the_limit_are_summed_as_other() {
        let meters = VolumeIoMeters::new(2);
        for id in ["a", "b", "c", "d"] {
            meters
                .meter(id)
                .record(IoOp::Write, 4096, Duration::from_micros(10), true);
        }
        let families = meters.families(label);
        let writes = families
            .iter()
            .find(|f| f.name() == "svs_volume_write_operations_total")
            .expect("writes");
        let rows: Vec<(String, f64)> = writes
            .get_metric()
            .iter()
            .map(|m| {
                let volume = m.get_label().iter().find(|l| l.name() == "volume");
                let volume = volume.map(|l| l.value().to_string()).unwrap_or_default();
                (volume, m.get_counter().get_value())
            })
            .collect();
        assert_eq!(
            rows,
            [("a".into(), 1.0), ("b".into(), 1.0), ("_other".into(), 2.0)]
        );
    }

    #[test]
    fn gone_volumes_are_forgotten_unless_connected() {
        let meters = VolumeIoMeters::new(10);
        let open = meters.meter("open");
        let _connection = open.connected();
        meters.meter("gone");
        meters.retain(|_| false);
        let families = meters.families(label);
        let connections = families
            .iter()
            .find(|f| f.name() == "svs_volume_connections")
            .expect("connections");
        assert_eq!(connections.get_metric().len(), 1);
        assert_eq!(connections.get_metric()[0].get_gauge().get_value(), 1.0);
    }

    #[test]
    fn storage_nodes_reports_add_to_what_was_served_here() {
        let meters = VolumeIoMeters::new(10);
        meters
            .meter("v")
            .record(IoOp::Write, 4096, Duration::from_micros(10), true);
        let report = |writes| IoTotals {
            volume: "v".into(),
            writes,
            ..IoTotals::default()
        };
        meters.set_node_report("sn-1", vec![report(5)]);
        meters.set_node_report("sn-2", vec![report(7)]);
        // A node's next report replaces its last.
        meters.set_node_report("sn-1", vec![report(6)]);
        let totals = meters.all_totals();
        assert_eq!(totals.len(), 1);
        assert_eq!(totals[0].writes, 1 + 6 + 7);
        // A volume only a node served gets its place too.
        meters.set_node_report(
            "sn-3",
            vec![IoTotals {
                volume: "w".into(),
                reads: 2,
                ..IoTotals::default()
            }],
        );
        let totals = meters.all_totals();
        assert_eq!(
            totals.iter().map(|t| t.volume.as_str()).collect::<Vec<_>>(),
            ["v", "w"]
        );
        // Gone volumes leave the reports too.
        meters.retain(|id| id == "v");
        assert_eq!(meters.all_totals().len(), 1);
    }

    #[test]
    fn samples_are_rates_over_the_period() {
        let meters = VolumeIoMeters::new(10);
        let m = meters.meter("v");
        // Served within the period before its first sample.
        m.record(IoOp::Read, 512, Duration::from_micros(10), true);
        meters.sample(6_000);
        for i in 0..10 {
            m.record(IoOp::Write, 4096, Duration::from_micros(10 + 20 * i), true);
        }
        meters.sample(11_000);
        let samples = meters.samples("v");
        assert_eq!(samples.len(), 2);
        assert_eq!(samples[0].read_iops, 0.2);
        assert_eq!(samples[0].write_iops, 0.0);
        assert_eq!(samples[1].write_iops, 2.0);
        assert_eq!(samples[1].write_bytes_per_sec, 8192.0);
        // Latency: the mean of the period's own requests (10 to 190 µs),
        // none for an operation the period did not see.
        assert_eq!(samples[0].read_latency_us, Some(10.0));
        assert_eq!(samples[0].write_latency_us, None);
        assert_eq!(samples[1].read_latency_us, None);
        assert_eq!(samples[1].write_latency_us, Some(100.0));
    }
}
