//! IdTokens and AccessTokens are EdDSA-signed JWTs; RefreshTokens are opaque
//! random strings of which only a SHA-256 is stored.

use super::keys::{KeyRing, KeysFingerprint};
use super::SigningKey;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{Algorithm, Header, Validation};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

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

/// How often a running service looks for a rotated key (a few `stat`s).
const KEY_CHECK_EVERY: Duration = Duration::from_secs(1);

/// Where the keys come from, to notice `svs keys rotate`.
struct KeySource {
    dir: PathBuf,
    /// When the files were last looked at, and what they looked like.
    checked: Mutex<(Instant, Option<KeysFingerprint>)>,
}

pub struct TokenIssuer {
    keys: RwLock<KeyRing>,
    source: Option<KeySource>,
    issuer: String,
    lifetime_secs: u64,
    /// How far in the future a token's `iat` may be (clock skew).
    max_skew_secs: u64,
    validation: Validation,
    verified: Mutex<HashMap<String, Arc<Claims>>>,
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

    /// The keys of a data directory, re-read when a rotation changes them.
    pub fn from_data_dir(
        dir: PathBuf,
        issuer: String,
        lifetime_secs: u64,
    ) -> Result<TokenIssuer, String> {
        let keys = KeyRing::load(&dir)?;
        let source = KeySource {
            checked: Mutex::new((Instant::now(), KeyRing::fingerprint(&dir))),
            dir,
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
            keys: RwLock::new(keys),
            source,
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

    /// Re-reads the keys when their files changed (a rotation), at most once
    /// per `KEY_CHECK_EVERY`. A ring that cannot be read is logged and the
    /// keys in memory stay.
    fn reload_if_rotated(&self) {
        let Some(source) = &self.source else { return };
        let Ok(mut checked) = source.checked.lock() else {
            return;
        };
        if checked.0.elapsed() < KEY_CHECK_EVERY {
            return;
        }
        let now = KeyRing::fingerprint(&source.dir);
        *checked = (Instant::now(), checked.1);
        if now == checked.1 {
            return;
        }
        match KeyRing::load(&source.dir) {
            Ok(ring) => {
                tracing::info!(kid = %ring.current.kid, retired = ring.retired.len(), "token signing keys reloaded");
                if let Ok(mut keys) = self.keys.write() {
                    *keys = ring;
                }
                checked.1 = now;
            }
            Err(e) => tracing::warn!(error = %e, "cannot reload the token signing keys"),
        }
    }

    /// The id (`kid`) of the key that signs now.
    pub fn key_id(&self) -> String {
        self.reload_if_rotated();
        self.keys
            .read()
            .map(|k| k.current.kid.clone())
            .unwrap_or_default()
    }

    /// (kid, public key as base64url) of every key whose tokens may still
    /// be valid at `now_secs`: the current one first, then retired ones.
    pub fn public_keys(&self, now_secs: u64) -> Vec<(String, String)> {
        self.reload_if_rotated();
        let Ok(keys) = self.keys.read() else {
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
        self.reload_if_rotated();
        let keys = self
            .keys
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
    pub fn verify(&self, token: &str, expected: TokenUse, now_secs: u64) -> Option<Arc<Claims>> {
        if let Ok(cache) = self.verified.lock() {
            if let Some(claims) = cache.get(token) {
                return (self.live_at(claims, now_secs) && claims.token_use == expected)
                    .then(|| claims.clone());
            }
        }
        let header = jsonwebtoken::decode_header(token).ok()?;
        let kid = header.kid?;
        self.reload_if_rotated();
        let data = {
            let keys = self.keys.read().ok()?;
            // The current key, or a retired one whose tokens may still live.
            let key = std::iter::once(&keys.current)
                .chain(
                    keys.retired
                        .iter()
                        .filter(|r| r.live_until_secs(self.lifetime_secs) > now_secs)
                        .map(|r| &r.key),
                )
                .find(|k| k.kid == kid)?;
            jsonwebtoken::decode::<Claims>(token, &key.decoding, &self.validation).ok()?
        };
        let claims = Arc::new(data.claims);
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

    #[test]
    fn the_admin_claim_follows_the_subject_and_defaults_to_false() {
        let t = issuer();
        let admin = t.issue(&subject(true), 1000).unwrap();
        assert!(t.verify(&admin.id_token, TokenUse::Id, 1001).unwrap().admin);
        let user = t.issue(&subject(false), 1000).unwrap();
        assert!(!t.verify(&user.id_token, TokenUse::Id, 1001).unwrap().admin);
        // A token signed before the claim existed reads as not an administrator.
        let old: Claims = serde_json::from_value(serde_json::json!({
            "iss": "svs", "sub": "3", "aud": "svs", "exp": 2000, "iat": 1000,
            "token_use": "id", "email": "a@b.c", "name": "a", "tenant": "t1", "tenant_id": 1
        }))
        .unwrap();
        assert!(!old.admin);
    }

    #[test]
    fn issued_tokens_verify_for_their_own_use_only() {
        let t = issuer();
        let set = t.issue(&subject(false), 1000).unwrap();
        let id = t.verify(&set.id_token, TokenUse::Id, 1001).unwrap();
        assert_eq!(id.user_id(), Some(3));
        assert_eq!(id.tenant, "t1");
        assert!(t.verify(&set.id_token, TokenUse::Access, 1001).is_none());
        assert!(t
            .verify(&set.access_token, TokenUse::Access, 1001)
            .is_some());
        assert!(t.verify(&set.access_token, TokenUse::Id, 1001).is_none());
    }

    #[test]
    fn expired_tokens_are_refused_even_when_cached() {
        let t = issuer();
        let set = t.issue(&subject(false), 1000).unwrap();
        assert!(t.verify(&set.id_token, TokenUse::Id, 1059).is_some());
        assert!(t.verify(&set.id_token, TokenUse::Id, 1060).is_none());
    }

    #[test]
    fn tokens_issued_beyond_the_clock_skew_in_the_future_are_refused() {
        let t = issuer().with_max_clock_skew(30);
        let set = t.issue(&subject(false), 1030).unwrap();
        assert!(t.verify(&set.id_token, TokenUse::Id, 999).is_none());
        assert!(t.verify(&set.id_token, TokenUse::Id, 1000).is_some());
        // Once verified (cached), still refused on a clock set back.
        assert!(t.verify(&set.id_token, TokenUse::Id, 999).is_none());
        let tomorrow = t.issue(&subject(false), 1000 + 86_400).unwrap();
        assert!(t.verify(&tomorrow.id_token, TokenUse::Id, 1000).is_none());
        assert!(t
            .verify(&tomorrow.access_token, TokenUse::Access, 1000)
            .is_none());
    }

    #[test]
    fn tokens_from_another_key_or_tampered_are_refused() {
        let t = issuer();
        let other = TokenIssuer::new(SigningKey::from_seed(&[8; 32]), "svs".into(), 60);
        let set = other.issue(&subject(false), 1000).unwrap();
        assert!(t.verify(&set.id_token, TokenUse::Id, 1001).is_none());
        let good = t.issue(&subject(false), 1000).unwrap().id_token;
        let mut parts: Vec<String> = good.split('.').map(String::from).collect();
        parts[1] = URL_SAFE_NO_PAD.encode(br#"{"sub":"1"}"#);
        assert!(t.verify(&parts.join("."), TokenUse::Id, 1001).is_none());
        assert!(t.verify("garbage", TokenUse::Id, 1001).is_none());
    }

    #[test]
    fn a_rotated_key_signs_and_the_retired_one_verifies_until_its_tokens_expire() {
        let dir = tempfile::tempdir().unwrap();
        let t = TokenIssuer::from_data_dir(dir.path().to_path_buf(), "svs".into(), 60).unwrap();
        let old = t.issue(&subject(false), 1000).unwrap();
        let old_kid = t.key_id();
        KeyRing::rotate(dir.path(), 1000, 60).unwrap();
        // The files are looked at again at most once a second.
        std::thread::sleep(KEY_CHECK_EVERY + Duration::from_millis(100));
        let new = t.issue(&subject(false), 1001).unwrap();
        let new_kid = t.key_id();
        assert_ne!(new_kid, old_kid);
        let kids: Vec<String> = t.public_keys(1001).into_iter().map(|(k, _)| k).collect();
        assert_eq!(kids, [new_kid.clone(), old_kid.clone()]);
        assert!(t.verify(&old.id_token, TokenUse::Id, 1001).is_some());
        assert!(t.verify(&new.id_token, TokenUse::Id, 1001).is_some());
        // Retired at 1000, tokens of 60 s, 2 s of slack: gone at 1062.
        let kids: Vec<String> = t.public_keys(1062).into_iter().map(|(k, _)| k).collect();
        assert_eq!(kids, [new_kid]);
        let late = t.issue(&subject(false), 1061).unwrap();
        assert!(t.verify(&late.id_token, TokenUse::Id, 1062).is_some());
        let fresh_issuer =
            TokenIssuer::from_data_dir(dir.path().to_path_buf(), "svs".into(), 60).unwrap();
        assert!(fresh_issuer
            .verify(&old.id_token, TokenUse::Id, 1062)
            .is_none());
        assert!(fresh_issuer
            .verify(&old.id_token, TokenUse::Id, 1059)
            .is_some());
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
