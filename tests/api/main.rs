//! Integration tests: the real `svs serve` over HTTP.

mod harness;

mod attach;
mod auth;
mod cli;
mod jobs;
mod policies;
mod resize;
mod roles;
mod startup;
mod tenants;
mod volumes;
