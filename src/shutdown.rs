//! The owned shutdown handle: a cancellation token every task selects on, and a tracker the
//! runner waits on so that tasks finish their step before the process exits; and
//! [`retry_until_ok`], how every task waits out a Redis outage without delaying shutdown.

use std::{fmt::Display, future::Future, time::Duration};

use tokio_util::{sync::CancellationToken, task::TaskTracker};

/// Pause between two tries of an operation that failed because Redis is away.
const RETRY_PAUSE: Duration = Duration::from_millis(500);

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

/// Runs `op` until it succeeds (`Some`), pausing [`RETRY_PAUSE`] after each failure and logging
/// it as "cannot {what}". `None` when the relay stops first. A try under way is always finished
/// (its own timeouts bound it): cutting a write short could repeat a delivered callback.
pub async fn retry_until_ok<T, E, F, Fut>(
    token: &CancellationToken,
    what: impl Display,
    mut op: F,
) -> Option<T>
where
    E: Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    loop {
        match op().await {
            Ok(v) => return Some(v),
            Err(e) => tracing::warn!(error = %e, "cannot {what}; retrying"),
        }
        tokio::select! {
            () = tokio::time::sleep(RETRY_PAUSE) => {}
            () = token.cancelled() => return None,
        }
    }
}
