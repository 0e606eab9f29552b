//! The host side: the host agent's routes on the control plane, the real
//! `svs agent` mounting and growing volumes on a host, the host-side block
//! path (svs's NBD client, FUSE files, loop devices), and filesystem
//! growths that fail.

mod agents;
mod fs_growth;
mod host_agent;
mod hostdev;
mod node_mount;
