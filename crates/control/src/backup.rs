//! `svs backup` and `svs restore`: the service's own state in one tar
//! archive. It holds `manifest.json` (first), an online copy of the database
//! (`svs.db`, see `SqlStore::copy_sqlite_database`) and the token signing keys
//! (`token-signing.key`, `token-keys/*`), and the TLS files of `tls =
//! "auto"` (`tls/*`: the private CA, so restored clients keep trusting the
//! service). Slice data is not in it: it lives
//! on the media, which are backed up (or replicated) as media are. The lock
//! file is not state, and the demo media are media.

use crate::auth::{KEY_FILE, RETIRED_DIR};
use crate::data_dir::{lock_data_dir, DB_FILE, LOCK_FILE};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use svs_common::clock::{Clock, SystemClock};
use svs_store::SqlStore;

pub const MANIFEST_FILE: &str = "manifest.json";
const FORMAT: &str = "svs-backup";
const FORMAT_VERSION: u32 = 1;

/// What `manifest.json` says about the archive.
#[derive(Debug, Serialize, Deserialize)]
pub struct Manifest {
    /// Always "svs-backup".
    pub format: String,
    pub format_version: u32,
    /// The svs that wrote it.
    pub svs_version: String,
    /// The database's newest migration.
    pub schema_version: i64,
    /// When the copy was taken (RFC 3339, UTC).
    pub created: String,
    pub files: Vec<ManifestFile>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ManifestFile {
    /// Relative to the data directory, `/`-separated.
    pub path: String,
    pub size: u64,
    /// Hex SHA-256 of the content, checked on restore.
    pub sha256: String,
}

/// Writes the backup of `data_dir` to `out` (a new file), while the service
/// may be running.
pub async fn backup(data_dir: &Path, out: &Path) -> Result<Manifest, String> {
    let db = data_dir.join(DB_FILE);
    if !data_dir.is_dir() {
        return Err(format!(
            "data directory {} does not exist",
            data_dir.display()
        ));
    }
    if !db.is_file() {
        return Err(format!(
            "data directory {} holds no database ({DB_FILE}): nothing to back up",
            data_dir.display()
        ));
    }
    if out.exists() {
        return Err(format!(
            "{} already exists; name a new file (a backup never overwrites one)",
            out.display()
        ));
    }
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // Built beside its final place, then renamed: a failed backup leaves no
    // half-written archive under the name asked for.
    let work = tempfile::Builder::new()
        .prefix(".svs-backup-")
        .tempdir_in(&parent)
        .map_err(|e| format!("cannot write in {}: {e}", parent.display()))?;
    let db_copy = work.path().join(DB_FILE);
    let schema_version = SqlStore::copy_sqlite_database(&db, &db_copy)
        .await
        .map_err(|e| format!("cannot copy the database {}: {e}", db.display()))?;
    let created = crate::service::format_ms(SystemClock.now_ms());

    let mut files: Vec<(String, PathBuf)> = vec![(DB_FILE.to_string(), db_copy)];
    files.extend(key_files(data_dir)?);
    files.extend(tls_files(data_dir));
    let mut listed = Vec::new();
    for (name, path) in &files {
        let content = fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        listed.push(ManifestFile {
            path: name.clone(),
            size: content.len() as u64,
            sha256: hex::encode(Sha256::digest(&content)),
        });
    }
    let manifest = Manifest {
        format: FORMAT.into(),
        format_version: FORMAT_VERSION,
        svs_version: env!("CARGO_PKG_VERSION").into(),
        schema_version,
        created,
        files: listed,
    };
    let archive_path = work.path().join("archive.tar");
    write_archive(&archive_path, &manifest, &files)
        .map_err(|e| format!("cannot write the archive: {e}"))?;
    fs::rename(&archive_path, out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    if let Ok(dir) = File::open(&parent) {
        let _ = dir.sync_all();
    }
    Ok(manifest)
}

/// The signing keys: the current one (absent until the service first
/// started) and the retired ones.
fn key_files(data_dir: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let mut files = Vec::new();
    let current = data_dir.join(KEY_FILE);
    if current.is_file() {
        files.push((KEY_FILE.to_string(), current));
    }
    let retired = data_dir.join(RETIRED_DIR);
    let entries = match fs::read_dir(&retired) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(files),
        Err(e) => return Err(format!("cannot read {}: {e}", retired.display())),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", retired.display()))?;
        let is_file = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
        if let (true, Some(name)) = (is_file, entry.file_name().to_str()) {
            names.push(name.to_string());
        }
    }
    names.sort();
    for name in names {
        files.push((format!("{RETIRED_DIR}/{name}"), retired.join(&name)));
    }
    Ok(files)
}

/// The files of `tls = "auto"` that exist (none without it).
fn tls_files(data_dir: &Path) -> Vec<(String, PathBuf)> {
    svs_common::tls::AUTO_FILES
        .iter()
        .map(|name| (name.to_string(), data_dir.join(name)))
        .filter(|(_, path)| path.is_file())
        .collect()
}

fn write_archive(
    path: &Path,
    manifest: &Manifest,
    files: &[(String, PathBuf)],
) -> std::io::Result<()> {
    let file = File::options()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    let mut tar = tar::Builder::new(file);
    let manifest_json = serde_json::to_vec_pretty(manifest).map_err(std::io::Error::other)?;
    append(&mut tar, MANIFEST_FILE, &manifest_json)?;
    for (name, path) in files {
        let content = fs::read(path)?;
        append(&mut tar, name, &content)?;
    }
    let file = tar.into_inner()?;
    file.sync_all()
}

fn append(tar: &mut tar::Builder<File>, name: &str, content: &[u8]) -> std::io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(content.len() as u64);
    header.set_mode(0o600);
    header.set_mtime(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    );
    header.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut header, name, content)
}

/// Puts the backup `from` into `data_dir`, which must be empty or missing.
pub async fn restore(data_dir: &Path, from: &Path) -> Result<Manifest, String> {
    let archive = File::open(from).map_err(|e| format!("cannot open {}: {e}", from.display()))?;
    refuse_used_dir(data_dir)?;
    let created_dir = !data_dir.exists();
    // Held while restoring: an `svs serve` started meanwhile stops at once.
    let lock = lock_data_dir(data_dir)?;
    match unpack(data_dir, archive, from).await {
        Ok(manifest) => {
            drop(lock);
            Ok(manifest)
        }
        Err(message) => {
            // Leave the directory as it was found (empty, or missing).
            drop(lock);
            if created_dir {
                let _ = fs::remove_dir_all(data_dir);
            } else if let Ok(entries) = fs::read_dir(data_dir) {
                for entry in entries.flatten() {
                    let path = entry.path();
                    let _ = if path.is_dir() {
                        fs::remove_dir_all(&path)
                    } else {
                        fs::remove_file(&path)
                    };
                }
            }
            Err(message)
        }
    }
}

/// A restore never mixes its files with a data directory's own.
fn refuse_used_dir(data_dir: &Path) -> Result<(), String> {
    let mut entries = match fs::read_dir(data_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot read {}: {e}", data_dir.display())),
    };
    if entries.next().is_none() {
        return Ok(());
    }
    let lock = data_dir.join(LOCK_FILE);
    if let Ok(file) = File::open(&lock) {
        if let Err(std::fs::TryLockError::WouldBlock) = file.try_lock_shared() {
            return Err(format!(
                "data directory {} is in use by a running svs serve; restore into a new, empty directory",
                data_dir.display()
            ));
        }
    }
    Err(format!(
        "data directory {} is not empty; restore needs an empty or missing directory",
        data_dir.display()
    ))
}

async fn unpack(data_dir: &Path, archive: File, from: &Path) -> Result<Manifest, String> {
    let not_backup = |why: String| format!("{} is not an svs backup: {why}", from.display());
    let mut tar = tar::Archive::new(archive);
    let mut entries = tar.entries().map_err(|e| not_backup(e.to_string()))?;
    let manifest: Manifest = {
        let mut first = entries
            .next()
            .ok_or_else(|| not_backup("it is empty".into()))?
            .map_err(|e| not_backup(e.to_string()))?;
        let name = entry_name(&first).map_err(&not_backup)?;
        if name != MANIFEST_FILE {
            return Err(not_backup(format!(
                "it starts with {name}, not {MANIFEST_FILE}"
            )));
        }
        let mut text = Vec::new();
        first
            .read_to_end(&mut text)
            .map_err(|e| not_backup(e.to_string()))?;
        serde_json::from_slice(&text).map_err(|e| not_backup(format!("{MANIFEST_FILE}: {e}")))?
    };
    if manifest.format != FORMAT || manifest.format_version != FORMAT_VERSION {
        return Err(not_backup(format!(
            "format {} version {} (this svs reads {FORMAT} version {FORMAT_VERSION})",
            manifest.format, manifest.format_version
        )));
    }
    let latest = SqlStore::sqlite_schema_version();
    if manifest.schema_version > latest {
        return Err(format!(
            "{} was taken by svs {} with database schema {}, newer than this svs knows ({latest}); restore it with that svs version or newer",
            from.display(),
            manifest.svs_version,
            manifest.schema_version
        ));
    }

    let mut restored = Vec::new();
    for entry in entries {
        let mut entry = entry.map_err(|e| not_backup(e.to_string()))?;
        let name = entry_name(&entry).map_err(&not_backup)?;
        let Some(listed) = manifest.files.iter().find(|f| f.path == name) else {
            return Err(not_backup(format!("{name} is not in its manifest")));
        };
        if !allowed_path(&name) {
            return Err(not_backup(format!("{name} is not a data directory file")));
        }
        let mut content = Vec::new();
        entry
            .read_to_end(&mut content)
            .map_err(|e| not_backup(e.to_string()))?;
        if content.len() as u64 != listed.size
            || hex::encode(Sha256::digest(&content)) != listed.sha256
        {
            return Err(format!(
                "{}: {name} is damaged (its size or SHA-256 differs from the manifest)",
                from.display()
            ));
        }
        write_private(data_dir, &name, &content)?;
        restored.push(name);
    }
    for listed in &manifest.files {
        if !restored.contains(&listed.path) {
            return Err(not_backup(format!("{} is missing", listed.path)));
        }
    }
    let db = data_dir.join(DB_FILE);
    let version = SqlStore::check_sqlite_copy(&db)
        .await
        .map_err(|e| format!("the restored database {}: {e}", db.display()))?;
    if version != manifest.schema_version {
        return Err(not_backup(format!(
            "its database has schema {version}, its manifest says {}",
            manifest.schema_version
        )));
    }
    sync_dir(data_dir)?;
    Ok(manifest)
}

fn entry_name(entry: &tar::Entry<File>) -> Result<String, String> {
    let path = entry.path().map_err(|e| e.to_string())?;
    path.to_str()
        .map(str::to_string)
        .ok_or_else(|| format!("entry {} is not UTF-8", path.display()))
}

/// Only the files a backup writes: never a path out of the data directory.
fn allowed_path(name: &str) -> bool {
    if name == DB_FILE || name == KEY_FILE || svs_common::tls::AUTO_FILES.contains(&name) {
        return true;
    }
    match name.split_once('/') {
        Some((dir, file)) => {
            dir == RETIRED_DIR
                && !file.is_empty()
                && !file.contains('/')
                && file != "."
                && file != ".."
        }
        None => false,
    }
}

/// Owner-only files, as the service writes them (keys must be 0600).
fn write_private(data_dir: &Path, name: &str, content: &[u8]) -> Result<(), String> {
    let path = data_dir.join(name);
    if let Some(dir) = path.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let mut file = File::options()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    file.write_all(content)
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> Result<(), String> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("cannot sync {}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_data_directory_files_are_restored() {
        assert!(allowed_path("svs.db"));
        assert!(allowed_path("token-signing.key"));
        assert!(allowed_path("token-keys/retired-1-abc.key"));
        assert!(allowed_path("tls/ca-key.pem"));
        assert!(allowed_path("tls/server.pem"));
        for bad in [
            "tls/other.pem",
            "tls/../svs.db",
            "../svs.db",
            "/etc/passwd",
            "token-keys/../../x",
            "token-keys/",
            "token-keys/..",
            "media/a1/x",
            "svs.lock",
            "manifest.json",
        ] {
            assert!(!allowed_path(bad), "{bad}");
        }
    }
}
