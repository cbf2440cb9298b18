//! The processing stage's part in the events about hooks (the notices of `crate::delivery`):
//! between batches, it takes the notices the workers (of any instance) told, and queues each
//! as an event for the hooks that ask for it, stamped by the same per-hook clock as every
//! other callback, so that each queue keeps one writer.

use std::sync::Arc;

use super::stage::ProcessStage;
use crate::{
    base::time::now_ms,
    delivery::records,
    event::{Event, Payload},
    route::Callback,
};

/// Notices taken at once.
const AT_ONCE: usize = 64;

impl ProcessStage {
    /// Queues the events about hooks told, if any. `false` when the relay stopped first.
    pub(super) async fn hook_notices(&mut self) -> bool {
        let conn = self.dispatcher.conn();
        let read = records::notices_told(&conn, AT_ONCE);
        let Some(told) = self.take_inbox(read, "the events about hooks").await else {
            return true;
        };
        let snapshot = self.registry.load();
        let mut callbacks = Vec::new();
        for notice in told.iter().flatten() {
            let payload = Arc::new(Payload::new(notice.event_json()));
            let event = Arc::new(Event::of_payload(0, &notice.id, payload.clone()));
            for hook in snapshot.all().filter(|h| notice.goes_to(h)) {
                callbacks.push(Callback {
                    ts: self.router.stamp(hook.id, now_ms()),
                    hook: hook.clone(),
                    event: event.clone(),
                    payload: payload.clone(),
                    message: 0,
                    chain: None,
                    original: None,
                    trace: None,
                });
            }
        }
        self.queue_taken(
            callbacks,
            records::notices_taken(&conn, told.len()),
            "events about hooks",
        )
        .await
    }
}
