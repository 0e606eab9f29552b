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
//! The store keeps atomicity and constraints; the domain rules it enforces
//! (media changes, policies in use, a volume's state after its job, space
//! bookings) are pure functions of `svs_domain`. Errors are [`StoreError`],
//! which names no database type.
//!
//! [`SqlStore`] is the one implementation, each operation written once over
//! two dialects (see `sql/mod.rs`):
//! - on SQLite ([`SqlStore::open_sqlite`]): the embedded default, one file
//!   in the data directory; [`SqlStore::with_volume_cache`] serves volume
//!   reads from memory while one process owns the file;
//! - on PostgreSQL ([`SqlStore::open_postgres`]): several `svs serve`
//!   instances on one database.
//!
//! The behaviour suite of [`contract`] runs on both in `tests.rs`
//! (`store_contract_tests!(open, two_handles: open_two)`, SQLite with and
//! without the cache); the two-handles half races every booking rule across
//! two connections to one database.

mod error;
pub mod fence;
mod records;
mod rows;
mod sql;
mod traits;

pub use error::{StoreError, StoreResult};
pub use records::*;
pub use sql::postgres::{CopiedTable, InstanceLock, InstanceRole, PgSettings};
pub use sql::SqlStore;
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
