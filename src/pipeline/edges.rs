//! A pool's relay takes the edges' streams (`[pool] edges`, docs/pool.md). Every server in the
//! store's set of edges becomes a source of its own the first time it is seen: its mappings
//! and conference state are read back under its own keys, and the processing stage adds it
//! ([`Joined`]) before any of its messages. Its stream is then read, in order, from where the
//! last batch that queued its messages left it (`taken`, written in that batch's transaction,
//! so a relay killed at any point takes nothing twice and loses nothing). Edges say on a channel
//! when they wrote; every second the set is read again, every stream read, the streams trimmed
//! up to what was taken, and each edge's liveness shown as its source's bus connection. Only
//! the instance that processes the bus runs this.

use std::{collections::HashSet, sync::Arc, time::Duration};

use tokio::sync::{mpsc, oneshot};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::sources::restore_one;
use crate::{
    base::{
        redis_keys::{EDGE_WAKE, EDGES, EdgeKeys, SourceKeys},
        sources::SourceId,
        time::now_ms,
    },
    bus::{
        BusMessage,
        stream::{self, Position},
    },
    conference::SharedConference,
    config::Config,
    event::Processor,
    metrics::{Metrics, SourceMetrics},
    store_conn::StoreConn,
};

/// Entries read from one stream at a time, at most.
const READ_COUNT: usize = 512;
/// How often the set of edges is read again (a new server is served within this, plus the
/// reading back of its state), every stream read and trimmed.
const ROUND: Duration = Duration::from_secs(1);
/// An edge not seen for this long shows as a bus that is down.
const SILENT_AFTER_MS: u64 = 10_000;

/// A server whose edge appeared, for the processing stage to add before its messages.
pub(super) struct Joined {
    pub(super) name: Arc<str>,
    pub(super) keys: SourceKeys,
    /// Its processor, with its mappings read back (the stage marks it with the source).
    pub(super) processor: Processor,
    pub(super) conference: SharedConference,
    /// The stage answers with the server's source, `None` when no more sources fit.
    pub(super) reply: oneshot::Sender<Option<SourceId>>,
}

/// What taking the edges needs.
pub(super) struct Taker {
    pub(super) conn: StoreConn,
    pub(super) config: Config,
    pub(super) bus: mpsc::Sender<BusMessage>,
    pub(super) joins: mpsc::Sender<Joined>,
    pub(super) metrics: Arc<Metrics>,
    /// Names no edge may take: the configured sources'.
    pub(super) reserved: HashSet<String>,
}

/// One server being taken.
struct Taking {
    name: Arc<str>,
    keys: EdgeKeys,
    position: Position,
    series: SourceMetrics,
}

impl Taker {
    /// Takes the edges until `token` is cancelled (or the stage is gone).
    pub(super) async fn run(self, tracker: TaskTracker, token: CancellationToken) {
        let (wake_tx, mut wake) = mpsc::channel::<String>(4096);
        let listener = {
            let (conn, token) = (self.conn.clone(), token.clone());
            async move {
                conn.keep_listening("edges' wake-ups", &token, |client| {
                    listen(client, wake_tx.clone(), token.clone())
                })
                .await;
            }
        };
        tracker.spawn(listener);
        let mut taking: Vec<Taking> = Vec::new();
        let mut refused: HashSet<String> = HashSet::new();
        let mut failing = false;
        let mut round = tokio::time::interval(ROUND);
        round.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let mut woken: HashSet<String> = HashSet::new();
            let all = tokio::select! {
                biased;
                () = token.cancelled() => return,
                _ = round.tick() => true,
                Some(name) = wake.recv() => {
                    woken.insert(name);
                    while let Ok(name) = wake.try_recv() {
                        woken.insert(name);
                    }
                    false
                }
            };
            let unknown = woken
                .iter()
                .any(|n| !refused.contains(n) && !taking.iter().any(|t| &*t.name == n));
            if all || unknown {
                match self.round(&mut taking, &mut refused, &token).await {
                    Ok(true) => {}
                    Ok(false) => return,
                    Err(e) => self.failed(&mut failing, &e),
                }
            }
            match self.read(&mut taking, all, &woken, &token).await {
                Ok(true) => failing = false,
                Ok(false) => return,
                Err(e) => self.failed(&mut failing, &e),
            }
        }
    }

    /// Says once that the store cannot be read, until it can again.
    fn failed(&self, failing: &mut bool, e: &redis::RedisError) {
        if !*failing {
            tracing::warn!(error = %e, "cannot read the edges' streams in the store; reading again each second");
        }
        *failing = true;
    }

    /// Reads the streams (all, or the woken ones) until none has more, handing the messages
    /// on. `false` when the relay stopped first.
    async fn read(
        &self,
        taking: &mut [Taking],
        all: bool,
        woken: &HashSet<String>,
        token: &CancellationToken,
    ) -> redis::RedisResult<bool> {
        loop {
            let mut chosen: Vec<&mut Taking> = taking
                .iter_mut()
                .filter(|t| all || woken.contains(&*t.name))
                .collect();
            let mut positions: Vec<&mut Position> =
                chosen.iter_mut().map(|t| &mut t.position).collect();
            let read = stream::read(&mut self.conn.clone(), &mut positions, READ_COUNT).await?;
            for m in read.messages {
                if let Some(t) = taking.iter().find(|t| t.position.source == m.source) {
                    t.series.messages.inc();
                    t.series.clock.tick();
                }
                tokio::select! {
                    sent = self.bus.send(m) => if sent.is_err() { return Ok(false) },
                    () = token.cancelled() => return Ok(false),
                }
            }
            if !read.full {
                return Ok(true);
            }
        }
    }

    /// Reads the set of edges, adds the servers not taken yet, trims the streams up to what
    /// was taken and shows each edge's liveness. `false` when the relay stopped first.
    async fn round(
        &self,
        taking: &mut Vec<Taking>,
        refused: &mut HashSet<String>,
        token: &CancellationToken,
    ) -> redis::RedisResult<bool> {
        let mut conn = self.conn.clone();
        let mut names: Vec<String> = redis::cmd("SMEMBERS")
            .arg(EDGES)
            .query_async(&mut conn)
            .await?;
        names.sort();
        for name in names {
            if taking.iter().any(|t| *t.name == *name) || refused.contains(&name) {
                continue;
            }
            if self.reserved.contains(&name) {
                tracing::error!(server = %name, "an edge has the name of a configured source; its messages are not taken: rename the edge ([edge] server) or the source");
                refused.insert(name);
                continue;
            }
            match self.join(&name, token).await? {
                Some(t) => taking.push(t),
                None if token.is_cancelled() => return Ok(false),
                None => {
                    refused.insert(name);
                }
            }
        }
        self.tend(taking).await?;
        Ok(true)
    }

    /// Adds `name` as a source: its state read back, the stage told, its stream's position
    /// read. `None` when the relay stopped first or no more sources fit.
    async fn join(
        &self,
        name: &str,
        token: &CancellationToken,
    ) -> redis::RedisResult<Option<Taking>> {
        let keys = SourceKeys::new(name);
        let conference = SharedConference::default();
        let edge = EdgeKeys::new(name);
        let taken: Option<String> = redis::cmd("GET")
            .arg(&edge.taken)
            .query_async(&mut self.conn.clone())
            .await?;
        let Some(processor) =
            restore_one(name, &keys, &conference, &self.conn, &self.config, token).await
        else {
            return Ok(None);
        };
        let (reply, answer) = oneshot::channel();
        let joined = Joined {
            name: name.into(),
            keys,
            processor,
            conference,
            reply,
        };
        if self.joins.send(joined).await.is_err() {
            return Ok(None);
        }
        let Ok(Some(source)) = answer.await else {
            tracing::error!(server = %name, "no more sources fit: this edge's messages are not taken");
            return Ok(None);
        };
        let after: Arc<str> = taken.as_deref().unwrap_or("0-0").into();
        tracing::info!(server = %name, source, after = %after, "taking an edge's messages");
        Ok(Some(Taking {
            name: name.into(),
            position: Position {
                source,
                key: edge.stream.clone(),
                after,
            },
            keys: edge,
            series: self.metrics.bus.source(name),
        }))
    }

    /// Trims each stream up to what was taken (written with the batches that queued it) and
    /// shows whether its edge was seen lately.
    async fn tend(&self, taking: &[Taking]) -> redis::RedisResult<()> {
        if taking.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for t in taking {
            pipe.get(&t.keys.taken)
                .hget(&t.keys.info, "last_seen_ms")
                .exists(&t.keys.claim);
        }
        let mut conn = self.conn.clone();
        let state: Vec<(Option<String>, Option<u64>, bool)> = pipe.query_async(&mut conn).await?;
        let mut trim = redis::pipe();
        let now = now_ms();
        for (t, (taken, seen, claimed)) in taking.iter().zip(state) {
            let alive = claimed && seen.is_some_and(|s| now.saturating_sub(s) < SILENT_AFTER_MS);
            t.series.connected.set(i64::from(alive));
            if let Some(taken) = taken {
                trim.cmd("XTRIM")
                    .arg(&t.keys.stream)
                    .arg("MINID")
                    .arg(taken)
                    .ignore();
            }
        }
        if !trim.is_empty() {
            trim.query_async::<()>(&mut conn).await?;
        }
        Ok(())
    }
}

/// Hands on the names the edges say on [`EDGE_WAKE`] (dropped when many wait: the next round
/// reads every stream anyway).
async fn listen(
    client: redis::Client,
    wake: mpsc::Sender<String>,
    token: CancellationToken,
) -> redis::RedisResult<()> {
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(EDGE_WAKE).await?;
    let mut messages = pubsub.into_on_message();
    while let Some(name) = StoreConn::next_message(&mut messages, &token).await? {
        let _ = wake.try_send(name);
    }
    Ok(())
}

/// The names of the configured sources, which no edge may take.
pub(super) fn reserved(config: &Config) -> HashSet<String> {
    config
        .effective_sources()
        .into_iter()
        .map(|s| s.name)
        .collect()
}
