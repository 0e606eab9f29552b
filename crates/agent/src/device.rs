//! The device process (`svs agent-device`): one per attached volume on a
//! host, holding the volume's NBD connection and serving it as the file
//! `<dir>/fuse/volume` that a loop device turns into a block device.
//!
//! It is a process of its own, in its own process group, so that the
//! agent can stop, crash or be upgraded while filesystems stay mounted on
//! the device: the agent finds it again by its directory. It reconnects to
//! the service by itself (a restart of `svs serve` only delays I/O), to the
//! address in `<dir>/address`, which the agent rewrites when the volume's
//! front moves (to another storage node: same export, another address).
//! SIGHUP: connect anew (to that address) and learn the volume's size (it
//! grew, or the front moved). SIGTERM: unmount the FUSE file and exit (the
//! agent detaches the loop device first).

use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use svs_hostdev::FuseFile;
use svs_nbd::{AddressSource, ReconnectOptions, ReconnectingClient};
use tokio::signal::unix::{signal, SignalKind};

/// The file's name inside the FUSE mount.
pub const FILE_NAME: &str = "volume";

/// What the agent hands the device process on its stdin (the export name
/// is a capability: never on a command line, where `ps` shows it).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceSpec {
    /// `host:port` of the NBD server of the volume's front, unless
    /// `<dir>/address` names another (the front moved).
    pub address: String,
    pub export: String,
    pub readonly: bool,
    /// Hand the connection to the kernel's NBD driver (`/dev/nbdN`)
    /// instead of serving a FUSE file.
    #[serde(default)]
    pub kernel: bool,
    /// Start TLS (`NBD_OPT_STARTTLS`): the URI was `nbds://`.
    #[serde(default)]
    pub tls: bool,
    /// A CA certificate to trust beside the built-in roots (the agent's
    /// `--ca-cert`).
    #[serde(default)]
    pub ca_cert: Option<PathBuf>,
}

/// How the agent makes block devices (`svs agent --block-device`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BlockDeviceMode {
    /// svs's reconnecting NBD client behind a FUSE file and a loop device:
    /// survives restarts of the service and sees the volume grow.
    Fuse,
    /// The kernel's NBD driver (hosts with the `nbd` module). Through its
    /// ioctl interface it cannot reconnect or change size: a restart of
    /// the service fails its I/O, and a grown volume needs a new attach.
    KernelNbd,
}

/// Where the device process of a kernel NBD device writes its path.
pub fn kernel_device_file(dir: &Path) -> PathBuf {
    dir.join("kernel-device")
}

/// The file in a device directory naming the `host:port` the device
/// process connects to whenever it connects again.
pub fn address_file(dir: &Path) -> PathBuf {
    dir.join("address")
}

/// Writes the device's address: a temporary file renamed over the old one,
/// so that a device process reading it meanwhile sees one address or the
/// other, never a part. Not synced: after a crash of the host no device
/// process is left to read it, and the agent writes it again.
pub fn write_address(dir: &Path, address: &str) -> Result<(), String> {
    let path = address_file(dir);
    let tmp = dir.join("address.tmp");
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(format!("{address}\n").as_bytes()))
        .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &path).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The address in the device directory's file: None when there is no
/// file; an error when it is unreadable or no `host:port`.
pub fn read_address(dir: &Path) -> Result<Option<String>, String> {
    let path = address_file(dir);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let address = text.trim();
    if !is_address(address) {
        return Err(format!(
            "{} holds {address:?}, not host:port",
            path.display()
        ));
    }
    Ok(Some(address.to_string()))
}

/// `host:port`, as an NBD URI names it.
fn is_address(text: &str) -> bool {
    text.rsplit_once(':').is_some_and(|(host, port)| {
        !host.is_empty() && !host.contains(char::is_whitespace) && port.parse::<u16>().is_ok()
    })
}

/// Where the device connects: the address file's (the agent's latest
/// word), else the last address known (the spec's at first). An unusable
/// file is logged and the last address kept.
fn address_source(dir: &Path, initial: String) -> AddressSource {
    let dir = dir.to_path_buf();
    let last = Mutex::new(initial);
    Arc::new(move || {
        let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
        match read_address(&dir) {
            Ok(Some(address)) => *last = address,
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, address = %*last, "keeping the last address"),
        }
        last.clone()
    })
}

/// The FUSE mount's directory inside a device directory.
pub fn fuse_dir(dir: &Path) -> PathBuf {
    dir.join("fuse")
}

/// `nbd://host:port/export` (or `nbds://`, NBD over TLS) → (`host:port`,
/// `export`).
pub fn parse_uri(uri: &str) -> Option<(String, String)> {
    let rest = uri
        .strip_prefix("nbd://")
        .or_else(|| uri.strip_prefix("nbds://"))?;
    let (address, export) = rest.split_once('/')?;
    if address.is_empty() || export.is_empty() {
        return None;
    }
    Some((address.to_string(), export.to_string()))
}

/// Whether an NBD URI asks for TLS (`nbds://`: the server offers
/// `NBD_OPT_STARTTLS`, or requires it).
pub fn uri_uses_tls(uri: &str) -> bool {
    uri.starts_with("nbds://")
}

/// The TLS of a device process's NBD client: the built-in roots and the
/// spec's CA, the server's certificate checked for the host of `address`
/// (and, once the front moved, for the host of the address connected to:
/// the reconnecting client does that).
fn client_tls(spec: &DeviceSpec, address: &str) -> Result<svs_nbd::ClientTls, String> {
    if let Some(ca) = &spec.ca_cert {
        svs_common::tls::trust_ca_file(ca)?;
    }
    let config = svs_common::tls::client_config()?;
    svs_nbd::ClientTls::new(config, svs_nbd::address_host(address)).map_err(|e| e.to_string())
}

/// Runs the device until SIGTERM or SIGINT.
pub async fn run_device(dir: PathBuf) -> Result<(), String> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| format!("reading the device spec: {e}"))?;
    let spec: DeviceSpec =
        serde_json::from_str(&text).map_err(|e| format!("bad device spec: {e}"))?;
    let mut hangup = signal(SignalKind::hangup()).map_err(|e| e.to_string())?;
    let stop = svs_common::stop_signal::stop_signal().map_err(|e| e.to_string())?;
    tokio::pin!(stop);

    if spec.kernel {
        if spec.tls {
            return Err(format!(
                "nbds://{}: the kernel's NBD driver cannot speak TLS; run the agent with \
                 --block-device fuse",
                spec.address
            ));
        }
        return run_kernel_device(&dir, &spec, stop, hangup).await;
    }
    let source = address_source(&dir, spec.address.clone());
    let address = source();
    let options = ReconnectOptions {
        tls: if spec.tls {
            Some(client_tls(&spec, &address)?)
        } else {
            None
        },
        ..ReconnectOptions::default()
    };
    let export = spec.export.clone();
    let client = tokio::task::spawn_blocking(move || {
        ReconnectingClient::connect_following(source, export, options)
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| {
        let scheme = if spec.tls { "nbds" } else { "nbd" };
        format!("cannot connect to {scheme}://{address}: {e}")
    })?;
    let client = Arc::new(client);
    let mountpoint = fuse_dir(&dir);
    std::fs::create_dir_all(&mountpoint)
        .map_err(|e| format!("cannot make {}: {e}", mountpoint.display()))?;
    let file = FuseFile::mount(client.clone(), &mountpoint, FILE_NAME)
        .map_err(|e| format!("cannot mount the FUSE file: {e}"))?;
    tracing::info!(dir = %dir.display(), size = client.size(), "device ready");

    // A refresh runs aside: while the server is unreachable it retries for
    // minutes, and SIGTERM must still be heard meanwhile.
    let (refreshed_tx, mut refreshed) = tokio::sync::mpsc::unbounded_channel();
    loop {
        tokio::select! {
            _ = hangup.recv() => {
                let c = client.clone();
                let tx = refreshed_tx.clone();
                tokio::task::spawn_blocking(move || {
                    let _ = tx.send(c.refresh_size().map(|size| (size, c.address())));
                });
            }
            Some(result) = refreshed.recv() => match result {
                Ok((size, address)) => match file.set_size(size) {
                    Ok(()) => tracing::info!(size, address, "device size refreshed"),
                    Err(e) => tracing::warn!(error = %e, "device size not refreshed"),
                },
                Err(e) => tracing::warn!(error = %e, "device size not refreshed"),
            },
            () = &mut stop => break,
        }
    }
    // Nothing waits for a service that may never come back (a detach
    // whose export is already gone): pending retries fail now.
    client.close();
    // The loop device is gone by now (the agent detaches it first); its
    // release can lag a moment, which FuseFile::unmount waits out.
    let result = tokio::task::spawn_blocking(move || file.unmount())
        .await
        .map_err(|e| e.to_string())?;
    // Let the FUSE threads drop their references before the client goes.
    tokio::time::sleep(Duration::from_millis(10)).await;
    result.map_err(|e| format!("FUSE file not unmounted: {e}"))
}

/// The kernel NBD mode: connect `/dev/nbdN`, say which, hold it until
/// SIGTERM.
async fn run_kernel_device(
    dir: &Path,
    spec: &DeviceSpec,
    mut stop: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
    mut hangup: tokio::signal::unix::Signal,
) -> Result<(), String> {
    use std::net::ToSocketAddrs;
    let addr = spec
        .address
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("cannot resolve {}", spec.address))?;
    let export = spec.export.clone();
    let device = tokio::task::spawn_blocking(move || {
        svs_hostdev::KernelNbd::connect(&addr, &export, Duration::from_secs(600))
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("cannot connect the kernel NBD device: {e}"))?;
    std::fs::write(
        kernel_device_file(dir),
        device.device().to_string_lossy().as_bytes(),
    )
    .map_err(|e| format!("cannot record the kernel NBD device: {e}"))?;
    tracing::info!(device = %device.device().display(), "kernel NBD device ready");
    loop {
        tokio::select! {
            _ = hangup.recv() => tracing::warn!(
                "a kernel NBD device keeps its size while connected: detach and attach again"
            ),
            () = &mut stop => break,
        }
    }
    tokio::task::spawn_blocking(move || device.disconnect())
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("kernel NBD device not disconnected: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nbd_uris_split_into_address_and_export() {
        assert_eq!(
            parse_uri("nbd://127.0.0.1:10809/abc123"),
            Some(("127.0.0.1:10809".into(), "abc123".into()))
        );
        assert_eq!(
            parse_uri("nbds://[::1]:10809/abc123"),
            Some(("[::1]:10809".into(), "abc123".into()))
        );
        assert!(uri_uses_tls("nbds://h:1/e") && !uri_uses_tls("nbd://h:1/e"));
        assert_eq!(parse_uri("nbd://127.0.0.1:10809/"), None);
        assert_eq!(parse_uri("http://x/y"), None);
        assert_eq!(parse_uri("nbd://x"), None);
    }

    #[test]
    fn the_address_file_round_trips_and_replaces_the_old_address() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("v-top");
        assert_eq!(read_address(&dev), Ok(None));
        write_address(&dev, "127.0.0.1:10809").unwrap();
        assert_eq!(read_address(&dev), Ok(Some("127.0.0.1:10809".into())));
        write_address(&dev, "[fd00::7]:10809").unwrap();
        assert_eq!(read_address(&dev), Ok(Some("[fd00::7]:10809".into())));
        // Renamed into place: no temporary file is left.
        let names: Vec<_> = std::fs::read_dir(&dev)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("address")]);
    }

    #[test]
    fn the_device_follows_the_address_file_and_keeps_the_last_good_address() {
        let dir = tempfile::tempdir().unwrap();
        let source = address_source(dir.path(), "127.0.0.1:10809".into());
        assert_eq!(source(), "127.0.0.1:10809");
        write_address(dir.path(), "127.0.0.2:10810").unwrap();
        assert_eq!(source(), "127.0.0.2:10810");
        std::fs::write(address_file(dir.path()), "garbage\n").unwrap();
        assert!(read_address(dir.path()).is_err());
        assert_eq!(source(), "127.0.0.2:10810");
        std::fs::remove_file(address_file(dir.path())).unwrap();
        assert_eq!(source(), "127.0.0.2:10810");
        assert!(is_address("node-7:1") && !is_address("node-7") && !is_address(":1"));
        assert!(!is_address("h:99999") && !is_address("a b:1"));
    }
}
