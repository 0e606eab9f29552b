//! Helpers of the `forge` tests, shared with other test files.

use crate::harness::*;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

/// PKCS#8 v1 prefix of a raw Ed25519 seed (RFC 8410).
const PKCS8_ED25519_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

fn b64(v: &Value) -> String {
    URL_SAFE_NO_PAD.encode(v.to_string())
}

pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The claims of a genuine token, with `change` applied, under an
/// unsigned `alg: none` header.
pub fn alg_none(token: &str, change: impl FnOnce(&mut Value)) -> String {
    let (mut header, mut claims) = jwt_parts(token);
    header["alg"] = json!("none");
    change(&mut claims);
    format!("{}.{}.", b64(&header), b64(&claims))
}

/// The claims of a genuine token signed HS256 with the service's public
/// key as the HMAC secret (the key-confusion attack): one token keyed with
/// the JWK `x` string, one with the raw 32 key bytes.
pub async fn hs256_with_public_key(app: &TestApp, token: &str) -> Vec<String> {
    let (status, jwks) = app
        .request(None, Method::GET, "/.well-known/jwks.json", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{jwks}");
    let (header, claims) = jwt_parts(token);
    let x = jwks["keys"][0]["x"].as_str().expect("JWK x").to_string();
    let raw = URL_SAFE_NO_PAD.decode(&x).expect("x is base64url");
    let mut forged_header = Header::new(Algorithm::HS256);
    forged_header.kid = header["kid"].as_str().map(String::from);
    [x.into_bytes(), raw]
        .iter()
        .map(|secret| {
            jsonwebtoken::encode(&forged_header, &claims, &EncodingKey::from_secret(secret))
                .expect("HS256 signs")
        })
        .collect()
}

/// A genuine token whose claims were changed after signing (the signature
/// is the original one).
pub fn tampered(token: &str, change: impl FnOnce(&mut Value)) -> String {
    let parts: Vec<&str> = token.split('.').collect();
    let (_, mut claims) = jwt_parts(token);
    change(&mut claims);
    format!("{}.{}.{}", parts[0], b64(&claims), parts[2])
}

/// The signing keys in the store of a service on SQLite (`svs.db` of its
/// data directory), the current one first.
pub async fn stored_signing_keys(app: &TestApp) -> Vec<svs_store::SigningKeyRecord> {
    use svs_store::prelude::*;
    let store = svs_store::SqlStore::open_sqlite(&app.data_dir().join("svs.db"))
        .await
        .expect("the service's database opens");
    let keys = store.signing_keys().await.expect("signing keys");
    store.close().await;
    keys
}

/// A token signed with the service's real current key, read from its
/// store: the claims of `token` with `change` applied.
pub async fn signed_with_real_key(
    app: &TestApp,
    token: &str,
    change: impl FnOnce(&mut Value),
) -> String {
    let keys = stored_signing_keys(app).await;
    assert_eq!(keys[0].retired_ms, None, "the current key first");
    signed_with_key(&keys[0], token, change)
}

/// The claims of `token` with `change` applied, signed with a stored key
/// (and naming it).
pub fn signed_with_key(
    key: &svs_store::SigningKeyRecord,
    token: &str,
    change: impl FnOnce(&mut Value),
) -> String {
    let mut pkcs8 = PKCS8_ED25519_PREFIX.to_vec();
    pkcs8.extend_from_slice(&key.seed);
    let (_, mut claims) = jwt_parts(token);
    change(&mut claims);
    let mut h = Header::new(Algorithm::EdDSA);
    h.kid = Some(key.kid.clone());
    jsonwebtoken::encode(&h, &claims, &EncodingKey::from_ed_der(&pkcs8)).expect("EdDSA signs")
}

/// An IdToken that expired a minute ago, signed with the real key.
pub async fn expired_with_real_key(app: &TestApp, token: &str) -> String {
    signed_with_real_key(app, token, |c| {
        let now = now_secs();
        c["iat"] = json!(now - 3600);
        c["exp"] = json!(now - 60);
    })
    .await
}

/// An IdToken signed with the real key, issued `ahead` seconds from now
/// (and valid for an hour from then).
pub async fn issued_ahead_with_real_key(app: &TestApp, token: &str, ahead: u64) -> String {
    signed_with_real_key(app, token, |c| {
        let now = now_secs();
        c["iat"] = json!(now + ahead);
        c["exp"] = json!(now + ahead + 3600);
    })
    .await
}

/// A genuine IdToken of a user of another tenant (created on the way).
pub async fn other_tenant_id_token(app: &TestApp) -> String {
    app.add_user("forge-other", "mallory@other.example", "mallory-password");
    let t = app
        .sign_in("mallory@other.example", "mallory-password")
        .await;
    t["IdToken"].as_str().expect("IdToken").to_string()
}

/// Every forged variant of the admin's IdToken that must be refused with
/// 401, each with a name for failure messages.
pub async fn forged_id_tokens(app: &TestApp) -> Vec<(&'static str, String)> {
    let id = app.token.clone();
    let admin = |c: &mut Value| {
        c["tenant_id"] = json!(c["tenant_id"].as_i64().unwrap_or(1) + 1);
        c["admin"] = json!(true);
    };
    let mut forged = vec![
        ("alg none", alg_none(&id, |_| {})),
        ("alg none, other tenant", alg_none(&id, admin)),
        ("tampered claims", tampered(&id, admin)),
        (
            "tampered expiry",
            tampered(&id, |c| c["exp"] = json!(now_secs() + 100_000)),
        ),
        ("expired, real key", expired_with_real_key(app, &id).await),
        (
            "issued a day ahead, real key",
            issued_ahead_with_real_key(app, &id, 86_400).await,
        ),
    ];
    for token in hs256_with_public_key(app, &id).await {
        forged.push(("HS256 keyed with the public key", token));
    }
    forged
}
