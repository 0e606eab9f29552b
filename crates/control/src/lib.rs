//! The control plane's use cases, below `svs serve`'s HTTP face (the
//! `svs-api` crate: start-up, HTTP server, handlers): the use cases
//! ([`service`]), the job runner ([`jobs`]), the periodic repairs
//! ([`reconcile`]), authentication ([`auth`]), metrics, backups, the data
//! directory ([`data_dir`]), and the state they share (configuration,
//! workers' status, the node-agent change signal, snapshot space, storage
//! nodes' media and fronts).
//!
//! Layers, lowest first: `front_layout` (what opening a volume's front
//! reads) ← `jobs` ← `reconcile` ← `service` (← `svs-api`).

pub mod attributes;
pub mod auth;
pub mod backup;
pub mod changes;
pub mod cluster;
pub mod config;
pub mod data_dir;
pub mod front_layout;
pub mod fronts;
pub mod jobs;
pub mod media_health;
pub mod metrics_scrape;
pub mod node_media;
pub mod planning;
pub mod reconcile;
pub mod service;
pub mod snapshot_space;
#[cfg(test)]
mod testing;
pub mod tls;
pub mod workers;
