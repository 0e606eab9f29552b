//! svs persistence.
//!
//! [`Store`] is the one interface the services and the job runner use
//! (`Arc<dyn Store>`). It is made of one small trait per kind of object
//! ([`UserStore`], [`MediaStore`], [`PolicyStore`], [`VolumeStore`],
//! [`JobStore`], [`AttachmentStore`], [`SnapshotStore`], [`NodeAgentStore`],
//! [`StorageNodeStore`])
//! plus [`StoreLifecycle`], and is
//! implemented for any type implementing them all. Calls on a `dyn Store`
//! need no import; on a concrete store, bring the traits into scope with
//! `use svs_store::prelude::*;`.
//!
//! Backends keep atomicity and constraints; the domain rules they enforce
//! (media changes, policies in use, a volume's state after its job, space
//! bookings) are pure functions of `svs_domain`, so every backend gives the
//! same answers. Errors are [`StoreError`], which names no backend type.
//!
//! - [`SqliteStore`]: the embedded default, one SQLite file in the data
//!   directory. It keeps no cache.
//! - [`CachedStore`]: wraps a store and serves volume reads from memory;
//!   sound only while one process owns the data (see its documentation).
//!
//! A new backend (PostgreSQL) implements the small traits, maps its errors
//! into [`StoreError`] (marking the transient ones), and runs the behaviour
//! suite of [`contract`] in its tests with
//! `store_contract_tests!(open, two_handles: open_two)`, as `tests.rs` does
//! for SQLite (with and without the cache). The two-handles half races every
//! booking rule across two connections to one database.

mod cached;
mod error;
pub mod fence;
mod postgres;
mod records;
mod rows;
mod sql;
mod sqlite;
mod traits;

pub use cached::CachedStore;
pub use error::{StoreError, StoreResult};
pub use postgres::{CopiedTable, InstanceLock, InstanceRole, PgSettings, PgStore};
pub use records::*;
pub use sqlite::SqliteStore;
pub use traits::{
    AnnouncementStream, Announcements, AttachmentStore, FrontStore, JobStore, LeaseStore,
    MediaStore, NodeAgentStore, PolicyStore, SigningKeyStore, SnapshotStore, StorageNodeStore,
    Store, StoreLifecycle, UserStore, VolumeStore,
};

/// The store traits, so that methods can be called on an `Arc<dyn Store>`.
pub mod prelude {
    pub use crate::traits::{
        AttachmentStore, FrontStore, JobStore, LeaseStore, MediaStore, NodeAgentStore, PolicyStore,
        SigningKeyStore, SnapshotStore, StorageNodeStore, Store, StoreLifecycle, UserStore,
        VolumeStore,
    };
}

/// The behaviour suite every backend runs (`store_contract_tests!`), public
/// with feature `testing` so a backend outside this crate can run it too.
#[cfg(any(test, feature = "testing"))]
pub mod contract;
/// A throwaway PostgreSQL server and a fresh database per test, for the
/// tests of this crate and, with feature `testing`, of the crates above.
#[cfg(any(test, feature = "testing"))]
pub mod test_postgres;
/// Test data for this crate's tests and, with feature `testing`, for the
/// tests of the crates that use it.
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;
