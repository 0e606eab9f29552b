//! The device process (`svs agent-device`): one per attached volume on a
//! host, holding the volume's NBD connection and serving it as the file
//! `<dir>/fuse/volume` that a loop device turns into a block device.
//!
//! It is a process of its own, in its own process group, so that the
//! agent can stop, crash or be upgraded while filesystems stay mounted on
//! the device: the agent finds it again by its directory. It reconnects to
//! the service by itself (a restart of `svs serve` only delays I/O). SIGHUP:
//! the volume grew, learn its new size. SIGTERM: unmount the FUSE file and
//! exit (the agent detaches the loop device first).

use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use svs_hostdev::FuseFile;
use svs_nbd::{ReconnectOptions, ReconnectingClient};
use tokio::signal::unix::{signal, SignalKind};

/// The file's name inside the FUSE mount.
pub const FILE_NAME: &str = "volume";

/// What the agent hands the device process on its stdin (the export name
/// is a capability: never on a command line, where `ps` shows it).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceSpec {
    /// `host:port` of the service's NBD server.
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
/// spec's CA, the server's certificate checked for the host of `address`.
fn client_tls(spec: &DeviceSpec) -> Result<svs_nbd::ClientTls, String> {
    if let Some(ca) = &spec.ca_cert {
        crate::tls::trust_ca_file(ca)?;
    }
    let config = crate::tls::client_config()?;
    let host = spec
        .address
        .rsplit_once(':')
        .map_or(spec.address.as_str(), |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    svs_nbd::ClientTls::new(config, host).map_err(|e| e.to_string())
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
    let mut terminate = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;

    if spec.kernel {
        if spec.tls {
            return Err(format!(
                "nbds://{}: the kernel's NBD driver cannot speak TLS; run the agent with \
                 --block-device fuse",
                spec.address
            ));
        }
        return run_kernel_device(&dir, &spec, terminate, interrupt, hangup).await;
    }
    let options = ReconnectOptions {
        tls: if spec.tls {
            Some(client_tls(&spec)?)
        } else {
            None
        },
        ..ReconnectOptions::default()
    };
    let (address, export) = (spec.address.clone(), spec.export.clone());
    let client =
        tokio::task::spawn_blocking(move || ReconnectingClient::connect(address, export, options))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| {
                let scheme = if spec.tls { "nbds" } else { "nbd" };
                format!("cannot connect to {scheme}://{}: {e}", spec.address)
            })?;
    let client = Arc::new(client);
    let mountpoint = fuse_dir(&dir);
    std::fs::create_dir_all(&mountpoint)
        .map_err(|e| format!("cannot make {}: {e}", mountpoint.display()))?;
    let file = FuseFile::mount(client.clone(), &mountpoint, FILE_NAME)
        .map_err(|e| format!("cannot mount the FUSE file: {e}"))?;
    tracing::info!(dir = %dir.display(), size = client.size(), "device ready");

    loop {
        tokio::select! {
            _ = hangup.recv() => {
                let c = client.clone();
                match tokio::task::spawn_blocking(move || c.refresh_size()).await {
                    Ok(Ok(size)) => match file.set_size(size) {
                        Ok(()) => tracing::info!(size, "device size refreshed"),
                        Err(e) => tracing::warn!(error = %e, "device size not refreshed"),
                    },
                    Ok(Err(e)) => tracing::warn!(error = %e, "device size not refreshed"),
                    Err(e) => tracing::warn!(error = %e, "device size not refreshed"),
                }
            }
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
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
    mut terminate: tokio::signal::unix::Signal,
    mut interrupt: tokio::signal::unix::Signal,
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
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
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
}
