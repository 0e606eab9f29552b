//! Brute-force protection for sign-in and refresh, in the spirit of
//! Cognito's lockout: a few failures are free, each further one locks the
//! key (an account or a client address) for 1 s, 2 s, 4 s, ... up to a cap.
//! While a key is locked, attempts are refused before any password is
//! hashed and are not counted, so one lock never outlasts the cap. Failures
//! are forgotten once `window` has passed since the last one.
//!
//! Pure logic on millisecond timestamps from the injected clock; memory is
//! bounded by `MAX_TRACKED` keys per kind.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

/// Keys remembered per kind (accounts, addresses). When full, forgotten
/// keys are evicted first, then the one whose last failure is oldest.
pub const MAX_TRACKED: usize = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThrottleSettings {
    pub account_free_failures: u32,
    pub address_free_failures: u32,
    pub window: Duration,
    pub max_lockout: Duration,
}

/// An attempt refused while a key is locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Locked {
    /// Whole seconds until the lock ends, rounded up (`Retry-After`).
    pub retry_after_secs: u64,
}

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last_ms: i64,
    locked_until_ms: i64,
}

struct Counters<K> {
    free: u32,
    entries: HashMap<K, Failures>,
    max_entries: usize,
}

impl<K: Hash + Eq + Clone> Counters<K> {
    fn new(free: u32, max_entries: usize) -> Counters<K> {
        Counters {
            free,
            entries: HashMap::new(),
            max_entries,
        }
    }

    fn locked_until(&self, key: &K, now_ms: i64) -> Option<i64> {
        self.entries
            .get(key)
            .map(|f| f.locked_until_ms)
            .filter(|until| *until > now_ms)
    }

    fn record_failure(&mut self, key: &K, now_ms: i64, s: &ThrottleSettings) {
        let window = duration_ms(s.window);
        if !self.entries.contains_key(key) && self.entries.len() >= self.max_entries {
            self.evict(now_ms, window);
        }
        let entry = self.entries.entry(key.clone()).or_insert(Failures {
            count: 0,
            last_ms: now_ms,
            locked_until_ms: i64::MIN,
        });
        if entry.locked_until_ms <= now_ms && now_ms.saturating_sub(entry.last_ms) >= window {
            entry.count = 0;
        }
        entry.count = entry.count.saturating_add(1);
        entry.last_ms = now_ms;
        if entry.count > self.free {
            let lock = lockout(entry.count - self.free, s.max_lockout);
            entry.locked_until_ms = now_ms.saturating_add(duration_ms(lock));
        }
    }

    fn forget(&mut self, key: &K) {
        self.entries.remove(key);
    }

    fn evict(&mut self, now_ms: i64, window: i64) {
        self.entries
            .retain(|_, f| f.locked_until_ms > now_ms || now_ms.saturating_sub(f.last_ms) < window);
        if self.entries.len() >= self.max_entries {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, f)| f.last_ms)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.entries.remove(&k);
            }
        }
    }
}

/// The n-th lock (n ≥ 1) lasts 2^(n-1) seconds, at most `cap`.
pub fn lockout(n: u32, cap: Duration) -> Duration {
    let exp = n.saturating_sub(1).min(30);
    Duration::from_secs(1u64 << exp).min(cap)
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Failures per account (normalised e-mail) and per client address.
pub struct SignInThrottle {
    settings: ThrottleSettings,
    accounts: Mutex<Counters<String>>,
    addresses: Mutex<Counters<IpAddr>>,
}

/// The account key of an e-mail: trimmed, lower-case.
pub fn account_key(email: &str) -> String {
    email.trim().to_lowercase()
}

impl SignInThrottle {
    pub fn new(settings: ThrottleSettings) -> SignInThrottle {
        SignInThrottle::with_capacity(settings, MAX_TRACKED)
    }

    fn with_capacity(settings: ThrottleSettings, max_entries: usize) -> SignInThrottle {
        SignInThrottle {
            settings,
            accounts: Mutex::new(Counters::new(settings.account_free_failures, max_entries)),
            addresses: Mutex::new(Counters::new(settings.address_free_failures, max_entries)),
        }
    }

    /// Refuses the attempt while the account or the address is locked.
    pub fn check(
        &self,
        account: Option<&str>,
        address: Option<IpAddr>,
        now_ms: i64,
    ) -> Result<(), Locked> {
        let by_account = account.and_then(|a| {
            lock(&self.accounts).and_then(|c| c.locked_until(&a.to_string(), now_ms))
        });
        let by_address =
            address.and_then(|a| lock(&self.addresses).and_then(|c| c.locked_until(&a, now_ms)));
        match by_account.max(by_address) {
            Some(until) => Err(Locked {
                retry_after_secs: u64::try_from(until.saturating_sub(now_ms))
                    .unwrap_or(0)
                    .div_ceil(1000),
            }),
            None => Ok(()),
        }
    }

    pub fn record_failure(&self, account: Option<&str>, address: Option<IpAddr>, now_ms: i64) {
        if let Some(a) = account {
            if let Some(mut c) = lock(&self.accounts) {
                c.record_failure(&a.to_string(), now_ms, &self.settings);
            }
        }
        if let Some(a) = address {
            if let Some(mut c) = lock(&self.addresses) {
                c.record_failure(&a, now_ms, &self.settings);
            }
        }
    }

    /// A success clears the account's failures. The address's stay: else an
    /// attacker could wipe them by signing in to an account of their own
    /// between guesses.
    pub fn record_success(&self, account: &str) {
        if let Some(mut c) = lock(&self.accounts) {
            c.forget(&account.to_string());
        }
    }
}

/// A poisoned lock (a panic while counting) disables the throttle for that
/// kind rather than failing every sign-in.
fn lock<T>(m: &Mutex<T>) -> Option<std::sync::MutexGuard<'_, T>> {
    m.lock().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADDR: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const OTHER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    fn settings() -> ThrottleSettings {
        ThrottleSettings {
            account_free_failures: 5,
            address_free_failures: 20,
            window: Duration::from_secs(900),
            max_lockout: Duration::from_secs(300),
        }
    }

    fn fail(t: &SignInThrottle, account: &str, addr: IpAddr, now: i64) {
        t.record_failure(Some(account), Some(addr), now);
    }

    #[test]
    fn lockouts_double_from_one_second_up_to_the_cap() {
        let cap = Duration::from_secs(300);
        let secs: Vec<u64> = (1..=11).map(|n| lockout(n, cap).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(lockout(u32::MAX, cap), cap);
    }

    #[test]
    fn five_account_failures_are_free_and_the_sixth_locks_for_one_second() {
        let t = SignInThrottle::new(settings());
        for i in 0..5 {
            assert!(t.check(Some("a@x"), Some(ADDR), i).is_ok());
            fail(&t, "a@x", ADDR, i);
        }
        assert!(t.check(Some("a@x"), Some(ADDR), 5).is_ok());
        fail(&t, "a@x", ADDR, 1000);
        assert_eq!(
            t.check(Some("a@x"), Some(ADDR), 1000),
            Err(Locked {
                retry_after_secs: 1
            })
        );
        assert_eq!(
            t.check(Some("a@x"), Some(OTHER), 1001),
            Err(Locked {
                retry_after_secs: 1
            }),
            "the account is locked from every address"
        );
        assert!(t.check(Some("a@x"), Some(ADDR), 2000).is_ok());
        // The next failure locks for 2 s, then 4 s.
        fail(&t, "a@x", ADDR, 2000);
        assert_eq!(
            t.check(Some("a@x"), None, 2001)
                .map_err(|l| l.retry_after_secs),
            Err(2)
        );
        fail(&t, "a@x", ADDR, 4000);
        assert_eq!(
            t.check(Some("a@x"), None, 4500)
                .map_err(|l| l.retry_after_secs),
            Err(4),
            "3.5 s rounds up to 4"
        );
    }

    #[test]
    fn no_lock_outlasts_the_cap_however_many_failures() {
        let t = SignInThrottle::new(settings());
        let mut now = 0;
        for _ in 0..100 {
            fail(&t, "a@x", ADDR, now);
            now += 1;
        }
        let locked = t.check(Some("a@x"), None, now).unwrap_err();
        assert!(locked.retry_after_secs <= 300, "{locked:?}");
        assert!(t.check(Some("a@x"), None, now + 300_000).is_ok());
    }

    #[test]
    fn twenty_address_failures_are_free_across_accounts() {
        let t = SignInThrottle::new(settings());
        for i in 0..20 {
            fail(&t, &format!("user{i}@x"), ADDR, i);
        }
        assert!(t.check(Some("new@x"), Some(ADDR), 20).is_ok());
        fail(&t, "new@x", ADDR, 20);
        assert!(t.check(Some("fresh@x"), Some(ADDR), 21).is_err());
        assert!(
            t.check(Some("fresh@x"), Some(OTHER), 21).is_ok(),
            "another address and account are unaffected"
        );
    }

    #[test]
    fn a_success_resets_the_account_but_not_the_address() {
        let t = SignInThrottle::new(settings());
        for i in 0..6 {
            fail(&t, "a@x", ADDR, i);
        }
        t.record_success("a@x");
        assert!(t.check(Some("a@x"), None, 10).is_ok());
        for i in 0..5 {
            fail(&t, "a@x", OTHER, 100 + i);
        }
        assert!(
            t.check(Some("a@x"), None, 200).is_ok(),
            "five free failures again"
        );
        // The address keeps its six failures: 14 more free ones, then locked.
        for i in 0..14 {
            t.record_failure(None, Some(ADDR), 300 + i);
        }
        assert!(t.check(None, Some(ADDR), 400).is_ok());
        t.record_failure(None, Some(ADDR), 400);
        assert!(t.check(None, Some(ADDR), 401).is_err());
    }

    #[test]
    fn failures_are_forgotten_a_window_after_the_last_one() {
        let t = SignInThrottle::new(settings());
        for i in 0..5 {
            fail(&t, "a@x", ADDR, i);
        }
        let later = 4 + 900_000;
        fail(&t, "a@x", ADDR, later);
        assert!(
            t.check(Some("a@x"), None, later).is_ok(),
            "counting started again"
        );
        fail(&t, "a@x", ADDR, later + 899_999);
        for i in 0..3 {
            fail(&t, "a@x", ADDR, later + 900_000 + i);
        }
        assert!(t.check(Some("a@x"), None, later + 900_010).is_ok());
    }

    #[test]
    fn memory_is_bounded_evicting_forgotten_then_oldest_keys() {
        let t = SignInThrottle::with_capacity(settings(), 3);
        for i in 0..3 {
            fail(&t, &format!("u{i}@x"), ADDR, 0);
        }
        // u0 has locked nothing; at the cap, the oldest entry goes.
        fail(&t, "u3@x", OTHER, 10);
        let accounts = lock(&t.accounts).unwrap();
        assert_eq!(accounts.entries.len(), 3);
        assert!(accounts.entries.contains_key("u3@x"));
        drop(accounts);
        // Entries past the window are evicted first.
        let t = SignInThrottle::with_capacity(settings(), 2);
        fail(&t, "old@x", ADDR, 0);
        fail(&t, "recent@x", ADDR, 800_000);
        fail(&t, "new@x", ADDR, 950_000);
        let accounts = lock(&t.accounts).unwrap();
        assert!(accounts.entries.contains_key("recent@x"));
        assert!(accounts.entries.contains_key("new@x"));
    }

    #[test]
    fn account_keys_ignore_case_and_spaces() {
        assert_eq!(account_key("  Admin@Example.COM "), "admin@example.com");
    }
}
