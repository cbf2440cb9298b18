//! One batch's callbacks as queue entries, planned without I/O: a payload that several
//! callbacks carry becomes one shared record (stored once, each entry naming it), the others
//! stay inline; each entry gets its event id text (one per event), its arrival time and its
//! estimated bytes in Redis for the budget.

use crate::base::ids::RecordRef;

use std::{collections::HashMap, sync::Arc, time::Instant};

use super::{budget, journal::Entry};
use crate::{event::Payload, hooks::Hook, route::Callback};

/// What a batch comes to.
pub(crate) struct Plan {
    /// Each callback's hook, entry and estimated bytes in Redis, in the batch's order.
    pub(super) batch: Vec<(Arc<Hook>, Entry, u64)>,
    /// Shared records: reference, payload, how many entries refer to it.
    pub(super) records: Vec<(RecordRef, Arc<Payload>, usize)>,
}

/// Plans `callbacks` (`arrivals[i]`: when the batch's message `i` came off the bus). With
/// `share`, a payload carried by several callbacks (the same `Arc`) becomes a shared record
/// whose reference `next_shared` gives; without (on a cluster, where a record would sit in
/// another slot than the entries that release it) every entry holds its payload.
pub(crate) fn plan(
    callbacks: Vec<Callback>,
    arrivals: &[Instant],
    share: bool,
    mut next_shared: impl FnMut() -> RecordRef,
) -> Plan {
    // Keyed by the payload's address: a callback's payload is shared by `Arc`.
    let mut uses: HashMap<*const Payload, (usize, Option<RecordRef>)> = HashMap::new();
    if share {
        for c in &callbacks {
            uses.entry(Arc::as_ptr(&c.payload)).or_default().0 += 1;
        }
    }
    let mut records = Vec::new();
    // One event id text per event, shared by its callbacks.
    let mut event_id: Option<(*const crate::event::Event, Arc<str>)> = None;
    let batch = callbacks
        .into_iter()
        .map(|c| {
            let (shared, sharers) = match uses.get_mut(&Arc::as_ptr(&c.payload)) {
                Some((n, s)) if *n > 1 => {
                    let n = *n;
                    let r = *s.get_or_insert_with(|| {
                        let r = next_shared();
                        records.push((r, c.payload.clone(), n));
                        r
                    });
                    (Some(r), Some(n))
                }
                _ => (None, None),
            };
            let cost = budget::cost(&c.payload, sharers)
                + c.chain.as_ref().map_or(0, |d| d.stored_len() as u64);
            let id = match &event_id {
                Some((e, id)) if std::ptr::eq(*e, Arc::as_ptr(&c.event)) => id.clone(),
                _ => {
                    let id: Arc<str> = c.event.id.as_str().into();
                    event_id = Some((Arc::as_ptr(&c.event), id.clone()));
                    id
                }
            };
            let entry = Entry {
                ts: c.ts,
                payload: c.payload,
                event_id: id,
                arrived: arrivals.get(c.message).copied(),
                shared,
                source: c.event.source,
                chain: c.chain.map(Box::new),
                original: c.original.and_then(std::num::NonZeroU64::new),
                trace: c.trace.map(Box::new),
            };
            (c.hook, entry, cost)
        })
        .collect();
    Plan { batch, records }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::{HookId, RecordRef};
    use crate::event::Event;

    fn hook(id: u64) -> Arc<Hook> {
        Arc::new(Hook {
            id: HookId(id),
            callback_url: format!("http://h/{id}"),
            meeting_id: None,
            event_ids: None,
            get_raw: false,
            permanent: false,
            tenant: None,
            disabled: None,
            signing: None,
        })
    }

    fn event(id: &str, text: &str) -> Arc<Event> {
        Arc::new(Event {
            source: 0,
            id: id.into(),
            internal_meeting_id: None,
            external_meeting_id: None,
            processed: Arc::new(Payload::new(text.to_string())),
            raw: None,
            meeting: None,
            tenant: None,
            filtered: false,
            named_only: false,
        })
    }

    fn callback(hook_id: u64, event: &Arc<Event>, ts: u64, message: usize) -> Callback {
        Callback {
            hook: hook(hook_id),
            event: event.clone(),
            payload: event.processed.clone(),
            ts,
            message,
            chain: None,
            original: None,
            trace: None,
        }
    }

    #[test]
    fn a_payload_several_hooks_get_is_one_record_the_others_inline() {
        let (joined, left) = (
            event("user-joined", &"j".repeat(400)),
            event("user-left", "l"),
        );
        let callbacks = vec![
            callback(1, &joined, 10, 0),
            callback(2, &joined, 11, 0),
            callback(3, &joined, 12, 0),
            callback(1, &left, 13, 1),
        ];
        let arrivals = [Instant::now(), Instant::now()];
        let mut next = 100;
        let Plan { batch, records } = plan(callbacks, &arrivals, true, || {
            next += 1;
            RecordRef(next)
        });
        assert_eq!(records.len(), 1);
        assert_eq!(
            (records[0].0, records[0].2),
            (RecordRef(101), 3),
            "one record, three refs"
        );
        let shared: Vec<Option<u64>> = batch
            .iter()
            .map(|(_, e, _)| e.shared.map(|r| r.0))
            .collect();
        assert_eq!(shared, [Some(101), Some(101), Some(101), None]);
        let hooks: Vec<u64> = batch.iter().map(|(h, _, _)| h.id.0).collect();
        assert_eq!(hooks, [1, 2, 3, 1], "the batch's order");
        let costs: Vec<u64> = batch.iter().map(|(_, _, c)| *c).collect();
        let each = budget::ENTRY_OVERHEAD;
        assert_eq!(costs, [each + 133, each + 133, each + 133, each + 1]);
        assert!(
            Arc::ptr_eq(&batch[0].1.event_id, &batch[2].1.event_id),
            "one id text"
        );
        assert_eq!(&*batch[3].1.event_id, "user-left");
        assert_eq!(batch[3].1.arrived, Some(arrivals[1]));
    }

    #[test]
    fn without_sharing_every_entry_holds_its_payload() {
        let joined = event("user-joined", "j");
        let callbacks = vec![callback(1, &joined, 10, 0), callback(2, &joined, 11, 5)];
        let Plan { batch, records } = plan(callbacks, &[], false, || unreachable!());
        assert!(records.is_empty());
        assert!(batch.iter().all(|(_, e, _)| e.shared.is_none()));
        assert_eq!(batch[1].1.arrived, None, "no arrival known for message 5");
    }
}
