//! The `svs` command-line client against the real service: its commands,
//! and the user commands with their password sources.

mod client;
mod users;
