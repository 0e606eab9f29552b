//! Users and their sessions: refresh-token rotation, the last administrator.

use super::*;

pub async fn revoking_refresh_tokens_touches_only_that_user(store: &dyn Store) {
    let (user, _, _) = volume_on_m1(store).await;
    let other = store
        .create_user(&NewUser {
            tenant: "t".into(),
            email: "other@example.com".into(),
            name: "o".into(),
            password_hash: "x".into(),
            is_admin: false,
            now_ms: 1,
        })
        .await
        .expect("second user");
    for (id, hash) in [(user.id, "a"), (user.id, "b"), (other.id, "c")] {
        store
            .add_refresh_token(&NewRefreshToken {
                user_id: id,
                token_hash: hash.into(),
                family: format!("family-{hash}"),
                issued_ms: 1,
                expires_ms: 9,
            })
            .await
            .expect("token stored");
    }
    assert_eq!(
        store.revoke_refresh_tokens(user.id).await.expect("revoke"),
        2
    );
    assert!(
        store
            .refresh_token("a")
            .await
            .expect("read")
            .expect("a")
            .revoked
    );
    let other_token = store.refresh_token("c").await.expect("read").expect("c");
    assert!(!other_token.revoked, "another user's token stays valid");
    assert!(store.refresh_token("zzz").await.expect("read").is_none());
}

async fn add_token(store: &dyn Store, user_id: i64, hash: &str, family: &str, expires_ms: i64) {
    store
        .add_refresh_token(&NewRefreshToken {
            user_id,
            token_hash: hash.into(),
            family: family.into(),
            issued_ms: 1,
            expires_ms,
        })
        .await
        .expect("token stored");
}

async fn token(store: &dyn Store, hash: &str) -> Option<RefreshTokenRecord> {
    store.refresh_token(hash).await.expect("read")
}

pub async fn rotating_a_refresh_token_retires_it_and_reuse_revokes_its_family(store: &dyn Store) {
    let (user, _, _) = volume_on_m1(store).await;
    add_token(store, user.id, "a1", "fa", 1000).await;
    add_token(store, user.id, "b1", "fb", 1000).await;
    let rotated = store
        .rotate_refresh_token("a1", "a2", 10)
        .await
        .expect("rotate");
    assert_eq!(rotated, RefreshRotation::Rotated { user_id: user.id });
    let a1 = token(store, "a1").await.expect("a1 kept");
    assert!(a1.retired && !a1.revoked);
    let a2 = token(store, "a2").await.expect("a2 added");
    assert_eq!(
        (
            a2.user_id,
            a2.family.as_str(),
            a2.expires_ms,
            a2.retired,
            a2.revoked
        ),
        (user.id, "fa", 1000, false, false),
        "the new token inherits the family and its expiry"
    );
    assert_eq!(
        store
            .rotate_refresh_token("a2", "a3", 20)
            .await
            .expect("rotate"),
        RefreshRotation::Rotated { user_id: user.id }
    );
    // a1 again: reuse. The family (a1, a2, a3) is revoked, not the other sign-in.
    assert_eq!(
        store
            .rotate_refresh_token("a1", "a4", 30)
            .await
            .expect("reuse"),
        RefreshRotation::Reused {
            user_id: user.id,
            revoked: 3
        }
    );
    assert!(token(store, "a4").await.is_none(), "nothing was added");
    assert!(token(store, "a3").await.expect("a3").revoked);
    assert!(!token(store, "b1").await.expect("b1").revoked);
    for hash in ["a3", "a1", "unknown"] {
        assert_eq!(
            store
                .rotate_refresh_token(hash, "x", 40)
                .await
                .expect("rotate"),
            RefreshRotation::Invalid,
            "{hash}"
        );
    }
    // Expired: invalid, and nothing changes.
    assert_eq!(
        store
            .rotate_refresh_token("b1", "b2", 1000)
            .await
            .expect("rotate"),
        RefreshRotation::Invalid
    );
    assert!(!token(store, "b1").await.expect("b1").retired);
    assert_eq!(store.revoke_refresh_family("fb").await.expect("revoke"), 1);
    assert!(token(store, "b1").await.expect("b1").revoked);
}

pub async fn concurrent_rotations_of_one_token_let_only_one_through(store: &dyn Store) {
    let (user, _, _) = volume_on_m1(store).await;
    add_token(store, user.id, "t", "f", 1000).await;
    let (first, second) = tokio::join!(
        store.rotate_refresh_token("t", "n1", 10),
        store.rotate_refresh_token("t", "n2", 10)
    );
    let mut outcomes = [first.expect("first"), second.expect("second")];
    outcomes.sort_by_key(|o| matches!(o, RefreshRotation::Reused { .. }));
    assert_eq!(outcomes[0], RefreshRotation::Rotated { user_id: user.id });
    assert!(
        matches!(outcomes[1], RefreshRotation::Reused { .. }),
        "{outcomes:?}"
    );
}

pub async fn purging_removes_expired_and_revoked_refresh_tokens_only(store: &dyn Store) {
    let (user, _, _) = volume_on_m1(store).await;
    add_token(store, user.id, "live", "f1", 1000).await;
    add_token(store, user.id, "expired", "f2", 100).await;
    add_token(store, user.id, "revoked", "f3", 1000).await;
    add_token(store, user.id, "retired", "f4", 1000).await;
    store.revoke_refresh_family("f3").await.expect("revoke");
    store
        .rotate_refresh_token("retired", "next", 50)
        .await
        .expect("rotate");
    assert_eq!(store.purge_refresh_tokens(100).await.expect("purge"), 2);
    for (hash, kept) in [
        ("live", true),
        ("expired", false),
        ("revoked", false),
        ("retired", true),
        ("next", true),
    ] {
        assert_eq!(token(store, hash).await.is_some(), kept, "{hash}");
    }
}

/// A change of the user's administrator flag alone.
fn set_admin(is_admin: bool) -> UserChange {
    UserChange {
        is_admin: Some(is_admin),
        ..Default::default()
    }
}

/// A change of the user's disabled flag alone.
fn set_disabled(disabled: bool) -> UserChange {
    UserChange {
        disabled: Some(disabled),
        ..Default::default()
    }
}

pub async fn users_are_listed_changed_and_ended_sessions_raise_the_generation(store: &dyn Store) {
    let admin = add_user(store, "admin@example.com", true).await;
    let user = add_user(store, "user@example.com", false).await;
    assert!(!user.disabled);
    assert_eq!((user.token_generation, user.created_ms), (0, 5));
    let listed = store.list_users().await.expect("list");
    let emails: Vec<&str> = listed.iter().map(|u| u.email.as_str()).collect();
    assert_eq!(emails, ["admin@example.com", "user@example.com"]);
    add_token(store, user.id, "u1", "f-u", 99).await;
    add_token(store, admin.id, "a1", "f-a", 99).await;

    // A change without end_sessions leaves tokens and generation alone.
    let promoted = store
        .update_user(user.id, &set_admin(true))
        .await
        .expect("promoted");
    assert!(promoted.is_admin && !promoted.disabled);
    assert_eq!(promoted.token_generation, 0);
    assert!(!token(store, "u1").await.expect("u1").revoked);

    let disabled = store
        .update_user(
            user.id,
            &UserChange {
                disabled: Some(true),
                password_hash: Some("new-hash".into()),
                end_sessions: true,
                ..Default::default()
            },
        )
        .await
        .expect("disabled");
    assert!(disabled.disabled && disabled.is_admin);
    assert_eq!(disabled.token_generation, 1);
    assert_eq!(disabled.password_hash, "new-hash");
    assert!(token(store, "u1").await.expect("u1").revoked);
    assert!(
        !token(store, "a1").await.expect("a1").revoked,
        "another user's tokens stay"
    );
    let read = store
        .user_by_id(user.id)
        .await
        .expect("read")
        .expect("user");
    assert!(read.disabled);
    assert_eq!(read.token_generation, 1);
    assert!(matches!(
        store.update_user(9999, &UserChange::default()).await,
        Err(StoreError::NotFound)
    ));
}

pub async fn the_last_enabled_administrator_cannot_be_disabled_demoted_or_deleted(
    store: &dyn Store,
) {
    let admin = add_user(store, "admin@example.com", true).await;
    let other = add_user(store, "other@example.com", true).await;
    add_token(store, admin.id, "a1", "f-a", 99).await;
    // Two admins: one may go.
    store
        .update_user(other.id, &set_disabled(true))
        .await
        .expect("one of two disabled");
    let last = |r: StoreResult<User>| matches!(r, Err(StoreError::Conflict(m)) if m == LAST_ADMIN);
    assert!(last(
        store
            .update_user(
                admin.id,
                &UserChange {
                    disabled: Some(true),
                    end_sessions: true,
                    ..Default::default()
                },
            )
            .await
    ));
    assert!(last(store.update_user(admin.id, &set_admin(false),).await));
    assert!(matches!(
        store.delete_user(admin.id).await,
        Err(StoreError::Conflict(m)) if m == LAST_ADMIN
    ));
    // Nothing changed by the refusals.
    let read = store
        .user_by_id(admin.id)
        .await
        .expect("read")
        .expect("admin");
    assert!(read.is_admin && !read.disabled);
    assert_eq!(read.token_generation, 0);
    assert!(!token(store, "a1").await.expect("a1").revoked);
    // The disabled one comes back; then the first may be demoted.
    store
        .update_user(other.id, &set_disabled(false))
        .await
        .expect("enabled");
    store
        .update_user(admin.id, &set_admin(false))
        .await
        .expect("demoted");
}

pub async fn deleting_a_user_removes_its_tokens_and_keeps_its_jobs(store: &dyn Store) {
    let (owner, _, job_id) = volume_on_m1(store).await;
    let user = add_user(store, "user@example.com", false).await;
    add_token(store, user.id, "u1", "f-u", 99).await;
    store.delete_user(user.id).await.expect("deleted");
    assert!(store.user_by_id(user.id).await.expect("read").is_none());
    assert!(store
        .user_by_email("user@example.com")
        .await
        .expect("read")
        .is_none());
    assert!(token(store, "u1").await.is_none());
    assert!(matches!(
        store.delete_user(user.id).await,
        Err(StoreError::NotFound)
    ));
    // The volume's owner goes too; its job keeps who started it.
    let admin = add_user(store, "admin@example.com", true).await;
    store.delete_user(owner.id).await.expect("owner deleted");
    let job = stored_job(store, &admin, job_id).await;
    assert_eq!(job.useremail, "u@example.com");
    // The e-mail can be used again.
    add_user(store, "user@example.com", false).await;
}
