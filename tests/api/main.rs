//! Integration tests: the real `svs serve` over HTTP.

mod harness;

mod attach;
mod auth;
mod cli;
mod concurrency;
mod connections;
mod contract;
mod jobs;
mod policies;
mod reconcile;
mod resize;
mod roles;
mod startup;
mod tenants;
mod volumes;
mod workers;
