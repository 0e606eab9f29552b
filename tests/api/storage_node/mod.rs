//! Storage nodes, `svs storage-node`: registration, heartbeats and
//! credentials, the slice protocol (and its TLS), copies on nodes that fall
//! behind, resync and move between nodes, and volumes' fronts run on a node
//! (the control plane's side of them and the node's).

mod fan_out;
mod fresh_nodes;
mod front_on_node;
mod node_credentials;
mod node_fronts;
mod node_moves;
mod resync;
mod stale_copies;
mod storage_nodes;
mod tls;
