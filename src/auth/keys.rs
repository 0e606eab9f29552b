//! The Ed25519 key that signs IdTokens and AccessTokens. Generated on first
//! start and kept in the data directory (mode 0600); its public half is
//! served as a JWKS (rendered in `api::views`).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{DecodingKey, EncodingKey};
use sha2::{Digest, Sha256};
use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// PKCS#8 v1 wrapping of a raw Ed25519 seed (RFC 8410): this fixed prefix
/// followed by the 32 seed bytes.
const PKCS8_ED25519_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

pub const KEY_FILE: &str = "token-signing.key";

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
        let path = dir.join(KEY_FILE);
        let seed: [u8; 32] = match fs::read(&path) {
            Ok(bytes) => {
                let mode = fs::metadata(&path)
                    .map(|m| m.permissions().mode() & 0o777)
                    .unwrap_or(0);
                if mode & 0o077 != 0 {
                    return Err(format!(
                        "{} must be readable by its owner only (mode 0600), found {mode:o}",
                        path.display()
                    ));
                }
                bytes
                    .try_into()
                    .map_err(|_| format!("{} is not a 32-byte Ed25519 seed", path.display()))?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let seed: [u8; 32] = rand::random();
                write_private(dir, &path, &seed)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                seed
            }
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        Ok(SigningKey::from_seed(&seed))
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

/// Durable, private write: temporary file (0600), fsync, rename, fsync dir.
fn write_private(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    fs::rename(&tmp, path)?;
    fs::File::open(dir)?.sync_all()
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
    fn a_key_readable_by_others_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        SigningKey::load_or_create(dir.path()).unwrap();
        let path = dir.path().join(KEY_FILE);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(SigningKey::load_or_create(dir.path()).is_err());
    }
}
