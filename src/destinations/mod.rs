//! Destinations (`[[destinations]]`, `docs/destinations.md`): events published to message
//! brokers (NATS JetStream, AMQP, MQTT) and appended to files, with a hook's guarantees.
//!
//! Data flow: the processing stage hands each batch's events to [`Output::add`], which picks
//! each destination's ([`route`]) and adds them as [`message`]s to its queue ([`queue`]) in
//! the batch's transaction, so a message is queued exactly when its bus message is processed;
//! once that is written, [`Output::wake`] wakes each destination's [`sender`], which takes its
//! queue a message at a time, in order, through the destination's [`plugins`] and its
//! [`link`] to the broker, and removes each message once the broker confirmed it.

mod link;
mod message;
mod plugins;
mod queue;
pub(crate) use queue::{Requeued, requeue};
mod route;
mod sender;

use std::sync::{Arc, atomic::Ordering};

use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    base::sources::SourceTable,
    config::{Config, destinations::DestinationConfig},
    event::Event,
    metrics::Metrics,
    store_conn::StoreConn,
    traces::TraceParent,
};
pub(crate) use message::Message;
use route::Route;
use sender::Handle;

/// The destinations, owned by the processing stage.
pub(crate) struct Output {
    routes: Vec<(Route, Handle)>,
    sources: Arc<SourceTable>,
    metrics: Arc<Metrics>,
    /// Whether a batch queued anything since the last wake.
    touched: bool,
}

impl Output {
    /// The destinations of `config` (`None` when there are none), each with its sender, which
    /// starts with what its queue holds.
    pub(crate) async fn start(
        config: &Config,
        sources: Arc<SourceTable>,
        conn: &StoreConn,
        metrics: Arc<Metrics>,
        plugins: &Arc<crate::plugin_host::Plugins>,
        traces: &Option<Arc<crate::traces::Traces>>,
        (tracker, token): (&TaskTracker, &CancellationToken),
    ) -> Option<Self> {
        if config.destinations.is_empty() {
            return None;
        }
        let mut routes = Vec::with_capacity(config.destinations.len());
        for d in &config.destinations {
            let Some(route) = Route::of(d) else { continue };
            let handle = Handle::default();
            let mut c = conn.clone();
            match queue::depth(&mut c, &d.name).await {
                Ok(n) => handle.depth.store(n, Ordering::Relaxed),
                Err(e) => {
                    tracing::warn!(destination = %d.name, error = %e, "cannot read a destination's queue length")
                }
            }
            tracker.spawn(sender::run(
                sender::Setup {
                    conn: conn.clone(),
                    config: d.clone(),
                    metrics: metrics.clone(),
                    plugins: plugins.clone(),
                    retain_ms: u64::try_from(config.delivery.retain.as_millis())
                        .unwrap_or(u64::MAX),
                    traces: traces.clone(),
                },
                handle.clone(),
                token.child_token(),
            ));
            routes.push((route, handle));
        }
        tracing::info!(destinations = routes.len(), "destinations on");
        Some(Self {
            routes,
            sources,
            metrics,
            touched: false,
        })
    }

    /// Adds each destination's messages of `events` (one batch, in order) to `pipe`, the
    /// batch's transaction; `trace(i, "destination", name)` gives the trace context of a
    /// message made of event `i` for destination `name`, when its bus message is traced.
    pub(crate) fn add(
        &mut self,
        events: &[Arc<Event>],
        pipe: &mut redis::Pipeline,
        trace: &mut dyn FnMut(usize, &str, &str) -> Option<TraceParent>,
    ) {
        for (i, event) in events.iter().enumerate() {
            let mut server = None;
            for (route, handle) in &self.routes {
                let Some(body) = route.body_of(event) else {
                    continue;
                };
                let m = &self.metrics.destinations;
                if handle.depth.load(Ordering::Relaxed) >= route.max_queue {
                    m.refused(&route.name);
                    tracing::warn!(destination = %route.name, event = %event.id, max_queue = route.max_queue, "a destination's queue is full; the event is not queued for it");
                    continue;
                }
                let server = server.get_or_insert_with(|| self.sources.name(event.source));
                let mut message = Message::of(route, event, body, server);
                message.trace = trace(i, "destination", &route.name);
                queue::add(pipe, &route.name, &message);
                handle.depth.fetch_add(1, Ordering::Relaxed);
                self.touched = true;
            }
        }
    }

    /// How many destinations take `event` (for its trace's `route` span).
    pub(crate) fn matching(&self, event: &Event) -> usize {
        self.routes
            .iter()
            .filter(|(route, _)| route.body_of(event).is_some())
            .count()
    }

    /// Wakes the senders once the batch's transaction is written.
    pub(crate) fn wake(&mut self) {
        if std::mem::take(&mut self.touched) {
            for (_, handle) in &self.routes {
                handle.wake.notify_one();
            }
        }
    }
}

/// What `hookrelay destinations` shows of one destination.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DestinationReport {
    pub name: String,
    /// `nats`, `amqp`, `mqtt` or `file`.
    pub kind: &'static str,
    /// Its URL, without its password.
    pub url: String,
    /// `ok`, `failing`, or `unknown` (no relay has published to it yet).
    pub state: String,
    /// The last failure, in one line.
    pub last_error: String,
    /// When the state last changed (ms since the epoch; 0: unknown).
    pub since_ms: u64,
    /// Messages waiting.
    pub queued: usize,
    /// Age of the oldest message waiting (ms).
    pub oldest_age_ms: Option<u64>,
}

/// The state and queue of each of `destinations`, as the store holds them.
///
/// # Errors
/// When Redis fails.
pub async fn report(
    destinations: &[DestinationConfig],
    conn: &mut StoreConn,
) -> redis::RedisResult<Vec<DestinationReport>> {
    let states = queue::states(conn).await?;
    let now = crate::base::time::now_ms();
    let mut out = Vec::with_capacity(destinations.len());
    for d in destinations {
        let state = states.get(&d.name).cloned().unwrap_or_default();
        out.push(DestinationReport {
            name: d.name.clone(),
            kind: d.kind().map_or("unknown", |k| k.name()),
            url: d.url.to_string(),
            state: if state.state.is_empty() {
                "unknown".into()
            } else {
                state.state
            },
            last_error: state.last_error,
            since_ms: state.since_ms,
            queued: queue::depth(conn, &d.name).await?,
            oldest_age_ms: queue::oldest_ms(conn, &d.name)
                .await?
                .map(|t| now.saturating_sub(t)),
        });
    }
    Ok(out)
}
