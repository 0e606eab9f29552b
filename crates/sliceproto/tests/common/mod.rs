//! A storage node's server core over the in-memory backend, on 127.0.0.1.
#![allow(dead_code)]

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use svs_sliceproto::testing::{MemBackend, MemEpochs, OneCredential};
use svs_sliceproto::{ServerConfig, SliceClient, SliceName, SliceServer};

pub const CREDENTIAL: &str = "node-secret";
pub const TIMEOUT: Duration = Duration::from_secs(5);

pub struct Node {
    pub server: SliceServer,
    pub backend: Arc<MemBackend>,
    pub epochs: Arc<MemEpochs>,
}

impl Node {
    pub fn start(config: ServerConfig) -> Node {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let backend = Arc::new(MemBackend::new());
        let epochs = Arc::new(MemEpochs::default());
        let server = SliceServer::start(
            listener,
            config,
            backend.clone(),
            Arc::new(OneCredential(CREDENTIAL.into())),
            epochs.clone(),
        )
        .unwrap();
        Node {
            server,
            backend,
            epochs,
        }
    }

    pub fn client(&self) -> SliceClient {
        self.client_with_timeout(TIMEOUT)
    }

    pub fn client_with_timeout(&self, timeout: Duration) -> SliceClient {
        SliceClient::connect(self.server.local_addr(), CREDENTIAL, "front-1", timeout).unwrap()
    }
}

pub fn node() -> Node {
    Node::start(ServerConfig::default())
}

pub fn slice() -> SliceName {
    SliceName::new("m1", "vol-1", 0, 1)
}
