//! What `GET /metrics` exports (docs/metrics.md): counters the service
//! keeps as it works (HTTP requests, sign-ins, jobs, data movement, each
//! volume's NBD I/O) and gauges read from the store at each scrape (media,
//! nodes, storage nodes, volumes), in the Prometheus text format.
//!
//! The counters live in one registry for the process ([`METRICS`]): the
//! process is what a scrape measures, and the places that count (the NBD
//! path, the job runner, the sign-in) need no handle passed down to them.
//! Every label set is bounded (see docs/metrics.md "Bounded label sets").

mod http;
pub mod volume_io;

pub use http::track_http;
pub use volume_io::{
    IoOp, IoSample, IoTotals, VolumeConnection, VolumeIoMeters, VolumeLabels, VolumeMeter,
    DEFAULT_METRICS_VOLUMES, MAX_IO_REPORTS,
};

use crate::clock::Clock;
use prometheus::proto::MetricFamily;
use prometheus::{
    exponential_buckets, Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};
use std::sync::LazyLock;

/// The metrics of this process.
pub static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The counters and gauges the service updates as it works.
pub struct Metrics {
    registry: Registry,
    pub http_requests: IntCounterVec,
    pub http_duration: HistogramVec,
    pub signin_failures: IntCounter,
    pub signin_lockouts: IntCounter,
    pub password_checks_waiting: IntGauge,
    pub jobs_started: IntCounterVec,
    pub jobs_finished: IntCounterVec,
    pub jobs_running: IntGaugeVec,
    pub job_duration: HistogramVec,
    pub movements_running: IntGauge,
    pub movement_copied: IntCounter,
    pub movement_rate: IntGauge,
    pub copy_checkpoints: IntCounter,
    /// Each volume's NBD I/O (exported at scrape, with the volumes' names).
    pub volume_io: VolumeIoMeters,
}

/// How a job ended, as `svs_jobs_finished_total` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobOutcome {
    Done,
    Error,
    Cancelled,
}

impl JobOutcome {
    pub fn label(self) -> &'static str {
        match self {
            JobOutcome::Done => "done",
            JobOutcome::Error => "error",
            JobOutcome::Cancelled => "cancelled",
        }
    }
}

impl Metrics {
    fn new() -> Metrics {
        let metrics = Metrics {
            registry: Registry::new(),
            http_requests: IntCounterVec::new(
                Opts::new(
                    "svs_http_requests_total",
                    "HTTP requests answered, by route template and status.",
                ),
                &["method", "route", "status"],
            )
            .expect("valid metric"),
            http_duration: HistogramVec::new(
                HistogramOpts::new(
                    "svs_http_request_duration_seconds",
                    "Time to answer an HTTP request, by route template.",
                )
                .buckets(seconds_buckets(0.0005, 16)),
                &["method", "route"],
            )
            .expect("valid metric"),
            signin_failures: IntCounter::new(
                "svs_signin_failures_total",
                "Sign-ins refused for a wrong e-mail or password.",
            )
            .expect("valid metric"),
            signin_lockouts: IntCounter::new(
                "svs_signin_lockouts_total",
                "Sign-ins answered 429 while an account or address was locked out.",
            )
            .expect("valid metric"),
            password_checks_waiting: IntGauge::new(
                "svs_password_checks_waiting",
                "Password checks waiting for a thread.",
            )
            .expect("valid metric"),
            jobs_started: IntCounterVec::new(
                Opts::new("svs_jobs_started_total", "Job runs started here, by kind."),
                &["kind"],
            )
            .expect("valid metric"),
            jobs_finished: IntCounterVec::new(
                Opts::new(
                    "svs_jobs_finished_total",
                    "Jobs finished here, by kind and outcome.",
                ),
                &["kind", "outcome"],
            )
            .expect("valid metric"),
            jobs_running: IntGaugeVec::new(
                Opts::new("svs_jobs_running", "Jobs running here now, by kind."),
                &["kind"],
            )
            .expect("valid metric"),
            job_duration: HistogramVec::new(
                HistogramOpts::new(
                    "svs_job_duration_seconds",
                    "From a job's start to its end, by kind.",
                )
                .buckets(seconds_buckets(0.05, 16)),
                &["kind"],
            )
            .expect("valid metric"),
            movements_running: IntGauge::new(
                "svs_movements_running",
                "Data movements copying now (not paused, not held by the window).",
            )
            .expect("valid metric"),
            movement_copied: IntCounter::new(
                "svs_movement_copied_bytes_total",
                "Bytes data movements copied.",
            )
            .expect("valid metric"),
            movement_rate: IntGauge::new(
                "svs_movement_rate_bytes",
                "Bytes per second the running data movements copy now.",
            )
            .expect("valid metric"),
            copy_checkpoints: IntCounter::new(
                "svs_copy_checkpoints_total",
                "Copy checkpoints recorded.",
            )
            .expect("valid metric"),
            volume_io: VolumeIoMeters::new(DEFAULT_METRICS_VOLUMES),
        };
        let collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(metrics.http_requests.clone()),
            Box::new(metrics.http_duration.clone()),
            Box::new(metrics.signin_failures.clone()),
            Box::new(metrics.signin_lockouts.clone()),
            Box::new(metrics.password_checks_waiting.clone()),
            Box::new(metrics.jobs_started.clone()),
            Box::new(metrics.jobs_finished.clone()),
            Box::new(metrics.jobs_running.clone()),
            Box::new(metrics.job_duration.clone()),
            Box::new(metrics.movements_running.clone()),
            Box::new(metrics.movement_copied.clone()),
            Box::new(metrics.movement_rate.clone()),
            Box::new(metrics.copy_checkpoints.clone()),
            Box::new(prometheus::process_collector::ProcessCollector::for_self()),
        ];
        for collector in collectors {
            // Names are fixed above and distinct: registering cannot fail.
            if let Err(e) = metrics.registry.register(collector) {
                tracing::error!(error = %e, "cannot register a metric");
            }
        }
        metrics
    }

    /// A job run started here; the guard counts it running until dropped.
    pub fn job_started(&self, kind: &str) -> RunningJob {
        self.jobs_started.with_label_values(&[kind]).inc();
        let gauge = self.jobs_running.with_label_values(&[kind]);
        gauge.inc();
        RunningJob(gauge)
    }

    /// A job ended (`seconds` after its start).
    pub fn job_finished(&self, kind: &str, outcome: JobOutcome, seconds: Option<f64>) {
        self.jobs_finished
            .with_label_values(&[kind, outcome.label()])
            .inc();
        if let Some(seconds) = seconds.filter(|s| *s >= 0.0) {
            self.job_duration
                .with_label_values(&[kind])
                .observe(seconds);
        }
    }

    /// The text format of these metrics and of `more` (read at the scrape).
    pub fn render(&self, more: Vec<MetricFamily>) -> String {
        let mut families = self.registry.gather();
        families.extend(more);
        // A family with no series yet (no storage node, say) is left out:
        // the text format has nothing to say of it.
        families.retain(|f| !f.get_metric().is_empty());
        families.sort_by(|a, b| a.name().cmp(b.name()));
        let mut text = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&families, &mut text) {
            tracing::error!(error = %e, "cannot encode the metrics");
        }
        String::from_utf8(text).unwrap_or_default()
    }
}

/// Counts a job running until dropped.
pub struct RunningJob(IntGauge);

impl Drop for RunningJob {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// One running copy's part in the movement metrics: the bytes it copied
/// (counted as they are seen), its rate and whether it copies now (not
/// held), taken back out of the gauges when dropped.
#[derive(Default)]
pub struct MovementMeter {
    copied: u64,
    rate: i64,
    running: bool,
    seen_at: Option<std::time::Instant>,
}

impl MovementMeter {
    /// The copy's bytes so far (its own count), and whether a pause or the
    /// window holds it.
    pub fn update(&mut self, copied: u64, held: bool) {
        let now = std::time::Instant::now();
        let new = copied.saturating_sub(self.copied);
        METRICS.movement_copied.inc_by(new);
        self.copied = self.copied.max(copied);
        let rate = match self.seen_at {
            Some(at) if !held => {
                let secs = now.duration_since(at).as_secs_f64();
                if secs > 0.0 {
                    (new as f64 / secs) as i64
                } else {
                    self.rate
                }
            }
            _ => 0,
        };
        self.seen_at = Some(now);
        METRICS.movement_rate.add(rate - self.rate);
        self.rate = rate;
        if self.running == held {
            if held {
                METRICS.movements_running.dec();
            } else {
                METRICS.movements_running.inc();
            }
            self.running = !held;
        }
    }
}

impl Drop for MovementMeter {
    fn drop(&mut self) {
        METRICS.movement_rate.sub(self.rate);
        if self.running {
            METRICS.movements_running.dec();
        }
    }
}

/// How often each volume's I/O is sampled for the console.
pub const SAMPLE_PERIOD: std::time::Duration = std::time::Duration::from_secs(5);
// The samples' own arithmetic says the same.
const _: () = assert!(volume_io::SAMPLE_PERIOD_MS == 5_000);

/// Samples every volume's I/O each [`SAMPLE_PERIOD`] until `shutdown`.
pub fn sample_volume_io(shutdown: tokio_util::sync::CancellationToken) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SAMPLE_PERIOD);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {
                    METRICS.volume_io.sample(crate::clock::SystemClock.now_ms());
                }
            }
        }
    });
}

/// `count` doubling buckets from `first` seconds.
fn seconds_buckets(first: f64, count: usize) -> Vec<f64> {
    exponential_buckets(first, 2.0, count).unwrap_or_else(|_| vec![first])
}

/// The content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
