//! Helpers of the `csi_controller` tests, shared with other test files.

use crate::harness::{svs_bin, TestApp, ADMIN_EMAIL, ADMIN_PASSWORD};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use svs_csi::proto::controller_client::ControllerClient;
use svs_csi::proto::identity_client::IdentityClient;
use svs_csi::proto::volume_capability::access_mode::Mode;
use svs_csi::proto::volume_capability::AccessMode;
use svs_csi::proto::*;
use svs_csi::tonic::transport::Channel;
use tempfile::TempDir;

/// A running `svs csi controller`, killed on drop.
pub(crate) struct Plugin {
    pub(crate) child: Child,
    pub(crate) dir: TempDir,
    pub(crate) channel: Channel,
}

impl Plugin {
    pub(crate) async fn start(app: &TestApp) -> Plugin {
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("csi.sock");
        let endpoint = format!("unix://{}", socket.display());
        let log = std::fs::File::create(dir.path().join("plugin.log")).expect("log file");
        let mut command = Command::new(svs_bin());
        command.args(["csi", "controller"]);
        if app.base.starts_with("https://") {
            // A service with its own CA (tls = "auto").
            command.arg("--ca-cert").arg(app.ca_cert());
        }
        let child = command
            .args(["--endpoint", &endpoint, "--url"])
            .arg(&app.base)
            // A clone's copy shares the machine with the whole test run:
            // a long wait rather than the orchestrator's retries.
            .args(["--email", ADMIN_EMAIL, "--job-timeout-secs", "300"])
            .env("SVS_CSI_PASSWORD", ADMIN_PASSWORD)
            .env("SVS_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("svs csi controller starts");
        let channel = connect_when_listening(&endpoint).await;
        Plugin {
            child,
            dir,
            channel,
        }
    }

    pub(crate) fn controller(&self) -> ControllerClient<Channel> {
        ControllerClient::new(self.channel.clone())
    }

    pub(crate) fn identity(&self) -> IdentityClient<Channel> {
        IdentityClient::new(self.channel.clone())
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.dir.path().join("plugin.log"));
            eprintln!("---- plugin log ----\n{}", log.unwrap_or_default());
        }
    }
}

/// A channel to the plugin at `endpoint` once it accepts connections. The
/// socket file appears at bind(), a moment before listen(): a connection in
/// between is refused, so connecting is retried rather than the file watched.
pub(crate) async fn connect_when_listening(endpoint: &str) -> Channel {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match svs_csi::connect(endpoint).await {
            Ok(channel) => return channel,
            Err(e) => assert!(Instant::now() < deadline, "the plugin never listened: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What GetPluginCapabilities answers for the plugin as a whole, the same
/// from both plugins (the CSI spec: every instance of one version).
pub(crate) const PLUGIN_CAPABILITIES: &[&str] = &[
    "expansion ONLINE",
    "service CONTROLLER_SERVICE",
    "service VOLUME_ACCESSIBILITY_CONSTRAINTS",
];

/// A GetPluginCapabilities answer as sorted names.
pub(crate) fn plugin_capability_names(caps: &GetPluginCapabilitiesResponse) -> Vec<String> {
    use plugin_capability::{service, volume_expansion, Type};
    let mut names: Vec<String> = caps
        .capabilities
        .iter()
        .map(|c| match &c.r#type {
            Some(Type::Service(s)) => format!(
                "service {}",
                service::Type::try_from(s.r#type).map_or("?", |t| t.as_str_name())
            ),
            Some(Type::VolumeExpansion(e)) => format!(
                "expansion {}",
                volume_expansion::Type::try_from(e.r#type).map_or("?", |t| t.as_str_name())
            ),
            None => "none".to_string(),
        })
        .collect();
    names.sort();
    names
}

pub(crate) fn mode(m: Mode) -> Option<AccessMode> {
    Some(AccessMode { mode: m as i32 })
}

pub(crate) async fn create(plugin: &Plugin, request: CreateVolumeRequest) -> Volume {
    plugin
        .controller()
        .create_volume(request)
        .await
        .expect("CreateVolume")
        .into_inner()
        .volume
        .expect("a volume")
}
