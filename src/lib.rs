//! svs: a self-hosted storage volume service with a Volumez-compatible API.
//!
//! Layers, lowest first: `svs-domain` (model, planner; pure) ← `svs-store`
//! (persistence) and `svs-dataplane` (media) ← `exports` (NBD exports) ←
//! `jobs` (runner) ← `reconcile` (periodic repairs) ← `service` (use cases) ←
//! `api` (HTTP) ← `app` / `cli` (the binary). `client` (the CLI's HTTP
//! client) and `agent` (the host agent) talk to the service over HTTP only.
//! `workers` (status of background work), `clock` and `changes` (what wakes
//! node agents' long polls) sit beside them, used by all; `snapshot_space`
//! (snapshot usage and the media's snapshot budgets) serves `jobs`,
//! `reconcile` and `app`.

pub mod agent;
pub mod agent_wire;
pub mod api;
pub mod app;
pub mod attributes;
pub mod auth;
pub mod backoff;
pub mod backup;
pub mod changes;
pub mod cli;
pub mod client;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod csi;
pub mod exports;
pub mod front_calls_wire;
pub mod front_exports;
pub mod fronts;
pub mod fronts_wire;
pub mod http;
pub mod jobs;
pub mod logging;
pub mod media_health;
pub mod metrics;
pub mod node_media;
pub mod reconcile;
pub mod secret_files;
pub mod service;
pub mod slice_tls;
pub mod snapshot_space;
pub mod stop_signal;
pub mod storage_node;
pub mod storage_wire;
#[cfg(test)]
mod testing;
pub mod tls;
pub mod views_wire;
pub mod workers;
