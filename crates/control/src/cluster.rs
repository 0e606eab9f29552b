//! What makes one `svs serve` one instance among several on a shared
//! database: its instance id, the owner name of every lease it takes (job
//! claims, the reconcilers' leadership).

/// This process's instance id: host, process id and a random part, so that
/// a restarted process on the same host (same pid after a reboot) is
/// another owner and never mistakes an earlier process's leases for its own.
pub fn new_instance_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "host".to_string());
    format!(
        "{host}:{}:{:08x}",
        std::process::id(),
        rand::random::<u32>()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_ids_differ_between_calls() {
        let (a, b) = (new_instance_id(), new_instance_id());
        assert_ne!(a, b);
        assert!(a.contains(&format!(":{}:", std::process::id())));
    }
}
