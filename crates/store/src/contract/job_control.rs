//! Steering a job: cancels and commits, the jobs a cancel was asked for,
//! deleting ended jobs, undo steps and the booking a switched slice keeps
//! on its source until its job ends.

use super::*;

/// The tenant's job after asking for its cancel at `now_ms`.
async fn cancel(store: &dyn Store, user: &User, id: i64, now_ms: i64) -> Job {
    store
        .request_job_cancel(user.tenant_id, id, now_ms)
        .await
        .expect("cancel")
        .expect("job")
}

/// `volume_on_m1` with a Running resize job (data movement allowed) whose
/// plan moves the volume's slice from m1 to m2; returns the user, the
/// volume, its slice and the job.
async fn moving_job(store: &dyn Store) -> (User, String, i64, i64) {
    let (user, volume, _) = volume_on_m1(store).await;
    let slice_id = first_slice_id(store, &volume).await;
    let job_id = start_resize(store, &user, &volume, true).await;
    store.set_job_running(job_id, 4).await.expect("running");
    store
        .save_resize_plan(job_id, &move_plan(slice_id), None)
        .await
        .expect("plan");
    (user, volume, slice_id, job_id)
}

/// The job's one forward step, switched: the slice now lives on m2.
async fn switch_forward(store: &dyn Store, job_id: i64) -> ResizeStep {
    let steps = store.resize_steps(job_id).await.expect("steps");
    assert_eq!(steps.len(), 1);
    assert!(!steps[0].undo, "a plan's step moves forward");
    store.switch_slice(&steps[0], &[]).await.expect("switch");
    steps[0].clone()
}

/// A cancel's move of the slice back from m2 to m1, at its size of 10 GiB.
fn move_back(slice_id: i64) -> SliceMove {
    SliceMove {
        slice_id,
        from_medium: "m2".into(),
        to_medium: "m1".into(),
        old_size: 10,
        new_size: 10,
    }
}

/// The ids among `ids` with a cancel asked for, as `job_controls` says.
async fn cancels(store: &dyn Store, ids: &[i64]) -> Vec<i64> {
    store
        .job_controls(ids)
        .await
        .expect("read")
        .into_iter()
        .filter(|c| c.cancel_requested)
        .map(|c| c.id)
        .collect()
}

pub async fn job_control_a_cancel_asked_for_first_wins_over_a_later_commit(store: &dyn Store) {
    let (user, volume, _) = volume_on_m1(store).await;
    let policy = policy_p(store, &user).await;
    let running = start_resize(store, &user, &volume, false).await;
    store.set_job_running(running, 4).await.expect("running");
    let pending = add_volume(store, &user, policy.id, "vol-2", "v2", 5).await;
    for (id, state) in [(running, JobState::Running), (pending, JobState::Pending)] {
        let job = cancel(store, &user, id, 10).await;
        assert_eq!(
            (job.id, job.state, job.cancel_requested, job.committed),
            (id, state, true, false)
        );
        let again = cancel(store, &user, id, 20).await;
        assert_eq!(
            (again.cancel_requested, again.committed),
            (true, false),
            "asking twice keeps the cancel"
        );
        assert!(
            !store.commit_job(id).await.expect("commit"),
            "the cancel came first"
        );
        let stored = stored_job(store, &user, id).await;
        assert_eq!(
            (stored.state, stored.cancel_requested, stored.committed),
            (state, true, false)
        );
    }
}

pub async fn job_control_a_commit_first_refuses_a_later_cancel(store: &dyn Store) {
    let (user, volume, _) = volume_on_m1(store).await;
    let job_id = start_resize(store, &user, &volume, false).await;
    store.set_job_running(job_id, 4).await.expect("running");
    assert!(store.commit_job(job_id).await.expect("commit"));
    let job = cancel(store, &user, job_id, 10).await;
    assert_eq!(
        (job.state, job.cancel_requested, job.committed),
        (JobState::Running, false, true),
        "a committed job refuses the cancel"
    );
    assert!(
        store.commit_job(job_id).await.expect("commit again"),
        "committed before"
    );
    let stored = stored_job(store, &user, job_id).await;
    assert_eq!((stored.cancel_requested, stored.committed), (false, true));
    assert!(cancels(store, &[job_id]).await.is_empty());
}

pub async fn job_control_a_cancel_of_another_tenant_s_or_an_ended_job_changes_nothing(
    store: &dyn Store,
) {
    let (user, volume, create_job) = volume_on_m1(store).await;
    let (other, _) = testing::user_and_policy_in(store, "t2", "o@example.com", true).await;
    let job_id = start_resize(store, &user, &volume, false).await;

    assert!(store
        .request_job_cancel(other.tenant_id, job_id, 10)
        .await
        .expect("cancel")
        .is_none());
    assert!(store
        .request_job_cancel(user.tenant_id, job_id + 1000, 10)
        .await
        .expect("cancel")
        .is_none());
    let stored = stored_job(store, &user, job_id).await;
    assert_eq!(
        (stored.state, stored.cancel_requested, stored.committed),
        (JobState::Pending, false, false)
    );
    assert!(cancels(store, &[job_id]).await.is_empty());

    // The volume's create job ended Done: it is returned as it is.
    let ended = cancel(store, &user, create_job, 10).await;
    assert_eq!(
        (
            ended.id,
            ended.state,
            ended.cancel_requested,
            ended.committed
        ),
        (create_job, JobState::Done, false, false)
    );
    finish(store, job_id).await;
    let ended = cancel(store, &user, job_id, 11).await;
    assert_eq!(
        (ended.state, ended.cancel_requested),
        (JobState::Done, false)
    );
    assert!(cancels(store, &[create_job, job_id]).await.is_empty());
}

pub async fn job_control_the_jobs_asked_about_with_a_cancel_are_listed(store: &dyn Store) {
    let (user, volume, create_job) = volume_on_m1(store).await;
    let policy = policy_p(store, &user).await;
    let resize = start_resize(store, &user, &volume, false).await;
    let second = add_volume(store, &user, policy.id, "vol-2", "v2", 5).await;
    let third = add_volume(store, &user, policy.id, "vol-3", "v3", 5).await;
    cancel(store, &user, resize, 10).await;
    cancel(store, &user, third, 10).await;

    let asked = |ids: Vec<i64>| async move {
        let mut found = cancels(store, &ids).await;
        found.sort_unstable();
        found
    };
    assert_eq!(asked(vec![]).await, Vec::<i64>::new());
    // Jobs are numbered as they are made: the resize before the third.
    assert_eq!(
        asked(vec![third + 1000, third, second, resize, create_job]).await,
        vec![resize, third]
    );
    assert_eq!(asked(vec![third]).await, vec![third]);
    assert_eq!(
        asked(vec![second, create_job]).await,
        Vec::<i64>::new(),
        "only the ids asked about that have a cancel"
    );
}

pub async fn job_control_only_the_tenant_s_ended_job_is_deleted_with_its_steps(store: &dyn Store) {
    let (user, _, _, job_id) = moving_job(store).await;
    let (other, _) = testing::user_and_policy_in(store, "t2", "o@example.com", true).await;

    assert!(
        !store
            .delete_job(user.tenant_id, job_id)
            .await
            .expect("delete"),
        "a running job stays"
    );
    assert_eq!(
        stored_job(store, &user, job_id).await.state,
        JobState::Running
    );
    assert_eq!(store.resize_steps(job_id).await.expect("steps").len(), 1);
    let media = store.media_usage().await.expect("usage");
    assert_eq!(usage(&media, "m2"), (0, 12, 8), "its booking stays");

    store
        .finish_job(job_id, &JobEnd::cancelled("undone".into(), 5))
        .await
        .expect("finish");
    assert!(
        !store
            .delete_job(other.tenant_id, job_id)
            .await
            .expect("delete"),
        "another tenant's job stays"
    );
    assert!(!store
        .delete_job(user.tenant_id, job_id + 1000)
        .await
        .expect("delete"));
    assert_eq!(
        stored_job(store, &user, job_id).await.state,
        JobState::Error
    );

    assert!(store
        .delete_job(user.tenant_id, job_id)
        .await
        .expect("delete"));
    assert!(store
        .get_job(user.tenant_id, job_id)
        .await
        .expect("read")
        .is_none());
    assert!(store.job_by_id(job_id).await.expect("read").is_none());
    assert!(store.resize_steps(job_id).await.expect("steps").is_empty());
    assert!(
        !store
            .delete_job(user.tenant_id, job_id)
            .await
            .expect("delete"),
        "gone already"
    );
}

pub async fn job_control_a_cancel_s_undo_steps_are_recorded_once(store: &dyn Store) {
    let (_, _, slice_id, job_id) = moving_job(store).await;
    let forward = switch_forward(store, job_id).await;
    store
        .save_undo_steps(job_id, &[move_back(slice_id)])
        .await
        .expect("undo steps");
    // Saving again (a resumed cancel) changes nothing, whatever it is given.
    let other = SliceMove {
        new_size: 12,
        ..move_back(slice_id)
    };
    store
        .save_undo_steps(job_id, &[other.clone(), other])
        .await
        .expect("undo steps again");

    let steps = store.resize_steps(job_id).await.expect("steps");
    assert_eq!(steps.len(), 2, "{steps:#?}");
    assert_eq!(
        (steps[0].id, steps[0].undo, steps[0].state),
        (forward.id, false, StepState::Switched)
    );
    let undo = &steps[1];
    assert_eq!(
        (
            undo.job_id,
            undo.slice_id,
            undo.from_medium.as_str(),
            undo.to_medium.as_deref(),
            undo.old_size,
            undo.new_size,
        ),
        (job_id, slice_id, "m2", Some("m1"), 10, 10)
    );
    assert_eq!(
        (undo.undo, undo.state, undo.checkpoint),
        (true, StepState::Planned, None)
    );
}

pub async fn job_control_a_switched_slice_keeps_its_old_size_booked_on_its_source_until_the_job_ends(
    store: &dyn Store,
) {
    let (_, _, _, job_id) = moving_job(store).await;
    switch_forward(store, job_id).await;
    let media = store.media_usage().await.expect("usage");
    assert_eq!(
        usage(&media, "m1"),
        (0, 10, 10),
        "the source keeps the slice's old size booked"
    );
    assert_eq!(
        usage(&media, "m2"),
        (10, 2, 8),
        "only the growth stays booked"
    );

    finish(store, job_id).await;
    let media = store.media_usage().await.expect("usage");
    assert_eq!(usage(&media, "m1"), (0, 0, 20), "the booking went");
    assert_eq!(usage(&media, "m2"), (10, 0, 10));
}

pub async fn job_control_an_undo_switch_uses_up_the_booking_on_the_original_medium(
    store: &dyn Store,
) {
    let (user, volume, slice_id, job_id) = moving_job(store).await;
    switch_forward(store, job_id).await;
    cancel(store, &user, job_id, 10).await;
    store
        .save_undo_steps(job_id, &[move_back(slice_id)])
        .await
        .expect("undo steps");
    let undo = store.resize_steps(job_id).await.expect("steps")[1].clone();
    assert!(undo.undo);
    store.switch_slice(&undo, &[]).await.expect("switch back");
    let media = store.media_usage().await.expect("usage");
    assert_eq!(
        usage(&media, "m1"),
        (10, 0, 10),
        "the slice is back in the space booked for it"
    );
    assert_eq!(
        usage(&media, "m2"),
        (0, 2, 18),
        "moving back books nothing on m2"
    );
    assert_eq!(
        store.volume_slices(&volume).await.expect("slices")[0]
            .slice
            .medium,
        "m1"
    );

    store
        .finish_job(job_id, &JobEnd::cancelled("undone".into(), 20))
        .await
        .expect("finish");
    let media = store.media_usage().await.expect("usage");
    assert_eq!(usage(&media, "m1"), (10, 0, 10));
    assert_eq!(usage(&media, "m2"), (0, 0, 20));
    let job = stored_job(store, &user, job_id).await;
    assert_eq!(
        (job.state, job.status.as_str(), job.cancel_requested),
        (JobState::Error, JOB_CANCELLED, true)
    );
}

pub async fn job_control_a_lost_slice_moving_away_books_nothing_on_its_source(store: &dyn Store) {
    let (_, volume, _, job_id) = moving_job(store).await;
    assert!(store
        .mark_slice_lost(&volume, 0, 0, "m1", 5)
        .await
        .expect("lost"));
    switch_forward(store, job_id).await;
    let media = store.media_usage().await.expect("usage");
    assert_eq!(
        usage(&media, "m1"),
        (0, 0, 20),
        "a lost copy is never moved back"
    );
    assert_eq!(usage(&media, "m2"), (10, 2, 8));
}

pub async fn job_control_a_job_is_paused_resumed_and_given_a_rate_until_it_ends(store: &dyn Store) {
    let (user, _, _, job_id) = moving_job(store).await;
    let (other, _) = testing::user_and_policy_in(store, "t2", "o@example.com", true).await;
    let pause = JobSteering {
        paused: Some(true),
        movement_rate: None,
    };
    let job = store
        .steer_job(user.tenant_id, job_id, &pause, 5)
        .await
        .expect("steer")
        .expect("job");
    assert_eq!((job.paused, job.movement_rate), (true, None));
    let rate = JobSteering {
        paused: None,
        movement_rate: Some(Some(64 << 20)),
    };
    let job = store
        .steer_job(user.tenant_id, job_id, &rate, 6)
        .await
        .expect("steer")
        .expect("job");
    assert_eq!(
        (job.paused, job.movement_rate),
        (true, Some(64 << 20)),
        "a rate leaves the pause as it is"
    );
    let controls = store
        .job_controls(&[job_id, job_id + 1000])
        .await
        .expect("read");
    assert_eq!(
        controls,
        vec![JobControl {
            id: job_id,
            cancel_requested: false,
            paused: true,
            movement_rate: Some(64 << 20),
        }]
    );
    // Another tenant changes nothing and sees nothing.
    assert!(store
        .steer_job(other.tenant_id, job_id, &JobSteering::default(), 7)
        .await
        .expect("steer")
        .is_none());
    let resume = JobSteering {
        paused: Some(false),
        movement_rate: Some(None),
    };
    let job = store
        .steer_job(user.tenant_id, job_id, &resume, 8)
        .await
        .expect("steer")
        .expect("job");
    assert_eq!((job.paused, job.movement_rate), (false, None));
    // An ended job is left as it ended.
    store
        .finish_job(job_id, &JobEnd::done("done".into(), 9))
        .await
        .expect("finish");
    let job = store
        .steer_job(user.tenant_id, job_id, &pause, 10)
        .await
        .expect("steer")
        .expect("job");
    assert!(!job.paused, "{job:?}");
    assert!(store.job_controls(&[]).await.expect("read").is_empty());
}

pub async fn job_control_a_step_s_failures_are_counted_with_the_last_cause(store: &dyn Store) {
    let (_, _, _, job_id) = moving_job(store).await;
    let step = store.resize_steps(job_id).await.expect("steps").remove(0);
    assert_eq!((step.failure.as_deref(), step.failures), (None, 0));
    assert_eq!(
        store
            .record_step_failure(step.id, "node unreachable")
            .await
            .expect("record"),
        1
    );
    assert_eq!(
        store
            .record_step_failure(step.id, "verification mismatch")
            .await
            .expect("record"),
        2
    );
    let step = store.resize_steps(job_id).await.expect("steps").remove(0);
    assert_eq!(
        (step.failure.as_deref(), step.failures),
        (Some("verification mismatch"), 2)
    );
    assert_eq!(
        store
            .record_step_failure(step.id + 1000, "x")
            .await
            .expect("record"),
        0,
        "no such step"
    );
}
