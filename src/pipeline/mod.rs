//! Wires the stages top to bottom: bus -> [`route`](crate::route) (decode, mapping, catalogue,
//! matcher, plugins) -> per-hook queues -> signed delivery, plus the API and metrics servers.
//! The only module that knows them all. [`run`] runs the start's phases, which [`start`] holds (the steps before processing in
//! [`steps`]),
//! and waits for the stop; the other files are their parts and import nothing from this one:
//! [`sources`] starts each source's subscriber and reads its state back, [`stage`] is the
//! processing task, [`recover`] reads the hooks and the queues back at start, [`takeover`] what
//! a takeover from bbb-webhooks left, [`redeliver`] queues the redeliveries asked for,
//! [`notices`] the events about hooks, [`follower`] (an instance without the lease, then its
//! holder) and [`balancer`] (spread delivery) are an instance's part in a fleet, [`edges`]
//! takes a pool's edges' streams as sources of their own and [`joins`] adds them to the
//! processing stage; [`http`] starts the HTTP servers, which [`serve`] runs; [`depths`] reports the queues.

mod balancer;
mod depths;
mod edges;
mod follower;
mod http;
mod joins;
mod listen;
mod mode;
mod notices;
mod recover;
mod redeliver;
mod serve;
mod sources;
mod stage;
mod start;
mod steps;
mod takeover;
mod traced;
mod trust;

pub(crate) use serve::{metrics_router, serve_tcp};
pub(crate) use trust::check;

use std::sync::Arc;

use crate::{
    config::{Config, callback_guard},
    shutdown::Shutdown,
};

pub use listen::Listeners;

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
    let traces = crate::traces::Traces::start(&config.tracing, &metrics, &tracker, &token);
    let start = start::Start {
        config: &config,
        traces: &traces,
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
    let config = takeover::with_takeover(&config, &conn).await;
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
    let lease_stop = wired.lease_stop.clone();
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
    wind_down(&tracker, &lease_stop).await
}

/// Once the relay is stopping: waits until every task has finished its step (callbacks in
/// flight, marks, leases given up), then says how the relay ended.
async fn wind_down(
    tracker: &tokio_util::task::TaskTracker,
    lease_stop: &crate::fleet::LeaseStop,
) -> anyhow::Result<()> {
    tracker.close();
    tracker.wait().await;
    tracing::info!("stopped");
    stopped(lease_stop)
}

/// How a stopped relay ends: an error when it lost the fleet lease (so that its service
/// manager starts it again, waiting for the lease).
fn stopped(lease_stop: &crate::fleet::LeaseStop) -> anyhow::Result<()> {
    if lease_stop.was_lost() {
        anyhow::bail!("the fleet lease was lost: this instance stopped queueing and sending");
    }
    Ok(())
}
