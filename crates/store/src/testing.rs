//! Test data shared by this crate's behaviour suite and the tests of the
//! crates above it (feature `testing`): a fresh SQLite store, media, a
//! tenant with its user and policy, volumes and the jobs that user starts.
//! The one place the store layer's fixtures are written.

use crate::{
    JobEnd, MediumRecord, NewJob, NewUser, NewVolume, Policy, PolicyWrite, SqlStore, Store, User,
};
use svs_domain::{
    CreateVolumeArgs, JobSpec, JobState, Medium, Resiliency, SlicePlacement, VolumeType,
};
use tempfile::TempDir;

/// The database file of `temp_sqlite`, in its directory.
pub const DB_FILE: &str = "svs.db";

/// An empty SQLite store in a new temporary directory, which lives as long
/// as the returned guard.
pub async fn temp_sqlite() -> (TempDir, SqlStore) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqlStore::open_sqlite(&dir.path().join(DB_FILE))
        .await
        .expect("store opens");
    (dir, store)
}

/// Two handles on one new SQLite file, each with connections of its own, as
/// two processes would hold them.
pub async fn temp_sqlite_twice() -> (TempDir, SqlStore, SqlStore) {
    let (dir, first) = temp_sqlite().await;
    let second = SqlStore::open_sqlite(&dir.path().join(DB_FILE))
        .await
        .expect("second store opens");
    (dir, first, second)
}

/// Medium `id` of `size` GiB in `directory`, on node `node-{id}` in zone
/// `zone-{id}`.
pub fn medium(id: &str, size: u64, directory: String) -> MediumRecord {
    medium_at(
        id,
        &format!("node-{id}"),
        &format!("zone-{id}"),
        size,
        directory,
    )
}

/// Medium `id` of `size` GiB in `directory` on `node` in `zone`.
pub fn medium_at(id: &str, node: &str, zone: &str, size: u64, directory: String) -> MediumRecord {
    MediumRecord {
        medium: Medium {
            id: id.into(),
            node: node.into(),
            zone: zone.into(),
            size,
        },
        directory,
    }
}

/// A user of `tenant` named after its address's local part, with password
/// hash "x", created at `now_ms`.
pub fn new_user(tenant: &str, email: &str, is_admin: bool, now_ms: i64) -> NewUser {
    NewUser {
        tenant: tenant.into(),
        email: email.into(),
        name: email.split('@').next().unwrap_or(email).into(),
        password_hash: "x".into(),
        is_admin,
        now_ms,
    }
}

/// Tenant `t`, its admin user `u` (u@example.com) and its policy `p` (no
/// resiliency), all created at 1 ms.
pub async fn user_and_policy(store: &dyn Store) -> (User, Policy) {
    user_and_policy_in(store, "t", "u@example.com", true).await
}

/// A user of `tenant` (see `new_user`) and the tenant's policy `p` (no
/// resiliency) written by that user, all created at 1 ms.
pub async fn user_and_policy_in(
    store: &dyn Store,
    tenant: &str,
    email: &str,
    is_admin: bool,
) -> (User, Policy) {
    let user = store
        .create_user(&new_user(tenant, email, is_admin, 1))
        .await
        .expect("user");
    let policy = store
        .create_policy(
            user.tenant_id,
            &PolicyWrite {
                name: "p".into(),
                resiliency: Resiliency {
                    media: 0,
                    node: 0,
                    zone: 0,
                },
                attributes: Default::default(),
                by_name: user.name.clone(),
                by_email: user.email.clone(),
                now_ms: 1,
            },
        )
        .await
        .expect("policy");
    (user, policy)
}

/// A job `user` starts at 2 ms on `object`.
pub fn new_job(user: &User, spec: JobSpec, object: &str) -> NewJob {
    NewJob {
        tenant_id: user.tenant_id,
        spec,
        object: object.into(),
        user_id: user.id,
        username: user.name.clone(),
        useremail: user.email.clone(),
        now_ms: 2,
    }
}

/// The job that creates block volume `name` of `size` GiB under policy `p`.
pub fn create_spec(name: &str, size: u64) -> JobSpec {
    JobSpec::VolumeCreate(CreateVolumeArgs {
        name: name.into(),
        size,
        policy: "p".into(),
        kind: VolumeType::Block,
        source: None,
        plan: None,
    })
}

/// Block volume `id` named `name` of `size` GiB of the user's tenant,
/// created at 1 ms.
pub fn new_volume(user: &User, policy_id: i64, id: &str, name: &str, size: u64) -> NewVolume {
    NewVolume {
        id: id.into(),
        tenant_id: user.tenant_id,
        name: name.into(),
        kind: VolumeType::Block,
        size,
        policy_id,
        zone: None,
        attributes: Default::default(),
        now_ms: 1,
    }
}

/// A new volume in state Creating and its Pending `volume_create` job;
/// returns the job id.
pub async fn add_volume(
    store: &dyn Store,
    user: &User,
    policy_id: i64,
    id: &str,
    name: &str,
    size: u64,
) -> i64 {
    store
        .create_volume(
            &new_volume(user, policy_id, id, name, size),
            &new_job(user, create_spec(name, size), id),
        )
        .await
        .expect("volume")
}

/// One slice (copy 0, column 0) of `size` GiB on `medium`.
pub fn one_slice(medium: &str, size: u64) -> [SlicePlacement; 1] {
    [SlicePlacement {
        copy: 0,
        column: 0,
        medium: medium.into(),
        size,
    }]
}

/// A job's end in `state` at 3 ms, its status the state's name.
pub fn end(state: JobState) -> JobEnd {
    JobEnd {
        state,
        status: state.as_str().into(),
        detail: None,
        now_ms: 3,
    }
}
