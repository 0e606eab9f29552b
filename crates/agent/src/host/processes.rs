//! The device processes of this host's attachments, found by their command
//! lines and signalled, and what each last logged.

use std::path::Path;

pub(super) fn signal(pid: u32, sig: libc::c_int) {
    // Never 0 (or what wraps to -1): kill(2) would signal a whole process
    // group, or every process.
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    if pid <= 0 {
        return;
    }
    // SAFETY: kill(2) takes plain integers and touches no memory.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// The process's command line, NUL-separated arguments.
pub(super) fn cmdline(pid: u32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// Whether `pid` is a live (not zombie) device process serving `dir`
/// (pids are reused: the command line must name the directory).
pub(super) fn is_device_process(pid: u32, dir: &Path) -> bool {
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true);
    if zombie {
        return false;
    }
    cmdline(pid).is_some_and(|args| is_device_cmdline(&args, dir))
}

pub(super) fn is_device_cmdline(args: &[String], dir: &Path) -> bool {
    let dir = dir.to_string_lossy();
    args.iter().any(|a| a == "agent-device")
        && args.windows(2).any(|w| w[0] == "--dir" && w[1] == dir)
}

/// Device processes serving `dir`.
pub(super) fn device_processes(dir: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| is_device_process(*pid, dir))
        .collect()
}

pub(super) fn last_line(log: &Path) -> String {
    std::fs::read_to_string(log)
        .ok()
        .and_then(|t| {
            t.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| "no output".into())
}
