//! Running a case file: its lines in order through one mapper (at a fixed clock), the matcher
//! and the plugin chain, collecting for each case what came out for its hook.

use std::sync::Arc;

use serde_json::Value;

use super::{Case, CaseFile, HookSpec, Input, Outcome};
use crate::{
    base::ids::HookId,
    event::{Event, EventFilter, Mappings, Payload, Processor},
    hooks::{Hook, Registry, matcher, parse_event_ids},
    plugin_host::PluginSet,
    route::{self, MessageRouter},
};

/// One event the case's hook got, and what the chain did with it.
#[derive(Clone, Debug, PartialEq)]
pub struct Actual {
    pub event_id: String,
    pub outcome: Outcome,
}

/// A case run.
#[derive(Clone, Debug)]
pub struct CaseResult {
    pub case: Case,
    pub actual: Vec<Actual>,
}

/// The time the first line of a case file is processed at: 2023-11-14T22:13:20Z, plus one
/// millisecond a line.
const CLOCK: u64 = 1_700_000_000_000;

/// The hook a case goes to when it names none.
const DEFAULT_URL: &str = "http://receiver.test/hook";

/// Runs `file`'s lines in order through one mapper, the matcher and `plugins`. Every event goes
/// through the chain for every matching hook of the file (so a plugin that learns from events
/// sees them all), and each case collects what came out for its own hook.
pub fn run(file: &CaseFile, plugins: &PluginSet, filter: EventFilter) -> Vec<CaseResult> {
    let mut specs: Vec<HookSpec> = Vec::new();
    for case in &file.cases {
        if !specs.contains(&case.hook) {
            specs.push(case.hook.clone());
        }
    }
    let hooks = specs.iter().zip(1..).map(|(s, id)| Hook {
        id: HookId(id),
        callback_url: s.callback_url.clone().unwrap_or_else(|| DEFAULT_URL.into()),
        meeting_id: s.meeting_id.clone(),
        event_ids: s.event_id.as_deref().and_then(parse_event_ids),
        get_raw: s.get_raw,
        permanent: false,
        tenant: None,
        disabled: None,
        signing: None,
    });
    let registry = Registry::default();
    registry.replace_all(hooks);
    let snapshot = registry.load();
    // Events given as processed ones are marked as the processor marks those it makes.
    let marks = filter.clone();
    let mut router = MessageRouter::new(Processor::new(Mappings::new(u64::MAX, false), filter));
    let unplugged = PluginSet::default();
    let mut results = Vec::with_capacity(file.cases.len());
    for case in &file.cases {
        // A fixed time per line: events, timestamps and what plugins make of them are the
        // same at every run.
        let now = CLOCK + case.line as u64;
        router.at(now);
        let own = specs
            .iter()
            .position(|s| *s == case.hook)
            .map_or(HookId(0), |i| HookId(i as u64 + 1));
        let pairs: Vec<(Arc<Hook>, Arc<Event>, u64)> = match &case.input {
            Input::Message(m) => router
                .route(std::iter::once(m), &snapshot, &unplugged)
                .callbacks
                .into_iter()
                .map(|c| (c.hook, c.event, c.ts))
                .collect(),
            Input::Event(v) => {
                let mut event = processed_event(v, case.meeting.as_ref());
                event.named_only = marks.named_only(&event.id);
                let event = Arc::new(event);
                let ts = now;
                matcher::matching(&snapshot, matcher::Wanted::of(&event, None))
                    .filter(|h| !h.get_raw)
                    .map(|h| (h.clone(), event.clone(), ts))
                    .collect()
            }
        };
        let mut actual = Vec::new();
        for (hook, event, ts) in pairs {
            let outcome = outcome(plugins, &event, &hook, ts);
            if hook.id == own {
                actual.push(Actual {
                    event_id: event.id.clone(),
                    outcome,
                });
            }
        }
        results.push(CaseResult {
            case: case.clone(),
            actual,
        });
    }
    results
}

fn outcome(plugins: &PluginSet, event: &Arc<Event>, hook: &Hook, ts: u64) -> Outcome {
    let Some(before) = event.payload(hook.get_raw) else {
        return Outcome::Dropped;
    };
    match route::apply(plugins, event, hook, ts) {
        None => Outcome::Dropped,
        Some(after) if Arc::ptr_eq(&after, before) || after.text() == before.text() => {
            Outcome::Kept
        }
        Some(after) => Outcome::Replaced(
            serde_json::from_str(after.text()).unwrap_or_else(|_| after.text().into()),
        ),
    }
}

/// An event given processed: its id and meeting ids read from the JSON as the relay writes
/// them (`data.id`, `data.attributes.meeting`), with what plugins are told of its meeting.
fn processed_event(v: &Value, facts: Option<&Value>) -> Event {
    let data = &v["data"];
    let meeting = &data["attributes"]["meeting"];
    let text = |v: &Value| v.as_str().map(String::from);
    Event {
        source: 0,
        id: text(&data["id"]).unwrap_or_default(),
        internal_meeting_id: text(&meeting["internal-meeting-id"]),
        external_meeting_id: text(&meeting["external-meeting-id"]),
        processed: Arc::new(Payload::new(v.to_string())),
        raw: None,
        meeting: facts.map(|m| Arc::from(m.to_string())),
        tenant: None,
        filtered: false,
        named_only: false,
    }
}
