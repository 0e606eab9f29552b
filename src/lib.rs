//! svs: a self-hosted storage volume service with a Volumez-compatible API.
//!
//! The tree is by role (docs/layout.md draws it, `tests/layers.rs` keeps
//! its arrows):
//! - [`control`]: the control plane, `svs serve` (start-up, HTTP, the API,
//!   the use cases, jobs, reconcilers, auth, backup);
//! - [`front`]: a volume's front, wherever it runs (`svs serve` or a
//!   storage node): its NBD exports and the wire the two share;
//! - [`storage_node`]: `svs storage-node`, slices and fronts on a host;
//! - [`agent`]: the host agent; [`csi`]: the CSI plugins; [`client`] and
//!   [`cli`]: the HTTP client and the commands. All of them talk to the
//!   control plane over HTTP only;
//! - [`common`]: what every process uses (TLS, logging, clock, secret
//!   files, stop signal, back-off).
//!
//! Below them, the crates: `svs-domain` (model, planner; pure) ←
//! `svs-store` (persistence) and `svs-dataplane` (media) ← this crate.

pub mod agent;
pub mod cli;
pub mod client;
pub mod common;
pub mod control;
pub mod csi;
pub mod front;
pub mod storage_node;
#[cfg(test)]
mod testing;
pub mod wire;
