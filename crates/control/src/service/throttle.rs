//! Brute-force protection for sign-in and refresh, in the spirit of
//! Cognito's lockout: a few failures are free, each further one locks the
//! key (an account or a client address) for 1 s, 2 s, 4 s, ... up to a cap,
//! counted from the answer to the failed attempt (a slow password check
//! does not eat into the lock it sets).
//! While a key is locked, attempts are refused before any password is
//! hashed and are not counted, so one lock never outlasts the cap. Failures
//! are forgotten once `window` has passed since the last one.
//!
//! An attempt let past the locks is counted as a failure at once (an
//! `Attempt`), until its password proves right: checks still waiting then
//! count too, so guesses sent all at once get no more password checks than
//! guesses sent one after another.
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

    /// Counts a failure; tells which lock it set, to undo it on release.
    fn record_failure(&mut self, key: &K, now_ms: i64, s: &ThrottleSettings) -> Reserved {
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
        let mut reserved = Reserved { lock: None };
        if entry.count > self.free {
            let length_ms = duration_ms(lockout(entry.count - self.free, s.max_lockout));
            let until = now_ms.saturating_add(length_ms);
            reserved.lock = Some(ReservedLock {
                until,
                before: entry.locked_until_ms,
                length_ms,
            });
            entry.locked_until_ms = until;
        }
        reserved
    }

    /// The failure is answered at `now_ms`: the lock it set, unless a later
    /// failure set another since, runs its whole length from now.
    fn confirm(&mut self, key: &K, reserved: Reserved, now_ms: i64) {
        if let (Some(entry), Some(lock)) = (self.entries.get_mut(key), reserved.lock) {
            if entry.locked_until_ms == lock.until {
                entry.locked_until_ms = lock.until.max(now_ms.saturating_add(lock.length_ms));
            }
        }
    }

    /// Takes back a failure counted by `record_failure`, and the lock it
    /// set unless a later failure set another since.
    fn release(&mut self, key: &K, reserved: Reserved) {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.count = entry.count.saturating_sub(1);
            if let Some(lock) = reserved.lock {
                if entry.locked_until_ms == lock.until {
                    entry.locked_until_ms = lock.before;
                }
            }
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

/// What a reservation did to one key: the lock it set, if any.
#[derive(Debug, Clone, Copy)]
struct Reserved {
    lock: Option<ReservedLock>,
}

#[derive(Debug, Clone, Copy)]
struct ReservedLock {
    /// When the lock ends, counted from the reservation.
    until: i64,
    /// The end of the lock before it, put back if the password was right.
    before: i64,
    length_ms: i64,
}

/// One attempt let past the locks, counted as a failure of its account and
/// address from the start. Dropping it (or `failed`) leaves the failure
/// counted, so an attempt cut short (a store error, a client gone) never
/// costs less than a wrong password.
#[must_use = "an attempt counts as a failure unless it succeeded or was not checked"]
pub struct Attempt<'a> {
    throttle: &'a SignInThrottle,
    account: Option<(String, Reserved)>,
    address: Option<(IpAddr, Reserved)>,
}

impl Attempt<'_> {
    /// The password was wrong, answered at `now_ms`: the failure stays
    /// counted and a lock it set lasts its whole length from now.
    pub fn failed(self, now_ms: i64) {
        if let Some((account, reserved)) = &self.account {
            if let Some(mut c) = lock(&self.throttle.accounts) {
                c.confirm(account, *reserved, now_ms);
            }
        }
        if let Some((address, reserved)) = &self.address {
            if let Some(mut c) = lock(&self.throttle.addresses) {
                c.confirm(address, *reserved, now_ms);
            }
        }
    }

    /// The password was right: the account's failures are cleared (see
    /// `SignInThrottle::record_success`) and the address's reservation is
    /// taken back; its earlier failures stay.
    pub fn succeeded(self) {
        if let Some((account, _)) = &self.account {
            self.throttle.record_success(account);
        }
        self.release_address();
    }

    /// No password was checked (the check pool was full): nothing counts.
    pub fn not_checked(self) {
        if let Some((account, reserved)) = &self.account {
            if let Some(mut c) = lock(&self.throttle.accounts) {
                c.release(account, *reserved);
            }
        }
        self.release_address();
    }

    fn release_address(&self) {
        if let Some((address, reserved)) = &self.address {
            if let Some(mut c) = lock(&self.throttle.addresses) {
                c.release(address, *reserved);
            }
        }
    }
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

    /// Lets an attempt through unless the account or the address is locked,
    /// counting it as a failure of both at once: the check and the count
    /// happen under the same locks, so concurrent attempts cannot all pass
    /// the check before any of them is counted.
    pub fn reserve(
        &self,
        account: Option<&str>,
        address: Option<IpAddr>,
        now_ms: i64,
    ) -> Result<Attempt<'_>, Locked> {
        // Always accounts, then addresses (the only place holding both).
        let mut accounts = lock(&self.accounts);
        let mut addresses = lock(&self.addresses);
        let account = account.map(str::to_string);
        let by_account = account
            .as_ref()
            .zip(accounts.as_ref())
            .and_then(|(a, c)| c.locked_until(a, now_ms));
        let by_address = address
            .zip(addresses.as_ref())
            .and_then(|(a, c)| c.locked_until(&a, now_ms));
        if let Some(until) = by_account.max(by_address) {
            return Err(locked(until, now_ms));
        }
        let account = account.and_then(|a| {
            let reserved = accounts
                .as_mut()?
                .record_failure(&a, now_ms, &self.settings);
            Some((a, reserved))
        });
        let address = address.and_then(|a| {
            let reserved = addresses
                .as_mut()?
                .record_failure(&a, now_ms, &self.settings);
            Some((a, reserved))
        });
        Ok(Attempt {
            throttle: self,
            account,
            address,
        })
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
            Some(until) => Err(locked(until, now_ms)),
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

fn locked(until_ms: i64, now_ms: i64) -> Locked {
    Locked {
        retry_after_secs: u64::try_from(until_ms.saturating_sub(now_ms))
            .unwrap_or(0)
            .div_ceil(1000),
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
    fn attempts_waiting_for_their_check_count_so_a_burst_gets_six_checks() {
        let t = SignInThrottle::new(settings());
        // Sixty attempts at once: none has been checked when the next comes.
        let (passed, refused): (Vec<_>, Vec<_>) = (0..60)
            .map(|_| t.reserve(Some("a@x"), Some(ADDR), 0))
            .partition(Result::is_ok);
        assert_eq!(passed.len(), 6, "five free failures and the one that locks");
        assert!(refused.iter().all(|r| matches!(
            r,
            Err(Locked {
                retry_after_secs: 1
            })
        )));
        passed.into_iter().flatten().for_each(|a| a.failed(0));
        // As after six wrong passwords one after another: locked for 1 s,
        // then one more check locks for 2 s.
        assert!(t.reserve(Some("a@x"), None, 999).is_err());
        let seventh = t.reserve(Some("a@x"), None, 1000);
        assert!(seventh.is_ok());
        assert!(t.reserve(Some("a@x"), None, 1000).is_err());
        drop(seventh);
        assert_eq!(
            t.check(Some("a@x"), None, 1000)
                .map_err(|l| l.retry_after_secs),
            Err(2),
            "a dropped attempt counts as a failure"
        );
    }

    #[test]
    fn a_burst_at_many_accounts_gets_the_addresss_twenty_one_checks() {
        let t = SignInThrottle::new(settings());
        let passed: Vec<_> = (0..200)
            .filter_map(|i| t.reserve(Some(&format!("u{i}@x")), Some(ADDR), 0).ok())
            .collect();
        assert_eq!(passed.len(), 21);
        assert!(t.reserve(Some("new@x"), Some(OTHER), 0).is_ok());
    }

    #[test]
    fn a_right_password_takes_its_reservation_back() {
        let t = SignInThrottle::new(settings());
        for i in 0..5 {
            fail(&t, &format!("u{i}@x"), ADDR, i);
        }
        // The sixth attempt locks the account while it waits for its check.
        let waiting: Vec<_> = (0..6)
            .map(|_| t.reserve(Some("a@x"), Some(ADDR), 10).expect("let through"))
            .collect();
        assert!(t.reserve(Some("a@x"), Some(OTHER), 10).is_err());
        let mut waiting = waiting.into_iter();
        waiting.next().expect("attempt").succeeded();
        assert!(
            t.reserve(Some("a@x"), Some(OTHER), 11).is_ok(),
            "the account's failures are cleared"
        );
        waiting.for_each(Attempt::not_checked);
        // The address keeps only its first 5 failures (the right password's
        // and the unchecked ones' were taken back): 15 more are free.
        for i in 0..15 {
            t.reserve(None, Some(ADDR), 20 + i)
                .expect("free")
                .failed(20 + i);
        }
        let locking = t.reserve(None, Some(ADDR), 40).expect("the 21st");
        assert!(t.reserve(None, Some(ADDR), 40).is_err());
        locking.not_checked();
        assert!(
            t.reserve(None, Some(ADDR), 40).is_ok(),
            "the lock it set went with it"
        );
    }

    #[test]
    fn releasing_keeps_a_lock_set_by_a_later_failure() {
        let t = SignInThrottle::new(settings());
        for i in 0..5 {
            fail(&t, "a@x", ADDR, i);
        }
        let slow = t.reserve(Some("a@x"), None, 10).expect("the sixth");
        // Its 1 s lock ends while it still waits; another attempt locks again.
        t.reserve(Some("a@x"), None, 1010)
            .expect("the seventh")
            .failed(1010);
        slow.not_checked();
        assert!(t.check(Some("a@x"), None, 1011).is_err());
    }

    #[test]
    fn a_lock_runs_its_whole_length_from_the_answer_to_a_slow_check() {
        let t = SignInThrottle::new(settings());
        for i in 0..5 {
            fail(&t, "a@x", ADDR, i);
        }
        // The sixth attempt's check takes 900 ms: its 1 s lock starts at
        // the answer, not when the check began.
        let slow = t.reserve(Some("a@x"), Some(ADDR), 100).expect("the sixth");
        slow.failed(1000);
        assert_eq!(
            t.check(Some("a@x"), Some(OTHER), 1999)
                .map_err(|l| l.retry_after_secs),
            Err(1)
        );
        assert!(t.check(Some("a@x"), Some(OTHER), 2000).is_ok());
        // A failure answered after a later one locked again leaves that
        // later lock alone.
        let slow = t.reserve(Some("a@x"), None, 2000).expect("the seventh");
        let later = t.reserve(Some("a@x"), None, 4000).expect("the eighth");
        later.failed(4000);
        slow.failed(4500);
        assert_eq!(
            t.check(Some("a@x"), None, 4000)
                .map_err(|l| l.retry_after_secs),
            Err(4)
        );
        assert!(t.check(Some("a@x"), None, 8000).is_ok());
    }

    #[test]
    fn account_keys_ignore_case_and_spaces() {
        assert_eq!(account_key("  Admin@Example.COM "), "admin@example.com");
    }
}
