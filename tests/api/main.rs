//! Integration tests: the real `svs serve` over HTTP.

mod harness;

mod agents;
mod attach;
mod auth;
mod backup;
mod cli;
mod concurrency;
mod connections;
mod contract;
mod csi_controller;
mod csi_lifecycle;
mod csi_node;
mod filesystem;
mod forge;
mod guard;
mod host_agent;
mod host_side;
mod hostdev;
mod jobs;
mod policies;
mod reconcile;
mod recovery;
mod resize;
mod roles;
mod route_attacks;
mod signin_protection;
mod snapshots;
mod startup;
mod tenants;
mod token_hygiene;
mod volumes;
mod workers;
