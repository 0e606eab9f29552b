//! The Ed25519 keys that sign IdTokens and AccessTokens. The current key is
//! generated on first start and kept in the data directory (mode 0600).
//! `svs keys rotate` moves it to `token-keys/retired-<secs>-<kid>.key` and
//! writes a new current key; a retired key still verifies the tokens it
//! signed until they have all expired. The public halves are served as a
//! JWKS (rendered in `api::views`).

use crate::secret_files::write_private;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{DecodingKey, EncodingKey};
use sha2::{Digest, Sha256};
use std::fs;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// PKCS#8 v1 wrapping of a raw Ed25519 seed (RFC 8410): this fixed prefix
/// followed by the 32 seed bytes.
const PKCS8_ED25519_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

pub const KEY_FILE: &str = "token-signing.key";
/// Directory of the retired keys, beside `KEY_FILE`.
pub const RETIRED_DIR: &str = "token-keys";

pub struct SigningKey {
    pub kid: String,
    /// base64url of the public key, the JWK `x`.
    pub public_x: String,
    pub encoding: EncodingKey,
    pub decoding: DecodingKey,
}

impl SigningKey {
    /// Loads `<dir>/token-signing.key`, creating it on first start.
    pub fn load_or_create(dir: &Path) -> Result<SigningKey, String> {
        Ok(SigningKey::from_seed(&load_or_create_seed(dir)?))
    }

    pub fn from_seed(seed: &[u8; 32]) -> SigningKey {
        let public = ed25519_dalek::SigningKey::from_bytes(seed)
            .verifying_key()
            .to_bytes();
        let mut pkcs8 = PKCS8_ED25519_PREFIX.to_vec();
        pkcs8.extend_from_slice(seed);
        let digest = Sha256::digest(public);
        SigningKey {
            kid: hex::encode(&digest[..8]),
            public_x: URL_SAFE_NO_PAD.encode(public),
            encoding: EncodingKey::from_ed_der(&pkcs8),
            decoding: DecodingKey::from_ed_der(&public),
        }
    }
}

fn load_or_create_seed(dir: &Path) -> Result<[u8; 32], String> {
    let path = dir.join(KEY_FILE);
    match read_seed(&path) {
        Ok(seed) => Ok(seed),
        Err(SeedError::Missing) => {
            let seed: [u8; 32] = rand::random();
            write_private(&path, &seed)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok(seed)
        }
        Err(SeedError::Bad(message)) => Err(message),
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

/// A key that no longer signs; it verifies the tokens it signed.
pub struct RetiredKey {
    pub key: SigningKey,
    /// When it stopped signing (Unix seconds).
    pub retired_at_secs: u64,
}

/// Slack for a running service to notice a rotation (it re-reads the key
/// files at most this often, and may sign with the old key meanwhile).
pub const KEY_RELOAD_SECS: u64 = 2;

impl RetiredKey {
    /// The last second a token it signed can still be valid (exclusive).
    pub fn live_until_secs(&self, token_lifetime_secs: u64) -> u64 {
        self.retired_at_secs
            .saturating_add(token_lifetime_secs)
            .saturating_add(KEY_RELOAD_SECS)
    }
}

/// The current key and the retired ones, as found in a data directory.
pub struct KeyRing {
    pub current: SigningKey,
    pub retired: Vec<RetiredKey>,
}

impl KeyRing {
    /// The current key (created on first start) and every retired key.
    pub fn load(dir: &Path) -> Result<KeyRing, String> {
        let current = SigningKey::load_or_create(dir)?;
        let mut retired = Vec::new();
        let retired_dir = dir.join(RETIRED_DIR);
        let entries = match fs::read_dir(&retired_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(KeyRing { current, retired })
            }
            Err(e) => return Err(format!("cannot read {}: {e}", retired_dir.display())),
        };
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot read {}: {e}", retired_dir.display()))?;
            let Some(retired_at_secs) = entry.file_name().to_str().and_then(retired_file_time)
            else {
                continue;
            };
            match read_seed(&entry.path()) {
                Ok(seed) => retired.push(RetiredKey {
                    key: SigningKey::from_seed(&seed),
                    retired_at_secs,
                }),
                // Deleted by a rotation that pruned it meanwhile.
                Err(SeedError::Missing) => {}
                Err(SeedError::Bad(message)) => return Err(message),
            }
        }
        retired.sort_by_key(|r| std::cmp::Reverse(r.retired_at_secs));
        Ok(KeyRing { current, retired })
    }

    /// Retires the current key (kept in `token-keys/`, mode 0600) and makes
    /// a new one current. Retired keys whose tokens have all expired (on
    /// `token_lifetime_secs`) are deleted. Returns the ring as it is now.
    /// Safe while `svs serve` runs: it picks the new key up within
    /// `KEY_RELOAD_SECS`; concurrent rotations take turns (a lock file).
    pub fn rotate(dir: &Path, now_secs: u64, token_lifetime_secs: u64) -> Result<KeyRing, String> {
        let retired_dir = dir.join(RETIRED_DIR);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&retired_dir)
            .map_err(|e| format!("cannot create {}: {e}", retired_dir.display()))?;
        let lock_path = retired_dir.join("rotate.lock");
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(|e| format!("cannot open {}: {e}", lock_path.display()))?;
        lock.lock()
            .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
        let old_seed = load_or_create_seed(dir)?;
        let old = SigningKey::from_seed(&old_seed);
        // First keep the old key, then replace it: a crash in between
        // leaves it both current and retired, which is harmless.
        let retired_path = retired_dir.join(format!("retired-{now_secs}-{}.key", old.kid));
        write_private(&retired_path, &old_seed)
            .map_err(|e| format!("cannot write {}: {e}", retired_path.display()))?;
        let new_seed: [u8; 32] = rand::random();
        let path = dir.join(KEY_FILE);
        write_private(&path, &new_seed)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let ring = KeyRing::load(dir)?;
        for r in &ring.retired {
            if r.live_until_secs(token_lifetime_secs) <= now_secs {
                let stale =
                    retired_dir.join(format!("retired-{}-{}.key", r.retired_at_secs, r.key.kid));
                fs::remove_file(&stale)
                    .map_err(|e| format!("cannot remove {}: {e}", stale.display()))?;
            }
        }
        drop(lock);
        KeyRing::load(dir)
    }

    /// Files whose change means a rotation happened (see `TokenIssuer`).
    pub fn fingerprint(dir: &Path) -> Option<KeysFingerprint> {
        use std::os::unix::fs::MetadataExt;
        let stamp = |p: &Path| {
            fs::metadata(p)
                .ok()
                .map(|m| (m.ino(), m.mtime(), m.mtime_nsec()))
        };
        Some(KeysFingerprint {
            current: stamp(&dir.join(KEY_FILE))?,
            retired: stamp(&dir.join(RETIRED_DIR)),
        })
    }
}

/// Inode and modification time of the key file and of the retired keys'
/// directory: cheap to read, and both change with every rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeysFingerprint {
    current: (u64, i64, i64),
    retired: Option<(u64, i64, i64)>,
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

    #[test]
    fn key_is_created_private_and_reloaded_identically() {
        let dir = tempfile::tempdir().unwrap();
        let first = SigningKey::load_or_create(dir.path()).unwrap();
        let mode = fs::metadata(dir.path().join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let second = SigningKey::load_or_create(dir.path()).unwrap();
        assert_eq!(first.kid, second.kid);
        assert_eq!(first.public_x, second.public_x);
    }

    #[test]
    fn a_rotation_retires_the_current_key_and_prunes_keys_past_their_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let first = SigningKey::load_or_create(dir.path()).unwrap();
        let ring = KeyRing::rotate(dir.path(), 1000, 60).unwrap();
        assert_ne!(ring.current.kid, first.kid);
        assert_eq!(ring.retired.len(), 1);
        assert_eq!(ring.retired[0].key.kid, first.kid);
        assert_eq!(ring.retired[0].retired_at_secs, 1000);
        assert_eq!(ring.retired[0].live_until_secs(60), 1062);
        let retired_file = dir
            .path()
            .join(RETIRED_DIR)
            .join(format!("retired-1000-{}.key", first.kid));
        let mode = fs::metadata(&retired_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // The next rotation within the first key's tokens keeps it ...
        let second = ring.current.kid.clone();
        let ring = KeyRing::rotate(dir.path(), 1061, 60).unwrap();
        let kids: Vec<&str> = ring.retired.iter().map(|r| r.key.kid.as_str()).collect();
        assert_eq!(kids, [second.as_str(), first.kid.as_str()]);
        // ... one after drops it.
        let third = ring.current.kid.clone();
        let ring = KeyRing::rotate(dir.path(), 1062, 60).unwrap();
        let kids: Vec<&str> = ring.retired.iter().map(|r| r.key.kid.as_str()).collect();
        assert_eq!(kids, [third.as_str(), second.as_str()]);
        assert!(!retired_file.exists());
        assert_eq!(
            KeyRing::load(dir.path()).unwrap().current.kid,
            ring.current.kid
        );
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

    #[test]
    fn a_key_readable_by_others_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        SigningKey::load_or_create(dir.path()).unwrap();
        let path = dir.path().join(KEY_FILE);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(SigningKey::load_or_create(dir.path()).is_err());
    }
}
