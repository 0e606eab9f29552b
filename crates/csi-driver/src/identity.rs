//! The Identity service both plugins serve.

use svs_csi::proto::identity_server::Identity;
use svs_csi::proto::plugin_capability::{self, service, volume_expansion};
use svs_csi::proto::{
    GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse, GetPluginInfoRequest,
    GetPluginInfoResponse, PluginCapability, ProbeRequest, ProbeResponse,
};
use svs_csi::tonic::{Request, Response, Status};

/// What a plugin checks when the orchestrator probes it.
#[svs_csi::tonic::async_trait]
pub trait Readiness: Send + Sync + 'static {
    /// Ok when the plugin can do its work; Err with the reason otherwise.
    async fn ready(&self) -> Result<(), String>;
}

/// Always ready (the node plugin needs nothing remote to answer).
pub struct AlwaysReady;

#[svs_csi::tonic::async_trait]
impl Readiness for AlwaysReady {
    async fn ready(&self) -> Result<(), String> {
        Ok(())
    }
}

pub struct IdentityService<R> {
    readiness: R,
}

impl<R: Readiness> IdentityService<R> {
    pub fn new(readiness: R) -> IdentityService<R> {
        IdentityService { readiness }
    }
}

/// What the plugin as a whole can do. The CSI spec asks every instance of
/// one version to answer the same set wherever it runs and whichever
/// services it serves: a client that asks the node plugin must still learn
/// that there is a controller (else it stages without ControllerPublish's
/// context) and that volumes have a topology (which NodeGetInfo reports).
pub fn plugin_capabilities() -> Vec<PluginCapability> {
    let mut capabilities: Vec<PluginCapability> = [
        service::Type::ControllerService,
        service::Type::VolumeAccessibilityConstraints,
    ]
    .into_iter()
    .map(|kind| {
        capability(plugin_capability::Type::Service(
            plugin_capability::Service {
                r#type: kind as i32,
            },
        ))
    })
    .collect();
    capabilities.push(capability(plugin_capability::Type::VolumeExpansion(
        plugin_capability::VolumeExpansion {
            r#type: volume_expansion::Type::Online as i32,
        },
    )));
    capabilities
}

fn capability(kind: plugin_capability::Type) -> PluginCapability {
    PluginCapability { r#type: Some(kind) }
}

#[svs_csi::tonic::async_trait]
impl<R: Readiness> Identity for IdentityService<R> {
    async fn get_plugin_info(
        &self,
        _: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        Ok(Response::new(GetPluginInfoResponse {
            name: svs_csi::DRIVER_NAME.to_string(),
            vendor_version: env!("CARGO_PKG_VERSION").to_string(),
            manifest: Default::default(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        Ok(Response::new(GetPluginCapabilitiesResponse {
            capabilities: plugin_capabilities(),
        }))
    }

    async fn probe(&self, _: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        match self.readiness.ready().await {
            Ok(()) => Ok(Response::new(ProbeResponse { ready: Some(true) })),
            Err(reason) => Err(Status::failed_precondition(reason)),
        }
    }
}
