//! Golden test cases for plugins (`hookrelay plugin test`), without Redis. A case file holds
//! one JSON object a line: a bus message (or a processed event), the hook it goes to, and
//! what must come out for that hook: each event the message makes for it `"kept"`,
//! `"dropped"` or `{"replaced": JSON}` (compared as JSON). Lines run in order through one
//! mapper, so earlier lines set up the meeting for later ones; a line that is only a bus
//! message (as `record` writes) sets up without checking, and `--update` turns it into a case.

mod report;
mod run;

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::AuthoringError;

pub use report::update;
pub use run::{Actual, CaseResult, run};

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
    /// With an event: what plugins are told of its meeting (a message's comes from the
    /// `meeting-created` of an earlier line).
    pub meeting: Option<Value>,
    /// `None`: set-up only, nothing checked.
    pub expect: Option<Vec<Outcome>>,
}

/// A parsed case file.
#[derive(Clone, Debug)]
pub struct CaseFile {
    pub path: PathBuf,
    pub cases: Vec<Case>,
}

const KEYS: [&str; 6] = ["name", "message", "event", "meeting", "hook", "expect"];

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
            meeting: None,
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
    let meeting = map.remove("meeting");
    if meeting.is_some() && matches!(input, Input::Message(_)) {
        return Err("meeting goes with an event; a message's meeting comes from the meeting-created of an earlier line".into());
    }
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
        meeting,
        expect,
    })
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
}
