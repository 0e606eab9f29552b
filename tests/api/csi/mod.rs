//! The CSI driver: the controller plugin (`svs csi controller`), the node
//! plugin (`svs csi node`), and the whole lifecycle through both.

mod controller;
mod lifecycle;
mod node;
