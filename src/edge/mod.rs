//! The edge role (`[edge]`): on each BBB server of a pool, the relay subscribes to the
//! server's own bus on loopback and appends every message, in bus order, to the server's
//! stream in the pool's store, where the pool's relays take them (docs/pool.md). It serves no
//! hooks and delivers nothing itself. Messages go to an outbox in the server's own Redis
//! first ([`outbox`]) and on to the pool's store from there ([`forward`]), so that a store that
//! cannot be reached, or a restart of the edge, loses nothing; its name in the pool is its
//! own ([`claim`]); [`metrics`] are its series.

mod claim;
mod forward;
mod metrics;
mod outbox;

use std::sync::{Arc, atomic::AtomicBool};

use anyhow::Context;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::{
    base::{
        redis_keys::{EDGE_EPOCH, EdgeKeys},
        sources::SourceId,
    },
    bus::{BusMessage, Subscriber},
    config::Config,
    metrics::{Exports, Metrics},
    redis_conn::redis_client_verified,
    shutdown::{Shutdown, retry_until_ok},
};
pub(crate) use metrics::EdgeMetrics;

/// Messages waiting between the bus and the outbox, at most.
const BUS_BUFFER: usize = 65_536;
/// Messages appended to the outbox at a time, at most.
const APPEND_BATCH: usize = 256;

/// Runs the edge until `shutdown` is triggered (or another edge holds its name).
///
/// # Errors
/// When a Redis URL is unusable, a certificate does not verify, or the name is taken.
pub async fn run(
    config: Config,
    metrics_listener: Option<tokio::net::TcpListener>,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let edge = config.edge.clone().context("no [edge] section")?;
    let (token, tracker) = (shutdown.token().clone(), shutdown.tracker().clone());
    crate::pipeline::check(&config).await?;
    let stats = EdgeMetrics::default();
    let metrics = Metrics::with_exports(|_| Exports {
        collectors: vec![Box::new(stats.clone())],
        texts: Vec::new(),
    });
    if let Some(l) = metrics_listener {
        let router = crate::pipeline::metrics_router(&config, &metrics, Vec::new())?;
        crate::pipeline::serve_tcp(&tracker, &token, l, router, "metrics");
    }
    let local = redis_client_verified(config.redis.url.expose(), config.redis.ca_file.as_deref())?;
    let pool = redis_client_verified(edge.store_url.expose(), edge.ca_file.as_deref())?;
    let Some(conn) = retry_until_ok(&token, "connect to this server's Redis", || {
        redis::aio::ConnectionManager::new(local.clone())
    })
    .await
    else {
        return Ok(());
    };
    let Some(epoch) =
        retry_until_ok(&token, "read the outbox's epoch", || epoch(conn.clone())).await
    else {
        return Ok(());
    };
    let keys = EdgeKeys::new(&edge.server);
    let mut lost = claim(&edge.server, &pool, &epoch, &tracker, &token).await?;
    let outbox = Arc::new(outbox::Outbox {
        conn,
        limit: i64::try_from(edge.buffer_mib.saturating_mul(1024 * 1024)).unwrap_or(i64::MAX),
        metrics: stats.clone(),
        full_said: AtomicBool::new(false),
    });
    if retry_until_ok(&token, "measure the edge's outbox", || outbox.measure())
        .await
        .is_none()
    {
        return Ok(());
    }
    tracing::info!(
        server = %edge.server,
        store = %edge.store_url.redacted(),
        buffered = stats.buffered.get(),
        "edge: this server's bus goes to the pool's store"
    );
    let wake = Arc::new(Notify::new());
    let (tx, rx) = mpsc::channel(BUS_BUFFER);
    let subscriber = subscriber(&config, &edge.server, local, &metrics);
    tracker.spawn(subscriber.run(tx, token.clone()));
    tracker.spawn(append(rx, outbox.clone(), wake.clone(), token.clone()));
    let forwarder = forward::Forwarder {
        outbox,
        pool,
        keys,
        server: edge.server.clone(),
        epoch,
        max_len: edge.stream_max_len,
        wake,
    };
    tracker.spawn(forwarder.run(token.clone()));
    token.cancelled().await;
    tracker.close();
    tracker.wait().await;
    match lost.try_recv() {
        Ok(taken) => Err(taken.into()),
        Err(_) => Ok(()),
    }
}

/// Takes the server's name in the pool's store for this edge (of outbox `epoch`) and holds
/// it; the receiver says when another edge took it.
///
/// # Errors
/// When another edge holds the name, or the store cannot be asked.
async fn claim(
    server: &str,
    pool: &redis::Client,
    epoch: &str,
    tracker: &tokio_util::task::TaskTracker,
    token: &tokio_util::sync::CancellationToken,
) -> anyhow::Result<oneshot::Receiver<claim::Taken>> {
    let claim = claim::Claim {
        pool: pool.clone(),
        server: server.to_string(),
        keys: EdgeKeys::new(server),
        me: format!("host {} outbox {epoch}", crate::config::edge::host_name()),
    };
    claim.take().await?;
    let (lost_tx, lost) = oneshot::channel();
    tracker.spawn(claim.hold(token.clone(), lost_tx));
    Ok(lost)
}

/// The subscriber of this server's bus (`[redis]`), as the edge's one source.
fn subscriber(
    config: &Config,
    server: &str,
    client: redis::Client,
    metrics: &Arc<Metrics>,
) -> Subscriber {
    let name: Arc<str> = server.into();
    Subscriber {
        source: SourceId::MIN,
        series: metrics.bus.source(&name),
        name,
        client,
        channels: config.redis.channels.clone(),
        max_message_bytes: config.redis.max_message_bytes,
        metrics: metrics.clone(),
        subscribed: tokio::sync::watch::channel(0).0,
    }
}

/// Appends what the bus hands on to the outbox, in order, until the bus is gone (at the stop,
/// after the subscriber handed on what came before it unsubscribed).
async fn append(
    mut rx: mpsc::Receiver<BusMessage>,
    outbox: Arc<outbox::Outbox>,
    wake: Arc<Notify>,
    token: tokio_util::sync::CancellationToken,
) {
    let mut batch = Vec::with_capacity(APPEND_BATCH);
    while rx.recv_many(&mut batch, APPEND_BATCH).await > 0 {
        // The first try is made even at the stop: what the bus handed on is kept.
        let stop = tokio_util::sync::CancellationToken::new();
        let on = if token.is_cancelled() { &stop } else { &token };
        let appended = retry_until_ok(on, "append to the edge's outbox", || outbox.append(&batch));
        if appended.await.is_none() {
            tracing::error!(
                messages = batch.len(),
                "the edge stopped before its outbox took these bus messages"
            );
        }
        outbox.metrics.read.inc_by(batch.len() as u64);
        batch.clear();
        wake.notify_one();
    }
}

/// This outbox's epoch, made once.
async fn epoch(mut conn: redis::aio::ConnectionManager) -> redis::RedisResult<String> {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(crate::base::time::now_ms());
    h.write_u32(std::process::id());
    let made = format!("{:016x}", h.finish());
    let _: Option<String> = redis::cmd("SET")
        .arg(EDGE_EPOCH)
        .arg(&made)
        .arg("NX")
        .query_async(&mut conn)
        .await?;
    redis::cmd("GET")
        .arg(EDGE_EPOCH)
        .query_async(&mut conn)
        .await
}
