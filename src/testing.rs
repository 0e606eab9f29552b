//! Test fixtures shared by unit tests: a SQLite store and local media in a
//! temporary directory, with a tenant, a user and a policy.

use std::path::PathBuf;
use std::sync::Arc;
use svs_dataplane::{DataPlane, LocalMedia};
use svs_domain::{CreateVolumeArgs, JobSpec, VolumeType};
use svs_store::{testing, MediumRecord, NewJob, NewVolume, Store, User};

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
        let spec = JobSpec::VolumeCreate(CreateVolumeArgs {
            name: name.into(),
            size,
            policy: "p".into(),
            kind: VolumeType::Block,
            source: None,
        });
        self.store
            .create_volume(
                &NewVolume {
                    id: volume_id.into(),
                    tenant_id: self.user.tenant_id,
                    name: name.into(),
                    kind: VolumeType::Block,
                    size,
                    policy_id: self.policy_id,
                    zone: None,
                    attributes: Default::default(),
                    now_ms: 1,
                },
                &self.new_job(spec, volume_id),
            )
            .await
            .expect("volume")
    }

    /// The file of a slice (copy 0, column 0) of a volume on a medium.
    pub fn slice_file(&self, medium: &str, volume_id: &str) -> PathBuf {
        self.root.join(medium).join(volume_id).join("c0-k0.slice")
    }
}
