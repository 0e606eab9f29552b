//! Test fixtures of the service's layers (jobs, reconcilers, services),
//! built on the store's (`svs_store::testing`): a SQLite store and local
//! media in a temporary directory, with a tenant, a user and a policy, and a
//! job runner around them.

use crate::front_layout::ExportRegistry;
use crate::jobs::{RetryPolicy, RunnerParts, RunnerSettings, VolumeActivity};
use crate::workers::WorkerBoard;
use std::path::PathBuf;
use std::sync::Arc;
use svs_common::clock::Clock;
use svs_dataplane::{DataPlane, LocalMedia};
use svs_domain::JobSpec;
use svs_store::{testing, MediumRecord, NewJob, Store, User};
use tokio_util::sync::CancellationToken;

/// Media `m1` and `m2` (20 GiB each, on nodes and zones of their own), a
/// user, and a policy `p` with no resiliency.
pub struct Fixture {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub store: Arc<dyn Store>,
    pub local: LocalMedia,
    pub user: User,
    policy_id: i64,
}

pub const MEDIA: [&str; 2] = ["m1", "m2"];

impl Fixture {
    pub async fn new() -> Fixture {
        let (dir, sqlite) = testing::temp_sqlite().await;
        let root = dir.path().to_path_buf();
        let records: Vec<MediumRecord> = MEDIA
            .into_iter()
            .map(|id| testing::medium(id, 20, root.join(id).display().to_string()))
            .collect();
        let store: Arc<dyn Store> = Arc::new(sqlite);
        store.sync_media(&records).await.expect("media");
        let local = LocalMedia::new(MEDIA.map(|id| (id.to_string(), root.join(id))));
        let (user, policy) = testing::user_and_policy(store.as_ref()).await;
        Fixture {
            _dir: dir,
            root,
            store,
            local,
            user,
            policy_id: policy.id,
        }
    }

    pub fn media(&self) -> Arc<dyn DataPlane> {
        Arc::new(self.local.clone())
    }

    pub fn new_job(&self, spec: JobSpec, object: &str) -> NewJob {
        testing::new_job(&self.user, spec, object)
    }

    /// A volume `name` (id `volume_id`) of `size` GiB, state Creating, and
    /// its Pending `volume_create` job; returns the job id.
    pub async fn create_volume(&self, volume_id: &str, name: &str, size: u64) -> i64 {
        testing::add_volume(
            self.store.as_ref(),
            &self.user,
            self.policy_id,
            volume_id,
            name,
            size,
        )
        .await
    }

    /// The file of a slice (copy 0, column 0) of a volume on a medium.
    pub fn slice_file(&self, medium: &str, volume_id: &str) -> PathBuf {
        self.root.join(medium).join(volume_id).join("c0-k0.slice")
    }
}

/// What a job runner works with: `store`, `media` (exports of its own over
/// them), `clock`, and a fresh worker board, volume activity and shutdown
/// token (replace those a test watches).
pub fn runner_parts(
    store: Arc<dyn Store>,
    media: Arc<dyn DataPlane>,
    clock: Arc<dyn Clock>,
) -> RunnerParts {
    RunnerParts {
        node_media: Arc::new(crate::node_media::NodeMediaSync::new(
            Arc::clone(&store),
            Arc::clone(&media),
            Arc::new(svs_common::slice_tls::SliceTls::off()),
        )),
        store,
        exports: Arc::new(ExportRegistry::new(Arc::clone(&media))),
        media,
        clock,
        board: Arc::new(WorkerBoard::default()),
        activity: Arc::new(VolumeActivity::default()),
        shutdown: CancellationToken::new(),
        instance_id: crate::cluster::new_instance_id(),
    }
}

/// A runner of `max_concurrent_jobs` that retries by `retry`, unthrottled,
/// checkpointing every 64 MiB and waiting 5 s for agents.
pub fn runner_settings(max_concurrent_jobs: usize, retry: RetryPolicy) -> RunnerSettings {
    RunnerSettings {
        max_concurrent_jobs,
        retry,
        rate_limit: None,
        checkpoint_bytes: 64 << 20,
        agent_wait: std::time::Duration::from_secs(5),
        fronts: crate::config::FrontsMode::Serve,
        leases: crate::jobs::LeaseSettings::default(),
        movement_window: None,
    }
}
