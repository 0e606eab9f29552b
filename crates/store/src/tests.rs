//! The behaviour suite (`contract.rs`) run on every store this crate has.

use crate::testing::{temp_sqlite, DB_FILE};
use crate::{CachedStore, SqliteStore};

mod sqlite {
    use crate::testing::temp_sqlite as open;
    store_contract_tests!(open);
}

mod cached_sqlite {
    use crate::{CachedStore, SqliteStore};

    async fn open() -> (tempfile::TempDir, CachedStore<SqliteStore>) {
        let (dir, store) = super::temp_sqlite().await;
        (dir, CachedStore::new(store))
    }

    store_contract_tests!(open);
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
async fn two_stores_on_one_file_never_both_book_the_same_space() {
    use crate::contract::{add_volume, media_states, policy_p, volume_on_m1};
    use crate::prelude::*;
    use crate::StoreError;
    use svs_domain::{place_volume, PlacementRequest, Resiliency};

    // As two processes would: each store has its own connections.
    let (dir, first) = temp_sqlite().await;
    let second = SqliteStore::open(&dir.path().join(DB_FILE))
        .await
        .expect("second store opens");
    let (user, _, _) = volume_on_m1(&first).await;
    let policy = policy_p(&first, &user).await;
    add_volume(&first, &user, policy.id, "vol-a", "a", 15).await;
    add_volume(&first, &user, policy.id, "vol-b", "b", 15).await;
    let stale = media_states(&first).await;
    let request = PlacementRequest {
        size: 15,
        resiliency: Resiliency::default(),
        zone: None,
    };
    let placement = place_volume(&stale, &request).expect("placement");
    // Each booking takes the write lock before it reads the free space, so
    // the second waits for the first and sees what it booked.
    let (a, b) = tokio::join!(
        first.place_slices("vol-a", &placement),
        second.place_slices("vol-b", &placement)
    );
    let refused = match (a, b) {
        (Ok(_), Err(e)) | (Err(e), Ok(_)) => e,
        other => panic!("exactly one booking must pass: {other:?}"),
    };
    assert!(
        matches!(&refused, StoreError::InsufficientSpace { medium } if medium == "m2"),
        "{refused:?}"
    );
    let m2 = first
        .media_usage()
        .await
        .expect("usage")
        .into_iter()
        .find(|m| m.record.medium.id == "m2")
        .expect("m2");
    assert_eq!((m2.allocated, m2.reserved), (15, 0));
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
