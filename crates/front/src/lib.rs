//! A volume's front, wherever it runs (`svs serve`, or a storage node with
//! `fronts = "nodes"`): the registry of its NBD exports, and the JSON the
//! control plane and a storage node exchange about fronts. It knows no
//! store (`tests/layers.rs`).

pub mod calls_wire;
pub mod exports;
pub mod tcp;
pub mod wire;
