//! Waiting for conditions, not for time: [`until`] polls a probe until it holds or a deadline
//! passes, and a failure says what the probe last saw.

use std::{fmt::Debug, time::Duration};

use super::PATIENCE;

/// How often a probe is tried.
const POLL: Duration = Duration::from_millis(20);

/// Polls `probe` until it gives `Ok`, for at most [`PATIENCE`]; panics naming `what` and the last
/// `Err` the probe gave (what it saw instead).
pub(crate) async fn until<T, S: Debug>(what: &str, probe: impl AsyncFnMut() -> Result<T, S>) -> T {
    until_within(what, PATIENCE, probe).await
}

/// [`until`] with a deadline of its own.
pub(crate) async fn until_within<T, S: Debug>(
    what: &str,
    within: Duration,
    mut probe: impl AsyncFnMut() -> Result<T, S>,
) -> T {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match probe().await {
            Ok(v) => return v,
            Err(seen) if tokio::time::Instant::now() >= deadline => {
                panic!("{what}: not within {within:?}; last seen: {seen:#?}")
            }
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}

/// Polls `probe` until it gives `Ok`, for as long as what it counts keeps growing: it fails
/// only when the count has not grown for `stall` (a stuck delivery, a loss), not because a
/// loaded machine is slower than the deadline thought. The probe gives its count with what it
/// saw; the count is compared between polls only.
pub(crate) async fn until_progressing<T, S: Debug>(
    what: &str,
    stall: Duration,
    mut probe: impl AsyncFnMut() -> Result<T, (usize, S)>,
) -> T {
    let mut best = 0;
    let mut deadline = tokio::time::Instant::now() + stall;
    loop {
        match probe().await {
            Ok(v) => return v,
            Err((count, _)) if count > best => {
                best = count;
                deadline = tokio::time::Instant::now() + stall;
            }
            Err((_, seen)) if tokio::time::Instant::now() >= deadline => {
                panic!("{what}: no progress for {stall:?}; last seen: {seen:#?}")
            }
            Err(_) => {}
        }
        tokio::time::sleep(POLL).await;
    }
}
