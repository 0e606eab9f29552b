//! `svs user ...` client commands against the real service (the real
//! binary, HOME in a temporary directory): passwords come from a file, an
//! environment variable or stdin, never from a flag.

use crate::harness::cli::{stderr, stdout, Home};
use crate::harness::*;
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test]
async fn administrators_manage_users_with_the_cli() {
    let app = TestApp::start().await;
    let admin = Home::new(false);
    admin.login_as(&app, ADMIN_EMAIL, ADMIN_PASSWORD);

    // Create: password from a file (its first line).
    let file = admin.file("bob-password", "bob-password\nignored\n");
    let out = admin.ok(&[
        "user",
        "create",
        "bob@example.com",
        "--name",
        "Bob",
        "--password-file",
        &file,
    ]);
    assert_eq!(
        out,
        "Created user bob@example.com (id 2) in tenant default\n"
    );
    assert_eq!(
        app.sign_in_status("bob@example.com", "bob-password")
            .await
            .0,
        StatusCode::OK
    );
    // From stdin, into another tenant, an administrator.
    let out = admin.ok_with(
        &[
            "user",
            "create",
            "carol@acme.example",
            "--tenant",
            "acme",
            "--admin",
        ],
        Some("carol-password\n"),
    );
    assert_eq!(
        out,
        "Created user carol@acme.example (id 3) in tenant acme, an administrator\n"
    );
    // A duplicate: the server's message.
    let out = admin.run_with(
        &["user", "create", "bob@example.com"],
        Some("whatever-pass\n"),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("a user with email bob@example.com already exists"),
        "{}",
        stderr(&out)
    );
    // No password anywhere: refused before any request.
    admin.fails(
        &["user", "create", "dave@example.com"],
        "no new password: give a file, set SVS_NEW_PASSWORD, or write it on stdin",
    );

    let table = admin.ok(&["user", "list"]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("ID"), "{table}");
    for header in ["EMAIL", "NAME", "TENANT", "ADMIN", "DISABLED", "CREATED"] {
        assert!(lines[0].contains(header), "{table}");
    }
    assert_eq!(lines.len(), 4, "{table}");
    assert!(
        lines[2].contains("bob@example.com") && lines[2].contains("Bob"),
        "{table}"
    );
    let list = admin.json(&["user", "list"]);
    assert_eq!(list.as_array().map(Vec::len), Some(3));

    let bob = admin.json(&["user", "get", "bob@example.com"]);
    assert_eq!((&bob["userid"], &bob["admin"]), (&json!(2), &json!(false)));
    assert_eq!(admin.json(&["user", "get", "2"]), bob);

    // Disable and enable.
    let out = admin.ok(&["user", "disable", "bob@example.com"]);
    assert_eq!(
        out,
        "Disabled user bob@example.com: it cannot sign in, and its sessions have ended\n"
    );
    assert_eq!(
        app.sign_in_status("bob@example.com", "bob-password")
            .await
            .0,
        StatusCode::FORBIDDEN
    );
    let out = admin.ok(&["user", "enable", "bob@example.com"]);
    assert_eq!(out, "Enabled user bob@example.com: it can sign in again\n");
    assert_eq!(
        app.sign_in_status("bob@example.com", "bob-password")
            .await
            .0,
        StatusCode::OK
    );

    // Roles.
    let out = admin.ok(&["user", "make-admin", "bob@example.com"]);
    assert_eq!(out, "User bob@example.com is now an administrator\n");
    assert_eq!(admin.json(&["user", "get", "2"])["admin"], true);
    let out = admin.ok(&["user", "remove-admin", "bob@example.com"]);
    assert_eq!(out, "User bob@example.com is no longer an administrator\n");
    admin.fails(
        &["user", "remove-admin", ADMIN_EMAIL],
        "you cannot take away your own administrator role",
    );
    admin.fails(
        &["user", "disable", ADMIN_EMAIL],
        "you cannot disable yourself",
    );
    admin.fails(
        &["user", "delete", ADMIN_EMAIL],
        "you cannot delete yourself",
    );

    // Reset: the password from the environment.
    let out = admin.run_env(
        &["user", "reset-password", "bob@example.com"],
        None,
        &[("SVS_NEW_PASSWORD", "bob-reset-password")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "Password of bob@example.com reset; its sessions have ended\n"
    );
    assert_eq!(
        app.sign_in_status("bob@example.com", "bob-password")
            .await
            .0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        app.sign_in_status("bob@example.com", "bob-reset-password")
            .await
            .0,
        StatusCode::OK
    );

    // A non-administrator is refused with the server's message.
    let bob = Home::new(false);
    bob.login_as(&app, "bob@example.com", "bob-reset-password");
    bob.fails(
        &["user", "list"],
        "this operation requires an administrator",
    );
    bob.fails(
        &["user", "delete", "carol@acme.example"],
        "this operation requires an administrator",
    );

    // Delete; then unknown.
    let out = admin.ok(&["user", "delete", "carol@acme.example"]);
    assert_eq!(out, "User deleted\n");
    admin.fails(
        &["user", "get", "carol@acme.example"],
        "user 'carol@acme.example' not found",
    );
}

#[tokio::test]
async fn users_change_their_own_password_and_keep_their_cli_session() {
    let app = TestApp::start().await;
    app.add_user("default", "bob@example.com", "bob-password");
    let bob = Home::new(false);
    bob.login_as(&app, "bob@example.com", "bob-password");

    // Wrong current password: refused, nothing changed.
    let out = bob.run_with(
        &["user", "passwd"],
        Some("not-my-password\nbob-new-password\n"),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("the current password is not correct"),
        "{}",
        stderr(&out)
    );
    // Both from stdin, one a line.
    let out = bob.ok_with(
        &["user", "passwd"],
        Some("bob-password\nbob-new-password\n"),
    );
    assert_eq!(
        out,
        "Password of bob@example.com changed; its other sessions have ended (profile \"default\" keeps a new one)\n"
    );
    assert_eq!(
        app.sign_in_status("bob@example.com", "bob-password")
            .await
            .0,
        StatusCode::UNAUTHORIZED
    );
    // The profile holds the new session's tokens.
    bob.ok(&["volume", "list"]);

    // From a file and the environment.
    let current = bob.file("current", "bob-new-password\n");
    let out = bob.run_env(
        &["user", "passwd", "--current-password-file", &current],
        None,
        &[("SVS_NEW_PASSWORD", "bob-third-password")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        app.sign_in_status("bob@example.com", "bob-third-password")
            .await
            .0,
        StatusCode::OK
    );
    bob.ok(&["volume", "list"]);
}
