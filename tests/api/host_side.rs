//! The host side of a test that runs a host agent or a CSI node plugin:
//! a temp directory for its state and mounts, and a guard that leaves
//! nothing mounted, looped or running under it.
