//! The behaviour suite (`contract.rs`) run on every store this crate has.

use crate::testing::temp_sqlite;
use crate::CachedStore;

mod sqlite {
    use crate::testing::{temp_sqlite as open, temp_sqlite_twice as open_two};
    crate::store_contract_tests!(open, two_handles: open_two);
}

mod cached_sqlite {
    use crate::{CachedStore, SqliteStore};

    async fn open() -> (tempfile::TempDir, CachedStore<SqliteStore>) {
        let (dir, store) = super::temp_sqlite().await;
        (dir, CachedStore::new(store))
    }

    crate::store_contract_tests!(open);
}

#[tokio::test]
async fn the_cache_serves_volumes_until_a_change_goes_through_it() {
    use crate::contract::{start_resize, volume_on_m1};
    use crate::prelude::*;
    use svs_domain::VolumeState;

    let (_dir, sqlite) = temp_sqlite().await;
    let cached = CachedStore::new(sqlite);
    let (user, volume, _) = volume_on_m1(&cached).await;
    let read = || async {
        cached
            .get_volume(user.tenant_id, "v")
            .await
            .expect("read")
            .expect("volume")
            .state
    };
    assert_eq!(read().await, VolumeState::Ready);
    // A change made around the wrapper is not seen: that is why it is for a
    // single process, whose every change goes through it.
    let job_id = start_resize(cached.inner(), &user, &volume, false).await;
    assert_eq!(read().await, VolumeState::Ready, "served from the cache");
    cached
        .set_job_progress(job_id, 1, "Growing slices")
        .await
        .expect("progress");
    assert_eq!(read().await, VolumeState::Resizing);
}

#[tokio::test]
async fn a_busy_database_is_a_transient_error() {
    use crate::StoreError;
    use sqlx::sqlite::SqliteConnectOptions;
    use sqlx::{ConnectOptions, Connection};
    use std::time::Duration;

    let (dir, _store) = temp_sqlite().await;
    let options = SqliteConnectOptions::new()
        .filename(dir.path().join("svs.db"))
        .busy_timeout(Duration::ZERO);
    let mut holder = options.connect().await.expect("connect");
    let mut other = options.connect().await.expect("connect");
    let _lock = holder.begin_with("BEGIN IMMEDIATE").await.expect("lock");
    let busy = other
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map(|_| ())
        .map_err(StoreError::from)
        .expect_err("the database is locked");
    assert!(busy.is_transient(), "{busy:?}");
    assert!(busy.to_string().starts_with("database error: "), "{busy}");

    let broken = sqlx::query("SELECT * FROM no_such_table")
        .execute(&mut other)
        .await
        .map_err(StoreError::from)
        .expect_err("no such table");
    assert!(!broken.is_transient(), "{broken:?}");
    assert!(!StoreError::NotFound.is_transient());
}
