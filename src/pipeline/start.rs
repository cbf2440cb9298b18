//! The phases of the start, in order: the metrics, the plugins, the store, the hooks, the HTTP
//! servers, the delivery context (with the sources subscribed), then what processing needs
//! (in a fleet, the lease taken first; state and queues read back). A phase that meets the
//! relay stopping gives `None`.

use std::{sync::Arc, time::Duration};

use tokio::sync::mpsc;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::{
    edges, follower,
    mode::Mode,
    recover::{self, restore_hooks},
    sources::{self, Source},
    stage,
    steps::Stepped,
    takeover::callback_format,
};

use crate::{
    audit::Audit,
    base::callback_url::Guard,
    bus::BusMessage,
    conference::ConferenceExport,
    config::{CallbackAuth, Config},
    delivery::{
        Acker, DeliveryContext, Insight, Retention, Signer, Wiring,
        records::{self, Bounds},
    },
    fleet::{Cursors, Fence, LeaseStop},
    hooks::{HookStore, Registry},
    metrics::Metrics,
    plugin_host::{Plugins, Watcher},
    route::MessageRouter,
    shutdown::retry_until_ok,
    store_conn::StoreConn,
    tenants::Tenants,
};

/// Bus messages buffered between the subscriber and the processing task.
const BUS_BUFFER: usize = 65_536;

/// The relay's metrics, the conference's `bbb_*` series of every source among them (those of
/// the edges' servers, `joined`, as they appear).
pub(super) fn metrics(
    config: &Config,
    sources: &[Source],
    joined: &crate::conference::Joined,
) -> Arc<Metrics> {
    let states = sources
        .iter()
        .map(|s| (Arc::from(s.config.name.as_str()), s.conference.clone()))
        .collect();
    Metrics::with_exports(|m| {
        ConferenceExport {
            states,
            connected: m.bus.connected.clone(),
            holder: config.fleet.enabled.then(|| m.fleet.holder.clone()),
            per_server: !config.sources.is_empty() || !config.pool.local_bus,
            joined: joined.clone(),
        }
        .exports()
    })
}

/// What every phase uses.
pub(super) struct Start<'a> {
    pub(super) config: &'a Config,
    pub(super) metrics: &'a Arc<Metrics>,
    pub(super) token: &'a CancellationToken,
    pub(super) tracker: &'a TaskTracker,
    /// The tenants in force, followed in Scalelite's Redis when `[scalelite]` is set.
    pub(super) tenants: &'a Arc<Tenants>,
    /// The receivers' circuits (`delivery.circuit_after`), shared by delivery and the admin
    /// API.
    pub(super) circuits: &'a Option<Arc<crate::delivery::Circuits>>,
    /// The tracer, while traces are on (`[tracing]`).
    pub(super) traces: &'a Option<Arc<crate::traces::Traces>>,
}

/// The hooks, and how this instance runs.
pub(super) struct Hooks {
    pub(super) store: Arc<HookStore>,
    pub(super) registry: Arc<Registry>,
    pub(super) mode: Mode,
}

/// Delivery wired to the sources' subscribers.
pub(super) struct Wired {
    pub(super) delivery: Arc<DeliveryContext>,
    pub(super) acker: Arc<Acker>,
    /// In a fleet, nothing is queued (and without spread, nothing sent) once the lease is lost.
    fence: Fence,
    /// What stops the relay when the lease is lost, and says afterwards whether it did.
    pub(super) lease_stop: LeaseStop,
    pub(super) bus: mpsc::Receiver<BusMessage>,
    /// Where the edges' messages go into the bus (`[pool] edges`), handed to the taker.
    edge_bus: Option<mpsc::Sender<BusMessage>>,
    pub(super) subscribed: sources::Subscribed,
}

/// What processes the bus, ready to run.
pub(super) struct Processing {
    pub(super) stage: stage::ProcessStage,
    /// What a new holder of the fleet lease queues first.
    pub(super) first: follower::Resumed,
    pub(super) bus: mpsc::Receiver<BusMessage>,
    /// Takes the edges' streams into the bus (`[pool] edges`).
    pub(super) taker: Option<edges::Taker>,
}

impl Start<'_> {
    /// Reads Scalelite's tenants once (briefly: an unreachable Redis of Scalelite's must not
    /// hold the relay up; the view kept in the store is in force meanwhile), then follows them.
    pub(super) async fn tenants(&self, conn: &StoreConn) {
        let configured = i64::try_from(self.tenants.load().len()).unwrap_or(i64::MAX);
        self.metrics.tenants.known.set(configured);
        let Some(scalelite) = self.config.scalelite.clone() else {
            return;
        };
        let follow = crate::tenants::follow(
            self.tenants.clone(),
            scalelite,
            self.metrics.clone(),
            conn.clone(),
            self.token.clone(),
        );
        let first = crate::tenants::first_read(self.tenants, self.token);
        self.tracker.spawn(follow);
        first.await;
    }

    /// Loads the plugins (watching their folder first, so that no change is missed).
    pub(super) async fn plugins(&self) -> anyhow::Result<(Arc<Plugins>, Option<Watcher>)> {
        let config = self.config;
        if config.delivery.auth == CallbackAuth::Bearer {
            tracing::warn!(
                insecure_http_allowed = config.delivery.allow_insecure_bearer,
                "delivery.auth = \"bearer\": every receiver gets the shared secret, which opens the whole BBB API; use it only with receivers you trust"
            );
        }
        let plugins = Plugins::new(&config.plugins, self.metrics)?;
        let watcher = if config.plugins.watch {
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
        Ok((plugins, watcher))
    }

    /// Connects to the store (waiting while it is down).
    pub(super) async fn store(&self) -> anyhow::Result<Option<StoreConn>> {
        let config = self.config;
        let conn = StoreConn::connect(config, self.token).await?;
        Ok(conn.map(|conn| {
            conn.waiting_for(
                config.store.replicas_to_wait_for(),
                Duration::from_millis(config.store.wait_timeout_ms),
                self.metrics.store_unreplicated.clone(),
            )
        }))
    }

    /// Reads the hooks: restored (imports and permanent hooks included) by a relay alone, only
    /// read and then followed by an instance of a fleet until it holds the lease.
    pub(super) async fn hooks(&self, conn: &StoreConn, guard: &Arc<Guard>) -> Option<Hooks> {
        let config = self.config;
        let registry = Arc::new(Registry::default());
        let mode = Mode::new(config);
        let store = HookStore::new(
            conn.clone(),
            registry.clone(),
            &config.delivery.permanent_hooks,
            guard.clone(),
        );
        // Delivery's layout: the hooks know only that a removed hook's queue goes too.
        let store = store.with_queue_remover(Arc::new(|mut conn: StoreConn, id| {
            Box::pin(async move { crate::delivery::records::delete(&mut conn, id).await })
        }));
        let store = Arc::new(match mode.instance() {
            Some(instance) => store.with_announcements(instance),
            None => store,
        });
        if !mode.restores_hooks_at_once() {
            retry_until_ok(self.token, "read hooks", || store.reload()).await?;
            self.tracker.spawn(crate::hooks::follow(
                store.clone(),
                conn.clone(),
                self.token.clone(),
            ));
        } else if !restore_hooks(&store, config, self.metrics, self.token).await {
            return None;
        }
        Some(Hooks {
            store,
            registry,
            mode,
        })
    }

    /// Subscribes to every source and makes the delivery context: the signer, the marks of
    /// delivered callbacks, the queues' budget, the HTTP client.
    pub(super) async fn delivery(
        &self,
        sources: &[Source],
        conn: &StoreConn,
        hooks: &Hooks,
        guard: &Arc<Guard>,
        plugins: &Arc<Plugins>,
        audit: &Audit,
    ) -> anyhow::Result<Wired> {
        let (config, metrics, token) = (self.config, self.metrics, self.token);
        let signer = Signer::new(config, &callback_format(config, conn).await)
            .with_tenants(self.tenants.clone());
        let (bus_tx, bus) = mpsc::channel(BUS_BUFFER);
        let subscribed =
            sources::subscribe_all(sources, config, &bus_tx, metrics, self.tracker, token)?;
        // Held only by the edges' taker: at the stop the channel closes once the subscribers
        // and the taker are gone.
        let edge_bus = config.pool.edges.then_some(bus_tx);
        let ready = subscribed.ready.clone();
        self.tracker.spawn(crate::systemd::ready_when_subscribed(
            ready,
            token.clone(),
            give_back_start_pages,
        ));
        let lease_stop = LeaseStop::new(token.clone());
        let fence = hooks.mode.fence(&lease_stop);
        let acker = Acker::new(config.delivery.max_unacked);
        self.tracker
            .spawn(acker.clone().run(conn.clone(), token.clone()));
        let (limit, from) =
            records::resolve_budget(config.delivery.queue_budget_mb, &mut conn.clone()).await;
        tracing::info!(
            budget_mb = limit >> 20,
            from,
            max_queue = config.delivery.max_queue,
            "queues: each hook's at most max_queue callbacks, all of them together at most the budget"
        );
        metrics
            .queue_budget_bytes
            .set(i64::try_from(limit).unwrap_or(i64::MAX));
        let own_fence = hooks.mode.worker_fence(&fence);
        let retention = retain_bounds(&config.delivery).map(|bounds| Retention {
            bounds,
            sources: signer.sources().clone(),
            registry: hooks.registry.clone(),
        });
        let insight = Insight::new(
            config.delivery.attempt_log,
            hooks.mode.instance().map(str::to_string),
            retention,
        );
        self.tracker.spawn(
            insight
                .clone()
                .run(conn.clone(), metrics.clone(), token.clone()),
        );
        let wiring = Wiring {
            insight,
            store: hooks.store.clone(),
            conn: conn.clone(),
            guard: guard.clone(),
            metrics: metrics.clone(),
            token: token.clone(),
            tracker: self.tracker.clone(),
            fence: own_fence,
            plugins: plugins.clone(),
            circuits: self.circuits.clone(),
            audit: audit.clone(),
            traces: self.traces.clone(),
        };
        let delivery = Arc::new(DeliveryContext::new(
            &config.delivery,
            signer,
            acker.clone(),
            limit,
            wiring,
        )?);
        Ok(Wired {
            delivery,
            acker,
            fence,
            lease_stop,
            bus,
            edge_bus,
            subscribed,
        })
    }

    /// Everything the processing stage needs, ready: in a fleet, the lease taken first; the
    /// hooks, mappings and conference state read back; queues of earlier versions moved; the
    /// queues resumed. Also the messages kept while following, to process first, and the bus.
    pub(super) async fn processing(
        &self,
        sources: &[Source],
        conn: &StoreConn,
        hooks: Hooks,
        mut wired: Wired,
        plugins: Arc<Plugins>,
        joined: &crate::conference::Joined,
    ) -> Option<Processing> {
        let (config, token, mode) = (self.config, self.token, &hooks.mode);
        let Stepped {
            held,
            first,
            processors,
        } = self.steps(sources, conn, &hooks, &mut wired).await?;
        let fence = wired.fence.clone();
        let source_table = wired.delivery.queues().sources().clone();
        let mut dispatcher = self.dispatcher(held, wired.delivery, conn).await?;
        let (resumed, clock) =
            recover::resume_queues(conn, &hooks.registry, &mut dispatcher, self.tracker, token)
                .await?;
        // Each hook's callbacks are timestamped after the last one its queue held.
        let router = MessageRouter::with_sources(processors)
            .with_clock(clock)
            .deferring()
            .with_tenants(self.tenants.clone());
        let router = if self.traces.is_some() {
            router.timed()
        } else {
            router
        };
        if resumed > 0 && !mode.spreads() {
            tracing::info!(callbacks = resumed, "resuming queued callbacks");
        } else if resumed > 0 {
            tracing::info!(
                callbacks = resumed,
                "callbacks are queued; each hook's deliverer resumes them"
            );
        }
        let xapi = crate::xapi::Output::start(
            config,
            source_table.clone(),
            conn,
            self.metrics.clone(),
            self.traces,
            (self.tracker, token),
        )
        .await;
        let destinations = crate::destinations::Output::start(
            config,
            source_table.clone(),
            conn,
            self.metrics.clone(),
            &plugins,
            self.traces,
            (self.tracker, token),
        )
        .await;
        let (joins_tx, joins) = mpsc::channel(16);
        let taker = wired.edge_bus.take().map(|bus| edges::Taker {
            conn: conn.clone(),
            config: config.clone(),
            bus,
            joins: joins_tx,
            metrics: self.metrics.clone(),
            reserved: edges::reserved(config),
        });
        let stage = stage::ProcessStage {
            router,
            last_snapshot: None,
            dispatcher,
            registry: hooks.registry,
            plugins,
            metrics: self.metrics.clone(),
            sources: source_table,
            keys: sources.iter().map(|s| s.keys.clone()).collect(),
            conferences: sources.iter().map(|s| s.conference.clone()).collect(),
            cursors: fence.is_fleet().then(|| Cursors::resuming(&first.cursors)),
            fence,
            xapi,
            destinations,
            joins: taker.is_some().then_some(joins),
            joined: joined.clone(),
            taken: Vec::new(),
            limit: None,
            traces: self.traces.clone(),
        };
        Some(Processing {
            stage,
            first,
            bus: wired.bus,
            taker,
        })
    }
}

/// What is kept of sent callbacks (`delivery.retain`, `delivery.retain_max_mib`); `None` when
/// nothing is.
pub(super) fn retain_bounds(config: &crate::config::DeliveryConfig) -> Option<Bounds> {
    (!config.retain.is_zero()).then_some(Bounds {
        window_ms: config.retain.as_millis() as u64,
        max_bytes: config.retain_max_mib << 20,
    })
}

/// Once the relay is ready: its binary's pages that only the start used (configuration,
/// plugins' compiler, set-up) leave its RSS (`base::binary_pages`).
fn give_back_start_pages() {
    let kib = crate::base::binary_pages::give_back();
    tracing::info!(
        kib,
        "ready: gave back the binary's pages the start used ({} MiB)",
        kib >> 10
    );
}
