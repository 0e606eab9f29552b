//! In-process services for unit tests: a fresh store in a temporary
//! directory, no media, and a `ManualClock` the test moves.

use super::Services;
use crate::auth::{SigningKey, TokenIssuer};
use crate::jobs::{JobRunner, RetryPolicy};
use std::sync::Arc;
use std::time::Duration;
use svs_common::clock::{Clock, ManualClock};
use svs_dataplane::LocalMedia;
use svs_store::{testing, Store};
use tempfile::TempDir;

/// 2026-01-01T00:00:00Z, a whole second (tokens count in seconds).
pub const START_MS: i64 = 1_767_225_600_000;

pub struct TestServices {
    pub services: Services,
    pub clock: Arc<ManualClock>,
    store: Arc<dyn Store>,
    _dir: TempDir,
}

impl TestServices {
    pub async fn new(token_lifetime: Duration, refresh_lifetime: Duration) -> TestServices {
        let (dir, store) = testing::temp_sqlite().await;
        let clock = Arc::new(ManualClock::new(START_MS));
        let store: Arc<dyn Store> = Arc::new(store);
        let clock_dyn: Arc<dyn Clock> = clock.clone();
        let parts = crate::testing::runner_parts(
            Arc::clone(&store),
            Arc::new(LocalMedia::new(Vec::new())),
            Arc::clone(&clock_dyn),
        );
        let exports = Arc::clone(&parts.exports);
        let runner = JobRunner::new(
            parts,
            crate::testing::runner_settings(1, RetryPolicy::default()),
        );
        let tokens = TokenIssuer::new(
            SigningKey::from_seed(&[9; 32]),
            "svs".into(),
            token_lifetime.as_secs(),
        );
        let services = Services::new(
            Arc::clone(&store),
            clock_dyn,
            super::AuthParts {
                tokens,
                refresh_lifetime_ms: i64::try_from(refresh_lifetime.as_millis())
                    .expect("lifetime fits"),
                protection: super::SignInProtection {
                    throttle: super::throttle::SignInThrottle::new(
                        super::throttle::ThrottleSettings {
                            account_free_failures: 5,
                            address_free_failures: 20,
                            window: Duration::from_secs(900),
                            max_lockout: Duration::from_secs(300),
                        },
                    ),
                    passwords: crate::auth::PasswordCheckPool::new(1, 16)
                        .expect("password threads"),
                },
            },
            runner,
            exports,
            "nbd://127.0.0.1:10809".into(),
        )
        .expect("services start");
        TestServices {
            services,
            clock,
            store,
            _dir: dir,
        }
    }

    /// Adds a user the way `svs user add` does.
    pub async fn add_user(&self, tenant: &str, email: &str, password: &str, admin: bool) {
        crate::service::users::add_user(
            self.store.as_ref(),
            self.clock.as_ref(),
            tenant,
            email,
            None,
            password,
            admin,
        )
        .await
        .expect("user added");
    }

    pub fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }
}
