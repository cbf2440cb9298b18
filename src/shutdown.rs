//! The owned shutdown handle: a cancellation token every task selects on, and a tracker the
//! runner waits on so that tasks finish their step before the process exits; and
//! [`retry_until_ok`], how every task waits out a Redis outage without delaying shutdown, and
//! [`pause`], a wait that a shutdown ends.

use std::{fmt::Display, future::Future, time::Duration};

use backon::{ExponentialBuilder, Retryable};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

/// Cloneable; cancelling any clone stops the relay.
#[derive(Clone, Default)]
pub struct Shutdown {
    token: CancellationToken,
    tracker: TaskTracker,
}

impl Shutdown {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    pub fn tracker(&self) -> &TaskTracker {
        &self.tracker
    }

    /// Asks every task to stop.
    pub fn trigger(&self) {
        self.token.cancel();
    }

    /// Triggers shutdown on SIGTERM or ctrl-c.
    pub fn on_signals(&self) {
        let token = self.token.clone();
        tokio::spawn(async move {
            let ctrl_c = tokio::signal::ctrl_c();
            #[cfg(unix)]
            let term = async {
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(mut s) => {
                        s.recv().await;
                    }
                    Err(_) => std::future::pending::<()>().await,
                }
            };
            #[cfg(not(unix))]
            let term = std::future::pending::<()>();
            tokio::select! {
                _ = ctrl_c => tracing::info!("ctrl-c: shutting down"),
                () = term => tracing::info!("SIGTERM: shutting down"),
            }
            token.cancel();
        });
    }
}

/// Sleeps `d`; `true` when `token` is cancelled first (a task then stops).
pub(crate) async fn pause(token: &CancellationToken, d: Duration) -> bool {
    tokio::select! {
        () = tokio::time::sleep(d) => false,
        () = token.cancelled() => true,
    }
}

/// Runs `op` until it succeeds (`Some`), backing off after each failure (100 ms doubling to
/// 2 s, with jitter) and logging it as "cannot {what}". The first try is made even when the
/// relay is stopping; `None` when it stops before a try succeeds: the pause ends at once then,
/// and no new try starts. A try under way is always finished (its own
/// timeouts bound it): cutting a write short could repeat a delivered callback.
pub(crate) async fn retry_until_ok<T, E, F, Fut>(
    token: &CancellationToken,
    what: impl Display,
    mut op: F,
) -> Option<T>
where
    E: Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    enum Try<E> {
        Failed(E),
        Stopped,
    }
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(2))
        .with_jitter()
        .without_max_times();
    let stop = token.clone();
    let pause = move |d: Duration| {
        let stop = stop.clone();
        async move {
            tokio::select! {
                () = tokio::time::sleep(d) => {}
                () = stop.cancelled() => {}
            }
        }
    };
    // The first try is always made, also when stopping: the last batch is persisted then.
    let mut first = true;
    let attempt = || {
        let running = (std::mem::take(&mut first) || !token.is_cancelled()).then(&mut op);
        async move {
            match running {
                Some(fut) => fut.await.map_err(Try::Failed),
                None => Err(Try::Stopped),
            }
        }
    };
    attempt
        .retry(backoff)
        .sleep(pause)
        .when(|e| matches!(e, Try::Failed(_)))
        .notify(|e, pause| {
            if let Try::Failed(e) = e {
                tracing::warn!(error = %e, retry_in_ms = pause.as_millis() as u64, "cannot {what}; retrying");
            }
        })
        .await
        .ok()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn retries_until_the_operation_succeeds() {
        let tries = AtomicUsize::new(0);
        let got = retry_until_ok(&CancellationToken::new(), "test", || async {
            match tries.fetch_add(1, Ordering::SeqCst) {
                0 | 1 => Err("down"),
                n => Ok(n),
            }
        })
        .await;
        assert_eq!(got, Some(2));
        assert_eq!(tries.load(Ordering::SeqCst), 3);
    }

    /// On paused time: the pauses grow from 100 ms and never pass 2 s (with jitter, at most
    /// twice that), however long the store stays down; no real time is waited.
    #[tokio::test(start_paused = true)]
    async fn the_pauses_grow_and_stay_bounded_on_paused_time() {
        let tries = std::sync::Mutex::new(Vec::new());
        let got = retry_until_ok(&CancellationToken::new(), "test", || {
            let mut t = tries.lock().unwrap();
            t.push(tokio::time::Instant::now());
            let n = t.len();
            async move { if n < 30 { Err("down") } else { Ok(n) } }
        })
        .await;
        assert_eq!(got, Some(30));
        let at = tries.into_inner().unwrap();
        let pauses: Vec<Duration> = at.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(pauses[0] >= Duration::from_millis(100), "{pauses:?}");
        assert!(
            pauses.iter().all(|p| *p <= Duration::from_secs(4)),
            "{pauses:?}"
        );
        // It reached its bound: the later pauses are a second or more.
        assert!(
            pauses[20..].iter().all(|p| *p >= Duration::from_secs(1)),
            "{pauses:?}"
        );
    }

    #[tokio::test]
    async fn the_first_try_is_made_even_when_stopping() {
        let token = CancellationToken::new();
        token.cancel();
        let got = retry_until_ok(&token, "test", || async { Ok::<_, String>(7) }).await;
        assert_eq!(got, Some(7));
    }

    #[tokio::test]
    async fn a_stop_ends_the_pause_and_starts_no_new_try() {
        let token = CancellationToken::new();
        let tries = AtomicUsize::new(0);
        let got: Option<()> = retry_until_ok(&token, "test", || {
            tries.fetch_add(1, Ordering::SeqCst);
            token.cancel();
            async { Err("down") }
        })
        .await;
        assert_eq!(got, None);
        assert_eq!(tries.load(Ordering::SeqCst), 1);
    }
}
