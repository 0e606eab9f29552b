//! Fencing a job's writes on its lease.
//!
//! The job runner runs each job inside [`fenced`] with the lease it claimed.
//! Every write transaction a store opens while that scope is current first
//! checks, under the store's write serialization (PostgreSQL's write lock,
//! SQLite's single writer), that the job's lease still has this owner and
//! epoch; if another instance claimed the job since, the write is refused
//! with [`StoreError::Fenced`] and changes nothing. So an instance that lost
//! its lease (it was paused past the lease, or cut off from the database)
//! can never write for that job again, whatever it was doing.
//!
//! A task-local scope rather than an argument on every write: every write
//! a job makes, through any of the store's traits, is fenced without the
//! job's code passing its lease along.

use crate::records::JobLease;
use crate::StoreError;
use std::future::Future;

tokio::task_local! {
    static FENCE: JobLease;
}

/// Runs `work` with every store write in it fenced on `lease`.
pub async fn fenced<F: Future>(lease: JobLease, work: F) -> F::Output {
    FENCE.scope(lease, work).await
}

/// The lease the current task's writes are fenced on, if any.
pub(crate) fn current() -> Option<JobLease> {
    FENCE.try_with(Clone::clone).ok()
}

/// The refusal of a write whose lease was taken over.
pub(crate) fn taken_over(lease: &JobLease) -> StoreError {
    StoreError::Fenced {
        job_id: lease.job_id,
        epoch: lease.epoch,
    }
}
