//! Configuration: one typed struct, loaded from defaults, then an optional
//! TOML file, then `SVS_*` environment variables, then command-line flags.

use bytesize::ByteSize;
use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
pub use svs_common::logging::LogFormat;
use svs_domain::svs_names;
pub use svs_front::tcp::{nbd_tcp_congestion, DEFAULT_NBD_TCP_CONGESTION};

/// Everything `svs serve` can be told. Every field has a default, so no
/// configuration at all gives a working service.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Directory holding the database (`svs.db`), the token signing key, the
    /// lock file and, with `demo`, the demo media. Default `./svs-data`; the
    /// systemd unit passes `/var/lib/svs`. `SVS_DATA_DIR`.
    pub data_dir: PathBuf,
    /// Where svs keeps its data: "sqlite" (the default), one file `svs.db`
    /// in `data_dir`; or a PostgreSQL database, its URL
    /// ("postgres://user:password@host:port/database"; see
    /// docs/postgresql.md). Anything else stops start-up. `SVS_STORE`.
    pub store: StoreBackend,
    /// Connections to PostgreSQL this instance keeps at most (with a
    /// PostgreSQL `store`). `SVS_STORE_POOL_SIZE`.
    pub store_pool_size: u32,
    /// How long a request waits for a PostgreSQL connection (a free one of
    /// the pool, or a new one) before it is answered 503, e.g. "5s".
    /// `SVS_STORE_ACQUIRE_TIMEOUT`.
    #[serde(with = "humantime_serde")]
    pub store_acquire_timeout: Duration,
    /// How long an instance's claim on a job lasts unless renewed (every
    /// third of it): a dead instance's jobs resume on another this long
    /// after its last renewal, e.g. "10s". `SVS_JOB_LEASE`.
    #[serde(with = "humantime_serde")]
    pub job_lease: Duration,
    /// How often an instance looks for jobs nobody holds, e.g. "1s".
    /// `SVS_JOB_CLAIM_INTERVAL`.
    #[serde(with = "humantime_serde")]
    pub job_claim_interval: Duration,
    /// Address the HTTP API listens on; port 0 picks a free port. `SVS_LISTEN`.
    pub listen: SocketAddr,
    /// Address the NBD server (attached volumes) listens on. `SVS_NBD_LISTEN`.
    pub nbd_listen: SocketAddr,
    /// HTTPS for the API and console: "off" (plain HTTP) or "auto": on
    /// first start svs makes a private CA and a server
    /// certificate signed by it under `<data_dir>/tls/` and uses them from
    /// then on (clients trust `<data_dir>/tls/ca.pem`, e.g. `svs --ca-cert`).
    /// With `tls_cert` and `tls_key` TLS is on with those files instead.
    /// Unless written: "auto" when the API or NBD server listens beyond
    /// loopback (other machines connect), else "off". `SVS_TLS`.
    pub tls: TlsMode,
    /// The server's certificate chain (PEM: the server certificate first,
    /// then any intermediates) for HTTPS and NBD over TLS; needs `tls_key`.
    /// `SVS_TLS_CERT`.
    pub tls_cert: Option<PathBuf>,
    /// The private key of `tls_cert` (PEM: PKCS#8, PKCS#1 or SEC1).
    /// `SVS_TLS_KEY`.
    pub tls_key: Option<PathBuf>,
    /// More DNS names or IP addresses the certificate of `tls = "auto"`
    /// is valid for, beside the listen addresses, localhost, 127.0.0.1,
    /// ::1 and this host's name. `SVS_TLS_NAMES`.
    pub tls_names: Vec<String>,
    /// TLS on the NBD server (`NBD_OPT_STARTTLS`, with the certificate of
    /// the API): "off", "optional" (clients choose) or "require" (nothing
    /// but STARTTLS is answered before TLS, so no export is listed or
    /// served in plain text). Default: "optional" when TLS is configured,
    /// else "off". `SVS_NBD_TLS`.
    pub nbd_tls: Option<NbdTlsMode>,
    /// CA certificates (PEM) that vouch for storage nodes' own slice
    /// certificates (`slice_tls_cert` on the nodes), beside svs's own CA
    /// with `tls = "auto"`; with `tls_cert`/`tls_key`, what nodes are
    /// checked against (default: the built-in roots). `SVS_SLICE_TLS_CA`.
    pub slice_tls_ca: Option<PathBuf>,
    /// An HTTP request's head (request line and headers) must arrive within
    /// this time from its first byte (on a new connection: from the accept),
    /// else the connection is closed. `SVS_HTTP_HEADER_READ_TIMEOUT`.
    #[serde(with = "humantime_serde")]
    pub http_header_read_timeout: Duration,
    /// An HTTP connection with no request in progress is closed after this
    /// long idle. `SVS_HTTP_KEEP_ALIVE_TIMEOUT`.
    #[serde(with = "humantime_serde")]
    pub http_keep_alive_timeout: Duration,
    /// An HTTP request's body must have arrived this long after its head;
    /// else 408 and the connection is closed. `SVS_HTTP_BODY_TIMEOUT`.
    #[serde(with = "humantime_serde")]
    pub http_body_timeout: Duration,
    /// HTTP connections open at once; at the cap no more are accepted (they
    /// wait in the listen queue until one closes). `SVS_HTTP_MAX_CONNECTIONS`.
    pub http_max_connections: usize,
    /// An NBD client must finish the handshake (choose its export) within
    /// this time, else its connection is closed. `SVS_NBD_HANDSHAKE_TIMEOUT`.
    #[serde(with = "humantime_serde")]
    pub nbd_handshake_timeout: Duration,
    /// NBD connections open at once (handshaking or transmitting); one more
    /// is closed as soon as it is accepted. `SVS_NBD_MAX_CONNECTIONS`.
    pub nbd_max_connections: usize,
    /// NBD connections open at once from one IP address, so that no single
    /// peer can take every slot. `SVS_NBD_MAX_CONNECTIONS_PER_PEER`.
    pub nbd_max_connections_per_peer: usize,
    /// TCP congestion control of NBD connections (attached volumes' data):
    /// a kernel algorithm's name, or "system" for the kernel's default.
    /// Default "cubic": with BBR (some distributions' default) the kernel
    /// paces each large read reply itself, and over loopback that reorders
    /// and retransmits it (docs/benchmarks.md). The storage nodes' fronts
    /// have the same setting. `SVS_NBD_TCP_CONGESTION`.
    pub nbd_tcp_congestion: String,
    /// Lifetime of the AccessToken and IdToken (`ExpiresIn`), e.g. "1h". `SVS_TOKEN_LIFETIME`.
    #[serde(with = "humantime_serde")]
    pub token_lifetime: Duration,
    /// Lifetime of a RefreshToken, e.g. "30days". `SVS_REFRESH_TOKEN_LIFETIME`.
    #[serde(with = "humantime_serde")]
    pub refresh_token_lifetime: Duration,
    /// `iss` claim of issued tokens. `SVS_ISSUER`.
    pub issuer: String,
    /// A token issued (`iat`) further than this in the future is refused:
    /// the clocks of svs's hosts may differ by this much, no more.
    /// `SVS_TOKEN_CLOCK_SKEW`.
    #[serde(with = "humantime_serde")]
    pub token_clock_skew: Duration,
    /// Failed sign-ins for one account (e-mail) that cost nothing; each one
    /// after them locks the account for 1 s, 2 s, 4 s, ... (at most
    /// `signin_max_lockout`). `SVS_SIGNIN_ACCOUNT_FREE_FAILURES`.
    pub signin_account_free_failures: u32,
    /// The same for one client IP address (sign-ins and refreshes with an
    /// invalid refresh token). `SVS_SIGNIN_ADDRESS_FREE_FAILURES`.
    pub signin_address_free_failures: u32,
    /// Failures are forgotten once this long has passed since the last one
    /// (and no lock is running). `SVS_SIGNIN_WINDOW`.
    #[serde(with = "humantime_serde")]
    pub signin_window: Duration,
    /// Longest single lockout, so that nobody can lock a real user out for
    /// longer than this with one more wrong password. `SVS_SIGNIN_MAX_LOCKOUT`.
    #[serde(with = "humantime_serde")]
    pub signin_max_lockout: Duration,
    /// Threads that check passwords (argon2, ~20 ms of CPU each), apart from
    /// the threads serving the API. Default: half the cores, at least 1.
    /// `SVS_PASSWORD_CHECK_THREADS`.
    pub password_check_threads: usize,
    /// Password checks waiting for a thread; one more is refused at once
    /// with 503 and `Retry-After: 1`. `SVS_PASSWORD_CHECK_QUEUE`.
    pub password_check_queue: usize,
    /// Throttle for data movement: slice data copied per second, e.g.
    /// "200 MiB"; "0" means unthrottled. Holes cost nothing. `SVS_MOVEMENT_RATE`.
    pub movement_rate: ByteSize,
    /// A slice copy records a durable checkpoint (the target fsynced up to
    /// there) after at least this much data and at least a second, so a
    /// copy interrupted by a crash or a stop resumes there instead of from
    /// zero. `SVS_MOVEMENT_CHECKPOINT`.
    pub movement_checkpoint: ByteSize,
    /// When data movements may copy: daily ranges in UTC, e.g.
    /// "22:00-06:00" or "01:00-05:00, 13:00-14:00"; outside them a
    /// movement holds its copies at their last checkpoint and goes on by
    /// itself when a range opens. Empty: always. `SVS_MOVEMENT_WINDOW`.
    pub movement_window: String,
    /// Also serve `GET /metrics` here, without a token (bind it where only
    /// Prometheus reaches it); unset: only on the API port, to an
    /// administrator's IdToken or `metrics_token`. `SVS_METRICS_LISTEN`.
    pub metrics_listen: Option<SocketAddr>,
    /// A token Prometheus sends (`Authorization: Bearer <token>`) to scrape
    /// `GET /metrics` on the API port; at least 16 characters. Unset: only
    /// administrators' IdTokens. `SVS_METRICS_TOKEN`.
    pub metrics_token: Option<String>,
    /// Volumes with series of their own in the metrics; the I/O of the
    /// others is summed under `volume="_other"` (docs/metrics.md).
    /// `SVS_METRICS_VOLUMES`.
    pub metrics_volumes: usize,
    /// Jobs that run at once; more wait for a free slot. Generous, so a long
    /// data movement never holds up short jobs. `SVS_MAX_CONCURRENT_JOBS`.
    pub max_concurrent_jobs: usize,
    /// How many times a job that failed with a transient error (an
    /// interrupted or timed-out I/O, a busy database) is tried again, after
    /// back-offs of 1 s, 1.5 s, 2.25 s, ... (at most 1 min), before it ends
    /// in Error; 0 = never. `SVS_JOB_RETRIES`.
    pub job_retries: u32,
    /// Time between two passes of each reconciler (re-opening exports of
    /// attached volumes, removing orphaned copies), e.g. "1min". They also
    /// run once at start. `SVS_RECONCILE_PERIOD`.
    #[serde(with = "humantime_serde")]
    pub reconcile_period: Duration,
    /// Time between two passes of the media health check (at most
    /// `reconcile_period`), e.g. "5s": it records media whose directory
    /// disappeared with no I/O touching them since. Failures the data
    /// path's I/O meets are recorded at once, and a volume recovery checks
    /// its volume's media itself, whatever this says.
    /// `SVS_MEDIA_CHECK_PERIOD`.
    #[serde(with = "humantime_serde")]
    pub media_check_period: Duration,
    /// A storage node whose last heartbeat is older than this, e.g. "10s",
    /// is Offline: its media fail and every copy on them is lost. Storage
    /// nodes heartbeat three times in it. `SVS_STORAGE_NODE_TIMEOUT`.
    #[serde(with = "humantime_serde")]
    pub storage_node_timeout: Duration,
    /// How long the reconcilers' leader lease lasts unless renewed (every
    /// third of it), e.g. "10s": with several instances on one database,
    /// the leader stops counting itself leader a quarter of it before it
    /// runs out, and another instance takes the reconcilers over within a
    /// third more (within a third of it when the leader stops cleanly).
    /// `SVS_LEADER_LEASE`.
    #[serde(with = "humantime_serde")]
    pub leader_lease: Duration,
    /// Seconds a job waits for a node's host agent: to grow the filesystem
    /// of an attached volume after a resize, or to unmount and disconnect
    /// before a detach. Past it the job ends in Error. `SVS_AGENT_WAIT_SECS`.
    pub agent_wait_secs: u64,
    /// E-mail of the first user, created as admin of tenant `admin_tenant`
    /// when the store has no users. `SVS_ADMIN_EMAIL`.
    pub admin_email: Option<String>,
    /// Password of that first user. `SVS_ADMIN_PASSWORD`.
    pub admin_password: Option<String>,
    /// Tenant of the first user. `SVS_ADMIN_TENANT`.
    pub admin_tenant: String,
    /// Log filter (tracing `EnvFilter` syntax), e.g. "info" or "svs=debug". `SVS_LOG`.
    pub log: String,
    /// How log lines look on stderr: "text" (for people; coloured only on
    /// a terminal) or "json" (one object per line, for log collectors).
    /// `SVS_LOG_FORMAT`.
    pub log_format: LogFormat,
    /// Use the embedded demo topology (3 zones, one node each, 2 media per
    /// node of 200 GiB, under `<data_dir>/media`) instead of `[[media]]`.
    /// Default: true when svs runs with no configuration file, false with
    /// one, where a missing `[[media]]` is a mistake to point out rather
    /// than a reason to make up media. `SVS_DEMO`.
    pub demo: bool,
    /// Run with no media of this host: every medium is a storage node's
    /// (`svs storage-node`), so every copy is placed on storage nodes. Start-up
    /// then needs no `[[media]]` (which, like `demo = true`, it refuses), and
    /// `POST /media` is refused. Default false: without media `svs serve`
    /// refuses to start, which catches a forgotten `[[media]]`.
    /// `SVS_STORAGE_NODES_ONLY`.
    pub storage_nodes_only: bool,
    /// Where an attached volume's front (its NBD exports, the process that
    /// writes its copies) runs: "serve" (here, in svs serve) or "nodes" (on
    /// a storage node, when every copy of the volume is on storage-node
    /// media, so the bytes never pass through svs serve; else here).
    /// Default "nodes" (the embedded default has no storage node: its
    /// fronts are all here). `SVS_FRONTS`.
    pub fronts: FrontsMode,
    /// The media svs places slices on (none with `demo`). Only from the
    /// configuration file; media added through the API (`POST /media`)
    /// are kept in the store, and an entry here takes one of the same id
    /// over (the file wins for what it lists).
    pub media: Vec<MediumConfig>,
    /// Hosts that may attach volumes, with the IP address they connect from
    /// (media nodes may be listed too, to give them an address). Only from
    /// the configuration file; addresses can also be set with PATCH /nodes,
    /// and nodes added through the API are kept in the store.
    pub nodes: Vec<NodeConfig>,
}

/// Whether svs makes its own certificates (`tls`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum TlsMode {
    /// No certificate of its own (TLS only with `tls_cert` and `tls_key`).
    Off,
    /// A private CA and a server certificate under `<data_dir>/tls/`.
    Auto,
}

svs_names!(setting "tls", TlsMode {
    Off = "off",
    Auto = "auto",
});

/// TLS on the NBD server (`nbd_tls`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum NbdTlsMode {
    /// `NBD_OPT_STARTTLS` is not offered.
    Off,
    /// Offered; plain-text clients are served too.
    Optional,
    /// Nothing but `NBD_OPT_STARTTLS` (and `NBD_OPT_ABORT`) before TLS.
    Require,
}

svs_names!(setting "nbd_tls", NbdTlsMode {
    Off = "off",
    Optional = "optional",
    Require = "require",
});

/// Where volumes' fronts run (`fronts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum FrontsMode {
    /// In svs serve.
    Serve,
    /// On a storage node holding a copy, when every copy is on storage
    /// nodes.
    Nodes,
}

svs_names!(setting "fronts", FrontsMode {
    Serve = "serve",
    Nodes = "nodes",
});

/// The store backends svs can keep its data in.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum StoreBackend {
    /// One SQLite file in the data directory.
    Sqlite,
    /// A PostgreSQL database, at this URL (`postgres://user:password@host:port/db`).
    Postgres(String),
}

impl StoreBackend {
    /// Whether other `svs serve` may use the same database: its state
    /// (jobs' leases, users, changes) is then shared through the database,
    /// never assumed from this process's memory. SQLite's file is one
    /// process's (the data directory lock).
    pub fn is_shared(&self) -> bool {
        matches!(self, StoreBackend::Postgres(_))
    }

    /// The setting's value: "sqlite", or the database's URL.
    pub fn as_str(&self) -> &str {
        match self {
            StoreBackend::Sqlite => "sqlite",
            StoreBackend::Postgres(url) => url,
        }
    }
}

// The URL may hold a password: never printed.
impl std::fmt::Debug for StoreBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreBackend::Sqlite => f.write_str("Sqlite"),
            StoreBackend::Postgres(_) => f.write_str("Postgres(..)"),
        }
    }
}

impl TryFrom<String> for StoreBackend {
    type Error = String;

    fn try_from(value: String) -> Result<StoreBackend, String> {
        if value == "sqlite" {
            return Ok(StoreBackend::Sqlite);
        }
        if value.starts_with("postgres://") || value.starts_with("postgresql://") {
            return Ok(StoreBackend::Postgres(value));
        }
        // Only the scheme is shown: the rest may hold a password.
        let shown = value
            .split_once("://")
            .map_or(value.as_str(), |(scheme, _)| scheme);
        Err(format!(
            "store '{shown}' is not supported (supported: sqlite, postgres://user:password@host:port/database)"
        ))
    }
}

impl From<StoreBackend> for String {
    fn from(backend: StoreBackend) -> String {
        backend.as_str().to_string()
    }
}

/// A node that may attach volumes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    pub name: String,
    #[serde(default)]
    pub zone: String,
    /// IP address NBD connections of this node come from.
    pub address: Option<std::net::IpAddr>,
}

/// One medium: a directory with a logical capacity.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct MediumConfig {
    /// Unique id, e.g. "node-a-m1".
    pub id: String,
    /// Node the medium is attached to.
    pub node: String,
    /// Zone of that node.
    pub zone: String,
    /// Directory holding the slice files; relative paths are relative to `data_dir`.
    pub directory: PathBuf,
    /// Logical capacity in GiB (slices are sparse, so this is not preallocated).
    pub size_gib: u64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            data_dir: PathBuf::from("./svs-data"),
            store: StoreBackend::Sqlite,
            store_pool_size: 10,
            store_acquire_timeout: Duration::from_secs(5),
            job_lease: Duration::from_secs(10),
            job_claim_interval: Duration::from_secs(1),
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            nbd_listen: SocketAddr::from(([127, 0, 0, 1], 10809)),
            tls: TlsMode::Off,
            tls_cert: None,
            tls_key: None,
            tls_names: Vec::new(),
            nbd_tls: None,
            slice_tls_ca: None,
            http_header_read_timeout: Duration::from_secs(10),
            http_keep_alive_timeout: Duration::from_secs(60),
            http_body_timeout: Duration::from_secs(30),
            http_max_connections: 10_000,
            nbd_handshake_timeout: Duration::from_secs(10),
            nbd_max_connections: 256,
            nbd_max_connections_per_peer: 64,
            nbd_tcp_congestion: DEFAULT_NBD_TCP_CONGESTION.to_string(),
            token_lifetime: Duration::from_secs(3600),
            refresh_token_lifetime: Duration::from_secs(30 * 24 * 3600),
            token_clock_skew: Duration::from_secs(60),
            issuer: "svs".to_string(),
            signin_account_free_failures: 5,
            signin_address_free_failures: 20,
            signin_window: Duration::from_secs(15 * 60),
            signin_max_lockout: Duration::from_secs(5 * 60),
            password_check_threads: default_password_check_threads(),
            password_check_queue: 32,
            movement_rate: ByteSize::mib(200),
            movement_checkpoint: ByteSize::mib(64),
            movement_window: String::new(),
            metrics_listen: None,
            metrics_token: None,
            metrics_volumes: svs_common::metrics::DEFAULT_METRICS_VOLUMES,
            max_concurrent_jobs: 16,
            job_retries: 5,
            reconcile_period: Duration::from_secs(60),
            media_check_period: Duration::from_secs(5),
            storage_node_timeout: Duration::from_secs(10),
            leader_lease: Duration::from_secs(10),
            agent_wait_secs: 300,
            admin_email: None,
            admin_password: None,
            admin_tenant: "default".to_string(),
            log: "info".to_string(),
            log_format: LogFormat::Text,
            demo: true,
            storage_nodes_only: false,
            fronts: FrontsMode::Nodes,
            media: Vec::new(),
            nodes: Vec::new(),
        }
    }
}

/// Values given on the command line; they win over everything else.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub config_file: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub listen: Option<SocketAddr>,
    pub nbd_listen: Option<SocketAddr>,
}

impl Config {
    pub fn load(overrides: &Overrides) -> Result<Config, String> {
        // Without a configuration file there is nowhere to list media: the
        // demo topology is the only way to run (`demo`).
        let defaults = Config {
            demo: overrides.config_file.is_none(),
            ..Config::default()
        };
        // What the file and the environment say, without the defaults.
        let mut given = Figment::new();
        if let Some(file) = &overrides.config_file {
            if !file.is_file() {
                return Err(format!(
                    "configuration file {} does not exist",
                    file.display()
                ));
            }
            given = given.merge(Toml::file(file));
        }
        // Only our settings: the CLI's own variables (SVS_PROFILE, ...) and
        // typos are not errors (`unknown_env_settings` names the latter).
        let settings = setting_names();
        given = given.merge(Env::prefixed("SVS_").filter(move |key| {
            settings
                .iter()
                .any(|s| key.as_str().eq_ignore_ascii_case(s))
        }));
        let mut config: Config = Figment::from(Serialized::defaults(defaults))
            .merge(given.clone())
            .extract()
            .map_err(|e| format!("configuration: {e}"))?;
        // Storage nodes only: no demo media unless asked for (which
        // `validate` then refuses), even without a configuration file.
        if config.storage_nodes_only && given.find_value("demo").is_err() {
            config.demo = false;
        }
        if let Some(dir) = &overrides.data_dir {
            config.data_dir = dir.clone();
        }
        if let Some(listen) = overrides.listen {
            config.listen = listen;
        }
        if let Some(nbd) = overrides.nbd_listen {
            config.nbd_listen = nbd;
        }
        // Plain text by default only where no other machine connects: a
        // service other hosts reach carries their passwords, tokens, slice
        // credentials and volume data (docs/tls.md).
        if given.find_value("tls").is_err()
            && config.tls_cert.is_none()
            && config.reached_beyond_loopback()
        {
            config.tls = TlsMode::Auto;
        }
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), String> {
        if self.store_pool_size == 0 {
            return Err("configuration: store_pool_size must be at least 1".into());
        }
        if self.token_lifetime.as_secs() == 0 {
            return Err("configuration: token_lifetime must be at least 1s".into());
        }
        self.movement_window()
            .map_err(|e| format!("configuration: {e}"))?;
        if self.max_concurrent_jobs == 0 {
            return Err("configuration: max_concurrent_jobs must be at least 1".into());
        }
        if self.job_lease < Duration::from_secs(1) || self.job_claim_interval.is_zero() {
            return Err(
                "configuration: job_lease must be at least 1s and job_claim_interval more than 0"
                    .into(),
            );
        }
        if self.signin_window.is_zero() || self.signin_max_lockout.is_zero() {
            return Err(
                "configuration: signin_window and signin_max_lockout must be more than 0".into(),
            );
        }
        if self.password_check_threads == 0 || self.password_check_queue == 0 {
            return Err(
                "configuration: password_check_threads and password_check_queue must be at least 1"
                    .into(),
            );
        }
        if self
            .metrics_token
            .as_ref()
            .is_some_and(|t| t.trim().len() < 16)
        {
            return Err("configuration: metrics_token must be at least 16 characters".into());
        }
        if self.agent_wait_secs == 0 {
            return Err("configuration: agent_wait_secs must be at least 1".into());
        }
        if self.reconcile_period.as_secs() == 0 {
            return Err("configuration: reconcile_period must be at least 1s".into());
        }
        if self.media_check_period.as_secs() == 0 {
            return Err("configuration: media_check_period must be at least 1s".into());
        }
        if self.storage_node_timeout.as_secs() == 0 {
            return Err("configuration: storage_node_timeout must be at least 1s".into());
        }
        if self.leader_lease < Duration::from_secs(1) {
            return Err("configuration: leader_lease must be at least 1s".into());
        }
        for (name, value) in [
            ("http_header_read_timeout", self.http_header_read_timeout),
            ("http_keep_alive_timeout", self.http_keep_alive_timeout),
            ("http_body_timeout", self.http_body_timeout),
            ("nbd_handshake_timeout", self.nbd_handshake_timeout),
        ] {
            // Zero would close every connection at once, not disable the limit.
            if value.is_zero() {
                return Err(format!("configuration: {name} must be more than 0"));
            }
        }
        for (name, value) in [
            ("http_max_connections", self.http_max_connections),
            ("nbd_max_connections", self.nbd_max_connections),
            (
                "nbd_max_connections_per_peer",
                self.nbd_max_connections_per_peer,
            ),
        ] {
            if value == 0 {
                return Err(format!("configuration: {name} must be at least 1"));
            }
        }
        nbd_tcp_congestion(&self.nbd_tcp_congestion)
            .map_err(|e| format!("configuration: nbd_tcp_congestion: {e}"))?;
        self.validate_tls()?;
        if self.storage_nodes_only && (self.demo || !self.media.is_empty()) {
            return Err(
                "configuration: storage_nodes_only = true places every copy on storage nodes; \
                 remove [[media]] and demo = true"
                    .into(),
            );
        }
        if self.demo && !self.media.is_empty() {
            return Err(
                "configuration: demo = true and [[media]] exclude each other; remove one".into(),
            );
        }
        let mut ids = std::collections::HashSet::new();
        for m in &self.media {
            if m.id.is_empty() || m.node.is_empty() || m.zone.is_empty() {
                return Err("configuration: every medium needs an id, a node and a zone".into());
            }
            if m.size_gib == 0 {
                return Err(format!("configuration: medium '{}' has size_gib 0", m.id));
            }
            if !ids.insert(m.id.as_str()) {
                return Err(format!("configuration: medium id '{}' appears twice", m.id));
            }
        }
        Ok(())
    }

    fn validate_tls(&self) -> Result<(), String> {
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err(
                "configuration: tls_cert and tls_key go together: set both (PEM files) or neither"
                    .into(),
            );
        }
        if self.tls == TlsMode::Auto && self.tls_cert.is_some() {
            return Err(
                "configuration: tls = \"auto\" (certificates made by svs) and tls_cert/tls_key \
                 (your own) exclude each other; remove one"
                    .into(),
            );
        }
        if !self.tls_names.is_empty() && self.tls != TlsMode::Auto {
            return Err(
                "configuration: tls_names names what the certificate of tls = \"auto\" is valid \
                 for; set tls = \"auto\" or remove tls_names"
                    .into(),
            );
        }
        if self.slice_tls_ca.is_some() && !self.tls_enabled() {
            return Err(
                "configuration: slice_tls_ca names the CA of storage nodes' slice certificates, \
                 which are used only with TLS: set tls = \"auto\", or tls_cert and tls_key"
                    .into(),
            );
        }
        if let Some(mode @ (NbdTlsMode::Optional | NbdTlsMode::Require)) = self.nbd_tls {
            if !self.tls_enabled() {
                return Err(format!(
                    "configuration: nbd_tls = \"{}\" needs a certificate: set tls = \"auto\", or \
                     tls_cert and tls_key",
                    mode.as_str()
                ));
            }
        }
        Ok(())
    }

    /// Whether the API (and possibly NBD) is served over TLS.
    /// Whether the API or the NBD server listens where other machines
    /// can connect.
    pub fn reached_beyond_loopback(&self) -> bool {
        !self.listen.ip().is_loopback() || !self.nbd_listen.ip().is_loopback()
    }

    pub fn tls_enabled(&self) -> bool {
        self.tls == TlsMode::Auto || self.tls_cert.is_some()
    }

    /// `nbd_tls`, or its default: "optional" with TLS, else "off".
    pub fn effective_nbd_tls(&self) -> NbdTlsMode {
        self.nbd_tls.unwrap_or(if self.tls_enabled() {
            NbdTlsMode::Optional
        } else {
            NbdTlsMode::Off
        })
    }

    /// `svs serve` needs media to place volumes on. Not part of `validate`:
    /// the offline commands (`user add`, `keys rotate`) work without them.
    pub fn check_media_configured(&self) -> Result<(), String> {
        if self.demo || self.storage_nodes_only || !self.media.is_empty() {
            return Ok(());
        }
        Err(format!(
            "no media configured: add a [[media]] table to the configuration file for each \
             directory svs may keep volume data in (id, node, zone, directory, size_gib; see \
             docs/configuration.md), or set demo = true to try svs with the demo \
             topology (6 media of 200 GiB under {})",
            self.data_dir.join("media").display()
        ))
    }

    /// The configured media, or the embedded demo topology; directories
    /// resolved against the data directory.
    pub fn effective_media(&self) -> Vec<MediumConfig> {
        let media = if self.demo {
            demo_topology()
        } else {
            self.media.clone()
        };
        media
            .into_iter()
            .map(|m| MediumConfig {
                directory: resolve(&self.data_dir, &m.directory),
                ..m
            })
            .collect()
    }

    /// Every node that may attach: the media's nodes and the configured ones
    /// (a configured entry gives a node its address). In the embedded demo
    /// the nodes are this machine, so they attach from 127.0.0.1.
    pub fn effective_nodes(&self) -> Vec<NodeConfig> {
        let demo = self.demo;
        let mut nodes: Vec<NodeConfig> = Vec::new();
        for m in self.effective_media() {
            if !nodes.iter().any(|n| n.name == m.node) {
                nodes.push(NodeConfig {
                    name: m.node.clone(),
                    zone: m.zone.clone(),
                    address: demo.then(|| std::net::IpAddr::from([127, 0, 0, 1])),
                });
            }
        }
        for n in &self.nodes {
            match nodes.iter_mut().find(|x| x.name == n.name) {
                Some(existing) => {
                    if n.address.is_some() {
                        existing.address = n.address;
                    }
                }
                None => nodes.push(n.clone()),
            }
        }
        nodes
    }

    /// Setting `movement_window`, None when movements may copy at any time.
    pub fn movement_window(
        &self,
    ) -> Result<Option<svs_domain::MovementWindow>, svs_domain::WindowError> {
        if self.movement_window.trim().is_empty() {
            return Ok(None);
        }
        svs_domain::MovementWindow::parse(&self.movement_window).map(Some)
    }

    /// Bytes per second for data movement, `None` when unthrottled.
    pub fn movement_rate_limit(&self) -> Option<u64> {
        match self.movement_rate.as_u64() {
            0 => None,
            n => Some(n),
        }
    }
}

/// `SVS_*` variables the `svs` command line reads for itself (not settings
/// of the service): `svs serve` ignores them silently.
pub const CLI_ENV_VARS: [&str; 4] = ["SVS_CA_CERT", "SVS_CONFIG", "SVS_PROFILE", "SVS_URL"];

/// The names of the settings (the keys of the TOML file).
fn setting_names() -> Vec<String> {
    match serde_json::to_value(Config::default()) {
        Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// The `SVS_*` variables among `names` that are neither a setting nor one
/// of the CLI's own: most likely typos, which `svs serve` warns about.
pub fn unknown_env_settings<I: IntoIterator<Item = String>>(names: I) -> Vec<String> {
    let settings = setting_names();
    let mut unknown: Vec<String> = names
        .into_iter()
        .filter(|name| {
            name.strip_prefix("SVS_").is_some_and(|key| {
                !CLI_ENV_VARS.contains(&name.as_str())
                    && !settings.iter().any(|s| s.eq_ignore_ascii_case(key))
            })
        })
        .collect();
    unknown.sort();
    unknown
}

/// Half the cores, at least one: password checks never take every core
/// from the API.
fn default_password_check_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| (n.get() / 2).max(1))
        .unwrap_or(1)
}

fn resolve(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// 3 zones, one node each, 2 media of 200 GiB per node.
fn demo_topology() -> Vec<MediumConfig> {
    let mut media = Vec::new();
    for z in ["a", "b", "c"] {
        for m in 1..=2 {
            let id = format!("node-{z}-m{m}");
            media.push(MediumConfig {
                directory: PathBuf::from("media").join(&id),
                id,
                node: format!("node-{z}"),
                zone: format!("zone-{z}"),
                size_gib: 200,
            });
        }
    }
    media
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_topology_has_three_zones_of_two_media() {
        let config = Config::default();
        let media = config.effective_media();
        assert_eq!(media.len(), 6);
        let zones: std::collections::HashSet<_> = media.iter().map(|m| &m.zone).collect();
        assert_eq!(zones.len(), 3);
        assert!(media.iter().all(|m| m.size_gib == 200));
        assert!(media.iter().all(|m| m.directory.starts_with("./svs-data")));
    }

    #[test]
    fn file_then_flags_override_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("svs.toml");
        std::fs::write(
            &file,
            "listen = \"127.0.0.1:9999\"\nmovement_rate = \"1 MiB\"\ntoken_lifetime = \"10m\"\n\
             [[media]]\nid = \"m1\"\nnode = \"n1\"\nzone = \"z1\"\ndirectory = \"/tmp/m1\"\nsize_gib = 5\n",
        )
        .unwrap();
        let config = Config::load(&Overrides {
            config_file: Some(file),
            data_dir: Some("/tmp/x".into()),
            listen: None,
            nbd_listen: None,
        })
        .unwrap();
        assert_eq!(config.listen.port(), 9999);
        assert_eq!(config.movement_rate_limit(), Some(1024 * 1024));
        assert_eq!(config.token_lifetime, Duration::from_secs(600));
        assert_eq!(config.data_dir, PathBuf::from("/tmp/x"));
        assert_eq!(
            config.effective_media()[0].directory,
            PathBuf::from("/tmp/m1")
        );
    }

    #[test]
    fn runner_settings_have_generous_defaults_and_refuse_zero() {
        let config = Config::default();
        assert_eq!(config.max_concurrent_jobs, 16);
        assert_eq!(config.job_retries, 5);
        assert_eq!(config.reconcile_period, Duration::from_secs(60));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("svs.toml");
        std::fs::write(&file, "max_concurrent_jobs = 0\n").unwrap();
        let err = Config::load(&Overrides {
            config_file: Some(file),
            ..Overrides::default()
        })
        .unwrap_err();
        assert!(err.contains("max_concurrent_jobs"), "{err}");
    }

    #[test]
    fn the_leader_lease_is_10s_unless_set_and_at_least_1s() {
        assert_eq!(Config::default().leader_lease, Duration::from_secs(10));
        let config = load_file("leader_lease = \"30s\"\n").unwrap();
        assert_eq!(config.leader_lease, Duration::from_secs(30));
        let err = load_file("leader_lease = \"500ms\"\n").unwrap_err();
        assert!(err.contains("leader_lease must be at least 1s"), "{err}");
    }

    #[test]
    fn connection_limits_have_defaults_read_the_file_and_refuse_zero() {
        let config = Config::default();
        assert_eq!(config.http_header_read_timeout, Duration::from_secs(10));
        assert_eq!(config.http_keep_alive_timeout, Duration::from_secs(60));
        assert_eq!(config.http_body_timeout, Duration::from_secs(30));
        assert_eq!(config.http_max_connections, 10_000);
        assert_eq!(config.nbd_handshake_timeout, Duration::from_secs(10));
        assert_eq!(config.nbd_max_connections, 256);
        assert_eq!(config.nbd_max_connections_per_peer, 64);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("svs.toml");
        std::fs::write(
            &file,
            "http_header_read_timeout = \"2s\"\nnbd_max_connections_per_peer = 8\n",
        )
        .unwrap();
        let config = Config::load(&Overrides {
            config_file: Some(file.clone()),
            ..Overrides::default()
        })
        .unwrap();
        assert_eq!(config.http_header_read_timeout, Duration::from_secs(2));
        assert_eq!(config.nbd_max_connections_per_peer, 8);
        for bad in ["http_body_timeout = \"0s\"", "http_max_connections = 0"] {
            std::fs::write(&file, format!("{bad}\n")).unwrap();
            let err = Config::load(&Overrides {
                config_file: Some(file.clone()),
                ..Overrides::default()
            })
            .unwrap_err();
            let name = bad.split(' ').next().unwrap();
            assert!(err.contains(name), "{err}");
        }
    }

    #[test]
    fn the_nbd_tcp_congestion_is_cubic_an_algorithm_or_the_system_s() {
        assert_eq!(Config::default().nbd_tcp_congestion, "cubic");
        let chosen = |text: &str| {
            load_file(text).map(|c| {
                nbd_tcp_congestion(&c.nbd_tcp_congestion)
                    .unwrap()
                    .map(|cc| cc.to_string())
            })
        };
        assert_eq!(chosen(""), Ok(Some("cubic".to_string())));
        assert_eq!(
            chosen("nbd_tcp_congestion = \"reno\"\n"),
            Ok(Some("reno".to_string()))
        );
        assert_eq!(chosen("nbd_tcp_congestion = \"system\"\n"), Ok(None));
        let err = chosen("nbd_tcp_congestion = \"Cubic!\"\n").unwrap_err();
        assert!(
            err.starts_with("configuration: nbd_tcp_congestion: \"Cubic!\" is not a TCP congestion control name"),
            "{err}"
        );
        assert!(
            err.ends_with("or \"system\" for the kernel's default"),
            "{err}"
        );
    }

    fn load_file(text: &str) -> Result<Config, String> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("svs.toml");
        std::fs::write(&file, text).unwrap();
        Config::load(&Overrides {
            config_file: Some(file),
            ..Overrides::default()
        })
    }

    #[test]
    fn the_demo_topology_is_the_default_only_without_a_configuration_file() {
        let config = Config::load(&Overrides::default()).unwrap();
        assert!(config.demo);
        assert_eq!(config.effective_media().len(), 6);
        assert!(config.check_media_configured().is_ok());

        let config = load_file("listen = \"127.0.0.1:9999\"\n").unwrap();
        assert!(!config.demo);
        assert!(config.effective_media().is_empty());
        let err = config.check_media_configured().unwrap_err();
        assert!(
            err.starts_with("no media configured: add a [[media]] table"),
            "{err}"
        );
        assert!(err.contains("or set demo = true"), "{err}");

        let config = load_file("demo = true\n").unwrap();
        assert_eq!(config.effective_media().len(), 6);
        assert!(config.check_media_configured().is_ok());

        let err = load_file(
            "demo = true\n[[media]]\nid = \"m1\"\nnode = \"n1\"\nzone = \"z1\"\n\
             directory = \"/tmp/m1\"\nsize_gib = 5\n",
        )
        .unwrap_err();
        assert!(
            err.contains("demo = true and [[media]] exclude each other"),
            "{err}"
        );
    }

    #[test]
    fn storage_nodes_only_starts_without_media_and_refuses_local_ones() {
        let config = load_file("storage_nodes_only = true\n").unwrap();
        assert!(!config.demo);
        assert!(config.effective_media().is_empty());
        assert!(config.check_media_configured().is_ok());
        for text in [
            "storage_nodes_only = true\ndemo = true\n",
            "storage_nodes_only = true\n[[media]]\nid = \"m1\"\nnode = \"n1\"\n\
             zone = \"z1\"\ndirectory = \"/tmp/m1\"\nsize_gib = 5\n",
        ] {
            let err = load_file(text).unwrap_err();
            assert_eq!(
                err,
                "configuration: storage_nodes_only = true places every copy on storage \
                 nodes; remove [[media]] and demo = true"
            );
        }
    }

    #[test]
    fn the_log_format_is_text_or_json() {
        assert_eq!(Config::default().log_format, LogFormat::Text);
        let config = load_file("demo = true\nlog_format = \"json\"\n").unwrap();
        assert_eq!(config.log_format, LogFormat::Json);
        let err = load_file("log_format = \"xml\"\n").unwrap_err();
        assert!(
            err.contains("log_format 'xml' is not supported (supported: text, json)"),
            "{err}"
        );
    }

    #[test]
    fn fronts_run_in_serve_by_default_or_on_storage_nodes() {
        assert_eq!(Config::default().fronts, FrontsMode::Nodes);
        let config = load_file("demo = true\nfronts = \"nodes\"\n").unwrap();
        assert_eq!(config.fronts, FrontsMode::Nodes);
        let err = load_file("demo = true\nfronts = \"hosts\"\n").unwrap_err();
        assert!(
            err.contains("fronts 'hosts' is not supported (supported: serve, nodes)"),
            "{err}"
        );
    }

    #[test]
    fn unknown_settings_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("svs.toml");
        std::fs::write(&file, "lisen = \"127.0.0.1:1\"\n").unwrap();
        let err = Config::load(&Overrides {
            config_file: Some(file),
            ..Overrides::default()
        })
        .unwrap_err();
        assert!(err.contains("lisen"), "{err}");
    }

    #[test]
    fn unknown_env_settings_name_typos_but_not_settings_or_the_clis_variables() {
        let names = [
            "SVS_PROFILE",
            "SVS_URL",
            "SVS_CONFIG",
            "SVS_CA_CERT",
            "SVS_TLS_CERT",
            "SVS_LOG",
            "SVS_SIGNIN_WINDOW",
            "SVS_FOO",
            "SVS_LISEN",
            "HOME",
        ];
        assert_eq!(
            unknown_env_settings(names.iter().map(|n| n.to_string())),
            vec!["SVS_FOO".to_string(), "SVS_LISEN".to_string()]
        );
    }

    #[test]
    fn sign_in_protection_has_documented_defaults() {
        let config = Config::default();
        assert_eq!(config.signin_account_free_failures, 5);
        assert_eq!(config.signin_address_free_failures, 20);
        assert_eq!(config.signin_window, Duration::from_secs(900));
        assert_eq!(config.token_clock_skew, Duration::from_secs(60));
        assert_eq!(config.signin_max_lockout, Duration::from_secs(300));
        assert!(config.password_check_threads >= 1);
        assert_eq!(config.password_check_queue, 32);
    }

    #[test]
    fn tls_is_on_by_default_only_where_other_machines_connect() {
        // Loopback: plain text, as the demo always was.
        assert_eq!(load_file("demo = true\n").unwrap().tls, TlsMode::Off);
        // Beyond loopback (either server): TLS unless `tls = "off"` is written.
        for listen in [
            "listen = \"0.0.0.0:8443\"",
            "nbd_listen = \"0.0.0.0:10809\"",
            "listen = \"10.0.0.5:8443\"",
        ] {
            let config = load_file(&format!("demo = true\n{listen}\n")).unwrap();
            assert_eq!(config.tls, TlsMode::Auto, "{listen}");
            assert_eq!(config.effective_nbd_tls(), NbdTlsMode::Optional, "{listen}");
            let config = load_file(&format!("demo = true\n{listen}\ntls = \"off\"\n")).unwrap();
            assert_eq!(config.tls, TlsMode::Off, "{listen}");
        }
        // Its own certificate is TLS already: no CA of svs's beside it.
        let config = load_file(
            "demo = true\nlisten = \"0.0.0.0:8443\"\ntls_cert = \"/c.pem\"\ntls_key = \"/k.pem\"\n",
        )
        .unwrap();
        assert_eq!(config.tls, TlsMode::Off);
        assert!(config.tls_enabled());
        // The command line's address counts as the file's does.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("svs.toml");
        std::fs::write(&file, "demo = true\n").unwrap();
        let config = Config::load(&Overrides {
            config_file: Some(file),
            listen: Some(SocketAddr::from(([0, 0, 0, 0], 0))),
            ..Overrides::default()
        })
        .unwrap();
        assert_eq!(config.tls, TlsMode::Auto);
    }

    #[test]
    fn tls_settings_are_checked_together() {
        let config = Config::default();
        assert_eq!(config.tls, TlsMode::Off);
        assert!(!config.tls_enabled());
        assert_eq!(config.effective_nbd_tls(), NbdTlsMode::Off);
        let config = load_file("demo = true\ntls = \"auto\"\n").unwrap();
        assert!(config.tls_enabled());
        assert_eq!(config.effective_nbd_tls(), NbdTlsMode::Optional);
        let config = load_file(
            "demo = true\ntls_cert = \"/c.pem\"\ntls_key = \"/k.pem\"\nnbd_tls = \"require\"\n",
        )
        .unwrap();
        assert!(config.tls_enabled());
        assert_eq!(config.effective_nbd_tls(), NbdTlsMode::Require);
        for (bad, expected) in [
            ("tls_cert = \"/c.pem\"", "tls_cert and tls_key go together"),
            (
                "tls = \"auto\"\ntls_cert = \"/c.pem\"\ntls_key = \"/k.pem\"",
                "exclude each other",
            ),
            ("tls_names = [\"svs.example\"]", "tls_names names what"),
            (
                "nbd_tls = \"require\"",
                "nbd_tls = \"require\" needs a certificate",
            ),
            (
                "tls = \"on\"",
                "tls 'on' is not supported (supported: off, auto)",
            ),
            ("nbd_tls = \"yes\"", "nbd_tls 'yes' is not supported"),
        ] {
            let err = load_file(&format!("demo = true\n{bad}\n")).unwrap_err();
            assert!(err.contains(expected), "{bad}: {err}");
        }
    }

    #[test]
    fn the_store_defaults_to_sqlite_and_reads_the_file() {
        assert_eq!(Config::default().store, StoreBackend::Sqlite);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("svs.toml");
        std::fs::write(&file, "store = \"sqlite\"\n").unwrap();
        let config = Config::load(&Overrides {
            config_file: Some(file),
            ..Overrides::default()
        })
        .unwrap();
        assert_eq!(config.store, StoreBackend::Sqlite);
    }

    #[test]
    fn a_postgresql_url_is_a_store_whose_password_is_never_printed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("svs.toml");
        let url = "postgres://svs:hunter2@db.example.com:5432/svs";
        std::fs::write(
            &file,
            format!("store = \"{url}\"\nstore_pool_size = 4\nstore_acquire_timeout = \"3s\"\n"),
        )
        .unwrap();
        let config = Config::load(&Overrides {
            config_file: Some(file),
            ..Overrides::default()
        })
        .unwrap();
        assert_eq!(config.store, StoreBackend::Postgres(url.into()));
        assert_eq!(config.store_pool_size, 4);
        assert_eq!(config.store_acquire_timeout, Duration::from_secs(3));
        assert!(!format!("{config:?}").contains("hunter2"));
        assert_eq!(
            StoreBackend::try_from("postgresql://u@h/d".to_string()),
            Ok(StoreBackend::Postgres("postgresql://u@h/d".into()))
        );
    }

    #[test]
    fn an_unknown_store_is_refused_naming_the_supported_ones() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("svs.toml");
        std::fs::write(&file, "store = \"mysql://root:secret@db/svs\"\n").unwrap();
        let err = Config::load(&Overrides {
            config_file: Some(file),
            ..Overrides::default()
        })
        .unwrap_err();
        assert!(
            err.contains(
                "store 'mysql' is not supported (supported: sqlite, \
                 postgres://user:password@host:port/database)"
            ),
            "{err}"
        );
        assert!(!err.contains("secret"), "{err}");
    }
}
