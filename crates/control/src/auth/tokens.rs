//! IdTokens and AccessTokens are EdDSA-signed JWTs; RefreshTokens are opaque
//! random strings of which only a SHA-256 is stored.

use super::keys::{init_keys, plausible_kid, KeyRing};
use super::SigningKey;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{Algorithm, Header, Validation};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use svs_store::{SigningKeyRecord, Store};
use tokio_util::sync::CancellationToken;

pub const AUDIENCE: &str = "svs";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenUse {
    Id,
    Access,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    /// User id.
    pub sub: String,
    pub aud: String,
    pub exp: u64,
    pub iat: u64,
    pub token_use: TokenUse,
    pub email: String,
    pub name: String,
    /// Tenant name and id.
    pub tenant: String,
    pub tenant_id: i64,
    /// The user was an administrator when the token was issued. Absent in
    /// tokens from before roles were read: not an administrator.
    #[serde(default)]
    pub admin: bool,
    /// The user's token generation at issue: the service refuses a token
    /// older than the user's current one (after a disable or a password
    /// reset). Absent in tokens from before: generation 0.
    #[serde(default)]
    pub generation: i64,
}

impl Claims {
    pub fn user_id(&self) -> Option<i64> {
        self.sub.parse().ok()
    }
}

/// The user a token is issued to.
#[derive(Debug, Clone, Copy)]
pub struct TokenSubject<'a> {
    pub user_id: i64,
    pub email: &'a str,
    pub name: &'a str,
    pub tenant: &'a str,
    pub tenant_id: i64,
    pub admin: bool,
    pub generation: i64,
}

/// What `/signin` and `/refresh` hand out.
#[derive(Debug, Clone)]
pub struct TokenSet {
    pub access_token: String,
    pub id_token: String,
    pub expires_in: u64,
    /// `iat` of both tokens (Unix seconds).
    pub issued_at_secs: u64,
}

/// Verified tokens are remembered until they expire, so a busy client does
/// not pay a signature check per request. Bounded: cleared when full.
const VERIFIED_CACHE_MAX: usize = 10_000;

/// `token_clock_skew`'s default, for issuers built without the settings.
pub const DEFAULT_MAX_SKEW_SECS: u64 = 60;

/// How often a running service looks in the store for a rotated key (one
/// query of a few rows): a rotation by any instance or by `svs keys rotate`
/// signs everywhere within this (see `KEY_RELOAD_SECS`).
pub const KEY_CHECK_EVERY: Duration = Duration::from_secs(2);

/// At most this many store reads a second for tokens naming a key this
/// service does not know: a rotation elsewhere is seen at once, a flood of
/// made-up kids costs the store next to nothing.
const UNKNOWN_KID_RELOADS_PER_SEC: u32 = 10;

/// Where the keys come from: the store, shared by every instance.
struct KeySource {
    store: Arc<dyn Store>,
    /// One reload at a time (the periodic check, or one for an unknown kid).
    reload: tokio::sync::Mutex<ReloadState>,
}

struct ReloadState {
    /// (kid, retired_ms) of the keys in memory: an unchanged store is not
    /// turned into keys again.
    seen: Vec<(String, Option<i64>)>,
    /// When the last reload ended.
    done_at: Instant,
    /// The last reload failed (logged once until one succeeds).
    failing: bool,
    /// Reloads for unknown kids in the current second: since, how many.
    unknown_kid_reloads: (Instant, u32),
}

fn seen(records: &[SigningKeyRecord]) -> Vec<(String, Option<i64>)> {
    records
        .iter()
        .map(|r| (r.kid.clone(), r.retired_ms))
        .collect()
}

/// What the ring in memory says of a token's key.
enum Lookup {
    Verified(Claims),
    /// The key is known but refuses the token (bad signature, claims, or
    /// a retired key whose tokens have all expired).
    Refused,
    /// No key of that kid in memory.
    Unknown,
}

/// The ring in memory and where it comes from, shared with the task that
/// follows the store (`TokenIssuer::watch`).
struct Keys {
    ring: RwLock<KeyRing>,
    source: Option<KeySource>,
}

pub struct TokenIssuer {
    keys: Arc<Keys>,
    issuer: String,
    lifetime_secs: u64,
    /// How far in the future a token's `iat` may be (clock skew).
    max_skew_secs: u64,
    validation: Validation,
    verified: Mutex<HashMap<String, Arc<Claims>>>,
}

impl Keys {
    /// Reads the store's keys now and takes them when they changed. A ring
    /// that cannot be read or used is logged and the keys in memory stay.
    async fn check(&self) {
        let Some(source) = &self.source else { return };
        let mut state = source.reload.lock().await;
        self.reload(source, &mut state).await;
    }

    async fn reload(&self, source: &KeySource, state: &mut ReloadState) {
        let result = match source.store.signing_keys().await {
            Ok(records) if seen(&records) == state.seen => Ok(None),
            Ok(records) => KeyRing::from_records(&records).map(|ring| Some((ring, records))),
            Err(e) => Err(format!("cannot read the token signing keys: {e}")),
        };
        state.done_at = Instant::now();
        match result {
            Ok(changed) => {
                if state.failing {
                    tracing::info!("token signing keys readable again");
                    state.failing = false;
                }
                let Some((ring, records)) = changed else {
                    return;
                };
                tracing::info!(kid = %ring.current.kid, retired = ring.retired.len(), "token signing keys reloaded");
                if let Ok(mut keys) = self.ring.write() {
                    *keys = ring;
                    state.seen = seen(&records);
                }
            }
            Err(e) => {
                if !state.failing {
                    tracing::warn!(error = %e, "keeping the token signing keys in memory");
                    state.failing = true;
                }
            }
        }
    }

    /// Reloads the keys for a token of a key not in memory (rotated on
    /// another instance a moment ago), unless a reload ended since the
    /// call began or too many ran this second. True when the ring may have
    /// changed.
    async fn reload_for_unknown_kid(&self, kid: &str) -> bool {
        let Some(source) = &self.source else {
            return false;
        };
        if !plausible_kid(kid) {
            return false;
        }
        let asked = Instant::now();
        let mut state = source.reload.lock().await;
        if state.done_at > asked {
            return true;
        }
        let (since, count) = state.unknown_kid_reloads;
        let count = if since.elapsed() >= Duration::from_secs(1) {
            state.unknown_kid_reloads.0 = Instant::now();
            0
        } else {
            count
        };
        if count >= UNKNOWN_KID_RELOADS_PER_SEC {
            return false;
        }
        state.unknown_kid_reloads.1 = count + 1;
        self.reload(source, &mut state).await;
        true
    }
}

impl TokenIssuer {
    /// One fixed key (tests).
    pub fn new(key: SigningKey, issuer: String, lifetime_secs: u64) -> TokenIssuer {
        TokenIssuer::with_keys(
            KeyRing {
                current: key,
                retired: Vec::new(),
            },
            None,
            issuer,
            lifetime_secs,
        )
    }

    /// The keys of the store (made, or imported from the key files of
    /// `data_dir`, on the first start: `init_keys`). Call
    /// [`TokenIssuer::watch`] to follow rotations.
    pub async fn from_store(
        store: Arc<dyn Store>,
        data_dir: &Path,
        now_ms: i64,
        issuer: String,
        lifetime_secs: u64,
    ) -> Result<TokenIssuer, String> {
        init_keys(store.as_ref(), data_dir, now_ms).await?;
        let records = store
            .signing_keys()
            .await
            .map_err(|e| format!("cannot read the token signing keys: {e}"))?;
        let keys = KeyRing::from_records(&records)?;
        let source = KeySource {
            store,
            reload: tokio::sync::Mutex::new(ReloadState {
                seen: seen(&records),
                done_at: Instant::now(),
                failing: false,
                unknown_kid_reloads: (Instant::now(), 0),
            }),
        };
        Ok(TokenIssuer::with_keys(
            keys,
            Some(source),
            issuer,
            lifetime_secs,
        ))
    }

    fn with_keys(
        keys: KeyRing,
        source: Option<KeySource>,
        issuer: String,
        lifetime_secs: u64,
    ) -> TokenIssuer {
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.set_issuer(&[issuer.as_str()]);
        validation.set_audience(&[AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = 0;
        // Expiry is checked in `verify` against the caller's clock (testable,
        // and the same clock that issued the token).
        validation.validate_exp = false;
        TokenIssuer {
            keys: Arc::new(Keys {
                ring: RwLock::new(keys),
                source,
            }),
            issuer,
            lifetime_secs,
            max_skew_secs: DEFAULT_MAX_SKEW_SECS,
            validation,
            verified: Mutex::new(HashMap::new()),
        }
    }

    /// Tokens issued (`iat`) more than `secs` after `now` are refused.
    pub fn with_max_clock_skew(mut self, secs: u64) -> TokenIssuer {
        self.max_skew_secs = secs;
        self
    }

    /// Valid at `now_secs`: before its expiry, and not issued in the future
    /// beyond the clock skew (a token "from tomorrow" was not made by this
    /// clock: a stolen key, or a host whose clock is wrong).
    fn live_at(&self, claims: &Claims, now_secs: u64) -> bool {
        claims.exp > now_secs && claims.iat <= now_secs.saturating_add(self.max_skew_secs)
    }

    /// Looks in the store every `KEY_CHECK_EVERY` until `shutdown`, and
    /// takes its keys when they changed (a rotation anywhere). Nothing for
    /// an issuer of fixed keys.
    pub fn watch(&self, shutdown: CancellationToken) {
        if self.keys.source.is_none() {
            return;
        }
        let keys = Arc::downgrade(&self.keys);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(KEY_CHECK_EVERY);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await;
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = ticks.tick() => {}
                }
                let Some(keys) = keys.upgrade() else {
                    return;
                };
                keys.check().await;
            }
        });
    }

    /// Reads the store's keys now and takes them when they changed (what
    /// `watch` does every `KEY_CHECK_EVERY`).
    pub async fn check_keys(&self) {
        self.keys.check().await;
    }

    /// The id (`kid`) of the key that signs now.
    pub fn key_id(&self) -> String {
        self.keys
            .ring
            .read()
            .map(|k| k.current.kid.clone())
            .unwrap_or_default()
    }

    /// (kid, public key as base64url) of every key whose tokens may still
    /// be valid at `now_secs`: the current one first, then retired ones.
    pub fn public_keys(&self, now_secs: u64) -> Vec<(String, String)> {
        let Ok(keys) = self.keys.ring.read() else {
            return Vec::new();
        };
        std::iter::once(&keys.current)
            .chain(
                keys.retired
                    .iter()
                    .filter(|r| r.live_until_secs(self.lifetime_secs) > now_secs)
                    .map(|r| &r.key),
            )
            .map(|k| (k.kid.clone(), k.public_x.clone()))
            .collect()
    }

    pub fn lifetime_secs(&self) -> u64 {
        self.lifetime_secs
    }

    /// Signs a fresh IdToken and AccessToken, issued at `now_secs`.
    pub fn issue(
        &self,
        subject: &TokenSubject,
        now_secs: u64,
    ) -> Result<TokenSet, jsonwebtoken::errors::Error> {
        let keys = self
            .keys
            .ring
            .read()
            .map_err(|_| jsonwebtoken::errors::ErrorKind::InvalidKeyFormat)?;
        let key = &keys.current;
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(key.kid.clone());
        let claims = |token_use| Claims {
            iss: self.issuer.clone(),
            sub: subject.user_id.to_string(),
            aud: AUDIENCE.to_string(),
            exp: now_secs.saturating_add(self.lifetime_secs),
            iat: now_secs,
            token_use,
            email: subject.email.to_string(),
            name: subject.name.to_string(),
            tenant: subject.tenant.to_string(),
            tenant_id: subject.tenant_id,
            admin: subject.admin,
            generation: subject.generation,
        };
        Ok(TokenSet {
            access_token: jsonwebtoken::encode(&header, &claims(TokenUse::Access), &key.encoding)?,
            id_token: jsonwebtoken::encode(&header, &claims(TokenUse::Id), &key.encoding)?,
            expires_in: self.lifetime_secs,
            issued_at_secs: now_secs,
        })
    }

    /// Checks signature, issuer, audience, expiry, issue time and the
    /// token's use. A token is valid up to, not including, its `exp` second
    /// on `now_secs` (no leeway), and from `max_skew_secs` before its `iat`.
    /// A token naming a key not in memory makes the keys reload first (a
    /// key rotated on another instance verifies at once).
    pub async fn verify(
        &self,
        token: &str,
        expected: TokenUse,
        now_secs: u64,
    ) -> Option<Arc<Claims>> {
        if let Ok(cache) = self.verified.lock() {
            if let Some(claims) = cache.get(token) {
                return (self.live_at(claims, now_secs) && claims.token_use == expected)
                    .then(|| claims.clone());
            }
        }
        let header = jsonwebtoken::decode_header(token).ok()?;
        let kid = header.kid?;
        let claims = match self.lookup(token, &kid, now_secs) {
            Lookup::Verified(claims) => claims,
            Lookup::Refused => return None,
            Lookup::Unknown => {
                if !self.keys.reload_for_unknown_kid(&kid).await {
                    return None;
                }
                match self.lookup(token, &kid, now_secs) {
                    Lookup::Verified(claims) => claims,
                    Lookup::Refused | Lookup::Unknown => return None,
                }
            }
        };
        let claims = Arc::new(claims);
        if !self.live_at(&claims, now_secs) {
            return None;
        }
        if let Ok(mut cache) = self.verified.lock() {
            if cache.len() >= VERIFIED_CACHE_MAX {
                cache.retain(|_, c| c.exp > now_secs);
                if cache.len() >= VERIFIED_CACHE_MAX {
                    cache.clear();
                }
            }
            cache.insert(token.to_string(), claims.clone());
        }
        (claims.token_use == expected).then_some(claims)
    }

    /// The token checked against the key `kid` of the ring in memory: the
    /// current key, or a retired one whose tokens may still live.
    fn lookup(&self, token: &str, kid: &str, now_secs: u64) -> Lookup {
        let Ok(keys) = self.keys.ring.read() else {
            return Lookup::Refused;
        };
        let key = if keys.current.kid == kid {
            &keys.current
        } else {
            match keys.retired.iter().find(|r| r.key.kid == kid) {
                Some(r) if r.live_until_secs(self.lifetime_secs) > now_secs => &r.key,
                Some(_) => return Lookup::Refused,
                None => return Lookup::Unknown,
            }
        };
        match jsonwebtoken::decode::<Claims>(token, &key.decoding, &self.validation) {
            Ok(data) => Lookup::Verified(data.claims),
            Err(_) => Lookup::Refused,
        }
    }
}

/// A new opaque refresh token and the hash to store for it.
pub fn new_refresh_token() -> (String, String) {
    let bytes: [u8; 32] = rand::random();
    let token = URL_SAFE_NO_PAD.encode(bytes);
    let hash = refresh_token_hash(&token);
    (token, hash)
}

pub fn refresh_token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::keys::rotate_keys;
    use svs_store::testing::{temp_sqlite, temp_sqlite_twice};

    fn issuer() -> TokenIssuer {
        TokenIssuer::new(SigningKey::from_seed(&[7; 32]), "svs".into(), 60)
    }

    fn subject(admin: bool) -> TokenSubject<'static> {
        TokenSubject {
            user_id: 3,
            email: "a@b.c",
            name: "a",
            tenant: "t1",
            tenant_id: 1,
            admin,
            generation: 0,
        }
    }

    #[tokio::test]
    async fn the_admin_claim_follows_the_subject_and_defaults_to_false() {
        let t = issuer();
        let admin = t.issue(&subject(true), 1000).unwrap();
        assert!(
            t.verify(&admin.id_token, TokenUse::Id, 1001)
                .await
                .unwrap()
                .admin
        );
        let user = t.issue(&subject(false), 1000).unwrap();
        assert!(
            !t.verify(&user.id_token, TokenUse::Id, 1001)
                .await
                .unwrap()
                .admin
        );
        // A token signed before the claim existed reads as not an administrator.
        let old: Claims = serde_json::from_value(serde_json::json!({
            "iss": "svs", "sub": "3", "aud": "svs", "exp": 2000, "iat": 1000,
            "token_use": "id", "email": "a@b.c", "name": "a", "tenant": "t1", "tenant_id": 1
        }))
        .unwrap();
        assert!(!old.admin);
    }

    #[tokio::test]
    async fn issued_tokens_verify_for_their_own_use_only() {
        let t = issuer();
        let set = t.issue(&subject(false), 1000).unwrap();
        let id = t.verify(&set.id_token, TokenUse::Id, 1001).await.unwrap();
        assert_eq!(id.user_id(), Some(3));
        assert_eq!(id.tenant, "t1");
        assert!(t
            .verify(&set.id_token, TokenUse::Access, 1001)
            .await
            .is_none());
        assert!(t
            .verify(&set.access_token, TokenUse::Access, 1001)
            .await
            .is_some());
        assert!(t
            .verify(&set.access_token, TokenUse::Id, 1001)
            .await
            .is_none());
    }

    #[tokio::test]
    async fn expired_tokens_are_refused_even_when_cached() {
        let t = issuer();
        let set = t.issue(&subject(false), 1000).unwrap();
        assert!(t.verify(&set.id_token, TokenUse::Id, 1059).await.is_some());
        assert!(t.verify(&set.id_token, TokenUse::Id, 1060).await.is_none());
    }

    #[tokio::test]
    async fn tokens_issued_beyond_the_clock_skew_in_the_future_are_refused() {
        let t = issuer().with_max_clock_skew(30);
        let set = t.issue(&subject(false), 1030).unwrap();
        assert!(t.verify(&set.id_token, TokenUse::Id, 999).await.is_none());
        assert!(t.verify(&set.id_token, TokenUse::Id, 1000).await.is_some());
        // Once verified (cached), still refused on a clock set back.
        assert!(t.verify(&set.id_token, TokenUse::Id, 999).await.is_none());
        let tomorrow = t.issue(&subject(false), 1000 + 86_400).unwrap();
        assert!(t
            .verify(&tomorrow.id_token, TokenUse::Id, 1000)
            .await
            .is_none());
        assert!(t
            .verify(&tomorrow.access_token, TokenUse::Access, 1000)
            .await
            .is_none());
    }

    #[tokio::test]
    async fn tokens_from_another_key_or_tampered_are_refused() {
        let t = issuer();
        let other = TokenIssuer::new(SigningKey::from_seed(&[8; 32]), "svs".into(), 60);
        let set = other.issue(&subject(false), 1000).unwrap();
        assert!(t.verify(&set.id_token, TokenUse::Id, 1001).await.is_none());
        let good = t.issue(&subject(false), 1000).unwrap().id_token;
        let mut parts: Vec<String> = good.split('.').map(String::from).collect();
        parts[1] = URL_SAFE_NO_PAD.encode(br#"{"sub":"1"}"#);
        assert!(t
            .verify(&parts.join("."), TokenUse::Id, 1001)
            .await
            .is_none());
        assert!(t.verify("garbage", TokenUse::Id, 1001).await.is_none());
    }

    /// A service on a new store: its key made in the store.
    async fn on_store(store: Arc<dyn Store>, dir: &Path) -> TokenIssuer {
        TokenIssuer::from_store(store, dir, 0, "svs".into(), 60)
            .await
            .unwrap()
    }

    fn kids(t: &TokenIssuer, now_secs: u64) -> Vec<String> {
        t.public_keys(now_secs)
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    }

    #[tokio::test]
    async fn a_rotated_key_signs_and_the_retired_one_verifies_until_its_tokens_expire() {
        let (dir, store) = temp_sqlite().await;
        let store: Arc<dyn Store> = Arc::new(store);
        let t = on_store(Arc::clone(&store), dir.path()).await;
        let old = t.issue(&subject(false), 1000).unwrap();
        let old_kid = t.key_id();
        rotate_keys(store.as_ref(), dir.path(), 1_000_000, 60)
            .await
            .unwrap();
        // Until the store is looked at again, the old key signs.
        assert_eq!(t.key_id(), old_kid);
        t.check_keys().await;
        let new = t.issue(&subject(false), 1001).unwrap();
        let new_kid = t.key_id();
        assert_ne!(new_kid, old_kid);
        assert_eq!(kids(&t, 1001), [new_kid.clone(), old_kid.clone()]);
        assert!(t.verify(&old.id_token, TokenUse::Id, 1001).await.is_some());
        assert!(t.verify(&new.id_token, TokenUse::Id, 1001).await.is_some());
        // Retired at 1000, tokens of 60 s, 5 s of slack: gone at 1065.
        assert_eq!(kids(&t, 1064), [new_kid.clone(), old_kid.clone()]);
        assert_eq!(kids(&t, 1065), [new_kid]);
        let late = t.issue(&subject(false), 1064).unwrap();
        assert!(t.verify(&late.id_token, TokenUse::Id, 1065).await.is_some());
        let fresh_issuer = on_store(store, dir.path()).await;
        assert!(fresh_issuer
            .verify(&old.id_token, TokenUse::Id, 1065)
            .await
            .is_none());
        assert!(fresh_issuer
            .verify(&old.id_token, TokenUse::Id, 1059)
            .await
            .is_some());
    }

    #[tokio::test]
    async fn a_token_of_a_key_rotated_on_another_instance_verifies_at_once() {
        let (dir, first, second) = temp_sqlite_twice().await;
        let second: Arc<dyn Store> = Arc::new(second);
        let a = on_store(Arc::new(first), dir.path()).await;
        let b = on_store(Arc::clone(&second), dir.path()).await;
        assert_eq!(a.key_id(), b.key_id());
        let before = a.issue(&subject(false), 1000).unwrap();
        rotate_keys(second.as_ref(), dir.path(), 1_000_000, 60)
            .await
            .unwrap();
        b.check_keys().await;
        let after = b.issue(&subject(false), 1001).unwrap();
        assert_ne!(a.key_id(), b.key_id());
        // Not a key `a` knows: it looks in the store before refusing.
        assert!(a
            .verify(&after.id_token, TokenUse::Id, 1001)
            .await
            .is_some());
        assert_eq!(a.key_id(), b.key_id());
        assert!(b
            .verify(&before.id_token, TokenUse::Id, 1001)
            .await
            .is_some());
    }

    #[tokio::test]
    async fn tokens_of_unknown_keys_reload_the_keys_a_few_times_a_second_at_most() {
        let (dir, store) = temp_sqlite().await;
        let t = on_store(Arc::new(store), dir.path()).await;
        let stranger = TokenIssuer::new(SigningKey::from_seed(&[9; 32]), "svs".into(), 60);
        let token = stranger.issue(&subject(false), 1000).unwrap().id_token;
        for _ in 0..(2 * UNKNOWN_KID_RELOADS_PER_SEC) {
            assert!(t.verify(&token, TokenUse::Id, 1001).await.is_none());
        }
        let source = t.keys.source.as_ref().unwrap();
        let reloads = source.reload.lock().await.unknown_kid_reloads.1;
        assert!(
            (1..=UNKNOWN_KID_RELOADS_PER_SEC).contains(&reloads),
            "{reloads}"
        );
        // A kid that cannot be ours is refused without a look.
        source.reload.lock().await.unknown_kid_reloads.1 = 0;
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some("not-a-kid".into());
        let made_up = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&header).unwrap()),
            token.split_once('.').unwrap().1
        );
        assert!(t.verify(&made_up, TokenUse::Id, 1001).await.is_none());
        assert_eq!(source.reload.lock().await.unknown_kid_reloads.1, 0);
    }

    #[tokio::test]
    async fn a_watching_service_takes_a_rotation_within_the_check_interval() {
        let (dir, store) = temp_sqlite().await;
        let store: Arc<dyn Store> = Arc::new(store);
        let t = on_store(Arc::clone(&store), dir.path()).await;
        let shutdown = CancellationToken::new();
        t.watch(shutdown.clone());
        let old_kid = t.key_id();
        let ring = rotate_keys(store.as_ref(), dir.path(), 1_000_000, 60)
            .await
            .unwrap();
        tokio::time::sleep(KEY_CHECK_EVERY + Duration::from_millis(500)).await;
        assert_eq!(t.key_id(), ring.current.kid);
        assert_ne!(t.key_id(), old_kid);
        shutdown.cancel();
    }

    #[test]
    fn refresh_tokens_are_random_and_hashed() {
        let (a, ha) = new_refresh_token();
        let (b, _) = new_refresh_token();
        assert_ne!(a, b);
        assert_eq!(ha, refresh_token_hash(&a));
        assert_eq!(ha.len(), 64);
    }
}
