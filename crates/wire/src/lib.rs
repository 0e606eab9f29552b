//! The API's JSON that the control plane and its clients both read: one
//! definition (serde + utoipa) for the handlers that answer it and document
//! it, and for the client, CSI, the host agent and the storage node that
//! read or send it. Imports only `common`, `domain` and the crates below.

pub mod agent;
pub mod fields;
pub mod plans;
pub mod requests;
pub mod storage_node;
pub mod views;
