//! Wires the stages top to bottom: bus -> [`route`](crate::route) (decode, mapping, catalogue,
//! matcher, plugins) -> per-hook queues -> signed delivery, plus the API and metrics servers.
//! The only module that knows them all; [`start`] holds the phases of the start, [`sources`]
//! starts each source's subscriber and reads its state back, [`stage`] is the processing task,
//! [`recover`] reads the queues back at start, [`redeliver`] queues the redeliveries asked for, [`notices`] the events about hooks, [`fleet`] and [`share`] are an instance's part
//! in a fleet, [`edges`] takes a pool's edges' streams as sources of their own and [`joins`] adds them to the processing stage.

mod balancer;
mod edges;
mod follower;
mod joins;
mod listen;
mod mode;
mod notices;
mod recover;
mod redeliver;
mod sources;
mod stage;
mod start;
mod trust;

pub(crate) use trust::check;

use std::{
    future::IntoFuture,
    sync::{Arc, atomic::AtomicBool},
};

use tokio_util::sync::CancellationToken;

use crate::{
    base::ids::HookId,
    config::{Config, callback_guard, compat::CallbackFormat},
    hooks::HookStore,
    metrics::Metrics,
    shutdown::{Shutdown, retry_until_ok},
    store_conn::StoreConn,
};

pub use listen::Listeners;

/// Bus messages buffered between the subscriber and the processing task.
const BUS_BUFFER: usize = 65_536;

/// Runs the relay until `shutdown` is triggered and every task has finished: one phase of the
/// start after the other ([`start`]), then the processing stage until the relay stops.
///
/// # Errors
/// When the Redis URL is unusable or the HTTP client cannot be built. Redis being down is not
/// an error: the relay waits for it.
pub async fn run(config: Config, listeners: Listeners, shutdown: Shutdown) -> anyhow::Result<()> {
    let (token, tracker) = (shutdown.token().clone(), shutdown.tracker().clone());
    trust::check(&config).await?;
    let sources = sources::configured(&config);
    let joined = crate::conference::Joined::default();
    let metrics = start::metrics(&config, &sources, &joined);
    let tenants = crate::tenants::Tenants::of_config(&config);
    let circuits = crate::delivery::Circuits::new(
        config.delivery.circuit_after,
        std::time::Duration::from_secs(config.delivery.circuit_max_open_s),
        &metrics,
    );
    let start = start::Start {
        config: &config,
        metrics: &metrics,
        token: &token,
        tracker: &tracker,
        tenants: &tenants,
        circuits: &circuits,
    };
    let (plugins, _watcher) = start.plugins().await?;
    let Some(conn) = start.store().await? else {
        return Ok(());
    };
    start.tenants(&conn).await;
    // What a takeover from bbb-webhooks recorded (its domain, its permanent hooks), where the
    // configuration says nothing itself.
    let config = with_takeover(&config, &conn).await;
    let start = start::Start {
        config: &config,
        ..start
    };
    let guard = Arc::new(callback_guard(&config.delivery));
    let Some(hooks) = start.hooks(&conn, &guard).await else {
        return Ok(());
    };
    let audit = crate::audit::Audit::start(
        conn.clone(),
        config.audit.keep_ms(),
        metrics.audit_write_failures.clone(),
        &tracker,
        &token,
    );
    start.serve_http(listeners, &hooks.store, &conn, &guard, &audit)?;
    let wired = start
        .delivery(&sources, &conn, &hooks, &guard, &plugins, &audit)
        .await?;
    let lease_lost = wired.lease_lost.clone();
    let store = hooks.store.clone();
    if let Some(processing) = start
        .processing(&sources, &conn, hooks, wired, plugins, &joined)
        .await
    {
        let start::Processing {
            stage,
            first,
            bus,
            taker,
        } = processing;
        tracker.spawn(stage.run(first, bus, token.clone()));
        if let Some(taker) = taker {
            tracker.spawn(taker.run(tracker.clone(), token.clone()));
        }
        // The instance that processes the bus looks after the hooks of tenants that are gone.
        let orphans = crate::hooks::Orphans {
            store: store.clone(),
            tenants: tenants.clone(),
            grace: std::time::Duration::from_secs(config.tenancy.removed_grace_s),
            metrics: metrics.clone(),
            audit: audit.clone(),
        };
        tracker.spawn(orphans.follow(token.clone()));
        token.cancelled().await;
    }
    wind_down(&tracker, &lease_lost).await
}

/// Once the relay is stopping: waits until every task has finished its step (callbacks in
/// flight, marks, leases given up), then says how the relay ended.
async fn wind_down(
    tracker: &tokio_util::task::TaskTracker,
    lease_lost: &AtomicBool,
) -> anyhow::Result<()> {
    tracker.close();
    tracker.wait().await;
    tracing::info!("stopped");
    stopped(lease_lost)
}

/// Reads the hooks into the registry, imports the reference service's and makes the
/// permanent ones exist. `false` when the relay stopped first.
async fn restore_hooks(
    store: &HookStore,
    config: &Config,
    metrics: &Metrics,
    token: &CancellationToken,
) -> bool {
    let restored = retry_until_ok(token, "restore hooks", || {
        store.restore(&config.delivery.permanent_hooks)
    })
    .await;
    let Some(restored) = restored else {
        return false;
    };
    {
        let hooks = store.registry().load();
        metrics.count_hooks(hooks.len(), hooks.counts());
    }
    metrics.hooks_refused.inc_by(restored.refused as u64);
    tracing::info!(
        hooks = restored.hooks,
        refused_hooks = restored.refused,
        "hooks restored from Redis"
    );
    true
}

/// `config` with what the takeover from bbb-webhooks recorded applied
/// ([`crate::config::compat::Recorded::apply`]).
async fn with_takeover(config: &Config, conn: &StoreConn) -> Config {
    match crate::hooks::takeover::read(&mut conn.clone()).await {
        Ok(Some(recorded)) => recorded.apply(config),
        Ok(None) => config.clone(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the recorded takeover from bbb-webhooks");
            config.clone()
        }
    }
}

/// The callbacks' form, said in the log: bbb-webhooks' on every path that takes over from it
/// (its hooks imported into the store included), unless `delivery.compat` says; a takeover is
/// recorded in the store (with the domain and bbb-webhooks' permanent hooks), so that they
/// stay when bbb-webhooks is purged.
async fn callback_format(config: &Config, conn: &StoreConn) -> CallbackFormat {
    let mut conn = conn.clone();
    let imported = crate::hooks::import::reference_hooks_imported(&mut conn)
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read whether bbb-webhooks' hooks were imported");
            false
        });
    let recorded = crate::hooks::takeover::read(&mut conn)
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read the recorded takeover from bbb-webhooks");
            None
        });
    let format = CallbackFormat::resolve(config, imported, recorded.as_ref());
    if let Some(record) = format.to_record(config, recorded.as_ref()) {
        match crate::hooks::takeover::write(&mut conn, &record).await {
            Ok(()) => tracing::info!(
                domain = %record.domain,
                permanent_hooks = record.permanent.len(),
                "recorded the takeover from bbb-webhooks: its callback form, domain and permanent hooks stay if it is purged"
            ),
            Err(e) => tracing::warn!(error = %e, "cannot record the takeover from bbb-webhooks"),
        }
    }
    tracing::info!("{}", format.describe());
    format
}

/// How a stopped relay ends: an error when it lost the fleet lease (so that its service
/// manager starts it again, waiting for the lease).
fn stopped(lease_lost: &AtomicBool) -> anyhow::Result<()> {
    if lease_lost.load(std::sync::atomic::Ordering::SeqCst) {
        anyhow::bail!("the fleet lease was lost: this instance stopped queueing and sending");
    }
    Ok(())
}

/// Serves `router` on a Unix socket (no peer address: the audit says `unix-socket`).
fn serve<L>(
    tracker: &tokio_util::task::TaskTracker,
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
    tracker: &tokio_util::task::TaskTracker,
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
    tracker: &tokio_util::task::TaskTracker,
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

/// Reports the queues' depths, and the age of the oldest callback of each non-empty one (read
/// from the store: the one in flight is still there).
async fn report_queues(
    metrics: &Metrics,
    conn: &StoreConn,
    depths: &[(HookId, usize)],
    registry: &crate::hooks::Registry,
) {
    let snapshot = registry.load();
    let tenant_of = |h: HookId| snapshot.get(h).and_then(|h| h.tenant.clone());
    metrics.report_queues(depths, &tenant_of);
    let busy: Vec<HookId> = depths
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(h, _)| *h)
        .collect();
    match crate::delivery::records::oldest_queued(conn, &busy).await {
        Ok(oldest) => {
            let oldest: Vec<(HookId, u64)> = busy
                .iter()
                .zip(oldest)
                .filter_map(|(h, t)| Some((*h, t?)))
                .collect();
            metrics.report_oldest(crate::base::time::now_ms(), &oldest, &tenant_of);
        }
        Err(e) => tracing::debug!(error = %e, "cannot read the queues' oldest callbacks"),
    }
}
