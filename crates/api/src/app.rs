//! Start-up: configuration → data directory lock → media check → store and
//! migrations → first user → keys → reconcilers (a first pass: exports of
//! attached volumes, orphaned copies) → job runner (resuming) → HTTP and
//! NBD servers. One shutdown token, cancelled by SIGINT/SIGTERM, stops them
//! all: the servers, the reconcilers, the runner and every copy.

use crate::api;
use crate::http::HttpLimits;
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use svs_common::clock::{Clock, SystemClock};
use svs_control::auth::{PasswordCheckPool, TokenIssuer};
use svs_control::config::{Config, NbdTlsMode, StoreBackend};
use svs_control::data_dir::{lock_data_dir, open_store, DB_FILE};
use svs_control::jobs::{
    FrontMover, JobRunner, LeaseSettings, RetryPolicy, RunnerParts, RunnerSettings, VolumeActivity,
};
use svs_control::media_health::record_failures_at_once;
use svs_control::node_media::NodeMediaSync;
use svs_control::reconcile::{
    ExpiredRefreshTokens, ExportsReconciler, FrontPlacement, Leadership, LeadershipSettings,
    LeaseTiming, MediaHealth, OrphanedCopies, Reconciler, Reconcilers, Scope, SnapshotSpace,
    StorageNodeLiveness,
};
use svs_control::service::throttle::{SignInThrottle, ThrottleSettings};
use svs_control::service::users::add_user;
use svs_control::service::{AuthParts, Services, SignInProtection};
use svs_control::workers::WorkerBoard;
use svs_dataplane::{ClusterMedia, DataPlane, LocalMedia, DEFAULT_REQUEST_TIMEOUT};
use svs_domain::Medium;
use svs_front::exports::{spawn_nbd_server, ExportRegistry};
use svs_nbd::NbdConfig;
use svs_store::{
    InstanceLock, InstanceRole, ManagedBy, MediumRecord, MediumUsage, NodeRecord, Store,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::info;

/// How often an instance on a shared database serves the storage nodes'
/// media that registered with another instance.
const NODE_MEDIA_SYNC: Duration = Duration::from_secs(2);

/// What start-up found, for the lines `svs serve` prints after the
/// listening lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartupFacts {
    /// The data directory, absolute.
    pub data_dir: PathBuf,
    /// Media svs places slices on, from the configuration (or the demo).
    pub media: usize,
    /// Media added through the API (kept in the store).
    pub api_media: usize,
    /// The embedded demo topology (under `<data_dir>/media`), not `[[media]]`.
    pub demo: bool,
    /// `storage_nodes_only`: no media of this host, every copy on storage nodes.
    pub storage_nodes_only: bool,
    /// The store has at least one user (else nobody can sign in yet).
    pub has_users: bool,
    /// HTTPS (and the certificate NBD's STARTTLS uses), `None`: plain HTTP.
    pub tls: Option<svs_common::tls::TlsFacts>,
    /// TLS on the NBD server.
    pub nbd_tls: NbdTlsMode,
    /// Servers reachable from other machines without TLS: one warning each.
    pub plaintext_warnings: Vec<String>,
}

pub struct Application {
    facts: StartupFacts,
    listener: TcpListener,
    /// `metrics_listen`: `GET /metrics` without a token.
    metrics_listener: Option<TcpListener>,
    nbd_listener: TcpListener,
    exports: Arc<ExportRegistry>,
    services: Arc<Services>,
    runner: Arc<JobRunner>,
    reconcilers: Reconcilers,
    store: Arc<dyn Store>,
    http_limits: HttpLimits,
    http_tls: Option<tokio_rustls::TlsAcceptor>,
    nbd_config: NbdConfig,
    /// The one stop signal of the whole service.
    shutdown: CancellationToken,
    /// Held for the life of the process: one `svs serve` per data directory.
    _lock: File,
    /// With PostgreSQL, held for the life of the process: shared by
    /// clustered instances, exclusive for one that keeps volume bytes.
    _database_lock: Option<InstanceLock>,
}

/// How long a start waits for a database's instance lock that another
/// svs serve holds (one just killed releases it within moments).
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// With a PostgreSQL store, takes the database's instance lock (see
/// docs/postgresql.md), or explains who holds it. Several instances may
/// share a database when none keeps volume bytes: every copy on storage
/// nodes (`storage_nodes_only`) and their fronts there (`fronts = "nodes"`).
async fn lock_database(config: &Config) -> Result<Option<InstanceLock>, String> {
    let StoreBackend::Postgres(url) = &config.store else {
        return Ok(None);
    };
    let role = instance_role(config);
    // The lock of an instance that was just killed goes once PostgreSQL has
    // seen its connection close: a restart right after a crash waits for
    // that (briefly) rather than refuse.
    let mut taken = InstanceLock::take(url, role).await;
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    while matches!(taken, Ok(None)) && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        taken = InstanceLock::take(url, role).await;
    }
    match taken {
        Ok(Some(lock)) => Ok(Some(lock)),
        Ok(None) => Err(match role {
            InstanceRole::Alone => "the PostgreSQL database is in use by another svs serve; \
                 an instance with media of its host or fronts = \"serve\" must be the \
                 database's only one (several instances need storage_nodes_only = true and \
                 fronts = \"nodes\": see docs/postgresql.md)"
                .into(),
            InstanceRole::Clustered => "the PostgreSQL database is in use by an svs serve \
                 that must be its only one (it has media of its host or fronts = \"serve\": \
                 see docs/postgresql.md)"
                .into(),
        }),
        Err(e) => Err(format!("cannot open the PostgreSQL database: {e}")),
    }
}

/// Whether this instance may run beside others on one database.
fn instance_role(config: &Config) -> InstanceRole {
    if config.storage_nodes_only && config.fronts == svs_control::config::FrontsMode::Nodes {
        InstanceRole::Clustered
    } else {
        InstanceRole::Alone
    }
}

/// A start-up step's future, boxed here: its state machine is compiled in
/// this crate, not again in the binary that awaits it (which would then
/// rebuild the whole start-up whenever a handler changes).
pub type Boxed<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl Application {
    /// Starts everything but the servers' loops (see the module docs).
    pub fn build(config: Config) -> Boxed<Result<Application, String>> {
        Box::pin(Application::start_up(config))
    }

    async fn start_up(config: Config) -> Result<Application, String> {
        // Without configured media, media added through the API before may
        // be in the store: look (once it is open) before refusing. No store
        // yet means nothing was ever added, and nothing is made.
        let no_configured_media = config.check_media_configured();
        if let Err(e) = &no_configured_media {
            if config.store == StoreBackend::Sqlite && !config.data_dir.join(DB_FILE).exists() {
                return Err(e.clone());
            }
        }
        let lock = lock_data_dir(&config.data_dir)?;
        let database_lock = lock_database(&config).await?;
        let store = open_store(&config).await?;

        let mut media_config = config.effective_media();
        // Media added through the API, unless the file now lists them (it
        // then takes them over).
        let api_media: Vec<MediumUsage> = store
            .media_usage()
            .await
            .map_err(|e| e.to_string())?
            .into_iter()
            .filter(|u| {
                u.managed_by == ManagedBy::Api
                    && !media_config.iter().any(|m| m.id == u.record.medium.id)
            })
            .collect();
        if api_media.is_empty() {
            no_configured_media?;
        }
        if config.storage_nodes_only && !api_media.is_empty() {
            let ids: Vec<&str> = api_media
                .iter()
                .map(|u| u.record.medium.id.as_str())
                .collect();
            return Err(format!(
                "storage_nodes_only = true places every copy on storage nodes, but media of this \
                 host were added through the API: {}; remove them (DELETE /media/ID) before \
                 setting it",
                ids.join(", ")
            ));
        }
        let media = LocalMedia::new(
            media_config
                .iter()
                .map(|m| (m.id.clone(), m.directory.clone()))
                .chain(api_media.iter().map(|u| {
                    (
                        u.record.medium.id.clone(),
                        u.record.directory.clone().into(),
                    )
                })),
        );
        for m in &mut media_config {
            media.check_medium(&m.id).map_err(|e| e.to_string())?;
            // The same directory, however it was spelled in the configuration.
            m.directory = std::fs::canonicalize(&m.directory).map_err(|e| {
                format!(
                    "medium '{}': directory {}: {e}",
                    m.id,
                    m.directory.display()
                )
            })?;
        }
        // A failed medium's disk may be gone; its slices are lost anyway.
        for u in api_media.iter().filter(|u| !u.failed) {
            media
                .check_medium(&u.record.medium.id)
                .map_err(|e| format!("{e} (a medium added through the API)"))?;
        }
        let mut every_medium = media_config.clone();
        every_medium.extend(api_media.iter().map(|u| svs_control::config::MediumConfig {
            id: u.record.medium.id.clone(),
            node: u.record.medium.node.clone(),
            zone: u.record.medium.zone.clone(),
            directory: u.record.directory.clone().into(),
            size_gib: u.record.medium.size,
        }));
        refuse_shared_directories(&every_medium)?;
        // Local media in-process; storage nodes' media over the slice
        // protocol, added as their nodes answer (`serve_node_media`).
        let media: Arc<dyn DataPlane> = Arc::new(ClusterMedia::new(
            LocalMedia::new(
                every_medium
                    .iter()
                    .map(|m| (m.id.clone(), m.directory.clone())),
            ),
            DEFAULT_REQUEST_TIMEOUT,
        ));
        // Before anything listens: bad certificate files stop start-up.
        // Before storage nodes are reached: their slice servers use TLS
        // when the service does (svs's CA, `tls = "auto"`, made here).
        let server_tls =
            svs_control::tls::server_tls(&config, config.listen.ip(), config.nbd_listen.ip())?;
        let slice_tls = Arc::new(svs_control::tls::slice_tls(&config)?);
        // Before any volume opens, so a restart of the control plane finds
        // the copies on storage nodes where they are.
        let node_media = Arc::new(NodeMediaSync::new(
            Arc::clone(&store),
            Arc::clone(&media),
            Arc::clone(&slice_tls),
        ));
        node_media.sync().await;

        let records: Vec<MediumRecord> = media_config
            .iter()
            .map(|m| MediumRecord {
                medium: Medium {
                    id: m.id.clone(),
                    node: m.node.clone(),
                    zone: m.zone.clone(),
                    size: m.size_gib,
                },
                directory: m.directory.display().to_string(),
            })
            .collect();
        store
            .sync_media(&records)
            .await
            .map_err(|e| format!("media configuration: {e}"))?;
        let has_users = create_first_user(store.as_ref(), &config).await?;
        let facts = StartupFacts {
            data_dir: std::fs::canonicalize(&config.data_dir)
                .unwrap_or_else(|_| config.data_dir.clone()),
            media: media_config.len(),
            api_media: api_media.len(),
            demo: config.demo,
            storage_nodes_only: config.storage_nodes_only,
            has_users,
            tls: server_tls.as_ref().map(|t| t.facts.clone()),
            nbd_tls: config.effective_nbd_tls(),
            plaintext_warnings: plaintext_warnings(&config),
        };
        for warning in &facts.plaintext_warnings {
            tracing::warn!("{warning}");
        }
        if !has_users {
            tracing::warn!("{}", first_user_hint(&facts.data_dir));
        }
        let nodes: Vec<NodeRecord> = config
            .effective_nodes()
            .into_iter()
            .map(|n| NodeRecord {
                name: n.name,
                zone: n.zone,
                address: n.address.map(|a| a.to_string()),
                managed_by: ManagedBy::Config,
            })
            .collect();
        store
            .sync_nodes(&nodes)
            .await
            .map_err(|e| format!("nodes configuration: {e}"))?;

        // Slices on media that failed before are lost for every volume
        // opened from now on.
        for u in store.media_usage().await.map_err(|e| e.to_string())? {
            if u.failed {
                media.set_medium_failed(&u.record.medium.id, true);
            }
        }
        let exports = Arc::new(ExportRegistry::new(Arc::clone(&media)));
        for n in store.list_nodes().await.map_err(|e| e.to_string())? {
            exports.set_node_address(&n.name, n.address.and_then(|a| a.parse().ok()));
        }
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let shutdown = CancellationToken::new();
        // The signing keys are the store's, shared by every instance (on
        // the first start: the data directory's key files imported, or a
        // new key); rotations anywhere are followed until shutdown.
        let tokens = TokenIssuer::from_store(
            Arc::clone(&store),
            &config.data_dir,
            clock.now_ms(),
            config.issuer.clone(),
            config.token_lifetime.as_secs(),
        )
        .await?
        .with_max_clock_skew(config.token_clock_skew.as_secs());
        tokens.watch(shutdown.clone());
        // Ends at shutdown with the rest.
        drop(record_failures_at_once(
            Arc::clone(&store),
            Arc::clone(&exports),
            shutdown.clone(),
        ));
        // The owner of every lease this process takes (job claims, the
        // reconcilers' leadership).
        let instance_id = svs_control::cluster::new_instance_id();
        let (runner, reconcilers) = background_work(
            &config,
            &store,
            DataPath {
                media: &media,
                exports: &exports,
                node_media: &node_media,
            },
            &clock,
            &shutdown,
            &instance_id,
        );
        // A first pass before any job resumes: attached volumes are exported
        // again, copies a crash left behind are removed.
        reconcilers.run_once().await;
        // Changes made on other instances on the same database wake the
        // long polls here (PostgreSQL); nothing to share on SQLite.
        runner
            .changes()
            .share_through(Arc::clone(&store), shutdown.clone())
            .await
            .map_err(|e| format!("cannot listen to other instances: {e}"))?;
        runner
            .fronts()
            .share_through(Arc::clone(&store), shutdown.clone())
            .await
            .map_err(|e| format!("cannot listen to other instances: {e}"))?;
        if config.store.is_shared() {
            // Storage nodes register with one instance: the others learn
            // of them from the store.
            node_media.keep_in_sync(NODE_MEDIA_SYNC, shutdown.clone());
        }
        let nbd_listener = TcpListener::bind(config.nbd_listen)
            .await
            .map_err(|e| format!("cannot listen for NBD on {}: {e}", config.nbd_listen))?;
        // Attachments name the NBD server by this URL: `nbds://` (NBD URI
        // standard: NBD over TLS) when it offers TLS, which svs's agents
        // then use; plain clients can still connect with "optional".
        let nbd_scheme = match facts.nbd_tls {
            NbdTlsMode::Require | NbdTlsMode::Optional => "nbds",
            NbdTlsMode::Off => "nbd",
        };
        let nbd_base = format!(
            "{nbd_scheme}://{}",
            nbd_listener.local_addr().map_err(|e| e.to_string())?
        );
        let refresh_ms =
            i64::try_from(config.refresh_token_lifetime.as_millis()).unwrap_or(i64::MAX);
        let mut services = Services::new(
            Arc::clone(&store),
            clock,
            AuthParts {
                tokens,
                refresh_lifetime_ms: refresh_ms,
                protection: sign_in_protection(&config)?,
            },
            Arc::clone(&runner),
            Arc::clone(&exports),
            nbd_base,
        )?;
        services.storage_node_timeout = config.storage_node_timeout;
        if config.store.is_shared() {
            services.share_user_state();
        }
        services.storage_nodes_only = config.storage_nodes_only;
        services.slice_tls = slice_tls;
        services.metrics_token = config.metrics_token.clone();
        svs_common::metrics::METRICS
            .volume_io
            .set_limit(config.metrics_volumes);
        let services = Arc::new(services);
        // On SQLite this process is the database's only user (the data
        // directory lock): every job lease in it is an earlier run's.
        let sole_owner = !config.store.is_shared();
        let resumed = runner
            .resume_unfinished(sole_owner)
            .await
            .map_err(|e| format!("cannot resume jobs: {e}"))?;
        if resumed > 0 {
            info!(resumed, "resumed unfinished jobs");
        }

        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
        let metrics_listener = match config.metrics_listen {
            Some(address) => Some(TcpListener::bind(address).await.map_err(|e| {
                format!("cannot listen for metrics (metrics_listen) on {address}: {e}")
            })?),
            None => None,
        };
        let http_limits = HttpLimits {
            header_read_timeout: config.http_header_read_timeout,
            keep_alive_timeout: config.http_keep_alive_timeout,
            body_timeout: config.http_body_timeout,
            max_connections: config.http_max_connections,
        };
        let nbd_config = NbdConfig {
            max_connections: config.nbd_max_connections,
            max_connections_per_peer: config.nbd_max_connections_per_peer,
            handshake_timeout: config.nbd_handshake_timeout,
            // Checked when the configuration was loaded.
            tcp_congestion: svs_control::config::nbd_tcp_congestion(&config.nbd_tcp_congestion)
                .unwrap_or_default(),
            // The NBD server has a runtime of its own (`spawn_nbd_server`).
            inline_max: 64 * 1024,
            tls: match (&server_tls, facts.nbd_tls) {
                (Some(tls), NbdTlsMode::Optional | NbdTlsMode::Require) => {
                    Some(svs_nbd::ServerTls {
                        config: Arc::clone(&tls.nbd),
                        required: facts.nbd_tls == NbdTlsMode::Require,
                    })
                }
                _ => None,
            },
            ..NbdConfig::default()
        };
        let http_tls = server_tls.map(|t| tokio_rustls::TlsAcceptor::from(t.http));
        Ok(Application {
            facts,
            listener,
            metrics_listener,
            nbd_listener,
            http_limits,
            http_tls,
            nbd_config,
            exports,
            services,
            runner,
            reconcilers,
            store,
            shutdown,
            _lock: lock,
            _database_lock: database_lock,
        })
    }

    pub fn facts(&self) -> &StartupFacts {
        &self.facts
    }

    pub fn local_addr(&self) -> Result<SocketAddr, String> {
        self.listener.local_addr().map_err(|e| e.to_string())
    }

    pub fn nbd_addr(&self) -> Result<SocketAddr, String> {
        self.nbd_listener.local_addr().map_err(|e| e.to_string())
    }

    /// Serves until SIGINT/SIGTERM, then lets running jobs pause at a safe
    /// point (they resume at the next start).
    pub fn run_until_stopped(self) -> Boxed<Result<(), String>> {
        Box::pin(self.serve_until_stopped())
    }

    async fn serve_until_stopped(self) -> Result<(), String> {
        let shutdown = self.shutdown;
        let on_signal = shutdown.clone();
        tokio::spawn(async move {
            svs_common::stop_signal::stop_signal_or_never().await;
            info!("stopping");
            on_signal.cancel();
        });
        let router = api::router(api::AppState(Arc::clone(&self.services)))
            .layer(tower_http::trace::TraceLayer::new_for_http().make_span_with(request_span));
        let reconciling = self.reconcilers.spawn(shutdown.clone());
        svs_common::metrics::sample_volume_io(shutdown.clone());
        if let Some(listener) = self.metrics_listener {
            if let Ok(address) = listener.local_addr() {
                info!(%address, "serving metrics without a token (metrics_listen)");
            }
            let router = api::metrics_router(api::AppState(Arc::clone(&self.services)));
            let (limits, stop) = (self.http_limits, shutdown.clone());
            tokio::spawn(async move {
                if let Err(e) = crate::http::serve(listener, router, limits, None, stop).await {
                    tracing::error!(error = %e, "the metrics server stopped");
                }
            });
        }
        let nbd_thread = spawn_nbd_server(
            self.exports,
            self.nbd_listener,
            self.nbd_config,
            shutdown.clone(),
        )?;
        // Handlers may read the TCP peer (`ConnectInfo<SocketAddr>`).
        let served = crate::http::serve(
            self.listener,
            router,
            self.http_limits,
            self.http_tls,
            shutdown.clone(),
        )
        .await;
        // Also when the server failed on its own: everything stops together.
        shutdown.cancel();
        let _ = tokio::task::spawn_blocking(move || nbd_thread.join()).await;
        info!("stopping: pausing running jobs");
        self.runner.wait_until_stopped().await;
        let _ = reconciling.await;
        self.store.close().await;
        served.map_err(|e| format!("server error: {e}"))
    }
}

/// Each request's span (at INFO, so that the service's log lines while it
/// is answered carry it): a number, the method and the path.
fn request_span(request: &axum::http::Request<axum::body::Body>) -> tracing::Span {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tracing::info_span!(
        "request",
        id,
        method = %request.method(),
        path = %request.uri().path(),
    )
}

/// A warning for each server other machines can reach without TLS: the
/// API carries passwords and tokens, NBD the volumes' bytes.
fn plaintext_warnings(config: &Config) -> Vec<String> {
    let mut warnings = Vec::new();
    if !config.tls_enabled() && !config.listen.ip().is_loopback() {
        warnings.push(format!(
            "warning: the API listens on {} without TLS, so passwords and tokens cross the \
             network in plain text: set tls = \"auto\" (or tls_cert and tls_key; docs/tls.md)",
            config.listen
        ));
    }
    if config.effective_nbd_tls() == NbdTlsMode::Off && !config.nbd_listen.ip().is_loopback() {
        warnings.push(format!(
            "warning: the NBD server listens on {} without TLS, so volume data crosses the \
             network in plain text: set tls = \"auto\" (NBD then offers STARTTLS; nbd_tls = \
             \"require\" makes it mandatory)",
            config.nbd_listen
        ));
    }
    warnings
}

fn sign_in_protection(config: &Config) -> Result<SignInProtection, String> {
    Ok(SignInProtection {
        throttle: SignInThrottle::new(ThrottleSettings {
            account_free_failures: config.signin_account_free_failures,
            address_free_failures: config.signin_address_free_failures,
            window: config.signin_window,
            max_lockout: config.signin_max_lockout,
        }),
        passwords: PasswordCheckPool::new(
            config.password_check_threads,
            config.password_check_queue,
        )?,
    })
}

/// Two media in one directory would each see the other's slice files as
/// their own (and a repair of one would remove the other's data).
fn refuse_shared_directories(media: &[svs_control::config::MediumConfig]) -> Result<(), String> {
    let mut seen: std::collections::HashMap<&Path, &str> = std::collections::HashMap::new();
    for m in media {
        if let Some(other) = seen.insert(m.directory.as_path(), &m.id) {
            return Err(format!(
                "media '{other}' and '{}' use the same directory {}; each medium needs its own",
                m.id,
                m.directory.display()
            ));
        }
    }
    Ok(())
}

/// What background work reaches media through: the data plane, the
/// exports over it, and what serves storage nodes' media to it.
struct DataPath<'a> {
    media: &'a Arc<dyn DataPlane>,
    exports: &'a Arc<ExportRegistry>,
    node_media: &'a Arc<NodeMediaSync>,
}

/// The job runner and the reconcilers. They share the worker board (their
/// status), the clock, which volumes jobs work on (so a repair never races a
/// job), and the shutdown token.
fn background_work(
    config: &Config,
    store: &Arc<dyn Store>,
    DataPath {
        media,
        exports,
        node_media,
    }: DataPath<'_>,
    clock: &Arc<dyn Clock>,
    shutdown: &CancellationToken,
    instance_id: &str,
) -> (Arc<JobRunner>, Reconcilers) {
    let board = Arc::new(WorkerBoard::default());
    let activity = Arc::new(VolumeActivity::default());
    let runner = JobRunner::new(
        RunnerParts {
            store: Arc::clone(store),
            media: Arc::clone(media),
            exports: Arc::clone(exports),
            node_media: Arc::clone(node_media),
            clock: Arc::clone(clock),
            board: Arc::clone(&board),
            activity: Arc::clone(&activity),
            shutdown: shutdown.clone(),
            instance_id: instance_id.to_string(),
        },
        RunnerSettings {
            max_concurrent_jobs: config.max_concurrent_jobs,
            retry: RetryPolicy {
                retries: config.job_retries,
                ..RetryPolicy::default()
            },
            rate_limit: config.movement_rate_limit(),
            checkpoint_bytes: config.movement_checkpoint.as_u64(),
            agent_wait: Duration::from_secs(config.agent_wait_secs),
            fronts: config.fronts,
            leases: LeaseSettings {
                ttl: config.job_lease,
                claim_interval: config.job_claim_interval,
            },
            // Checked when the configuration was read.
            movement_window: config.movement_window().ok().flatten(),
        },
    );
    // One leader at a time runs the reconcilers of shared state; those of
    // this process's own state run on every instance (see `reconcile`).
    let leadership = Leadership::new(
        Arc::clone(store),
        Arc::clone(clock),
        &board,
        LeadershipSettings {
            owner: instance_id.to_string(),
            timing: LeaseTiming {
                ttl: config.leader_lease,
            },
            // SQLite: the data directory's lock makes this the only instance.
            sole: !config.store.is_shared(),
        },
    );
    let mut reconcilers: Vec<(Scope, Arc<dyn Reconciler>)> = vec![
        (
            Scope::EveryInstance,
            Arc::new(MediaHealth {
                store: Arc::clone(store),
                media: Arc::clone(media),
                exports: Arc::clone(exports),
                // Cheap (what the data plane saw, a stat per medium); a backstop
                // to the failures recorded as the I/O meets them.
                period: config.media_check_period.min(config.reconcile_period),
            }),
        ),
        (
            Scope::EveryInstance,
            Arc::new(ExportsReconciler {
                store: Arc::clone(store),
                exports: Arc::clone(exports),
                node_media: Arc::clone(node_media),
                activity: Arc::clone(&activity),
                period: config.reconcile_period,
            }),
        ),
        (
            Scope::Leader,
            Arc::new(OrphanedCopies {
                store: Arc::clone(store),
                media: Arc::clone(media),
                activity: Arc::clone(&activity),
                period: config.reconcile_period,
            }),
        ),
        (
            Scope::EveryInstance,
            Arc::new(SnapshotSpace {
                store: Arc::clone(store),
                media: Arc::clone(media),
                // A stat per snapshot file; figures lag writes by at most this.
                period: config.reconcile_period.min(Duration::from_secs(10)),
            }),
        ),
        (
            Scope::Leader,
            Arc::new(ExpiredRefreshTokens {
                store: Arc::clone(store),
                clock: Arc::clone(clock),
                period: config.reconcile_period,
            }),
        ),
        (
            Scope::Leader,
            Arc::new(StorageNodeLiveness::new(
                Arc::clone(store),
                Arc::clone(exports),
                Arc::clone(clock),
                config.storage_node_timeout,
            )),
        ),
    ];
    if config.fronts == svs_control::config::FrontsMode::Nodes {
        reconcilers.push((
            Scope::Leader,
            Arc::new(FrontPlacement {
                mover: FrontMover {
                    store: Arc::clone(store),
                    exports: Arc::clone(exports),
                    node_media: Arc::clone(node_media),
                    changes: runner.changes(),
                    reports: runner.fronts(),
                },
                activity: Arc::clone(&activity),
                // As often as storage nodes are judged: a front whose node went
                // Offline moves within one more period.
                period: (config.storage_node_timeout / 5).max(Duration::from_millis(200)),
            }),
        ));
    }
    (
        runner,
        Reconcilers::new(&board, Arc::clone(clock), reconcilers).led_by(leadership),
    )
}

/// What to do when the store has no users (logged, and printed on stdout).
pub fn first_user_hint(data_dir: &Path) -> String {
    format!(
        "no users yet, so nobody can sign in: add the first administrator with \
         `svs user add --admin --email EMAIL --tenant TENANT --data-dir {}` (password from \
         stdin; works while svs runs), or restart svs with SVS_ADMIN_EMAIL and \
         SVS_ADMIN_PASSWORD set",
        data_dir.display()
    )
}

/// `SVS_ADMIN_EMAIL` / `SVS_ADMIN_PASSWORD` create the first user when the
/// store has none. Whether the store has a user now.
async fn create_first_user(store: &dyn Store, config: &Config) -> Result<bool, String> {
    if store.user_count().await.map_err(|e| e.to_string())? > 0 {
        return Ok(true);
    }
    let (Some(email), Some(password)) = (&config.admin_email, &config.admin_password) else {
        return Ok(false);
    };
    add_user(
        store,
        &SystemClock,
        &config.admin_tenant,
        email,
        None,
        password,
        true,
    )
    .await?;
    info!(email = %email, tenant = %config.admin_tenant, "created the first user");
    Ok(true)
}
