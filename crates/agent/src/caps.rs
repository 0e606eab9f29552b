//! Whether this agent may grow a mounted ext4 filesystem: online ext4
//! growth (`resize2fs` on a mounted device, the `EXT4_IOC_RESIZE_FS`
//! ioctl) needs `CAP_SYS_RESOURCE`, which containers and some service
//! managers drop even for root. Without it every ext4 growth fails with
//! `Permission denied to resize filesystem`, so the agent says so at start.

/// `CAP_SYS_RESOURCE` (linux/capability.h).
const CAP_SYS_RESOURCE: u32 = 24;

/// The hex capability mask of a `/proc/<pid>/status` line such as `CapEff`.
fn mask(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        u64::from_str_radix(rest.trim(), 16).ok()
    })
}

/// Why this process cannot grow a mounted ext4 filesystem, from the text
/// of `/proc/self/status`; None when it can (or the text says nothing).
pub fn ext4_growth_blocked(status: &str) -> Option<String> {
    let bit = 1u64 << CAP_SYS_RESOURCE;
    let effective = mask(status, "CapEff")?;
    if effective & bit != 0 {
        return None;
    }
    let bounded = mask(status, "CapBnd").is_some_and(|b| b & bit == 0);
    Some(format!(
        "this agent cannot grow mounted ext4 filesystems: it lacks CAP_SYS_RESOURCE{} \
         (resize2fs answers \"Permission denied to resize filesystem\"); give it the \
         capability (systemd: AmbientCapabilities=CAP_SYS_RESOURCE; a container: \
         --cap-add SYS_RESOURCE) or use XFS, which grows without it",
        if bounded {
            " (not even in its bounding set)"
        } else {
            ""
        }
    ))
}

/// Logs a warning when this process cannot grow a mounted ext4.
pub fn warn_if_ext4_growth_blocked() {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return;
    };
    if let Some(why) = ext4_growth_blocked(&status) {
        tracing::warn!("{why}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_cap_sys_resource_is_named_and_a_present_one_is_not() {
        let without = "Name:\tsvs\nCapInh:\t0000000000000000\nCapPrm:\t000001fffeffffff\n\
                       CapEff:\t000001fffeffffff\nCapBnd:\t000001fffeffffff\n";
        let why = ext4_growth_blocked(without).unwrap_or_default();
        assert!(
            why.contains("lacks CAP_SYS_RESOURCE (not even in its bounding set)"),
            "{why}"
        );
        let with = "CapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\n";
        assert_eq!(ext4_growth_blocked(with), None);
        // Dropped from the effective set only: it could be regained.
        let dropped = "CapEff:\t000001fffeffffff\nCapBnd:\t000001ffffffffff\n";
        let why = ext4_growth_blocked(dropped).unwrap_or_default();
        assert!(why.contains("lacks CAP_SYS_RESOURCE (resize2fs"), "{why}");
        assert_eq!(ext4_growth_blocked("Name:\tsvs\n"), None);
    }
}
