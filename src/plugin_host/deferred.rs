//! What a callback that waits for its plugins keeps of its event: the plugin chain runs when
//! the callback is sent (by its hook's worker, after the durable queue), so a slow plugin costs
//! only the hooks in its scope. The hook's own payload travels as the callback's payload; this
//! is the rest the chain shows a plugin.

use std::sync::Arc;

use crate::{
    base::sources::SourceId,
    event::{Event, Payload},
};

/// The event's fields the chain needs besides the hook's payload and the event id.
#[derive(Debug, Clone)]
pub struct Deferred {
    pub(crate) internal_meeting_id: Option<String>,
    pub(crate) external_meeting_id: Option<String>,
    /// The event's other form: the bus message for a processed hook (none for an event the
    /// relay synthesized), the processed event for a raw hook.
    pub(crate) other: Option<Arc<Payload>>,
    /// What plugins are told of the meeting ([`Event::meeting`]), as it was when the event
    /// arrived.
    pub(crate) meeting: Option<Arc<str>>,
}

impl Deferred {
    /// What `event` going to a hook (raw or not) keeps.
    pub fn of(event: &Event, get_raw: bool) -> Self {
        Self {
            internal_meeting_id: event.internal_meeting_id.clone(),
            external_meeting_id: event.external_meeting_id.clone(),
            other: if get_raw {
                Some(event.processed.clone())
            } else {
                event.raw.clone()
            },
            meeting: event.meeting.clone(),
        }
    }

    /// The event again, from the hook's `payload` and what was kept: what the chain is given.
    pub fn event(
        &self,
        id: &str,
        source: SourceId,
        payload: &Arc<Payload>,
        get_raw: bool,
    ) -> Event {
        let (processed, raw) = if get_raw {
            let processed = self.other.clone().unwrap_or_else(|| payload.clone());
            (processed, Some(payload.clone()))
        } else {
            (payload.clone(), self.other.clone())
        };
        Event {
            source,
            id: id.to_string(),
            internal_meeting_id: self.internal_meeting_id.clone(),
            external_meeting_id: self.external_meeting_id.clone(),
            processed,
            raw,
            meeting: self.meeting.clone(),
            // Matched already: plugins see the tenant in the meeting's facts.
            tenant: None,
            filtered: false,
            named_only: false,
        }
    }

    /// Bytes it adds to its callback's entry in Redis.
    pub fn stored_len(&self) -> usize {
        let len = |s: &Option<String>| s.as_ref().map_or(0, String::len);
        len(&self.internal_meeting_id)
            + len(&self.external_meeting_id)
            + self.other.as_ref().map_or(0, |p| p.text().len())
            + self.meeting.as_ref().map_or(0, |m| m.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(raw: Option<&str>) -> Event {
        Event {
            source: 1,
            id: "user-joined".into(),
            internal_meeting_id: Some("int".into()),
            external_meeting_id: Some("ext".into()),
            processed: Arc::new(Payload::new(r#"{"p":1}"#)),
            raw: raw.map(|r| Arc::new(Payload::new(r))),
            meeting: Some(r#"{"metadata":{"k":"v"}}"#.into()),
            tenant: None,
            filtered: false,
            named_only: false,
        }
    }

    #[test]
    fn the_event_comes_back_whole_for_raw_and_processed_hooks() {
        let e = event(Some(r#"{"r":1}"#));
        for get_raw in [false, true] {
            let payload = e.payload(get_raw).expect("payload").clone();
            let back = Deferred::of(&e, get_raw).event("user-joined", 1, &payload, get_raw);
            assert_eq!(back.processed.text(), e.processed.text());
            assert_eq!(
                back.raw.as_ref().map(|r| r.text().to_string()),
                Some(r#"{"r":1}"#.into())
            );
            assert_eq!(back.internal_meeting_id.as_deref(), Some("int"));
            assert_eq!(back.meeting, e.meeting);
            assert_eq!(back.external_meeting_id.as_deref(), Some("ext"));
            assert_eq!((back.source, back.id.as_str()), (1, "user-joined"));
        }
        let synthesized = event(None);
        let back = Deferred::of(&synthesized, false).event(
            "user-joined",
            1,
            &synthesized.processed,
            false,
        );
        assert!(back.raw.is_none());
    }
}
