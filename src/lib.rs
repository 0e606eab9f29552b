//! svs: a self-hosted storage volume service with a Volumez-compatible API.
//! This package is the `svs` binary and its command line ([`cli`]); the
//! roles are crates of their own (docs/layout.md draws them, cargo keeps
//! their arrows and `tests/layers.rs` what cargo cannot check):
//! - `svs-api` (`svs serve`'s start-up, HTTP server and handlers) over
//!   `svs-control` (the use cases, jobs, reconcilers, auth, backup);
//! - `svs-front`: a volume's front, wherever it runs (`svs serve` or a
//!   storage node): its NBD exports and the wire the two share;
//! - `svs-storage-node`: `svs storage-node`, slices and fronts on a host;
//! - `svs-agent` (the host agent), `svs-csi-driver` (the CSI plugins) and
//!   `svs-client` (the HTTP client and the commands over it): they talk to
//!   the control plane over HTTP only, in `svs-wire`'s bodies and views;
//! - `svs-common`: what every process uses (TLS, logging, clock, secret
//!   files, stop signal, back-off, metrics).
//!
//! Below them: `svs-domain` (model, planner; pure) ← `svs-store`
//! (persistence) and `svs-dataplane` (media).

pub mod cli;
