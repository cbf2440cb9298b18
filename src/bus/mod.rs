//! The Redis pub/sub subscriber: one connection on the configured channels, messages handed on
//! in bus order; when Redis goes away it reconnects with backoff (50 ms growing to 1 s: whatever
//! is published while it is away is lost, so it retries often) and subscribes again.

use std::{sync::Arc, time::Duration};

use backon::{BackoffBuilder, ExponentialBuilder};
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// One message as it came off the bus.
#[derive(Debug, Clone)]
pub struct BusMessage {
    pub channel: String,
    pub payload: Arc<str>,
    /// When it came off the bus (for the callback latency).
    pub arrived: std::time::Instant,
}

/// What the subscriber needs.
pub struct Subscriber {
    pub client: redis::Client,
    pub channels: Vec<String>,
    /// Larger messages are skipped and counted.
    pub max_message_bytes: usize,
    pub metrics: Arc<Metrics>,
    /// How many times the subscription was made (at start and after every reconnect): a
    /// change tells the watchers.
    pub subscribed: tokio::sync::watch::Sender<u64>,
}

impl Subscriber {
    /// Delivers bus messages to `tx` until `token` is cancelled or the receiver is gone.
    pub async fn run(self, tx: mpsc::Sender<BusMessage>, token: CancellationToken) {
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
                        self.metrics.bus_reconnects.inc();
                    }
                    first = false;
                    tracing::info!(channels = self.channels.len(), "subscribed to the bus");
                    self.metrics.redis_connected.set(1);
                    self.subscribed.send_modify(|n| *n += 1);
                    delays = backoff();
                    let go_on = self.forward(pubsub, &tx, &token).await;
                    self.metrics.redis_connected.set(0);
                    if !go_on {
                        return;
                    }
                    tracing::warn!("bus connection lost; reconnecting");
                }
                Err(e) => tracing::warn!(error = %e, "cannot subscribe to the bus; retrying"),
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
    async fn forward(
        &self,
        pubsub: redis::aio::PubSub,
        tx: &mpsc::Sender<BusMessage>,
        token: &CancellationToken,
    ) -> bool {
        let mut stream = pubsub.into_on_message();
        loop {
            let msg = tokio::select! {
                m = stream.next() => m,
                () = token.cancelled() => return false,
            };
            let Some(msg) = msg else { return true };
            let arrived = std::time::Instant::now();
            self.metrics.bus_messages.inc();
            self.metrics.bus_clock.tick();
            let bytes = msg.get_payload_bytes();
            if bytes.len() > self.max_message_bytes {
                self.metrics.skip("oversized");
                tracing::debug!(bytes = bytes.len(), "skipping an oversized bus message");
                continue;
            }
            let Ok(text) = std::str::from_utf8(bytes) else {
                self.metrics.skip("not_utf8");
                tracing::debug!("skipping a bus message that is not UTF-8");
                continue;
            };
            let m = BusMessage {
                channel: msg.get_channel_name().to_string(),
                payload: Arc::from(text),
                arrived,
            };
            tokio::select! {
                r = tx.send(m) => if r.is_err() { return false },
                () = token.cancelled() => return false,
            }
        }
    }
}
