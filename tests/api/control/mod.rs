//! The control plane, `svs serve`, as its clients see it: sign-in, tokens
//! and their attacks, users, roles and tenants, the API document, policies,
//! volumes and their placement, resizes, dry runs and the data movements
//! (guard, cancel, steering, drains), jobs and workers, snapshots, media
//! and nodes through the API, recovery of failed media, reconcilers,
//! start-up and configuration, TLS, backups, PostgreSQL and several
//! instances, metrics, the console, and its servers' connections. Volumes
//! are on local media unless a test says otherwise.

mod auth;
mod backup;
mod cancel;
mod concurrency;
mod connections;
mod console;
mod contract;
mod drain;
mod dry_run;
mod filesystem;
mod forge;
mod guard;
mod infrastructure;
mod input_rules;
mod instances;
mod jobs;
mod lost_disk;
mod media_written;
mod metrics;
mod policies;
mod postgres;
mod reconcile;
mod recovery;
mod resize;
mod roles;
mod route_attacks;
mod signin_protection;
mod snapshots;
mod startup;
mod steering;
mod tenants;
mod tls;
mod token_hygiene;
mod users;
mod volume_facts;
mod volumes;
mod workers;
