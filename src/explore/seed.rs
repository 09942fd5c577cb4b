//! The nightly seed: each night's date, so that a fleet running `clhip explore` every night
//! draws new shapes each night, and a night's seed can be read off its date.

use std::time::SystemTime;

/// The date of `now` (UTC) as the number `YYYYMMDD`: 2025-06-12 is seed 20250612.
pub fn nightly(now: SystemTime) -> anyhow::Result<u64> {
    // RFC 3339 begins with the date: `2025-06-12T06:00:00Z`.
    let text = humantime::format_rfc3339_seconds(now).to_string();
    let digits: String = text
        .get(..10)
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    match digits.parse() {
        Ok(seed) if digits.len() == 8 => Ok(seed),
        _ => anyhow::bail!("the clock's date `{text}` is not a date of the years 0000 to 9999"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn each_utc_day_is_its_own_seed() {
        let day = |s: u64| nightly(UNIX_EPOCH + Duration::from_secs(s)).unwrap();
        assert_eq!(day(0), 19700101);
        // 2025-06-12 00:00:00 and 23:59:59 UTC, then the next day.
        assert_eq!(day(1_749_686_400), 20250612);
        assert_eq!(day(1_749_686_400 + 86_399), 20250612);
        assert_eq!(day(1_749_686_400 + 86_400), 20250613);
    }
}
