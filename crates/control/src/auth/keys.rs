//! The Ed25519 keys that sign IdTokens and AccessTokens. They live in the
//! store (`SigningKeyStore`), so that every `svs serve` on one database
//! signs and verifies with the same keys: the current key, and retired ones
//! that still verify the tokens they signed until those have all expired.
//! `svs keys rotate` retires the current key and makes a new one current, in
//! one transaction; running services pick the change up (`TokenIssuer`).
//! The public halves are served as a JWKS (rendered in `api::views`); the
//! private seeds never leave the store and this module (never logged).
//!
//! Before the store held them, the keys were files in the data directory:
//! `token-signing.key` (the current seed, mode 0600) and
//! `token-keys/retired-<secs>-<kid>.key`. The first start that finds the
//! store without keys imports those files, kids and retirement times kept,
//! and removes them once the store holds them all ([`init_keys`]).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{DecodingKey, EncodingKey};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use svs_store::{SigningKeyRecord, Store, StoreError};

/// PKCS#8 v1 wrapping of a raw Ed25519 seed (RFC 8410): this fixed prefix
/// followed by the 32 seed bytes.
const PKCS8_ED25519_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

/// The current key's file of a data directory from before the store held
/// the keys (imported at the first start, then removed).
pub const KEY_FILE: &str = "token-signing.key";
/// Directory of the retired keys' files, beside `KEY_FILE` (imported too).
pub const RETIRED_DIR: &str = "token-keys";
/// The lock file the file-based `svs keys rotate` kept in `RETIRED_DIR`.
const ROTATE_LOCK: &str = "rotate.lock";

pub struct SigningKey {
    pub kid: String,
    /// base64url of the public key, the JWK `x`.
    pub public_x: String,
    pub encoding: EncodingKey,
    pub decoding: DecodingKey,
}

impl SigningKey {
    pub fn from_seed(seed: &[u8; 32]) -> SigningKey {
        let public = ed25519_dalek::SigningKey::from_bytes(seed)
            .verifying_key()
            .to_bytes();
        let mut pkcs8 = PKCS8_ED25519_PREFIX.to_vec();
        pkcs8.extend_from_slice(seed);
        SigningKey {
            kid: kid_of(seed),
            public_x: URL_SAFE_NO_PAD.encode(public),
            encoding: EncodingKey::from_ed_der(&pkcs8),
            decoding: DecodingKey::from_ed_der(&public),
        }
    }
}

/// A key's id: the first 8 bytes of its public key's SHA-256, in hex.
fn kid_of(seed: &[u8; 32]) -> String {
    let public = ed25519_dalek::SigningKey::from_bytes(seed)
        .verifying_key()
        .to_bytes();
    hex::encode(&Sha256::digest(public)[..8])
}

/// Whether `kid` could name one of our keys (16 hex digits): a token naming
/// anything else is refused without looking in the store.
pub fn plausible_kid(kid: &str) -> bool {
    kid.len() == 16 && kid.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A new random key, current from `now_ms`.
fn new_record(now_ms: i64) -> SigningKeyRecord {
    let seed: [u8; 32] = rand::random();
    record(&seed, now_ms)
}

fn record(seed: &[u8; 32], created_ms: i64) -> SigningKeyRecord {
    SigningKeyRecord {
        kid: kid_of(seed),
        seed: seed.to_vec(),
        created_ms,
        retired_ms: None,
    }
}

/// A key that no longer signs; it verifies the tokens it signed.
pub struct RetiredKey {
    pub key: SigningKey,
    /// When it stopped signing (Unix seconds).
    pub retired_at_secs: u64,
}

/// Slack for the running services to notice a rotation (each looks in the
/// store every 2 s, and may sign with the old key meanwhile) and for their
/// clocks to differ a little: a retired key verifies this much longer than
/// the tokens it signed before its retirement live.
pub const KEY_RELOAD_SECS: u64 = 5;

impl RetiredKey {
    /// The last second a token it signed can still be valid (exclusive).
    pub fn live_until_secs(&self, token_lifetime_secs: u64) -> u64 {
        self.retired_at_secs
            .saturating_add(token_lifetime_secs)
            .saturating_add(KEY_RELOAD_SECS)
    }
}

/// The current key and the retired ones (newest first), as the store has
/// them.
pub struct KeyRing {
    pub current: SigningKey,
    pub retired: Vec<RetiredKey>,
}

impl KeyRing {
    /// The ring of the store's keys (`SigningKeyStore::signing_keys`).
    pub fn from_records(records: &[SigningKeyRecord]) -> Result<KeyRing, String> {
        let mut current = None;
        let mut retired = Vec::new();
        for r in records {
            let seed: [u8; 32] = r.seed.as_slice().try_into().map_err(|_| {
                format!(
                    "signing key {} in the store is not a 32-byte Ed25519 seed",
                    r.kid
                )
            })?;
            let key = SigningKey::from_seed(&seed);
            if key.kid != r.kid {
                return Err(format!(
                    "signing key {} in the store does not match its seed",
                    r.kid
                ));
            }
            match r.retired_ms {
                None if current.is_some() => {
                    return Err("the store holds two current signing keys".into())
                }
                None => current = Some(key),
                Some(ms) => retired.push(RetiredKey {
                    key,
                    retired_at_secs: ms_to_secs(ms),
                }),
            }
        }
        retired.sort_by_key(|r| std::cmp::Reverse(r.retired_at_secs));
        let current = current.ok_or("the store holds no current signing key")?;
        Ok(KeyRing { current, retired })
    }

    /// The store's keys now.
    pub async fn load(store: &dyn Store) -> Result<KeyRing, String> {
        KeyRing::from_records(&read_keys(store).await?)
    }
}

/// Milliseconds to whole seconds, rounded up (a retired key lives a little
/// longer rather than shorter); 0 before the epoch.
fn ms_to_secs(ms: i64) -> u64 {
    u64::try_from(ms.max(0)).unwrap_or(0).div_ceil(1000)
}

fn secs_to_ms(secs: u64) -> i64 {
    i64::try_from(secs)
        .unwrap_or(i64::MAX / 1000)
        .saturating_mul(1000)
}

async fn read_keys(store: &dyn Store) -> Result<Vec<SigningKeyRecord>, String> {
    store
        .signing_keys()
        .await
        .map_err(|e| format!("cannot read the token signing keys: {e}"))
}

/// Makes sure the store holds a current signing key, and returns its keys:
/// on the first start (no key stored) the data directory's key files are
/// imported when there are any (current and retired, kids and retirement
/// times kept; then the files are removed), else a new key is made. Safe
/// when several processes start at once on one database: one key becomes
/// current (`ensure_signing_key`), and an import that stopped half way (a
/// crash) is taken up again at the next start.
pub async fn init_keys(store: &dyn Store, data_dir: &Path, now_ms: i64) -> Result<KeyRing, String> {
    let stored = read_keys(store).await?;
    let files = if data_dir.join(KEY_FILE).exists() {
        match read_key_files(data_dir) {
            Ok(files) => files,
            // The store's keys are used anyway: unreadable files are in
            // the way only of an import.
            Err(e) if !stored.is_empty() => {
                tracing::warn!(
                    error = %e,
                    "the token signing key files of the data directory are not used: the store \
                     holds the signing keys"
                );
                None
            }
            Err(e) => return Err(e),
        }
    } else {
        None
    };
    match files {
        Some(files) => import(store, &files).await?,
        None if stored.is_empty() => {
            let key = store
                .ensure_signing_key(&new_record(now_ms))
                .await
                .map_err(|e| format!("cannot store a new token signing key: {e}"))?;
            tracing::info!(kid = %key.kid, "made a new token signing key");
        }
        None => {}
    }
    KeyRing::load(store).await
}

/// `svs keys rotate`: retires the current key and makes a new one current,
/// dropping retired keys whose tokens have all expired (on
/// `token_lifetime_secs`). Returns the ring as it is now. Safe while
/// services run: they pick the new key up within `KEY_RELOAD_SECS`, and
/// rotations take turns in the store's write transaction.
pub async fn rotate_keys(
    store: &dyn Store,
    data_dir: &Path,
    now_ms: i64,
    token_lifetime_secs: u64,
) -> Result<KeyRing, String> {
    init_keys(store, data_dir, now_ms).await?;
    let dead_after_ms = secs_to_ms(token_lifetime_secs.saturating_add(KEY_RELOAD_SECS));
    // Retired at or before this, its tokens cannot be live any more.
    let drop_before_ms = now_ms.saturating_sub(dead_after_ms).saturating_add(1);
    store
        .rotate_signing_key(&new_record(now_ms), drop_before_ms)
        .await
        .map_err(|e| format!("cannot rotate the token signing key: {e}"))?;
    KeyRing::load(store).await
}

/// The key files of a data directory from before the store held the keys.
struct KeyFiles {
    /// The keys to store, oldest first, each created when the one before
    /// it retired, with the time it retired itself (None: the current key).
    chain: Vec<(SigningKeyRecord, Option<i64>)>,
    /// Every file read, removed once the store holds them all.
    paths: Vec<PathBuf>,
}

/// The key files of `dir`, or None without a current key file.
fn read_key_files(dir: &Path) -> Result<Option<KeyFiles>, String> {
    let current_path = dir.join(KEY_FILE);
    let current = match read_seed(&current_path) {
        Ok(seed) => seed,
        Err(SeedError::Missing) => return Ok(None),
        Err(SeedError::Bad(message)) => return Err(message),
    };
    let current_written_ms = fs::metadata(&current_path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut paths = vec![current_path];
    let mut retired: Vec<([u8; 32], u64)> = Vec::new();
    let retired_dir = dir.join(RETIRED_DIR);
    match fs::read_dir(&retired_dir) {
        Ok(entries) => {
            for entry in entries {
                let entry =
                    entry.map_err(|e| format!("cannot read {}: {e}", retired_dir.display()))?;
                let Some(retired_at_secs) = entry.file_name().to_str().and_then(retired_file_time)
                else {
                    continue;
                };
                match read_seed(&entry.path()) {
                    Ok(seed) => {
                        retired.push((seed, retired_at_secs));
                        paths.push(entry.path());
                    }
                    Err(SeedError::Missing) => {}
                    Err(SeedError::Bad(message)) => return Err(message),
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot read {}: {e}", retired_dir.display())),
    }
    Ok(Some(KeyFiles {
        chain: import_chain(&current, current_written_ms, retired),
        paths,
    }))
}

/// The keys in the order a rotation made them: retired ones by the time
/// they retired, then the current one. A key both current and retired (a
/// rotation that stopped between its two writes) is the current one; a key
/// retired twice keeps its last retirement.
fn import_chain(
    current: &[u8; 32],
    current_written_ms: Option<i64>,
    mut retired: Vec<([u8; 32], u64)>,
) -> Vec<(SigningKeyRecord, Option<i64>)> {
    let current_kid = kid_of(current);
    retired.sort_by_key(|(_, secs)| std::cmp::Reverse(*secs));
    let mut seen = HashSet::from([current_kid]);
    retired.retain(|(seed, _)| seen.insert(kid_of(seed)));
    retired.reverse();
    let mut chain: Vec<(SigningKeyRecord, Option<i64>)> = Vec::new();
    // Each key became current when the one before it retired; the oldest
    // one's creation is not known (its retirement stands for it).
    let mut created_ms = retired.first().map(|(_, secs)| secs_to_ms(*secs));
    for (seed, secs) in &retired {
        let retired_ms = secs_to_ms(*secs);
        chain.push((
            record(seed, created_ms.unwrap_or(retired_ms)),
            Some(retired_ms),
        ));
        created_ms = Some(retired_ms);
    }
    let created_ms = created_ms.or(current_written_ms).unwrap_or(0);
    chain.push((record(current, created_ms), None));
    chain
}

/// Where the store is in `chain`: the index of its current key when every
/// stored key is one of the chain's (None otherwise, or without a current
/// key).
fn stored_chain_position(
    stored: &[SigningKeyRecord],
    chain: &[(SigningKeyRecord, Option<i64>)],
) -> Option<usize> {
    if !stored
        .iter()
        .all(|s| chain.iter().any(|(k, _)| k.kid == s.kid))
    {
        return None;
    }
    let current = stored.iter().find(|s| s.retired_ms.is_none())?;
    chain.iter().position(|(k, _)| k.kid == current.kid)
}

/// Brings the key files into the store, one rotation per key, oldest first
/// (each retiring the one before it at its recorded time), then removes
/// the files. Takes up an import that stopped half way; leaves the files
/// alone when the store holds other keys (they are not used then).
async fn import(store: &dyn Store, files: &KeyFiles) -> Result<(), String> {
    let failed = |e: StoreError| format!("cannot import the token signing key files: {e}");
    // Each turn stores one key; another process importing the same files
    // at once (`svs keys rotate` while a service starts) may store some.
    for _ in 0..=files.chain.len() * 2 {
        let stored = read_keys(store).await?;
        if stored.is_empty() {
            let (first, _) = &files.chain[0];
            store.ensure_signing_key(first).await.map_err(failed)?;
            continue;
        }
        let Some(at) = stored_chain_position(&stored, &files.chain) else {
            tracing::warn!(
                "the token signing key files of the data directory are not used: the store \
                 holds other signing keys"
            );
            return Ok(());
        };
        let Some((next, _)) = files.chain.get(at + 1) else {
            tracing::info!(
                kid = %files.chain[at].0.kid,
                keys = files.chain.len(),
                "the token signing keys of the data directory are in the store"
            );
            remove_key_files(files);
            return Ok(());
        };
        // Retires the key before it at `next.created_ms`, its retirement.
        match store.rotate_signing_key(next, i64::MIN).await {
            // Stored by another process meanwhile: look again.
            Ok(()) | Err(StoreError::Conflict(_)) => {}
            Err(e) => return Err(failed(e)),
        }
    }
    Err("cannot import the token signing key files: the store's keys kept changing".into())
}

/// Removes the imported key files (the store holds them all now). A file
/// that cannot be removed is logged: it is not used any more.
fn remove_key_files(files: &KeyFiles) {
    for path in &files.paths {
        if let Err(e) = fs::remove_file(path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(file = %path.display(), error = %e, "cannot remove an imported key file");
            }
        }
    }
    if let Some(dir) = files
        .paths
        .first()
        .and_then(|p| p.parent())
        .map(|d| d.join(RETIRED_DIR))
    {
        let _ = fs::remove_file(dir.join(ROTATE_LOCK));
        // Only when empty: anything else in it is not ours.
        let _ = fs::remove_dir(&dir);
    }
}

enum SeedError {
    Missing,
    Bad(String),
}

/// A private 32-byte seed file.
fn read_seed(path: &Path) -> Result<[u8; 32], SeedError> {
    match fs::read(path) {
        Ok(bytes) => {
            let mode = fs::metadata(path)
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0);
            if mode & 0o077 != 0 {
                return Err(SeedError::Bad(format!(
                    "{} must be readable by its owner only (mode 0600), found {mode:o}",
                    path.display()
                )));
            }
            bytes.try_into().map_err(|_| {
                SeedError::Bad(format!("{} is not a 32-byte Ed25519 seed", path.display()))
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(SeedError::Missing),
        Err(e) => Err(SeedError::Bad(format!(
            "cannot read {}: {e}",
            path.display()
        ))),
    }
}

/// `retired-<secs>-<kid>.key` → secs.
fn retired_file_time(name: &str) -> Option<u64> {
    let rest = name.strip_prefix("retired-")?.strip_suffix(".key")?;
    let (secs, kid) = rest.split_once('-')?;
    (!kid.is_empty()).then_some(())?;
    secs.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use svs_common::secret_files::write_private;
    use svs_store::prelude::*;
    use svs_store::testing::temp_sqlite;

    /// The key files a data directory had before the store held the keys:
    /// the current seed and retired ones, as the file-based rotation wrote
    /// them.
    fn write_key_files(dir: &Path, current: [u8; 32], retired: &[([u8; 32], u64)]) {
        write_private(&dir.join(KEY_FILE), &current).unwrap();
        let retired_dir = dir.join(RETIRED_DIR);
        fs::create_dir_all(&retired_dir).unwrap();
        fs::write(retired_dir.join(ROTATE_LOCK), b"").unwrap();
        for (seed, secs) in retired {
            let name = format!("retired-{secs}-{}.key", kid_of(seed));
            write_private(&retired_dir.join(name), seed).unwrap();
        }
    }

    fn kids(ring: &KeyRing) -> (String, Vec<(String, u64)>) {
        (
            ring.current.kid.clone(),
            ring.retired
                .iter()
                .map(|r| (r.key.kid.clone(), r.retired_at_secs))
                .collect(),
        )
    }

    #[tokio::test]
    async fn a_new_store_gets_one_key_and_keeps_it() {
        let (dir, store) = temp_sqlite().await;
        let data = dir.path().join("data");
        fs::create_dir_all(&data).unwrap();
        let first = init_keys(&store, &data, 1_000).await.unwrap();
        assert!(first.retired.is_empty());
        assert!(plausible_kid(&first.current.kid), "{}", first.current.kid);
        let again = init_keys(&store, &data, 2_000).await.unwrap();
        assert_eq!(kids(&again), kids(&first));
        assert_eq!(first.current.public_x, again.current.public_x);
        // Nothing is written to the data directory.
        assert_eq!(fs::read_dir(&data).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn the_key_files_are_imported_with_their_kids_and_times_then_removed() {
        let (dir, store) = temp_sqlite().await;
        let data = dir.path().join("data");
        fs::create_dir_all(&data).unwrap();
        let (old, older, current) = ([1u8; 32], [2u8; 32], [3u8; 32]);
        // A rotation that stopped between its writes left the current key
        // retired too: it stays current.
        write_key_files(
            &data,
            current,
            &[(older, 900), (old, 1_000), (current, 1_100)],
        );

        let ring = init_keys(&store, &data, 5_000_000).await.unwrap();
        assert_eq!(
            kids(&ring),
            (
                kid_of(&current),
                vec![(kid_of(&old), 1_000), (kid_of(&older), 900)]
            )
        );
        assert_eq!(
            ring.current.public_x,
            SigningKey::from_seed(&current).public_x
        );
        let stored = store.signing_keys().await.unwrap();
        assert_eq!(stored[0].seed, current.to_vec());
        assert_eq!(stored[0].created_ms, 1_000_000);
        assert!(!data.join(KEY_FILE).exists());
        assert!(!data.join(RETIRED_DIR).exists());

        // The next start finds them in the store.
        let again = init_keys(&store, &data, 5_000_001).await.unwrap();
        assert_eq!(kids(&again), kids(&ring));
    }

    #[tokio::test]
    async fn an_import_that_stopped_half_way_is_taken_up_at_the_next_start() {
        let (dir, store) = temp_sqlite().await;
        let data = dir.path().join("data");
        fs::create_dir_all(&data).unwrap();
        let (old, current) = ([1u8; 32], [3u8; 32]);
        write_key_files(&data, current, &[(old, 1_000)]);
        // Only the first step happened: the retired key is current.
        store
            .ensure_signing_key(&record(&old, 1_000_000))
            .await
            .unwrap();

        let ring = init_keys(&store, &data, 2_000_000).await.unwrap();
        assert_eq!(kids(&ring), (kid_of(&current), vec![(kid_of(&old), 1_000)]));
        assert!(!data.join(KEY_FILE).exists());
    }

    #[tokio::test]
    async fn key_files_beside_a_store_with_other_keys_are_left_alone() {
        let (dir, store) = temp_sqlite().await;
        let data = dir.path().join("data");
        fs::create_dir_all(&data).unwrap();
        let stored = init_keys(&store, &data, 1_000).await.unwrap();
        write_key_files(&data, [3u8; 32], &[]);
        let ring = init_keys(&store, &data, 2_000).await.unwrap();
        assert_eq!(kids(&ring), kids(&stored));
        assert!(data.join(KEY_FILE).exists());
        // Even readable by others: they are not used.
        fs::set_permissions(data.join(KEY_FILE), fs::Permissions::from_mode(0o644)).unwrap();
        init_keys(&store, &data, 3_000).await.unwrap();
    }

    #[tokio::test]
    async fn a_key_file_readable_by_others_is_refused_and_nothing_is_stored() {
        let (dir, store) = temp_sqlite().await;
        let data = dir.path().join("data");
        fs::create_dir_all(&data).unwrap();
        write_key_files(&data, [3u8; 32], &[]);
        let path = data.join(KEY_FILE);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let err = init_keys(&store, &data, 1_000).await.err().unwrap();
        assert_eq!(
            err,
            format!(
                "{} must be readable by its owner only (mode 0600), found 644",
                path.display()
            )
        );
        assert!(store.signing_keys().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_rotation_retires_the_current_key_and_prunes_keys_past_their_tokens() {
        let (dir, store) = temp_sqlite().await;
        let data = dir.path().to_path_buf();
        let first = init_keys(&store, &data, 0).await.unwrap().current.kid;
        let ring = rotate_keys(&store, &data, 1_000_000, 60).await.unwrap();
        assert_ne!(ring.current.kid, first);
        assert_eq!(ring.retired.len(), 1);
        assert_eq!(ring.retired[0].key.kid, first);
        assert_eq!(ring.retired[0].retired_at_secs, 1000);
        assert_eq!(ring.retired[0].live_until_secs(60), 1065);
        // The next rotation within the first key's tokens keeps it ...
        let second = ring.current.kid.clone();
        let ring = rotate_keys(&store, &data, 1_064_999, 60).await.unwrap();
        let retired: Vec<&str> = ring.retired.iter().map(|r| r.key.kid.as_str()).collect();
        assert_eq!(retired, [second.as_str(), first.as_str()]);
        // ... one after drops it.
        let third = ring.current.kid.clone();
        let ring = rotate_keys(&store, &data, 1_065_000, 60).await.unwrap();
        let retired: Vec<&str> = ring.retired.iter().map(|r| r.key.kid.as_str()).collect();
        assert_eq!(retired, [third.as_str(), second.as_str()]);
        assert_eq!(
            KeyRing::load(&store).await.unwrap().current.kid,
            ring.current.kid
        );
    }

    #[test]
    fn a_stored_key_must_match_its_kid_and_be_32_bytes() {
        let good = record(&[5; 32], 0);
        assert!(KeyRing::from_records(std::slice::from_ref(&good)).is_ok());
        let short = SigningKeyRecord {
            seed: vec![5; 31],
            ..good.clone()
        };
        let err = KeyRing::from_records(&[short]).err().unwrap();
        assert!(err.ends_with("is not a 32-byte Ed25519 seed"), "{err}");
        let renamed = SigningKeyRecord {
            kid: "0123456789abcdef".into(),
            ..good.clone()
        };
        let err = KeyRing::from_records(&[renamed]).err().unwrap();
        assert_eq!(
            err,
            "signing key 0123456789abcdef in the store does not match its seed"
        );
        let retired = SigningKeyRecord {
            retired_ms: Some(1),
            ..good
        };
        let err = KeyRing::from_records(&[retired]).err().unwrap();
        assert_eq!(err, "the store holds no current signing key");
    }

    #[test]
    fn retired_file_names_carry_their_time() {
        assert_eq!(retired_file_time("retired-1000-abcd.key"), Some(1000));
        for bad in [
            "retired-x-abcd.key",
            "retired-1000-.key",
            "rotate.lock",
            "retired-1000.key",
        ] {
            assert_eq!(retired_file_time(bad), None, "{bad}");
        }
    }
}
