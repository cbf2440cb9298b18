//! The processing stage's part in `hookrelay redeliver`: between batches, it takes the
//! redeliveries asked for through the admin API (of any instance) and queues their kept
//! callbacks again for their hooks, in their original order, after what each hook has queued,
//! stamped by the same per-hook clock as every other callback, so that each queue keeps one
//! writer. A redelivered callback keeps its original body, event id and timestamp.

use std::sync::Arc;

use super::stage::ProcessStage;
use crate::{
    base::time::now_ms,
    delivery::records::{self, StoredBody},
    event::{Event, Payload},
    route::Callback,
};

/// Redeliveries taken at once.
const AT_ONCE: usize = 16;

impl ProcessStage {
    /// Queues the redeliveries asked for, if any. `false` when the relay stopped first.
    pub(super) async fn redeliver(&mut self) -> bool {
        let conn = self.dispatcher.conn();
        let read = records::redeliveries_asked(&conn, AT_ONCE);
        let Some(asked) = self.take_inbox(read, "the redeliveries asked for").await else {
            return true;
        };
        let snapshot = self.registry.load();
        let mut callbacks = Vec::new();
        for request in asked.iter().flatten() {
            let Some(hook) = snapshot.get(request.hook).cloned() else {
                tracing::warn!(
                    hook_id = request.hook.0,
                    "a redelivery for a hook removed meanwhile is dropped"
                );
                continue;
            };
            let found = match records::read_kept_ids(&conn, &request.url, &request.ids).await {
                Ok(f) => f,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the kept callbacks of a redelivery; asked again later");
                    return true;
                }
            };
            let mut queued = 0;
            for f in found {
                let StoredBody::Inline(text) = f.stored.body else {
                    continue;
                };
                let source = self.sources.stored(f.stored.source.as_deref());
                let payload = Arc::new(Payload::new(text));
                let event = Arc::new(Event::of_payload(
                    source,
                    &f.stored.event_id,
                    payload.clone(),
                ));
                callbacks.push(Callback {
                    ts: self.router.stamp(hook.id, now_ms()),
                    hook: hook.clone(),
                    event,
                    payload,
                    message: 0,
                    chain: f.stored.chain.map(|c| *c),
                    original: Some(f.stored.ts),
                    trace: None,
                });
                queued += 1;
            }
            tracing::info!(
                hook_id = hook.id.0,
                callbacks = queued,
                asked = request.ids.len(),
                "queued callbacks again for redelivery"
            );
            self.metrics.redelivered.inc_by(queued);
        }
        self.queue_taken(
            callbacks,
            records::redeliveries_taken(&conn, asked.len()),
            "redeliveries",
        )
        .await
    }

    /// The records `read` takes from an inbox, when this instance processes the bus and there
    /// are any; `None` otherwise, and when the store cannot be read now (they are taken at a
    /// later round).
    pub(super) async fn take_inbox<T>(
        &self,
        read: impl std::future::Future<Output = redis::RedisResult<Vec<Option<T>>>>,
        what: &str,
    ) -> Option<Vec<Option<T>>> {
        if self.fence.check_or_stop().is_err() {
            return None;
        }
        match read.await {
            Ok(records) if records.is_empty() => None,
            Ok(records) => Some(records),
            Err(e) => {
                tracing::debug!(error = %e, "cannot read {what}");
                None
            }
        }
    }

    /// Queues `callbacks`, made from records of an inbox, then drops those records with
    /// `taken` (a crash in between makes them again: at least once). `false` when the relay
    /// stopped first.
    pub(super) async fn queue_taken(
        &mut self,
        callbacks: Vec<Callback>,
        taken: impl std::future::Future<Output = redis::RedisResult<()>>,
        what: &str,
    ) -> bool {
        if !self
            .dispatcher
            .accept(redis::pipe(), None, callbacks, &[])
            .await
        {
            return false;
        }
        if let Err(e) = taken.await {
            tracing::warn!(error = %e, "cannot mark {what} as queued: they may be queued twice");
        }
        true
    }
}
