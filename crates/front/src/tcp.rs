//! The NBD servers' TCP settings, the same for `svs serve` and storage
//! nodes (`nbd_tcp_congestion`).

/// The NBD servers' TCP congestion control unless told otherwise.
pub const DEFAULT_NBD_TCP_CONGESTION: &str = "cubic";

/// `nbd_tcp_congestion`'s value: an algorithm, or None for "system" (the
/// kernel's default).
pub fn nbd_tcp_congestion(value: &str) -> Result<Option<svs_nbd::TcpCongestion>, String> {
    match value {
        "system" => Ok(None),
        name => svs_nbd::TcpCongestion::new(name)
            .map(Some)
            .map_err(|e| format!("{e}, or \"system\" for the kernel's default")),
    }
}
