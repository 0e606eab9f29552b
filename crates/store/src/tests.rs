//! The behaviour suite (`contract.rs`) run on every store this crate has.

use crate::testing::temp_sqlite;

mod sqlite {
    use crate::testing::{temp_sqlite as open, temp_sqlite_twice as open_two};
    crate::store_contract_tests!(open, two_handles: open_two);
}

mod postgres {
    use crate::test_postgres::TestDatabase;
    use crate::{PgSettings, SqlStore};

    async fn open() -> (TestDatabase, SqlStore) {
        let db = TestDatabase::new().await;
        let store = SqlStore::open_postgres(&db.url, &PgSettings::default())
            .await
            .expect("store opens");
        (db, store)
    }

    /// Two handles on one database, each with a pool of its own, as two
    /// `svs serve` instances would hold them.
    async fn open_two() -> (TestDatabase, SqlStore, SqlStore) {
        let (db, first) = open().await;
        let second = SqlStore::open_postgres(&db.url, &PgSettings::default())
            .await
            .expect("second store opens");
        (db, first, second)
    }

    crate::store_contract_tests!(open, two_handles: open_two);

    #[tokio::test]
    async fn an_announcement_on_one_instance_is_heard_by_the_others() {
        use crate::prelude::*;
        use crate::Heard;
        use std::time::Duration;
        let (_db, first, second) = open_two().await;
        let mut heard = second
            .announcements(&["svs_test_a", "svs_test_b"])
            .await
            .expect("listen")
            .expect("PostgreSQL hears announcements");
        first.announce("svs_test_b").await.expect("announce");
        let got = tokio::time::timeout(Duration::from_secs(5), heard.next())
            .await
            .expect("heard in time")
            .expect("heard");
        assert_eq!(got, Heard::Topic("svs_test_b".into()));
        // A topic nobody listens to is not heard.
        first.announce("svs_test_c").await.expect("announce");
        first.announce("svs_test_a").await.expect("announce");
        let got = tokio::time::timeout(Duration::from_secs(5), heard.next())
            .await
            .expect("heard in time")
            .expect("heard");
        assert_eq!(got, Heard::Topic("svs_test_a".into()));
    }
}

mod cached_sqlite {
    use crate::SqlStore;

    async fn open() -> (tempfile::TempDir, SqlStore) {
        let (dir, store) = super::temp_sqlite().await;
        (dir, store.with_volume_cache())
    }

    crate::store_contract_tests!(open);
}

#[tokio::test]
async fn the_cache_serves_volumes_until_a_change_goes_through_it() {
    use crate::contract::{start_resize, volume_on_m1};
    use crate::prelude::*;
    use svs_domain::VolumeState;

    let (dir, sqlite) = temp_sqlite().await;
    let cached = sqlite.with_volume_cache();
    let around = crate::SqlStore::open_sqlite(&dir.path().join(crate::testing::DB_FILE))
        .await
        .expect("second handle");
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
    // A change made around the cached store is not seen: that is why it is
    // for a single process, whose every change goes through it.
    let job_id = start_resize(&around, &user, &volume, false).await;
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

/// The PostgreSQL store's own start-up: its schema, and the databases it
/// refuses.
mod postgres_start {
    use crate::test_postgres::TestDatabase;
    use crate::{PgSettings, SqlStore, StoreError};

    #[tokio::test]
    async fn instances_starting_at_once_all_get_the_latest_schema() {
        let db = TestDatabase::new().await;
        let settings = PgSettings::default();
        let (a, b, c) = tokio::join!(
            SqlStore::open_postgres(&db.url, &settings),
            SqlStore::open_postgres(&db.url, &settings),
            SqlStore::open_postgres(&db.url, &settings),
        );
        for store in [a, b, c] {
            store.expect("opens");
        }
        let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&db.url)
            .await
            .expect("connect");
        let (applied, newest): (i64, Option<i64>) =
            sqlx::query_as("SELECT COUNT(*), MAX(version) FROM _sqlx_migrations")
                .fetch_one(&mut conn)
                .await
                .expect("migrations");
        assert_eq!(newest, Some(SqlStore::postgres_schema_version()));
        assert_eq!(
            applied,
            SqlStore::postgres_schema_version(),
            "each migration once"
        );
    }

    #[tokio::test]
    async fn a_database_with_a_newer_schema_is_refused_untouched() {
        let db = TestDatabase::new().await;
        let store = SqlStore::open_postgres(&db.url, &PgSettings::default())
            .await
            .expect("opens");
        crate::StoreLifecycle::close(&store).await;
        let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&db.url)
            .await
            .expect("connect");
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, \
             execution_time) VALUES (9999, 'from a newer svs', true, '\\x00'::bytea, 0)",
        )
        .execute(&mut conn)
        .await
        .expect("a newer migration");
        let refused = SqlStore::open_postgres(&db.url, &PgSettings::default())
            .await
            .map(|_| ())
            .expect_err("a newer schema");
        assert!(matches!(refused, StoreError::Migrate(_)), "{refused:?}");
        assert!(
            refused
                .to_string()
                .contains("the database's schema is newer than this svs (it has migration 9999"),
            "{refused}"
        );
        let (tables,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM _sqlx_migrations WHERE version = 9999")
                .fetch_one(&mut conn)
                .await
                .expect("count");
        assert_eq!(tables, 1, "left as it was");
    }

    #[tokio::test]
    async fn an_unreachable_server_is_a_transient_error_naming_it() {
        // A port nothing listens on: bound, then closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port")
            .port();
        let settings = PgSettings {
            acquire_timeout: std::time::Duration::from_secs(2),
            ..PgSettings::default()
        };
        let refused =
            SqlStore::open_postgres(&format!("postgres://svs@127.0.0.1:{port}/svs"), &settings)
                .await
                .map(|_| ())
                .expect_err("nothing listens");
        assert!(refused.is_transient(), "{refused:?}");
        assert!(
            refused.to_string().starts_with("database error: "),
            "{refused}"
        );
    }
}

/// `svs store migrate`'s copy: every row of a SQLite database into an
/// empty PostgreSQL one.
mod copy_to_postgres {
    use crate::contract::{start_resize, volume_on_m1};
    use crate::prelude::*;
    use crate::test_postgres::TestDatabase;
    use crate::testing::temp_sqlite;
    use crate::{PgSettings, SqlStore, StoreError};
    use svs_domain::VolumeState;

    #[tokio::test]
    async fn every_row_is_copied_with_its_id_and_new_ids_follow_the_copied_ones() {
        let (_dir, sqlite) = temp_sqlite().await;
        let (user, volume, create_job) = volume_on_m1(&sqlite).await;
        let resize_job = start_resize(&sqlite, &user, &volume, true).await;
        let db = TestDatabase::new().await;
        let pg = SqlStore::open_postgres(&db.url, &PgSettings::default())
            .await
            .expect("opens");

        let copied = pg.copy_from_sqlite(&sqlite).await.expect("copies");
        let count = |table: &str| {
            copied
                .iter()
                .find(|c| c.table == table)
                .map(|c| c.rows)
                .unwrap_or_else(|| panic!("{table} copied"))
        };
        assert_eq!(count("users"), 1);
        assert_eq!(count("media"), 2);
        assert_eq!(count("volumes"), 1);
        assert_eq!(count("slices"), 1);
        assert_eq!(count("jobs"), 2);

        // The same records, read through the PostgreSQL store.
        let from = sqlite
            .get_volume(user.tenant_id, "v")
            .await
            .expect("read")
            .expect("volume");
        let to = pg
            .get_volume(user.tenant_id, "v")
            .await
            .expect("read")
            .expect("volume");
        assert_eq!(format!("{from:?}"), format!("{to:?}"));
        assert_eq!(to.state, VolumeState::Resizing);
        for job in [create_job, resize_job] {
            assert_eq!(
                format!("{:?}", sqlite.job_by_id(job).await.expect("job")),
                format!("{:?}", pg.job_by_id(job).await.expect("job"))
            );
        }
        assert_eq!(
            format!(
                "{:?}",
                sqlite.user_by_email(&user.email).await.expect("user")
            ),
            format!("{:?}", pg.user_by_email(&user.email).await.expect("user"))
        );
        // A job made now gets the id after the copied ones.
        pg.finish_job(resize_job, &crate::testing::end(svs_domain::JobState::Done))
            .await
            .expect("finish");
        let next = start_resize(&pg, &user, &volume, false).await;
        assert_eq!(next, resize_job + 1);

        // Into a database that holds data: refused, nothing written.
        let again = pg
            .copy_from_sqlite(&sqlite)
            .await
            .expect_err("not an empty database");
        assert!(matches!(again, StoreError::Conflict(_)), "{again:?}");
        assert!(
            again
                .to_string()
                .starts_with("the PostgreSQL database already holds data ("),
            "{again}"
        );
    }
}
