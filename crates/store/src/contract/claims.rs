//! Job claims and the fencing of a job's writes on its lease.

use super::*;
use crate::fence::fenced;

fn terms(owner: &str, now_ms: i64) -> LeaseTerms<'_> {
    LeaseTerms {
        owner,
        now_ms,
        ttl_ms: 100,
    }
}

/// A volume with its Pending create job; returns the job id.
async fn pending_job(store: &dyn Store, id: &str) -> i64 {
    let (user, policy) = match store.user_by_email("u@example.com").await.expect("user") {
        Some(user) => {
            let policy = store
                .list_policies(user.tenant_id)
                .await
                .expect("policies")
                .remove(0);
            (user, policy)
        }
        None => user_and_policy(store).await,
    };
    add_volume(store, &user, policy.id, id, id, 1).await
}

pub async fn a_job_is_claimed_by_one_owner_until_its_lease_runs_out(store: &dyn Store) {
    let job = pending_job(store, "vol-1").await;
    let a = store
        .claim_jobs(&terms("a", 1000), 10)
        .await
        .expect("claim");
    assert_eq!(
        a,
        vec![JobLease {
            job_id: job,
            owner: "a".into(),
            epoch: 1,
            taken_over_from: None,
        }]
    );
    // Held until 1100: nobody else gets it, by either call.
    assert!(store
        .claim_jobs(&terms("b", 1050), 10)
        .await
        .expect("claim")
        .is_empty());
    assert_eq!(
        store
            .claim_job(job, &terms("b", 1100))
            .await
            .expect("claim"),
        None
    );
    // Renewed by its owner: held until 1200.
    assert!(store
        .renew_job_leases(&a, &terms("a", 1100))
        .await
        .expect("renew")
        .is_empty());
    assert!(store
        .claim_jobs(&terms("b", 1150), 10)
        .await
        .expect("claim")
        .is_empty());
    // Ran out: the next claim takes it with the next epoch, and the first
    // owner learns it lost it.
    let b = store
        .claim_job(job, &terms("b", 1201))
        .await
        .expect("claim");
    assert_eq!(
        b.as_ref().map(|l| (l.epoch, l.taken_over_from.as_deref())),
        Some((2, Some("a")))
    );
    assert_eq!(
        store
            .renew_job_leases(&a, &terms("a", 1202))
            .await
            .expect("renew"),
        vec![job]
    );
    let b = b.into_iter().collect::<Vec<_>>();
    assert!(store
        .renew_job_leases(&b, &terms("b", 1202))
        .await
        .expect("renew")
        .is_empty());
}

pub async fn a_write_under_a_taken_over_lease_is_refused_and_changes_nothing(store: &dyn Store) {
    let job = pending_job(store, "vol-1").await;
    let first = store
        .claim_job(job, &terms("a", 1000))
        .await
        .expect("claim")
        .expect("lease");
    // Still held: its writes pass.
    fenced(first.clone(), store.set_job_progress(job, 10, "Running"))
        .await
        .expect("progress");
    let second = store
        .claim_job(job, &terms("b", 2000))
        .await
        .expect("claim")
        .expect("lease");
    let refused = fenced(first.clone(), store.finish_job(job, &end(JobState::Done))).await;
    assert!(
        matches!(refused, Err(StoreError::Fenced { job_id, epoch: 1 }) if job_id == job),
        "{refused:?}"
    );
    let progress = fenced(first, store.set_job_progress(job, 50, "Running")).await;
    assert!(
        matches!(progress, Err(StoreError::Fenced { .. })),
        "{progress:?}"
    );
    let stored = store.job_by_id(job).await.expect("job").expect("exists");
    assert!(!stored.state.is_finished(), "{stored:?}");
    assert_eq!(stored.progress, 10);
    // The new owner's writes pass.
    fenced(second, store.finish_job(job, &end(JobState::Done)))
        .await
        .expect("finish");
    let stored = store.job_by_id(job).await.expect("job").expect("exists");
    assert_eq!(stored.state, JobState::Done);
}

pub async fn a_released_job_is_claimable_at_once_and_a_finished_one_never(store: &dyn Store) {
    let first = pending_job(store, "vol-1").await;
    let second = pending_job(store, "vol-2").await;
    let leases = store.claim_jobs(&terms("a", 1000), 1).await.expect("claim");
    assert_eq!(
        leases.iter().map(|l| l.job_id).collect::<Vec<_>>(),
        vec![first]
    );
    store.release_job_lease(&leases[0]).await.expect("release");
    let taken = store
        .claim_jobs(&terms("b", 1001), 10)
        .await
        .expect("claim");
    // Released: nobody held it, so nothing was taken over.
    assert_eq!(
        taken
            .iter()
            .map(|l| (l.job_id, l.epoch, l.taken_over_from.clone()))
            .collect::<Vec<_>>(),
        vec![(first, 2, None), (second, 1, None)]
    );
    store
        .finish_job(first, &end(JobState::Done))
        .await
        .expect("finish");
    // A finished job is never claimed again, and its lease is lost.
    assert_eq!(
        store
            .claim_job(first, &terms("c", 5000))
            .await
            .expect("claim"),
        None
    );
    assert_eq!(
        store
            .renew_job_leases(&taken, &terms("b", 1002))
            .await
            .expect("renew"),
        vec![first]
    );
    // The only process of a database ends every lease at start.
    assert_eq!(store.end_all_job_leases().await.expect("end"), 2);
    let again = store
        .claim_jobs(&terms("d", 1003), 10)
        .await
        .expect("claim");
    assert_eq!(
        again.iter().map(|l| l.job_id).collect::<Vec<_>>(),
        vec![second]
    );
}

pub async fn two_handles_never_both_claim_one_job(first: &dyn Store, second: &dyn Store) {
    let mut jobs = Vec::new();
    for i in 0..8 {
        jobs.push(pending_job(first, &format!("vol-{i}")).await);
    }
    let mut claimed = Vec::new();
    let (a_terms, b_terms) = (terms("a", 1000), terms("b", 1000));
    for _ in 0..8 {
        let (a, b) = tokio::join!(
            first.claim_jobs(&a_terms, 1),
            second.claim_jobs(&b_terms, 1)
        );
        claimed.extend(a.expect("first"));
        claimed.extend(b.expect("second"));
    }
    let mut ids: Vec<i64> = claimed.iter().map(|l| l.job_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, jobs, "every job claimed exactly once");
}
