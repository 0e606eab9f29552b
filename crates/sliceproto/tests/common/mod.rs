//! A storage node's server core over the in-memory backend, on 127.0.0.1.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use svs_sliceproto::testing::{MemBackend, MemEpochs, OneCredential};
use svs_sliceproto::{ServerConfig, SliceClient, SliceName, SliceServer, PROTOCOL_VERSION};

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

/// A hello reply accepting the client, written from the documented wire
/// format (not from the crate's code).
pub fn hello_reply(max_payload: u32) -> Vec<u8> {
    let mut b = b"SVSSLICE".to_vec();
    b.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&max_payload.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b
}

/// A node that takes the hello, then reads requests and never answers.
pub fn silent_node() -> (std::net::SocketAddr, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut h = [0u8; 16];
        s.read_exact(&mut h).unwrap();
        let rest = u16::from_le_bytes([h[12], h[13]]) + u16::from_le_bytes([h[14], h[15]]);
        s.read_exact(&mut vec![0u8; rest as usize]).unwrap();
        s.write_all(&hello_reply(1 << 20)).unwrap();
        // Swallows requests until the client goes.
        let mut sink = [0u8; 4096];
        while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
    });
    (addr, t)
}
