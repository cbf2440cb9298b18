//! The owned shutdown handle: a cancellation token every task selects on, and a tracker the
//! runner waits on so that tasks finish their step before the process exits.

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
