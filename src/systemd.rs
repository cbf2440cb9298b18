//! Tells systemd (a `Type=notify` unit) that the relay is ready, once its API listens (the
//! listeners are bound before the pipeline starts) and the bus is subscribed, and that it is
//! stopping. Outside systemd (`NOTIFY_SOCKET` unset) it does nothing.

use sd_notify::NotifyState;
use tokio_util::sync::CancellationToken;

/// Sends `READY=1` at the first subscription to any source's bus (one source being down
/// must not keep the others from being served) and runs `then`, then `STOPPING=1` when the
/// relay stops.
pub(crate) async fn ready_when_subscribed(
    subscribed: Vec<tokio::sync::watch::Receiver<u64>>,
    token: CancellationToken,
    then: impl FnOnce(),
) {
    let any = subscribed
        .into_iter()
        .map(|mut r| Box::pin(async move { r.changed().await }));
    let any: Vec<_> = any.collect();
    if any.is_empty() {
        // No bus of its own (a pool's relay, `[pool] local_bus = false`): ready now.
        notify(NotifyState::Ready, "ready");
        then();
    } else {
        tokio::select! {
            (changed, _, _) = futures_util::future::select_all(any) => {
                if changed.is_ok() {
                    notify(NotifyState::Ready, "ready");
                    then();
                }
            }
            () = token.cancelled() => {}
        }
    }
    token.cancelled().await;
    notify(NotifyState::Stopping, "stopping");
}

fn notify(state: NotifyState<'_>, what: &str) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    match sd_notify::notify(&[state]) {
        Ok(()) => tracing::info!("told systemd: {what}"),
        Err(e) => tracing::warn!(error = %e, "cannot tell systemd the relay is {what}"),
    }
}
