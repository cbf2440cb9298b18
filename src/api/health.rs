//! What orchestrators ask of the API listener: `GET /healthz` (the process is alive and its
//! runtime turns) and `GET /readyz` (the store answers, the hooks are loaded, and the bus is
//! subscribed, or the relay has no bus of its own and takes a pool's edges from the store).
//! Each answers 200 or 503 with one line of JSON saying why, never a hook or a secret.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use axum::{Json, extract::State, http::StatusCode, response::IntoResponse};
use prometheus_client::metrics::{family::Family, gauge::Gauge};
use serde_json::json;

use super::ApiState;
use crate::{base::time::now_ms, metrics::SourceLabel, store_conn::StoreConn};

/// How often the runtime's heartbeat beats.
const BEAT: Duration = Duration::from_secs(1);
/// A heartbeat older than this says the runtime no longer turns.
const STALE_MS: u64 = 10_000;
/// How long the store has to answer a readiness check.
const STORE_WITHIN: Duration = Duration::from_secs(1);

/// What the two answers are made from.
pub(crate) struct Health {
    /// When the heartbeat task last ran (ms since the epoch).
    beat: AtomicU64,
    conn: StoreConn,
    /// `hookrelay_redis_connected{source}`: each source's bus.
    connected: Family<SourceLabel, Gauge>,
    /// The sources the relay subscribes to (none: a pool's relay).
    sources: Vec<String>,
}

impl Health {
    pub(crate) fn new(
        conn: StoreConn,
        connected: Family<SourceLabel, Gauge>,
        sources: Vec<String>,
    ) -> Arc<Self> {
        Arc::new(Self {
            beat: AtomicU64::new(now_ms()),
            conn,
            connected,
            sources,
        })
    }

    /// Beats until `token` is cancelled.
    pub(crate) async fn beat(self: Arc<Self>, token: tokio_util::sync::CancellationToken) {
        let mut tick = tokio::time::interval(BEAT);
        loop {
            tokio::select! {
                _ = tick.tick() => self.beat.store(now_ms(), Ordering::Relaxed),
                () = token.cancelled() => return,
            }
        }
    }

    /// How the bus stands: `subscribed` (at least one source is), `not subscribed`, or
    /// `edges` (no bus of its own).
    fn bus(&self) -> &'static str {
        if self.sources.is_empty() {
            return "edges";
        }
        let up = self.sources.iter().any(|s| {
            let label = SourceLabel { source: s.clone() };
            self.connected.get_or_create(&label).get() == 1
        });
        if up { "subscribed" } else { "not subscribed" }
    }

    async fn store(&self) -> &'static str {
        let (cmd, mut conn) = (redis::cmd("PING"), self.conn.clone());
        let ping = cmd.query_async::<String>(&mut conn);
        match tokio::time::timeout(STORE_WITHIN, ping).await {
            Ok(Ok(_)) => "reachable",
            Ok(Err(_)) => "unreachable",
            Err(_) => "not answering",
        }
    }
}

/// `GET /healthz`.
pub(crate) async fn live(State(api): State<Arc<ApiState>>) -> impl IntoResponse {
    let age = now_ms().saturating_sub(api.health.beat.load(Ordering::Relaxed));
    let alive = age < STALE_MS;
    let status = if alive {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(json!({"alive": alive, "heartbeat_age_ms": age})),
    )
}

/// `GET /readyz`. The hooks are loaded before the API serves at all.
pub(crate) async fn ready(State(api): State<Arc<ApiState>>) -> impl IntoResponse {
    let health = &api.health;
    let (bus, store) = (health.bus(), health.store().await);
    let ready = bus != "not subscribed" && store == "reachable";
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let answer = json!({"ready": ready, "bus": bus, "store": store, "hooks": "loaded"});
    (status, Json(answer))
}
