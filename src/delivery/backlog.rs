//! Recovery of one hook's queue after a restart, a page at a time: its stream is read up to
//! the last id written before the start, [`PAGE`] entries whenever the worker runs low, while
//! the bus is already being processed (fresh entries wait behind the backlog). Shared payload
//! records are read once and shared in memory by every hook whose pages refer to them.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, Weak},
};

use redis::aio::ConnectionManager;
use tokio_util::sync::CancellationToken;

use super::{
    hook_queue::{HookQueue, PAGE},
    journal::{self, Entry, Stored, StoredBody},
};
use crate::{event::Payload, shutdown::retry_until_ok};

/// Payloads read back so far, by record reference; entries hold the strong references.
#[derive(Default)]
pub struct SharedPayloads(Mutex<HashMap<u64, Weak<Payload>>>);

impl SharedPayloads {
    fn get(&self, shared: u64) -> Option<Arc<Payload>> {
        self.lock().get(&shared).and_then(Weak::upgrade)
    }

    fn insert(&self, shared: u64, payload: &Arc<Payload>) {
        let mut map = self.lock();
        if map.len() > 4 * PAGE && map.len().is_power_of_two() {
            map.retain(|_, w| w.strong_count() > 0);
        }
        map.insert(shared, Arc::downgrade(payload));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Weak<Payload>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Pages hook `hook`'s stream (ids up to `until`) into `queue` until it is read whole, the
/// queue closes or the relay stops.
pub async fn page_in(
    conn: ConnectionManager,
    hook: u64,
    until: u64,
    queue: Arc<HookQueue>,
    shared: Arc<SharedPayloads>,
    token: CancellationToken,
) {
    let mut after = None;
    loop {
        while queue.backlog_len() >= PAGE / 2 {
            tokio::select! {
                () = queue.wants_page.notified() => {}
                () = token.cancelled() => return,
            }
            if queue.is_closed() {
                return;
            }
        }
        if queue.is_closed() {
            return;
        }
        let page = retry_until_ok(&token, "read a hook's queue", || {
            let mut c = conn.clone();
            async move { journal::read_page(&mut c, hook, after, until, PAGE).await }
        })
        .await;
        let Some(page) = page else { return };
        let last = page.len() < PAGE;
        after = page.last().map(|s| s.ts).or(after);
        let entries = retry_until_ok(&token, "read queued payloads", || {
            resolve(conn.clone(), hook, &page, &shared)
        })
        .await;
        let Some(entries) = entries else { return };
        queue.add_page(entries, last);
        if last {
            return;
        }
    }
}

/// Turns stored entries into queue entries, reading the shared records not in memory yet.
/// Entries whose payload is gone are removed from Redis (and logged).
async fn resolve(
    mut conn: ConnectionManager,
    hook: u64,
    page: &[Stored],
    shared: &SharedPayloads,
) -> Result<Vec<Entry>, redis::RedisError> {
    let mut missing: Vec<u64> = page
        .iter()
        .filter_map(|s| match s.body {
            StoredBody::Shared(r) if shared.get(r).is_none() => Some(r),
            _ => None,
        })
        .collect();
    missing.sort_unstable();
    missing.dedup();
    let texts = journal::read_records(&mut conn, &missing).await?;
    // Payloads of this page, kept alive by its entries.
    let mut held: HashMap<u64, Arc<Payload>> = HashMap::new();
    for (r, text) in missing.iter().zip(texts) {
        if let Some(t) = text {
            let p = Arc::new(Payload::new(t));
            shared.insert(*r, &p);
            held.insert(*r, p);
        }
    }
    let mut entries = Vec::with_capacity(page.len());
    let mut unusable = Vec::new();
    for s in page {
        let (payload, shared_ref) = match &s.body {
            StoredBody::Inline(t) => (Arc::new(Payload::new(t.as_str())), None),
            StoredBody::Shared(r) => {
                let found = held.get(r).cloned().or_else(|| shared.get(*r));
                match found {
                    Some(p) => {
                        held.insert(*r, p.clone());
                        (p, Some(*r))
                    }
                    None => {
                        unusable.push((s.ts, Some(*r)));
                        continue;
                    }
                }
            }
            StoredBody::Unreadable => {
                unusable.push((s.ts, None));
                continue;
            }
        };
        entries.push(Entry {
            ts: s.ts,
            payload,
            event_id: s.event_id.clone(),
            arrived: None,
            shared: shared_ref,
        });
    }
    if !unusable.is_empty() {
        tracing::warn!(
            hook_id = hook,
            callbacks = unusable.len(),
            "queued callbacks without a readable payload were removed"
        );
        journal::remove(&mut conn, hook, &unusable).await?;
    }
    Ok(entries)
}
