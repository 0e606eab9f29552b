//! The control plane, `svs serve`: start-up ([`app`]), the HTTP server
//! ([`http`]), the API ([`api`]: thin handlers) over the use cases
//! ([`service`]), the job runner ([`jobs`]), the periodic repairs
//! ([`reconcile`]), authentication ([`auth`]), metrics, backups, and the
//! state they share (configuration, workers' status, the node-agent change
//! signal, snapshot space, storage nodes' media and fronts).
//!
//! Layers, lowest first: `front_layout` (what opening a volume's front
//! reads) ← `jobs` ← `reconcile` ← `service` ← `api` ← `app`.

pub mod api;
pub mod app;
pub mod attributes;
pub mod auth;
pub mod backup;
pub mod changes;
pub mod cluster;
pub mod config;
pub mod front_layout;
pub mod fronts;
pub mod http;
pub mod jobs;
pub mod media_health;
pub mod metrics_scrape;
pub mod node_media;
pub mod planning;
pub mod reconcile;
pub mod service;
pub mod snapshot_space;
pub mod tls;
pub mod workers;
