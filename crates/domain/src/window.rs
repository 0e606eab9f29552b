//! The movement window (setting `movement_window`): the times of day, in
//! UTC, when data movements may copy. Outside it a movement holds its copies
//! at their last checkpoint and goes on by itself when a range opens.

use std::fmt;
use thiserror::Error;

const DAY_SECS: u32 = 24 * 3600;

/// One or more daily ranges `start-end` (`HH:MM` or `HH:MM:SS`, UTC), a range
/// whose end is before its start running over midnight (`22:00-06:00`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MovementWindow {
    /// (start, end) in seconds of the day, end exclusive.
    ranges: Vec<(u32, u32)>,
    text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("movement_window must be ranges of the day in UTC like \"22:00-06:00\" (HH:MM or HH:MM:SS, several separated by commas): {0}")]
pub struct WindowError(String);

impl MovementWindow {
    /// Parses `"22:00-06:00"` or `"01:00-05:00, 13:00-13:30:30"`.
    pub fn parse(text: &str) -> Result<MovementWindow, WindowError> {
        let mut ranges = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            let (start, end) = part
                .split_once('-')
                .ok_or_else(|| WindowError(format!("'{part}' has no '-'")))?;
            let (start, end) = (time_of_day(start)?, time_of_day(end)?);
            if start == end {
                return Err(WindowError(format!("'{part}' is empty")));
            }
            ranges.push((start, end));
        }
        Ok(MovementWindow {
            ranges,
            text: text.trim().to_string(),
        })
    }

    /// Whether copies may run at `now_ms` (milliseconds since the Unix epoch).
    pub fn is_open(&self, now_ms: i64) -> bool {
        let secs = u32::try_from(now_ms.div_euclid(1000).rem_euclid(i64::from(DAY_SECS)))
            .unwrap_or_default();
        self.ranges.iter().any(|&(start, end)| {
            if start < end {
                (start..end).contains(&secs)
            } else {
                secs >= start || secs < end
            }
        })
    }
}

impl fmt::Display for MovementWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} UTC", self.text)
    }
}

fn time_of_day(text: &str) -> Result<u32, WindowError> {
    let bad = || WindowError(format!("'{}' is not a time of day", text.trim()));
    let fields: Vec<&str> = text.trim().split(':').collect();
    if !(2..=3).contains(&fields.len()) || fields.iter().any(|f| f.len() != 2) {
        return Err(bad());
    }
    let number = |f: &str, max: u32| f.parse::<u32>().ok().filter(|n| *n < max).ok_or_else(bad);
    let hours = number(fields[0], 24)?;
    let minutes = number(fields[1], 60)?;
    let seconds = fields.get(2).map_or(Ok(0), |s| number(s, 60))?;
    Ok(hours * 3600 + minutes * 60 + seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Milliseconds at `hh:mm:ss` UTC on some day.
    fn at(hh: i64, mm: i64, ss: i64) -> i64 {
        (20_000 * 86_400 + hh * 3600 + mm * 60 + ss) * 1000
    }

    #[test]
    fn a_range_over_midnight_is_open_at_night_only() {
        let w = MovementWindow::parse("22:00-06:00").expect("window");
        assert!(w.is_open(at(23, 30, 0)));
        assert!(w.is_open(at(22, 0, 0)));
        assert!(w.is_open(at(5, 59, 59)));
        assert!(!w.is_open(at(6, 0, 0)));
        assert!(!w.is_open(at(12, 0, 0)));
        assert_eq!(w.to_string(), "22:00-06:00 UTC");
    }

    #[test]
    fn several_ranges_and_seconds() {
        let w = MovementWindow::parse("01:00-02:00, 13:00:00-13:00:30").expect("window");
        assert!(w.is_open(at(1, 30, 0)));
        assert!(w.is_open(at(13, 0, 29)));
        assert!(!w.is_open(at(13, 0, 30)));
        assert!(!w.is_open(at(3, 0, 0)));
    }

    #[test]
    fn malformed_windows_are_refused_with_the_reason() {
        for (text, why) in [
            ("22:00", "'22:00' has no '-'"),
            ("25:00-01:00", "'25:00' is not a time of day"),
            ("1:00-02:00", "'1:00' is not a time of day"),
            ("01:00-01:00", "'01:00-01:00' is empty"),
            ("01:00-02:00,", "'' has no '-'"),
        ] {
            let err = MovementWindow::parse(text).expect_err(text);
            assert!(err.to_string().ends_with(why), "{text}: {err}");
        }
    }
}
