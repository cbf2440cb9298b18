//! The Redis pub/sub subscriber of one source (conference server): one connection on its
//! channels, messages handed on in bus order, each marked with its source; when Redis goes away it reconnects with backoff (50 ms growing to 1 s: whatever
//! is published while it is away is lost, so it retries often) and subscribes again. At the
//! relay's stop it unsubscribes and hands on what was published before. [`stream`] reads the
//! streams that a pool's edges write instead.

pub(crate) mod stream;

use std::{sync::Arc, time::Duration};

use backon::{BackoffBuilder, ExponentialBuilder};
use futures_util::{FutureExt, StreamExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{
    base::sources::SourceId,
    metrics::{Metrics, SourceMetrics},
};

/// How long the stop may take to unsubscribe and hand on what came before: Redis answers an
/// UNSUBSCRIBE at once, so this bounds only an unanswering server.
pub(crate) const DRAIN_WITHIN: Duration = Duration::from_secs(2);

/// One message as it came off the bus.
#[derive(Debug, Clone)]
pub(crate) struct BusMessage {
    /// Which source's bus it came from.
    pub(crate) source: SourceId,
    /// Shared by every message of its channel: a burst's waiting messages hold one copy.
    pub(crate) channel: Arc<str>,
    pub(crate) payload: Arc<str>,
    /// When it came off the bus (for the callback latency).
    pub(crate) arrived: std::time::Instant,
    /// Which subscription of its source it came on: 1 for the first, one more after each
    /// reconnection. Between two messages of different epochs, messages may have been lost.
    pub(crate) epoch: u64,
    /// Taken from an edge's stream in the pool's store: its entry's id, which the batch that
    /// queues it records as taken. `None` off the pub/sub bus.
    pub(crate) position: Option<Arc<str>>,
}

/// What the subscriber of one source needs.
pub(crate) struct Subscriber {
    pub(crate) source: SourceId,
    /// The source's name, for logs and metrics.
    pub(crate) name: Arc<str>,
    pub(crate) client: redis::Client,
    pub(crate) channels: Vec<String>,
    /// Larger messages are skipped and counted.
    pub(crate) max_message_bytes: usize,
    pub(crate) metrics: Arc<Metrics>,
    /// This source's series.
    pub(crate) series: SourceMetrics,
    /// How many times the subscription was made (at start and after every reconnect): a
    /// change tells the watchers.
    pub(crate) subscribed: tokio::sync::watch::Sender<u64>,
}

impl Subscriber {
    /// Delivers bus messages to `tx` until `token` is cancelled or the receiver is gone.
    pub(crate) async fn run(self, tx: mpsc::Sender<BusMessage>, token: CancellationToken) {
        let backoff = || {
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(50))
                .with_max_delay(Duration::from_secs(1))
                .with_jitter()
                .without_max_times()
                .build()
        };
        let mut delays = backoff();
        let mut first = true;
        loop {
            match self.subscribe().await {
                Ok(pubsub) => {
                    if !first {
                        self.series.reconnects.inc();
                    }
                    first = false;
                    tracing::info!(source = %self.name, channels = self.channels.len(), "subscribed to the bus");
                    self.series.connected.set(1);
                    self.subscribed.send_modify(|n| *n += 1);
                    let epoch = *self.subscribed.borrow();
                    delays = backoff();
                    let go_on = self.forward(pubsub, epoch, &tx, &token).await;
                    self.series.connected.set(0);
                    if !go_on {
                        return;
                    }
                    tracing::warn!(source = %self.name, "bus connection lost; reconnecting");
                }
                Err(e) => {
                    tracing::warn!(source = %self.name, error = %e, "cannot subscribe to the bus; retrying");
                }
            }
            let wait = delays.next().unwrap_or(Duration::from_secs(1));
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = token.cancelled() => return,
            }
        }
    }

    async fn subscribe(&self) -> redis::RedisResult<redis::aio::PubSub> {
        let mut pubsub =
            tokio::time::timeout(Duration::from_secs(5), self.client.get_async_pubsub())
                .await
                .map_err(|_| {
                    redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut))
                })??;
        pubsub.subscribe(&self.channels).await?;
        Ok(pubsub)
    }

    /// Forwards until the connection ends (`true`: reconnect) or the relay stops (`false`).
    /// On the stop it unsubscribes and forwards what came before Redis confirmed it: a
    /// message published before the stop is processed, not lost with the connection.
    async fn forward(
        &self,
        pubsub: redis::aio::PubSub,
        epoch: u64,
        tx: &mpsc::Sender<BusMessage>,
        token: &CancellationToken,
    ) -> bool {
        let (mut sink, mut stream) = pubsub.split();
        let names = Names::of(&self.channels);
        loop {
            let msg = tokio::select! {
                m = stream.next() => m,
                () = token.cancelled() => {
                    let deadline = tokio::time::Instant::now() + DRAIN_WITHIN;
                    self.drain(&mut sink, &mut stream, epoch, tx, deadline).await;
                    return false;
                }
            };
            let Some(msg) = msg else { return true };
            let Some(m) = self.taken(&msg, epoch, &names) else {
                continue;
            };
            tokio::select! {
                permit = tx.reserve() => match permit {
                    Ok(permit) => permit.send(m),
                    Err(_) => return false,
                },
                () = token.cancelled() => {
                    // The stage takes what comes until the subscribers are gone.
                    let deadline = tokio::time::Instant::now() + DRAIN_WITHIN;
                    let _ = tokio::time::timeout_at(deadline, tx.send(m)).await;
                    self.drain(&mut sink, &mut stream, epoch, tx, deadline).await;
                    return false;
                }
            }
        }
    }

    /// At the stop: unsubscribes, then forwards every message that came before Redis
    /// confirmed it (they are ahead of the confirmation on the connection). Bounded by
    /// `deadline` ([`DRAIN_WITHIN`] after the stop), so that an unanswering Redis does not
    /// hold the stop: what was not read off the connection by then is lost, as with any
    /// subscriber that goes.
    async fn drain(
        &self,
        sink: &mut redis::aio::PubSubSink,
        stream: &mut redis::aio::PubSubStream,
        epoch: u64,
        tx: &mpsc::Sender<BusMessage>,
        deadline: tokio::time::Instant,
    ) {
        let unsubscribed =
            tokio::time::timeout_at(deadline, sink.unsubscribe(&self.channels)).await;
        if !matches!(unsubscribed, Ok(Ok(()))) {
            tracing::debug!(source = %self.name, "no confirmation of the unsubscription at the stop");
        }
        let mut forwarded = 0_usize;
        let names = Names::of(&self.channels);
        // Unconstrained: a receiver polled past the task's budget says "pending" with
        // messages waiting, and those would be lost.
        while let Some(Some(msg)) = tokio::task::unconstrained(stream.next()).now_or_never() {
            let Some(m) = self.taken(&msg, epoch, &names) else {
                continue;
            };
            if tokio::time::timeout_at(deadline, tx.send(m)).await.is_err() {
                break;
            }
            forwarded += 1;
        }
        if forwarded > 0 {
            tracing::debug!(source = %self.name, forwarded, "messages taken off the bus at the stop");
        }
    }

    /// The bus message of `msg`, counted; `None` (skipped and counted) when it is too large or
    /// not UTF-8.
    fn taken(&self, msg: &redis::Msg, epoch: u64, names: &Names) -> Option<BusMessage> {
        let arrived = std::time::Instant::now();
        self.series.messages.inc();
        self.series.clock.tick();
        let bytes = msg.get_payload_bytes();
        if bytes.len() > self.max_message_bytes {
            self.metrics.bus.skip(&self.name, "oversized");
            tracing::debug!(source = %self.name, bytes = bytes.len(), "skipping an oversized bus message");
            return None;
        }
        let Ok(text) = std::str::from_utf8(bytes) else {
            self.metrics.bus.skip(&self.name, "not_utf8");
            tracing::debug!(source = %self.name, "skipping a bus message that is not UTF-8");
            return None;
        };
        Some(BusMessage {
            source: self.source,
            channel: names.get(msg.get_channel_name()),
            payload: Arc::from(text),
            arrived,
            epoch,
            position: None,
        })
    }
}

/// The subscribed channels' names, each made once and shared by the messages of its channel.
struct Names(Vec<Arc<str>>);

impl Names {
    fn of(channels: &[String]) -> Self {
        Self(channels.iter().map(|c| Arc::from(c.as_str())).collect())
    }

    /// The shared name of `channel` (a new one for a channel not subscribed to by name).
    fn get(&self, channel: &str) -> Arc<str> {
        self.0
            .iter()
            .find(|n| ***n == *channel)
            .cloned()
            .unwrap_or_else(|| Arc::from(channel))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_s_messages_share_its_name() {
        let names = Names::of(&["from-akka-apps-redis-channel".into(), "b".into()]);
        let (one, two) = (
            names.get("from-akka-apps-redis-channel"),
            names.get("from-akka-apps-redis-channel"),
        );
        assert!(Arc::ptr_eq(&one, &two));
        assert_eq!(&*names.get("b"), "b");
        assert_eq!(&*names.get("other"), "other");
    }
}
