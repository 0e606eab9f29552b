//! Helpers of the `filesystem` tests, shared with other test files.

/// svs formatted and grew the volume through its FUSE file (mkfs and the
/// grow tools check access and probe ioctls and xattrs, and every FUSE file
/// is unmounted): the FUSE library's "[Not Implemented] ..." and "Unmount failed: ..."
/// warnings are expected noise and must not reach the service log.
pub(crate) fn fuse_library_stayed_quiet(log: &str) {
    for noise in ["Not Implemented", "Unmount failed", "Failed to umount"] {
        assert!(!log.contains(noise), "{noise:?} in the service log:\n{log}");
    }
    let fuser_warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("fuser") && (l.contains("WARN") || l.contains("ERROR")))
        .collect();
    assert!(fuser_warnings.is_empty(), "{fuser_warnings:#?}");
}
