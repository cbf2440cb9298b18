//! Golden test cases for plugins (`hookrelay plugin test`), without Redis. A case file holds
//! one JSON object a line: a bus message (or a processed event), the hook it goes to, and
//! what must come out for that hook: each event the message makes for it `"kept"`,
//! `"dropped"` or `{"replaced": JSON}` (compared as JSON). Lines run in order through one
//! mapper, so earlier lines set up the meeting for later ones; a line that is only a bus
//! message (as `record` writes) sets up without checking, and `--update` turns it into a case.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::AuthoringError;
use crate::{
    base::ids::HookId,
    event::{
        Event, Payload,
        mapping::Mappings,
        process::{EventFilter, Processor},
    },
    hooks::{Hook, Registry, matcher, model::parse_event_ids},
    plugin_host::PluginSet,
    route::{self, Router},
};

/// The hook of a case, as `hooks/create` takes it; every key may be left out (a hook for every
/// meeting and event, getting processed events).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HookSpec {
    #[serde(
        rename = "callbackURL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub callback_url: Option<String>,
    #[serde(rename = "meetingID", default, skip_serializing_if = "Option::is_none")]
    pub meeting_id: Option<String>,
    #[serde(rename = "eventID", default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    #[serde(rename = "getRaw", default, skip_serializing_if = "std::ops::Not::not")]
    pub get_raw: bool,
}

/// What the chain did with one event for the case's hook.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Kept,
    Dropped,
    /// The JSON sent instead (a text that is not JSON is kept as a JSON string).
    Replaced(Value),
}

impl Outcome {
    fn parse(v: &Value) -> Result<Self, String> {
        match v {
            Value::String(s) if s == "kept" => Ok(Self::Kept),
            Value::String(s) if s == "dropped" => Ok(Self::Dropped),
            Value::Object(o) if o.len() == 1 && o.contains_key("replaced") => {
                Ok(Self::Replaced(o["replaced"].clone()))
            }
            other => Err(format!(
                "an expected outcome is \"kept\", \"dropped\" or {{\"replaced\": JSON}}, not {other}"
            )),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Self::Kept => "kept".into(),
            Self::Dropped => "dropped".into(),
            Self::Replaced(v) => serde_json::json!({ "replaced": v }),
        }
    }

    fn short(&self) -> String {
        match self {
            Self::Kept => "kept".into(),
            Self::Dropped => "dropped".into(),
            Self::Replaced(_) => "replaced".into(),
        }
    }
}

/// What a case feeds in.
#[derive(Clone, Debug)]
pub enum Input {
    /// A bus message, through the mapper.
    Message(Arc<str>),
    /// A processed event (`{"data": {...}}`), straight to the matcher and chain.
    Event(Value),
}

/// One line of a case file.
#[derive(Clone, Debug)]
pub struct Case {
    pub line: usize,
    pub name: Option<String>,
    pub input: Input,
    pub hook: HookSpec,
    /// `None`: set-up only, nothing checked.
    pub expect: Option<Vec<Outcome>>,
}

/// A parsed case file.
#[derive(Clone, Debug)]
pub struct CaseFile {
    pub path: PathBuf,
    pub cases: Vec<Case>,
}

const KEYS: [&str; 5] = ["name", "message", "event", "hook", "expect"];

/// Reads a case file.
///
/// # Errors
/// Names the file and line that cannot be read, and why.
pub fn read(path: &Path) -> Result<CaseFile, AuthoringError> {
    let text = std::fs::read_to_string(path).map_err(|e| AuthoringError::io(path, e))?;
    let mut cases = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let error = |error: String| AuthoringError::Case {
            path: path.display().to_string(),
            line: i + 1,
            error,
        };
        cases.push(parse_line(i + 1, line).map_err(error)?);
    }
    Ok(CaseFile {
        path: path.to_path_buf(),
        cases,
    })
}

fn parse_line(line: usize, text: &str) -> Result<Case, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(mut map) = value else {
        return Err("not a JSON object".into());
    };
    if !map.contains_key("message") && !map.contains_key("event") {
        // A bare bus message, as `record` and `replay` know them.
        return Ok(Case {
            line,
            name: None,
            input: Input::Message(Arc::from(text.trim())),
            hook: HookSpec::default(),
            expect: None,
        });
    }
    if let Some(key) = map.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!(
            "unknown key {key:?} (a case has {})",
            KEYS.join(", ")
        ));
    }
    let input = match (map.remove("message"), map.remove("event")) {
        (Some(m), None) => Input::Message(Arc::from(m.to_string())),
        (None, Some(e)) => Input::Event(e),
        _ => return Err("a case has a message or an event, not both".into()),
    };
    let hook = match map.remove("hook") {
        Some(h) => serde_json::from_value(h).map_err(|e| format!("hook: {e}"))?,
        None => HookSpec::default(),
    };
    let expect = match map.remove("expect") {
        None => None,
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .map(Outcome::parse)
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => return Err("expect is a list, one outcome per event the hook gets".into()),
    };
    let name = match map.remove("name") {
        None => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => return Err("name is a string".into()),
    };
    Ok(Case {
        line,
        name,
        input,
        hook,
        expect,
    })
}

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

impl CaseResult {
    /// No expectation, or every outcome as expected.
    pub fn passed(&self) -> bool {
        self.case.expect.as_ref().is_none_or(|e| {
            e.len() == self.actual.len() && e.iter().zip(&self.actual).all(|(e, a)| *e == a.outcome)
        })
    }

    /// What differs, for people: one line per event, and a diff of replaced JSON.
    pub fn describe(&self) -> String {
        let Some(expected) = &self.case.expect else {
            return String::new();
        };
        let mut out = String::new();
        for i in 0..expected.len().max(self.actual.len()) {
            let (e, a) = (expected.get(i), self.actual.get(i));
            if let (Some(e), Some(a)) = (e, a)
                && *e == a.outcome
            {
                continue;
            }
            let id = a.map_or("no event", |a| a.event_id.as_str());
            let shown = |o: Option<&Outcome>| o.map_or_else(|| "nothing".into(), Outcome::short);
            out.push_str(&format!(
                "  event {} ({id}): expected {}, got {}\n",
                i + 1,
                shown(e),
                shown(a.map(|a| &a.outcome))
            ));
            if let (Some(Outcome::Replaced(e)), Some(Outcome::Replaced(a))) =
                (e, a.map(|a| &a.outcome))
            {
                out.push_str(&json_diff(e, a));
            }
        }
        out
    }
}

/// A line diff of two JSON values, pretty-printed: `-` expected, `+` actual.
fn json_diff(expected: &Value, actual: &Value) -> String {
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default() + "\n";
    let (e, a) = (pretty(expected), pretty(actual));
    let diff = similar::TextDiff::from_lines(&e, &a);
    let mut out = String::new();
    for group in diff.grouped_ops(2) {
        out.push_str("    ...\n");
        for op in group {
            for change in diff.iter_changes(&op) {
                let sign = match change.tag() {
                    similar::ChangeTag::Delete => '-',
                    similar::ChangeTag::Insert => '+',
                    similar::ChangeTag::Equal => ' ',
                };
                out.push_str(&format!("    {sign} {}", change.value()));
            }
        }
    }
    out
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
    });
    let registry = Registry::default();
    registry.replace_all(hooks);
    let snapshot = registry.load();
    let mut router = Router::new(Processor::new(Mappings::new(u64::MAX, false), filter));
    let unplugged = PluginSet::default();
    let mut results = Vec::with_capacity(file.cases.len());
    for case in &file.cases {
        // A fixed time per line: events, timestamps and what plugins make of them are the
        // same at every run.
        let now = CLOCK + case.line as u64;
        router.now = Some(now);
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
                let event = Arc::new(processed_event(v));
                let ts = now;
                matcher::matching(&snapshot, &event.id, event.external_meeting_id.as_deref())
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
/// them (`data.id`, `data.attributes.meeting`).
fn processed_event(v: &Value) -> Event {
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
    }
}

/// The file with every line's expectation set to what came out (`--update`): bare bus
/// messages become cases. Written to a temporary file, then renamed over the old one.
///
/// # Errors
/// When the file cannot be written.
pub fn update(path: &Path, results: &[CaseResult]) -> Result<(), AuthoringError> {
    let mut text = String::new();
    for r in results {
        let mut line = Map::new();
        if let Some(name) = &r.case.name {
            line.insert("name".into(), name.clone().into());
        }
        if r.case.hook != HookSpec::default() {
            line.insert(
                "hook".into(),
                serde_json::to_value(&r.case.hook).unwrap_or_default(),
            );
        }
        match &r.case.input {
            Input::Message(m) => line.insert(
                "message".into(),
                serde_json::from_str(m).unwrap_or_else(|_| Value::String(m.to_string())),
            ),
            Input::Event(e) => line.insert("event".into(), e.clone()),
        };
        let expect = r.actual.iter().map(|a| a.outcome.to_json()).collect();
        line.insert("expect".into(), Value::Array(expect));
        text.push_str(&Value::Object(line).to_string());
        text.push('\n');
    }
    let tmp = path.with_extension("jsonl.tmp");
    std::fs::write(&tmp, text).map_err(|e| AuthoringError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| AuthoringError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Case, String> {
        parse_line(1, text)
    }

    #[test]
    fn outcomes_and_hooks_parse_and_bad_lines_say_why() {
        let case = parse(r#"{"name":"n","message":{"a":1},"hook":{"meetingID":"m","getRaw":true},"expect":["kept","dropped",{"replaced":{"x":1}}]}"#)
            .expect("case");
        assert_eq!(case.hook.meeting_id.as_deref(), Some("m"));
        assert!(case.hook.get_raw);
        assert_eq!(
            case.expect,
            Some(vec![
                Outcome::Kept,
                Outcome::Dropped,
                Outcome::Replaced(serde_json::json!({"x": 1}))
            ])
        );
        let bare = parse(r#"{"envelope":{},"core":{}}"#).expect("bare");
        assert!(bare.expect.is_none());
        for (bad, why) in [
            ("{oops", "not JSON"),
            ("[1]", "not a JSON object"),
            (
                r#"{"message":{},"expected":[]}"#,
                "unknown key \"expected\"",
            ),
            (
                r#"{"message":{},"expect":["sent"]}"#,
                "\"kept\", \"dropped\"",
            ),
            (r#"{"message":{},"hook":{"meeting":"m"}}"#, "hook:"),
            (r#"{"message":{},"event":{}}"#, "not both"),
        ] {
            let err = parse(bad).expect_err(bad);
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn a_failure_names_the_event_and_diffs_the_json() {
        let case = parse(r#"{"message":{},"expect":[{"replaced":{"a":1,"b":2}},"dropped"]}"#)
            .expect("case");
        let result = CaseResult {
            case,
            actual: vec![Actual {
                event_id: "user-joined".into(),
                outcome: Outcome::Replaced(serde_json::json!({"b": 2, "a": 3})),
            }],
        };
        assert!(!result.passed());
        let text = result.describe();
        assert!(
            text.contains("event 1 (user-joined): expected replaced, got replaced"),
            "{text}"
        );
        assert!(
            text.contains("-   \"a\": 1") && text.contains("+   \"a\": 3"),
            "{text}"
        );
        assert!(
            text.contains("event 2 (no event): expected dropped, got nothing"),
            "{text}"
        );
        // JSON objects compare without regard to key order.
        let same = CaseResult {
            case: parse(r#"{"message":{},"expect":[{"replaced":{"a":1,"b":2}}]}"#).expect("case"),
            actual: vec![Actual {
                event_id: "x".into(),
                outcome: Outcome::Replaced(serde_json::json!({"b": 2, "a": 1})),
            }],
        };
        assert!(same.passed());
    }
}
