//! The wall clock, in the unit of callback timestamps and mapping activity: milliseconds since
//! the Unix epoch.

/// Wall-clock milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> u64 {
    since_epoch().as_millis() as u64
}

/// Wall-clock microseconds since the Unix epoch (0 if the clock is before it).
pub fn now_us() -> u64 {
    since_epoch().as_micros() as u64
}

fn since_epoch() -> std::time::Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// `ms` since the epoch as RFC 3339 in UTC, to the millisecond (`2026-11-26T08:36:11.123Z`).
pub fn rfc3339(ms: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_millis(t).to_string()
}

/// A point in time given as RFC 3339 (`2026-11-26T08:00:00Z`) or as a duration back from
/// `now_ms` (`15m`, `2h 30m`), in ms since the epoch.
///
/// # Errors
/// A text that is neither, said in a sentence.
pub fn parse_since(text: &str, now_ms: u64) -> Result<u64, String> {
    let text = text.trim();
    if let Ok(t) = humantime::parse_rfc3339_weak(text) {
        return Ok(t
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64));
    }
    match humantime::parse_duration(text) {
        Ok(back) => Ok(now_ms.saturating_sub(back.as_millis() as u64)),
        Err(_) => Err(format!(
            "`{text}` is neither an RFC 3339 time (2026-11-26T08:00:00Z) nor a duration back from now (15m)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_or_a_duration_back() {
        let now = 1_800_000_000_000;
        assert_eq!(parse_since("15m", now), Ok(now - 900_000));
        assert_eq!(parse_since("1h 30m", now), Ok(now - 5_400_000));
        let t = parse_since("2026-11-26T08:00:00Z", now).expect("a time");
        assert_eq!(rfc3339(t), "2026-11-26T08:00:00.000Z");
        assert_eq!(parse_since(&rfc3339(now + 5), 0), Ok(now + 5));
        let e = parse_since("yesterday", now).expect_err("not a time");
        assert!(e.contains("yesterday") && e.contains("15m"), "{e}");
    }
}
