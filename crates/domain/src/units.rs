//! Quantities for people: the service's job statuses and the CLI's tables
//! write byte counts the same way.

/// A byte count in binary units: "0 B", "512 B", "64.0 KiB", "1.5 GiB".
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    // Lossy above 2^53 bytes, far beyond what one decimal shows.
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A duration for people: "42 s", "3 min 5 s", "2 h 10 min".
pub fn human_duration(secs: u64) -> String {
    match secs {
        0..=59 => format!("{secs} s"),
        60..=3599 => format!("{} min {} s", secs / 60, secs % 60),
        _ => format!("{} h {} min", secs / 3600, secs % 3600 / 60),
    }
}

/// Seconds a job `progress` percent done after `elapsed_ms` still needs
/// at the pace it kept: None before it has made 1 %.
pub fn time_left_secs(progress: u8, elapsed_ms: i64) -> Option<u64> {
    let progress = u64::from(progress.min(100));
    if progress == 0 {
        return None;
    }
    let elapsed = u64::try_from(elapsed_ms).ok()?;
    Some((elapsed * (100 - progress) / progress).div_ceil(1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_time_left_read_as_people_say_them() {
        assert_eq!(human_duration(42), "42 s");
        assert_eq!(human_duration(185), "3 min 5 s");
        assert_eq!(human_duration(7_800), "2 h 10 min");
        assert_eq!(time_left_secs(0, 5_000), None);
        assert_eq!(time_left_secs(25, 10_000), Some(30));
        assert_eq!(time_left_secs(100, 10_000), Some(0));
        assert_eq!(time_left_secs(50, -1), None);
    }

    #[test]
    fn byte_counts_are_shown_in_binary_units() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1.0 KiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(65536), "64.0 KiB");
        assert_eq!(human_bytes(3 * 1024 * 1024 / 2), "1.5 MiB");
        assert_eq!(human_bytes(4 << 30), "4.0 GiB");
        assert_eq!(human_bytes(u64::MAX), "16.0 EiB");
    }
}
