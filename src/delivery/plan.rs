//! One batch's callbacks as queue entries, planned without I/O: a payload that several
//! callbacks carry is stored once, in a shared record that holds up to [`GROUP_PAYLOADS`]
//! such payloads of the batch (each entry names the record and its payload's slot), the
//! others stay inline; each entry gets its event id text (one per event), its arrival time and
//! its estimated bytes in Redis for the budget.
//!
//! A record holds several payloads so that a hook's delivered entries, which follow each
//! other, mostly release one record per write rather than one each (one `HINCRBY` in Redis
//! for all of them). It goes once none of its payloads is referred to; so that a hook that is
//! stuck does not hold many payloads it never gets, a record is bounded in payloads and bytes.

use crate::base::ids::RecordRef;

use std::{collections::HashMap, sync::Arc, time::Instant};

use super::{
    budget,
    journal::{Entry, SharedAt},
};
use crate::{event::Payload, hooks::Hook, route::Callback};

/// What a batch comes to.
pub(crate) struct Plan {
    /// Each callback's hook, entry and estimated bytes in Redis, in the batch's order.
    pub(super) batch: Vec<(Arc<Hook>, Entry, u64)>,
    /// Shared records: reference, payloads by slot, how many entries refer to it.
    pub(super) records: Vec<Group>,
}

/// One shared record: the payloads of its slots and how many entries refer to any of them.
pub(crate) struct Group {
    pub(super) shared: RecordRef,
    pub(super) payloads: Vec<Arc<Payload>>,
    pub(super) refs: usize,
    bytes: usize,
}

/// The most payloads one record holds.
pub(crate) const GROUP_PAYLOADS: usize = 16;
/// A record takes no further payload once its payloads reach this many bytes.
pub(crate) const GROUP_BYTES: usize = 16 << 10;

impl Group {
    fn is_full(&self) -> bool {
        self.payloads.len() >= GROUP_PAYLOADS || self.bytes >= GROUP_BYTES
    }
}

/// Plans `callbacks` (`arrivals[i]`: when the batch's message `i` came off the bus). With
/// `share`, a payload carried by several callbacks (the same `Arc`) goes in a slot of a shared
/// record whose reference `next_shared` gives; without (on a cluster, where a record would sit in
/// another slot than the entries that release it) every entry holds its payload.
pub(crate) fn plan(
    callbacks: Vec<Callback>,
    arrivals: &[Instant],
    share: bool,
    mut next_shared: impl FnMut() -> RecordRef,
) -> Plan {
    // Keyed by the payload's address: a callback's payload is shared by `Arc`.
    let mut uses: HashMap<*const Payload, (usize, Option<SharedAt>)> = HashMap::new();
    if share {
        for c in &callbacks {
            uses.entry(Arc::as_ptr(&c.payload)).or_default().0 += 1;
        }
    }
    let mut records: Vec<Group> = Vec::new();
    // One event id text per event, shared by its callbacks.
    let mut event_id: Option<(*const crate::event::Event, Arc<str>)> = None;
    let batch = callbacks
        .into_iter()
        .map(|c| {
            let (shared, sharers) = match uses.get_mut(&Arc::as_ptr(&c.payload)) {
                Some((n, s)) if *n > 1 => {
                    let n = *n;
                    let at = *s.get_or_insert_with(|| {
                        add_to_group(&mut records, &c.payload, n, &mut next_shared)
                    });
                    (Some(at), Some(n))
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
                shared: shared.map(|(r, _)| r),
                slot: shared.map_or(0, |(_, k)| k),
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

/// Puts `payload` (`refs` entries refer to it) in the last record, or in a new one when that is
/// full; returns the record and the payload's slot in it.
fn add_to_group(
    records: &mut Vec<Group>,
    payload: &Arc<Payload>,
    refs: usize,
    next_shared: &mut impl FnMut() -> RecordRef,
) -> SharedAt {
    if records.last().is_none_or(Group::is_full) {
        records.push(Group {
            shared: next_shared(),
            payloads: Vec::new(),
            refs: 0,
            bytes: 0,
        });
    }
    let last = records.len() - 1;
    let group = &mut records[last];
    let slot = group.payloads.len() as u16;
    group.payloads.push(payload.clone());
    group.refs += refs;
    group.bytes += payload.text().len();
    (group.shared, slot)
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
            (
                records[0].shared,
                records[0].payloads.len(),
                records[0].refs
            ),
            (RecordRef(101), 1, 3),
            "one record, one payload, three refs"
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
    fn shared_payloads_fill_a_record_slot_by_slot_up_to_its_bounds() {
        // 20 small events to hooks 1 and 2, then 3 big ones (9 KiB) to hooks 1 to 3.
        let small: Vec<Arc<Event>> = (0..20)
            .map(|i| event("user-joined", &format!("{i}")))
            .collect();
        let big: Vec<Arc<Event>> = (0..3)
            .map(|_| event("meeting-created", &"m".repeat(9 << 10)))
            .collect();
        let mut callbacks = Vec::new();
        let mut ts = 0;
        for e in &small {
            for h in [1, 2] {
                ts += 1;
                callbacks.push(callback(h, e, ts, 0));
            }
        }
        for e in &big {
            for h in [1, 2, 3] {
                ts += 1;
                callbacks.push(callback(h, e, ts, 0));
            }
        }
        let mut next = 0;
        let Plan { batch, records } = plan(callbacks, &[], true, || {
            next += 1;
            RecordRef(next)
        });
        let shape: Vec<(u64, usize, usize)> = records
            .iter()
            .map(|g| (g.shared.0, g.payloads.len(), g.refs))
            .collect();
        // 16 payloads fill the first record; the second takes 4 small ones and two big ones
        // (past 16 KiB: full); the last big one starts a third.
        assert_eq!(shape, [(1, 16, 32), (2, 6, 14), (3, 1, 3)]);
        let at: Vec<(Option<u64>, u16)> = batch
            .iter()
            .map(|(_, e, _)| (e.shared.map(|r| r.0), e.slot))
            .collect();
        assert_eq!(
            &at[..4],
            [(Some(1), 0), (Some(1), 0), (Some(1), 1), (Some(1), 1)]
        );
        assert_eq!(
            at[32],
            (Some(2), 0),
            "the 17th event: the second record's first slot"
        );
        assert_eq!(&at[at.len() - 3..], [(Some(3), 0); 3]);
        for (_, e, _) in &batch {
            let (Some(r), k) = (e.shared, usize::from(e.slot)) else {
                panic!("every payload here is shared")
            };
            let group = records.iter().find(|g| g.shared == r).expect("its record");
            assert!(
                Arc::ptr_eq(&group.payloads[k], &e.payload),
                "slot {k} of {r}"
            );
        }
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
