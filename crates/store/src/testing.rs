//! Test data shared by this crate's behaviour suite and the tests of the
//! crates above it (feature `testing`): a fresh SQLite store, media, a
//! tenant with its user and policy, and the jobs that user starts.

use crate::{MediumRecord, NewJob, NewUser, Policy, PolicyWrite, SqliteStore, Store, User};
use svs_domain::{JobSpec, Medium, Resiliency};
use tempfile::TempDir;

/// The database file of `temp_sqlite`, in its directory.
pub const DB_FILE: &str = "svs.db";

/// An empty SQLite store in a new temporary directory, which lives as long
/// as the returned guard.
pub async fn temp_sqlite() -> (TempDir, SqliteStore) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(&dir.path().join(DB_FILE))
        .await
        .expect("store opens");
    (dir, store)
}

/// Two handles on one new SQLite file, each with connections of its own, as
/// two processes would hold them.
pub async fn temp_sqlite_twice() -> (TempDir, SqliteStore, SqliteStore) {
    let (dir, first) = temp_sqlite().await;
    let second = SqliteStore::open(&dir.path().join(DB_FILE))
        .await
        .expect("second store opens");
    (dir, first, second)
}

/// Medium `id` of `size` GiB in `directory`, on node `node-{id}` in zone
/// `zone-{id}`.
pub fn medium(id: &str, size: u64, directory: String) -> MediumRecord {
    MediumRecord {
        medium: Medium {
            id: id.into(),
            node: format!("node-{id}"),
            zone: format!("zone-{id}"),
            size,
        },
        directory,
    }
}

/// Tenant `t`, its admin user `u` (u@example.com) and its policy `p` (no
/// resiliency), all created at 1 ms.
pub async fn user_and_policy(store: &dyn Store) -> (User, Policy) {
    let user = store
        .create_user(&NewUser {
            tenant: "t".into(),
            email: "u@example.com".into(),
            name: "u".into(),
            password_hash: "x".into(),
            is_admin: true,
            now_ms: 1,
        })
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
                by_name: "u".into(),
                by_email: "u@example.com".into(),
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
