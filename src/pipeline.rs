//! Wires the stages top to bottom: bus -> decode -> mapping -> catalogue -> matcher -> plugins
//! -> per-hook queues -> signed delivery, plus the API and metrics servers. The only module that
//! knows them all.

use std::{sync::Arc, time::Duration};

use redis::aio::ConnectionManager;
use tokio::{net::TcpListener, sync::mpsc};
use tokio_util::sync::CancellationToken;

use crate::{
    api::{self, ApiState},
    bus::{BusMessage, Subscriber},
    config::Config,
    delivery::{
        Timestamps,
        client::CallbackClient,
        journal::{self, Entry},
        now_ms,
        queue::{DeliveryContext, Dispatcher},
        sign::Signer,
    },
    event::{
        Event,
        mapping::Mappings,
        persist,
        process::{EventFilter, Processor},
    },
    hooks::{Hook, HookStore, Registry, Snapshot, matcher},
    metrics::{EventLabel, Metrics},
    plugin_host::{PluginSet, Plugins, Verdict},
    redis_conn::{connect, redis_client},
    shutdown::{Shutdown, retry_until_ok},
};

/// How often expired mappings are dropped and closed queues pruned.
const SWEEP_EVERY: Duration = Duration::from_secs(10);
/// Bus messages buffered between the subscriber and the processing task.
const BUS_BUFFER: usize = 65_536;
/// Most bus messages processed (and their callbacks persisted in one pipeline) at a time.
const BATCH: usize = 256;

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
    let metrics = Metrics::new();
    let client = redis_client(&config.redis.url)?;
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

    let Some(conn) = connect(&client, &token).await else {
        return Ok(());
    };
    let registry = Arc::new(Registry::default());
    let store = Arc::new(HookStore::new(
        conn.clone(),
        registry.clone(),
        &config.delivery.permanent_hooks,
    ));
    let restored = retry_until_ok(&token, "restore hooks", || {
        store.restore(&config.delivery.permanent_hooks)
    })
    .await;
    let Some(restored) = restored else {
        return Ok(());
    };
    metrics.hooks_registered.set(restored as i64);
    let mappings = retry_until_ok(&token, "restore id mappings", || {
        let mut c = conn.clone();
        async move {
            let meetings = persist::load_meetings(&mut c).await?;
            let users = persist::load_users(&mut c).await?;
            Ok::<_, redis::RedisError>((meetings, users))
        }
    })
    .await;
    let Some((meetings, users)) = mappings else {
        return Ok(());
    };
    tracing::info!(
        hooks = restored,
        meetings = meetings.len(),
        users = users.len(),
        "state restored from Redis"
    );

    let (writes_tx, writes_rx) = mpsc::unbounded_channel();
    tracker.spawn(persist::run_writer(conn.clone(), writes_rx, token.clone()));
    let mut mappings = Mappings::new(
        config.mapping.inactivity_timeout_s.saturating_mul(1000),
        Some(writes_tx),
    );
    mappings.restore(meetings, users, now_ms());

    let guard = Arc::new(config.callback_guard());
    let api_state = Arc::new(ApiState {
        guard: guard.clone(),
        store: store.clone(),
        secret: config.bbb.secret.clone(),
        path: config.api.path.trim_end_matches('/').to_string(),
        algorithms: config.api.checksum_algorithms.clone(),
        metrics: metrics.clone(),
    });
    serve(
        &tracker,
        &token,
        listeners.api,
        api::router(api_state),
        "api",
    );
    if let Some(l) = listeners.metrics {
        serve(
            &tracker,
            &token,
            l,
            crate::metrics::router(metrics.clone()),
            "metrics",
        );
    }

    let delivery = Arc::new(DeliveryContext {
        client: CallbackClient::new(
            Duration::from_millis(config.delivery.request_timeout_ms),
            guard.clone(),
        )?,
        guard: guard.clone(),
        store: store.clone(),
        signer: Signer::from_config(&config),
        retry_intervals_ms: config.delivery.retry_intervals_ms.clone(),
        max_queue: config.delivery.max_queue,
        conn: conn.clone(),
        timestamps: Timestamps::default(),
        metrics: metrics.clone(),
        token: token.clone(),
        tracker: tracker.clone(),
    });
    let (bus_tx, bus_rx) = mpsc::channel(BUS_BUFFER);
    let subscriber = Subscriber {
        client,
        channels: config.redis.channels.clone(),
        max_message_bytes: config.redis.max_message_bytes,
        metrics: metrics.clone(),
    };
    tracker.spawn(subscriber.run(bus_tx, token.clone()));
    let filter = EventFilter {
        include: config.delivery.include_events.clone(),
        exclude: config.delivery.exclude_events.clone(),
    };
    let mut dispatcher = Dispatcher::new(delivery);
    let Some(resumed) = resume_queues(&conn, &registry, &mut dispatcher, &token).await else {
        return Ok(());
    };
    if resumed > 0 {
        tracing::info!(callbacks = resumed, "resumed queued callbacks");
    }
    let stage = ProcessStage {
        processor: Processor::new(mappings, filter),
        last_snapshot: None,
        dispatcher,
        registry,
        plugins,
        metrics,
    };
    tracker.spawn(stage.run(bus_rx, token.clone()));

    token.cancelled().await;
    tracker.close();
    tracker.wait().await;
    tracing::info!("stopped");
    Ok(())
}

/// The processing stage: one task, so mappings change in bus order before the next message.
struct ProcessStage {
    processor: Processor,
    /// The hook snapshot last seen: when it changes, the queues of removed hooks are closed.
    last_snapshot: Option<Arc<Snapshot>>,
    dispatcher: Dispatcher,
    registry: Arc<Registry>,
    plugins: Arc<Plugins>,
    metrics: Arc<Metrics>,
}

impl ProcessStage {
    async fn run(mut self, mut rx: mpsc::Receiver<BusMessage>, token: CancellationToken) {
        let mut sweep = tokio::time::interval(SWEEP_EVERY);
        let mut batch = Vec::with_capacity(BATCH);
        loop {
            tokio::select! {
                biased;
                () = token.cancelled() => {
                    // Messages already taken off the bus are processed and persisted once more.
                    while let Ok(m) = rx.try_recv() {
                        batch.push(m);
                    }
                    let entries = self.callbacks(&batch).await;
                    self.dispatcher.accept(entries).await;
                    return;
                }
                // Before the bus, or a busy bus would starve it (it is ready every 10 s only).
                _ = sweep.tick() => self.sweep(),
                n = rx.recv_many(&mut batch, BATCH) => {
                    if n == 0 {
                        return;
                    }
                    let entries = self.callbacks(&batch).await;
                    batch.clear();
                    if !self.dispatcher.accept(entries).await {
                        return;
                    }
                }
            }
        }
    }

    /// Processes a batch of bus messages in order, runs the plugin chain over the (event, hook)
    /// pairs, and returns the callbacks they make.
    async fn callbacks(&mut self, batch: &[BusMessage]) -> Vec<(Arc<Hook>, Entry)> {
        let pairs = self.process(batch);
        let plugins = self.plugins.current();
        if plugins.is_empty() || pairs.is_empty() {
            return pairs
                .into_iter()
                .map(|(hook, event, ts)| {
                    let entry = Dispatcher::entry(&event, ts, event.payload(hook.get_raw).clone());
                    (hook, entry)
                })
                .collect();
        }
        // Plugins burn CPU (up to their deadline each): off tokio's workers. One batch at a
        // time, through one plugin set, in bus order.
        let metrics = self.metrics.clone();
        let run = move || apply_plugins(&plugins, pairs, &metrics);
        match tokio::task::spawn_blocking(run).await {
            Ok(entries) => entries,
            Err(e) => {
                // Only a panic in the host could get here; the batch is lost, say so loudly.
                tracing::error!(error = %e, "the plugin chain panicked; a batch of callbacks is lost");
                Vec::new()
            }
        }
    }

    /// Processes a batch of bus messages in order; returns the (hook, event, timestamp) pairs
    /// they make.
    fn process(&mut self, batch: &[BusMessage]) -> Vec<(Arc<Hook>, Arc<Event>, u64)> {
        let snapshot = self.registry.load();
        if self
            .last_snapshot
            .as_ref()
            .is_some_and(|last| !Arc::ptr_eq(last, &snapshot))
        {
            self.dispatcher.prune();
        }
        self.last_snapshot = Some(snapshot.clone());
        let mut pairs = Vec::new();
        for msg in batch {
            let events = match self.processor.process(&msg.payload, now_ms()) {
                Ok(events) => events,
                Err(skip) => {
                    tracing::debug!(channel = %msg.channel, error = %skip, "skipping a bus message");
                    self.metrics.skip(skip.reason());
                    continue;
                }
            };
            for event in events {
                let ts = self.dispatcher.next_ts();
                self.metrics
                    .events_mapped
                    .get_or_create(&EventLabel {
                        event: event.id.clone(),
                    })
                    .inc();
                let event = Arc::new(event);
                for hook in
                    matcher::matching(&snapshot, &event.id, event.external_meeting_id.as_deref())
                {
                    pairs.push((hook.clone(), event.clone(), ts));
                }
            }
        }
        pairs
    }

    fn sweep(&mut self) {
        let mappings = &mut self.processor.mappings;
        let expired = mappings.expire(now_ms());
        if expired > 0 {
            tracing::info!(expired, "dropped inactive meeting mappings");
        }
        let queued = self.dispatcher.prune();
        self.metrics.queued_callbacks.set(queued as i64);
        self.metrics
            .meeting_mappings
            .set(mappings.meeting_count() as i64);
        self.metrics.user_mappings.set(mappings.user_count() as i64);
    }
}

/// Runs the plugin chain of `plugins` over every pair; returns the callbacks that remain.
fn apply_plugins(
    plugins: &PluginSet,
    pairs: Vec<(Arc<Hook>, Arc<Event>, u64)>,
    metrics: &Metrics,
) -> Vec<(Arc<Hook>, Entry)> {
    pairs
        .into_iter()
        .filter_map(|(hook, event, ts)| {
            // A panic in the host (never in a plugin: those are traps) costs one pair, not the
            // batch; it is treated as a failure of the chain, so fail closed.
            let verdict = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                plugins.apply(&event, &hook, ts)
            }))
            .unwrap_or_else(|_| {
                tracing::error!(hook_id = hook.id, event = %event.id, "the plugin chain panicked; the callback is dropped");
                Verdict::Drop
            });
            let Some(payload) = verdict.payload(&event, &hook) else {
                metrics.plugin_dropped.inc();
                return None;
            };
            Some((hook, Dispatcher::entry(&event, ts, payload)))
        })
        .collect()
}

/// Reads every hook's queue back from Redis and hands it to the dispatcher; drops the queues of
/// hooks that are gone. `None` when the relay stopped first.
async fn resume_queues(
    conn: &ConnectionManager,
    registry: &Registry,
    dispatcher: &mut Dispatcher,
    token: &CancellationToken,
) -> Option<usize> {
    let snapshot = registry.load();
    let mut total = 0;
    for hook in snapshot.all() {
        let (entries, last) = retry_until_ok(token, "read a hook's queue", || {
            let mut c = conn.clone();
            let id = hook.id;
            async move {
                let last = journal::last_ts(&mut c, id).await?;
                Ok::<_, redis::RedisError>((journal::load(&mut c, id).await?, last))
            }
        })
        .await?;
        dispatcher.observe_ts(last);
        total += entries.len();
        dispatcher.resume(hook, entries);
    }
    let live = |id| snapshot.get(id).is_some();
    match journal::remove_orphans(&mut conn.clone(), live).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(queues = n, "removed the queues of hooks that are gone"),
        Err(e) => tracing::warn!(error = %e, "cannot look for orphaned queues"),
    }
    Some(total)
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
