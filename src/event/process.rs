//! Processes one bus message: decode, map, make the state changes the event implies (before
//! anything is dispatched and before the next message), synthesize the derived events of
//! bbb-events.md 2.6, and apply the global include / exclude filter. Pure apart from the mapping
//! writes it queues, so the same code serves the relay, tests and tools.

use std::sync::Arc;

use serde_json::Value;

use crate::base::sources::SourceId;

use super::{
    Event, Payload,
    catalogue::{self, MapError, Mapped},
    decode::{self, DecodeError},
    mapping::Mappings,
};

/// Why a bus message produced no event.
#[derive(Debug, thiserror::Error)]
pub enum Skip {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("not an event hookrelay delivers")]
    Unmapped,
    #[error(transparent)]
    Map(#[from] MapError),
}

impl Skip {
    /// A bounded metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Decode(e) => e.reason(),
            Self::Unmapped => "unmapped",
            Self::Map(e) => e.reason(),
        }
    }
}

/// The global filters of `[delivery]` (ids compared case-insensitively), and whether the
/// events beyond the reference go to every hook (`[events] beyond_reference`).
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    pub beyond_reference: bool,
}

impl EventFilter {
    /// The filter a configuration sets.
    pub fn of(config: &crate::config::Config) -> Self {
        Self {
            include: config.delivery.include_events.clone(),
            exclude: config.delivery.exclude_events.clone(),
            beyond_reference: config.events.beyond_reference,
        }
    }

    /// Whether an event `id` goes only to hooks whose eventID names it: one beyond the
    /// reference's catalogue, unless `beyond_reference` sends those to all.
    pub fn named_only(&self, id: &str) -> bool {
        !self.beyond_reference && catalogue::beyond_reference(id)
    }

    pub fn allows(&self, id: &str) -> bool {
        let listed = |list: &[String]| list.iter().any(|e| e.eq_ignore_ascii_case(id));
        (self.include.is_empty() || listed(&self.include)) && !listed(&self.exclude)
    }
}

/// What follows every message a processor maps to an event, filtered ones included (in the
/// relay, the conference state of the source). Defined here so that event depends on no one
/// who follows it.
pub trait Observer: Send + Sync {
    fn observe(&self, msg: &decode::Message, mapped: &Mapped, now_ms: u64);
}

/// The processing state of one source: id mappings, the filter, and (in the relay) who
/// follows its events.
pub struct Processor {
    pub(crate) mappings: Mappings,
    filter: EventFilter,
    observer: Option<Arc<dyn Observer>>,
    /// Marks every event made.
    source: SourceId,
    /// Events the filter keeps from hooks are made anyway, marked `filtered`.
    keep_filtered: bool,
}

impl Processor {
    pub fn new(mappings: Mappings, filter: EventFilter) -> Self {
        Self {
            mappings,
            filter,
            observer: None,
            source: 0,
            keep_filtered: false,
        }
    }

    /// Makes the events the filter keeps from hooks too, marked [`Event::filtered`] (for the
    /// xAPI output, which sees every event).
    pub fn keeping_filtered(mut self) -> Self {
        self.keep_filtered = true;
        self
    }

    /// Marks the events made as coming from `source`.
    pub fn with_source(mut self, source: SourceId) -> Self {
        self.source = source;
        self
    }

    /// Also shows `observer` every event (filtered ones included).
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The events one bus message yields, in dispatch order (possibly none after filtering).
    ///
    /// # Errors
    /// When the message is skipped: not decodable, not an event, or missing what its event needs.
    pub fn process(&mut self, raw: &Arc<str>, now_ms: u64) -> Result<Vec<Event>, Skip> {
        let msg = decode::decode(raw)?;
        let mapped = catalogue::map(&msg, &self.mappings)?.ok_or(Skip::Unmapped)?;
        let mid = mapped
            .meeting_field("internal-meeting-id")
            .map(String::from);
        let uid = mapped.user_id().map(String::from);
        if mapped.id != "meeting-ended"
            && let Some(mid) = &mid
        {
            self.mappings.touch(mid, now_ms);
        }
        let mut out = self.follow(&mapped, mid.as_deref(), uid.as_deref(), now_ms);
        if let Some(o) = &self.observer {
            o.observe(&msg, &mapped, now_ms);
        }
        // The message's own event carries it for raw hooks (after the users who left first).
        out.push(event(
            &mapped,
            catalogue::to_json(&mapped, now_ms),
            Some(raw.clone()),
        ));
        if mapped.id == "user-emoji-changed"
            && let (Some(mid), Some(uid)) = (mid.as_deref(), uid.as_deref())
            && let Some(raised) = self.emulate_raise_hand(&mapped, mid, uid)
        {
            out.push(raise_hand_changed(&mapped, raised, now_ms));
        }
        self.filter_and_mark(&mut out, mid.as_deref());
        Ok(out)
    }

    /// Makes the mapping changes the event implies (a meeting created, a user joined or left,
    /// a presenter or screen share changed); at a meeting's end, everyone still present
    /// leaves first: their `user-left` events, in order.
    fn follow(
        &mut self,
        mapped: &Mapped,
        mid: Option<&str>,
        uid: Option<&str>,
        now_ms: u64,
    ) -> Vec<Event> {
        let mut out = Vec::new();
        let m = &mut self.mappings;
        match (&*mapped.id, mid, uid) {
            ("meeting-created", Some(mid), _) => {
                if let Some(ext) = mapped.meeting_field("external-meeting-id") {
                    let facts = match mapped.attributes.get("meeting") {
                        Some(Value::Object(meeting)) => Some(super::facts::meeting_facts(meeting)),
                        _ => None,
                    };
                    m.meeting_created(mid, ext, facts, now_ms);
                }
            }
            ("user-joined", Some(mid), Some(uid)) => {
                if let Some(Value::Object(user)) = mapped.attributes.get("user") {
                    m.user_joined(mid, uid, user, now_ms);
                }
            }
            ("user-left", Some(mid), Some(uid)) => {
                m.user_left(mid, uid);
            }
            (
                id @ ("user-presenter-assigned" | "user-presenter-unassigned"),
                Some(mid),
                Some(uid),
            ) => {
                let on = id == "user-presenter-assigned";
                m.update_user(mid, uid, |u| u.user.set_presenter(on));
            }
            ("user-role-changed", Some(mid), Some(uid)) => {
                // The user's stored attributes carry the new role (a later user-left says it).
                if let Some(role) = mapped
                    .attributes
                    .get("user")
                    .and_then(|u| u.get("role"))
                    .and_then(Value::as_str)
                {
                    m.update_user(mid, uid, |u| u.user.set_role(role));
                }
            }
            (
                id @ ("meeting-screenshare-started" | "meeting-screenshare-stopped"),
                Some(mid),
                Some(uid),
            ) => {
                let on = id == "meeting-screenshare-started";
                m.update_user(mid, uid, |u| u.screenshare = on);
            }
            ("meeting-ended", Some(mid), _) => {
                // Everyone still present leaves first (bbb-events.md 2.6).
                for uid in m.users_of(mid) {
                    if let Some(entry) = m.user_left(mid, &uid) {
                        let mut attributes = serde_json::Map::new();
                        if let Some(meeting) = mapped.attributes.get("meeting") {
                            attributes.insert("meeting".into(), meeting.clone());
                        }
                        attributes.insert("user".into(), Value::Object(entry.user.to_map()));
                        let left = Mapped {
                            id: "user-left".into(),
                            attributes,
                            ts: None,
                        };
                        out.push(event(&left, catalogue::to_json(&left, now_ms), None));
                    }
                }
            }
            _ => {}
        }
        out
    }

    /// Applies the global filter to `out` (or marks what it keeps from hooks, when filtered
    /// events are kept), and marks every event with the source and the meeting's facts.
    fn filter_and_mark(&self, out: &mut Vec<Event>, mid: Option<&str>) {
        if self.keep_filtered {
            for e in out.iter_mut() {
                e.filtered = !self.filter.allows(&e.id);
            }
        } else {
            out.retain(|e| self.filter.allows(&e.id));
        }
        let facts = mid.and_then(|mid| self.mappings.facts(mid));
        let tenant = mid.and_then(|mid| self.mappings.tenant(mid));
        for e in out.iter_mut() {
            e.named_only = self.filter.named_only(&e.id);
            e.source = self.source;
            e.meeting = facts.cloned();
            e.tenant = tenant.cloned();
        }
    }

    /// Older servers raise a hand with the `raiseHand` emoji: `Some(new state)` when the hand
    /// went up or came down.
    fn emulate_raise_hand(&mut self, mapped: &Mapped, mid: &str, uid: &str) -> Option<bool> {
        let raising = mapped
            .attributes
            .get("user")
            .and_then(|u| u.get("emoji"))
            .and_then(Value::as_str)
            == Some("raiseHand");
        let changed = self.mappings.update_user(mid, uid, |u| {
            let was = u.raise_hand;
            u.raise_hand = raising;
            raising || was
        });
        // An unknown user's raised hand is still reported.
        changed.unwrap_or(raising).then_some(raising)
    }
}

/// The `user-raise-hand-changed` event an emoji change made (`raised`: the hand's new state).
fn raise_hand_changed(mapped: &Mapped, raised: bool, now_ms: u64) -> Event {
    let mut hand = mapped.clone();
    hand.id = "user-raise-hand-changed".into();
    hand.ts = Some(now_ms.into());
    if let Some(Value::Object(user)) = hand.attributes.get_mut("user") {
        user.shift_remove("emoji");
        user.insert("raise-hand".into(), raised.into());
    }
    event(&hand, catalogue::to_json(&hand, now_ms), None)
}

fn event(mapped: &Mapped, json: String, raw: Option<Arc<str>>) -> Event {
    Event {
        source: 0,
        id: mapped.id.to_string(),
        internal_meeting_id: mapped
            .meeting_field("internal-meeting-id")
            .map(String::from),
        external_meeting_id: mapped
            .meeting_field("external-meeting-id")
            .map(String::from),
        processed: Arc::new(Payload::new(json)),
        raw: raw.map(|r| Arc::new(Payload::new(r))),
        meeting: None,
        tenant: None,
        filtered: false,
        named_only: false,
    }
}

#[cfg(test)]
mod tests;
