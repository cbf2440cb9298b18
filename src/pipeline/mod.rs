//! Wires the stages top to bottom: bus -> [`route`](crate::route) (decode, mapping, catalogue,
//! matcher, plugins) -> per-hook queues -> signed delivery, plus the API and metrics servers.
//! The only module that knows them all; [`sources`] starts each source's subscriber and reads
//! its state back, [`stage`] is the processing task, [`recover`] reads the queues back at start.

mod fleet;
mod recover;
mod share;
mod sources;
mod stage;

use std::{sync::Arc, time::Duration};

use tokio::{net::TcpListener, sync::mpsc};
use tokio_util::sync::CancellationToken;

use crate::{
    api::{self, ApiState},
    conference::exposition::ConferenceExport,
    config::{CallbackAuth, Config, callback_guard, compat::CallbackFormat},
    delivery::{
        ack::Acker, client::CallbackClient, context::DeliveryContext, dispatch::Dispatcher,
        sign::Signer,
    },
    fleet::{cursor::Cursors, lease::Fence},
    hooks::{HookStore, Registry},
    metrics::{Metrics, auth::Access, merge::Merger},
    plugin_host::Plugins,
    route::Router,
    shutdown::{Shutdown, retry_until_ok},
    store_conn::StoreConn,
};

/// Bus messages buffered between the subscriber and the processing task.
const BUS_BUFFER: usize = 65_536;

/// The sockets the relay serves on, bound by the caller (tests bind port 0).
pub struct Listeners {
    pub api: TcpListener,
    pub metrics: Option<TcpListener>,
}

impl Listeners {
    /// Binds the addresses of the configuration.
    ///
    /// # Errors
    /// When an address cannot be bound.
    pub async fn bind(config: &Config) -> std::io::Result<Self> {
        let api = TcpListener::bind(config.api.bind).await?;
        let metrics = if config.metrics.enabled {
            Some(TcpListener::bind(config.metrics.bind).await?)
        } else {
            None
        };
        Ok(Self { api, metrics })
    }
}

/// Runs the relay until `shutdown` is triggered and every task has finished.
///
/// # Errors
/// When the Redis URL is unusable or the HTTP client cannot be built. Redis being down is not
/// an error: the relay waits for it.
pub async fn run(config: Config, listeners: Listeners, shutdown: Shutdown) -> anyhow::Result<()> {
    let token = shutdown.token().clone();
    let tracker = shutdown.tracker().clone();
    let sources = sources::configured(&config);
    let states = sources
        .iter()
        .map(|s| (Arc::from(s.config.name.as_str()), s.conference.clone()))
        .collect();
    let metrics = Metrics::with_exports(|m| {
        ConferenceExport {
            states,
            connected: m.bus.connected.clone(),
            holder: config.fleet.enabled.then(|| m.fleet.holder.clone()),
        }
        .exports()
    });
    if config.delivery.auth == CallbackAuth::Bearer {
        tracing::warn!(
            insecure_http_allowed = config.delivery.allow_insecure_bearer,
            "delivery.auth = \"bearer\": every receiver gets the shared secret, which opens the whole BBB API; use it only with receivers you trust"
        );
    }
    let guard = Arc::new(callback_guard(&config.delivery));
    let plugins = Plugins::new(&config.plugins, &metrics)?;
    // Watching starts before the first load, so that no change is missed in between.
    let _watcher = if config.plugins.watch {
        plugins
            .watch(Duration::from_millis(config.plugins.reload_debounce_ms))
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "cannot watch the plugin folder: plugins load at start only");
                None
            })
    } else {
        None
    };
    // Compiling plugins takes a while: not on an async worker.
    let first = plugins.clone();
    tokio::task::spawn_blocking(move || first.reload()).await?;

    let conn = StoreConn::connect(&config, &token).await?;
    let Some(conn) = conn else {
        return Ok(());
    };
    let conn = conn.waiting_for(
        config.store.replicas_to_wait_for(),
        Duration::from_millis(config.store.wait_timeout_ms),
        metrics.store_unreplicated.clone(),
    );
    let registry = Arc::new(Registry::default());
    let instance = config
        .fleet
        .enabled
        .then(|| crate::fleet::instance_name(&config.fleet));
    let fleet = instance
        .as_deref()
        .map(|instance| crate::fleet::lease(&config.fleet, instance));
    let store = HookStore::new(
        conn.clone(),
        registry.clone(),
        &config.delivery.permanent_hooks,
        guard.clone(),
    );
    let store = Arc::new(match instance.as_deref() {
        Some(instance) => store.with_announcements(instance),
        None => store,
    });
    if fleet.is_some() {
        // Until it holds the lease, an instance reads hooks and writes none.
        if retry_until_ok(&token, "read hooks", || store.reload())
            .await
            .is_none()
        {
            return Ok(());
        }
        tracker.spawn(crate::hooks::sync::follow(
            store.clone(),
            conn.clone(),
            token.clone(),
        ));
    } else if !restore_hooks(&store, &config, &metrics, &token).await {
        return Ok(());
    }
    let api_state = Arc::new(ApiState {
        guard: guard.clone(),
        store: store.clone(),
        secret: config.bbb.secret.clone(),
        path: config.api.path.trim_end_matches('/').to_string(),
        algorithms: config.api.checksum_algorithms.clone(),
        metrics: metrics.clone(),
        list_cache: Default::default(),
    });
    serve(
        &tracker,
        &token,
        listeners.api,
        api::router(api_state),
        "api",
    );
    if let Some(l) = listeners.metrics {
        let access = Arc::new(Access::new(&config.metrics.auth));
        if access.is_open() && l.local_addr().is_ok_and(|a| !a.ip().is_loopback()) {
            tracing::warn!(
                "the metrics endpoint listens beyond loopback without [metrics.auth]: firewall it"
            );
        }
        let merger = Arc::new(Merger::new(
            config.metrics.merge.sources.clone(),
            metrics.clone(),
        )?);
        let router =
            crate::metrics::router(metrics.clone(), merger, &config.metrics.merge.path, access);
        serve(&tracker, &token, l, router, "metrics");
    }

    let signer = Signer::new(&config, callback_format(&config, &conn).await.compat);
    let (bus_tx, mut bus_rx) = mpsc::channel(BUS_BUFFER);
    let sources::Subscribed {
        ready,
        seeds,
        fleet: subscriptions,
    } = sources::subscribe_all(&sources, &config, &bus_tx, &metrics, &tracker, &token)?;
    drop(bus_tx);
    tracker.spawn(crate::systemd::ready_when_subscribed(ready, token.clone()));
    // In a fleet, nothing is queued (and without spread, nothing sent) once the lease is lost.
    let fence = match &fleet {
        Some(lease) => Fence::new(lease.clone(), token.clone()),
        None => Fence::none(token.clone()),
    };
    let spread = fleet.is_some() && config.fleet.spread;
    let acker = Acker::new(config.delivery.max_unacked);
    tracker.spawn(acker.clone().run(conn.clone(), token.clone()));
    let (budget, budget_from) =
        crate::delivery::budget::resolve(config.delivery.queue_budget_mb, &mut conn.clone()).await;
    tracing::info!(
        budget_mb = budget >> 20,
        from = budget_from,
        max_queue = config.delivery.max_queue,
        "queues: each hook's at most max_queue callbacks, all of them together at most the budget"
    );
    metrics
        .queue_budget_bytes
        .set(i64::try_from(budget).unwrap_or(i64::MAX));
    let delivery = Arc::new(DeliveryContext {
        acker: acker.clone(),
        client: CallbackClient::new(
            Duration::from_millis(config.delivery.request_timeout_ms),
            guard.clone(),
            config.delivery.max_connections_per_receiver,
        )?,
        guard: guard.clone(),
        store: store.clone(),
        sources: signer.sources.clone(),
        signer,
        retry_intervals_ms: config.delivery.retry_intervals_ms.clone(),
        max_queue: config.delivery.max_queue,
        budget: Arc::new(crate::delivery::budget::Budget::new(budget)),
        conn: conn.clone(),
        metrics: metrics.clone(),
        token: token.clone(),
        tracker: tracker.clone(),
        // With delivery spread, each hook's own lease fences its worker.
        paged: Default::default(),
        fence: if spread {
            Fence::none(token.clone())
        } else {
            fence.clone()
        },
    });
    // Before this instance delivers anything (and, with spread, takes any hook); merged only
    // by the one writer of the queues: here, a relay alone.
    let hook_lease = spread.then(|| Duration::from_millis(config.fleet.lease_ms));
    if recover::move_legacy_queues(
        &conn,
        instance.as_deref(),
        fleet.is_none(),
        hook_lease,
        &token,
    )
    .await
    .is_none()
    {
        return wind_down(&tracker, &fence).await;
    }
    let held = match instance.as_deref() {
        Some(instance) if spread => Some(fleet::spread(
            &delivery,
            instance,
            &config.fleet,
            &registry,
            &acker,
        )),
        _ => None,
    };
    let first = match fleet {
        Some(lease) => {
            let follower = fleet::Follower {
                lease: &lease,
                conn: &conn,
                config: &config.fleet,
                sources: &delivery.sources,
                subscriptions,
                metrics: &metrics,
            };
            let first = fleet::follow(&mut bus_rx, follower, &token).await;
            let Some(first) = first else {
                // Stopped before taking the lease: what this instance delivers ends cleanly.
                return wind_down(&tracker, &fence).await;
            };
            metrics.fleet.holder.set(1);
            tracker.spawn(fleet::hold(
                lease,
                conn.clone(),
                fence.lost.clone(),
                token.clone(),
            ));
            first
        }
        None => Vec::new(),
    };
    if fence.is_fleet() && !restore_hooks(&store, &config, &metrics, &token).await {
        return wind_down(&tracker, &fence).await;
    }
    let Some(processors) = sources::restore(&sources, &conn, &config, &token).await else {
        return wind_down(&tracker, &fence).await;
    };
    sources::seed_all(&sources, &config.bbb, seeds, &metrics, &tracker, &token);

    // Again on taking the fleet lease (an instance of an earlier version may have held it),
    // now as the one writer of the queues.
    if fence.is_fleet()
        && recover::move_legacy_queues(&conn, instance.as_deref(), true, hook_lease, &token)
            .await
            .is_none()
    {
        return wind_down(&tracker, &fence).await;
    }
    let source_table = delivery.sources.clone();
    let mut dispatcher = match held {
        Some(held) => {
            // What the last writer wrote and announced is in the queues before this instance
            // writes more (its announcements may have been missed).
            let caught_up = retry_until_ok(&token, "read where the delivered queues end", || {
                share::catch_up(&held, &conn)
            })
            .await;
            if caught_up.is_none() {
                return wind_down(&tracker, &fence).await;
            }
            Dispatcher::spread(held)
        }
        None => Dispatcher::new(delivery),
    };
    let mut router = Router::with_sources(processors);
    let resumed = recover::resume_queues(
        &conn,
        &registry,
        &mut dispatcher,
        &mut router.clock,
        &tracker,
        &token,
    )
    .await;
    let Some(resumed) = resumed else {
        return wind_down(&tracker, &fence).await;
    };
    if resumed > 0 && !spread {
        tracing::info!(callbacks = resumed, "resuming queued callbacks");
    } else if resumed > 0 {
        tracing::info!(
            callbacks = resumed,
            "callbacks are queued; each hook's deliverer resumes them"
        );
    }
    let stage = stage::ProcessStage {
        router: Some(router),
        last_snapshot: None,
        dispatcher,
        registry,
        plugins,
        metrics,
        sources: source_table,
        keys: sources.iter().map(|s| s.keys.clone()).collect(),
        cursors: fence.is_fleet().then(Cursors::default),
        fence: fence.clone(),
    };
    tracker.spawn(stage.run(first, bus_rx, token.clone()));

    token.cancelled().await;
    wind_down(&tracker, &fence).await
}

/// Once the relay is stopping: waits until every task has finished its step (callbacks in
/// flight, marks, leases given up), then says how the relay ended.
async fn wind_down(tracker: &tokio_util::task::TaskTracker, fence: &Fence) -> anyhow::Result<()> {
    tracker.close();
    tracker.wait().await;
    tracing::info!("stopped");
    stopped(fence)
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
    metrics.count_hooks(&store.registry().load());
    metrics.hooks_refused.inc_by(restored.refused as u64);
    tracing::info!(
        hooks = restored.hooks,
        refused_hooks = restored.refused,
        "hooks restored from Redis"
    );
    true
}

/// The callbacks' form, said in the log: bbb-webhooks' on every path that takes over from it
/// (its hooks imported into the store included), unless `delivery.compat` says.
async fn callback_format(config: &Config, conn: &StoreConn) -> CallbackFormat {
    let imported = crate::hooks::import::reference_hooks_imported(&mut conn.clone())
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read whether bbb-webhooks' hooks were imported");
            false
        });
    let format = CallbackFormat::resolve(config, imported);
    tracing::info!("{}", format.describe());
    format
}

/// How a stopped relay ends: an error when it lost the fleet lease (so that its service
/// manager starts it again, waiting for the lease).
fn stopped(fence: &Fence) -> anyhow::Result<()> {
    if fence.lost.load(std::sync::atomic::Ordering::SeqCst) {
        anyhow::bail!("the fleet lease was lost: this instance stopped queueing and sending");
    }
    Ok(())
}

fn serve(
    tracker: &tokio_util::task::TaskTracker,
    token: &CancellationToken,
    listener: TcpListener,
    router: axum::Router,
    name: &'static str,
) {
    let token = token.clone();
    tracker.spawn(async move {
        if let Ok(addr) = listener.local_addr() {
            tracing::info!(%addr, "{name} listening");
        }
        let r = axum::serve(listener, router)
            .with_graceful_shutdown(token.clone().cancelled_owned())
            .await;
        if let Err(e) = r {
            tracing::error!(error = %e, "{name} server failed");
            token.cancel();
        }
    });
}
