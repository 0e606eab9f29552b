//! Sign-in under attack: failures lock an account or a client address for a
//! while (429 with Retry-After, before any password is hashed), never for
//! longer than the configured cap; password checks wait on a bounded pool.

use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::net::IpAddr;
use std::time::{Duration, Instant};

const SECOND_ADDRESS: [u8; 4] = [127, 0, 0, 2];

/// Small numbers so the test sees locks end: a lock lasts at most 2 s.
fn quick_lockouts() -> TestConfig {
    TestConfig {
        settings: vec![
            "signin_max_lockout = \"2s\"".into(),
            "signin_window = \"10s\"".into(),
        ],
        ..TestConfig::default()
    }
}

/// A client whose connections come from `address` (a loopback alias).
fn client_from(address: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(IpAddr::from(address))
        .build()
        .expect("client")
}

struct Answer {
    status: StatusCode,
    retry_after: Option<String>,
    body: Value,
}

async fn sign_in_with(client: &reqwest::Client, app: &TestApp, email: &str, pw: &str) -> Answer {
    let resp = client
        .post(format!("{}/signin", app.base))
        .json(&json!({"email": email, "password": pw}))
        .send()
        .await
        .expect("request sent");
    Answer {
        status: resp.status(),
        retry_after: resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(String::from),
        body: resp.json().await.expect("JSON body"),
    }
}

fn is_lockout(a: &Answer) -> bool {
    let secs: Option<u64> = a.retry_after.as_deref().and_then(|s| s.parse().ok());
    let expected = secs.map(|n| {
        format!(
            "Too many failed attempts; try again in {n} second{}",
            if n == 1 { "" } else { "s" }
        )
    });
    a.status == StatusCode::TOO_MANY_REQUESTS
        && secs.is_some_and(|n| (1..=2).contains(&n))
        && a.body["message"].as_str() == expected.as_deref()
}

#[tokio::test]
async fn forty_wrong_passwords_are_locked_out_and_the_right_one_works_after_the_lock() {
    let app = TestApp::start_with(quick_lockouts()).await;
    app.add_user("acme", "eve@acme.example", "eve-password");
    let here = reqwest::Client::new();
    for i in 0..6 {
        let a = sign_in_with(&here, &app, ADMIN_EMAIL, "not-the-password").await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{i}: {}", a.body);
    }
    // Five free failures; the sixth locks the account for 1 s from its
    // answer, for everyone, even with the right password ...
    let locked = sign_in_with(&here, &app, ADMIN_EMAIL, ADMIN_PASSWORD).await;
    assert!(is_lockout(&locked), "{} {}", locked.status, locked.body);
    let elsewhere = client_from(SECOND_ADDRESS);
    let locked = sign_in_with(&elsewhere, &app, ADMIN_EMAIL, ADMIN_PASSWORD).await;
    assert!(is_lockout(&locked), "{} {}", locked.status, locked.body);
    // ... but another account from another address signs in.
    let eve = sign_in_with(&elsewhere, &app, "eve@acme.example", "eve-password").await;
    assert_eq!(eve.status, StatusCode::OK, "{}", eve.body);

    // Guesses while locked are refused unchecked and uncounted; one that
    // comes after a lock ended is checked and locks again, never for longer
    // than the 2 s cap.
    let mut statuses = Vec::new();
    let mut last = None;
    for _ in 0..34 {
        let a = sign_in_with(&here, &app, ADMIN_EMAIL, "not-the-password").await;
        statuses.push(a.status.as_u16());
        assert!(
            a.status == StatusCode::UNAUTHORIZED || is_lockout(&a),
            "{} {:?} {}",
            a.status,
            a.retry_after,
            a.body
        );
        last = Some(a);
    }
    assert!(
        statuses.iter().filter(|s| **s == 429).count() >= 30,
        "{statuses:?}"
    );
    assert!(last.as_ref().is_some_and(is_lockout));

    // No lock outlasts the cap: the right password works again after it.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let a = sign_in_with(&here, &app, ADMIN_EMAIL, ADMIN_PASSWORD).await;
        if a.status == StatusCode::OK {
            assert!(a.body["IdToken"].is_string(), "{}", a.body);
            break;
        }
        assert!(is_lockout(&a), "{} {}", a.status, a.body);
        assert!(Instant::now() < deadline, "still locked after the cap");
        let wait: u64 = a.retry_after.and_then(|s| s.parse().ok()).unwrap_or(1);
        tokio::time::sleep(Duration::from_millis(wait * 1000 / 2)).await;
    }
    // The success reset the account: five free failures again.
    for _ in 0..5 {
        let a = sign_in_with(&elsewhere, &app, ADMIN_EMAIL, "not-the-password").await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{}", a.body);
    }
}

#[tokio::test]
async fn an_address_guessing_at_many_accounts_is_locked_out_and_others_are_not() {
    let app = TestApp::start_with(quick_lockouts()).await;
    app.add_user("acme", "eve@acme.example", "eve-password");
    let here = reqwest::Client::new();
    // 20 free failures per address, spread so that no account locks.
    for i in 0..20 {
        let a = sign_in_with(&here, &app, &format!("guess{i}@example.com"), "password1").await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{i}: {}", a.body);
    }
    let a = sign_in_with(&here, &app, "guess20@example.com", "password1").await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{}", a.body);
    // The address is locked, whatever the account, even a right password.
    let a = sign_in_with(&here, &app, "eve@acme.example", "eve-password").await;
    assert!(is_lockout(&a), "{} {}", a.status, a.body);
    // The account itself is not: from another address it signs in.
    let elsewhere = client_from(SECOND_ADDRESS);
    let a = sign_in_with(&elsewhere, &app, "eve@acme.example", "eve-password").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
}

#[tokio::test]
async fn invalid_refresh_tokens_count_against_the_address() {
    let app = TestApp::start_with(quick_lockouts()).await;
    let here = reqwest::Client::new();
    let good = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let post = |client: &reqwest::Client, token: &str| {
        client
            .post(format!("{}/refresh", app.base))
            .json(&json!({ "RefreshToken": token }))
            .send()
    };
    let get = |client: &reqwest::Client, token: &str| {
        client
            .get(format!("{}/tenant/apiaccess/credentials/refresh", app.base))
            .header("refreshtoken", token)
            .send()
    };
    for i in 0..21 {
        let r = if i % 2 == 0 {
            post(&here, "forged").await
        } else {
            get(&here, "forged").await
        };
        assert_eq!(r.expect("sent").status(), StatusCode::UNAUTHORIZED, "{i}");
    }
    let token = good["RefreshToken"].as_str().expect("RefreshToken");
    for r in [post(&here, token).await, get(&here, token).await] {
        let r = r.expect("sent");
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(r.headers().contains_key("retry-after"));
    }
    let elsewhere = client_from(SECOND_ADDRESS);
    let r = get(&elsewhere, token).await.expect("sent");
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_beyond_the_password_queue_is_refused_at_once_with_503() {
    let app = TestApp::start_with(TestConfig {
        settings: vec![
            "password_check_threads = 1".into(),
            "password_check_queue = 1".into(),
            // Distinct accounts from one address: let the flood through.
            "signin_address_free_failures = 1000".into(),
        ],
        ..TestConfig::default()
    })
    .await;
    let client = reqwest::Client::new();
    let attempts: Vec<_> = (0..30)
        .map(|i| {
            let (client, url) = (client.clone(), format!("{}/signin", app.base));
            tokio::spawn(async move {
                let resp = client
                    .post(url)
                    .json(
                        &json!({"email": format!("flood{i}@example.com"), "password": "password1"}),
                    )
                    .send()
                    .await
                    .expect("sent");
                let retry = resp.headers().get("retry-after").cloned();
                (
                    resp.status(),
                    retry,
                    resp.json::<Value>().await.expect("JSON"),
                )
            })
        })
        .collect();
    let mut busy = 0;
    for a in attempts {
        let (status, retry, body) = a.await.expect("attempt");
        match status {
            StatusCode::UNAUTHORIZED => {}
            StatusCode::SERVICE_UNAVAILABLE => {
                busy += 1;
                assert_eq!(retry.as_ref().map(|v| v.as_bytes()), Some(&b"1"[..]));
                assert_eq!(
                    body["message"],
                    "Too many sign-ins are being checked at the moment; try again in a second"
                );
            }
            other => panic!("{other}: {body}"),
        }
    }
    assert!(busy > 0, "no check was refused");
    let (status, _) = app
        .request(None, reqwest::Method::GET, "/version", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
}

/// Password checks that guessing one after another gets in `elapsed`:
/// `free` failures, the one that locks, then one more each time a lock
/// (1 s, 2 s, ..., at most `cap`) has run out.
fn sequential_checks(free: u32, elapsed: Duration, cap: Duration) -> usize {
    let mut checks = free as usize + 1;
    let mut locks = 1u32;
    let mut locked_until = Duration::from_secs(1).min(cap);
    while locked_until <= elapsed {
        checks += 1;
        locks += 1;
        let next = Duration::from_secs(1u64 << (locks - 1).min(30)).min(cap);
        locked_until += next;
    }
    checks
}

/// `n` sign-ins sent at once from `client`, `email_of(i)` with a wrong
/// password: (401s, 429s with their Retry-After, time taken). Anything
/// else fails the test.
async fn burst(
    app: &TestApp,
    client: &reqwest::Client,
    n: usize,
    email_of: impl Fn(usize) -> String,
) -> (usize, usize, Duration) {
    let started = Instant::now();
    let attempts: Vec<_> = (0..n)
        .map(|i| {
            let (client, url, email) =
                (client.clone(), format!("{}/signin", app.base), email_of(i));
            tokio::spawn(async move {
                let resp = client
                    .post(url)
                    .json(&json!({"email": email, "password": "not-the-password"}))
                    .send()
                    .await
                    .expect("sent");
                Answer {
                    status: resp.status(),
                    retry_after: resp
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .map(String::from),
                    body: resp.json().await.expect("JSON body"),
                }
            })
        })
        .collect();
    let (mut checked, mut locked) = (0, 0);
    for a in attempts {
        let a = a.await.expect("attempt");
        if a.status == StatusCode::UNAUTHORIZED {
            assert_eq!(a.body, json!({"message": "Incorrect email or password"}));
            checked += 1;
        } else {
            assert!(
                is_lockout(&a),
                "{} {:?} {}",
                a.status,
                a.retry_after,
                a.body
            );
            locked += 1;
        }
    }
    (checked, locked, started.elapsed())
}

/// Issue 30: 60 wrong passwords sent at once got 33 password checks (the
/// lock was checked before a check was queued, the failure counted after
/// it). Now an attempt counts from the moment it is let through, so a
/// burst gets what guesses one after another get in the same time: 5 free
/// failures and the one that locks (plus one per lock that ran out, if the
/// burst outlasts it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_wrong_passwords_get_no_more_password_checks_than_sequential_ones() {
    let app = TestApp::start_with(quick_lockouts()).await;
    app.add_user("acme", "eve@acme.example", "eve-password");
    let cap = Duration::from_secs(2);
    for (n, address) in [
        (10, [127, 0, 0, 3]),
        (60, [127, 0, 0, 4]),
        (200, [127, 0, 0, 5]),
    ] {
        let email = format!("burst{n}@acme.example");
        app.add_user("acme", &email, "burst-password");
        let client = client_from(address);
        let (checked, locked, took) = burst(&app, &client, n, |_| email.clone()).await;
        let most = sequential_checks(5, took, cap);
        assert!(
            (6..=most).contains(&checked),
            "{n} at once: {checked} checks in {took:?}, at most {most}"
        );
        assert_eq!(checked + locked, n);
        // Another account, from the same address, is not affected.
        let eve = sign_in_with(&client, &app, "eve@acme.example", "eve-password").await;
        assert_eq!(eve.status, StatusCode::OK, "{}", eve.body);
        // The right password works once the lock is over.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let a = sign_in_with(&client, &app, &email, "burst-password").await;
            if a.status == StatusCode::OK {
                assert!(a.body["IdToken"].is_string(), "{}", a.body);
                break;
            }
            assert!(is_lockout(&a), "{} {}", a.status, a.body);
            assert!(Instant::now() < deadline, "{email} still locked");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// The same for one address guessing at many accounts: 20 free failures
/// and the one that locks the address, however many are sent at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_guesses_at_many_accounts_get_the_addresss_checks_only() {
    let app = TestApp::start_with(quick_lockouts()).await;
    app.add_user("acme", "eve@acme.example", "eve-password");
    let here = client_from([127, 0, 0, 6]);
    let (checked, locked, took) =
        burst(&app, &here, 60, |i| format!("guess{i}@acme.example")).await;
    let most = sequential_checks(20, took, Duration::from_secs(2));
    assert!(
        (21..=most).contains(&checked),
        "{checked} checks in {took:?}, at most {most}"
    );
    assert_eq!(checked + locked, 60);
    let elsewhere = client_from([127, 0, 0, 7]);
    let eve = sign_in_with(&elsewhere, &app, "eve@acme.example", "eve-password").await;
    assert_eq!(eve.status, StatusCode::OK, "{}", eve.body);
}
