//! Which events a destination gets: its `events` and `meetings`, processed or `raw`, as a
//! hook with the same eventID, meetingID and getRaw would.

use std::{collections::HashSet, sync::Arc};

use crate::{
    config::destinations::{DestinationConfig, DestinationKind},
    event::{Event, Payload},
};

/// One destination's choice of events, and where its messages go.
#[derive(Debug)]
pub(super) struct Route {
    pub(super) name: String,
    pub(super) kind: DestinationKind,
    /// The target with its placeholders.
    pub(super) target: String,
    events: Option<HashSet<String>>,
    meetings: Option<HashSet<String>>,
    raw: bool,
    /// Whether plugins see its messages (their queue entries then carry what plugins read).
    pub(super) plugins: bool,
    pub(super) max_queue: usize,
}

impl Route {
    /// The route of a (validated) destination.
    pub(super) fn of(d: &DestinationConfig) -> Option<Self> {
        Some(Self {
            name: d.name.clone(),
            kind: d.kind()?,
            target: d.target.clone(),
            events: d.events.as_ref().map(|e| e.iter().cloned().collect()),
            meetings: d.meetings.as_ref().map(|m| m.iter().cloned().collect()),
            raw: d.raw,
            plugins: !d.plugins.is_empty(),
            max_queue: d.max_queue,
        })
    }

    /// What this destination gets of `event`: the processed event or the bus message, or
    /// nothing when it does not want the event.
    pub(super) fn body_of<'e>(&self, event: &'e Event) -> Option<&'e Arc<Payload>> {
        // Kept from hooks by `[delivery]`'s lists: kept from destinations too.
        if event.filtered {
            return None;
        }
        let named = self.events.as_ref().map(|e| e.contains(&event.id));
        if named == Some(false) || (event.named_only && named.is_none()) {
            return None;
        }
        if let Some(meetings) = &self.meetings {
            let mid = event.external_meeting_id.as_deref()?;
            if !meetings.contains(mid) {
                return None;
            }
        }
        event.payload(self.raw)
    }

    /// Whether it gets bus messages.
    pub(super) fn raw(&self) -> bool {
        self.raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::secret::SecretUrl;

    fn event(id: &str, meeting: Option<&str>) -> Event {
        let mut e = Event::of_payload(0, id, Arc::new(Payload::new("{}")));
        e.external_meeting_id = meeting.map(String::from);
        e.raw = Some(Arc::new(Payload::new("raw")));
        e
    }

    fn route(events: Option<&[&str]>, meetings: Option<&[&str]>, raw: bool) -> Route {
        let list = |l: Option<&[&str]>| l.map(|l| l.iter().map(|s| s.to_string()).collect());
        Route::of(&DestinationConfig {
            name: "d".into(),
            url: SecretUrl::new("nats://h"),
            target: "t".into(),
            events: list(events),
            meetings: list(meetings),
            raw,
            ..DestinationConfig::default()
        })
        .expect("a route")
    }

    #[test]
    fn events_and_meetings_choose_as_a_hooks_would() {
        let all = route(None, None, false);
        assert_eq!(
            all.body_of(&event("user-joined", Some("m")))
                .map(|p| p.text()),
            Some("{}")
        );
        let mut beyond = event("breakout-room-started", Some("m"));
        beyond.named_only = true;
        assert!(all.body_of(&beyond).is_none(), "named only");
        let some = route(Some(&["breakout-room-started"]), Some(&["m"]), false);
        assert!(some.body_of(&beyond).is_some());
        assert!(some.body_of(&event("user-joined", Some("m"))).is_none());
        let meeting = route(None, Some(&["m"]), false);
        assert!(
            meeting
                .body_of(&event("user-joined", Some("other")))
                .is_none()
        );
        assert!(meeting.body_of(&event("user-joined", None)).is_none());
        let mut filtered = event("user-joined", Some("m"));
        filtered.filtered = true;
        assert!(all.body_of(&filtered).is_none());
        let raw = route(None, None, true);
        assert_eq!(
            raw.body_of(&event("user-joined", Some("m")))
                .map(|p| p.text()),
            Some("raw")
        );
        let mut made = event("user-left", Some("m"));
        made.raw = None;
        assert!(raw.body_of(&made).is_none(), "nothing but bus messages");
    }
}
