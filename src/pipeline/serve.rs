//! The relay's HTTP servers (the API, the metrics, the admin API), each a task of the relay's:
//! one that fails stops the relay.

use std::future::IntoFuture;

use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    config::{Config, MergeSource},
    metrics::{Access, Hosts, Metrics, merge::Merger},
};

/// The metrics endpoint of `config` (its access, host names and path), merging `merged`'s
/// exporters into `metrics`: the relay's, and an edge's (which merges none).
///
/// # Errors
/// When an exporter's address is unusable.
pub(crate) fn metrics_router(
    config: &Config,
    metrics: &std::sync::Arc<Metrics>,
    merged: Vec<MergeSource>,
) -> anyhow::Result<axum::Router> {
    use std::sync::Arc;
    let config = &config.metrics;
    let merger = Arc::new(Merger::new(merged, metrics.clone())?);
    let hosts = Arc::new(Hosts::new(Some(config.bind.ip()), &config.allowed_hosts));
    let access = Arc::new(Access::new(&config.auth));
    Ok(crate::metrics::router(
        metrics.clone(),
        merger,
        &config.merge.path,
        access,
        hosts,
    ))
}

/// Serves `router` on a Unix socket (no peer address: the audit says `unix-socket`).
pub(super) fn serve<L>(
    tracker: &TaskTracker,
    token: &CancellationToken,
    listener: L,
    router: axum::Router,
    name: &'static str,
) where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(addr = ?addr, "{name} listening");
    }
    let server =
        axum::serve(listener, router).with_graceful_shutdown(token.clone().cancelled_owned());
    run_server(tracker, token, server.into_future(), name);
}

/// Serves `router` on a TCP listener, each request knowing its peer's address (for the audit).
pub(crate) fn serve_tcp(
    tracker: &TaskTracker,
    token: &CancellationToken,
    listener: tokio::net::TcpListener,
    router: axum::Router,
    name: &'static str,
) {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(addr = ?addr, "{name} listening");
    }
    let service = router.into_make_service_with_connect_info::<std::net::SocketAddr>();
    let server =
        axum::serve(listener, service).with_graceful_shutdown(token.clone().cancelled_owned());
    run_server(tracker, token, server.into_future(), name);
}

/// Runs a server until it ends; a server that fails stops the relay.
fn run_server(
    tracker: &TaskTracker,
    token: &CancellationToken,
    server: impl std::future::Future<Output = std::io::Result<()>> + Send + 'static,
    name: &'static str,
) {
    let token = token.clone();
    tracker.spawn(async move {
        if let Err(e) = server.await {
            tracing::error!(error = %e, "{name} server failed");
            token.cancel();
        }
    });
}
