//! The payloads of shared records read back by the pagers, held while any queue entry refers
//! to them, so that a record shared by many hooks is read and held once.

use crate::base::ids::RecordRef;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, Weak},
};

use super::hook_queue::PAGE;
use crate::event::Payload;

/// Payloads read back so far, by record reference; entries hold the strong references.
/// Records are read one pager at a time, so that a thousand hooks starting together read each
/// record once, not once each.
#[derive(Default)]
pub struct SharedPayloads {
    known: Mutex<HashMap<RecordRef, Weak<Payload>>>,
    pub(super) reading: tokio::sync::Mutex<()>,
}

impl SharedPayloads {
    pub(super) fn get(&self, shared: RecordRef) -> Option<Arc<Payload>> {
        self.lock().get(&shared).and_then(Weak::upgrade)
    }

    pub(super) fn insert(&self, shared: RecordRef, payload: &Arc<Payload>) {
        let mut map = self.lock();
        if map.len() > 4 * PAGE && map.len().is_power_of_two() {
            map.retain(|_, w| w.strong_count() > 0);
        }
        map.insert(shared, Arc::downgrade(payload));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RecordRef, Weak<Payload>>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }
}
