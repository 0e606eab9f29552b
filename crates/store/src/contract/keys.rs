//! The keys that sign tokens: one current key, made once however many
//! instances start at once, rotated in one transaction.

use super::*;

/// Key `kid` with a seed of `byte`s, created at `created_ms`.
fn signing_key(kid: &str, byte: u8, created_ms: i64) -> SigningKeyRecord {
    // Zeros and 0xff among the bytes: the seed is stored as bytes, not text.
    let mut seed = vec![byte; 32];
    seed[0] = 0;
    seed[31] = 0xff;
    SigningKeyRecord {
        kid: kid.into(),
        seed,
        created_ms,
        retired_ms: None,
    }
}

fn retired(key: &SigningKeyRecord, at_ms: i64) -> SigningKeyRecord {
    SigningKeyRecord {
        retired_ms: Some(at_ms),
        ..key.clone()
    }
}

/// The stored keys: the current one (checked to come first, and to be the
/// only one not retired), then the retired ones by kid.
async fn stored_keys(store: &dyn Store) -> (SigningKeyRecord, Vec<SigningKeyRecord>) {
    let mut keys = store.signing_keys().await.expect("signing keys");
    assert!(!keys.is_empty(), "no signing key stored");
    let current = keys.remove(0);
    assert_eq!(current.retired_ms, None, "the current key comes first");
    assert!(
        keys.iter().all(|k| k.retired_ms.is_some()),
        "one current key: {keys:?}"
    );
    keys.sort_by(|a, b| a.kid.cmp(&b.kid));
    (current, keys)
}

pub async fn the_first_signing_key_ensured_stays_current(store: &dyn Store) {
    assert_eq!(store.signing_keys().await.expect("keys"), Vec::new());
    let first = signing_key("k1", 1, 1_000);
    assert_eq!(
        store.ensure_signing_key(&first).await.expect("ensured"),
        first
    );
    // Another key is not stored: the first one comes back.
    let second = signing_key("k2", 2, 2_000);
    assert_eq!(
        store.ensure_signing_key(&second).await.expect("ensured"),
        first
    );
    assert_eq!(store.signing_keys().await.expect("keys"), [first]);
}

pub async fn a_rotation_retires_the_current_key_and_drops_keys_retired_before_the_limit(
    store: &dyn Store,
) {
    let k1 = signing_key("k1", 1, 1_000);
    store.ensure_signing_key(&k1).await.expect("ensured");
    let k2 = signing_key("k2", 2, 2_000);
    store.rotate_signing_key(&k2, 0).await.expect("rotated");
    assert_eq!(
        stored_keys(store).await,
        (k2.clone(), vec![retired(&k1, 2_000)])
    );
    // Once rotated, ensuring a key changes nothing.
    assert_eq!(
        store
            .ensure_signing_key(&signing_key("k9", 9, 2_500))
            .await
            .expect("ensured"),
        k2
    );

    // k1 retired at 2000, before the limit: dropped; k2 retired now: kept.
    let k3 = signing_key("k3", 3, 3_000);
    store.rotate_signing_key(&k3, 2_001).await.expect("rotated");
    assert_eq!(
        stored_keys(store).await,
        (k3.clone(), vec![retired(&k2, 3_000)])
    );

    // A key retired at the limit itself is not before it.
    let k4 = signing_key("k4", 4, 4_000);
    store.rotate_signing_key(&k4, 3_000).await.expect("rotated");
    assert_eq!(
        stored_keys(store).await,
        (k4.clone(), vec![retired(&k2, 3_000), retired(&k3, 4_000)])
    );
    // Current first, then the retired ones.
    let listed: Vec<String> = store
        .signing_keys()
        .await
        .expect("keys")
        .into_iter()
        .map(|k| k.kid)
        .collect();
    assert_eq!(listed[0], "k4");
}

pub async fn a_rotation_to_a_stored_kid_is_refused_and_changes_nothing(store: &dyn Store) {
    let k1 = signing_key("k1", 1, 1_000);
    store.ensure_signing_key(&k1).await.expect("ensured");
    let k2 = signing_key("k2", 2, 2_000);
    store.rotate_signing_key(&k2, 0).await.expect("rotated");
    let before = store.signing_keys().await.expect("keys");
    // k1 again: in one transaction, so k2 is not retired either, and
    // nothing is dropped.
    let refused = store
        .rotate_signing_key(&signing_key("k1", 1, 3_000), i64::MAX)
        .await
        .expect_err("k1 is stored already");
    assert!(matches!(refused, StoreError::Conflict(_)), "{refused:?}");
    assert_eq!(store.signing_keys().await.expect("keys"), before);
}

pub async fn a_rotation_on_a_store_without_keys_makes_the_key_current(store: &dyn Store) {
    let k1 = signing_key("k1", 1, 1_000);
    store.rotate_signing_key(&k1, 0).await.expect("rotated");
    assert_eq!(
        store.signing_keys().await.expect("keys"),
        std::slice::from_ref(&k1)
    );
    assert_eq!(
        store
            .ensure_signing_key(&signing_key("k2", 2, 2_000))
            .await
            .expect("ensured"),
        k1
    );
}

/// Two instances starting at once on a new database, each with a key of
/// its own: one key becomes current, and both are told the same one.
pub async fn two_handles_never_both_make_a_current_signing_key(
    first: &dyn Store,
    second: &dyn Store,
) {
    let a = signing_key("ka", 1, 1_000);
    let b = signing_key("kb", 2, 1_000);
    let (from_first, from_second) =
        tokio::join!(first.ensure_signing_key(&a), second.ensure_signing_key(&b));
    let (from_first, from_second) = (from_first.expect("ensured"), from_second.expect("ensured"));
    assert_eq!(from_first, from_second);
    assert!(from_first == a || from_first == b, "{from_first:?}");
    assert_eq!(
        first.signing_keys().await.expect("keys"),
        std::slice::from_ref(&from_first)
    );
    assert_eq!(second.signing_keys().await.expect("keys"), [from_first]);
}

/// Two rotations at once (`svs keys rotate` beside an instance): both pass,
/// one after the other, and one key is current.
pub async fn two_handles_rotating_at_once_leave_one_current_key(
    first: &dyn Store,
    second: &dyn Store,
) {
    let k0 = signing_key("k0", 9, 500);
    first.ensure_signing_key(&k0).await.expect("ensured");
    let a = signing_key("ka", 1, 1_000);
    let b = signing_key("kb", 2, 1_000);
    let (ra, rb) = tokio::join!(
        first.rotate_signing_key(&a, 0),
        second.rotate_signing_key(&b, 0)
    );
    ra.expect("first rotation");
    rb.expect("second rotation");
    let (current, old) = stored_keys(second).await;
    assert!(current == a || current == b, "{current:?}");
    let kids: Vec<&str> = old.iter().map(|k| k.kid.as_str()).collect();
    let other = if current == a { "kb" } else { "ka" };
    let mut expected = vec!["k0", other];
    expected.sort();
    assert_eq!(kids, expected);
}
