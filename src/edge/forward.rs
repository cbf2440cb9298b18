//! The edge's forwarder: the outbox's messages, in order, into the server's stream in the
//! pool's store, each batch in one transaction with the cursor (the last outbox entry the
//! stream has), then deleted from the outbox. After any failure the cursor is read again
//! before the next write, so a batch whose answer was lost is never written twice.

use std::{sync::Arc, time::Duration};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::outbox::{Entry, Outbox};
use crate::base::{
    redis_keys::{EDGE_WAKE, EdgeKeys},
    time::now_ms,
};

/// Messages written to the pool's store in one transaction, at most.
const BATCH: usize = 512;

/// What the forwarder needs.
pub(super) struct Forwarder {
    pub(super) outbox: Arc<Outbox>,
    pub(super) pool: redis::Client,
    pub(super) keys: EdgeKeys,
    /// This server's name, said on [`EDGE_WAKE`] after each write.
    pub(super) server: String,
    /// This outbox's life ([`crate::base::redis_keys::EDGE_EPOCH`]).
    pub(super) epoch: String,
    /// `edge.stream_max_len`.
    pub(super) max_len: u64,
    /// Told when the outbox has something new.
    pub(super) wake: Arc<Notify>,
}

impl Forwarder {
    /// Forwards until `token` is cancelled.
    pub(super) async fn run(self, token: CancellationToken) {
        let mut conn: Option<ConnectionManager> = None;
        // `None`: the cursor must be read from the pool's store first.
        let mut last: Option<String> = None;
        let mut pause = Duration::from_millis(100);
        while !token.is_cancelled() {
            let step = self.step(&mut conn, &mut last).await;
            let wait = match step {
                // A full batch: more may wait.
                Ok(Some(BATCH)) => {
                    pause = Duration::from_millis(100);
                    continue;
                }
                // The outbox is empty (or was, but for this batch): until the appender says
                // it has more, or a second passes (then the store hears the edge is alive).
                Ok(_) => {
                    pause = Duration::from_millis(100);
                    tokio::select! {
                        () = self.wake.notified() => continue,
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                        () = token.cancelled() => return,
                    }
                }
                Err(e) => {
                    if self.outbox.metrics.store_up.get() != 0 || conn.is_none() {
                        tracing::warn!(error = %e, "the edge cannot write to the pool's store; the outbox keeps the bus messages meanwhile");
                    }
                    self.outbox.metrics.store_up.set(0);
                    last = None;
                    pause
                }
            };
            pause = (pause * 2).min(Duration::from_secs(2));
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = token.cancelled() => return,
            }
        }
    }

    /// One round: how many messages went (`None`: the outbox was empty).
    async fn step(
        &self,
        conn: &mut Option<ConnectionManager>,
        last: &mut Option<String>,
    ) -> redis::RedisResult<Option<usize>> {
        let pool = match conn {
            Some(c) => c.clone(),
            None => {
                let settings = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(Duration::from_secs(2)))
                    .set_response_timeout(Some(Duration::from_secs(2)))
                    .set_number_of_retries(1);
                let c = ConnectionManager::new_with_config(self.pool.clone(), settings).await?;
                *conn = Some(c.clone());
                c
            }
        };
        let after = match last {
            Some(id) => id.clone(),
            None => {
                let id = self.resume(&mut pool.clone()).await?;
                *last = Some(id.clone());
                id
            }
        };
        let batch = self.outbox.read_after(Some(&after), BATCH).await?;
        let Some(newest) = batch.last() else {
            self.outbox.metrics.store_up.set(1);
            self.say_seen(&mut pool.clone()).await?;
            return Ok(None);
        };
        let newest = newest.id.clone();
        self.write(&mut pool.clone(), &batch, &newest).await?;
        if self.outbox.metrics.store_up.get() == 0 {
            tracing::info!("the edge writes to the pool's store again");
        }
        self.outbox.metrics.store_up.set(1);
        self.outbox.metrics.forwarded.inc_by(batch.len() as u64);
        *last = Some(newest);
        // What stays (the server's Redis failed) is deleted after the next start's cursor.
        if let Err(e) = self.outbox.delete(&batch).await {
            tracing::warn!(error = %e, "the edge cannot delete forwarded messages from its outbox");
        }
        Ok(Some(batch.len()))
    }

    /// Where to go on from: the outbox entry the pool's stream has last (the entries up to it
    /// are deleted from the outbox), or before the first when the cursor is another outbox's.
    async fn resume(&self, pool: &mut ConnectionManager) -> redis::RedisResult<String> {
        let cursor: Option<String> = redis::cmd("GET")
            .arg(&self.keys.cursor)
            .query_async(pool)
            .await?;
        let ours = cursor
            .as_deref()
            .and_then(|c| c.split_once(' '))
            .and_then(|(epoch, id)| (epoch == self.epoch).then(|| id.to_string()));
        match ours {
            Some(id) => {
                self.outbox.delete_through(&id).await?;
                Ok(id)
            }
            None => Ok("0-0".into()),
        }
    }

    /// Writes `batch` to the server's stream with the cursor at `newest`, in one transaction.
    async fn write(
        &self,
        pool: &mut ConnectionManager,
        batch: &[Entry],
        newest: &str,
    ) -> redis::RedisResult<()> {
        let mut pipe = redis::pipe();
        pipe.atomic();
        for e in batch {
            pipe.cmd("XADD")
                .arg(&self.keys.stream)
                .arg("MAXLEN")
                .arg("~")
                .arg(self.max_len)
                .arg("*")
                .arg("c")
                .arg(&e.channel)
                .arg("p")
                .arg(&e.payload)
                .ignore();
        }
        pipe.cmd("SET")
            .arg(&self.keys.cursor)
            .arg(format!("{} {newest}", self.epoch))
            .ignore();
        self.info(&mut pipe, batch.len());
        pipe.cmd("PUBLISH")
            .arg(EDGE_WAKE)
            .arg(&self.server)
            .ignore();
        pipe.query_async(pool).await
    }

    /// Says in the store that the edge is alive, and how it stands.
    async fn say_seen(&self, pool: &mut ConnectionManager) -> redis::RedisResult<()> {
        let mut pipe = redis::pipe();
        self.info(&mut pipe, 0);
        pipe.query_async(pool).await
    }

    /// The edge's counts, as they stand once `going` more messages are in the store.
    fn info(&self, pipe: &mut redis::Pipeline, going: usize) {
        let m = &self.outbox.metrics;
        let going_i = i64::try_from(going).unwrap_or(i64::MAX);
        pipe.cmd("HSET")
            .arg(&self.keys.info)
            .arg("last_seen_ms")
            .arg(now_ms())
            .arg("read")
            .arg(m.read.get())
            .arg("forwarded")
            .arg(m.forwarded.get() + going as u64)
            .arg("buffered")
            .arg((m.buffered.get() - going_i).max(0))
            .arg("dropped")
            .arg(m.dropped.get())
            .ignore();
    }
}
