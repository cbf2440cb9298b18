//! The payloads of shared records' slots read back by the pagers, held while any queue entry
//! refers to them, so that a record shared by many hooks is read and held once; and stored entries
//! made queue entries with them ([`resolve`]).

use crate::base::ids::HookId;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, Weak},
};

use super::{
    hook_queue::PAGE,
    journal::{self, Entry, SharedAt, Stored, StoredBody},
};
use crate::{base::sources::SourceTable, event::Payload, store_conn::StoreConn};

/// Payloads read back so far, by record and slot; entries hold the strong references.
/// Records are read one pager at a time, so that a thousand hooks starting together read each
/// record once, not once each.
#[derive(Default)]
pub(crate) struct SharedPayloads {
    known: Mutex<HashMap<SharedAt, Weak<Payload>>>,
    pub(super) reading: tokio::sync::Mutex<()>,
}

impl SharedPayloads {
    pub(super) fn get(&self, shared: SharedAt) -> Option<Arc<Payload>> {
        self.lock().get(&shared).and_then(Weak::upgrade)
    }

    pub(super) fn insert(&self, shared: SharedAt, payload: &Arc<Payload>) {
        let mut map = self.lock();
        if map.len() > 4 * PAGE && map.len().is_power_of_two() {
            map.retain(|_, w| w.strong_count() > 0);
        }
        map.insert(shared, Arc::downgrade(payload));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SharedAt, Weak<Payload>>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Turns stored entries into queue entries, reading the shared records not in memory yet.
/// Entries whose payload is gone are removed from Redis (and logged).
pub(super) async fn resolve(
    mut conn: StoreConn,
    hook: HookId,
    page: &[Stored],
    shared: &SharedPayloads,
    sources: &SourceTable,
) -> Result<Vec<Entry>, redis::RedisError> {
    // Payloads of this page, held from here on so that none can go in between.
    let mut held: HashMap<SharedAt, Arc<Payload>> = HashMap::new();
    let take_known = |held: &mut HashMap<SharedAt, Arc<Payload>>| {
        let mut missing = Vec::new();
        for s in page {
            if let StoredBody::Shared(r, k) = s.body
                && !held.contains_key(&(r, k))
            {
                let r = (r, k);
                match shared.get(r) {
                    Some(p) => {
                        held.insert(r, p);
                    }
                    None => missing.push(r),
                }
            }
        }
        missing.sort_unstable();
        missing.dedup();
        missing
    };
    if !take_known(&mut held).is_empty() {
        let _one = shared.reading.lock().await;
        // Another pager may have read some meanwhile.
        let missing = take_known(&mut held);
        let texts = journal::read_records(&mut conn, &missing).await?;
        for (r, text) in missing.iter().zip(texts) {
            if let Some(t) = text {
                let p = Arc::new(Payload::new(t));
                shared.insert(*r, &p);
                held.insert(*r, p);
            }
        }
    }
    let mut entries = Vec::with_capacity(page.len());
    let mut unusable = Vec::new();
    for s in page {
        let (payload, shared_ref) = match &s.body {
            StoredBody::Inline(t) => (Arc::new(Payload::new(t.as_str())), None),
            StoredBody::Shared(r, k) => match held.get(&(*r, *k)) {
                Some(p) => (p.clone(), Some((*r, *k))),
                None => {
                    unusable.push(s.removal());
                    continue;
                }
            },
            StoredBody::Unreadable => {
                unusable.push(s.removal());
                continue;
            }
        };
        let source = sources.stored(s.source.as_deref());
        entries.push(Entry {
            ts: s.ts,
            payload,
            event_id: s.event_id.clone(),
            arrived: None,
            shared: shared_ref.map(|(r, _)| r),
            slot: shared_ref.map_or(0, |(_, k)| k),
            source,
            chain: s.chain.clone(),
            original: s.original.and_then(std::num::NonZeroU64::new),
            trace: s.trace.map(Box::new),
        });
    }
    if !unusable.is_empty() {
        tracing::warn!(
            hook_id = hook.0,
            callbacks = unusable.len(),
            "queued callbacks without a readable payload were removed"
        );
        journal::remove(&mut conn, hook, &unusable).await?;
    }
    Ok(entries)
}
