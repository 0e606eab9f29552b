//! Named leases (`LeaseStore`): one owner at a time, an epoch that grows
//! whenever the lease changes hands.

use super::*;

const LEASE: &str = "reconcilers";

/// `owner`'s terms at `now_ms` for a lease of 100 ms.
fn lease_terms(owner: &str, now_ms: i64) -> LeaseTerms<'_> {
    LeaseTerms {
        owner,
        now_ms,
        ttl_ms: 100,
    }
}

async fn acquire(store: &dyn Store, owner: &str, now_ms: i64) -> Option<i64> {
    store
        .acquire_lease(LEASE, &lease_terms(owner, now_ms))
        .await
        .expect("acquire")
}

pub async fn a_free_lease_is_granted_and_refused_to_others_while_it_runs(store: &dyn Store) {
    let epoch = acquire(store, "a", 1000).await.expect("a free lease");
    // Held until 1100, that instant included.
    assert_eq!(acquire(store, "b", 1001).await, None);
    assert_eq!(acquire(store, "b", 1100).await, None);
    // Another name is another lease.
    assert!(store
        .acquire_lease("other", &lease_terms("b", 1050))
        .await
        .expect("acquire")
        .is_some());
    assert_eq!(acquire(store, "a", 1050).await, Some(epoch), "still a's");
}

pub async fn an_expired_lease_goes_to_another_owner_with_a_higher_epoch(store: &dyn Store) {
    let first = acquire(store, "a", 1000).await.expect("a free lease");
    let second = acquire(store, "b", 1101).await.expect("a's lease ran out");
    assert!(second > first, "{second} > {first}");
    // Now b's until 1201: a, late, does not get it back.
    assert_eq!(acquire(store, "a", 1102).await, None);
    let third = acquire(store, "a", 1202).await.expect("b's lease ran out");
    assert!(third > second, "{third} > {second}");
}

pub async fn renewing_a_lease_keeps_its_epoch_and_extends_it(store: &dyn Store) {
    let epoch = acquire(store, "a", 1000).await.expect("a free lease");
    assert_eq!(acquire(store, "a", 1080).await, Some(epoch), "renewed");
    // Held until 1180 now, no longer until 1100.
    assert_eq!(acquire(store, "b", 1150).await, None);
    assert_eq!(acquire(store, "b", 1180).await, None);
    assert!(acquire(store, "b", 1181).await.expect("ran out") > epoch);
}

pub async fn a_lease_released_by_its_owner_is_free_at_once(store: &dyn Store) {
    let epoch = acquire(store, "a", 1000).await.expect("a free lease");
    store.release_lease(LEASE, "a").await.expect("release");
    let taken = acquire(store, "b", 1001).await.expect("free at once");
    assert!(taken > epoch, "{taken} > {epoch}");
    assert_eq!(acquire(store, "a", 1002).await, None, "b's now");
    // Releasing a lease nobody took is nothing.
    store.release_lease("never", "a").await.expect("release");
}

pub async fn a_release_by_another_owner_changes_nothing(store: &dyn Store) {
    let epoch = acquire(store, "a", 1000).await.expect("a free lease");
    store.release_lease(LEASE, "b").await.expect("release");
    assert_eq!(acquire(store, "b", 1001).await, None, "still a's");
    assert_eq!(acquire(store, "a", 1050).await, Some(epoch), "a renews");
    assert_eq!(acquire(store, "b", 1149).await, None, "a's until 1150");
}

/// Two instances asking for one free lease at once: exactly one gets it.
pub async fn two_handles_never_both_acquire_one_free_lease(first: &dyn Store, second: &dyn Store) {
    let (terms_a, terms_b) = (lease_terms("a", 1000), lease_terms("b", 1000));
    let (a, b) = tokio::join!(
        first.acquire_lease(LEASE, &terms_a),
        second.acquire_lease(LEASE, &terms_b)
    );
    let (a, b) = (a.expect("first acquires"), b.expect("second acquires"));
    assert!(
        a.is_some() != b.is_some(),
        "exactly one of the two is granted: {a:?}, {b:?}"
    );
    // The loser still sees the winner's lease.
    let (winner, loser) = if a.is_some() { ("a", "b") } else { ("b", "a") };
    assert_eq!(acquire(first, loser, 1050).await, None);
    assert_eq!(acquire(second, winner, 1050).await, a.or(b));
}
