//! Integration tests: the real `svs serve` over HTTP, one folder per role
//! (the process a test is about): the control plane, storage nodes, the
//! host agent, CSI, the command-line client and a volume's front.

mod harness;

mod agent;
mod cli;
mod control;
mod csi;
mod front;
mod storage_node;
