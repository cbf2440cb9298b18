//! What plugins are told of a meeting (the `meeting` import of `wit/relay.wit` 0.2.0): the
//! `meeting` object of its `meeting-created` event without the passwords, and its `tenant`
//! (`docs/tenants.md`), kept with the meeting's mapping (in memory and in Redis) and attached
//! to each of its events.

use std::sync::Arc;

use serde_json::{Map, Value};

/// The keys of a `meeting-created` event's `meeting` object that plugins are told
/// ([`super::mapping::Mappings::facts`]): not the passwords, the dial-in number or the voice bridge.
const FACT_KEYS: [&str; 7] = [
    "internal-meeting-id",
    "external-meeting-id",
    "name",
    "is-breakout",
    "parent-id",
    "create-time",
    "metadata",
];

/// Facts above this size keep no `metadata`.
const MAX_FACTS: usize = 64 << 10;

/// The tenant a meeting was created for, as its `create` call's metadata says (Scalelite
/// adds `meta_tenant-id`, and since 1.6.10 `meta_tenant-name`); which tenant of the relay's
/// that is, is for the tenants' view to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeetingTenant {
    pub(crate) id: Option<String>,
    pub(crate) name: Option<String>,
}

impl MeetingTenant {
    /// From a `meeting` object's `metadata`; `None` when it names no tenant.
    fn of_meeting(meeting: &Map<String, Value>) -> Option<Self> {
        let metadata = meeting.get("metadata")?;
        let field = |k: &str| {
            metadata
                .get(k)
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
                .map(String::from)
        };
        let t = Self {
            id: field("tenant-id"),
            name: field("tenant-name"),
        };
        (t.id.is_some() || t.name.is_some()).then_some(t)
    }

    /// From a meeting's facts (as [`meeting_facts`] wrote them, in memory or in the store).
    pub fn of_facts(facts: &str) -> Option<Self> {
        let v: Value = serde_json::from_str(facts).ok()?;
        let t = v.get("tenant")?;
        let field = |k: &str| t.get(k).and_then(Value::as_str).map(String::from);
        Some(Self {
            id: field("id"),
            name: field("name"),
        })
    }
}

/// What plugins are told of a meeting, from the `meeting` object of its `meeting-created`;
/// `tenant` (`{"id", "name"}`) when its metadata names one.
pub(crate) fn meeting_facts(meeting: &Map<String, Value>) -> Arc<str> {
    let mut facts = Map::new();
    for k in FACT_KEYS {
        if let Some(v) = meeting.get(k) {
            facts.insert(k.into(), v.clone());
        }
    }
    if let Some(t) = MeetingTenant::of_meeting(meeting) {
        facts.insert(
            "tenant".into(),
            serde_json::json!({"id": t.id, "name": t.name}),
        );
    }
    let mut text = Value::Object(facts.clone()).to_string();
    if text.len() > MAX_FACTS {
        tracing::warn!(
            bytes = text.len(),
            "a meeting's metadata is too large for plugins; they see the meeting without it"
        );
        facts.remove("metadata");
        text = Value::Object(facts).to_string();
    }
    text.into()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::event::{
        mapping::Mappings,
        process::{EventFilter, Processor},
    };

    fn created(metadata: Value, breakout: bool) -> Arc<str> {
        json!({"envelope": {"name": "MeetingCreatedEvtMsg"}, "core": {"body": {"props": {
            "meetingProp": {"intId": "m", "extId": "ext", "name": "Class", "isBreakout": breakout},
            "breakoutProps": {"parentId": "p"}, "durationProps": {"createdTime": 5},
            "password": {"moderatorPass": "secret-mp", "viewerPass": "secret-ap"},
            "recordProp": {}, "voiceProp": {"voiceConf": "7", "dialNumber": "555"}, "usersProp": {},
            "metadataProp": {"metadata": metadata}}}}})
        .to_string()
        .into()
    }

    #[test]
    fn every_event_of_a_created_meeting_carries_its_facts_without_passwords() {
        let mut p = Processor::new(Mappings::new(86_400_000, false), EventFilter::default());
        let out = p
            .process(
                &created(json!({"bbb-origin-server-name": "lms.acme"}), true),
                1,
            )
            .expect("created");
        let joined: Arc<str> =
            json!({"envelope": {"name": "UserJoinedMeetingEvtMsg", "routing": {"meetingId": "m"}},
            "core": {"header": {"name": "UserJoinedMeetingEvtMsg", "meetingId": "m", "userId": "u"},
                     "body": {"extId": "x", "name": "A"}}})
            .to_string()
            .into();
        let joins = p.process(&joined, 2).expect("joined");
        for e in out.iter().chain(&joins) {
            let facts: Value =
                serde_json::from_str(e.meeting.as_deref().expect("facts")).expect("JSON");
            assert_eq!(
                facts["metadata"]["bbb-origin-server-name"], "lms.acme",
                "{}",
                e.id
            );
            assert_eq!(facts["is-breakout"], true);
            assert_eq!(facts["parent-id"], "p");
            assert_eq!(facts["name"], "Class");
            let text = facts.to_string();
            for kept_out in ["secret-mp", "secret-ap", "555"] {
                assert!(!text.contains(kept_out), "{text}");
            }
        }
        // Another meeting, never seen created: no facts.
        let other = joined.replace(r#""meetingId":"m""#, r#""meetingId":"n""#);
        let out = p.process(&Arc::from(other), 3).expect("joined");
        assert!(out.iter().all(|e| e.meeting.is_none()));
    }

    #[test]
    fn the_tenant_of_the_metadata_is_a_fact_of_its_own() {
        let mut p = Processor::new(Mappings::new(86_400_000, false), EventFilter::default());
        let out = p
            .process(
                &created(json!({"tenant-id": "u-1", "tenant-name": "acme"}), false),
                1,
            )
            .expect("created");
        let facts = out[0].meeting.as_deref().expect("facts");
        let v: Value = serde_json::from_str(facts).expect("JSON");
        assert_eq!(v["tenant"], json!({"id": "u-1", "name": "acme"}));
        let t = MeetingTenant::of_facts(facts).expect("tenant");
        assert_eq!(t.id.as_deref(), Some("u-1"));
        assert_eq!(out[0].tenant.as_deref(), Some(&t));
        let mut p = Processor::new(Mappings::new(86_400_000, false), EventFilter::default());
        let out = p
            .process(&created(json!({"tenant-id": "u-2"}), false), 1)
            .expect("created");
        let facts = out[0].meeting.as_deref().expect("facts");
        assert_eq!(
            MeetingTenant::of_facts(facts),
            Some(MeetingTenant {
                id: Some("u-2".into()),
                name: None
            })
        );
        let mut p = Processor::new(Mappings::new(86_400_000, false), EventFilter::default());
        let out = p
            .process(&created(json!({"x": "y"}), false), 1)
            .expect("created");
        assert!(out[0].tenant.is_none());
        assert!(MeetingTenant::of_facts(out[0].meeting.as_deref().expect("facts")).is_none());
    }

    #[test]
    fn metadata_too_large_is_left_out() {
        let mut meeting = Map::new();
        meeting.insert("name".into(), "Big".into());
        meeting.insert("metadata".into(), json!({"blob": "x".repeat(MAX_FACTS)}));
        let facts: Value = serde_json::from_str(&meeting_facts(&meeting)).expect("JSON");
        assert_eq!(facts, json!({"name": "Big"}));
    }
}
