//! Stored sessions: `$XDG_CONFIG_HOME/svs/credentials` (else
//! `$HOME/.config/svs/credentials`), a JSON object with one entry per
//! profile. Directory 0700, file 0600, replaced atomically.

use super::error::{ClientError, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

pub const DEFAULT_PROFILE: &str = "default";

/// One signed-in session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    pub url: String,
    pub email: String,
    #[serde(rename = "IdToken")]
    pub id_token: String,
    #[serde(rename = "AccessToken")]
    pub access_token: String,
    #[serde(rename = "RefreshToken")]
    pub refresh_token: String,
    /// When IdToken and AccessToken expire, in seconds since the Unix epoch.
    pub expires_at: u64,
}

impl Profile {
    /// True when the IdToken expires within `margin_secs`.
    pub fn expires_within(&self, margin_secs: u64) -> bool {
        self.expires_at <= now_secs().saturating_add(margin_secs)
    }
}

pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The credentials file and its contents.
#[derive(Debug)]
pub struct CredentialsStore {
    path: PathBuf,
}

impl CredentialsStore {
    /// The default location, from the environment.
    pub fn from_env() -> Result<CredentialsStore> {
        let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let config_dir = match non_empty("XDG_CONFIG_HOME") {
            Some(dir) if Path::new(&dir).is_absolute() => PathBuf::from(dir),
            _ => PathBuf::from(non_empty("HOME").ok_or(ClientError::NoConfigDir)?).join(".config"),
        };
        Ok(CredentialsStore::at(
            config_dir.join("svs").join("credentials"),
        ))
    }

    pub fn at(path: PathBuf) -> CredentialsStore {
        CredentialsStore { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io_err(&self, source: std::io::Error) -> ClientError {
        ClientError::Credentials {
            path: self.path.clone(),
            source,
        }
    }

    /// Every stored profile (none when the file does not exist).
    pub fn load(&self) -> Result<BTreeMap<String, Profile>> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) if text.trim().is_empty() => Ok(BTreeMap::new()),
            Ok(text) => serde_json::from_str(&text).map_err(|e| ClientError::CredentialsFormat {
                path: self.path.clone(),
                detail: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(self.io_err(e)),
        }
    }

    pub fn get(&self, profile: &str) -> Result<Option<Profile>> {
        Ok(self.load()?.remove(profile))
    }

    /// Stores (or replaces) one profile, keeping the others.
    pub fn put(&self, name: &str, profile: Profile) -> Result<()> {
        let mut all = self.load()?;
        all.insert(name.to_string(), profile);
        self.save(&all)
    }

    /// Removes one profile; false when it was not there.
    pub fn remove(&self, name: &str) -> Result<bool> {
        let mut all = self.load()?;
        let found = all.remove(name).is_some();
        if found {
            self.save(&all)?;
        }
        Ok(found)
    }

    /// Writes the whole file: a temporary file (0600) in the same
    /// directory (0700), fsynced, then renamed over the old one.
    pub fn save(&self, all: &BTreeMap<String, Profile>) -> Result<()> {
        let dir = self
            .path
            .parent()
            .ok_or_else(|| self.io_err(std::io::Error::other("no parent directory")))?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| self.io_err(e))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| self.io_err(e))?;
        let text =
            serde_json::to_string_pretty(all).map_err(|e| ClientError::CredentialsFormat {
                path: self.path.clone(),
                detail: e.to_string(),
            })?;
        let file_name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "credentials".into());
        let tmp = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
        let write = || -> std::io::Result<()> {
            let _ = std::fs::remove_file(&tmp);
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            file.write_all(text.as_bytes())?;
            file.write_all(b"\n")?;
            file.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
            Ok(())
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            self.io_err(e)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn profile(token: &str) -> Profile {
        Profile {
            url: "http://127.0.0.1:1".into(),
            email: "a@example.com".into(),
            id_token: token.into(),
            access_token: "access".into(),
            refresh_token: "refresh".into(),
            // Fixed, not from the clock: two profiles made a second apart
            // must still compare equal.
            expires_at: 4_000_000_000,
        }
    }

    #[test]
    fn profiles_round_trip_with_private_modes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = CredentialsStore::at(dir.path().join("cfg/svs/credentials"));
        assert!(store.load().expect("empty").is_empty());
        store.put("default", profile("one")).expect("saved");
        store.put("other", profile("two")).expect("saved");
        assert_eq!(store.get("default").expect("read"), Some(profile("one")));
        assert_eq!(store.get("other").expect("read"), Some(profile("two")));
        let file = std::fs::metadata(store.path()).expect("file");
        assert_eq!(file.mode() & 0o777, 0o600);
        let parent = std::fs::metadata(store.path().parent().expect("dir")).expect("dir");
        assert_eq!(parent.mode() & 0o777, 0o700);
        assert!(store.remove("default").expect("removed"));
        assert!(!store.remove("default").expect("gone"));
        assert_eq!(store.get("default").expect("read"), None);
        assert!(store.get("other").expect("read").is_some());
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(store.path().parent().expect("dir"))
            .expect("list")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("credentials")]);
    }

    #[test]
    fn expiry_margin() {
        let mut p = profile("t");
        p.expires_at = now_secs() + 30;
        assert!(p.expires_within(60));
        p.expires_at = now_secs() + 600;
        assert!(!p.expires_within(60));
    }
}
