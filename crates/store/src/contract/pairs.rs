//! Every booking rule raced across two handles on one database, as two
//! processes (two `svs serve` instances) would race it. Each rule must hold
//! in the backend's transactions, since neither handle sees the other's
//! memory: exactly one of two conflicting writes passes.

use super::*;

/// The one error of two results of which exactly one must pass.
fn the_refusal<T: std::fmt::Debug>(a: StoreResult<T>, b: StoreResult<T>) -> StoreError {
    match (a, b) {
        (Ok(_), Err(e)) | (Err(e), Ok(_)) => e,
        other => panic!("exactly one of the two writes must pass: {other:?}"),
    }
}

fn usage_of(all: &[MediumUsage], id: &str) -> (u64, u64) {
    let (allocated, reserved, _) = usage(all, id);
    (allocated, reserved)
}

pub async fn two_handles_never_both_place_a_volume_in_the_same_space(
    first: &dyn Store,
    second: &dyn Store,
) {
    let (user, _, _) = volume_on_m1(first).await;
    let policy = policy_p(first, &user).await;
    add_volume(first, &user, policy.id, "vol-a", "a", 15).await;
    add_volume(first, &user, policy.id, "vol-b", "b", 15).await;
    let stale = media_states(second).await;
    let request = PlacementRequest {
        size: 15,
        resiliency: Resiliency::default(),
        zone: None,
    };
    let placement = place_volume(&stale, &request).expect("placement");
    let (a, b) = tokio::join!(
        first.place_slices("vol-a", &placement),
        second.place_slices("vol-b", &placement)
    );
    let refused = the_refusal(a, b);
    assert!(
        matches!(&refused, StoreError::InsufficientSpace { medium } if medium == "m2"),
        "{refused:?}"
    );
    let media = second.media_usage().await.expect("usage");
    assert_eq!(usage_of(&media, "m2"), (15, 0));
}

pub async fn two_handles_never_both_book_a_resize_in_the_same_space(
    first: &dyn Store,
    second: &dyn Store,
) {
    let (user, volume, slice, grow_on_m2) = vol_1_on_m1_and_vol_2_on_m2(first).await;
    // Moving vol-1's slice to m2 (12 GiB) and growing vol-2 there (+8 GiB)
    // each fit in m2's 15 free GiB; both do not.
    let move_job = start_resize(first, &user, &volume, true).await;
    let grow_job = start_resize(second, &user, "vol-2", false).await;
    let moving = move_plan(slice);
    let (a, b) = tokio::join!(
        first.save_resize_plan(move_job, &moving, Some("found")),
        second.save_resize_plan(grow_job, &grow_on_m2, Some("found"))
    );
    let refused = the_refusal(a, b);
    assert!(
        matches!(&refused, StoreError::InsufficientSpace { medium } if medium == "m2"),
        "{refused:?}"
    );
    let media = second.media_usage().await.expect("usage");
    let (allocated, reserved) = usage_of(&media, "m2");
    assert_eq!(allocated, 5);
    assert!(
        reserved == 12 || reserved == 8,
        "one plan booked: {reserved}"
    );
}

pub async fn two_handles_never_both_create_a_volume_of_one_name(
    first: &dyn Store,
    second: &dyn Store,
) {
    let (user, policy) = user_and_policy(first).await;
    let create = |store: &'static str| {
        testing::new_volume(&user, policy.id, &format!("vol-{store}"), "same", 1)
    };
    let (a, b) = (create("a"), create("b"));
    let job = new_job(&user, create_spec("same", 1), "same");
    let (a, b) = tokio::join!(
        first.create_volume(&a, &job),
        second.create_volume(&b, &job)
    );
    let refused = the_refusal(a, b);
    assert!(matches!(refused, StoreError::Conflict(_)), "{refused:?}");
    assert_eq!(
        second
            .list_volumes(user.tenant_id, None)
            .await
            .expect("list")
            .len(),
        1
    );
}

pub async fn two_handles_never_both_start_a_job_on_one_volume(
    first: &dyn Store,
    second: &dyn Store,
) {
    let (user, volume, _) = volume_on_m1(first).await;
    let job = new_job(&user, resize_spec(true), &volume);
    let (a, b) = tokio::join!(
        first.start_volume_job(&volume, VolumeState::Resizing, &job),
        second.start_volume_job(&volume, VolumeState::Resizing, &job)
    );
    let refused = the_refusal(a, b);
    assert!(matches!(refused, StoreError::Conflict(_)), "{refused:?}");
}

pub async fn two_handles_never_both_rotate_one_refresh_token(
    first: &dyn Store,
    second: &dyn Store,
) {
    let (user, _, _) = volume_on_m1(first).await;
    first
        .add_refresh_token(&NewRefreshToken {
            user_id: user.id,
            token_hash: "t".into(),
            family: "f".into(),
            issued_ms: 1,
            expires_ms: 1000,
        })
        .await
        .expect("token");
    let (a, b) = tokio::join!(
        first.rotate_refresh_token("t", "n1", 10),
        second.rotate_refresh_token("t", "n2", 10)
    );
    let mut outcomes = [a.expect("first"), b.expect("second")];
    outcomes.sort_by_key(|o| matches!(o, RefreshRotation::Reused { .. }));
    assert_eq!(outcomes[0], RefreshRotation::Rotated { user_id: user.id });
    assert!(
        matches!(outcomes[1], RefreshRotation::Reused { .. }),
        "{outcomes:?}"
    );
}

pub async fn two_handles_never_both_disable_one_of_the_last_two_administrators(
    first: &dyn Store,
    second: &dyn Store,
) {
    let one = add_user(first, "one@example.com", true).await;
    let two = add_user(first, "two@example.com", true).await;
    let disable = UserChange {
        disabled: Some(true),
        ..Default::default()
    };
    let (a, b) = tokio::join!(
        first.update_user(one.id, &disable),
        second.update_user(two.id, &disable)
    );
    let refused = the_refusal(a, b);
    assert!(
        matches!(&refused, StoreError::Conflict(m) if m == LAST_ADMIN),
        "{refused:?}"
    );
    let enabled_admins = second
        .list_users()
        .await
        .expect("users")
        .into_iter()
        .filter(|u| u.is_admin && !u.disabled)
        .count();
    assert_eq!(enabled_admins, 1);
}

pub async fn two_handles_never_both_issue_a_live_credential_for_one_node(
    first: &dyn Store,
    second: &dyn Store,
) {
    first.create_node(&node("host-7")).await.expect("node");
    let credential = |id: &str| NodeCredential {
        node: "host-7".into(),
        credential_id: id.into(),
        secret_hash: format!("hash-{id}"),
        created_ms: 5,
        role: CredentialRole::Agent,
    };
    let (c1, c2) = (credential("c1"), credential("c2"));
    let (a, b) = tokio::join!(
        first.set_node_credential(&c1),
        second.set_node_credential(&c2)
    );
    a.expect("first");
    b.expect("second");
    // Whichever came last replaced the other: one live credential.
    let live = [
        second.node_credential("c1").await.expect("read"),
        second.node_credential("c2").await.expect("read"),
    ];
    assert_eq!(live.iter().flatten().count(), 1, "{live:?}");
}
