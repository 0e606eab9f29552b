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
    /// The controller plugin advertises the controller service.
    controller: bool,
}

impl<R: Readiness> IdentityService<R> {
    pub fn new(readiness: R, controller: bool) -> IdentityService<R> {
        IdentityService {
            readiness,
            controller,
        }
    }
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
        let mut capabilities = vec![capability(plugin_capability::Type::VolumeExpansion(
            plugin_capability::VolumeExpansion {
                r#type: volume_expansion::Type::Online as i32,
            },
        ))];
        if self.controller {
            for kind in [
                service::Type::ControllerService,
                service::Type::VolumeAccessibilityConstraints,
            ] {
                capabilities.push(capability(plugin_capability::Type::Service(
                    plugin_capability::Service {
                        r#type: kind as i32,
                    },
                )));
            }
        }
        Ok(Response::new(GetPluginCapabilitiesResponse {
            capabilities,
        }))
    }

    async fn probe(&self, _: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        match self.readiness.ready().await {
            Ok(()) => Ok(Response::new(ProbeResponse { ready: Some(true) })),
            Err(reason) => Err(Status::failed_precondition(reason)),
        }
    }
}
