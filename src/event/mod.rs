//! Events: [`decode`] turns a bus message into a [`decode::Message`], [`catalogue`] maps it to a
//! processed webhook event, [`mapping`] keeps the internal -> external id tables those events
//! need (persisted by [`persist`]) with what plugins are told of each meeting ([`facts`]), and
//! [`process`] runs them for one message, with the state changes and synthesized events;
//! [`schema`] describes each processed event as a JSON Schema.

mod catalogue;
mod decode;
mod facts;
mod mapping;
pub(crate) mod persist;
mod process;
#[cfg(test)]
mod proptests;
pub mod schema;

pub use catalogue::OUTPUT_IDS;
pub(crate) use catalogue::{ABOUT_HOOKS, Mapped};
pub(crate) use decode::{Message, flag, message_name};
pub use mapping::Mappings;
pub use process::{EventFilter, Processor};
pub(crate) use process::{Observer, Skip};

use std::sync::{Arc, OnceLock};

use crate::base::form::form_encode;

/// A text sent to hooks, with its form encoding computed once and shared by every hook.
#[derive(Debug)]
pub struct Payload {
    text: Arc<str>,
    encoded: OnceLock<String>,
}

impl Payload {
    pub fn new(text: impl Into<Arc<str>>) -> Self {
        Self {
            text: text.into(),
            encoded: OnceLock::new(),
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text form-encoded (`application/x-www-form-urlencoded`), computed on first use.
    pub fn form_encoded(&self) -> &str {
        self.encoded.get_or_init(|| form_encode(&self.text))
    }
}

/// One processed event, ready for matching and delivery; shared (`Arc`) by every hook it goes to.
#[derive(Debug)]
pub struct Event {
    /// The source (conference server) whose bus message made it.
    pub source: crate::base::sources::SourceId,
    /// The processed id, e.g. `user-joined`.
    pub id: String,
    pub internal_meeting_id: Option<String>,
    /// Used to match meeting-bound hooks.
    pub external_meeting_id: Option<String>,
    /// The processed event JSON (what normal hooks get).
    pub processed: Arc<Payload>,
    /// The bus message exactly as received (what getRaw hooks get), on the first event a message
    /// makes only: events the relay synthesizes (`user-left` at meeting end, the raise-hand of
    /// an emoji change) have none, so a raw hook gets each bus message at most once and nothing
    /// but bus messages.
    pub raw: Option<Arc<Payload>>,
    /// What plugins are told of the event's meeting (JSON, from its `meeting-created`, kept in
    /// the store); `None` when the relay did not see the meeting created.
    pub meeting: Option<Arc<str>>,
    /// The tenant its meeting was created for, as the meeting's facts say (`docs/tenants.md`).
    pub tenant: Option<Arc<facts::MeetingTenant>>,
    /// Kept from hooks by `[delivery]`'s include / exclude lists, and made only for the other
    /// outputs (xAPI), which see every event as the reference's do.
    pub filtered: bool,
    /// Goes only to hooks whose eventID names it: an event beyond the reference's catalogue
    /// (`[events] beyond_reference = false`) or about a hook.
    pub named_only: bool,
}

impl Event {
    /// An event of no meeting that is only its processed payload (a callback sent again, an
    /// event about a hook).
    pub fn of_payload(
        source: crate::base::sources::SourceId,
        id: &str,
        processed: Arc<Payload>,
    ) -> Self {
        Self {
            source,
            id: id.to_string(),
            internal_meeting_id: None,
            external_meeting_id: None,
            processed,
            raw: None,
            meeting: None,
            tenant: None,
            filtered: false,
            named_only: false,
        }
    }

    /// What a hook gets: the bus message for a getRaw hook (none for a synthesized event), else
    /// the processed event.
    pub fn payload(&self, get_raw: bool) -> Option<&Arc<Payload>> {
        if get_raw {
            self.raw.as_ref()
        } else {
            Some(&self.processed)
        }
    }
}
