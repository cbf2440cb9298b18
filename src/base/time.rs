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
