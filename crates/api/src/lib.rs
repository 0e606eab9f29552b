//! `svs serve`'s HTTP face, on top of the control plane's use cases
//! (`svs-control`): start-up ([`app`]: configuration → data directory →
//! store → reconcilers → job runner → servers), the HTTP server ([`http`]:
//! limits, TLS, middleware) and the API ([`api`]: thin handlers that parse,
//! authorize, call the service and map its errors).
//!
//! A crate of its own so that a change to a handler rebuilds this crate
//! and the binary, not the control plane below it.

pub mod api;
pub mod app;
pub mod http;
