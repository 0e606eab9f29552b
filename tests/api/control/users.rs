//! User management through the API: administrators list, create, disable /
//! enable, delete users, reset passwords and change roles; each user
//! changes its own password. Disabled, deleted and reset users' tokens are
//! refused at their next request.

use crate::harness::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

const ADMIN_REQUIRED: &str = "this operation requires an administrator";
const BAD_TOKEN: &str = "The token is invalid or has expired";
const BAD_CREDENTIALS: &str = "Incorrect email or password";
const ACCOUNT_DISABLED: &str = "This account is disabled; ask an administrator to enable it";
const LAST_ADMIN: &str =
    "this would leave no enabled administrator: make another user an administrator first";

const BOB: &str = "bob@example.com";
const BOB_PASSWORD: &str = "bob-password";

/// Creates bob through the API (not an administrator, the admin's tenant).
async fn create_bob(app: &TestApp) -> Value {
    let (status, body) = app
        .post("/users", json!({"email": BOB, "password": BOB_PASSWORD}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// Signs in and returns (IdToken, RefreshToken).
async fn session(app: &TestApp, email: &str, password: &str) -> (String, String) {
    let tokens = app.sign_in(email, password).await;
    (
        tokens["IdToken"].as_str().expect("IdToken").to_string(),
        tokens["RefreshToken"]
            .as_str()
            .expect("RefreshToken")
            .to_string(),
    )
}

async fn refresh_status(app: &TestApp, refresh_token: &str) -> (StatusCode, Value) {
    app.request(
        None,
        Method::POST,
        "/refresh",
        Some(json!({"RefreshToken": refresh_token})),
    )
    .await
}

fn message(body: &Value) -> &str {
    body["message"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn administrators_create_list_get_and_delete_users() {
    let app = TestApp::start().await;
    let bob = create_bob(&app).await;
    assert_eq!(bob["email"], BOB);
    assert_eq!(bob["name"], "bob");
    assert_eq!(bob["tenant"], "default", "the administrator's own tenant");
    assert_eq!(bob["admin"], false);
    assert_eq!(bob["disabled"], false);
    assert!(bob.get("password_hash").is_none() && bob.get("password").is_none());
    let id = bob["userid"].as_i64().expect("userid");

    let (status, carol) = app
        .post(
            "/users",
            json!({"email": "carol@acme.example", "password": "carol-password",
                   "name": "Carol", "tenant": "acme", "admin": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{carol}");
    assert_eq!(
        (&carol["name"], &carol["tenant"], &carol["admin"]),
        (&json!("Carol"), &json!("acme"), &json!(true))
    );

    let (status, list) = app.get("/users").await;
    assert_eq!(status, StatusCode::OK);
    let emails: Vec<&str> = list
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|u| u["email"].as_str())
        .collect();
    assert_eq!(emails, [ADMIN_EMAIL, BOB, "carol@acme.example"]);

    for key in [id.to_string(), BOB.to_string()] {
        let (status, got) = app.get(&format!("/users/{key}")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(got, bob);
    }

    // Bad input changes nothing.
    for (body, expected) in [
        (
            json!({"email": BOB, "password": "another-password"}),
            (
                StatusCode::CONFLICT,
                "a user with email bob@example.com already exists",
            ),
        ),
        (
            json!({"email": "dave@example.com", "password": "short"}),
            (
                StatusCode::BAD_REQUEST,
                "password must be at least 8 characters",
            ),
        ),
        (
            json!({"email": "dave", "password": "dave-password"}),
            (StatusCode::BAD_REQUEST, "'dave' is not an e-mail address"),
        ),
        (
            json!({"password": "dave-password"}),
            (StatusCode::BAD_REQUEST, "email is required"),
        ),
        (
            json!({"email": "dave@example.com", "password": "dave-password", "admin": "yes"}),
            (StatusCode::BAD_REQUEST, "admin must be true or false"),
        ),
    ] {
        let (status, answer) = app.post("/users", body.clone()).await;
        assert_eq!((status, message(&answer)), expected, "{body}");
    }
    let (_, after) = app.get("/users").await;
    assert_eq!(after, list);

    // Bob's volume belongs to the tenant: it stays when bob goes, and the
    // job keeps who started it.
    let (bob_token, _) = session(&app, BOB, BOB_PASSWORD).await;
    app.create_policy("p", 0, 0, 0).await;
    let (status, started) = app
        .as_user(
            &bob_token,
            Method::POST,
            "/volumes",
            Some(json!({"name": "bobs", "size": 1, "policy": "p"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let job = started["JobID"].as_str().expect("JobID").to_string();
    app.wait_job(&job).await;

    let (status, deleted) = app.delete(&format!("/users/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    assert_eq!(deleted, json!({"Message": "User deleted", "ObjectID": BOB}));
    // At once: the deleted user's IdToken is refused, its sign-in fails.
    let (status, answer) = app.as_user(&bob_token, Method::GET, "/volumes", None).await;
    assert_eq!(
        (status, message(&answer)),
        (StatusCode::UNAUTHORIZED, BAD_TOKEN)
    );
    let (status, answer) = app.sign_in_status(BOB, BOB_PASSWORD).await;
    assert_eq!(
        (status, message(&answer)),
        (StatusCode::UNAUTHORIZED, BAD_CREDENTIALS)
    );
    let (status, volume) = app.get("/volumes/bobs").await;
    assert_eq!(status, StatusCode::OK, "{volume}");
    let (_, job) = app.get(&format!("/jobs/{job}")).await;
    assert_eq!(job["useremail"], BOB);
    let (status, answer) = app.get(&format!("/users/{id}")).await;
    assert_eq!(
        (status, message(&answer)),
        (
            StatusCode::NOT_FOUND,
            format!("user {id} not found").as_str()
        )
    );
}

#[tokio::test]
async fn non_administrators_get_403_on_every_administrator_route() {
    let app = TestApp::start().await;
    create_bob(&app).await;
    let (bob, _) = session(&app, BOB, BOB_PASSWORD).await;
    let routes = [
        (Method::GET, "/users", None),
        (
            Method::POST,
            "/users",
            Some(json!({"email": "x@example.com", "password": "x-password"})),
        ),
        (Method::GET, "/users/1", None),
        (Method::PATCH, "/users/1", Some(json!({"disabled": true}))),
        (Method::DELETE, "/users/1", None),
        (
            Method::POST,
            "/users/1/password",
            Some(json!({"password": "taken-over"})),
        ),
    ];
    for (method, path, body) in routes {
        let (status, answer) = app.as_user(&bob, method.clone(), path, body).await;
        assert_eq!(
            (status, answer),
            (StatusCode::FORBIDDEN, json!({"message": ADMIN_REQUIRED})),
            "{method} {path}"
        );
    }
    // Nothing changed: the admin still signs in, no user x.
    let (status, list) = app.get("/users").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list.as_array().map(Vec::len), Some(2));
    // Everyone reads itself.
    let (status, me) = app.as_user(&bob, Method::GET, "/users/me", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!((&me["email"], &me["admin"]), (&json!(BOB), &json!(false)));
    // Without a token: 401.
    let (status, _) = app.request(None, Method::GET, "/users", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn unknown_users_are_404_and_nothing_changes() {
    let app = TestApp::start().await;
    for key in ["9999", "nobody@example.com"] {
        let not_found = if key == "9999" {
            "user 9999 not found".to_string()
        } else {
            format!("user '{key}' not found")
        };
        let path = format!("/users/{key}");
        for (method, path, body) in [
            (Method::GET, path.clone(), None),
            (Method::PATCH, path.clone(), Some(json!({"admin": true}))),
            (Method::DELETE, path.clone(), None),
            (
                Method::POST,
                format!("{path}/password"),
                Some(json!({"password": "new-password"})),
            ),
        ] {
            let (status, answer) = app.as_user(&app.token, method.clone(), &path, body).await;
            assert_eq!(
                (status, message(&answer)),
                (StatusCode::NOT_FOUND, not_found.as_str()),
                "{method} {path}"
            );
        }
    }
    let (status, answer) = app.patch("/users/1", json!({})).await;
    assert_eq!(
        (status, message(&answer)),
        (
            StatusCode::BAD_REQUEST,
            "nothing to change: send disabled or admin"
        )
    );
}

#[tokio::test]
async fn a_disabled_user_cannot_sign_in_refresh_or_use_its_tokens_even_after_a_restart() {
    let mut app = TestApp::start().await;
    create_bob(&app).await;
    let (bob, bob_refresh) = session(&app, BOB, BOB_PASSWORD).await;
    let (status, _) = app.as_user(&bob, Method::GET, "/volumes", None).await;
    assert_eq!(status, StatusCode::OK);

    let (status, disabled) = app
        .patch(&format!("/users/{BOB}"), json!({"disabled": true}))
        .await;
    assert_eq!(status, StatusCode::OK, "{disabled}");
    assert_eq!(disabled["disabled"], true);
    // The very next request is refused; the refresh token was revoked.
    let (status, answer) = app.as_user(&bob, Method::GET, "/volumes", None).await;
    assert_eq!(
        (status, message(&answer)),
        (StatusCode::UNAUTHORIZED, ACCOUNT_DISABLED)
    );
    let (status, answer) = refresh_status(&app, &bob_refresh).await;
    assert_eq!(
        (status, message(&answer)),
        (StatusCode::UNAUTHORIZED, BAD_TOKEN)
    );
    // The right password is told the account is disabled; a wrong one
    // learns nothing more than before.
    let (status, answer) = app.sign_in_status(BOB, BOB_PASSWORD).await;
    assert_eq!(
        (status, message(&answer)),
        (StatusCode::FORBIDDEN, ACCOUNT_DISABLED)
    );
    let (status, answer) = app.sign_in_status(BOB, "wrong-password").await;
    assert_eq!(
        (status, message(&answer)),
        (StatusCode::UNAUTHORIZED, BAD_CREDENTIALS)
    );

    // Still so after a restart (the state is in the store, not only in memory).
    app.restart().await;
    let (status, answer) = app.as_user(&bob, Method::GET, "/volumes", None).await;
    assert_eq!(
        (status, message(&answer)),
        (StatusCode::UNAUTHORIZED, ACCOUNT_DISABLED)
    );

    // Enabled again: a new sign-in works, the old sessions stay ended.
    let (status, enabled) = app
        .patch(&format!("/users/{BOB}"), json!({"disabled": false}))
        .await;
    assert_eq!(status, StatusCode::OK, "{enabled}");
    assert_eq!(enabled["disabled"], false);
    let (status, answer) = app.as_user(&bob, Method::GET, "/volumes", None).await;
    assert_eq!(
        (status, message(&answer)),
        (StatusCode::UNAUTHORIZED, BAD_TOKEN)
    );
    let (status, answer) = refresh_status(&app, &bob_refresh).await;
    assert_eq!(
        (status, message(&answer)),
        (StatusCode::UNAUTHORIZED, BAD_TOKEN)
    );
    let (fresh, _) = session(&app, BOB, BOB_PASSWORD).await;
    let (status, _) = app.as_user(&fresh, Method::GET, "/volumes", None).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn administrators_cannot_disable_delete_demote_or_reset_themselves() {
    let app = TestApp::start().await;
    let me = "/users/me";
    let (_, admin) = app.get(me).await;
    let id = admin["userid"].as_i64().expect("userid");
    let path = format!("/users/{id}");
    for (method, path, body, expected) in [
        (
            Method::PATCH,
            path.clone(),
            Some(json!({"disabled": true})),
            "you cannot disable yourself: another administrator has to do it",
        ),
        (
            Method::PATCH,
            path.clone(),
            Some(json!({"admin": false})),
            "you cannot take away your own administrator role: another administrator has to do it",
        ),
        (
            Method::DELETE,
            path.clone(),
            None,
            "you cannot delete yourself: another administrator has to do it",
        ),
        (
            Method::POST,
            format!("{path}/password"),
            Some(json!({"password": "new-password"})),
            "change your own password with PUT /users/me/password (it needs the current one)",
        ),
    ] {
        let (status, answer) = app.as_user(&app.token, method.clone(), &path, body).await;
        assert_eq!(
            (status, message(&answer)),
            (StatusCode::CONFLICT, expected),
            "{method} {path}"
        );
    }
    let (_, after) = app.get(me).await;
    assert_eq!(after, admin);
    // Enabling oneself or keeping the role is no change worth refusing.
    let (status, _) = app
        .patch(&path, json!({"disabled": false, "admin": true}))
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn two_administrators_demoting_each_other_leave_one() {
    let app = TestApp::start().await;
    let (status, _) = app
        .post(
            "/users",
            json!({"email": "second@example.com", "password": "second-password", "admin": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (second, _) = session(&app, "second@example.com", "second-password").await;
    let first_path = format!("/users/{ADMIN_EMAIL}");
    let first_demotes = app.as_user(
        &second,
        Method::PATCH,
        &first_path,
        Some(json!({"admin": false})),
    );
    let second_demotes = app.as_user(
        &app.token,
        Method::PATCH,
        "/users/second@example.com",
        Some(json!({"admin": false})),
    );
    let (a, b) = tokio::join!(first_demotes, second_demotes);
    let statuses = [a.0, b.0];
    // One goes through; the other is refused, either as the last
    // administrator (409) or because its caller is no longer one (403).
    assert_eq!(
        statuses.iter().filter(|s| **s == StatusCode::OK).count(),
        1,
        "{a:?} {b:?}"
    );
    for (status, body) in [&a, &b] {
        if *status == StatusCode::CONFLICT {
            assert_eq!(message(body), LAST_ADMIN);
        } else if *status != StatusCode::OK {
            assert_eq!(
                (*status, message(body)),
                (StatusCode::FORBIDDEN, ADMIN_REQUIRED)
            );
        }
    }
    let (_, list) = app
        .request(Some(&second), Method::GET, "/users/me", None)
        .await;
    let (_, first) = app
        .request(Some(&app.token), Method::GET, "/users/me", None)
        .await;
    assert_eq!(
        [&list["admin"], &first["admin"]]
            .iter()
            .filter(|a| ***a == json!(true))
            .count(),
        1
    );
}

#[tokio::test]
async fn a_role_change_applies_at_the_next_request() {
    let app = TestApp::start().await;
    create_bob(&app).await;
    let (bob, _) = session(&app, BOB, BOB_PASSWORD).await;
    let (status, _) = app.as_user(&bob, Method::GET, "/users", None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, made) = app
        .patch(&format!("/users/{BOB}"), json!({"admin": true}))
        .await;
    assert_eq!((status, &made["admin"]), (StatusCode::OK, &json!(true)));
    // The same IdToken, issued before: bob is an administrator now.
    let (status, _) = app.as_user(&bob, Method::GET, "/users", None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, taken) = app
        .patch(&format!("/users/{BOB}"), json!({"admin": false}))
        .await;
    assert_eq!((status, &taken["admin"]), (StatusCode::OK, &json!(false)));
    let (status, answer) = app.as_user(&bob, Method::GET, "/users", None).await;
    assert_eq!(
        (status, message(&answer)),
        (StatusCode::FORBIDDEN, ADMIN_REQUIRED)
    );
}

#[tokio::test]
async fn changing_your_own_password_needs_the_current_one_and_ends_the_other_sessions() {
    let app = TestApp::start().await;
    create_bob(&app).await;
    let (bob, bob_refresh) = session(&app, BOB, BOB_PASSWORD).await;
    let (other, _) = session(&app, BOB, BOB_PASSWORD).await;
    let change = |current: &str, new: &str| json!({"currentpassword": current, "newpassword": new});
    for (body, expected) in [
        (
            change("wrong-password", "bob-new-password"),
            "the current password is not correct",
        ),
        (
            change(BOB_PASSWORD, "short"),
            "password must be at least 8 characters",
        ),
        (json!({"newpassword": "x"}), "currentpassword is required"),
    ] {
        let (status, answer) = app
            .as_user(&bob, Method::PUT, "/users/me/password", Some(body))
            .await;
        assert_eq!(
            (status, message(&answer)),
            (StatusCode::BAD_REQUEST, expected)
        );
    }
    // Nothing changed yet.
    let (status, _) = app.as_user(&other, Method::GET, "/volumes", None).await;
    assert_eq!(status, StatusCode::OK);

    let (status, tokens) = app
        .as_user(
            &bob,
            Method::PUT,
            "/users/me/password",
            Some(change(BOB_PASSWORD, "bob-new-password")),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{tokens}");
    let fresh = tokens["IdToken"].as_str().expect("IdToken");
    let (status, _) = app.as_user(fresh, Method::GET, "/volumes", None).await;
    assert_eq!(status, StatusCode::OK);
    for old in [&bob, &other] {
        let (status, answer) = app.as_user(old, Method::GET, "/volumes", None).await;
        assert_eq!(
            (status, message(&answer)),
            (StatusCode::UNAUTHORIZED, BAD_TOKEN)
        );
    }
    let (status, _) = refresh_status(&app, &bob_refresh).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, answer) = app.sign_in_status(BOB, BOB_PASSWORD).await;
    assert_eq!(
        (status, message(&answer)),
        (StatusCode::UNAUTHORIZED, BAD_CREDENTIALS)
    );
    session(&app, BOB, "bob-new-password").await;
    // The new session's refresh token works.
    let new_refresh = tokens["RefreshToken"].as_str().expect("RefreshToken");
    let (status, _) = refresh_status(&app, new_refresh).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn an_administrators_password_reset_ends_every_session_of_the_user() {
    let app = TestApp::start().await;
    create_bob(&app).await;
    let (bob, bob_refresh) = session(&app, BOB, BOB_PASSWORD).await;
    let (status, answer) = app
        .post(
            &format!("/users/{BOB}/password"),
            json!({"password": "short"}),
        )
        .await;
    assert_eq!(
        (status, message(&answer)),
        (
            StatusCode::BAD_REQUEST,
            "password must be at least 8 characters"
        )
    );
    let (status, _) = app.as_user(&bob, Method::GET, "/volumes", None).await;
    assert_eq!(status, StatusCode::OK, "a refused reset changes nothing");

    let (status, answer) = app
        .post(
            &format!("/users/{BOB}/password"),
            json!({"password": "reset-password"}),
        )
        .await;
    assert_eq!(
        (status, answer),
        (
            StatusCode::OK,
            json!({"Message": "Password reset", "ObjectID": BOB})
        )
    );
    let (status, answer) = app.as_user(&bob, Method::GET, "/volumes", None).await;
    assert_eq!(
        (status, message(&answer)),
        (StatusCode::UNAUTHORIZED, BAD_TOKEN)
    );
    let (status, _) = refresh_status(&app, &bob_refresh).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = app.sign_in_status(BOB, BOB_PASSWORD).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    session(&app, BOB, "reset-password").await;
}
